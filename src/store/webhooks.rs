//! Webhook endpoints, their outbox and their deliveries log (§19): what the HTTP layer and the delivery worker
//! read and write.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use futures::StreamExt;
use futures::stream::BoxStream;
use tokio::sync::Notify;
use uuid::Uuid;

use super::{AuditEvent, StoreResult};
use crate::vault::SealedSecret;

/// A registered endpoint (its secret stays in the store, sealed).
#[derive(Debug, Clone, PartialEq)]
pub struct Webhook {
    pub id: Uuid,
    /// `None`: every agent (the operator's endpoints).
    pub agent_id: Option<Uuid>,
    pub url: String,
    pub events: Vec<String>,
    pub description: Option<String>,
    pub enabled: bool,
    pub created_at: DateTime<Utc>,
    pub updated_at: DateTime<Utc>,
}

/// A `PATCH`: the fields given.
#[derive(Debug, Clone, Default)]
pub struct WebhookChange {
    pub url: Option<String>,
    pub events: Option<Vec<String>>,
    pub enabled: Option<bool>,
    pub description: Option<Option<String>>,
}

/// One attempt, as the deliveries log keeps it.
#[derive(Debug, Clone, PartialEq)]
pub struct Delivery {
    pub id: i64,
    pub event_id: Uuid,
    pub ty: String,
    pub attempt: i64,
    pub status_code: Option<i64>,
    pub error: Option<String>,
    /// The first KiB of the receiver's answer.
    pub response: Option<String>,
    pub duration_ms: i64,
    pub at: DateTime<Utc>,
    pub next_attempt_at: Option<DateTime<Utc>>,
}

/// A delivery due now, leased to this instance until its attempt is recorded (or the lease runs out).
#[derive(Debug, Clone)]
pub struct DueDelivery {
    pub webhook_id: Uuid,
    pub event_id: Uuid,
    pub ty: String,
    pub url: String,
    pub secret: SealedSecret,
    pub body: String,
    /// Attempts made before this one, in all.
    pub attempts: i64,
    /// Attempts made before this one since the first try or the last `redeliver`.
    pub round: i64,
}

/// What one attempt came to.
#[derive(Debug, Clone)]
pub struct AttemptOutcome {
    pub status_code: Option<i64>,
    pub error: Option<String>,
    pub response: Option<String>,
    pub duration_ms: i64,
    pub at: DateTime<Utc>,
    pub delivered: bool,
    /// When the next attempt is due; `None` after a failure: the delivery is failed.
    pub next_at: Option<DateTime<Utc>>,
}

/// This instance's side of the outbox wake: rung after a commit that recorded an outbox row, or queued a delivery.
#[derive(Debug, Default)]
pub struct OutboxBell {
    /// The write transaction now holding SQLite's writer turn inserted an outbox row (set by the write
    /// connections' update hook; SQLite's writers take turns, so one flag serves them all).
    written: AtomicBool,
    notify: Notify,
}

impl OutboxBell {
    /// A write transaction begins: nothing written yet (a rolled-back one leaves no mark behind).
    pub fn begin(&self) {
        self.written.store(false, Ordering::Release);
    }

    /// An outbox row was inserted by the current write transaction (not yet committed).
    pub fn written(&self) {
        self.written.store(true, Ordering::Release);
    }

    /// The current write transaction committed: rings when it inserted an outbox row.
    pub fn committed(&self) {
        if self.written.swap(false, Ordering::AcqRel) {
            self.notify.notify_one();
        }
    }

    /// Rings at once (a delivery was queued and committed).
    pub fn ring(&self) {
        self.notify.notify_one();
    }
}

/// What the delivery worker waits on between rounds: this instance's bell and, on PostgreSQL, the outbox
/// notifications of every instance sharing the database (`NOTIFY`, delivered on commit). A wake may be spurious or
/// missed (a listener reconnecting): the worker still polls.
pub struct OutboxWake {
    local: Arc<OutboxBell>,
    remote: Option<BoxStream<'static, ()>>,
}

impl OutboxWake {
    pub fn new(local: Arc<OutboxBell>, remote: Option<BoxStream<'static, ()>>) -> Self {
        OutboxWake { local, remote }
    }

    /// Returns once an outbox row may have committed since the last return (at once if one did meanwhile).
    pub async fn wait(&mut self) {
        let ended = match self.remote.as_mut() {
            Some(remote) => tokio::select! {
                _ = self.local.notify.notified() => false,
                heard = remote.next() => heard.is_none(),
            },
            None => {
                self.local.notify.notified().await;
                false
            }
        };
        if ended {
            self.remote = None;
        }
    }
}

/// The audit entry to write in the transaction of a change, given the endpoint (`None`: not audited, an operator
/// endpoint of every agent, which no agent's log holds).
pub type WebhookAudit<'a> = Option<&'a AuditEvent>;

#[async_trait]
pub trait WebhookStore: Send + Sync + 'static {
    async fn create_webhook(
        &self,
        webhook: &Webhook,
        secret: &SealedSecret,
        audit: WebhookAudit<'_>,
    ) -> StoreResult<()>;
    /// Newest first: one agent's endpoints, or every endpoint (`None`).
    async fn list_webhooks(&self, agent_id: Option<Uuid>) -> StoreResult<Vec<Webhook>>;
    async fn get_webhook(&self, id: Uuid) -> StoreResult<Option<Webhook>>;
    /// `None` when it does not exist. Enabling it again forgets its failures.
    async fn update_webhook(
        &self,
        id: Uuid,
        change: &WebhookChange,
        audit: WebhookAudit<'_>,
    ) -> StoreResult<Option<Webhook>>;
    /// Removes the endpoint, its pending deliveries and its log; `false` when it did not exist.
    async fn delete_webhook(&self, id: Uuid, audit: WebhookAudit<'_>) -> StoreResult<bool>;
    /// Replaces the secret; `false` when the endpoint does not exist.
    async fn rotate_webhook_secret(
        &self,
        id: Uuid,
        secret: &SealedSecret,
        audit: WebhookAudit<'_>,
    ) -> StoreResult<bool>;
    /// Records a `webhook.test` event due at once to this endpoint only; answers its id.
    async fn queue_webhook_test(&self, webhook: &Webhook) -> StoreResult<Uuid>;
    /// The endpoint's attempts, newest first, older than the delivery `before` when given.
    async fn list_deliveries(&self, webhook_id: Uuid, before: Option<i64>, limit: i64) -> StoreResult<Vec<Delivery>>;
    /// Makes the event due again at once for the endpoint, with the whole retry schedule ahead; `false` when the
    /// event is unknown or not one the endpoint could receive.
    async fn redeliver(&self, webhook: &Webhook, event_id: Uuid) -> StoreResult<bool>;
    /// Fans recorded events out to the endpoints subscribed to them (at most `limit` events); answers how many.
    async fn fan_out_webhook_events(&self, limit: i64) -> StoreResult<usize>;
    /// Leases up to `limit` deliveries due at `now` until `now + lease` (skipping those another instance holds).
    async fn claim_deliveries(
        &self,
        now: DateTime<Utc>,
        lease: chrono::TimeDelta,
        limit: i64,
    ) -> StoreResult<Vec<DueDelivery>>;
    /// Logs each attempt and moves its delivery on (delivered, due again, or failed), all in one transaction; an
    /// endpoint whose attempts all failed for `disable_after` is disabled, audited `webhook_disabled`. Answers the
    /// endpoints disabled.
    async fn record_attempts(
        &self,
        done: &[(DueDelivery, AttemptOutcome)],
        disable_after: chrono::TimeDelta,
    ) -> StoreResult<Vec<Uuid>>;
    /// What the delivery worker waits on for new outbox rows (`OutboxWake`).
    async fn outbox_wake(&self) -> OutboxWake;
}

/// An endpoint's URL as the audit log and events show it: without its query, which may hold a receiver's key.
pub fn url_shown(url: &str) -> String {
    match reqwest::Url::parse(url) {
        Ok(mut parsed) => {
            parsed.set_query(None);
            parsed.set_fragment(None);
            parsed.to_string()
        }
        Err(_) => String::new(),
    }
}
