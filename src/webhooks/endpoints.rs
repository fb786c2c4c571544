//! Webhook endpoints (§19) as a service: registering, changing, removing an endpoint and rotating its secret,
//! each checked (the URL's form and any literal address by §16's rules, never resolving a name; the event types;
//! the description) and audited in its agent's log in the change's transaction; listing, reading, a test event,
//! the delivery log and a redelivery. A `Scope` says whose endpoints a request reaches: the operator's reach every
//! endpoint, an agent's owner only that agent's. Who may act is decided before, at the edge that authenticated it.

use std::collections::BTreeMap;
use std::sync::Arc;

use uuid::Uuid;

use crate::domain::audit::detail::WebhookEndpoint;
use crate::domain::audit::{Actor, Detail};
use crate::domain::webhook;
use crate::store::webhooks::{Delivery, Webhook, WebhookChange};
use crate::store::{AuditEvent, Store, StoreError};
use crate::vault::{SealedSecret, Vault};

const MAX_URL_LEN: usize = 2048;
const MAX_DESCRIPTION_LEN: usize = 500;

/// Whose endpoints a request reaches, and who acts (as the audit log records it).
#[derive(Debug, Clone, Copy)]
pub enum Scope {
    /// Every endpoint, of every agent and of none; acts as `admin`.
    Operator,
    /// The endpoints of one agent.
    Agent { agent_id: Uuid, actor: Actor },
}

impl Scope {
    fn agent_id(&self) -> Option<Uuid> {
        match self {
            Scope::Operator => None,
            Scope::Agent { agent_id, .. } => Some(*agent_id),
        }
    }

    fn actor(&self) -> Actor {
        match self {
            Scope::Operator => Actor::Admin,
            Scope::Agent { actor, .. } => *actor,
        }
    }

    fn reaches(&self, w: &Webhook) -> bool {
        match self {
            Scope::Operator => true,
            Scope::Agent { agent_id, .. } => w.agent_id == Some(*agent_id),
        }
    }
}

/// What went wrong with a request about endpoints.
#[derive(Debug, thiserror::Error)]
pub enum EndpointError {
    /// Fields that do not hold, each with why.
    #[error("invalid fields: {0:?}")]
    Invalid(BTreeMap<String, String>),
    #[error("no such webhook in the scope")]
    NotFound,
    #[error("no such event for the webhook")]
    EventNotFound,
    #[error(transparent)]
    Store(#[from] StoreError),
}

/// A new endpoint, as asked.
#[derive(Debug)]
pub struct NewEndpoint {
    pub url: String,
    pub events: Vec<String>,
    /// An operator's endpoint for one agent (a uuid as given); under an agent's scope it may only name that agent.
    pub agent_id: Option<String>,
    pub description: Option<String>,
}

/// A change of an endpoint: the fields given (`description: Some(None)` clears it).
#[derive(Debug, Default)]
pub struct EndpointEdit {
    pub url: Option<String>,
    pub events: Option<Vec<String>>,
    pub enabled: Option<bool>,
    pub description: Option<Option<String>>,
}

/// A secret's text form, shown once, with the endpoint it signs for.
pub struct WithSecret {
    pub webhook: Webhook,
    pub secret: String,
}

/// The endpoint service: built once at start, shared by the handlers.
#[derive(Clone)]
pub struct Endpoints {
    store: Arc<dyn Store>,
    vault: Arc<Vault>,
    /// `WEBHOOK_ALLOW_PRIVATE`: private and local addresses may be registered.
    allow_private: bool,
    /// What the service reads the time on (the system's clock outside tests).
    clock: Arc<dyn crate::domain::clock::Clock>,
}

impl Endpoints {
    pub fn new(store: Arc<dyn Store>, vault: Arc<Vault>, allow_private: bool) -> Self {
        Endpoints {
            store,
            vault,
            allow_private,
            clock: Arc::new(crate::domain::clock::SystemClock),
        }
    }

    /// The same service reading the time on `clock` (a test's, which it can move ahead).
    pub fn with_clock(mut self, clock: Arc<dyn crate::domain::clock::Clock>) -> Self {
        self.clock = clock;
        self
    }

    /// Registers an endpoint and answers its secret, once. Every field is checked and all problems reported at once.
    pub async fn create(&self, scope: Scope, new: NewEndpoint) -> Result<WithSecret, EndpointError> {
        let mut errors = BTreeMap::new();
        let url = self.check_url(&new.url).unwrap_or_else(|e| {
            errors.insert("url".into(), e);
            String::new()
        });
        let events = webhook::check_events(&new.events).unwrap_or_else(|e| {
            errors.insert("events".into(), e);
            Vec::new()
        });
        let description = check_description(new.description, &mut errors);
        let named = match new.agent_id.as_deref().map(Uuid::parse_str) {
            None => None,
            Some(Ok(id)) => Some(id),
            Some(Err(_)) => {
                errors.insert("agent_id".into(), "must be an agent id (uuid)".into());
                None
            }
        };
        let agent_id = match (scope, named) {
            (Scope::Agent { agent_id, .. }, Some(id)) if id != agent_id => {
                errors.insert("agent_id".into(), "may only name this agent".into());
                None
            }
            (Scope::Agent { agent_id, .. }, _) => Some(agent_id),
            (Scope::Operator, Some(id)) => match self.store.get_agent(id).await {
                Ok(_) => Some(id),
                Err(StoreError::AgentNotFound) => {
                    errors.insert("agent_id".into(), "unknown agent".into());
                    None
                }
                Err(e) => return Err(e.into()),
            },
            (Scope::Operator, None) => None,
        };
        if !errors.is_empty() {
            return Err(EndpointError::Invalid(errors));
        }
        let now = self.clock.now();
        let w = Webhook {
            id: Uuid::new_v4(),
            agent_id,
            url,
            events,
            description,
            enabled: true,
            created_at: now,
            updated_at: now,
        };
        let (secret, sealed) = self.new_secret(w.id);
        let record = audit(&w, scope, Detail::WebhookCreated);
        self.store.create_webhook(&w, &sealed, record.as_ref()).await?;
        tracing::info!(webhook_id = %w.id, agent_id = ?w.agent_id, "webhook created");
        Ok(WithSecret { webhook: w, secret })
    }

    /// The endpoints in scope, newest first.
    pub async fn list(&self, scope: Scope) -> Result<Vec<Webhook>, EndpointError> {
        Ok(self.store.list_webhooks(scope.agent_id()).await?)
    }

    /// The endpoint `wid` (as given), if the scope reaches it.
    pub async fn get(&self, scope: Scope, wid: &str) -> Result<Webhook, EndpointError> {
        let id = Uuid::parse_str(wid).map_err(|_| EndpointError::NotFound)?;
        match self.store.get_webhook(id).await? {
            Some(w) if scope.reaches(&w) => Ok(w),
            _ => Err(EndpointError::NotFound),
        }
    }

    /// Changes the fields given, checked as at registration.
    pub async fn update(&self, scope: Scope, wid: &str, edit: EndpointEdit) -> Result<Webhook, EndpointError> {
        let w = self.get(scope, wid).await?;
        let mut errors = BTreeMap::new();
        let mut change = WebhookChange {
            enabled: edit.enabled,
            ..WebhookChange::default()
        };
        if let Some(url) = edit.url {
            match self.check_url(&url) {
                Ok(url) => change.url = Some(url),
                Err(e) => {
                    errors.insert("url".into(), e);
                }
            }
        }
        if let Some(events) = edit.events {
            match webhook::check_events(&events) {
                Ok(events) => change.events = Some(events),
                Err(e) => {
                    errors.insert("events".into(), e);
                }
            }
        }
        if let Some(description) = edit.description {
            change.description = Some(check_description(description, &mut errors));
        }
        if !errors.is_empty() {
            return Err(EndpointError::Invalid(errors));
        }
        let record = audit(&changed(&w, &change), scope, Detail::WebhookUpdated);
        self.store
            .update_webhook(w.id, &change, record.as_ref())
            .await?
            .ok_or(EndpointError::NotFound)
    }

    /// Removes the endpoint.
    pub async fn delete(&self, scope: Scope, wid: &str) -> Result<(), EndpointError> {
        let w = self.get(scope, wid).await?;
        let record = audit(&w, scope, Detail::WebhookDeleted);
        match self.store.delete_webhook(w.id, record.as_ref()).await? {
            true => Ok(()),
            false => Err(EndpointError::NotFound),
        }
    }

    /// Gives the endpoint a new secret (the old one stops signing at once) and answers it, once.
    pub async fn rotate(&self, scope: Scope, wid: &str) -> Result<WithSecret, EndpointError> {
        let w = self.get(scope, wid).await?;
        let (secret, sealed) = self.new_secret(w.id);
        let record = audit(&w, scope, Detail::WebhookSecretRotated);
        match self.store.rotate_webhook_secret(w.id, &sealed, record.as_ref()).await? {
            true => Ok(WithSecret { webhook: w, secret }),
            false => Err(EndpointError::NotFound),
        }
    }

    /// Queues a `webhook.test` event to the endpoint; answers the event's id.
    pub async fn test(&self, scope: Scope, wid: &str) -> Result<Uuid, EndpointError> {
        let w = self.get(scope, wid).await?;
        Ok(self.store.queue_webhook_test(&w).await?)
    }

    /// The endpoint's delivery attempts, newest first: at most `limit` (1..500, default 50), older than `before`.
    pub async fn deliveries(
        &self,
        w: &Webhook,
        before: Option<i64>,
        limit: Option<i64>,
    ) -> Result<Vec<Delivery>, EndpointError> {
        let limit = limit.unwrap_or(50);
        if !(1..=500).contains(&limit) {
            return Err(invalid("limit", "must be between 1 and 500"));
        }
        if before.is_some_and(|b| b < 1) {
            return Err(invalid("before", "must be a delivery id"));
        }
        Ok(self.store.list_deliveries(w.id, before, limit).await?)
    }

    /// Delivers the endpoint's event `event_id` (as given) again; answers its id.
    pub async fn redeliver(&self, scope: Scope, wid: &str, event_id: &str) -> Result<Uuid, EndpointError> {
        let w = self.get(scope, wid).await?;
        let event_id = Uuid::parse_str(event_id).map_err(|_| EndpointError::EventNotFound)?;
        match self.store.redeliver(&w, event_id).await? {
            true => Ok(event_id),
            false => Err(EndpointError::EventNotFound),
        }
    }

    fn check_url(&self, url: &str) -> Result<String, String> {
        if url.len() > MAX_URL_LEN {
            return Err(format!("at most {MAX_URL_LEN} characters"));
        }
        // Kept as given (trimmed): the answer shows the URL the caller registered; every attempt checks it again.
        crate::net::egress::guard::check_url(url, self.allow_private)
            .map(|_| url.trim().to_string())
            .map_err(|e| e.to_string())
    }

    /// A fresh secret: the text shown once, and its sealed form for the store.
    fn new_secret(&self, id: Uuid) -> (String, SealedSecret) {
        let bytes = webhook::new_secret();
        let sealed = self.vault.seal_webhook_secret(id, bytes.as_ref());
        (webhook::secret_text(bytes.as_ref()).to_string(), sealed)
    }
}

fn invalid(field: &str, why: &str) -> EndpointError {
    EndpointError::Invalid(BTreeMap::from([(field.to_string(), why.to_string())]))
}

fn check_description(text: Option<String>, errors: &mut BTreeMap<String, String>) -> Option<String> {
    let text = text.map(|t| t.trim().to_string()).filter(|t| !t.is_empty());
    if text.as_ref().is_some_and(|t| t.chars().count() > MAX_DESCRIPTION_LEN) {
        errors.insert(
            "description".into(),
            format!("at most {MAX_DESCRIPTION_LEN} characters"),
        );
    }
    text
}

/// `w` as `change` leaves it (what its audit entry records).
fn changed(w: &Webhook, change: &WebhookChange) -> Webhook {
    let mut after = w.clone();
    if let Some(url) = &change.url {
        after.url = url.clone();
    }
    if let Some(events) = &change.events {
        after.events = events.clone();
    }
    if let Some(enabled) = change.enabled {
        after.enabled = enabled;
    }
    if let Some(description) = &change.description {
        after.description = description.clone();
    }
    after
}

/// The audit entry of a change to `w`, in its agent's log (an operator endpoint of every agent is in none).
fn audit(w: &Webhook, scope: Scope, action: fn(WebhookEndpoint) -> Detail) -> Option<AuditEvent> {
    let agent_id = w.agent_id?;
    let endpoint = WebhookEndpoint {
        webhook_id: w.id,
        url: crate::store::webhooks::url_shown(&w.url),
        events: w.events.clone(),
        enabled: w.enabled,
        description: w.description.clone(),
    };
    Some(AuditEvent::new(agent_id, scope.actor(), action(endpoint)))
}
