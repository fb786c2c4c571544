//! Agent views served from memory while the SQLite database has not changed (the authenticated hot path).
//!
//! Exactness comes from SQLite's documented `PRAGMA data_version`, not from a list of the writes that ought to
//! invalidate: its value on one connection changes whenever any other connection, of this process or any other
//! (another instance, `agentd mcp`, the `sqlite3` CLI), commits to the database. The cache holds one connection of
//! its own that never writes, so every commit anywhere moves its value. A view is kept with the value seen before its
//! statement ran, and only when the value is unchanged after the statement; it is served only while the value is
//! still the same. Any commit in between, even one that touched none of the view's rows, drops it. A reissued token,
//! a deactivation, a changed owner or cap, a settled transfer: each is a commit, so the next request reads again.
//!
//! (An earlier version read the WAL-index header from the `-shm` file directly: cheaper, but that file is SQLite's
//! private state, and replacing it under a running process left the cache serving a revoked token.)

use std::collections::HashMap;
use std::sync::Mutex;

use sqlx::SqliteConnection;
use uuid::Uuid;

use crate::domain::agent::Agent;

/// Views kept at most; past it the map starts over (a cache, not a store).
const MAX_VIEWS: usize = 4096;

/// `PRAGMA data_version` on the cache's own connection: the identity of the database's committed state.
pub type CommitMark = i64;

/// A view as `get_agent_for_token` answers it.
pub type View = (Agent, Option<Uuid>);

struct Kept {
    mark: CommitMark,
    view: View,
}

/// Views by (agent, token hash), each valid while the database's commit mark is the one it was read under.
pub struct ViewCache {
    /// Asked for `data_version` only, never used to write (its own commits would not move its value).
    watch: tokio::sync::Mutex<SqliteConnection>,
    views: Mutex<HashMap<(Uuid, String), Kept>>,
}

impl ViewCache {
    /// Over the database that `watch` (a read-only connection of its own) is open on.
    pub fn new(watch: SqliteConnection) -> Self {
        ViewCache {
            watch: tokio::sync::Mutex::new(watch),
            views: Mutex::new(HashMap::new()),
        }
    }

    /// The database's commit mark now, or `None` when it could not be read (nothing is then served from memory).
    async fn mark(&self) -> Option<CommitMark> {
        let mut watch = self.watch.lock().await;
        match sqlx::query_scalar::<_, i64>("PRAGMA data_version")
            .fetch_one(&mut *watch)
            .await
        {
            Ok(mark) => Some(mark),
            Err(e) => {
                tracing::warn!(error = %e, "PRAGMA data_version failed; agent views are read from the database");
                None
            }
        }
    }

    /// The view, when one was read under the database's current commit mark; else that mark, to read it under.
    pub async fn get(&self, agent_id: Uuid, token_hash: &str) -> Result<View, Option<CommitMark>> {
        let mark = self.mark().await.ok_or(None)?;
        let views = self.views.lock().unwrap_or_else(|p| p.into_inner());
        match views.get(&(agent_id, token_hash.to_string())) {
            Some(kept) if kept.mark == mark => Ok(kept.view.clone()),
            _ => Err(Some(mark)),
        }
    }

    /// Keeps a view read under `before`, if nothing committed since: a later commit may or may not be in it.
    pub async fn put(&self, before: CommitMark, agent_id: Uuid, token_hash: &str, view: &View) {
        if self.mark().await != Some(before) {
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
        let cache = ViewCache::new(open(&path, true).await);
        (dir, path, writer, cache)
    }

    #[tokio::test]
    async fn the_mark_moves_with_every_commit_and_only_then() {
        let (_dir, path, mut writer, cache) = database().await;

        let first = cache.mark().await.expect("a mark");
        let mut reader = open(&path, true).await;
        reader.execute("SELECT count(*) FROM t").await.unwrap();
        assert_eq!(cache.mark().await, Some(first), "a read commits nothing");

        writer.execute("INSERT INTO t VALUES (1)").await.unwrap();
        let second = cache.mark().await.expect("mark");
        assert_ne!(second, first, "an autocommit write moves the mark");

        let mut tx = writer.begin().await.unwrap();
        tx.execute("UPDATE t SET v = 2").await.unwrap();
        assert_eq!(cache.mark().await, Some(second), "nothing is visible before the commit");
        tx.commit().await.unwrap();
        assert_ne!(cache.mark().await, Some(second), "the commit moves the mark");

        let mut tx = writer.begin().await.unwrap();
        tx.execute("UPDATE t SET v = 3").await.unwrap();
        let before = cache.mark().await;
        tx.rollback().await.unwrap();
        assert_eq!(cache.mark().await, before, "a rollback leaves it");
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

        let before = cache.mark().await.unwrap();
        cache.put(before, agent.id, "hash", &view).await;
        assert_eq!(cache.get(agent.id, "hash").await.ok(), Some(view.clone()));
        assert_eq!(cache.get(agent.id, "other").await.ok(), None, "per token hash");

        writer.execute("INSERT INTO t VALUES (1)").await.unwrap();
        assert_eq!(cache.get(agent.id, "hash").await.ok(), None, "a commit drops it");

        // Read under one mark, committed to before it is kept: not kept.
        let before = cache.mark().await.unwrap();
        writer.execute("INSERT INTO t VALUES (2)").await.unwrap();
        cache.put(before, agent.id, "hash", &view).await;
        assert_eq!(cache.get(agent.id, "hash").await.ok(), None);
    }
}
