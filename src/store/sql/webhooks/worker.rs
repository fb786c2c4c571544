//! The delivery worker's side of webhooks (§19) in SQL: recorded events fanned out to the endpoints that listen,
//! due deliveries leased (`FOR UPDATE SKIP LOCKED` on PostgreSQL), and the attempts' outcomes logged with the
//! deliveries moved on (an endpoint disabled after too many failures).

use chrono::{DateTime, Utc};
use sqlx::{ColumnIndex, Decode, Encode, Executor, Type};
use uuid::Uuid;

use super::super::{Backend, SqlStore};
use crate::domain::webhook;
use crate::store::webhooks::{AttemptOutcome, DueDelivery};
use crate::store::{AuditEvent, StoreResult};
use crate::vault::SealedSecret;

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
    pub(super) async fn fan_out_events(&self, limit: i64) -> StoreResult<usize> {
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

    pub(super) async fn claim_due(
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
            // The endpoint's URL and sealed secret, the event's type and body.
            type Row = (String, i32, Vec<u8>, Vec<u8>, String, String);
            let row: Option<Row> = sqlx::query_as(
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

    pub(super) async fn record_attempt_outcomes(
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
