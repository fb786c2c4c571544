//! Agent views served from memory while the SQLite database has not changed (the authenticated hot path).
//!
//! Exactness comes from SQLite's documented `PRAGMA data_version`, not from a list of the writes that ought to
//! invalidate: its value on one connection changes whenever any other connection, of this process or any other
//! (another instance, `agentd mcp`, the `sqlite3` CLI), commits to the database. Each thread that serves requests
//! holds one read-only connection of the cache's own that never writes, so every commit anywhere moves its value, and
//! asks it on the request's own thread: a call into SQLite of a few microseconds (rusqlite), where a statement through
//! sqlx's connection worker costs two thread hand-offs. A value is only comparable with one of the same connection,
//! so each thread keeps its own views under its own connection's values. A view is kept with the value seen before
//! its statement ran, and only when the value on the same connection is unchanged after the statement (a request
//! that came back on another thread keeps nothing); it is served only while the value is still the same. Any commit
//! in between, even one that touched none of the view's rows, drops it. A reissued token, a deactivation, a changed
//! owner or cap, a settled transfer: each is a commit, so the next request reads again.
//!
//! (An earlier version read the WAL-index header from the `-shm` file directly: cheaper, but that file is SQLite's
//! private state, and replacing it under a running process left the cache serving a revoked token.)

use std::cell::RefCell;
use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};

use rusqlite::{Connection, OpenFlags};
use uuid::Uuid;

use crate::domain::agent::Agent;

/// Views kept at most per thread; past it the thread's map starts over (a cache, not a store).
const MAX_VIEWS: usize = 4096;

/// Caches a thread keeps connections for at most (one per store; tests open many stores in one process).
const MAX_WATCHES: usize = 16;

/// Numbers caches and their connections, so that a value is only ever compared with one of the same connection.
static SERIAL: AtomicU64 = AtomicU64::new(1);

/// `PRAGMA data_version` on one of the cache's own connections: the identity of the database's committed state as
/// that connection sees it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CommitMark {
    /// The connection the value was read on.
    watch: u64,
    value: i64,
}

/// A view as `get_agent_for_token` answers it.
pub type View = (Agent, Option<Uuid>);

struct Kept {
    mark: CommitMark,
    view: View,
}

/// One thread's connection to one cache's database, and the views read under its values.
struct Watch {
    serial: u64,
    conn: Connection,
    views: HashMap<(Uuid, String), Kept>,
}

thread_local! {
    /// This thread's watches, by the cache's number.
    static WATCHES: RefCell<HashMap<u64, Watch>> = RefCell::new(HashMap::new());
}

/// Views by (agent, token hash), each valid while the database's commit mark is the one it was read under.
pub struct ViewCache {
    /// The database file each thread's connection opens (read-only).
    path: PathBuf,
    /// This cache's number in each thread's watches.
    id: u64,
}

impl ViewCache {
    /// Over the SQLite database at `path` (in WAL mode: the store opened it so).
    pub fn new(path: PathBuf) -> Self {
        ViewCache {
            path,
            id: SERIAL.fetch_add(1, Ordering::Relaxed),
        }
    }

    /// Runs `f` on this thread's watch of this cache's database, opened on first use; `None` when it cannot be
    /// opened (nothing is then served from memory).
    fn with_watch<T>(&self, f: impl FnOnce(&mut Watch) -> T) -> Option<T> {
        WATCHES.with(|watches| {
            let mut watches = watches.borrow_mut();
            if !watches.contains_key(&self.id) {
                let flags = OpenFlags::SQLITE_OPEN_READ_ONLY | OpenFlags::SQLITE_OPEN_NO_MUTEX;
                let conn = match Connection::open_with_flags(&self.path, flags) {
                    Ok(conn) => conn,
                    Err(e) => {
                        tracing::warn!(error = %e, "cannot open the view cache's connection; agent views are read from the database");
                        return None;
                    }
                };
                if watches.len() >= MAX_WATCHES {
                    watches.clear();
                }
                let serial = SERIAL.fetch_add(1, Ordering::Relaxed);
                watches.insert(
                    self.id,
                    Watch {
                        serial,
                        conn,
                        views: HashMap::new(),
                    },
                );
            }
            watches.get_mut(&self.id).map(f)
        })
    }

    /// The database's commit mark now, as this thread's connection sees it; `None` when it could not be read.
    #[cfg(test)]
    fn mark(&self) -> Option<CommitMark> {
        self.with_watch(|w| read_mark(w)).flatten()
    }

    /// The view, when one was read under the database's current commit mark; else that mark, to read it under.
    pub fn get(&self, agent_id: Uuid, token_hash: &str) -> Result<View, Option<CommitMark>> {
        self.with_watch(|w| {
            let mark = read_mark(w).ok_or(None)?;
            match w.views.get(&(agent_id, token_hash.to_string())) {
                Some(kept) if kept.mark == mark => Ok(kept.view.clone()),
                _ => Err(Some(mark)),
            }
        })
        .unwrap_or(Err(None))
    }

    /// Keeps a view read under `before`, if nothing committed since on the same connection: a later commit may or
    /// may not be in it. A request that resumed on another thread than the one `before` was read on keeps nothing.
    pub fn put(&self, before: CommitMark, agent_id: Uuid, token_hash: &str, view: &View) {
        self.with_watch(|w| {
            if read_mark(w) != Some(before) {
                return;
            }
            if w.views.len() >= MAX_VIEWS {
                w.views.retain(|_, kept| kept.mark == before);
                if w.views.len() >= MAX_VIEWS {
                    w.views.clear();
                }
            }
            w.views.insert(
                (agent_id, token_hash.to_string()),
                Kept {
                    mark: before,
                    view: view.clone(),
                },
            );
        });
    }
}

/// `PRAGMA data_version` on the watch's connection.
fn read_mark(w: &Watch) -> Option<CommitMark> {
    let value = w
        .conn
        .prepare_cached("PRAGMA data_version")
        .and_then(|mut statement| statement.query_row([], |row| row.get::<_, i64>(0)));
    match value {
        Ok(value) => Some(CommitMark { watch: w.serial, value }),
        Err(e) => {
            tracing::warn!(error = %e, "PRAGMA data_version failed; agent views are read from the database");
            None
        }
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
        let cache = ViewCache::new(path.clone());
        (dir, path, writer, cache)
    }

    #[tokio::test]
    async fn the_mark_moves_with_every_commit_and_only_then() {
        let (_dir, path, mut writer, cache) = database().await;

        let first = cache.mark().expect("a mark");
        let mut reader = open(&path, true).await;
        reader.execute("SELECT count(*) FROM t").await.unwrap();
        assert_eq!(cache.mark(), Some(first), "a read commits nothing");

        writer.execute("INSERT INTO t VALUES (1)").await.unwrap();
        let second = cache.mark().expect("mark");
        assert_ne!(second, first, "an autocommit write moves the mark");

        let mut tx = writer.begin().await.unwrap();
        tx.execute("UPDATE t SET v = 2").await.unwrap();
        assert_eq!(cache.mark(), Some(second), "nothing is visible before the commit");
        tx.commit().await.unwrap();
        assert_ne!(cache.mark(), Some(second), "the commit moves the mark");

        let mut tx = writer.begin().await.unwrap();
        tx.execute("UPDATE t SET v = 3").await.unwrap();
        let before = cache.mark();
        tx.rollback().await.unwrap();
        assert_eq!(cache.mark(), before, "a rollback leaves it");
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

        let before = cache.mark().unwrap();
        cache.put(before, agent.id, "hash", &view);
        assert_eq!(cache.get(agent.id, "hash").ok(), Some(view.clone()));
        assert_eq!(cache.get(agent.id, "other").ok(), None, "per token hash");

        writer.execute("INSERT INTO t VALUES (1)").await.unwrap();
        assert_eq!(cache.get(agent.id, "hash").ok(), None, "a commit drops it");

        // Read under one mark, committed to before it is kept: not kept.
        let before = cache.mark().unwrap();
        writer.execute("INSERT INTO t VALUES (2)").await.unwrap();
        cache.put(before, agent.id, "hash", &view);
        assert_eq!(cache.get(agent.id, "hash").ok(), None);
    }

    #[tokio::test]
    async fn a_mark_of_another_threads_connection_keeps_nothing() {
        let (_dir, _path, _writer, cache) = database().await;
        let agent_id = Uuid::new_v4();
        let elsewhere = std::thread::scope(|s| s.spawn(|| cache.mark()).join().unwrap()).expect("a mark");
        let here = cache.mark().expect("a mark");
        assert_eq!(elsewhere.value, here.value, "the same database, unchanged");
        assert_ne!(elsewhere, here, "but marks of two connections are not compared");
        let view = cache.get(agent_id, "hash");
        assert!(matches!(view, Err(Some(mark)) if mark == here), "{view:?}");
    }
}
