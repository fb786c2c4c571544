//! Named locks shared by the instances on one database, as lease rows (`leases`): taken, renewed and released in
//! single short statements. A holder keeps no connection while it holds the lock, so senders waiting on a slow
//! node cannot drain the pool that `/health` and every request need. A session-level advisory lock would pin one.
//!
//! The lease is renewed in the background while its guard lives; a holder that died lets it lapse after `TERM`.
//! The in-process lock is taken first, so at most one task per instance polls for a name.

use std::collections::HashSet;
use std::time::Duration;

use sqlx::PgPool;
use tokio::sync::OwnedMutexGuard;
use tokio::task::JoinHandle;
use uuid::Uuid;

use super::PgStore;
use crate::store::{SendGuard, StoreResult};

/// How long a lease lasts without renewal (the wait of others after a holder's crash).
const TERM: Duration = Duration::from_secs(15);
/// How often a held lease is renewed: three chances before it lapses.
const RENEW_EVERY: Duration = Duration::from_secs(5);
/// The first and the longest pause between attempts to take a held lease.
const FIRST_PAUSE: Duration = Duration::from_millis(10);
const LONGEST_PAUSE: Duration = Duration::from_millis(200);

/// Waits for the lease `name`.
pub(super) async fn lock(store: &PgStore, name: &str) -> StoreResult<Box<dyn SendGuard>> {
    let local = store.locks.lock(name).await;
    let holder = Uuid::new_v4();
    let mut pause = FIRST_PAUSE;
    while !take(&store.pool, name, holder).await? {
        tokio::time::sleep(pause).await;
        pause = (pause * 2).min(LONGEST_PAUSE);
    }
    Ok(Box::new(Lease::held(store.pool.clone(), 1, holder, vec![local])))
}

/// Waits for every lease of `names` (sorted, without repeats), in that order, under one holder: one statement takes
/// every free one, and the ones after the first that is not free are given back at once, so a holder never waits
/// for a name while it holds a later one (two instances' rounds cannot wait for each other).
pub(super) async fn lock_all(store: &PgStore, names: &[String]) -> StoreResult<Box<dyn SendGuard>> {
    let mut locals = Vec::with_capacity(names.len());
    for name in names {
        locals.push(store.locks.lock(name).await);
    }
    let holder = Uuid::new_v4();
    let mut held = 0;
    let mut pause = FIRST_PAUSE;
    while held < names.len() {
        let rest = &names[held..];
        let taken = match take_all(&store.pool, rest, holder).await {
            Ok(taken) => taken,
            Err(e) => {
                release(&store.pool, holder).await;
                return Err(e.into());
            }
        };
        let first = rest.iter().take_while(|name| taken.contains(*name)).count();
        let later: Vec<&String> = rest[first..].iter().filter(|name| taken.contains(*name)).collect();
        if !later.is_empty() {
            give_back(&store.pool, &later, holder).await?;
        }
        held += first;
        match first {
            0 => {
                tokio::time::sleep(pause).await;
                pause = (pause * 2).min(LONGEST_PAUSE);
            }
            _ => pause = FIRST_PAUSE,
        }
    }
    Ok(Box::new(Lease::held(store.pool.clone(), names.len(), holder, locals)))
}

/// The lease `name` if nobody holds it.
pub(super) async fn try_lock(store: &PgStore, name: &str) -> StoreResult<Option<Box<dyn SendGuard>>> {
    let Some(local) = store.locks.try_lock(name) else {
        return Ok(None);
    };
    let holder = Uuid::new_v4();
    if !take(&store.pool, name, holder).await? {
        return Ok(None);
    }
    Ok(Some(Box::new(Lease::held(store.pool.clone(), 1, holder, vec![local]))))
}

/// Takes the lease when it is free or lapsed; one statement, so the row is never left half-taken.
async fn take(pool: &PgPool, name: &str, holder: Uuid) -> Result<bool, sqlx::Error> {
    Ok(take_all(pool, &[name.to_string()], holder).await?.contains(name))
}

/// Takes each lease of `names` that is free or lapsed, in one statement (rows in `names`' order); the names taken.
async fn take_all(pool: &PgPool, names: &[String], holder: Uuid) -> Result<HashSet<String>, sqlx::Error> {
    let taken: Vec<(String,)> = sqlx::query_as(
        "INSERT INTO leases (name, holder, expires_at) \
         SELECT name, $2, now() + make_interval(secs => $3) FROM UNNEST($1::text[]) WITH ORDINALITY AS n(name, i) \
         ORDER BY i \
         ON CONFLICT (name) DO UPDATE SET holder = EXCLUDED.holder, expires_at = EXCLUDED.expires_at \
         WHERE leases.expires_at < now() \
         RETURNING name",
    )
    .bind(names)
    .bind(holder)
    .bind(TERM.as_secs_f64())
    .fetch_all(pool)
    .await?;
    Ok(taken.into_iter().map(|(name,)| name).collect())
}

/// Gives back leases of `holder` taken out of order.
async fn give_back(pool: &PgPool, names: &[&String], holder: Uuid) -> Result<(), sqlx::Error> {
    sqlx::query("DELETE FROM leases WHERE name = ANY($1) AND holder = $2")
        .bind(names.iter().map(|n| n.as_str()).collect::<Vec<_>>())
        .bind(holder)
        .execute(pool)
        .await?;
    Ok(())
}

/// Gives back every lease of `holder`; a failure is logged, and they lapse on their own.
async fn release(pool: &PgPool, holder: Uuid) {
    let released = sqlx::query("DELETE FROM leases WHERE holder = $1")
        .bind(holder)
        .execute(pool)
        .await;
    if let Err(e) = released {
        tracing::warn!(error = %e, "leases could not be released; they lapse on their own");
    }
}

/// Held leases, one holder for all: renewed together until dropped, then deleted with one statement (and only then
/// are the in-process locks let go).
struct Lease {
    pool: PgPool,
    holder: Uuid,
    renewal: JoinHandle<()>,
    locals: Vec<OwnedMutexGuard<()>>,
}

impl Lease {
    fn held(pool: PgPool, count: usize, holder: Uuid, locals: Vec<OwnedMutexGuard<()>>) -> Self {
        let renewal = tokio::spawn(renew(pool.clone(), count as u64, holder));
        Lease {
            pool,
            holder,
            renewal,
            locals,
        }
    }
}

async fn renew(pool: PgPool, count: u64, holder: Uuid) {
    loop {
        tokio::time::sleep(RENEW_EVERY).await;
        let renewed = sqlx::query("UPDATE leases SET expires_at = now() + make_interval(secs => $2) WHERE holder = $1")
            .bind(holder)
            .bind(TERM.as_secs_f64())
            .execute(&pool)
            .await;
        match renewed {
            Ok(done) if done.rows_affected() == count => {}
            Ok(_) => {
                tracing::error!(%holder, "a held lease lapsed before its renewal");
                return;
            }
            Err(e) => tracing::warn!(%holder, error = %e, "a lease could not be renewed; retrying"),
        }
    }
}

impl SendGuard for Lease {}

impl Drop for Lease {
    fn drop(&mut self) {
        self.renewal.abort();
        let (pool, holder, locals) = (self.pool.clone(), self.holder, std::mem::take(&mut self.locals));
        tokio::spawn(async move {
            release(&pool, holder).await;
            drop(locals);
        });
    }
}
