//! SQLite's speed machinery (used by the generic store, `sql`, when the backend is SQLite; PostgreSQL does without):
//! connections for single reads without the pool's pings (`reads`), agent views kept while `PRAGMA data_version`
//! says the database has not changed (`views`), and this process's writer turn. Each piece goes through SQLite's
//! documented interface only. It names neither `sql` nor `sqlite`, which both use it.

pub(in crate::store) mod reads;
pub(in crate::store) mod views;

pub(in crate::store) use reads::ReadConns;
pub(in crate::store) use views::ViewCache;

/// SQLite's speed machinery, in one place: what the generic store (`sql`) uses when it is there and does without on
/// PostgreSQL. Each piece goes through SQLite's documented interface only.
pub(in crate::store) struct Speedups<C> {
    /// Connections for single reads without the pool's pings.
    pub reads: ReadConns<C>,
    /// Agent views kept while `PRAGMA data_version` says the database has not changed.
    pub views: ViewCache,
    /// The writer turn of this process: its write transactions queue here, in order, rather than at SQLite's busy
    /// handler, which polls the lock with sleeps of 1, 2, 5, ... up to 100 ms while it is taken.
    pub writer: std::sync::Arc<tokio::sync::Mutex<()>>,
}
