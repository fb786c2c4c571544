//! The error body every failing request answers with, and the `{code, message}` pair also used inside
//! successful bodies (a chain whose balance could not be read, a refused tool call).

use std::collections::BTreeMap;

use serde::Serialize;
use utoipa::ToSchema;

/// `{"error": {"code", "message", "details?"}}`.
#[derive(Debug, Serialize, ToSchema)]
pub struct ErrorBody {
    pub error: ErrorDetail,
}

#[derive(Debug, Serialize, ToSchema)]
pub struct ErrorDetail {
    /// snake_case, e.g. `validation_failed`, `agent_not_found`, `rate_limited`.
    pub code: String,
    pub message: String,
    /// On 422 `validation_failed` (which fields failed and why) and 403 `policy_denied` (which rule).
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(nullable = false)]
    pub details: Option<FieldErrors>,
}

/// `{"fields": {"<field>": "<problem>"}}` on 422 `validation_failed`; `{"rule": "<rule>"}` on 403 `policy_denied`;
/// `{"offered": [...]}` on 422 `x402_unsupported`.
#[derive(Debug, Default, Serialize, ToSchema)]
pub struct FieldErrors {
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(nullable = false)]
    pub fields: Option<BTreeMap<String, String>>,
    /// The policy rule a refused transfer broke (`per_transfer`, `per_day`, `per_week`, `asset_not_allowed`,
    /// `recipient_not_allowed`, `recipient_blocked`).
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(nullable = false)]
    pub rule: Option<String>,
    /// What an on-chain delegation leaves this period (§21 rule `delegation_limit`), in the units of its
    /// `limits[].available`.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(nullable = false)]
    pub available: Option<String>,
    /// What the agent's sponsorship has left today (§22 rule `sponsorship_limit`), in whole native units.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(nullable = false)]
    pub left: Option<String>,
    /// Which call of the request was refused, from 0 (§22 rule `call_denied`: the first call whose target no call may
    /// reach — the agent's own address, the EntryPoint, the paymaster or a `DelegationManager`).
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(nullable = false)]
    pub index: Option<usize>,
    /// What a 402 offered (`{scheme, network, asset, amount, pay_to}` each), when none of it could be paid.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(nullable = false, value_type = Option<Vec<Object>>)]
    pub offered: Option<Vec<serde_json::Value>>,
    /// Why a paid request failed (`x402_payment_failed`, `upstream_timeout` and `upstream_unavailable` after an
    /// x402 payment was signed): the resource's `error`/`errorReason`, or what happened.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(nullable = false)]
    pub reason: Option<String>,
    /// The payment that stays `pending` until used or expired, after a failed paid request.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(nullable = false)]
    pub transfer_id: Option<uuid::Uuid>,
}

/// A failure reported inside a successful body: `{code, message}`.
#[derive(Debug, Serialize, ToSchema)]
pub struct FailureView {
    /// snake_case, e.g. `chain_not_configured`, `capability_denied`.
    pub code: String,
    pub message: String,
}
