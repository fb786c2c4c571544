//! Views of webhook endpoints and their deliveries (§19).

use chrono::{DateTime, Utc};
use serde::Serialize;
use utoipa::ToSchema;
use utoipa::openapi::RefOr;
use utoipa::openapi::schema::{ObjectBuilder, Schema, Type};
use uuid::Uuid;

use crate::domain::webhook::EVENT_TYPES;
use crate::store::webhooks::{Delivery, Webhook};

/// The name of an event an endpoint subscribes to: a component of the document listing the service's own
/// `EVENT_TYPES` (and `*`), so that a client builds its choice from it and never falls behind a new event.
pub struct WebhookEventType;

impl utoipa::PartialSchema for WebhookEventType {
    fn schema() -> RefOr<Schema> {
        ObjectBuilder::new()
            .schema_type(Type::String)
            .description(Some(
                "An event type of §19, or `*` (alone) for every event, those added later included.",
            ))
            .enum_values(Some(EVENT_TYPES.iter().copied().chain(["*"])))
            .into()
    }
}

impl ToSchema for WebhookEventType {}

/// An endpoint, as listed (never its secret).
#[derive(Debug, Serialize, ToSchema)]
pub struct WebhookView {
    pub id: Uuid,
    pub url: String,
    /// Event types, or `["*"]` for all.
    #[schema(value_type = Vec<WebhookEventType>)]
    pub events: Vec<String>,
    /// `null`: every agent (an operator's endpoint).
    pub agent_id: Option<Uuid>,
    pub description: Option<String>,
    /// False once disabled (by a `PATCH`, or after 24 h in which every attempt failed).
    pub enabled: bool,
    pub created_at: DateTime<Utc>,
}

impl From<&Webhook> for WebhookView {
    fn from(w: &Webhook) -> Self {
        WebhookView {
            id: w.id,
            url: w.url.clone(),
            events: w.events.clone(),
            agent_id: w.agent_id,
            description: w.description.clone(),
            enabled: w.enabled,
            created_at: w.created_at,
        }
    }
}

/// An endpoint just created, or whose secret was just rotated: the one answer that shows the secret.
#[derive(Debug, Serialize, ToSchema)]
pub struct WebhookSecretView {
    pub id: Uuid,
    pub url: String,
    pub events: Vec<String>,
    pub agent_id: Option<Uuid>,
    pub description: Option<String>,
    pub enabled: bool,
    pub created_at: DateTime<Utc>,
    /// `whsec_` + base64 of 32 random bytes: the signing secret of the Standard Webhooks libraries. Shown only here.
    pub secret: String,
}

impl WebhookSecretView {
    pub fn new(w: &Webhook, secret: String) -> Self {
        WebhookSecretView {
            id: w.id,
            url: w.url.clone(),
            events: w.events.clone(),
            agent_id: w.agent_id,
            description: w.description.clone(),
            enabled: w.enabled,
            created_at: w.created_at,
            secret,
        }
    }
}

/// One attempt to deliver an event.
#[derive(Debug, Serialize, ToSchema)]
pub struct DeliveryView {
    /// Increasing; pass it as `before` for the next page.
    pub id: i64,
    /// The event's id: the `webhook-id` header of every attempt.
    pub event_id: Uuid,
    #[serde(rename = "type")]
    pub ty: String,
    /// 1 for the first try.
    pub attempt: i64,
    /// The receiver's status; `null` when no answer came.
    pub status_code: Option<i64>,
    /// Why the attempt failed; `null` for a 2xx answer.
    pub error: Option<String>,
    pub duration_ms: i64,
    pub at: DateTime<Utc>,
    /// When the next attempt is due; `null` once delivered, or failed for good (`redeliver` sends it again).
    pub next_attempt_at: Option<DateTime<Utc>>,
    /// The first KiB of the receiver's answer.
    pub response: Option<String>,
}

impl From<&Delivery> for DeliveryView {
    fn from(d: &Delivery) -> Self {
        DeliveryView {
            id: d.id,
            event_id: d.event_id,
            ty: d.ty.clone(),
            attempt: d.attempt,
            status_code: d.status_code,
            error: d.error.clone(),
            duration_ms: d.duration_ms,
            at: d.at,
            next_attempt_at: d.next_attempt_at,
            response: d.response.clone(),
        }
    }
}

/// An event queued for delivery.
#[derive(Debug, Serialize, ToSchema)]
pub struct QueuedEventView {
    pub event_id: Uuid,
}
