//! How the store's database connections are doing, for `/health` and the log: the pool's size and use, and when
//! connections ran out (a wait for a pooled connection passed its timeout, or PostgreSQL refused a new one at its
//! `max_connections` or the role's `CONNECTION LIMIT`, SQLSTATE 53300).
//!
//! A running out is noted where a database error becomes a `StoreError`, from whichever store: the count is the
//! process's (a served process has one store). The log says it once a minute at most, with how many were not said.

use std::fmt::Display;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use chrono::{DateTime, Utc};

/// How long after connections last ran out `/health` still says they ran out recently.
pub const RECENT: Duration = Duration::from_secs(300);
/// The least time between two warnings in the log.
const WARN_EVERY: Duration = Duration::from_secs(60);

/// The pool's figures, and when its connections ran out.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PoolStatus {
    /// The most connections the pool opens (`DATABASE_MAX_CONNECTIONS` on PostgreSQL).
    pub max_connections: u32,
    /// Connections open now, in use or idle (on PostgreSQL, the listening ones among them).
    pub open: u32,
    pub idle: u32,
    /// How many times connections ran out since the start.
    pub ran_out: u64,
    pub last_ran_out_at: Option<DateTime<Utc>>,
    /// Whether the last time is within `RECENT`.
    pub ran_out_recently: bool,
}

struct Record {
    count: u64,
    last: Option<(Instant, DateTime<Utc>)>,
    warned: Option<Instant>,
    /// Times noted since the last warning, not yet said in the log.
    unsaid: u64,
}

static RECORD: Mutex<Record> = Mutex::new(Record {
    count: 0,
    last: None,
    warned: None,
    unsaid: 0,
});

fn record() -> std::sync::MutexGuard<'static, Record> {
    RECORD.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// Whether the server refused a new connection because it (or the role) is at its connection limit.
pub(crate) fn is_refusal(error: &sqlx::Error) -> bool {
    matches!(error, sqlx::Error::Database(e) if e.code().as_deref() == Some("53300"))
}

/// Notes `error` if it says that connections ran out.
pub(crate) fn note(error: &sqlx::Error) {
    if matches!(error, sqlx::Error::PoolTimedOut) || is_refusal(error) {
        ran_out(error);
    }
}

/// Notes that connections ran out (`cause` says how; it must hold no secret), and warns unless a warning was given
/// less than `WARN_EVERY` ago.
pub(crate) fn ran_out(cause: impl Display) {
    let now = Instant::now();
    let mut record = record();
    record.count += 1;
    record.last = Some((now, Utc::now()));
    if record.warned.is_some_and(|at| now.duration_since(at) < WARN_EVERY) {
        record.unsaid += 1;
        return;
    }
    let unsaid = std::mem::take(&mut record.unsaid);
    record.warned = Some(now);
    drop(record);
    tracing::warn!(
        %cause,
        since_last_warning = unsaid,
        "database connections ran out: a wait for a connection passed its timeout, or the server refused a new one \
         at its limit; the instance goes on with the connections it has. Size DATABASE_MAX_CONNECTIONS against the \
         server's max_connections (docs/operations.md)"
    );
}

/// The pool's figures given, with the running-out record.
pub(crate) fn status(max_connections: u32, open: u32, idle: u32) -> PoolStatus {
    let record = record();
    PoolStatus {
        max_connections,
        open,
        idle,
        ran_out: record.count,
        last_ran_out_at: record.last.map(|(_, at)| at),
        ran_out_recently: record.last.is_some_and(|(at, _)| at.elapsed() < RECENT),
    }
}
