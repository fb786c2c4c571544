//! The `database` section: where data lives (the URL, its kind by scheme, the data directory, the pool's size).

use std::path::{Path, PathBuf};

use secrecy::SecretString;

use super::vars::Vars;
use super::{ConfigError, invalid};

/// Where the database lives, by URL scheme.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DatabaseKind {
    Sqlite(PathBuf),
    Postgres,
}

/// Where data lives.
#[derive(Debug)]
pub struct DatabaseConfig {
    pub url: SecretString,
    pub kind: DatabaseKind,
    /// The SQLite file's directory by default; holds the development key file.
    pub data_dir: PathBuf,
    /// `DATABASE_MAX_CONNECTIONS` (PostgreSQL): the most connections this instance opens, its two listening ones
    /// included. Instances times this, plus other clients, must fit in the server's `max_connections`.
    pub max_connections: u32,
}

/// `DATABASE_MAX_CONNECTIONS` unset.
const DEFAULT_MAX_CONNECTIONS: u32 = 16;
/// Two connections listen (events, webhook wake-ups), and a write may wait for a second connection while it holds
/// one (a lease renewed beside a reserving transaction).
const FEWEST_CONNECTIONS: u32 = 4;

impl DatabaseConfig {
    pub(super) fn read(vars: &Vars) -> Result<Self, ConfigError> {
        let url = vars
            .get("DATABASE_URL")
            .unwrap_or_else(|| "sqlite://./data/agentd.db".into());
        let kind = parse_database_url(&url)?;
        let data_dir = match (&kind, vars.get("DATA_DIR")) {
            (_, Some(dir)) => PathBuf::from(dir),
            (DatabaseKind::Sqlite(path), None) => path
                .parent()
                .filter(|p| !p.as_os_str().is_empty())
                .unwrap_or(Path::new("."))
                .to_path_buf(),
            (DatabaseKind::Postgres, None) => PathBuf::from("./data"),
        };
        let max_connections = vars.number("DATABASE_MAX_CONNECTIONS", DEFAULT_MAX_CONNECTIONS)?;
        if max_connections < FEWEST_CONNECTIONS {
            return Err(invalid(
                "DATABASE_MAX_CONNECTIONS",
                format!(
                    "must be at least {FEWEST_CONNECTIONS} (two connections listen for other instances, the rest serve)"
                ),
            ));
        }
        Ok(DatabaseConfig {
            url: SecretString::from(url),
            kind,
            data_dir,
            max_connections,
        })
    }
}

fn parse_database_url(url: &str) -> Result<DatabaseKind, ConfigError> {
    if let Some(rest) = url.strip_prefix("sqlite://").or_else(|| url.strip_prefix("sqlite:")) {
        let path = rest.split('?').next().unwrap_or_default();
        if path.is_empty() || path.starts_with(":memory:") {
            return Err(invalid(
                "DATABASE_URL",
                "sqlite needs a file path, e.g. sqlite://./data/agentd.db",
            ));
        }
        Ok(DatabaseKind::Sqlite(PathBuf::from(path)))
    } else if url.starts_with("postgres://") || url.starts_with("postgresql://") {
        Ok(DatabaseKind::Postgres)
    } else {
        Err(invalid("DATABASE_URL", "must start with sqlite:// or postgres://"))
    }
}
