//! The PostgreSQL backend: a connection pool; row locks where read-then-write must not interleave; lease rows
//! (named locks that pin no connection) and `LISTEN/NOTIFY` so that several instances can share one database.

mod lease;
mod listener;

use std::time::Duration;

use futures::stream::BoxStream;
use sqlx::postgres::PgPoolOptions;
use sqlx::{PgConnection, PgPool, Postgres};
use uuid::Uuid;

use super::sql::{Backend, SqlStore, WriteTx};
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
    const SKIP_LOCKED: &'static str = " FOR UPDATE SKIP LOCKED";
    /// Rounds of different agents commit side by side, on half the pool's connections at most.
    const TEXT_AGG: &'static str = "string_agg";
    const ROUND_LEADERS: usize = 8;
    /// A connection is a socket registered with the runtime that opened it: rounds stay on the app's runtime.
    const ROUNDS_ON_OWN_THREAD: bool = false;

    fn rows_affected(done: &sqlx::postgres::PgQueryResult) -> u64 {
        done.rows_affected()
    }

    async fn migrate(pool: &PgPool) -> StoreResult<()> {
        sqlx::migrate!("./migrations/postgres").run(pool).await?;
        Ok(())
    }

    /// Writes that must not interleave lock the rows they read (`FOR UPDATE`) inside this transaction.
    async fn begin_write(store: &PgStore) -> Result<WriteTx<Postgres>, sqlx::Error> {
        Ok(WriteTx::new(store.pool.begin().await?, None))
    }

    /// `FOR NO KEY UPDATE`: writers of one agent wait for each other, but a row that merely references the agent (an
    /// audit entry, an event) is still written meanwhile. `FOR UPDATE` would also stop those references' key-share
    /// checks, and a transaction holding a transfer's row while it appends to the audit log (a broadcast's mark) then
    /// waits in a circle with a settlement that holds the agent and waits for that row: PostgreSQL aborts one.
    async fn lock_agent(conn: &mut PgConnection, id: Uuid) -> Result<(), sqlx::Error> {
        sqlx::query("SELECT 1 FROM agents WHERE id = $1 FOR NO KEY UPDATE")
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

    /// Wakes the delivery worker of every instance, this one included (delivered when the transaction commits;
    /// several in one transaction arrive as one).
    async fn notify_outbox(conn: &mut PgConnection) -> Result<(), sqlx::Error> {
        sqlx::query("SELECT pg_notify($1, '')")
            .bind(OUTBOX_CHANNEL)
            .execute(conn)
            .await?;
        Ok(())
    }

    async fn outbox_listener(store: &PgStore) -> Option<BoxStream<'static, ()>> {
        listener::outbox_listener(store).await
    }

    async fn lock(store: &PgStore, name: &str) -> StoreResult<Box<dyn SendGuard>> {
        lease::lock(store, name).await
    }

    async fn lock_all(store: &PgStore, names: &[String]) -> StoreResult<Box<dyn SendGuard>> {
        lease::lock_all(store, names).await
    }

    async fn try_lock(store: &PgStore, name: &str) -> StoreResult<Option<Box<dyn SendGuard>>> {
        lease::try_lock(store, name).await
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
/// The `LISTEN/NOTIFY` channel that says an outbox row (a webhook event) committed.
const OUTBOX_CHANNEL: &str = "agentd_webhook_outbox";
