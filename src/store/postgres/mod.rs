//! The PostgreSQL backend: a connection pool; row locks where read-then-write must not interleave; advisory locks
//! and `LISTEN/NOTIFY` so that several instances can share one database.

mod listener;

use std::time::Duration;

use sqlx::postgres::PgPoolOptions;
use sqlx::{PgConnection, PgPool, Postgres, Transaction};
use uuid::Uuid;

use super::sql::{Backend, SqlStore};
use super::{EventFeed, SendGuard, StoreResult};

/// PostgreSQL-backed store.
pub type PgStore = SqlStore<Postgres>;

impl SqlStore<Postgres> {
    pub async fn connect(url: &str) -> StoreResult<Self> {
        let pool = PgPoolOptions::new()
            .max_connections(16)
            .acquire_timeout(Duration::from_secs(10))
            .connect(url)
            .await?;
        Ok(SqlStore::with_pool(pool))
    }
}

impl Backend for Postgres {
    const ROW_LOCK: &'static str = " FOR UPDATE";

    fn rows_affected(done: &sqlx::postgres::PgQueryResult) -> u64 {
        done.rows_affected()
    }

    async fn migrate(pool: &PgPool) -> StoreResult<()> {
        sqlx::migrate!("./migrations/postgres").run(pool).await?;
        Ok(())
    }

    /// Writes that must not interleave lock the rows they read (`FOR UPDATE`) inside this transaction.
    async fn begin_write(pool: &PgPool) -> Result<Transaction<'static, Postgres>, sqlx::Error> {
        pool.begin().await
    }

    async fn lock_agent(conn: &mut PgConnection, id: Uuid) -> Result<(), sqlx::Error> {
        sqlx::query("SELECT 1 FROM agents WHERE id = $1 FOR UPDATE")
            .bind(id)
            .execute(conn)
            .await?;
        Ok(())
    }

    /// Wakes the event listeners of every instance (delivered when the transaction commits).
    async fn notify_event(conn: &mut PgConnection, id: i64) -> Result<(), sqlx::Error> {
        sqlx::query("SELECT pg_notify($1, $2)")
            .bind(EVENTS_CHANNEL)
            .bind(id.to_string())
            .execute(conn)
            .await?;
        Ok(())
    }

    async fn lock(store: &PgStore, name: &str) -> StoreResult<Box<dyn SendGuard>> {
        // First the instance's own lock, so that waiting tasks do not each hold a pooled connection.
        let local = store.locks.lock(name).await;
        let mut conn = store.pool.acquire().await?;
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

    async fn try_lock(store: &PgStore, name: &str) -> StoreResult<Option<Box<dyn SendGuard>>> {
        let Some(local) = store.locks.try_lock(name) else {
            return Ok(None);
        };
        let mut conn = store.pool.acquire().await?;
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

    async fn durable_commits(pool: &PgPool) -> StoreResult<bool> {
        let (setting,): (String,) = sqlx::query_as("SHOW synchronous_commit").fetch_one(pool).await?;
        Ok(setting != "off")
    }

    async fn event_feed(store: &PgStore) -> EventFeed {
        listener::event_feed(store).await
    }
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
