//! The embedded SQLite backend: WAL, busy timeout, foreign keys, one writer at a time (`BEGIN IMMEDIATE`).

use std::path::Path;
use std::str::FromStr;
use std::time::Duration;

use sqlx::sqlite::{SqliteConnectOptions, SqliteJournalMode, SqlitePoolOptions, SqliteSynchronous};
use sqlx::{Sqlite, SqlitePool, Transaction};

use super::locks::LocalLocks;
use super::sql::impl_store;

/// SQLite-backed store.
#[derive(Debug, Clone)]
pub struct SqliteStore {
    pool: SqlitePool,
    /// In-process locks by name: one SQLite file is served by one instance.
    locks: LocalLocks,
}

impl SqliteStore {
    /// Opens (creating the file and its directory if needed) and migrates the database.
    pub async fn connect(url: &str, path: &Path) -> Result<Self, StoreError> {
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
        })
    }

    pub async fn migrate(&self) -> Result<(), StoreError> {
        sqlx::migrate!("./migrations/sqlite").run(&self.pool).await?;
        Ok(())
    }

    /// A transaction that holds SQLite's single write lock from its first statement, so read-then-write
    /// sequences (caps, nonces, single-use challenges) cannot interleave.
    async fn send_lock(&self, name: &str) -> Result<Box<dyn super::SendGuard>, StoreError> {
        Ok(Box::new(self.locks.lock(name).await))
    }

    async fn try_lock(&self, name: &str) -> Result<Option<Box<dyn super::SendGuard>>, StoreError> {
        Ok(self
            .locks
            .try_lock(name)
            .map(|g| Box::new(g) as Box<dyn super::SendGuard>))
    }

    async fn begin_write(&self) -> Result<Transaction<'static, Sqlite>, sqlx::Error> {
        self.pool.begin_with("BEGIN IMMEDIATE").await
    }
}

/// SQLite has one writer at a time and `begin_write` already holds it: no row lock is needed.
async fn lock_agent(_conn: &mut sqlx::SqliteConnection, _id: uuid::Uuid) -> Result<(), sqlx::Error> {
    Ok(())
}

/// Events reach subscribers of this instance directly; there is no other instance to tell.
async fn notify_event(_conn: &mut sqlx::SqliteConnection, _id: i64) -> Result<(), sqlx::Error> {
    Ok(())
}

impl_store!(SqliteStore, Sqlite);
