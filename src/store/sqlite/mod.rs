//! The embedded SQLite backend: WAL, busy timeout, foreign keys, one writer at a time (`BEGIN IMMEDIATE`). One
//! instance serves a file, so its locks and its event feed are in-process.

mod agents;
mod conversations;
mod events;
mod tokens;
mod transfers;

use std::path::Path;
use std::str::FromStr;
use std::time::Duration;

use async_trait::async_trait;
use sqlx::sqlite::{SqliteConnectOptions, SqliteJournalMode, SqlitePoolOptions, SqliteSynchronous};
use sqlx::{Sqlite, SqlitePool, Transaction};

use super::feed::LocalFeed;
use super::locks::LocalLocks;
use super::{HealthStore, SendGuard, StoreError, StoreResult};

/// SQLite-backed store.
#[derive(Debug, Clone)]
pub struct SqliteStore {
    pool: SqlitePool,
    /// In-process locks by name: one SQLite file is served by one instance.
    locks: LocalLocks,
    /// Committed events, announced to this instance's feeds.
    feed: LocalFeed,
}

impl SqliteStore {
    /// Opens (creating the file and its directory if needed) and migrates the database.
    pub async fn connect(url: &str, path: &Path) -> StoreResult<Self> {
        if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
            std::fs::create_dir_all(dir)
                .map_err(|e| StoreError::Corrupt(format!("cannot create {}: {e}", dir.display())))?;
        }
        let options = SqliteConnectOptions::from_str(url)?
            .create_if_missing(true)
            .journal_mode(SqliteJournalMode::Wal)
            .synchronous(SqliteSynchronous::Normal)
            .busy_timeout(Duration::from_secs(10))
            .foreign_keys(true);
        let pool = SqlitePoolOptions::new()
            .max_connections(8)
            .connect_with(options)
            .await?;
        Ok(SqliteStore {
            pool,
            locks: LocalLocks::default(),
            feed: LocalFeed::default(),
        })
    }

    pub async fn migrate(&self) -> StoreResult<()> {
        sqlx::migrate!("./migrations/sqlite").run(&self.pool).await?;
        Ok(())
    }

    async fn send_lock(&self, name: &str) -> StoreResult<Box<dyn SendGuard>> {
        Ok(Box::new(self.locks.lock(name).await))
    }

    fn try_lock(&self, name: &str) -> Option<Box<dyn SendGuard>> {
        self.locks.try_lock(name).map(|g| Box::new(g) as Box<dyn SendGuard>)
    }

    /// A transaction that holds SQLite's single write lock from its first statement, so read-then-write
    /// sequences (caps, nonces, single-use challenges) cannot interleave and no row lock is needed.
    async fn begin_write(&self) -> Result<Transaction<'static, Sqlite>, sqlx::Error> {
        self.pool.begin_with("BEGIN IMMEDIATE").await
    }
}

#[async_trait]
impl HealthStore for SqliteStore {
    async fn ping(&self) -> StoreResult<()> {
        sqlx::query("SELECT 1").execute(&self.pool).await?;
        Ok(())
    }
}
