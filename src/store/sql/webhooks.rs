//! Webhooks (§19) in SQL: the endpoints, the outbox written inside the transaction of each change (`outbox_in`,
//! `mark_pending_in`), the fan-out of recorded events to endpoints, and the leased deliveries the worker attempts.
//! Instances share the work through the database: rows are taken with `FOR UPDATE SKIP LOCKED` on PostgreSQL
//! (under SQLite's single writer elsewhere) and a delivery is leased while its attempt runs. An outbox row wakes the
//! workers once committed: `NOTIFY` on PostgreSQL (every instance), the outbox bell in-process on SQLite.
//!
//! One child module an idea: `endpoints` (the endpoints and their secrets), `deliveries` (an endpoint's log, test
//! and redelivery), `worker` (fan-out, leases, attempts' outcomes), `outbox` (written inside each change).

mod deliveries;
mod endpoints;
mod outbox;
mod worker;

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use sqlx::{ColumnIndex, Decode, Encode, Executor, Type};
use uuid::Uuid;

use super::{Backend, SqlStore};
use crate::store::StoreResult;
use crate::store::webhooks::{
    AttemptOutcome, Delivery, DueDelivery, OutboxWake, Webhook, WebhookAudit, WebhookChange, WebhookStore,
};
use crate::vault::SealedSecret;

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
        self.create_endpoint(w, secret, audit).await
    }

    async fn list_webhooks(&self, agent_id: Option<Uuid>) -> StoreResult<Vec<Webhook>> {
        self.list_endpoints(agent_id).await
    }

    async fn get_webhook(&self, id: Uuid) -> StoreResult<Option<Webhook>> {
        self.get_endpoint(id).await
    }

    async fn update_webhook(
        &self,
        id: Uuid,
        change: &WebhookChange,
        audit: WebhookAudit<'_>,
    ) -> StoreResult<Option<Webhook>> {
        self.update_endpoint(id, change, audit).await
    }

    async fn delete_webhook(&self, id: Uuid, audit: WebhookAudit<'_>) -> StoreResult<bool> {
        self.delete_endpoint(id, audit).await
    }

    async fn rotate_webhook_secret(
        &self,
        id: Uuid,
        secret: &SealedSecret,
        audit: WebhookAudit<'_>,
    ) -> StoreResult<bool> {
        self.rotate_endpoint_secret(id, secret, audit).await
    }

    async fn queue_webhook_test(&self, w: &Webhook) -> StoreResult<Uuid> {
        self.queue_test_delivery(w).await
    }

    async fn list_deliveries(&self, webhook_id: Uuid, before: Option<i64>, limit: i64) -> StoreResult<Vec<Delivery>> {
        self.delivery_log(webhook_id, before, limit).await
    }

    async fn redeliver(&self, w: &Webhook, event_id: Uuid) -> StoreResult<bool> {
        self.redeliver_event(w, event_id).await
    }

    async fn fan_out_webhook_events(&self, limit: i64) -> StoreResult<usize> {
        self.fan_out_events(limit).await
    }

    async fn claim_deliveries(
        &self,
        now: DateTime<Utc>,
        lease: chrono::TimeDelta,
        limit: i64,
    ) -> StoreResult<Vec<DueDelivery>> {
        self.claim_due(now, lease, limit).await
    }

    async fn record_attempts(
        &self,
        done: &[(DueDelivery, AttemptOutcome)],
        disable_after: chrono::TimeDelta,
    ) -> StoreResult<Vec<Uuid>> {
        self.record_attempt_outcomes(done, disable_after).await
    }

    async fn outbox_wake(&self) -> OutboxWake {
        OutboxWake::new(self.outbox.clone(), B::outbox_listener(self).await)
    }
}
