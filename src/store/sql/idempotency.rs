//! Idempotency keys: the claim in one write transaction, then the answer or the release.

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use sqlx::{ColumnIndex, Decode, Encode, Executor, Type};
use uuid::Uuid;

use super::{Backend, SqlStore};
use crate::store::StoreResult;
use crate::store::idempotency::{ClaimOutcome, IdempotencyStore, KeyClaim, KeyRow, sql};

#[async_trait]
impl<B> IdempotencyStore for SqlStore<B>
where
    B: Backend,
    for<'c> &'c mut B::Connection: Executor<'c, Database = B>,
    // Keys, fingerprints and answers as text, claim ids, times, the answer's status; the row is read by name.
    for<'r> Uuid: Encode<'r, B> + Decode<'r, B> + Type<B>,
    for<'r> String: Decode<'r, B> + Type<B>,
    for<'r> &'r str: Encode<'r, B> + Type<B>,
    for<'r> i32: Encode<'r, B> + Decode<'r, B> + Type<B>,
    for<'r> DateTime<Utc>: Encode<'r, B> + Decode<'r, B> + Type<B>,
    for<'r> &'r str: ColumnIndex<B::Row>,
    for<'r> KeyRow: sqlx::FromRow<'r, B::Row>,
{
    async fn claim_key(&self, c: &KeyClaim<'_>) -> StoreResult<ClaimOutcome> {
        let mut tx = B::begin_write(self).await?;
        sqlx::query(sql::FORGET)
            .bind(c.agent_id)
            .bind(c.expired_before)
            .bind(c.key)
            .bind(c.now)
            .execute(&mut *tx)
            .await?;
        let claim_id = Uuid::new_v4();
        let inserted = sqlx::query(sql::INSERT)
            .bind(c.agent_id)
            .bind(c.key)
            .bind(c.fingerprint)
            .bind(claim_id)
            .bind(c.now)
            .bind(c.held_until)
            .execute(&mut *tx)
            .await?;
        let outcome = if B::rows_affected(&inserted) == 1 {
            ClaimOutcome::Claimed(claim_id)
        } else {
            let row: Option<KeyRow> = sqlx::query_as(sql::SELECT)
                .bind(c.agent_id)
                .bind(c.key)
                .fetch_optional(&mut *tx)
                .await?;
            // No row: the holder released it between our insert and our read; the client may simply retry.
            row.map_or(ClaimOutcome::InProgress, |row| row.outcome(c.fingerprint, c.now))
        };
        tx.commit().await?;
        Ok(outcome)
    }

    async fn renew_key(&self, agent_id: Uuid, key: &str, claim_id: Uuid, until: DateTime<Utc>) -> StoreResult<bool> {
        let done = sqlx::query(sql::RENEW)
            .bind(until)
            .bind(agent_id)
            .bind(key)
            .bind(claim_id)
            .execute(&self.pool)
            .await?;
        Ok(B::rows_affected(&done) == 1)
    }

    async fn answer_key(&self, agent_id: Uuid, key: &str, claim_id: Uuid, status: u16, body: &str) -> StoreResult<()> {
        sqlx::query(sql::ANSWER)
            .bind(i32::from(status))
            .bind(body)
            .bind(agent_id)
            .bind(key)
            .bind(claim_id)
            .execute(&self.pool)
            .await?;
        Ok(())
    }

    async fn release_key(&self, agent_id: Uuid, key: &str, claim_id: Uuid) -> StoreResult<()> {
        sqlx::query(sql::RELEASE)
            .bind(agent_id)
            .bind(key)
            .bind(claim_id)
            .execute(&self.pool)
            .await?;
        Ok(())
    }
}
