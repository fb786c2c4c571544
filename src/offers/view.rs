//! Views of offers and income (§23), as the HTTP API and the tools show them: amounts as decimal strings in whole
//! units, the resource as origin and path only, never its headers.

use alloy::primitives::Address;
use chrono::{DateTime, Utc};
use serde::Serialize;
use utoipa::ToSchema;
use uuid::Uuid;

use crate::domain::amount::format_units;
use crate::domain::chain as registry;
use crate::store::income_list::IncomeRecord;
use crate::store::offers::{Offer, OfferState, Resource, SettleWhen};

/// An offer.
#[derive(Debug, Serialize, ToSchema)]
pub struct OfferView {
    pub id: Uuid,
    /// Where buyers pay and get the resource: `<PUBLIC_URL, else the listening address>/x402/<id>`.
    pub url: String,
    pub chain: String,
    /// The registry token's symbol.
    pub asset: String,
    /// Whole units of the asset.
    pub price: String,
    /// The agent's wallet on `chain`, EIP-55.
    pub pay_to: String,
    pub description: String,
    pub resource: ResourceView,
    pub settle: SettleView,
    /// `query` and/or `body`; empty: nothing of the buyer's request reaches the upstream.
    pub forward: Vec<String>,
    /// Whole native units of `chain`, per rolling 24 h.
    pub gas_per_day: String,
    pub max_timeout_seconds: u64,
    pub status: OfferStatus,
    pub created_at: DateTime<Utc>,
    /// Set on an offer held for the owner's approval: until when it could be approved.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(nullable = false)]
    pub expires_at: Option<DateTime<Utc>>,
}

/// When the payment is settled: after the upstream answered 2xx, or before serving (`paymentFlow: "upfront"`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum SettleView {
    OnSuccess,
    BeforeServing,
}

/// Whether the offer sells (`active`) or was closed; one the `create_offer` tool made on a guarded agent waits for
/// its owner's approval (`awaiting_approval`: its URL answers 404 until approved), then is `active`, `rejected` or,
/// undecided past its `expires_at`, `expired`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum OfferStatus {
    Active,
    Closed,
    AwaitingApproval,
    Rejected,
    Expired,
}

impl From<OfferState> for OfferStatus {
    fn from(state: OfferState) -> Self {
        match state {
            OfferState::Active => OfferStatus::Active,
            OfferState::Closed => OfferStatus::Closed,
            OfferState::AwaitingApproval => OfferStatus::AwaitingApproval,
            OfferState::Rejected => OfferStatus::Rejected,
            OfferState::Expired => OfferStatus::Expired,
        }
    }
}

/// An upstream URL, or a stored body.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum ResourceKind {
    Url,
    Content,
}

/// Where a payment stands: held and being settled, settled on chain, failed, or released (the upstream did not
/// answer 2xx).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum IncomeStatus {
    Settling,
    Settled,
    Failed,
    Released,
}

impl IncomeStatus {
    /// The stored status (the table's check allows these four only).
    fn of(text: &str) -> Self {
        match text {
            "settled" => IncomeStatus::Settled,
            "failed" => IncomeStatus::Failed,
            "released" => IncomeStatus::Released,
            _ => IncomeStatus::Settling,
        }
    }
}

/// What the offer sells: an upstream (origin and path only; its query and headers are never shown), or a stored
/// body (`kind: "content"`).
#[derive(Debug, Serialize, ToSchema)]
pub struct ResourceView {
    pub kind: ResourceKind,
    /// The upstream's origin and path.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub url: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub method: Option<String>,
    /// What the 402 advertises (an upstream) or what is served (a stored body).
    pub mime_type: String,
    /// Whether the upstream is sent headers of the offer's (their values are never shown).
    pub headers: bool,
}

impl OfferView {
    /// `offer` bought at `url`, paid to `pay_to` (the agent's wallet on its chain).
    pub fn new(offer: &Offer, url: String, pay_to: Option<Address>) -> Self {
        let resource = match &offer.resource {
            Resource::Upstream {
                method,
                mime_type,
                sealed_headers,
                ..
            } => ResourceView {
                kind: ResourceKind::Url,
                url: Some(offer.resource.shown()),
                method: Some(method.clone()),
                mime_type: mime_type.clone(),
                headers: sealed_headers.is_some(),
            },
            Resource::Content { content_type, .. } => ResourceView {
                kind: ResourceKind::Content,
                url: None,
                method: None,
                mime_type: content_type.clone(),
                headers: false,
            },
        };
        OfferView {
            id: offer.id,
            url,
            chain: offer.chain.clone(),
            asset: offer.asset.clone(),
            price: offer.price_units(),
            pay_to: pay_to.map(|a| a.to_checksum(None)).unwrap_or_default(),
            description: offer.description.clone(),
            resource,
            settle: match offer.settle {
                SettleWhen::OnSuccess => SettleView::OnSuccess,
                SettleWhen::BeforeServing => SettleView::BeforeServing,
            },
            forward: offer.forward.clone(),
            gas_per_day: offer.gas_per_day_units(),
            max_timeout_seconds: offer.max_timeout_seconds,
            status: offer.status.into(),
            created_at: offer.created_at,
            expires_at: offer.approval.as_ref().map(|a| a.expires_at),
        }
    }
}

/// `GET /api/agents/{id}/offers`.
#[derive(Debug, Serialize, ToSchema)]
pub struct OffersView {
    pub offers: Vec<OfferView>,
}

/// One payment the agent took.
#[derive(Debug, Serialize, ToSchema)]
pub struct IncomeView {
    pub id: Uuid,
    /// `null`: settled through the agent's own facilitator.
    pub offer_id: Option<Uuid>,
    pub chain: String,
    pub asset: String,
    /// Whole units of the asset.
    pub amount: String,
    pub payer: String,
    /// The authorization's nonce, 0x-hex.
    pub nonce: String,
    pub status: IncomeStatus,
    /// `agentd` or `external` once settled.
    pub settled_by: Option<String>,
    pub tx_hash: Option<String>,
    /// What the settlement cost the agent in gas, whole native units (`"0"` when none).
    pub fee: String,
    pub created_at: DateTime<Utc>,
    pub settled_at: Option<DateTime<Utc>>,
}

impl From<&IncomeRecord> for IncomeView {
    fn from(r: &IncomeRecord) -> Self {
        let native_decimals = registry::find(&r.chain).map_or(18, |c| c.decimals);
        IncomeView {
            id: r.id,
            offer_id: r.offer_id,
            chain: r.chain.clone(),
            asset: r.asset.clone(),
            amount: format_units(r.amount, r.decimals),
            payer: r.payer.clone(),
            nonce: r.nonce.clone(),
            status: IncomeStatus::of(&r.status),
            settled_by: r.settled_by.clone(),
            tx_hash: r.tx_hash.clone(),
            fee: r
                .fee
                .map_or_else(|| "0".to_string(), |fee| format_units(fee, native_decimals)),
            created_at: r.created_at,
            settled_at: r.settled_at,
        }
    }
}

/// `GET /api/agents/{id}/income`.
#[derive(Debug, Serialize, ToSchema)]
pub struct IncomeListView {
    pub income: Vec<IncomeView>,
}
