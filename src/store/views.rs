//! Agent views served from memory while the SQLite database has not changed (the authenticated hot path).
//!
//! Exactness comes from SQLite itself, not from a list of the writes that ought to invalidate: in WAL mode every
//! read transaction starts from the WAL-index header in the `-shm` file, and every commit, by this process or any
//! other on the host (the `sqlite3` CLI, `agentd mcp`), rewrites that header: `mxFrame`, the frame checksums, the
//! change counter, and the salts when the log restarts. A view is kept with the header seen before its statement
//! ran, and only when the header is unchanged after the statement; it is served only while the header is still the
//! same. Any commit in between, even one that touched none of the view's rows, drops it. A reissued token, a
//! deactivation, a changed owner or cap, a settled transfer: each is a commit, so the next request reads again.
//!
//! Layout, from SQLite's `wal.c` (the WAL-index header, twice, 48 bytes each, at offset 0 of the `-shm` file): a
//! writer writes the second copy, then the first; a reader that sees two different copies sees a commit in progress
//! and takes nothing from memory. The version field (`3007000`) and the init flag are checked: any other layout turns
//! the cache off, never on.
//!
//! A read connection is held open for the store's life, so SQLite never deletes and recreates the `-shm` file
//! underneath (it does so only when the last connection of every process closes); the file's inode is checked on
//! each read all the same.

use std::collections::HashMap;
use std::fs::File;
use std::os::unix::fs::{FileExt, MetadataExt};
use std::path::PathBuf;
use std::sync::{Mutex, RwLock};

use uuid::Uuid;

use crate::domain::agent::Agent;

/// `WALINDEX_MAX_VERSION`: the WAL-index layout this module knows.
const WAL_INDEX_VERSION: u32 = 3_007_000;
/// One copy of the WAL-index header.
const HEADER_LEN: usize = 48;
/// Views kept at most; past it the map starts over (a cache, not a store).
const MAX_VIEWS: usize = 4096;

/// The WAL-index header as read: the identity of the database's committed state.
pub type CommitMark = [u8; HEADER_LEN];

/// The `-shm` file of a SQLite database in WAL mode, read for its header.
struct ShmFile {
    path: PathBuf,
    open: RwLock<Option<(File, u64)>>,
}

impl ShmFile {
    /// The current header, or `None` while a commit is writing it or when the file is not what this module knows.
    fn mark(&self) -> Option<CommitMark> {
        let inode = std::fs::metadata(&self.path).ok()?.ino();
        {
            let open = self.open.read().unwrap_or_else(|p| p.into_inner());
            if let Some((file, ino)) = open.as_ref()
                && *ino == inode
            {
                return header(file);
            }
        }
        let file = File::open(&self.path).ok()?;
        let ino = file.metadata().ok()?.ino();
        let mark = header(&file);
        *self.open.write().unwrap_or_else(|p| p.into_inner()) = Some((file, ino));
        mark
    }
}

/// Both copies of the header, when they agree and carry the known version with the init flag set.
fn header(file: &File) -> Option<CommitMark> {
    let mut both = [0u8; 2 * HEADER_LEN];
    file.read_exact_at(&mut both, 0).ok()?;
    let (first, second) = both.split_at(HEADER_LEN);
    let version = u32::from_ne_bytes(first[0..4].try_into().ok()?);
    let is_init = first[12];
    if first != second || version != WAL_INDEX_VERSION || is_init != 1 {
        return None;
    }
    first.try_into().ok()
}

/// A view as `get_agent_for_token` answers it.
pub type View = (Agent, Option<Uuid>);

struct Kept {
    mark: CommitMark,
    view: View,
}

/// Views by (agent, token hash), each valid while the database's commit mark is the one it was read under.
pub struct ViewCache {
    shm: ShmFile,
    views: Mutex<HashMap<(Uuid, String), Kept>>,
    /// Keeps the database open in this process (see the module comment); never used for a statement.
    _pin: Mutex<sqlx::SqliteConnection>,
}

impl ViewCache {
    /// For the database at `db_path` (in WAL mode), holding `pin` open.
    pub fn new(db_path: &std::path::Path, pin: sqlx::SqliteConnection) -> Self {
        let mut shm = db_path.as_os_str().to_owned();
        shm.push("-shm");
        ViewCache {
            shm: ShmFile {
                path: PathBuf::from(shm),
                open: RwLock::new(None),
            },
            views: Mutex::new(HashMap::new()),
            _pin: Mutex::new(pin),
        }
    }

    /// The view, when one was read under the database's current commit mark; else that mark, to read it under.
    pub fn get(&self, agent_id: Uuid, token_hash: &str) -> Result<View, Option<CommitMark>> {
        let mark = self.shm.mark().ok_or(None)?;
        let views = self.views.lock().unwrap_or_else(|p| p.into_inner());
        match views.get(&(agent_id, token_hash.to_string())) {
            Some(kept) if kept.mark == mark => Ok(kept.view.clone()),
            _ => Err(Some(mark)),
        }
    }

    /// Keeps a view read under `before`, if nothing committed since: a later commit may or may not be in it.
    pub fn put(&self, before: CommitMark, agent_id: Uuid, token_hash: &str, view: &View) {
        if self.shm.mark() != Some(before) {
            return;
        }
        let mut views = self.views.lock().unwrap_or_else(|p| p.into_inner());
        if views.len() >= MAX_VIEWS {
            views.retain(|_, kept| kept.mark == before);
            if views.len() >= MAX_VIEWS {
                views.clear();
            }
        }
        views.insert(
            (agent_id, token_hash.to_string()),
            Kept {
                mark: before,
                view: view.clone(),
            },
        );
    }
}

#[cfg(test)]
mod tests {
    use std::str::FromStr;

    use sqlx::sqlite::{SqliteConnectOptions, SqliteJournalMode};
    use sqlx::{ConnectOptions, Connection, Executor};

    use super::*;

    async fn open(path: &std::path::Path, read_only: bool) -> sqlx::SqliteConnection {
        let url = format!("sqlite://{}", path.display());
        let options = SqliteConnectOptions::from_str(&url).unwrap();
        let options = if read_only {
            options.read_only(true)
        } else {
            options.create_if_missing(true).journal_mode(SqliteJournalMode::Wal)
        };
        options.connect().await.unwrap()
    }

    /// A WAL database with one table, a writer connection to it and a cache over it.
    async fn database() -> (tempfile::TempDir, std::path::PathBuf, sqlx::SqliteConnection, ViewCache) {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("views.db");
        let mut writer = open(&path, false).await;
        writer.execute("CREATE TABLE t (v INTEGER)").await.unwrap();
        let cache = ViewCache::new(&path, open(&path, true).await);
        (dir, path, writer, cache)
    }

    #[tokio::test]
    async fn the_mark_moves_with_every_commit_and_only_then() {
        let (_dir, path, mut writer, cache) = database().await;

        let first = cache.shm.mark().expect("a WAL database has a header");
        let mut reader = open(&path, true).await;
        reader.execute("SELECT count(*) FROM t").await.unwrap();
        assert_eq!(cache.shm.mark(), Some(first), "a read commits nothing");

        writer.execute("INSERT INTO t VALUES (1)").await.unwrap();
        let second = cache.shm.mark().expect("header");
        assert_ne!(second, first, "an autocommit write moves the mark");

        let mut tx = writer.begin().await.unwrap();
        tx.execute("UPDATE t SET v = 2").await.unwrap();
        assert_eq!(cache.shm.mark(), Some(second), "nothing is visible before the commit");
        tx.commit().await.unwrap();
        assert_ne!(cache.shm.mark(), Some(second), "the commit moves the mark");

        let mut tx = writer.begin().await.unwrap();
        tx.execute("UPDATE t SET v = 3").await.unwrap();
        let before = cache.shm.mark();
        tx.rollback().await.unwrap();
        assert_eq!(cache.shm.mark(), before, "a rollback leaves it");
    }

    #[tokio::test]
    async fn a_view_is_served_until_the_next_commit_and_not_kept_across_one() {
        let (_dir, _path, mut writer, cache) = database().await;
        let agent = Agent {
            id: Uuid::new_v4(),
            name: "a".into(),
            description: None,
            chains: vec!["base".into()],
            capabilities: Vec::new(),
            spending_cap_wei: alloy::primitives::U256::ZERO,
            owner_addresses: Default::default(),
            wallet_addresses: Default::default(),
            spent_wei: Default::default(),
            is_active: true,
            created_at: chrono::Utc::now(),
            updated_at: chrono::Utc::now(),
        };
        let view: View = (agent.clone(), Some(agent.id));

        let before = cache.shm.mark().unwrap();
        cache.put(before, agent.id, "hash", &view);
        assert_eq!(cache.get(agent.id, "hash").ok(), Some(view.clone()));
        assert_eq!(cache.get(agent.id, "other").ok(), None, "per token hash");

        writer.execute("INSERT INTO t VALUES (1)").await.unwrap();
        assert_eq!(cache.get(agent.id, "hash").ok(), None, "a commit drops it");

        // Read under one mark, committed to before it is kept: not kept.
        let before = cache.shm.mark().unwrap();
        writer.execute("INSERT INTO t VALUES (2)").await.unwrap();
        cache.put(before, agent.id, "hash", &view);
        assert_eq!(cache.get(agent.id, "hash").ok(), None);
    }
}
