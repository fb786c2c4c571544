//! The PostgreSQL backend: a connection pool; row locks where read-then-write must not interleave; lease rows
//! (named locks that pin no connection) and `LISTEN/NOTIFY` so that several instances can share one database.

mod lease;
mod listener;

use std::time::Duration;

use futures::stream::BoxStream;
use sqlx::postgres::{PgConnectOptions, PgPoolOptions};
use sqlx::{Connection, PgConnection, PgPool, Postgres};
use uuid::Uuid;

use super::sql::{Backend, SqlStore, WriteTx};
use super::{EventFeed, SendGuard, StoreResult, connections};

/// PostgreSQL-backed store.
pub type PgStore = SqlStore<Postgres>;

/// The pool's connections held for good: one listens for events, one for the webhook outbox.
const LISTENING: u32 = 2;
/// The first and the longest pause between attempts to connect at start while the server refuses.
const FIRST_PAUSE: Duration = Duration::from_millis(250);
const LONGEST_PAUSE: Duration = Duration::from_secs(5);

impl SqlStore<Postgres> {
    /// A pool of at most `max_connections` (`DATABASE_MAX_CONNECTIONS`), opened as they are needed, so that an
    /// instance holds what its work asks for; it returns once the pool holds one connection. While the server
    /// refuses new ones at its limit, the start waits for one (saying so in the log) rather than failing.
    pub async fn connect(url: &str, max_connections: u32) -> StoreResult<Self> {
        let options: PgConnectOptions = url.parse()?;
        let pool = PgPoolOptions::new()
            .max_connections(max_connections)
            .acquire_timeout(Duration::from_secs(10))
            .connect_lazy_with(options.clone());
        first_connection(&pool, &options).await?;
        Ok(SqlStore::with_pool(pool))
    }
}

/// Waits until `pool` holds a connection. An attempt of its own comes first: the pool retries a server's refusal
/// for its whole wait without saying so, then answers only that it timed out. Any other failure (a wrong password,
/// no such database, a server down past the pool's wait) refuses the start as before, with the attempt's cause.
async fn first_connection(pool: &PgPool, options: &PgConnectOptions) -> Result<(), sqlx::Error> {
    let mut pause = FIRST_PAUSE;
    loop {
        let failed = match PgConnection::connect_with(options).await {
            Ok(conn) => {
                let _ = conn.close().await;
                None
            }
            Err(e) if connections::is_refusal(&e) => {
                connections::ran_out(format_args!(
                    "PostgreSQL refused a connection at start ({e}); waiting for one"
                ));
                tokio::time::sleep(pause).await;
                pause = (pause * 2).min(LONGEST_PAUSE);
                continue;
            }
            Err(e) => Some(e),
        };
        match pool.acquire().await {
            Ok(mut conn) => {
                // Back in the pool before the migrations ask for one, so that they need no second connection.
                conn.return_to_pool().await;
                return Ok(());
            }
            // Another client took the connection that the attempt gave back, and the server refused the pool's.
            Err(sqlx::Error::PoolTimedOut) if failed.is_none() => {
                connections::ran_out("no connection within the pool's wait at start; trying again");
            }
            Err(e) => return Err(failed.unwrap_or(e)),
        }
    }
}

impl Backend for Postgres {
    const ROW_LOCK: &'static str = " FOR UPDATE";
    const SKIP_LOCKED: &'static str = " FOR UPDATE SKIP LOCKED";
    const TEXT_AGG: &'static str = "string_agg";
    /// A connection is a socket registered with the runtime that opened it: rounds stay on the app's runtime.
    const ROUNDS_ON_OWN_THREAD: bool = false;

    /// Rounds of different agents commit side by side, on half the connections the listening ones leave at most
    /// (7 of the default 16): the rest serve requests, the watchers and the leases' renewals meanwhile.
    fn round_leaders(pool: &PgPool) -> usize {
        (pool.options().get_max_connections().saturating_sub(LISTENING) / 2).max(1) as usize
    }

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

    /// `synchronous_commit = off` for this transaction alone: its commit record is flushed with the next synchronous
    /// commit's (the log is flushed in order), or by the WAL writer within a few hundred milliseconds.
    async fn begin_write_relaxed(store: &PgStore) -> Result<WriteTx<Postgres>, sqlx::Error> {
        let mut tx = store.pool.begin().await?;
        sqlx::query("SET LOCAL synchronous_commit = off")
            .execute(&mut *tx)
            .await?;
        Ok(WriteTx::new(tx, None))
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
