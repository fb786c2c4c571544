//! The one SQL implementation of the store traits, generic over the database: `SqlStore<B>` holds a pool of `B`,
//! the in-process named locks and the local event feed; `Backend` names the few things the dialects really do
//! differently (how a write transaction begins, row locks, named locks across instances, announcing events,
//! migrations). The SQL of each aggregate lives once, in this module's files.
//!
//! Each `impl` block states the sqlx bounds its queries need: `&mut B::Connection` as an executor, and for every
//! Rust type it binds or reads, `Encode`/`Decode`/`Type` for `B`. Rust does not imply such bounds from a trait's
//! `where` clause, so they cannot live on `Backend` once; both `Sqlite` and `Postgres` meet all of them.

mod agents;
mod attempts;
mod audit;
mod conversations;
mod delegations;
mod events;
mod facilitator;
mod idempotency;
mod income;
mod income_list;
mod keys;
mod offers;
mod operations;
mod owners;
mod policies;
mod purge;
mod settlements;
mod sponsorship;
mod tokens;
mod transfers;
mod webhooks;

use std::future::Future;
use std::sync::Arc;

use async_trait::async_trait;
use sqlx::{Database, Executor, IntoArguments, Pool, Transaction};
use uuid::Uuid;

use super::feed::LocalFeed;
use super::locks::LocalLocks;
use super::webhooks::OutboxBell;
use super::{EventFeed, HealthStore, PoolStatus, SendGuard, StoreResult, connections};
use crate::domain::clock::{Clock, SystemClock};

/// What differs between the SQL dialects the store runs on. Everything else is the same SQL (`$n` placeholders work
/// on both).
pub trait Backend: Database<Arguments: IntoArguments<Self>> {
    /// What a `SELECT` inside a write transaction appends to lock the rows it read until the commit: nothing where
    /// the transaction already holds the only write lock (SQLite's `BEGIN IMMEDIATE`).
    const ROW_LOCK: &'static str;

    /// What a `SELECT` of work rows appends so that instances take different rows: locked rows are skipped
    /// (PostgreSQL); nothing where the write transaction is the only writer (SQLite).
    const SKIP_LOCKED: &'static str;
    /// The aggregate that joins a column's texts with a separator, `AGG(column, ',')`.
    const TEXT_AGG: &'static str;
    /// Whether rounds run on a thread of their own (`TransferStore::rounds_on_own_thread`).
    const ROUNDS_ON_OWN_THREAD: bool;

    /// How many reservation rounds write at once on `pool` (`TransferStore::round_leaders`).
    fn round_leaders(pool: &Pool<Self>) -> usize;

    /// How many rows a statement changed (each driver has its own result type).
    fn rows_affected(done: &Self::QueryResult) -> u64;

    /// Applies the embedded migrations of this dialect.
    fn migrate(pool: &Pool<Self>) -> impl Future<Output = StoreResult<()>> + Send;

    /// Begins a transaction whose read-then-write sequences (caps, nonces, single-use challenges) cannot interleave
    /// with another writer's, together with `lock_agent`.
    fn begin_write(store: &SqlStore<Self>) -> impl Future<Output = Result<WriteTx<Self>, sqlx::Error>> + Send;

    /// `begin_write` for a write whose commit needs no sync of its own: one that nothing durable depends on until a
    /// later full commit, which syncs it first (a write-ahead log is made durable as a prefix, in commit order), so
    /// a power cut can lose it only together with everything after it. A process crash loses no commit either way.
    /// Used for a payment's hold and its served mark (§23); never for a reservation.
    fn begin_write_relaxed(store: &SqlStore<Self>) -> impl Future<Output = Result<WriteTx<Self>, sqlx::Error>> + Send;

    /// Serialises writers of one agent (updates, spending, nonces) inside a write transaction, where the
    /// transaction alone does not.
    fn lock_agent(conn: &mut Self::Connection, id: Uuid) -> impl Future<Output = Result<(), sqlx::Error>> + Send;

    /// Tells other instances, once the transaction commits, that event `id` was stored.
    fn notify_event(conn: &mut Self::Connection, id: i64) -> impl Future<Output = Result<(), sqlx::Error>> + Send;

    /// Tells every instance's delivery worker, once the transaction commits, that an outbox row was recorded.
    fn notify_outbox(conn: &mut Self::Connection) -> impl Future<Output = Result<(), sqlx::Error>> + Send;

    /// The outbox notifications of every instance sharing the database, where the database can tell (`None`: this
    /// instance's bell is all there is).
    fn outbox_listener(
        store: &SqlStore<Self>,
    ) -> impl Future<Output = Option<futures::stream::BoxStream<'static, ()>>> + Send;

    /// Waits for the named lock (sends of one agent and chain).
    fn lock(store: &SqlStore<Self>, name: &str) -> impl Future<Output = StoreResult<Box<dyn SendGuard>>> + Send;

    /// Waits for every one of the named locks (`names` sorted and without repeats), taken in that order: one guard
    /// for all (a round of sends, group commit).
    fn lock_all(
        store: &SqlStore<Self>,
        names: &[String],
    ) -> impl Future<Output = StoreResult<Box<dyn SendGuard>>> + Send;

    /// The named lock if nobody holds it (one watcher per chain).
    fn try_lock(
        store: &SqlStore<Self>,
        name: &str,
    ) -> impl Future<Output = StoreResult<Option<Box<dyn SendGuard>>>> + Send;

    /// Whether commits on a pooled connection reach stable storage before they return.
    fn durable_commits(pool: &Pool<Self>) -> impl Future<Output = StoreResult<bool>> + Send;

    /// Events stored from now on, by this instance and (where the database can tell) by others.
    fn event_feed(store: &SqlStore<Self>) -> impl Future<Output = EventFeed> + Send;
}

/// A write transaction (`Backend::begin_write`): the connection through `Deref`, `commit` to end it. On SQLite it
/// also holds this process's writer turn until it ends (see `store::speedups::Speedups`).
pub struct WriteTx<B: Database> {
    // Declared first, so dropped first: the rollback is queued before the turn passes on.
    tx: Transaction<'static, B>,
    _turn: Option<tokio::sync::OwnedMutexGuard<()>>,
    /// Rung after the commit when the transaction wrote an outbox row (SQLite; PostgreSQL's `NOTIFY` does it).
    bell: Option<Arc<OutboxBell>>,
}

impl<B: Database> WriteTx<B> {
    pub(in crate::store) fn new(tx: Transaction<'static, B>, turn: Option<tokio::sync::OwnedMutexGuard<()>>) -> Self {
        WriteTx {
            tx,
            _turn: turn,
            bell: None,
        }
    }

    /// Rings `bell` after the commit if an outbox row was written meanwhile (the caller holds the writer turn).
    pub(in crate::store) fn ringing(mut self, bell: Arc<OutboxBell>) -> Self {
        bell.begin();
        self.bell = Some(bell);
        self
    }

    /// Commits, rings the outbox bell when due, then gives the writer turn to the next one.
    pub async fn commit(self) -> Result<(), sqlx::Error> {
        let WriteTx { tx, _turn, bell } = self;
        tx.commit().await?;
        if let Some(bell) = bell {
            bell.committed();
        }
        Ok(())
    }
}

impl<B: Database> std::ops::Deref for WriteTx<B> {
    type Target = B::Connection;

    fn deref(&self) -> &B::Connection {
        &self.tx
    }
}

impl<B: Database> std::ops::DerefMut for WriteTx<B> {
    fn deref_mut(&mut self) -> &mut B::Connection {
        &mut self.tx
    }
}

/// The store over a pool of `B`. Cheap to clone; clones share the pool, the locks and the feed.
pub struct SqlStore<B: Database> {
    pub(in crate::store) pool: Pool<B>,
    /// In-process locks by name, taken before any database-wide one.
    pub(in crate::store) locks: LocalLocks,
    /// Events this instance committed, announced to this instance's feeds.
    pub(in crate::store) feed: LocalFeed,
    /// Rung when this instance commits an outbox row or queues a delivery; the delivery worker waits on it.
    pub(in crate::store) outbox: Arc<OutboxBell>,
    /// SQLite's speed machinery (read connections, the view cache, the writer turn: `store::sqlite`); `None` on
    /// PostgreSQL, which reads and writes through the pool.
    pub(in crate::store) sqlite: Option<std::sync::Arc<crate::store::speedups::Speedups<B::Connection>>>,
    /// SQLite's connections whose commits do not sync (`Backend::begin_write_relaxed`); `None` on PostgreSQL.
    pub(in crate::store) relaxed: Option<Pool<B>>,
    /// The audit chain's key, once `use_audit_key` set it (at start, from the sealed copy in the database).
    pub(in crate::store) audit_key: std::sync::Arc<std::sync::OnceLock<crate::domain::audit::AuditKey>>,
    /// What every time the store writes is read on (the system's clock outside tests).
    pub(in crate::store) clock: Arc<dyn Clock>,
}

impl<B: Database> SqlStore<B> {
    pub(in crate::store) fn with_pool(pool: Pool<B>) -> Self {
        SqlStore {
            pool,
            locks: LocalLocks::default(),
            feed: LocalFeed::default(),
            outbox: Default::default(),
            sqlite: None,
            relaxed: None,
            audit_key: Default::default(),
            clock: Arc::new(SystemClock),
        }
    }

    /// The same store writing its times from `clock` (a test's, which it can move ahead).
    pub fn with_clock(mut self, clock: Arc<dyn Clock>) -> Self {
        self.clock = clock;
        self
    }

    /// The time now, on the store's clock.
    pub(in crate::store) fn now(&self) -> chrono::DateTime<chrono::Utc> {
        self.clock.now()
    }
}

// By hand: a derive would ask `B: Clone` and `B: Debug` of the marker type.
impl<B: Database> Clone for SqlStore<B> {
    fn clone(&self) -> Self {
        SqlStore {
            pool: self.pool.clone(),
            locks: self.locks.clone(),
            feed: self.feed.clone(),
            outbox: self.outbox.clone(),
            sqlite: self.sqlite.clone(),
            relaxed: self.relaxed.clone(),
            audit_key: self.audit_key.clone(),
            clock: self.clock.clone(),
        }
    }
}

impl<B: Database> std::fmt::Debug for SqlStore<B> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SqlStore")
            .field("backend", &B::NAME)
            .finish_non_exhaustive()
    }
}

impl<B: Backend> SqlStore<B> {
    pub async fn migrate(&self) -> StoreResult<()> {
        B::migrate(&self.pool).await
    }
}

#[async_trait]
impl<B> HealthStore for SqlStore<B>
where
    B: Backend,
    for<'c> &'c mut B::Connection: Executor<'c, Database = B>,
{
    async fn ping(&self) -> StoreResult<()> {
        sqlx::query("SELECT 1").execute(&self.pool).await?;
        Ok(())
    }

    fn connections(&self) -> PoolStatus {
        let idle = u32::try_from(self.pool.num_idle()).unwrap_or(u32::MAX);
        connections::status(self.pool.options().get_max_connections(), self.pool.size(), idle)
    }

    async fn durable_commits(&self) -> StoreResult<bool> {
        B::durable_commits(&self.pool).await
    }
}
