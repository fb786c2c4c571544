//! The purge of what has outlived its use: expired owner sessions, long-expired challenges, idempotency records past
//! their window. Each table was bounded only by the next request that happened to touch it (or not at all).

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use sqlx::{Encode, Executor, Type};

use super::tokens::CHALLENGE_KEPT_AFTER_EXPIRY;
use super::{Backend, SqlStore};
use crate::store::{KEY_LIFETIME, PurgeStore, StoreResult};

#[async_trait]
impl<B> PurgeStore for SqlStore<B>
where
    B: Backend,
    for<'c> &'c mut B::Connection: Executor<'c, Database = B>,
    for<'r> DateTime<Utc>: Encode<'r, B> + Type<B>,
{
    async fn purge(&self, now: DateTime<Utc>) -> StoreResult<u64> {
        let challenges = now - CHALLENGE_KEPT_AFTER_EXPIRY;
        let statements: [(&str, DateTime<Utc>); 4] = [
            ("DELETE FROM owner_sessions WHERE expires_at < $1", now),
            ("DELETE FROM owner_challenges WHERE expires_at < $1", challenges),
            ("DELETE FROM reissue_challenges WHERE expires_at < $1", challenges),
            ("DELETE FROM idempotency_keys WHERE created_at < $1", now - KEY_LIFETIME),
        ];
        let mut removed = 0;
        // One statement at a time, each its own commit: a purge never holds the write lock for long.
        for (sql, before) in statements {
            let done = sqlx::query(sql).bind(before).execute(&self.pool).await?;
            removed += B::rows_affected(&done);
        }
        Ok(removed)
    }
}
