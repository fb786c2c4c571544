//! Named locks shared by the instances on one database, as lease rows (`leases`): taken, renewed and released in
//! single short statements. A holder keeps no connection while it holds the lock, so senders waiting on a slow
//! node cannot drain the pool that `/health` and every request need. A session-level advisory lock would pin one.
//!
//! The lease is renewed in the background while its guard lives; a holder that died lets it lapse after `TERM`.
//! The in-process lock is taken first, so at most one task per instance polls for a name.

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
    Ok(Box::new(Lease::held(store.pool.clone(), name, holder, local)))
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
    Ok(Some(Box::new(Lease::held(store.pool.clone(), name, holder, local))))
}

/// Takes the lease when it is free or lapsed; one statement, so the row is never left half-taken.
async fn take(pool: &PgPool, name: &str, holder: Uuid) -> Result<bool, sqlx::Error> {
    let done = sqlx::query(
        "INSERT INTO leases (name, holder, expires_at) VALUES ($1, $2, now() + make_interval(secs => $3)) \
         ON CONFLICT (name) DO UPDATE SET holder = EXCLUDED.holder, expires_at = EXCLUDED.expires_at \
         WHERE leases.expires_at < now()",
    )
    .bind(name)
    .bind(holder)
    .bind(TERM.as_secs_f64())
    .execute(pool)
    .await?;
    Ok(done.rows_affected() == 1)
}

/// A held lease: renewed until dropped, then deleted (and only then is the in-process lock let go).
struct Lease {
    pool: PgPool,
    name: String,
    holder: Uuid,
    renewal: JoinHandle<()>,
    local: Option<OwnedMutexGuard<()>>,
}

impl Lease {
    fn held(pool: PgPool, name: &str, holder: Uuid, local: OwnedMutexGuard<()>) -> Self {
        let renewal = tokio::spawn(renew(pool.clone(), name.to_string(), holder));
        Lease {
            pool,
            name: name.to_string(),
            holder,
            renewal,
            local: Some(local),
        }
    }
}

async fn renew(pool: PgPool, name: String, holder: Uuid) {
    loop {
        tokio::time::sleep(RENEW_EVERY).await;
        let renewed = sqlx::query(
            "UPDATE leases SET expires_at = now() + make_interval(secs => $3) WHERE name = $1 AND holder = $2",
        )
        .bind(&name)
        .bind(holder)
        .bind(TERM.as_secs_f64())
        .execute(&pool)
        .await;
        match renewed {
            Ok(done) if done.rows_affected() == 1 => {}
            Ok(_) => {
                tracing::error!(lock = %name, "a held lease lapsed before its renewal");
                return;
            }
            Err(e) => tracing::warn!(lock = %name, error = %e, "a lease could not be renewed; retrying"),
        }
    }
}

impl SendGuard for Lease {}

impl Drop for Lease {
    fn drop(&mut self) {
        self.renewal.abort();
        let (pool, name, holder, local) = (
            self.pool.clone(),
            std::mem::take(&mut self.name),
            self.holder,
            self.local.take(),
        );
        tokio::spawn(async move {
            let released = sqlx::query("DELETE FROM leases WHERE name = $1 AND holder = $2")
                .bind(&name)
                .bind(holder)
                .execute(&pool)
                .await;
            if let Err(e) = released {
                tracing::warn!(lock = %name, error = %e, "a lease could not be released; it lapses on its own");
            }
            drop(local);
        });
    }
}
