//! The hash-chained audit log. An append reads the chain's head and moves it in one write transaction: under
//! SQLite's single write lock, or with the head row locked (`FOR UPDATE`) on PostgreSQL, so appends of every instance
//! sharing the database are serialised and never read the same head.

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use sqlx::{ColumnIndex, Decode, Encode, Executor, Type};
use uuid::Uuid;

use super::{Backend, SqlStore};
use crate::domain::audit::{self, AuditEntry, AuditKey};
use crate::domain::webhook;
use crate::store::audit::{AUDIT_COLUMNS, AuditRow};
use crate::store::{AuditEvent, AuditStore, StoreError, StoreResult};

#[async_trait]
impl<B> AuditStore for SqlStore<B>
where
    B: Backend,
    for<'c> &'c mut B::Connection: Executor<'c, Database = B>,
    // Ids and entry ids, text (actor, action, canonical detail, hashes) and times; rows read by name, the head by index.
    for<'r> Uuid: Encode<'r, B> + Decode<'r, B> + Type<B>,
    for<'r> String: Encode<'r, B> + Decode<'r, B> + Type<B>,
    for<'r> &'r str: Encode<'r, B> + Type<B>,
    for<'r> i64: Encode<'r, B> + Decode<'r, B> + Type<B>,
    for<'r> DateTime<Utc>: Encode<'r, B> + Decode<'r, B> + Type<B>,
    // A transfer's record, read whole for its `transfer.pending` webhook event.
    for<'r> Vec<u8>: Encode<'r, B> + Decode<'r, B> + Type<B>,
    usize: ColumnIndex<B::Row>,
    for<'r> &'r str: ColumnIndex<B::Row>,
{
    fn use_audit_key(&self, key: AuditKey) {
        if self.audit_key.set(key).is_err() {
            tracing::warn!("the audit key was already set; the first one stays");
        }
    }

    async fn insert_audit(&self, event: &AuditEvent) -> StoreResult<()> {
        let mut tx = B::begin_write(self).await?;
        self.append_audit(&mut tx, event).await?;
        tx.commit().await?;
        Ok(())
    }

    async fn record_outflows(&self, records: &[(Option<Uuid>, &AuditEvent)]) -> StoreResult<()> {
        let mut tx = B::begin_write(self).await?;
        self.record_outflows_in(&mut tx, records).await?;
        tx.commit().await?;
        Ok(())
    }

    async fn list_audit(&self, agent_id: Uuid, before: Option<i64>, limit: i64) -> StoreResult<Vec<AuditEntry>> {
        let sql = format!(
            "SELECT {AUDIT_COLUMNS} FROM audit_events WHERE agent_id = $1 AND id < $2 ORDER BY id DESC LIMIT $3"
        );
        let rows: Vec<AuditRow> = sqlx::query_as(sqlx::AssertSqlSafe(sql))
            .bind(agent_id)
            .bind(before.unwrap_or(i64::MAX))
            .bind(limit)
            .fetch_all(&self.pool)
            .await?;
        Ok(rows.into_iter().map(AuditEntry::from).collect())
    }

    async fn audit_entries_after(&self, after_id: i64, limit: i64) -> StoreResult<Vec<AuditEntry>> {
        let sql = format!("SELECT {AUDIT_COLUMNS} FROM audit_events WHERE id > $1 ORDER BY id LIMIT $2");
        let rows: Vec<AuditRow> = sqlx::query_as(sqlx::AssertSqlSafe(sql))
            .bind(after_id)
            .bind(limit)
            .fetch_all(&self.pool)
            .await?;
        Ok(rows.into_iter().map(AuditEntry::from).collect())
    }

    async fn audit_head(&self) -> StoreResult<(i64, String)> {
        Ok(sqlx::query_as("SELECT entry_id, hash FROM audit_head WHERE id = 1")
            .fetch_one(&self.pool)
            .await?)
    }

    async fn audit_head_entry(&self) -> StoreResult<Option<(i64, String, DateTime<Utc>)>> {
        Ok(sqlx::query_as(
            "SELECT h.entry_id, h.hash, e.created_at FROM audit_head h JOIN audit_events e ON e.id = h.entry_id \
             WHERE h.id = 1",
        )
        .fetch_optional(&self.pool)
        .await?)
    }
}

impl<B> SqlStore<B>
where
    B: Backend,
    for<'c> &'c mut B::Connection: Executor<'c, Database = B>,
    for<'r> Uuid: Encode<'r, B> + Type<B>,
    for<'r> String: Encode<'r, B> + Decode<'r, B> + Type<B>,
    for<'r> &'r str: Encode<'r, B> + Type<B>,
    for<'r> i64: Encode<'r, B> + Decode<'r, B> + Type<B>,
    for<'r> DateTime<Utc>: Encode<'r, B> + Type<B>,
    usize: ColumnIndex<B::Row>,
{
    /// Appends `event` inside the caller's write transaction: reads the head (locked on PostgreSQL), inserts the
    /// entry, hashes it (under `key` from its `keyed_from` on), moves the head.
    pub(super) async fn append_audit(&self, conn: &mut B::Connection, event: &AuditEvent) -> StoreResult<()> {
        let key = self.audit_key.get();
        let head = format!("SELECT entry_id, hash FROM audit_head WHERE id = 1{}", B::ROW_LOCK);
        let (_, prev_hash): (i64, String) = sqlx::query_as(sqlx::AssertSqlSafe(head)).fetch_one(&mut *conn).await?;
        let at = self.now();
        let json = event
            .detail
            .to_json()
            .map_err(|e| StoreError::Corrupt(format!("audit detail: {e}")))?;
        let detail = audit::canonical_json(&json);
        let (id,): (i64,) = sqlx::query_as(
            "INSERT INTO audit_events (agent_id, action, actor, detail, created_at, prev_hash) \
             VALUES ($1, $2, $3, $4, $5, $6) RETURNING id",
        )
        .bind(event.agent_id)
        .bind(event.action().as_str())
        .bind(event.actor.as_str())
        .bind(&detail)
        .bind(at)
        .bind(&prev_hash)
        .fetch_one(&mut *conn)
        .await?;
        let entry = AuditEntry {
            id,
            at,
            agent_id: event.agent_id,
            actor: event.actor.as_str().to_string(),
            action: event.action().to_string(),
            detail,
            prev_hash,
            hash: String::new(),
        };
        let hash = entry.computed_hash(key);
        sqlx::query("UPDATE audit_events SET hash = $1 WHERE id = $2")
            .bind(&hash)
            .bind(id)
            .execute(&mut *conn)
            .await?;
        sqlx::query("UPDATE audit_head SET entry_id = $1, hash = $2 WHERE id = 1")
            .bind(id)
            .bind(&hash)
            .execute(&mut *conn)
            .await?;
        // What the entry reports to webhooks (a policy refusal, a change, an expiry, a fee bump), in its transaction.
        let pushed = webhook::from_audit(event.agent_id, event.actor, &event.detail, at)
            .map_err(|e| StoreError::Corrupt(format!("webhook event of an audit entry: {e}")))?;
        if let Some(pushed) = pushed {
            Self::outbox_in(conn, pushed).await?;
        }
        Ok(())
    }
}
