//! Access tokens (hashes only) and reissue challenges.

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use sqlx::{ColumnIndex, Decode, Encode, Executor, Type};
use uuid::Uuid;

use super::{Backend, SqlStore};
use crate::store::shared::ChallengeRow;
use crate::store::{AuditEvent, Challenge, ReissueProof, StoreResult, TokenStore};

/// How long an expired challenge is kept (so that it is still refused as expired, not unknown, for a while).
pub(super) const CHALLENGE_KEPT_AFTER_EXPIRY: chrono::Duration = chrono::Duration::minutes(10);

#[async_trait]
impl<B> TokenStore for SqlStore<B>
where
    B: Backend,
    for<'c> &'c mut B::Connection: Executor<'c, Database = B>,
    // Hashes, nonces and messages as text; ids; times. Challenges are read by column name.
    for<'r> Uuid: Encode<'r, B> + Decode<'r, B> + Type<B>,
    for<'r> String: Encode<'r, B> + Decode<'r, B> + Type<B>,
    for<'r> &'r str: Encode<'r, B> + Type<B>,
    // Audit entries are appended with the change (entry ids read back).
    for<'r> i64: Encode<'r, B> + Decode<'r, B> + Type<B>,
    for<'r> DateTime<Utc>: Encode<'r, B> + Decode<'r, B> + Type<B>,
    usize: ColumnIndex<B::Row>,
    for<'r> &'r str: ColumnIndex<B::Row>,
{
    async fn agent_for_token(&self, token_hash: &str) -> StoreResult<Option<Uuid>> {
        let row: Option<(Uuid,)> =
            sqlx::query_as("SELECT agent_id FROM access_tokens WHERE token_hash = $1 AND revoked_at IS NULL")
                .bind(token_hash)
                .fetch_optional(&self.pool)
                .await?;
        Ok(row.map(|r| r.0))
    }

    async fn insert_challenge(&self, c: &Challenge) -> StoreResult<()> {
        // Challenges long expired are useless: each new one clears them, so the table stays bounded.
        sqlx::query("DELETE FROM reissue_challenges WHERE expires_at < $1")
            .bind(self.now() - CHALLENGE_KEPT_AFTER_EXPIRY)
            .execute(&self.pool)
            .await?;
        sqlx::query(
            "INSERT INTO reissue_challenges (nonce, agent_id, message, expires_at, created_at) \
             VALUES ($1, $2, $3, $4, $5)",
        )
        .bind(&c.nonce)
        .bind(c.agent_id)
        .bind(&c.message)
        .bind(c.expires_at)
        .bind(self.now())
        .execute(&self.pool)
        .await?;
        Ok(())
    }

    async fn get_challenge(&self, nonce: &str) -> StoreResult<Option<Challenge>> {
        let row: Option<ChallengeRow> = sqlx::query_as(
            "SELECT nonce, agent_id, message, expires_at, used_at FROM reissue_challenges WHERE nonce = $1",
        )
        .bind(nonce)
        .fetch_optional(&self.pool)
        .await?;
        Ok(row.map(Challenge::from))
    }

    async fn reissue_token(
        &self,
        agent_id: Uuid,
        proof: ReissueProof<'_>,
        new_hash: &str,
        audit: &AuditEvent,
    ) -> StoreResult<bool> {
        let now = self.now();
        let mut tx = B::begin_write(self).await?;
        let consumed = match proof {
            ReissueProof::CurrentToken { token_hash } => sqlx::query(
                "UPDATE access_tokens SET revoked_at = $1 \
                 WHERE token_hash = $2 AND agent_id = $3 AND revoked_at IS NULL",
            )
            .bind(now)
            .bind(token_hash)
            .bind(agent_id),
            ReissueProof::Challenge { nonce } => sqlx::query(
                "UPDATE reissue_challenges SET used_at = $1 \
                 WHERE nonce = $2 AND agent_id = $3 AND used_at IS NULL AND expires_at > $1",
            )
            .bind(now)
            .bind(nonce)
            .bind(agent_id),
        }
        .execute(&mut *tx)
        .await?;
        if B::rows_affected(&consumed) != 1 {
            return Ok(false);
        }
        sqlx::query("UPDATE access_tokens SET revoked_at = $1 WHERE agent_id = $2 AND revoked_at IS NULL")
            .bind(now)
            .bind(agent_id)
            .execute(&mut *tx)
            .await?;
        sqlx::query("INSERT INTO access_tokens (token_hash, agent_id, created_at) VALUES ($1, $2, $3)")
            .bind(new_hash)
            .bind(agent_id)
            .bind(now)
            .execute(&mut *tx)
            .await?;
        self.append_audit(&mut tx, audit).await?;
        tx.commit().await?;
        Ok(true)
    }
}
