//! The embedded SQLite backend: WAL with `synchronous=FULL` (a committed reservation is on disk before its
//! transaction is broadcast; `NORMAL` could lose it to a power cut), busy timeout, foreign keys, one writer at a time (`BEGIN IMMEDIATE`). One
//! instance serves a file, so its locks and its event feed are in-process.

use std::path::Path;
use std::str::FromStr;
use std::time::Duration;

use sqlx::sqlite::{SqliteConnectOptions, SqliteJournalMode, SqliteOperation, SqlitePoolOptions, SqliteSynchronous};
use sqlx::{ConnectOptions, Sqlite, SqliteConnection, SqlitePool};
use uuid::Uuid;

use super::speedups::{ReadConns, Speedups, ViewCache};
use super::sql::{Backend, SqlStore, WriteTx};
use super::webhooks::OutboxBell;
use super::{EventFeed, SendGuard, StoreError, StoreResult};

/// Read-only connections for the authenticated hot path (`reads`), besides the pool's.
const READ_CONNECTIONS: usize = 4;

/// SQLite-backed store.
pub type SqliteStore = SqlStore<Sqlite>;

impl SqlStore<Sqlite> {
    /// Opens (creating the file and its directory if needed) and migrates the database.
    pub async fn connect(url: &str, path: &Path) -> StoreResult<Self> {
        if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
            std::fs::create_dir_all(dir)
                .map_err(|e| StoreError::Corrupt(format!("cannot create {}: {e}", dir.display())))?;
        }
        let options = SqliteConnectOptions::from_str(url)?
            .create_if_missing(true)
            .journal_mode(SqliteJournalMode::Wal)
            .synchronous(SqliteSynchronous::Full)
            .busy_timeout(Duration::from_secs(10))
            .foreign_keys(true);
        // The file is in WAL mode once the pool opened it: readers need no pragma beyond the busy timeout.
        let read_options = SqliteConnectOptions::from_str(url)?
            .read_only(true)
            .busy_timeout(Duration::from_secs(10));
        // The outbox bell learns of an outbox row from the connection that inserts it (SQLite's update hook, called
        // before the commit); the write transaction rings it once committed (`WriteTx::commit`).
        let bell = std::sync::Arc::new(OutboxBell::default());
        let hooked = bell.clone();
        let pool = SqlitePoolOptions::new()
            .max_connections(8)
            .after_connect(move |conn, _| {
                let bell = hooked.clone();
                Box::pin(async move {
                    conn.lock_handle().await?.set_update_hook(move |change| {
                        if change.table == "webhook_events" && matches!(change.operation, SqliteOperation::Insert) {
                            bell.written();
                        }
                    });
                    Ok(())
                })
            })
            // A connection to a local file does not go stale while idle: no ping (a round trip to the connection's
            // worker thread) before each use. sqlx still checks it when it comes back to the pool.
            .test_before_acquire(false)
            .connect_with(options.clone())
            .await?;
        // A second, small pool whose commits do not sync the log (`begin_write_relaxed`); no outbox row is written
        // through it, so it needs no update hook.
        let relaxed = SqlitePoolOptions::new()
            .max_connections(2)
            .test_before_acquire(false)
            .connect_with(options.clone().synchronous(SqliteSynchronous::Normal))
            .await?;
        let mut store = SqlStore::with_pool(pool);
        store.relaxed = Some(relaxed);
        store.outbox = bell;
        store.sqlite = Some(std::sync::Arc::new(Speedups {
            views: ViewCache::new(path.to_path_buf()),
            reads: ReadConns::new(
                READ_CONNECTIONS,
                Box::new(move || {
                    let options = read_options.clone();
                    Box::pin(async move { options.connect().await })
                }),
            ),
            writer: Default::default(),
        }));
        Ok(store)
    }
}

impl Backend for Sqlite {
    const ROW_LOCK: &'static str = "";
    const SKIP_LOCKED: &'static str = "";
    const TEXT_AGG: &'static str = "group_concat";
    /// A connection's statements go to its own thread and back over channels: nothing is bound to a runtime.
    const ROUNDS_ON_OWN_THREAD: bool = true;

    /// One writer at a time: one round.
    fn round_leaders(_pool: &SqlitePool) -> usize {
        1
    }

    fn rows_affected(done: &sqlx::sqlite::SqliteQueryResult) -> u64 {
        done.rows_affected()
    }

    async fn migrate(pool: &SqlitePool) -> StoreResult<()> {
        sqlx::migrate!("./migrations/sqlite").run(pool).await?;
        Ok(())
    }

    /// A transaction that holds SQLite's single write lock from its first statement, so read-then-write
    /// sequences (caps, nonces, single-use challenges) cannot interleave and no row lock is needed.
    /// Takes the process's writer turn first, so that SQLite's lock is free when asked for (another process may still
    /// hold it: then the busy timeout waits).
    async fn begin_write(store: &SqliteStore) -> Result<WriteTx<Sqlite>, sqlx::Error> {
        let turn = match &store.sqlite {
            Some(speedups) => Some(speedups.writer.clone().lock_owned().await),
            None => None,
        };
        let tx = store.pool.begin_with("BEGIN IMMEDIATE").await?;
        Ok(match turn {
            // Under the turn, the bell's mark is this transaction's alone.
            Some(turn) => WriteTx::new(tx, Some(turn)).ringing(store.outbox.clone()),
            None => WriteTx::new(tx, None),
        })
    }

    /// As `begin_write`, on a connection with `synchronous=NORMAL`: in WAL mode its commit is synced by the next
    /// `FULL` commit (or checkpoint) of any connection, which syncs the log up to itself.
    async fn begin_write_relaxed(store: &SqliteStore) -> Result<WriteTx<Sqlite>, sqlx::Error> {
        let Some(relaxed) = &store.relaxed else {
            return Self::begin_write(store).await;
        };
        let turn = match &store.sqlite {
            Some(speedups) => Some(speedups.writer.clone().lock_owned().await),
            None => None,
        };
        let tx = relaxed.begin_with("BEGIN IMMEDIATE").await?;
        Ok(WriteTx::new(tx, turn))
    }

    /// `BEGIN IMMEDIATE` already holds the only write lock.
    async fn lock_agent(_conn: &mut SqliteConnection, _id: Uuid) -> Result<(), sqlx::Error> {
        Ok(())
    }

    /// One instance per file: nobody else to tell.
    async fn notify_event(_conn: &mut SqliteConnection, _id: i64) -> Result<(), sqlx::Error> {
        Ok(())
    }

    /// The bell (the update hook and `WriteTx::commit`) does it in-process.
    async fn notify_outbox(_conn: &mut SqliteConnection) -> Result<(), sqlx::Error> {
        Ok(())
    }

    /// One instance per file: its own bell is all.
    async fn outbox_listener(_store: &SqliteStore) -> Option<futures::stream::BoxStream<'static, ()>> {
        None
    }

    async fn lock(store: &SqliteStore, name: &str) -> StoreResult<Box<dyn SendGuard>> {
        Ok(Box::new(store.locks.lock(name).await))
    }

    async fn lock_all(store: &SqliteStore, names: &[String]) -> StoreResult<Box<dyn SendGuard>> {
        let mut guards = Vec::with_capacity(names.len());
        for name in names {
            guards.push(store.locks.lock(name).await);
        }
        Ok(Box::new(guards))
    }

    async fn try_lock(store: &SqliteStore, name: &str) -> StoreResult<Option<Box<dyn SendGuard>>> {
        Ok(store.locks.try_lock(name).map(|g| Box::new(g) as Box<dyn SendGuard>))
    }

    /// `PRAGMA synchronous`: 2 is FULL, 3 EXTRA; in WAL mode both sync the log at every commit.
    async fn durable_commits(pool: &SqlitePool) -> StoreResult<bool> {
        let (level,): (i64,) = sqlx::query_as("PRAGMA synchronous").fetch_one(pool).await?;
        Ok(level >= 2)
    }

    async fn event_feed(store: &SqliteStore) -> EventFeed {
        store.feed.follow()
    }
}
