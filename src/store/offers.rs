//! What agents sell over x402 (§23): offers, as created, listed and closed through the HTTP layer and read by the
//! seller (`crate::sell`) on every request to `/x402/{id}`. The upstream's headers are stored sealed (like a webhook
//! secret) and opened only to fetch.

use alloy::primitives::{Address, U256};
use async_trait::async_trait;
use chrono::{DateTime, Utc};
use uuid::Uuid;

use super::{AuditEvent, StoreResult};

/// When an offer's payment is settled (§23 `settle`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SettleWhen {
    /// The resource is fetched first and the payment settled only when it answered 2xx (default; `GET`/`HEAD`).
    OnSuccess,
    /// Settled first, served after its inclusion (`extra.paymentFlow: "upfront"`).
    BeforeServing,
}

impl SettleWhen {
    pub fn as_str(self) -> &'static str {
        match self {
            SettleWhen::OnSuccess => "on_success",
            SettleWhen::BeforeServing => "before_serving",
        }
    }

    pub fn parse(text: &str) -> Option<Self> {
        match text {
            "on_success" => Some(SettleWhen::OnSuccess),
            "before_serving" => Some(SettleWhen::BeforeServing),
            _ => None,
        }
    }
}

/// What an offer sells: an upstream it fronts, or a stored body.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Resource {
    Upstream {
        url: String,
        /// `GET` (default), `HEAD` or `POST`.
        method: String,
        /// What the 402 advertises (`application/json` by default).
        mime_type: String,
        /// The upstream's headers (e.g. its API key), sealed at rest; `None` when it has none.
        sealed_headers: Option<Vec<u8>>,
    },
    Content {
        content: Vec<u8>,
        content_type: String,
    },
}

/// One offer as stored.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Offer {
    pub id: Uuid,
    pub agent_id: Uuid,
    pub chain: String,
    /// The registry token's symbol (`USDC`).
    pub asset: String,
    pub token: Address,
    pub decimals: u8,
    /// The token's own EIP-712 domain, as its contract reported it when the offer was created.
    pub token_name: String,
    pub token_version: String,
    /// In the token's base units.
    pub price: U256,
    pub description: String,
    pub resource: Resource,
    pub settle: SettleWhen,
    /// What of the buyer's request reaches the upstream: empty, or `query` / `body`.
    pub forward: Vec<String>,
    /// What the offer's settlements may cost in a rolling 24 h, in wei.
    pub gas_per_day: U256,
    pub max_timeout_seconds: u64,
    /// `active` or `closed`.
    pub active: bool,
    pub created_at: DateTime<Utc>,
}

#[async_trait]
pub trait OfferStore: Send + Sync + 'static {
    /// Stores a new offer with its `offer_created` audit entry, in one transaction.
    async fn create_offer(&self, offer: &Offer, audit: &AuditEvent) -> StoreResult<()>;
    /// The agent's offers, newest first (closed ones included).
    async fn offers(&self, agent_id: Uuid) -> StoreResult<Vec<Offer>>;
    /// One offer by id, whatever its agent or status (`None`: no such offer).
    async fn offer(&self, id: Uuid) -> StoreResult<Option<Offer>>;
    /// Closes the agent's active offer with its `offer_closed` audit entry; `false` when it had no such active offer.
    async fn close_offer(&self, agent_id: Uuid, id: Uuid, audit: &AuditEvent) -> StoreResult<bool>;
}
