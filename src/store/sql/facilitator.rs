//! Facilitator tokens (§23): created and deleted with their audit entries in one transaction, listed, and looked up
//! by hash with their `last_used_at` moved in the same statement.

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use sqlx::{ColumnIndex, Decode, Encode, Executor, Type};
use uuid::Uuid;

use super::{Backend, SqlStore};
use crate::store::facilitator::{DeletedAudit, FacilitatorToken, FacilitatorTokenStore, NewFacilitatorToken};
use crate::store::{AuditEvent, StoreResult};

/// What a token is shown with; never its hash.
const COLUMNS: &str = "id, agent_id, prefix, created_at, last_used_at";

#[derive(sqlx::FromRow)]
struct TokenRow {
    id: Uuid,
    agent_id: Uuid,
    prefix: String,
    created_at: DateTime<Utc>,
    last_used_at: Option<DateTime<Utc>>,
}

impl From<TokenRow> for FacilitatorToken {
    fn from(row: TokenRow) -> Self {
        FacilitatorToken {
            id: row.id,
            agent_id: row.agent_id,
            prefix: row.prefix,
            created_at: row.created_at,
            last_used_at: row.last_used_at,
        }
    }
}

#[async_trait]
impl<B> FacilitatorTokenStore for SqlStore<B>
where
    B: Backend,
    for<'c> &'c mut B::Connection: Executor<'c, Database = B>,
    // Ids, hashes and times bound and read back by column name; the audit entry as `append_audit` writes it.
    for<'r> Uuid: Encode<'r, B> + Decode<'r, B> + Type<B>,
    for<'r> String: Encode<'r, B> + Decode<'r, B> + Type<B>,
    for<'r> &'r str: Encode<'r, B> + Type<B>,
    for<'r> i64: Encode<'r, B> + Decode<'r, B> + Type<B>,
    for<'r> DateTime<Utc>: Encode<'r, B> + Decode<'r, B> + Type<B>,
    for<'r> Option<DateTime<Utc>>: Decode<'r, B>,
    usize: ColumnIndex<B::Row>,
    for<'r> &'r str: ColumnIndex<B::Row>,
{
    async fn create_facilitator_token(
        &self,
        new: &NewFacilitatorToken,
        audit: &AuditEvent,
    ) -> StoreResult<FacilitatorToken> {
        let now = self.now();
        let mut tx = B::begin_write(self).await?;
        sqlx::query(
            "INSERT INTO facilitator_tokens (id, agent_id, token_hash, prefix, created_at) VALUES ($1, $2, $3, $4, $5)",
        )
        .bind(new.id)
        .bind(new.agent_id)
        .bind(&new.token_hash)
        .bind(&new.prefix)
        .bind(now)
        .execute(&mut *tx)
        .await?;
        self.append_audit(&mut tx, audit).await?;
        tx.commit().await?;
        Ok(FacilitatorToken {
            id: new.id,
            agent_id: new.agent_id,
            prefix: new.prefix.clone(),
            created_at: now,
            last_used_at: None,
        })
    }

    async fn facilitator_tokens(&self, agent_id: Uuid) -> StoreResult<Vec<FacilitatorToken>> {
        let sql = format!(
            "SELECT {COLUMNS} FROM facilitator_tokens WHERE agent_id = $1 AND deleted_at IS NULL \
             ORDER BY created_at, id"
        );
        let rows: Vec<TokenRow> = sqlx::query_as(sqlx::AssertSqlSafe(sql))
            .bind(agent_id)
            .fetch_all(&self.pool)
            .await?;
        Ok(rows.into_iter().map(FacilitatorToken::from).collect())
    }

    async fn delete_facilitator_token(
        &self,
        agent_id: Uuid,
        id: Uuid,
        audit: DeletedAudit<'_>,
    ) -> StoreResult<Option<FacilitatorToken>> {
        let mut tx = B::begin_write(self).await?;
        let sql = format!(
            "UPDATE facilitator_tokens SET deleted_at = $1 WHERE id = $2 AND agent_id = $3 AND deleted_at IS NULL \
             RETURNING {COLUMNS}"
        );
        let row: Option<TokenRow> = sqlx::query_as(sqlx::AssertSqlSafe(sql))
            .bind(self.now())
            .bind(id)
            .bind(agent_id)
            .fetch_optional(&mut *tx)
            .await?;
        let Some(deleted) = row.map(FacilitatorToken::from) else {
            return Ok(None);
        };
        self.append_audit(&mut tx, &audit(&deleted)).await?;
        tx.commit().await?;
        Ok(Some(deleted))
    }

    async fn use_facilitator_token(&self, agent_id: Uuid, token_hash: &str) -> StoreResult<Option<FacilitatorToken>> {
        // A read first: a token nobody issued (a stranger guessing) or another agent's costs no write.
        let sql = format!("SELECT {COLUMNS} FROM facilitator_tokens WHERE token_hash = $1 AND deleted_at IS NULL");
        let known: Option<TokenRow> = sqlx::query_as(sqlx::AssertSqlSafe(sql))
            .bind(token_hash)
            .fetch_optional(&self.pool)
            .await?;
        match known {
            Some(row) if row.agent_id == agent_id => {}
            other => return Ok(other.map(FacilitatorToken::from)),
        }
        let mut tx = B::begin_write(self).await?;
        let sql = format!(
            "UPDATE facilitator_tokens SET last_used_at = $1 WHERE token_hash = $2 AND deleted_at IS NULL \
             RETURNING {COLUMNS}"
        );
        let row: Option<TokenRow> = sqlx::query_as(sqlx::AssertSqlSafe(sql))
            .bind(self.now())
            .bind(token_hash)
            .fetch_optional(&mut *tx)
            .await?;
        tx.commit().await?;
        Ok(row.map(FacilitatorToken::from))
    }
}
