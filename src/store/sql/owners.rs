//! Owner authority: Sign-In with Ethereum challenges, owner sessions (token hashes only), reactivation.

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use sqlx::{ColumnIndex, Decode, Encode, Executor, Type};
use uuid::Uuid;

use super::{Backend, SqlStore};
use crate::store::audit::{OWNER_CHALLENGE_COLUMNS, OWNER_SESSION_COLUMNS, OwnerChallengeRow, OwnerSessionRow};
use crate::store::{AuditEvent, OwnerChallenge, OwnerSessionRecord, OwnerStore, StoreError, StoreResult};

#[async_trait]
impl<B> OwnerStore for SqlStore<B>
where
    B: Backend,
    for<'c> &'c mut B::Connection: Executor<'c, Database = B>,
    // Nonces, hashes, chains and addresses as text; ids; times; the active flag. Rows read by name.
    for<'r> Uuid: Encode<'r, B> + Decode<'r, B> + Type<B>,
    for<'r> String: Encode<'r, B> + Decode<'r, B> + Type<B>,
    for<'r> &'r str: Encode<'r, B> + Type<B>,
    // Audit entries are appended with the change (entry ids read back).
    for<'r> i64: Encode<'r, B> + Decode<'r, B> + Type<B>,
    for<'r> bool: Decode<'r, B> + Type<B>,
    // A session's chain (none on sessions opened before it was recorded).
    for<'r> Option<String>: Decode<'r, B>,
    for<'r> Option<&'r str>: Encode<'r, B>,
    for<'r> DateTime<Utc>: Encode<'r, B> + Decode<'r, B> + Type<B>,
    usize: ColumnIndex<B::Row>,
    for<'r> &'r str: ColumnIndex<B::Row>,
{
    async fn insert_owner_challenge(&self, c: &OwnerChallenge) -> StoreResult<()> {
        sqlx::query("DELETE FROM owner_challenges WHERE expires_at < $1")
            .bind(self.now() - super::tokens::CHALLENGE_KEPT_AFTER_EXPIRY)
            .execute(&self.pool)
            .await?;
        sqlx::query(
            "INSERT INTO owner_challenges (nonce, agent_id, chain, address, message, expires_at, created_at) \
             VALUES ($1, $2, $3, $4, $5, $6, $7)",
        )
        .bind(&c.nonce)
        .bind(c.agent_id)
        .bind(&c.chain)
        .bind(c.address.to_checksum(None))
        .bind(&c.message)
        .bind(c.expires_at)
        .bind(self.now())
        .execute(&self.pool)
        .await?;
        Ok(())
    }

    async fn get_owner_challenge(&self, nonce: &str) -> StoreResult<Option<OwnerChallenge>> {
        let sql = format!("SELECT {OWNER_CHALLENGE_COLUMNS} FROM owner_challenges WHERE nonce = $1");
        let row: Option<OwnerChallengeRow> = sqlx::query_as(sqlx::AssertSqlSafe(sql))
            .bind(nonce)
            .fetch_optional(&self.pool)
            .await?;
        row.map(OwnerChallengeRow::into_challenge).transpose()
    }

    /// Uses the challenge (once: the conditional update is atomic on both databases) and opens the session in the
    /// same transaction.
    async fn open_owner_session(
        &self,
        nonce: &str,
        session: &OwnerSessionRecord,
        audit: &AuditEvent,
    ) -> StoreResult<bool> {
        let now = self.now();
        let mut tx = B::begin_write(self).await?;
        let used = sqlx::query(
            "UPDATE owner_challenges SET used_at = $1 \
             WHERE nonce = $2 AND agent_id = $3 AND used_at IS NULL AND expires_at > $1",
        )
        .bind(now)
        .bind(nonce)
        .bind(session.agent_id)
        .execute(&mut *tx)
        .await?;
        if B::rows_affected(&used) != 1 {
            return Ok(false);
        }
        sqlx::query(
            "INSERT INTO owner_sessions (token_hash, agent_id, address, expires_at, created_at, chain) \
             VALUES ($1, $2, $3, $4, $5, $6)",
        )
        .bind(&session.token_hash)
        .bind(session.agent_id)
        .bind(session.address.to_checksum(None))
        .bind(session.expires_at)
        .bind(now)
        .bind(session.chain.as_deref())
        .execute(&mut *tx)
        .await?;
        self.append_audit(&mut tx, audit).await?;
        tx.commit().await?;
        Ok(true)
    }

    async fn owner_session(&self, token_hash: &str) -> StoreResult<Option<OwnerSessionRecord>> {
        let sql = format!("SELECT {OWNER_SESSION_COLUMNS} FROM owner_sessions WHERE token_hash = $1");
        let row: Option<OwnerSessionRow> = sqlx::query_as(sqlx::AssertSqlSafe(sql))
            .bind(token_hash)
            .fetch_optional(&self.pool)
            .await?;
        row.map(OwnerSessionRow::into_session).transpose()
    }

    async fn close_owner_session(&self, token_hash: &str, audit: &AuditEvent) -> StoreResult<bool> {
        let mut tx = B::begin_write(self).await?;
        let done = sqlx::query("DELETE FROM owner_sessions WHERE token_hash = $1")
            .bind(token_hash)
            .execute(&mut *tx)
            .await?;
        if B::rows_affected(&done) != 1 {
            return Ok(false);
        }
        self.append_audit(&mut tx, audit).await?;
        tx.commit().await?;
        Ok(true)
    }

    async fn reactivate_agent(&self, id: Uuid, audit: &AuditEvent) -> StoreResult<bool> {
        let mut tx = B::begin_write(self).await?;
        let done = sqlx::query("UPDATE agents SET is_active = TRUE, updated_at = $1 WHERE id = $2 AND NOT is_active")
            .bind(self.now())
            .bind(id)
            .execute(&mut *tx)
            .await?;
        if B::rows_affected(&done) == 0 {
            let exists: Option<(bool,)> = sqlx::query_as("SELECT is_active FROM agents WHERE id = $1")
                .bind(id)
                .fetch_optional(&mut *tx)
                .await?;
            exists.ok_or(StoreError::AgentNotFound)?;
            return Ok(false);
        }
        self.append_audit(&mut tx, audit).await?;
        tx.commit().await?;
        Ok(true)
    }
}
