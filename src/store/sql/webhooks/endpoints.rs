//! Webhook endpoints (§19) in SQL: created, listed, read, updated, deleted and their secret rotated, each change
//! audited in its transaction.

use chrono::{DateTime, Utc};
use sqlx::{ColumnIndex, Decode, Encode, Executor, Type};
use uuid::Uuid;

use super::super::{Backend, SqlStore};
use crate::store::webhooks::{Webhook, WebhookAudit, WebhookChange};
use crate::store::{StoreError, StoreResult};
use crate::vault::SealedSecret;

const WEBHOOK_COLUMNS: &str = "id, agent_id, url, events, description, enabled, created_at, updated_at";

#[derive(sqlx::FromRow)]
struct WebhookRow {
    id: Uuid,
    agent_id: Option<Uuid>,
    url: String,
    events: String,
    description: Option<String>,
    enabled: bool,
    created_at: DateTime<Utc>,
    updated_at: DateTime<Utc>,
}

impl WebhookRow {
    fn into_webhook(self) -> StoreResult<Webhook> {
        let events: Vec<String> =
            serde_json::from_str(&self.events).map_err(|e| StoreError::Corrupt(format!("webhooks.events: {e}")))?;
        Ok(Webhook {
            id: self.id,
            agent_id: self.agent_id,
            url: self.url,
            events,
            description: self.description,
            enabled: self.enabled,
            created_at: self.created_at,
            updated_at: self.updated_at,
        })
    }
}

fn events_text(events: &[String]) -> String {
    serde_json::to_string(events).expect("a list of strings serialises")
}

impl<B> SqlStore<B>
where
    B: Backend,
    for<'c> &'c mut B::Connection: Executor<'c, Database = B>,
    for<'r> Uuid: Encode<'r, B> + Decode<'r, B> + Type<B>,
    for<'r> String: Encode<'r, B> + Decode<'r, B> + Type<B>,
    for<'r> &'r str: Encode<'r, B> + Type<B>,
    for<'r> i64: Encode<'r, B> + Decode<'r, B> + Type<B>,
    for<'r> i32: Encode<'r, B> + Decode<'r, B> + Type<B>,
    for<'r> bool: Encode<'r, B> + Decode<'r, B> + Type<B>,
    for<'r> DateTime<Utc>: Encode<'r, B> + Decode<'r, B> + Type<B>,
    for<'r> Vec<u8>: Encode<'r, B> + Decode<'r, B> + Type<B>,
    for<'r> Option<Uuid>: Encode<'r, B> + Decode<'r, B>,
    for<'r> Option<String>: Encode<'r, B> + Decode<'r, B>,
    for<'r> Option<i64>: Encode<'r, B> + Decode<'r, B>,
    for<'r> Option<DateTime<Utc>>: Encode<'r, B> + Decode<'r, B>,
    usize: ColumnIndex<B::Row>,
    for<'r> &'r str: ColumnIndex<B::Row>,
{
    pub(super) async fn create_endpoint(
        &self,
        w: &Webhook,
        secret: &SealedSecret,
        audit: WebhookAudit<'_>,
    ) -> StoreResult<()> {
        let mut tx = B::begin_write(self).await?;
        sqlx::query(
            "INSERT INTO webhooks (id, agent_id, url, events, description, enabled, secret_version, \
             secret_ciphertext, secret_nonce, created_at, updated_at) \
             VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11)",
        )
        .bind(w.id)
        .bind(w.agent_id)
        .bind(&w.url)
        .bind(events_text(&w.events))
        .bind(w.description.clone())
        .bind(w.enabled)
        .bind(secret.key_version)
        .bind(&secret.ciphertext)
        .bind(&secret.nonce)
        .bind(w.created_at)
        .bind(w.updated_at)
        .execute(&mut *tx)
        .await?;
        if let Some(event) = audit {
            self.append_audit(&mut tx, event).await?;
        }
        tx.commit().await?;
        Ok(())
    }

    pub(super) async fn list_endpoints(&self, agent_id: Option<Uuid>) -> StoreResult<Vec<Webhook>> {
        let sql = format!(
            "SELECT {WEBHOOK_COLUMNS} FROM webhooks WHERE ($1 IS NULL OR agent_id = $1) ORDER BY created_at DESC, id"
        );
        let rows: Vec<WebhookRow> = sqlx::query_as(sqlx::AssertSqlSafe(sql))
            .bind(agent_id)
            .fetch_all(&self.pool)
            .await?;
        rows.into_iter().map(WebhookRow::into_webhook).collect()
    }

    pub(super) async fn get_endpoint(&self, id: Uuid) -> StoreResult<Option<Webhook>> {
        let sql = format!("SELECT {WEBHOOK_COLUMNS} FROM webhooks WHERE id = $1");
        let row: Option<WebhookRow> = sqlx::query_as(sqlx::AssertSqlSafe(sql))
            .bind(id)
            .fetch_optional(&self.pool)
            .await?;
        row.map(WebhookRow::into_webhook).transpose()
    }

    pub(super) async fn update_endpoint(
        &self,
        id: Uuid,
        change: &WebhookChange,
        audit: WebhookAudit<'_>,
    ) -> StoreResult<Option<Webhook>> {
        let mut tx = B::begin_write(self).await?;
        let sql = format!("SELECT {WEBHOOK_COLUMNS} FROM webhooks WHERE id = $1{}", B::ROW_LOCK);
        let row: Option<WebhookRow> = sqlx::query_as(sqlx::AssertSqlSafe(sql))
            .bind(id)
            .fetch_optional(&mut *tx)
            .await?;
        let Some(mut w) = row.map(WebhookRow::into_webhook).transpose()? else {
            return Ok(None);
        };
        let enabling = change.enabled == Some(true) && !w.enabled;
        if let Some(url) = &change.url {
            w.url = url.clone();
        }
        if let Some(events) = &change.events {
            w.events = events.clone();
        }
        if let Some(enabled) = change.enabled {
            w.enabled = enabled;
        }
        if let Some(description) = &change.description {
            w.description = description.clone();
        }
        w.updated_at = self.now();
        sqlx::query(
            "UPDATE webhooks SET url = $1, events = $2, enabled = $3, description = $4, updated_at = $5 WHERE id = $6",
        )
        .bind(&w.url)
        .bind(events_text(&w.events))
        .bind(w.enabled)
        .bind(w.description.clone())
        .bind(w.updated_at)
        .bind(id)
        .execute(&mut *tx)
        .await?;
        if enabling {
            sqlx::query("UPDATE webhooks SET failing_since = NULL WHERE id = $1")
                .bind(id)
                .execute(&mut *tx)
                .await?;
        }
        if let Some(event) = audit {
            self.append_audit(&mut tx, event).await?;
        }
        tx.commit().await?;
        Ok(Some(w))
    }

    pub(super) async fn delete_endpoint(&self, id: Uuid, audit: WebhookAudit<'_>) -> StoreResult<bool> {
        let mut tx = B::begin_write(self).await?;
        let done = sqlx::query("DELETE FROM webhooks WHERE id = $1")
            .bind(id)
            .execute(&mut *tx)
            .await?;
        if B::rows_affected(&done) != 1 {
            return Ok(false);
        }
        for table in ["webhook_jobs", "webhook_deliveries"] {
            sqlx::query(sqlx::AssertSqlSafe(format!(
                "DELETE FROM {table} WHERE webhook_id = $1"
            )))
            .bind(id)
            .execute(&mut *tx)
            .await?;
        }
        if let Some(event) = audit {
            self.append_audit(&mut tx, event).await?;
        }
        tx.commit().await?;
        Ok(true)
    }

    pub(super) async fn rotate_endpoint_secret(
        &self,
        id: Uuid,
        secret: &SealedSecret,
        audit: WebhookAudit<'_>,
    ) -> StoreResult<bool> {
        let mut tx = B::begin_write(self).await?;
        let done = sqlx::query(
            "UPDATE webhooks SET secret_version = $1, secret_ciphertext = $2, secret_nonce = $3, updated_at = $4 \
             WHERE id = $5",
        )
        .bind(secret.key_version)
        .bind(&secret.ciphertext)
        .bind(&secret.nonce)
        .bind(self.now())
        .bind(id)
        .execute(&mut *tx)
        .await?;
        if B::rows_affected(&done) != 1 {
            return Ok(false);
        }
        if let Some(event) = audit {
            self.append_audit(&mut tx, event).await?;
        }
        tx.commit().await?;
        Ok(true)
    }
}
