//! The purge of what has outlived its use: expired owner sessions, long-expired challenges, idempotency records past
//! their window, and the paid answers kept with x402 payments resolved more than 30 days ago (§15). Each was bounded
//! only by the next request that happened to touch it (or not at all).

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use sqlx::{Decode, Encode, Executor, Type};
use uuid::Uuid;

use super::tokens::CHALLENGE_KEPT_AFTER_EXPIRY;
use super::{Backend, SqlStore};
use crate::domain::transaction::X402Record;
use crate::store::shared;
use crate::store::{KEY_LIFETIME, PurgeStore, StoreError, StoreResult};

/// How long a resolved x402 payment keeps the paid answer (`x402.response`).
pub const PAID_ANSWER_KEPT: chrono::TimeDelta = chrono::TimeDelta::days(30);
/// How long webhook attempts and finished deliveries are kept (the deliveries log, `redeliver`).
pub const WEBHOOK_HISTORY_KEPT: chrono::TimeDelta = chrono::TimeDelta::days(30);
/// Payments whose answer one purge drops (each its own commit); the next purge, an hour later, takes the next ones.
const ANSWERS_PER_PURGE: i64 = 1000;

#[async_trait]
impl<B> PurgeStore for SqlStore<B>
where
    B: Backend,
    for<'c> &'c mut B::Connection: Executor<'c, Database = B>,
    for<'r> DateTime<Utc>: Encode<'r, B> + Type<B>,
    for<'r> Uuid: Encode<'r, B> + Decode<'r, B> + Type<B>,
    for<'r> String: Encode<'r, B> + Decode<'r, B> + Type<B>,
    for<'r> i64: Encode<'r, B> + Type<B>,
    usize: sqlx::ColumnIndex<B::Row>,
{
    async fn purge(&self, now: DateTime<Utc>) -> StoreResult<u64> {
        let challenges = now - CHALLENGE_KEPT_AFTER_EXPIRY;
        let webhooks = now - WEBHOOK_HISTORY_KEPT;
        let statements: [(&str, DateTime<Utc>); 7] = [
            ("DELETE FROM owner_sessions WHERE expires_at < $1", now),
            ("DELETE FROM owner_challenges WHERE expires_at < $1", challenges),
            ("DELETE FROM reissue_challenges WHERE expires_at < $1", challenges),
            ("DELETE FROM idempotency_keys WHERE created_at < $1", now - KEY_LIFETIME),
            // Webhook history (§19): attempts, finished deliveries and events nothing waits for any more.
            ("DELETE FROM webhook_deliveries WHERE at < $1", webhooks),
            (
                "DELETE FROM webhook_jobs WHERE state <> 'pending' AND next_at < $1",
                webhooks,
            ),
            (
                "DELETE FROM webhook_events WHERE created_at < $1 AND fanned_at IS NOT NULL \
                 AND id NOT IN (SELECT event_id FROM webhook_jobs)",
                webhooks,
            ),
        ];
        let mut removed = 0;
        // One statement at a time, each its own commit: a purge never holds the write lock for long.
        for (sql, before) in statements {
            let done = sqlx::query(sql).bind(before).execute(&self.pool).await?;
            removed += B::rows_affected(&done);
        }
        // The paid answers of x402 payments resolved (neither signed nor pending) more than 30 days ago.
        let before = now - PAID_ANSWER_KEPT;
        let rows: Vec<(Uuid, String)> = sqlx::query_as(concat!(
            "SELECT id, x402 FROM transactions WHERE kind = 'x402' AND status NOT IN ",
            shared::open_statuses!(),
            " AND updated_at < $1 AND x402 LIKE '%\"response\"%' LIMIT $2"
        ))
        .bind(before)
        .bind(ANSWERS_PER_PURGE)
        .fetch_all(&self.pool)
        .await?;
        for (id, text) in rows {
            let mut record: X402Record = serde_json::from_str(&text)
                .map_err(|e| StoreError::Corrupt(format!("transactions.x402 of {id}: {e}")))?;
            if record.response.take().is_none() {
                continue;
            }
            let text = serde_json::to_string(&record).expect("an x402 record serialises");
            sqlx::query("UPDATE transactions SET x402 = $1 WHERE id = $2")
                .bind(text)
                .bind(id)
                .execute(&self.pool)
                .await?;
            removed += 1;
        }
        Ok(removed)
    }
}
