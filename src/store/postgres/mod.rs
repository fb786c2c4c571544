//! The PostgreSQL backend: a connection pool; row locks where read-then-write must not interleave; advisory locks
//! and `LISTEN/NOTIFY` so that several instances can share one database.

mod agents;
mod conversations;
mod events;
mod listener;
mod tokens;
mod transfers;

use std::time::Duration;

use async_trait::async_trait;
use sqlx::postgres::PgPoolOptions;
use sqlx::{PgPool, Postgres, Transaction};

use super::feed::LocalFeed;
use super::locks::LocalLocks;
use super::{HealthStore, SendGuard, StoreResult};

/// PostgreSQL-backed store.
#[derive(Debug, Clone)]
pub struct PgStore {
    pool: PgPool,
    locks: LocalLocks,
    /// Events this instance committed; other instances' arrive by `LISTEN` (see `listener`).
    feed: LocalFeed,
}

impl PgStore {
    pub async fn connect(url: &str) -> StoreResult<Self> {
        let pool = PgPoolOptions::new()
            .max_connections(16)
            .acquire_timeout(Duration::from_secs(10))
            .connect(url)
            .await?;
        Ok(PgStore {
            pool,
            locks: LocalLocks::default(),
            feed: LocalFeed::default(),
        })
    }

    pub async fn migrate(&self) -> StoreResult<()> {
        sqlx::migrate!("./migrations/postgres").run(&self.pool).await?;
        Ok(())
    }

    async fn send_lock(&self, name: &str) -> StoreResult<Box<dyn SendGuard>> {
        // First the instance's own lock, so that waiting tasks do not each hold a pooled connection.
        let local = self.locks.lock(name).await;
        let mut conn = self.pool.acquire().await?;
        let key = lock_key(name);
        sqlx::query("SELECT pg_advisory_lock($1)")
            .bind(key)
            .execute(&mut *conn)
            .await?;
        Ok(Box::new(AdvisoryLock {
            conn: Some(conn),
            key,
            _local: local,
        }))
    }

    async fn try_lock(&self, name: &str) -> StoreResult<Option<Box<dyn SendGuard>>> {
        let Some(local) = self.locks.try_lock(name) else {
            return Ok(None);
        };
        let mut conn = self.pool.acquire().await?;
        let key = lock_key(name);
        let (locked,): (bool,) = sqlx::query_as("SELECT pg_try_advisory_lock($1)")
            .bind(key)
            .fetch_one(&mut *conn)
            .await?;
        Ok(locked.then(|| {
            Box::new(AdvisoryLock {
                conn: Some(conn),
                key,
                _local: local,
            }) as Box<dyn SendGuard>
        }))
    }

    /// Writes that must not interleave lock the rows they read (`FOR UPDATE`) inside this transaction.
    async fn begin_write(&self) -> Result<Transaction<'static, Postgres>, sqlx::Error> {
        self.pool.begin().await
    }
}

#[async_trait]
impl HealthStore for PgStore {
    async fn ping(&self) -> StoreResult<()> {
        sqlx::query("SELECT 1").execute(&self.pool).await?;
        Ok(())
    }
}

/// Serialises writers of one agent (updates, spending, nonces) across connections and instances.
async fn lock_agent(conn: &mut sqlx::PgConnection, id: uuid::Uuid) -> Result<(), sqlx::Error> {
    sqlx::query("SELECT 1 FROM agents WHERE id = $1 FOR UPDATE")
        .bind(id)
        .execute(conn)
        .await?;
    Ok(())
}

/// Wakes the event listeners of every instance (delivered when the transaction commits).
async fn notify_event(conn: &mut sqlx::PgConnection, id: i64) -> Result<(), sqlx::Error> {
    sqlx::query("SELECT pg_notify($1, $2)")
        .bind(EVENTS_CHANNEL)
        .bind(id.to_string())
        .execute(conn)
        .await?;
    Ok(())
}

/// The `LISTEN/NOTIFY` channel that carries new event ids.
const EVENTS_CHANNEL: &str = "agentd_events";

fn lock_key(name: &str) -> i64 {
    use sha2::{Digest, Sha256};
    let digest = Sha256::digest(name.as_bytes());
    i64::from_be_bytes(digest[..8].try_into().expect("8 bytes"))
}

/// A session-level advisory lock, released (on the same connection) when dropped.
struct AdvisoryLock {
    conn: Option<sqlx::pool::PoolConnection<Postgres>>,
    key: i64,
    _local: tokio::sync::OwnedMutexGuard<()>,
}

impl SendGuard for AdvisoryLock {}

impl Drop for AdvisoryLock {
    fn drop(&mut self) {
        let Some(mut conn) = self.conn.take() else { return };
        let key = self.key;
        tokio::spawn(async move {
            let unlocked = sqlx::query("SELECT pg_advisory_unlock($1)")
                .bind(key)
                .execute(&mut *conn)
                .await;
            if unlocked.is_err() {
                // Closing the session releases its locks for certain.
                let _ = conn.detach();
            }
        });
    }
}
