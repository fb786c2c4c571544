//! An endpoint's deliveries (§19) in SQL: a test event queued, the log of attempts read, an event delivered again;
//! the job row that queues an event for an endpoint.

use chrono::{DateTime, Utc};
use serde_json::json;
use sqlx::{ColumnIndex, Decode, Encode, Executor, Type};
use uuid::Uuid;

use super::super::{Backend, SqlStore};
use crate::domain::webhook;
use crate::store::StoreResult;
use crate::store::webhooks::{Delivery, Webhook};

const DELIVERY_COLUMNS: &str =
    "id, event_id, type, attempt, status_code, error, response, duration_ms, at, next_attempt_at";

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
    pub(super) async fn queue_test_delivery(&self, w: &Webhook) -> StoreResult<Uuid> {
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

    pub(super) async fn delivery_log(
        &self,
        webhook_id: Uuid,
        before: Option<i64>,
        limit: i64,
    ) -> StoreResult<Vec<Delivery>> {
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

    pub(super) async fn redeliver_event(&self, w: &Webhook, event_id: Uuid) -> StoreResult<bool> {
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
}

impl<B> SqlStore<B>
where
    B: Backend,
    for<'c> &'c mut B::Connection: Executor<'c, Database = B>,
    for<'r> Uuid: Encode<'r, B> + Type<B>,
    for<'r> &'r str: Encode<'r, B> + Type<B>,
    for<'r> DateTime<Utc>: Encode<'r, B> + Type<B>,
{
    pub(super) async fn insert_job(
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
