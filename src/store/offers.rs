//! What agents sell over x402 (§23): offers, as created, listed and closed through the HTTP layer and read by the
//! seller (`crate::sell`) on every request to `/x402/{id}`. The upstream's headers are stored sealed (like a webhook
//! secret) and opened only to fetch. An offer the `create_offer` tool makes on a guarded agent is stored
//! `awaiting_approval` (§23 Tools, §11) and sells only once its owner approved it; its approval events and audit
//! entries are the ones a held transfer has (`approval_required`, `approval_resolved`, `transfer_approved` …), with
//! `kind: "offer"`.

use alloy::primitives::{Address, U256};
use async_trait::async_trait;
use chrono::{DateTime, Utc};
use uuid::Uuid;

use serde_json::{Value, json};

use super::{AuditEvent, StoreResult};
use crate::domain::audit::detail::{Decided, OfferCreated};
use crate::domain::audit::{Actor, Detail};
use crate::domain::policy::ApprovalStatus;

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

/// Where an offer stands: selling (`active`) or `closed`; or, for one the tool of a guarded agent made, waiting
/// for the owner's approval, then `active` once approved, `rejected`, or `expired` past its `expires_at`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OfferState {
    Active,
    Closed,
    AwaitingApproval,
    Rejected,
    Expired,
}

impl OfferState {
    pub fn as_str(self) -> &'static str {
        match self {
            OfferState::Active => "active",
            OfferState::Closed => "closed",
            OfferState::AwaitingApproval => "awaiting_approval",
            OfferState::Rejected => "rejected",
            OfferState::Expired => "expired",
        }
    }

    pub fn parse(text: &str) -> Option<Self> {
        [
            OfferState::Active,
            OfferState::Closed,
            OfferState::AwaitingApproval,
            OfferState::Rejected,
            OfferState::Expired,
        ]
        .into_iter()
        .find(|s| s.as_str() == text)
    }
}

/// The owner's decision on a held offer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OfferVerdict {
    /// It sells from now on (`active`).
    Approved,
    Rejected,
    /// Nobody decided before its `expires_at` (the system's doing).
    Expired,
}

impl OfferVerdict {
    /// The offer's state after the decision.
    pub fn state(self) -> OfferState {
        match self {
            OfferVerdict::Approved => OfferState::Active,
            OfferVerdict::Rejected => OfferState::Rejected,
            OfferVerdict::Expired => OfferState::Expired,
        }
    }

    /// The decision as a held transfer's is named (the event's `decision`, the audit action).
    pub fn approval(self) -> ApprovalStatus {
        match self {
            OfferVerdict::Approved => ApprovalStatus::Approved,
            OfferVerdict::Rejected => ApprovalStatus::Rejected,
            OfferVerdict::Expired => ApprovalStatus::Expired,
        }
    }
}

/// What an offer that waited for its owner's approval keeps of it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OfferApproval {
    /// Past it, the offer can no longer be approved (`approval_ttl_secs` of the policy when it was held).
    pub expires_at: DateTime<Utc>,
    /// The chat turn's conversation that asked, whose stream carries its approval events.
    pub conversation_id: Option<Uuid>,
    /// When the owner (or the expiry) decided it.
    pub decided_at: Option<DateTime<Utc>>,
}

/// How a decision on a held offer went.
#[derive(Debug)]
pub enum OfferDecision {
    /// It was waiting and is now decided; its `approval_resolved` event and audit entries are stored.
    Decided(Box<Offer>),
    /// It was no longer waiting (or past `expires_at` when approved: `Expired`): where it stands.
    NotWaiting(ApprovalStatus),
    /// No offer of that agent ever waited under that id.
    NotFound,
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
    pub status: OfferState,
    pub created_at: DateTime<Utc>,
    /// Set on an offer held for the owner's approval (whatever was decided since); `None` for one that never waited.
    pub approval: Option<OfferApproval>,
}

impl Offer {
    /// Whether it sells now.
    pub fn is_active(&self) -> bool {
        self.status == OfferState::Active
    }

    /// Where its approval stands, as a held transfer's would: `None` for an offer that never waited.
    pub fn approval_status(&self) -> Option<ApprovalStatus> {
        self.approval.as_ref()?;
        Some(match self.status {
            OfferState::AwaitingApproval => ApprovalStatus::AwaitingApproval,
            OfferState::Active | OfferState::Closed => ApprovalStatus::Approved,
            OfferState::Rejected => ApprovalStatus::Rejected,
            OfferState::Expired => ApprovalStatus::Expired,
        })
    }
}

impl Offer {
    /// The price in whole units of its asset.
    pub fn price_units(&self) -> String {
        crate::domain::amount::format_units(self.price, self.decimals)
    }

    /// `gas_per_day` in whole native units of its chain.
    pub fn gas_per_day_units(&self) -> String {
        let decimals = crate::domain::chain::find(&self.chain).map_or(18, |c| c.decimals);
        crate::domain::amount::format_units(self.gas_per_day, decimals)
    }

    /// `event: approval_required` of a held offer: a held transfer's fields (`transfer_id` is the offer's id, the
    /// one the approval endpoints take; `to` the agent's wallet it would be paid to, `amount` its price) with
    /// `kind: "offer"` and the terms the owner decides on.
    pub fn required_event(&self, pay_to: Option<Address>) -> Value {
        json!({
            "type": "approval_required",
            "transfer_id": self.id,
            "offer_id": self.id,
            "kind": "offer",
            "conversation_id": self.approval.as_ref().and_then(|a| a.conversation_id),
            "agent_id": self.agent_id,
            "chain": self.chain,
            "asset": self.asset,
            "to": pay_to.map(|a| a.to_checksum(None)),
            "amount": self.price_units(),
            "expires_at": self.approval.as_ref().map(|a| a.expires_at),
            "offer": {
                "description": self.description,
                "resource": self.resource.shown(),
                "settle": self.settle.as_str(),
                "gas_per_day": self.gas_per_day_units(),
                "max_timeout_seconds": self.max_timeout_seconds,
            },
        })
    }

    /// `event: approval_resolved` of a decided offer.
    pub fn resolved_event(&self, verdict: OfferVerdict) -> Value {
        json!({"type": "approval_resolved", "transfer_id": self.id, "offer_id": self.id, "kind": "offer",
            "decision": verdict.approval().decision()})
    }

    /// The audit entries of `by`'s decision: a held transfer's (`transfer_approved`, `transfer_rejected` with the
    /// owner's `reason`, `transfer_expired`; `kind: "offer"`, `to` the agent's wallet, `amount` the price, `url` the
    /// upstream's origin and path), then `offer_created` when approved (the offer is created by that decision).
    pub fn decided_audit(
        &self,
        verdict: OfferVerdict,
        by: Actor,
        reason: Option<&str>,
        pay_to: Option<Address>,
    ) -> Vec<AuditEvent> {
        let decided = Decided {
            transfer_id: self.id,
            chain: self.chain.clone(),
            asset: self.asset.clone(),
            to: pay_to.map(|a| a.to_checksum(None)).unwrap_or_default(),
            amount: self.price_units(),
            tx_hash: None,
            kind: "offer".into(),
            url: match &self.resource {
                Resource::Upstream { .. } => Some(self.resource.shown()),
                Resource::Content { .. } => None,
            },
            reason: reason.map(str::to_owned),
        };
        match verdict {
            OfferVerdict::Approved => vec![
                AuditEvent::new(self.agent_id, by, Detail::TransferApproved(decided)),
                AuditEvent::new(self.agent_id, by, Detail::OfferCreated(self.created_detail())),
            ],
            OfferVerdict::Rejected => vec![AuditEvent::new(self.agent_id, by, Detail::TransferRejected(decided))],
            OfferVerdict::Expired => vec![AuditEvent::new(self.agent_id, by, Detail::TransferExpired(decided))],
        }
    }

    /// The detail of its `offer_created` entry.
    pub fn created_detail(&self) -> OfferCreated {
        OfferCreated {
            offer_id: self.id,
            chain: self.chain.clone(),
            asset: self.asset.clone(),
            price: self.price_units(),
            resource: self.resource.shown(),
            settle: self.settle.as_str().to_string(),
        }
    }
}

impl Resource {
    /// As shown (the API, the audit log, the approval events): an upstream's origin and path, never its query or
    /// headers; a stored body as `content`.
    pub fn shown(&self) -> String {
        match self {
            Resource::Upstream { url, .. } => match reqwest::Url::parse(url) {
                Ok(parsed) => format!("{}{}", parsed.origin().ascii_serialization(), parsed.path()),
                Err(_) => String::new(),
            },
            Resource::Content { .. } => "content".to_string(),
        }
    }
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
    /// Stores a new offer held for the owner's approval (`awaiting_approval`, its `approval` set) with its
    /// `approval_required` event (the conversation's stream, the `approval.required` webhook), in one transaction;
    /// the event is announced once committed. No audit entry: the decision writes them.
    async fn hold_offer(&self, offer: &Offer) -> StoreResult<()>;
    /// The agent's offers awaiting approval, oldest first (past `expires_at` included until expired).
    async fn waiting_offers(&self, agent_id: Uuid) -> StoreResult<Vec<Offer>>;
    /// Offers on `chain` awaiting approval whose `expires_at` has passed at `now`.
    async fn due_offers(&self, chain: &str, now: DateTime<Utc>) -> StoreResult<Vec<Offer>>;
    /// `awaiting_approval` -> `verdict`'s state for the agent's held offer `id`, with the `approval_resolved` event
    /// (and `approval.resolved` webhook) and the audit entry of `by`'s decision as a held transfer's
    /// (`transfer_approved`, `transfer_rejected` with `reason`, `transfer_expired`; `kind: "offer"`), plus
    /// `offer_created` when approved, in one transaction; the event is announced once committed. Approving past
    /// `expires_at` decides nothing (`NotWaiting(Expired)`: the caller expires it).
    async fn decide_offer(
        &self,
        agent_id: Uuid,
        id: Uuid,
        verdict: OfferVerdict,
        by: Actor,
        reason: Option<&str>,
    ) -> StoreResult<OfferDecision>;
}
