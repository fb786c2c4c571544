//! Webhooks (§19) in SQL: the endpoints, the outbox written inside the transaction of each change (`outbox_in`,
//! `mark_pending_in`), the fan-out of recorded events to endpoints, and the leased deliveries the worker attempts.
//! Instances share the work through the database: rows are taken with `FOR UPDATE SKIP LOCKED` on PostgreSQL
//! (under SQLite's single writer elsewhere) and a delivery is leased while its attempt runs. An outbox row wakes the
//! workers once committed: `NOTIFY` on PostgreSQL (every instance), the outbox bell in-process on SQLite.

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use serde_json::{Value, json};
use sqlx::{ColumnIndex, Decode, Encode, Executor, Type};
use uuid::Uuid;

use super::{Backend, SqlStore};
use crate::domain::amount::format_units;
use crate::domain::webhook::{self, WebhookEvent};
use crate::store::shared::{self, TX_COLUMNS, TxRow};
use crate::store::webhooks::{
    AttemptOutcome, Delivery, DueDelivery, OutboxWake, Webhook, WebhookAudit, WebhookChange, WebhookStore,
};
use crate::store::{AuditEvent, OutflowEntry, StoreError, StoreResult, StoredTx};
use crate::vault::SealedSecret;

const WEBHOOK_COLUMNS: &str = "id, agent_id, url, events, description, enabled, created_at, updated_at";
const DELIVERY_COLUMNS: &str =
    "id, event_id, type, attempt, status_code, error, response, duration_ms, at, next_attempt_at";

/// A transfer `mark_pending_in` moved, and whether its `transfer.pending` goes out (not a nonce fill, and an enabled
/// endpoint listens to its agent).
#[derive(sqlx::FromRow)]
struct MovedRow {
    #[sqlx(flatten)]
    tx: TxRow,
    heard: i64,
}

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

#[derive(sqlx::FromRow)]
struct DeliveryRow {
    id: i64,
    event_id: Uuid,
    #[sqlx(rename = "type")]
    ty: String,
    attempt: i64,
    status_code: Option<i64>,
    error: Option<String>,
    response: Option<String>,
    duration_ms: i64,
    at: DateTime<Utc>,
    next_attempt_at: Option<DateTime<Utc>>,
}

fn events_text(events: &[String]) -> String {
    serde_json::to_string(events).expect("a list of strings serialises")
}

#[async_trait]
impl<B> WebhookStore for SqlStore<B>
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
    async fn create_webhook(&self, w: &Webhook, secret: &SealedSecret, audit: WebhookAudit<'_>) -> StoreResult<()> {
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

    async fn list_webhooks(&self, agent_id: Option<Uuid>) -> StoreResult<Vec<Webhook>> {
        let sql = format!(
            "SELECT {WEBHOOK_COLUMNS} FROM webhooks WHERE ($1 IS NULL OR agent_id = $1) ORDER BY created_at DESC, id"
        );
        let rows: Vec<WebhookRow> = sqlx::query_as(sqlx::AssertSqlSafe(sql))
            .bind(agent_id)
            .fetch_all(&self.pool)
            .await?;
        rows.into_iter().map(WebhookRow::into_webhook).collect()
    }

    async fn get_webhook(&self, id: Uuid) -> StoreResult<Option<Webhook>> {
        let sql = format!("SELECT {WEBHOOK_COLUMNS} FROM webhooks WHERE id = $1");
        let row: Option<WebhookRow> = sqlx::query_as(sqlx::AssertSqlSafe(sql))
            .bind(id)
            .fetch_optional(&self.pool)
            .await?;
        row.map(WebhookRow::into_webhook).transpose()
    }

    async fn update_webhook(
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

    async fn delete_webhook(&self, id: Uuid, audit: WebhookAudit<'_>) -> StoreResult<bool> {
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

    async fn rotate_webhook_secret(
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

    async fn queue_webhook_test(&self, w: &Webhook) -> StoreResult<Uuid> {
        let id = Uuid::new_v4();
        let now = self.now();
        let data = json!({"webhook_id": w.id, "agent_id": w.agent_id,
            "message": "a test event, sent because POST .../test was called"});
        let body = webhook::body("webhook.test", now, &data);
        let mut tx = B::begin_write(self).await?;
        sqlx::query(
            "INSERT INTO webhook_events (id, type, agent_id, body, fanned_at, created_at) \
             VALUES ($1, 'webhook.test', $2, $3, $4, $4)",
        )
        .bind(id)
        .bind(w.agent_id)
        .bind(body)
        .bind(now)
        .execute(&mut *tx)
        .await?;
        Self::insert_job(&mut tx, w.id, id, now).await?;
        tx.commit().await?;
        self.outbox.ring();
        Ok(id)
    }

    async fn list_deliveries(&self, webhook_id: Uuid, before: Option<i64>, limit: i64) -> StoreResult<Vec<Delivery>> {
        let sql = format!(
            "SELECT {DELIVERY_COLUMNS} FROM webhook_deliveries WHERE webhook_id = $1 AND id < $2 \
             ORDER BY id DESC LIMIT $3"
        );
        let rows: Vec<DeliveryRow> = sqlx::query_as(sqlx::AssertSqlSafe(sql))
            .bind(webhook_id)
            .bind(before.unwrap_or(i64::MAX))
            .bind(limit)
            .fetch_all(&self.pool)
            .await?;
        Ok(rows
            .into_iter()
            .map(|r| Delivery {
                id: r.id,
                event_id: r.event_id,
                ty: r.ty,
                attempt: r.attempt,
                status_code: r.status_code,
                error: r.error,
                response: r.response,
                duration_ms: r.duration_ms,
                at: r.at,
                next_attempt_at: r.next_attempt_at,
            })
            .collect())
    }

    async fn redeliver(&self, w: &Webhook, event_id: Uuid) -> StoreResult<bool> {
        let now = self.now();
        let mut tx = B::begin_write(self).await?;
        let done = sqlx::query(
            "UPDATE webhook_jobs SET state = 'pending', round = 0, next_at = $1 WHERE webhook_id = $2 AND event_id = $3",
        )
        .bind(now)
        .bind(w.id)
        .bind(event_id)
        .execute(&mut *tx)
        .await?;
        if B::rows_affected(&done) == 0 {
            // An event recorded before the endpoint subscribed to it (or existed) may be sent too, if it is one of
            // the endpoint's agent's.
            let event: Option<(String, Option<Uuid>)> =
                sqlx::query_as("SELECT type, agent_id FROM webhook_events WHERE id = $1")
                    .bind(event_id)
                    .fetch_optional(&mut *tx)
                    .await?;
            let allowed = match event {
                Some((ty, _)) if ty == "webhook.test" => false,
                Some((_, agent)) => w.agent_id.is_none() || w.agent_id == agent,
                None => false,
            };
            if !allowed {
                return Ok(false);
            }
            Self::insert_job(&mut tx, w.id, event_id, now).await?;
        }
        tx.commit().await?;
        self.outbox.ring();
        Ok(true)
    }

    async fn fan_out_webhook_events(&self, limit: i64) -> StoreResult<usize> {
        // A read first: an idle worker takes no write turn (SQLite has one writer for everything).
        let waiting: Option<(Uuid,)> = sqlx::query_as("SELECT id FROM webhook_events WHERE fanned_at IS NULL LIMIT 1")
            .fetch_optional(&self.pool)
            .await?;
        if waiting.is_none() {
            return Ok(0);
        }
        let mut tx = B::begin_write(self).await?;
        let sql = format!(
            "SELECT id, type, agent_id FROM webhook_events WHERE fanned_at IS NULL ORDER BY created_at LIMIT $1{}",
            B::SKIP_LOCKED
        );
        let events: Vec<(Uuid, String, Option<Uuid>)> = sqlx::query_as(sqlx::AssertSqlSafe(sql))
            .bind(limit)
            .fetch_all(&mut *tx)
            .await?;
        if events.is_empty() {
            return Ok(0);
        }
        let now = self.now();
        for (id, ty, agent_id) in &events {
            let endpoints: Vec<(Uuid, String)> = sqlx::query_as(
                "SELECT id, events FROM webhooks WHERE enabled = TRUE AND (agent_id IS NULL OR agent_id = $1)",
            )
            .bind(*agent_id)
            .fetch_all(&mut *tx)
            .await?;
            for (webhook_id, events) in endpoints {
                let events: Vec<String> = serde_json::from_str(&events).unwrap_or_default();
                if webhook::subscribed(&events, ty) {
                    Self::insert_job(&mut tx, webhook_id, *id, now).await?;
                }
            }
            sqlx::query("UPDATE webhook_events SET fanned_at = $1 WHERE id = $2")
                .bind(now)
                .bind(*id)
                .execute(&mut *tx)
                .await?;
        }
        tx.commit().await?;
        Ok(events.len())
    }

    async fn claim_deliveries(
        &self,
        now: DateTime<Utc>,
        lease: chrono::TimeDelta,
        limit: i64,
    ) -> StoreResult<Vec<DueDelivery>> {
        let due: Option<(Uuid,)> = sqlx::query_as(
            "SELECT webhook_id FROM webhook_jobs WHERE state = 'pending' AND next_at <= $1 \
             AND (lease_until IS NULL OR lease_until < $1) LIMIT 1",
        )
        .bind(now)
        .fetch_optional(&self.pool)
        .await?;
        if due.is_none() {
            return Ok(Vec::new());
        }
        let mut tx = B::begin_write(self).await?;
        let sql = format!(
            "SELECT webhook_id, event_id, attempts, round FROM webhook_jobs \
             WHERE state = 'pending' AND next_at <= $1 AND (lease_until IS NULL OR lease_until < $1) \
             AND webhook_id IN (SELECT id FROM webhooks WHERE enabled = TRUE) \
             ORDER BY next_at LIMIT $2{}",
            B::SKIP_LOCKED
        );
        let jobs: Vec<(Uuid, Uuid, i64, i64)> = sqlx::query_as(sqlx::AssertSqlSafe(sql))
            .bind(now)
            .bind(limit)
            .fetch_all(&mut *tx)
            .await?;
        let mut due = Vec::with_capacity(jobs.len());
        for (webhook_id, event_id, attempts, round) in jobs {
            sqlx::query("UPDATE webhook_jobs SET lease_until = $1 WHERE webhook_id = $2 AND event_id = $3")
                .bind(now + lease)
                .bind(webhook_id)
                .bind(event_id)
                .execute(&mut *tx)
                .await?;
            let row: Option<(String, i32, Vec<u8>, Vec<u8>, String, String)> = sqlx::query_as(
                "SELECT w.url, w.secret_version, w.secret_ciphertext, w.secret_nonce, e.type, e.body \
                 FROM webhooks w, webhook_events e WHERE w.id = $1 AND e.id = $2",
            )
            .bind(webhook_id)
            .bind(event_id)
            .fetch_optional(&mut *tx)
            .await?;
            let Some((url, key_version, ciphertext, nonce, ty, body)) = row else {
                continue;
            };
            due.push(DueDelivery {
                webhook_id,
                event_id,
                ty,
                url,
                secret: SealedSecret {
                    key_version,
                    ciphertext,
                    nonce,
                },
                body,
                attempts,
                round,
            });
        }
        tx.commit().await?;
        Ok(due)
    }

    async fn record_attempts(
        &self,
        done: &[(DueDelivery, AttemptOutcome)],
        disable_after: chrono::TimeDelta,
    ) -> StoreResult<Vec<Uuid>> {
        if done.is_empty() {
            return Ok(Vec::new());
        }
        // One commit for every attempt that finished meanwhile: under a burst, the worker's writes stay few.
        let mut tx = B::begin_write(self).await?;
        let mut disabled = Vec::new();
        // Endpoints in one order, so that two instances' batches take their rows in the same order.
        let mut done: Vec<&(DueDelivery, AttemptOutcome)> = done.iter().collect();
        done.sort_by_key(|(due, _)| due.webhook_id);
        for (due, outcome) in done {
            if self.record_in(&mut tx, due, outcome, disable_after).await? {
                disabled.push(due.webhook_id);
            }
        }
        tx.commit().await?;
        Ok(disabled)
    }

    async fn outbox_wake(&self) -> OutboxWake {
        OutboxWake::new(self.outbox.clone(), B::outbox_listener(self).await)
    }
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
    /// One attempt logged and its delivery moved on, inside the caller's transaction; answers whether the endpoint
    /// was disabled by it. Nothing is logged for an endpoint deleted meanwhile (its log went with it).
    async fn record_in(
        &self,
        tx: &mut B::Connection,
        due: &DueDelivery,
        o: &AttemptOutcome,
        disable_after: chrono::TimeDelta,
    ) -> StoreResult<bool> {
        // The endpoint's row first, as its deletion takes it (the endpoint, then its deliveries): an attempt recorded
        // while the endpoint is deleted waits for the deletion or the deletion for it, never each for the other.
        // A delivery clears the endpoint's failing streak; a failure starts one unless it runs already.
        let touched = sqlx::query(
            "UPDATE webhooks SET failing_since = CASE WHEN $1 THEN NULL ELSE COALESCE(failing_since, $2) END \
             WHERE id = $3",
        )
        .bind(o.delivered)
        .bind(o.at)
        .bind(due.webhook_id)
        .execute(&mut *tx)
        .await?;
        if B::rows_affected(&touched) == 0 {
            return Ok(false);
        }
        sqlx::query(
            "INSERT INTO webhook_deliveries (webhook_id, event_id, type, attempt, status_code, error, response, \
             duration_ms, at, next_attempt_at) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10)",
        )
        .bind(due.webhook_id)
        .bind(due.event_id)
        .bind(&due.ty)
        .bind(due.attempts + 1)
        .bind(o.status_code)
        .bind(o.error.clone())
        .bind(o.response.clone())
        .bind(o.duration_ms)
        .bind(o.at)
        .bind(o.next_at)
        .execute(&mut *tx)
        .await?;
        let state = match (o.delivered, o.next_at) {
            (true, _) => "delivered",
            (false, Some(_)) => "pending",
            (false, None) => "failed",
        };
        sqlx::query(
            "UPDATE webhook_jobs SET state = $1, attempts = attempts + 1, round = round + 1, next_at = $2, \
             lease_until = NULL WHERE webhook_id = $3 AND event_id = $4",
        )
        .bind(state)
        .bind(o.next_at.unwrap_or(o.at))
        .bind(due.webhook_id)
        .bind(due.event_id)
        .execute(&mut *tx)
        .await?;
        let mut disabled = false;
        if !o.delivered {
            let done = sqlx::query(
                "UPDATE webhooks SET enabled = FALSE, updated_at = $1 \
                 WHERE id = $2 AND enabled = TRUE AND failing_since <= $3",
            )
            .bind(o.at)
            .bind(due.webhook_id)
            .bind(o.at - disable_after)
            .execute(&mut *tx)
            .await?;
            disabled = B::rows_affected(&done) == 1;
            if disabled {
                let agent: Option<(Option<Uuid>, String)> =
                    sqlx::query_as("SELECT agent_id, url FROM webhooks WHERE id = $1")
                        .bind(due.webhook_id)
                        .fetch_optional(&mut *tx)
                        .await?;
                if let Some((Some(agent_id), url)) = agent {
                    let disabled = crate::domain::audit::detail::WebhookDisabled {
                        webhook_id: due.webhook_id,
                        url: crate::store::webhooks::url_shown(&url),
                        reason: "every attempt failed for 24 hours".into(),
                    };
                    let event = AuditEvent::new(
                        agent_id,
                        crate::domain::audit::Actor::System,
                        crate::domain::audit::Detail::WebhookDisabled(disabled),
                    );
                    self.append_audit(&mut *tx, &event).await?;
                }
            }
        }
        Ok(disabled)
    }
}

impl<B> SqlStore<B>
where
    B: Backend,
    for<'c> &'c mut B::Connection: Executor<'c, Database = B>,
    for<'r> Uuid: Encode<'r, B> + Type<B>,
    for<'r> &'r str: Encode<'r, B> + Type<B>,
    for<'r> DateTime<Utc>: Encode<'r, B> + Type<B>,
{
    async fn insert_job(
        conn: &mut B::Connection,
        webhook_id: Uuid,
        event_id: Uuid,
        now: DateTime<Utc>,
    ) -> StoreResult<()> {
        sqlx::query(
            "INSERT INTO webhook_jobs (webhook_id, event_id, state, attempts, round, next_at) \
             VALUES ($1, $2, 'pending', 0, 0, $3) ON CONFLICT DO NOTHING",
        )
        .bind(webhook_id)
        .bind(event_id)
        .bind(now)
        .execute(&mut *conn)
        .await?;
        Ok(())
    }
}

impl<B> SqlStore<B>
where
    B: Backend,
    for<'c> &'c mut B::Connection: Executor<'c, Database = B>,
    for<'r> Uuid: Encode<'r, B> + Type<B>,
    for<'r> String: Encode<'r, B> + Decode<'r, B> + Type<B>,
    for<'r> &'r str: Encode<'r, B> + Type<B>,
    for<'r> i64: Decode<'r, B> + Type<B>,
    for<'r> DateTime<Utc>: Encode<'r, B> + Type<B>,
    usize: ColumnIndex<B::Row>,
{
    /// Records `event` in the outbox inside the caller's transaction (the change it reports), unless no enabled
    /// endpoint could receive it; a transfer's `kind` is added when the event does not carry it.
    pub(super) async fn outbox_in(conn: &mut B::Connection, event: WebhookEvent) -> StoreResult<()> {
        let listening: Option<(i64,)> = sqlx::query_as(
            "SELECT CAST(1 AS BIGINT) FROM webhooks WHERE enabled = TRUE AND (agent_id IS NULL OR agent_id = $1) LIMIT 1",
        )
        .bind(event.agent_id)
        .fetch_optional(&mut *conn)
        .await?;
        if listening.is_none() {
            return Ok(());
        }
        let mut event = event;
        if let Some(transfer_id) = event.transfer_id()
            && (event.data.get("kind").is_none() || event.data.get("to").is_none())
        {
            let facts: Option<(String, String)> = sqlx::query_as(
                "SELECT CASE WHEN call_record IS NOT NULL THEN 'call' ELSE kind END, to_address FROM transactions \
                 WHERE id = $1 UNION ALL SELECT CASE WHEN call_record IS NOT NULL THEN 'call' ELSE kind END, \
                 to_address FROM approvals WHERE id = $1",
            )
            .bind(transfer_id)
            .fetch_optional(&mut *conn)
            .await?;
            if let Some((kind, to)) = facts {
                let to = to
                    .parse::<alloy::primitives::Address>()
                    .map_or(to, |a| a.to_checksum(None));
                let map = event.data.as_object_mut().expect("event data is an object");
                map.entry("kind").or_insert(Value::String(kind));
                map.entry("to").or_insert(Value::String(to));
            }
        }
        Self::insert_outbox(conn, std::slice::from_ref(&event)).await
    }

    /// Inserts `events` in the outbox (one statement per `ROWS_PER_STATEMENT`; one already there by its id or
    /// `dedup` is skipped) and wakes the delivery workers once when any row went in.
    async fn insert_outbox(conn: &mut B::Connection, events: &[WebhookEvent]) -> StoreResult<()> {
        let mut inserted = 0;
        for chunk in events.chunks(shared::ROWS_PER_STATEMENT) {
            let sql = format!(
                "INSERT INTO webhook_events (id, type, agent_id, body, dedup, created_at) VALUES {} \
                 ON CONFLICT DO NOTHING",
                shared::value_rows(chunk.len(), &["?", "?", "?", "?", "NULLIF(?, '')", "?"])
            );
            let mut insert = sqlx::query(sqlx::AssertSqlSafe(sql));
            for event in chunk {
                insert = insert
                    .bind(event.id)
                    .bind(event.ty)
                    .bind(event.agent_id)
                    .bind(event.body())
                    .bind(event.dedup.clone().unwrap_or_default())
                    .bind(event.at);
            }
            inserted += B::rows_affected(&insert.execute(&mut *conn).await?);
        }
        if inserted > 0 {
            B::notify_outbox(conn).await?;
        }
        Ok(())
    }
}

impl<B> SqlStore<B>
where
    B: Backend,
    for<'c> &'c mut B::Connection: Executor<'c, Database = B>,
    for<'r> Uuid: Encode<'r, B> + Decode<'r, B> + Type<B>,
    for<'r> String: Encode<'r, B> + Decode<'r, B> + Type<B>,
    for<'r> &'r str: Encode<'r, B> + Type<B>,
    for<'r> i64: Encode<'r, B> + Decode<'r, B> + Type<B>,
    for<'r> DateTime<Utc>: Encode<'r, B> + Decode<'r, B> + Type<B>,
    for<'r> Vec<u8>: Encode<'r, B> + Decode<'r, B> + Type<B>,
    usize: ColumnIndex<B::Row>,
    for<'r> &'r str: ColumnIndex<B::Row>,
{
    /// `AuditStore::record_outflows` in `conn`'s transaction (also a reservation round's, `Reserving`): the kept
    /// entries they take the place of dropped (`take_owed_in`), the accepted transfers marked `pending`
    /// (`mark_pending_in`), then the entries appended (`append_audits`) but those whose kept one was written
    /// already, each part in a few statements whatever the number of records.
    pub(super) async fn record_outflows_in(
        &self,
        conn: &mut B::Connection,
        records: &[&OutflowEntry],
    ) -> StoreResult<()> {
        let owes: Vec<Uuid> = records.iter().filter_map(|r| r.owes).collect();
        let taken = self.take_owed_in(conn, &owes).await?;
        let accepted: Vec<Uuid> = records.iter().filter_map(|r| r.accepted).collect();
        self.mark_pending_in(conn, &accepted).await?;
        let entries: Vec<&AuditEvent> = records
            .iter()
            .filter(|r| r.owes.is_none_or(|id| taken.contains(&id)))
            .map(|r| &r.event)
            .collect();
        self.append_audits(conn, &entries).await
    }

    /// Drops the kept entries of transfers `ids`; the ids whose entry was still kept (the others' were written by
    /// `write_owed`, or their rows are gone).
    pub(super) async fn take_owed_in(&self, conn: &mut B::Connection, ids: &[Uuid]) -> StoreResult<Vec<Uuid>> {
        let mut taken = Vec::with_capacity(ids.len());
        for chunk in ids.chunks(shared::ROWS_PER_STATEMENT) {
            let sql = format!(
                "UPDATE transactions SET audit_owed = NULL WHERE audit_owed IS NOT NULL AND id IN ({}) RETURNING id",
                shared::placeholders(1, chunk.len())
            );
            let mut update = sqlx::query_as(sqlx::AssertSqlSafe(sql));
            for id in chunk {
                update = update.bind(*id);
            }
            let rows: Vec<(Uuid,)> = update.fetch_all(&mut *conn).await?;
            taken.extend(rows.into_iter().map(|(id,)| id));
        }
        Ok(taken)
    }

    /// Transfers `ids` `signed` -> `pending` (the node accepted them, or their x402 authorizations were sent), with
    /// the `transfer.pending` event of each that moved, once per transfer (a fee bump marks it pending again), none
    /// for a nonce fill, and only for an agent an enabled endpoint listens to: one statement per
    /// `ROWS_PER_STATEMENT` of them returns the rows it moved with whether each is announced and heard, then one
    /// inserts the events and one wakes the deliverer. Nothing for one no longer `signed`.
    pub(super) async fn mark_pending_in(&self, conn: &mut B::Connection, ids: &[Uuid]) -> StoreResult<()> {
        for chunk in ids.chunks(shared::ROWS_PER_STATEMENT) {
            let sql = format!(
                "UPDATE transactions SET status = 'pending', updated_at = $1 WHERE status = 'signed' AND id IN ({}) \
                 RETURNING {TX_COLUMNS}, CASE WHEN fills IS NULL AND EXISTS (SELECT 1 FROM webhooks w \
                 WHERE w.enabled = TRUE AND (w.agent_id IS NULL OR w.agent_id = transactions.agent_id)) \
                 THEN CAST(1 AS BIGINT) ELSE CAST(0 AS BIGINT) END AS heard",
                shared::placeholders(2, chunk.len())
            );
            let mut update = sqlx::query_as(sqlx::AssertSqlSafe(sql)).bind(self.now());
            for id in chunk {
                update = update.bind(*id);
            }
            let moved: Vec<MovedRow> = update.fetch_all(&mut *conn).await?;
            let heard = moved.into_iter().filter(|m| m.heard == 1).map(|m| m.tx);
            let mut transfers = shared::convert(heard.collect(), TxRow::into_tx)?;
            transfers.sort_by_key(|tx| chunk.iter().position(|id| *id == tx.id));
            let events: Vec<WebhookEvent> = transfers.iter().map(|tx| self.pending_event(tx)).collect();
            Self::insert_outbox(conn, &events).await?;
        }
        Ok(())
    }

    /// The `transfer.pending` event of `tx`, which the node just accepted (or whose x402 authorization was just sent).
    fn pending_event(&self, tx: &StoredTx) -> WebhookEvent {
        let mut data = json!({
            "transfer_id": tx.id,
            "kind": tx.kind(),
            "conversation_id": tx.conversation_id,
            "chain": tx.chain,
            "asset": tx.asset,
            "amount": format_units(tx.value_wei, tx.decimals()),
            "to": tx.to.to_checksum(None),
            "tx_hash": tx.tx_hash().unwrap_or_default(),
            "nonce": tx.nonce().unwrap_or_default(),
            "status": "pending",
        });
        if let Some(record) = tx.body.x402() {
            data["tx_hash"] = json!(record.settlement_tx);
            data["url"] = json!(record.url);
        }
        let mut event = WebhookEvent::new("transfer.pending", tx.agent_id, data, self.now());
        event.dedup = Some(format!("transfer.pending:{}", tx.id));
        event
    }
}
