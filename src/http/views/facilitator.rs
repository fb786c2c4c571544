//! The agent's own x402 facilitator (§23): its tokens as shown (the token itself only once, at creation), and the
//! x402 v2 facilitator bodies its endpoints take and answer. Those bodies are x402's, built by the seller service
//! (`crate::sell`) as JSON; the types here describe them to the document, field for field as x402 v2 spells them.

use chrono::{DateTime, Utc};
use serde::Serialize;
use utoipa::ToSchema;
use uuid::Uuid;

use crate::store::facilitator::FacilitatorToken;

/// A facilitator token just created: the one answer that shows the token.
#[derive(Debug, Serialize, ToSchema)]
pub struct FacilitatorTokenCreatedView {
    pub id: Uuid,
    /// `fac_` + 43 base64url characters. Shown only here: the service keeps its SHA-256.
    pub token: String,
    pub created_at: DateTime<Utc>,
}

/// A live facilitator token, as listed (never the token or its hash).
#[derive(Debug, Serialize, ToSchema)]
pub struct FacilitatorTokenView {
    pub id: Uuid,
    /// The token's first 12 characters (`fac_` and 8 more), to tell tokens apart.
    pub prefix: String,
    pub created_at: DateTime<Utc>,
    /// When a facilitator request last presented it; `null` until one did.
    pub last_used_at: Option<DateTime<Utc>>,
}

impl From<&FacilitatorToken> for FacilitatorTokenView {
    fn from(t: &FacilitatorToken) -> Self {
        FacilitatorTokenView {
            id: t.id,
            prefix: t.prefix.clone(),
            created_at: t.created_at,
            last_used_at: t.last_used_at,
        }
    }
}

/// The agent's live facilitator tokens, oldest first.
#[derive(Debug, Serialize, ToSchema)]
pub struct FacilitatorTokensView {
    pub facilitator_tokens: Vec<FacilitatorTokenView>,
}

/// An x402 v2 facilitator request, as an x402 resource server's facilitator client sends it to `verify` and
/// `settle`.
#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct FacilitatorRequest {
    /// `2`.
    pub x402_version: u32,
    /// The buyer's `PAYMENT-SIGNATURE`, decoded: `{x402Version, resource?, accepted, payload: {signature,
    /// authorization: {from, to, value, validAfter, validBefore, nonce}}}`.
    #[schema(value_type = Object)]
    pub payment_payload: serde_json::Value,
    /// The entry of the resource server's price list the payment is for: `{scheme, network, amount, asset, payTo,
    /// maxTimeoutSeconds, extra: {name, version}}`. `payTo` must be this agent's wallet.
    #[schema(value_type = Object)]
    pub payment_requirements: serde_json::Value,
}

/// x402 v2 `VerifyResponse`: whether the payment would be taken now. Verify changes nothing.
#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct FacilitatorVerifyView {
    pub is_valid: bool,
    /// When not valid: x402's reason code (`invalid_exact_evm_payload_signature`, …), or `pay_to_not_agent`,
    /// `unsupported_scheme`, `network_mismatch`, `requirements_mismatch`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub invalid_reason: Option<String>,
    /// The payer's address (the authorization's `from`), once the payload names one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub payer: Option<String>,
}

/// x402 v2 `SettleResponse`: the settlement's outcome; a repeat with the same signature answers the first.
#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct FacilitatorSettleView {
    pub success: bool,
    /// When not successful: a verify reason, `transaction_failed`, or `settlement_pending` (with its
    /// `transaction`, while it is not included).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error_reason: Option<String>,
    /// The settlement's transaction hash; `""` when none was sent.
    pub transaction: String,
    /// `eip155:<chain id>`.
    pub network: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub payer: Option<String>,
}

/// One payment kind the facilitator settles.
#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct FacilitatorKindView {
    /// `2`.
    pub x402_version: u32,
    /// `exact`.
    pub scheme: String,
    /// `eip155:<chain id>`: a chain the facilitator settles on for this agent.
    pub network: String,
}

/// x402 v2 `SupportedResponse`: what this agent's facilitator settles, and who signs its settlements.
#[derive(Debug, Serialize, ToSchema)]
pub struct FacilitatorSupportedView {
    pub kinds: Vec<FacilitatorKindView>,
    /// Always `[]`.
    pub extensions: Vec<String>,
    /// `{"eip155:*": [the agent's wallet]}`.
    #[schema(value_type = Object)]
    pub signers: std::collections::BTreeMap<String, Vec<String>>,
}
