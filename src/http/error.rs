//! The one error type of the HTTP layer and its JSON body `{"error": {"code", "message", "details?"}}`.

use std::collections::BTreeMap;

use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};

use super::views::{ErrorBody, ErrorDetail, FieldErrors};
use crate::auth::streams::TooManyStreams;
use crate::auth::{AuthError, ProofError};
use crate::chat::ChatError;
use crate::llm::LlmError;
use crate::net::egress::FetchError;
use crate::store::StoreError;
use crate::transfers::{PayError, TransferError};
use crate::webhooks::endpoints::EndpointError;
use crate::x402::{Offered, X402Error};

/// Handler result type.
pub type Result<T, E = AppError> = std::result::Result<T, E>;

/// Everything a request can fail with. Internal causes are logged, never sent.
#[derive(Debug, thiserror::Error)]
pub enum AppError {
    #[error("the request body is not valid JSON: {0}")]
    InvalidJson(String),
    #[error("{message}")]
    BadRequest { code: &'static str, message: String },
    #[error("the X-Agent-Access-Token header is required")]
    MissingToken,
    /// `missing_token` on a call that also takes owner authority; the message names every credential it takes.
    #[error("{0}")]
    MissingCredential(String),
    #[error("the access token is not valid")]
    InvalidToken,
    #[error("the admin token is missing or wrong")]
    AdminRequired,
    #[error("the metrics token is missing or wrong")]
    MetricsTokenRequired,
    #[error("the proof of ownership was not accepted")]
    InvalidProof,
    #[error("the owner token is unknown or expired")]
    InvalidOwnerToken,
    #[error("this token does not belong to the requested resource")]
    Forbidden,
    #[error("{message}")]
    Denied { code: &'static str, message: String },
    #[error("agent not found")]
    AgentNotFound,
    #[error("conversation not found")]
    ConversationNotFound,
    #[error("transfer not found")]
    TransferNotFound,
    #[error("webhook not found")]
    WebhookNotFound,
    #[error("no such event for this webhook")]
    EventNotFound,
    #[error("delegation not found")]
    DelegationNotFound,
    #[error("facilitator token not found")]
    FacilitatorTokenNotFound,
    #[error("offer not found")]
    OfferNotFound,
    #[error("not found")]
    NotFound,
    #[error("this method is not allowed on this path")]
    MethodNotAllowed,
    /// A conflict with the state of the resource or of an earlier request (409).
    #[error("{message}")]
    Conflict { code: &'static str, message: String },
    /// A well-formed request the service cannot carry out as asked (422, with its own code).
    #[error("{message}")]
    Unprocessable { code: &'static str, message: String },
    #[error("the agent is inactive (deleted)")]
    AgentInactive,
    #[error("the request body is larger than the limit")]
    PayloadTooLarge,
    #[error("{message}")]
    Validation {
        message: String,
        fields: BTreeMap<String, String>,
    },
    #[error("the challenge has expired; request a new one")]
    ChallengeExpired,
    #[error("too many requests; retry later")]
    RateLimited { retry_after_secs: u64 },
    #[error("{message}")]
    Upstream {
        status: StatusCode,
        code: &'static str,
        message: String,
    },
    /// A 402 whose price list holds nothing the agent can pay: 422 `x402_unsupported` with `details.offered`.
    #[error("{message}")]
    X402Unsupported { message: String, offered: Vec<Offered> },
    /// A transfer the agent's policy (or an on-chain delegation's caveats, §21) refuses: 403 `policy_denied` with
    /// `details.rule`, and `details.available` (`delegation_limit`), `details.reason` (`delegation_caveat`) or
    /// `details.index` (`call_denied` naming a call, §22).
    #[error("{message}")]
    PolicyDenied {
        rule: &'static str,
        message: String,
        available: Option<String>,
        reason: Option<String>,
        /// What a sponsorship has left today (§22 rule `sponsorship_limit`), in whole native units.
        left: Option<String>,
        /// Which call of the request was refused (§22 rule `call_denied`: the first whose target no call may reach);
        /// a `u32` keeps the error small (a batch holds at most 16 calls).
        index: Option<u32>,
    },
    /// A paid request that failed after its payment was signed (§16): 502 `x402_payment_failed`, 504
    /// `upstream_timeout` or 502 `upstream_unavailable`, with `details.reason` and `details.transfer_id`.
    #[error("{message}")]
    PaidRequestFailed {
        status: StatusCode,
        code: &'static str,
        message: String,
        reason: String,
        transfer_id: uuid::Uuid,
    },
    /// A call that reverts in its simulation (§18): 422 `call_reverted` with `details.reason`; a batch's (§22, with
    /// the first call that reverted as `index`): 422 `simulation_reverted` with `details.index` too.
    #[error("{message}")]
    CallReverted {
        message: String,
        reason: String,
        index: Option<usize>,
    },
    #[error("internal error")]
    Internal(#[source] anyhow::Error),
}

impl AppError {
    /// A 422 for one field.
    pub fn field(field: &str, message: impl Into<String>) -> Self {
        let message = message.into();
        let mut fields = BTreeMap::new();
        fields.insert(field.to_string(), message.clone());
        AppError::Validation {
            message: format!("{field}: {message}"),
            fields,
        }
    }

    /// A 422 for several fields at once.
    pub fn fields(fields: BTreeMap<String, String>) -> Self {
        let message = fields
            .iter()
            .map(|(f, m)| format!("{f}: {m}"))
            .collect::<Vec<_>>()
            .join("; ");
        AppError::Validation { message, fields }
    }

    pub fn internal(err: impl Into<anyhow::Error>) -> Self {
        AppError::Internal(err.into())
    }

    pub fn status(&self) -> StatusCode {
        use AppError::*;
        match self {
            InvalidJson(_) | BadRequest { .. } => StatusCode::BAD_REQUEST,
            MissingToken | MissingCredential(_) | InvalidToken | AdminRequired | MetricsTokenRequired
            | InvalidProof | InvalidOwnerToken => StatusCode::UNAUTHORIZED,
            Forbidden | Denied { .. } | PolicyDenied { .. } => StatusCode::FORBIDDEN,
            AgentNotFound
            | ConversationNotFound
            | TransferNotFound
            | WebhookNotFound
            | EventNotFound
            | DelegationNotFound
            | FacilitatorTokenNotFound
            | OfferNotFound
            | NotFound => StatusCode::NOT_FOUND,
            MethodNotAllowed => StatusCode::METHOD_NOT_ALLOWED,
            AgentInactive => StatusCode::GONE,
            Conflict { .. } => StatusCode::CONFLICT,
            Unprocessable { .. } | X402Unsupported { .. } | CallReverted { .. } => StatusCode::UNPROCESSABLE_ENTITY,
            PayloadTooLarge => StatusCode::PAYLOAD_TOO_LARGE,
            Validation { .. } | ChallengeExpired => StatusCode::UNPROCESSABLE_ENTITY,
            RateLimited { .. } => StatusCode::TOO_MANY_REQUESTS,
            Upstream { status, .. } | PaidRequestFailed { status, .. } => *status,
            Internal(_) => StatusCode::INTERNAL_SERVER_ERROR,
        }
    }

    pub fn code(&self) -> &'static str {
        use AppError::*;
        match self {
            InvalidJson(_) => "invalid_json",
            BadRequest { code, .. }
            | Denied { code, .. }
            | Upstream { code, .. }
            | PaidRequestFailed { code, .. }
            | Conflict { code, .. }
            | Unprocessable { code, .. } => code,
            PolicyDenied { .. } => "policy_denied",
            X402Unsupported { .. } => "x402_unsupported",
            CallReverted { index: Some(_), .. } => "simulation_reverted",
            CallReverted { .. } => "call_reverted",
            MissingToken | MissingCredential(_) => "missing_token",
            InvalidToken => "invalid_token",
            AdminRequired | MetricsTokenRequired => "unauthorized",
            InvalidProof => "invalid_proof",
            InvalidOwnerToken => "invalid_owner_token",
            Forbidden => "forbidden",
            AgentNotFound => "agent_not_found",
            ConversationNotFound => "conversation_not_found",
            TransferNotFound => "transfer_not_found",
            WebhookNotFound => "webhook_not_found",
            EventNotFound => "event_not_found",
            DelegationNotFound => "delegation_not_found",
            FacilitatorTokenNotFound => "facilitator_token_not_found",
            OfferNotFound => "offer_not_found",
            NotFound => "not_found",
            MethodNotAllowed => "method_not_allowed",
            AgentInactive => "agent_inactive",
            PayloadTooLarge => "payload_too_large",
            Validation { .. } => "validation_failed",
            ChallengeExpired => "challenge_expired",
            RateLimited { .. } => "rate_limited",
            Internal(_) => "internal_error",
        }
    }

    /// The error body: `{"error": {"code", "message", "details?"}}`.
    pub fn view(&self) -> ErrorBody {
        let details = match self {
            AppError::Validation { fields, .. } => Some(FieldErrors {
                fields: Some(fields.clone()),
                ..FieldErrors::default()
            }),
            AppError::PolicyDenied {
                rule,
                available,
                reason,
                left,
                index,
                ..
            } => Some(FieldErrors {
                rule: Some(rule.to_string()),
                available: available.clone(),
                reason: reason.clone(),
                left: left.clone(),
                index: index.map(|i| i as usize),
                ..FieldErrors::default()
            }),
            AppError::PaidRequestFailed {
                reason, transfer_id, ..
            } => Some(FieldErrors {
                reason: Some(reason.clone()),
                transfer_id: Some(*transfer_id),
                ..FieldErrors::default()
            }),
            AppError::CallReverted { reason, index, .. } => Some(FieldErrors {
                reason: Some(reason.clone()),
                index: *index,
                ..FieldErrors::default()
            }),
            AppError::X402Unsupported { offered, .. } => Some(FieldErrors {
                offered: Some(offered.iter().filter_map(|o| serde_json::to_value(o).ok()).collect()),
                ..FieldErrors::default()
            }),
            _ => None,
        };
        ErrorBody {
            error: ErrorDetail {
                code: self.code().to_string(),
                message: self.to_string(),
                details,
            },
        }
    }
}

impl AppError {
    /// The error body as JSON (stored for idempotent replays, sent on streams).
    pub fn body(&self) -> serde_json::Value {
        serde_json::to_value(self.view()).unwrap_or_default()
    }
}

impl IntoResponse for AppError {
    fn into_response(self) -> Response {
        if let AppError::Internal(cause) = &self {
            tracing::error!(error = format!("{cause:#}"), "internal error");
        }
        let mut response = (self.status(), axum::Json(self.view())).into_response();
        if let AppError::RateLimited { retry_after_secs } = self {
            response
                .headers_mut()
                .insert(header::RETRY_AFTER, HeaderValue::from(retry_after_secs.max(1)));
        }
        response
    }
}

impl From<StoreError> for AppError {
    fn from(err: StoreError) -> Self {
        match err {
            StoreError::AgentNotFound => AppError::AgentNotFound,
            StoreError::ConversationNotFound => AppError::ConversationNotFound,
            other => AppError::Internal(other.into()),
        }
    }
}

impl From<EndpointError> for AppError {
    fn from(err: EndpointError) -> Self {
        match err {
            EndpointError::Invalid(fields) => AppError::fields(fields),
            EndpointError::NotFound => AppError::WebhookNotFound,
            EndpointError::EventNotFound => AppError::EventNotFound,
            EndpointError::Store(e) => e.into(),
        }
    }
}

impl From<AuthError> for AppError {
    fn from(err: AuthError) -> Self {
        match err {
            AuthError::MissingToken => AppError::MissingToken,
            e @ AuthError::MissingCredential { .. } => AppError::MissingCredential(e.to_string()),
            AuthError::InvalidToken => AppError::InvalidToken,
            AuthError::Forbidden => AppError::Forbidden,
            AuthError::AdminRequired => AppError::AdminRequired,
            AuthError::AgentNotFound => AppError::AgentNotFound,
            AuthError::AgentInactive => AppError::AgentInactive,
            AuthError::InvalidOwnerToken => AppError::InvalidOwnerToken,
            AuthError::OwnerRequired => AppError::Denied {
                code: "owner_required",
                message: AuthError::OwnerRequired.to_string(),
            },
            AuthError::Store(e) => AppError::from(e),
        }
    }
}

impl From<ProofError> for AppError {
    fn from(err: ProofError) -> Self {
        match err {
            ProofError::Invalid => AppError::InvalidProof,
            ProofError::ChallengeExpired => AppError::ChallengeExpired,
            ProofError::MalformedChallenge(message) => AppError::BadRequest {
                code: "malformed_challenge",
                message,
            },
            ProofError::UnknownChain => AppError::field("proof.chain", "unknown chain"),
            ProofError::Store(e) => AppError::from(e),
        }
    }
}

/// A slot frees when one of the agent's streams ends, which cannot be foreseen: the client is told to wait a little.
impl From<TooManyStreams> for AppError {
    fn from(_: TooManyStreams) -> Self {
        AppError::RateLimited { retry_after_secs: 5 }
    }
}

impl From<ChatError> for AppError {
    fn from(err: ChatError) -> Self {
        let status = match err {
            ChatError::ConversationNotFound => return AppError::ConversationNotFound,
            ChatError::ForeignConversation => return AppError::Forbidden,
            ChatError::Store(e) => return AppError::from(e),
            ChatError::Llm(LlmError::Timeout) | ChatError::Deadline => StatusCode::GATEWAY_TIMEOUT,
            ChatError::Llm(LlmError::Unavailable(_)) => StatusCode::SERVICE_UNAVAILABLE,
            ChatError::Llm(LlmError::BadResponse(_)) => StatusCode::BAD_GATEWAY,
        };
        AppError::Upstream {
            status,
            code: err.code(),
            message: err.to_string(),
        }
    }
}

/// §21's codes: each refusal of a registration is a 422 with its own code; a revoked or known delegation 409.
impl From<crate::delegations::DelegationError> for AppError {
    fn from(err: crate::delegations::DelegationError) -> Self {
        use crate::delegations::DelegationError as E;
        let message = err.to_string();
        let unprocessable = |code| AppError::Unprocessable {
            code,
            message: message.clone(),
        };
        match err {
            E::Field { field, reason } => AppError::field(&field, reason),
            E::Unavailable(_) => unprocessable("delegations_unavailable"),
            E::DelegateMismatch { .. } => unprocessable("delegate_mismatch"),
            E::NotRoot => unprocessable("delegation_not_root"),
            E::NotSmart(_) => unprocessable("delegator_not_smart"),
            E::InvalidSignature => unprocessable("invalid_delegation_signature"),
            E::UnknownCaveat { .. } => unprocessable("unknown_caveat"),
            E::CaveatConflict { .. } => unprocessable("caveat_conflict"),
            E::Unbounded => unprocessable("delegation_unbounded"),
            E::Revoked => AppError::Conflict {
                code: "delegation_revoked",
                message,
            },
            E::Exists => AppError::Conflict {
                code: "delegation_exists",
                message,
            },
            E::NotFound => AppError::DelegationNotFound,
            E::NotActive(_) => unprocessable("delegation_not_active"),
            E::Chain(e) => AppError::Upstream {
                status: StatusCode::from_u16(e.http_status()).unwrap_or(StatusCode::BAD_GATEWAY),
                code: e.code(),
                message,
            },
            E::Store(e) => AppError::from(e),
        }
    }
}

/// The same codes as the chat tools' refusals (docs/api.md §12), with the HTTP status of each.
impl From<TransferError> for AppError {
    fn from(err: TransferError) -> Self {
        let message = err.to_string();
        let code = err.code();
        match err {
            TransferError::CallDenied(_) | TransferError::CallTargetDenied { .. } => AppError::PolicyDenied {
                rule: crate::domain::policy::PolicyRule::CallDenied.as_str(),
                index: err.call_index().and_then(|i| u32::try_from(i).ok()),
                message,
                available: None,
                reason: None,
                left: None,
            },
            TransferError::PolicyDenied(rule) | TransferError::OverLimit { rule, .. } => AppError::PolicyDenied {
                rule: rule.as_str(),
                message,
                available: None,
                reason: None,
                left: None,
                index: None,
            },
            TransferError::DelegationLimit { ref available, .. } => AppError::PolicyDenied {
                rule: "delegation_limit",
                available: Some(available.clone()),
                message,
                reason: None,
                left: None,
                index: None,
            },
            TransferError::DelegationCaveat(reason) => AppError::PolicyDenied {
                rule: "delegation_caveat",
                message,
                available: None,
                reason: Some(reason),
                left: None,
                index: None,
            },
            TransferError::DelegationsUnavailable(_) | TransferError::DelegationNotActive(_) => {
                AppError::Unprocessable { code, message }
            }
            TransferError::DelegationRevoked | TransferError::AccountForeign => AppError::Conflict { code, message },
            TransferError::SponsorshipLimit { ref left } => AppError::PolicyDenied {
                rule: "sponsorship_limit",
                available: None,
                reason: None,
                left: Some(left.clone()),
                index: None,
                message,
            },
            TransferError::SponsorshipUnavailable(_) | TransferError::BatchUnavailable(_) => {
                AppError::Unprocessable { code, message }
            }
            TransferError::SponsorUnfunded(_) => AppError::Upstream {
                status: StatusCode::SERVICE_UNAVAILABLE,
                code,
                message,
            },
            TransferError::InvalidAmount(_) | TransferError::ZeroAmount => AppError::field("amount", message),
            TransferError::NoWallet => AppError::field("chain", message),
            TransferError::InsufficientFunds { .. }
            | TransferError::InsufficientTokenFunds { .. }
            | TransferError::InvalidRecipient(_)
            | TransferError::NothingToSweep(_) => AppError::Unprocessable { code, message },
            TransferError::CapExceeded { .. }
            | TransferError::CapabilityDenied(_)
            | TransferError::OwnerAddressRequired => AppError::Denied { code, message },
            TransferError::TransferNotFound => AppError::TransferNotFound,
            TransferError::AgentInactive => AppError::AgentInactive,
            TransferError::TokenRevoked => AppError::InvalidToken,
            TransferError::ClaimLost => AppError::Conflict {
                code: "idempotency_in_progress",
                message: "a repeat of this request took its Idempotency-Key over; its answer is the one kept".into(),
            },
            TransferError::NotAwaiting(_)
            | TransferError::NotPending(_)
            | TransferError::SimulationChanged(_)
            | TransferError::DesignationUnmined { .. } => AppError::Conflict { code, message },
            TransferError::Rejected(_) | TransferError::NonceKeptRefused => AppError::Upstream {
                status: StatusCode::BAD_GATEWAY,
                code,
                message,
            },
            TransferError::Chain(e) => AppError::Upstream {
                status: StatusCode::from_u16(e.http_status()).unwrap_or(StatusCode::BAD_GATEWAY),
                code: e.code(),
                message,
            },
            TransferError::Store(e) => AppError::from(e),
            TransferError::KeyUnavailable => AppError::internal(TransferError::KeyUnavailable),
            TransferError::SignerUnavailable => AppError::Upstream {
                status: StatusCode::SERVICE_UNAVAILABLE,
                code,
                message,
            },
            TransferError::CallReverted(reason) => AppError::CallReverted {
                message,
                reason,
                index: None,
            },
            TransferError::BatchReverted { index, reason } => AppError::CallReverted {
                message,
                reason,
                index: Some(index),
            },
            TransferError::SimulationUnavailable(_) => AppError::Upstream {
                status: StatusCode::SERVICE_UNAVAILABLE,
                code,
                message,
            },
        }
    }
}

/// The guarded fetch's refusals (§16): the URL rules are 422 `url_not_allowed`, the caller's headers or method a
/// field error, the resource's failures 502/504.
impl From<FetchError> for AppError {
    fn from(err: FetchError) -> Self {
        let message = err.to_string();
        match err {
            FetchError::UrlNotAllowed(_) => AppError::Unprocessable {
                code: "url_not_allowed",
                message,
            },
            FetchError::Invalid { field, reason } => AppError::field(field, reason),
            FetchError::HostNotFound | FetchError::Unavailable => AppError::Upstream {
                status: StatusCode::BAD_GATEWAY,
                code: "upstream_unavailable",
                message,
            },
            FetchError::Timeout => AppError::Upstream {
                status: StatusCode::GATEWAY_TIMEOUT,
                code: "upstream_timeout",
                message,
            },
        }
    }
}

/// Refusals before anything is signed: nothing payable offered, a price above `max_amount`, a bad `max_amount`.
/// A fetch under the agent's guardrails (§16): the refusals of each part, and the failures after a payment.
impl From<PayError> for AppError {
    fn from(err: PayError) -> Self {
        let message = err.to_string();
        let code = err.code();
        let failed = |status, reason: String, transfer_id| AppError::PaidRequestFailed {
            status,
            code,
            message: message.clone(),
            reason,
            transfer_id,
        };
        match err {
            PayError::Fetch(e) => e.into(),
            PayError::Refused(e) => e.into(),
            PayError::Transfer(e) => e.into(),
            PayError::PaymentFailed {
                ref reason,
                transfer_id,
            } => failed(StatusCode::BAD_GATEWAY, reason.clone(), transfer_id),
            PayError::Timeout { transfer_id } => {
                failed(StatusCode::GATEWAY_TIMEOUT, "no answer in time".into(), transfer_id)
            }
            PayError::Unavailable { transfer_id } => failed(
                StatusCode::BAD_GATEWAY,
                "the resource could not be reached".into(),
                transfer_id,
            ),
        }
    }
}

impl From<X402Error> for AppError {
    fn from(err: X402Error) -> Self {
        let message = err.to_string();
        match err {
            X402Error::Unsupported { offered, .. } => AppError::X402Unsupported { message, offered },
            X402Error::PriceAboveMax { .. } => AppError::Unprocessable {
                code: "price_above_max",
                message,
            },
            X402Error::InvalidMaxAmount(reason) => AppError::field("max_amount", reason),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::net::egress::guard::NotAllowed;

    #[test]
    fn x402_refusals_carry_the_contract_codes_and_statuses() {
        let cases: Vec<(AppError, u16, &str)> = vec![
            (
                FetchError::UrlNotAllowed(NotAllowed("x".into())).into(),
                422,
                "url_not_allowed",
            ),
            (FetchError::HostNotFound.into(), 502, "upstream_unavailable"),
            (FetchError::Unavailable.into(), 502, "upstream_unavailable"),
            (FetchError::Timeout.into(), 504, "upstream_timeout"),
            (
                FetchError::Invalid {
                    field: "headers",
                    reason: "Host cannot be set".into(),
                }
                .into(),
                422,
                "validation_failed",
            ),
            (
                X402Error::PriceAboveMax {
                    price: "0.06".into(),
                    max: "0.05".into(),
                    symbol: "USDC".into(),
                }
                .into(),
                422,
                "price_above_max",
            ),
        ];
        for (err, status, code) in cases {
            assert_eq!((err.status().as_u16(), err.code()), (status, code), "{err}");
        }
        let offered = Offered {
            scheme: Some("exact".into()),
            network: Some("eip155:1".into()),
            asset: None,
            amount: Some("5".into()),
            pay_to: None,
        };
        let err = AppError::from(X402Error::Unsupported {
            reason: "nothing fits".into(),
            offered: vec![offered],
        });
        assert_eq!(err.status(), StatusCode::UNPROCESSABLE_ENTITY);
        let body = err.body();
        assert_eq!(body["error"]["code"], "x402_unsupported");
        assert_eq!(body["error"]["details"]["offered"][0]["network"], "eip155:1");
    }
}
