//! The example of every documented error response: for each operation and status, one refusal the operation really
//! answers with that status, built from the service's own `AppError` (so its code, message and details are exactly
//! what a client receives). A pair this table has no refusal for gets no example, which the document's tests catch.

use uuid::Uuid;

use crate::chain::error::ChainError;
use crate::chat::ChatError;
use crate::domain::policy::{ApprovalStatus, PolicyRule};
use crate::http::error::AppError;
use crate::llm::LlmError;
use crate::net::egress::FetchError;
use crate::net::egress::guard::NotAllowed;
use crate::transfers::{PayError, TransferError};

const TRANSFER_ID: &str = "7d444840-9dc0-11d1-b245-5ffdce74fad2";

/// Operations whose `{transfer_id}` names a transfer of the agent.
const TRANSFER_OPERATIONS: &[&str] = &["get_transfer", "approve_transfer", "reject_transfer", "cancel_transfer"];
/// Webhook operations (§19): the operator's and one agent's.
fn is_webhook_operation(operation: &str) -> bool {
    operation.contains("webhook")
}

/// Operations on one conversation.
const CONVERSATION_OPERATIONS: &[&str] = &["delete_conversation", "list_messages", "stream_conversation"];

fn chain_error(err: ChainError) -> AppError {
    TransferError::Chain(err).into()
}

fn not_configured() -> AppError {
    chain_error(ChainError::NotConfigured { chain: "base".into() })
}

/// A refusal `operation` answers with `status`, when the document lists that status for it.
pub fn example(operation: &str, status: &str) -> Option<AppError> {
    let error = match status {
        "502" if matches!(operation, "buy" | "buy_posted") => crate::http::sale::upstream_failed_error(),
        "400" => match operation {
            "owner_session" | "reissue_token" => AppError::BadRequest {
                code: "malformed_challenge",
                message: "the message is not a challenge this service issued".into(),
            },
            _ => AppError::InvalidJson("expected `,` or `}` at line 1 column 18".into()),
        },
        "401" => match operation {
            "create_agent" | "list_agents" | "put_sponsorship" => AppError::AdminRequired,
            _ if is_webhook_operation(operation) && !operation.contains("agent_webhook") => AppError::AdminRequired,
            "scrape" => AppError::MetricsTokenRequired,
            "owner_session" | "reissue_token" => AppError::InvalidProof,
            _ => AppError::InvalidToken,
        },
        "403" => match operation {
            "update_agent" | "put_policy" | "export_key" | "reactivate_agent" | "approve_transfer"
            | "reject_transfer" | "sweep" | "remove_delegation" => crate::auth::AuthError::OwnerRequired.into(),
            "create_facilitator_token" | "list_facilitator_tokens" | "delete_facilitator_token" => {
                crate::auth::AuthError::OwnerRequired.into()
            }
            _ if is_webhook_operation(operation) => crate::auth::AuthError::OwnerRequired.into(),
            "create_transfer" => TransferError::PolicyDenied(PolicyRule::PerTransfer).into(),
            "preview_transfer" => TransferError::CapabilityDenied("sending").into(),
            "create_call" | "simulate_call" | "sign_typed_data" => {
                TransferError::PolicyDenied(PolicyRule::CallDenied).into()
            }
            "fetch_paid" => TransferError::PolicyDenied(PolicyRule::HostNotAllowed).into(),
            "put_sponsorship" => crate::http::sponsorship::not_the_operator(),
            "create_offer" | "list_offers" | "get_offer" | "close_offer" => {
                crate::auth::AuthError::OwnerRequired.into()
            }
            _ => AppError::Forbidden,
        },
        "404" if TRANSFER_OPERATIONS.contains(&operation) => AppError::TransferNotFound,
        "404" if CONVERSATION_OPERATIONS.contains(&operation) => AppError::ConversationNotFound,
        "404" if operation.starts_with("redeliver_") => AppError::EventNotFound,
        "404"
            if is_webhook_operation(operation)
                && !matches!(operation, "list_agent_webhooks" | "create_agent_webhook") =>
        {
            AppError::WebhookNotFound
        }
        "404" if matches!(operation, "get_delegation" | "remove_delegation") => AppError::DelegationNotFound,
        "404" if operation == "delete_facilitator_token" => AppError::FacilitatorTokenNotFound,
        "404" if matches!(operation, "get_offer" | "close_offer" | "buy" | "buy_posted") => AppError::OfferNotFound,
        "402" if matches!(operation, "buy" | "buy_posted") => crate::http::sale::payment_required_error(None),
        "405" if operation == "buy_posted" => AppError::MethodNotAllowed,
        "404" => AppError::AgentNotFound,
        "409" => match operation {
            "add_delegation" => crate::delegations::DelegationError::Exists.into(),
            "approve_transfer" => TransferError::NotAwaiting(ApprovalStatus::Expired).into(),
            "reject_transfer" => TransferError::NotAwaiting(ApprovalStatus::Approved).into(),
            "cancel_transfer" => TransferError::NotPending("confirmed").into(),
            "create_transfer" | "create_call" | "sign_typed_data" | "fetch_paid" | "chat" => AppError::Conflict {
                code: "idempotency_in_progress",
                message: "a request with this Idempotency-Key is still running; retry when it has finished".into(),
            },
            _ => return None,
        },
        "410" => AppError::AgentInactive,
        "413" => AppError::PayloadTooLarge,
        "422" => match operation {
            "create_agent" | "update_agent" => AppError::field("name", "must not be empty"),
            "list_agents" | "list_transactions" | "list_conversations" => {
                AppError::field("limit", "must be at least 1")
            }
            "list_audit" => AppError::field("limit", "must be between 1 and 500"),
            "export_key" => AppError::field("confirm", "must be true to export a private key"),
            "fund_agent" => AppError::field("amount", "must be greater than zero"),
            "reject_transfer" => {
                AppError::field("reason", "must be at most 500 characters, without control characters")
            }
            "owner_challenge" => AppError::field("address", "must be a 0x address"),
            "owner_session" | "reissue_token" => AppError::ChallengeExpired,
            "put_policy" => AppError::field("approval_ttl_secs", "must be between 60 and 604800"),
            "create_transfer" | "preview_transfer" => {
                TransferError::InvalidRecipient("the recipient is the agent's own wallet").into()
            }
            "sweep" => TransferError::NothingToSweep("ETH".into()).into(),
            "sign_typed_data" => AppError::field(
                "typed_data",
                "typed_data.domain.chainId is 1, but the request's chain has id 8453",
            ),
            "create_call" | "simulate_call" => {
                TransferError::CallReverted("UniswapV2Router: INSUFFICIENT_OUTPUT_AMOUNT".into()).into()
            }
            "fetch_paid" => {
                FetchError::UrlNotAllowed(NotAllowed("the url must use https (http only for localhost)".into())).into()
            }
            "chat" | "chat_stream" => AppError::field("message", "must be 1 to 8000 characters"),
            "list_webhook_deliveries" | "list_agent_webhook_deliveries" => {
                AppError::field("limit", "must be between 1 and 500")
            }
            _ if is_webhook_operation(operation) => {
                AppError::field("url", "the url's host is a private address, which cannot be fetched")
            }
            "stream_conversation" => AppError::field("last_event_id", "must be a non-negative integer event id"),
            "add_delegation" => crate::delegations::DelegationError::Unbounded.into(),
            "put_sponsorship" => crate::http::sponsorship::unavailable("base"),
            "facilitator_verify" | "facilitator_settle" => AppError::field("body", "must be a JSON object"),
            "create_offer" => crate::offers::OfferError::AssetNotPayable(
                "ETH is the native coin of base: an offer is paid in an EIP-3009 token".into(),
            )
            .into(),
            "list_income" => AppError::field("status", "must be settling, settled, failed or released"),
            _ => return None,
        },
        "429" => AppError::RateLimited { retry_after_secs: 5 },
        "500" => AppError::internal(anyhow::anyhow!("the database is unavailable")),
        "502" => match operation {
            "chat" | "chat_stream" => {
                ChatError::Llm(LlmError::BadResponse("the completion holds no choice".into())).into()
            }
            "fetch_paid" => PayError::PaymentFailed {
                reason: "the facilitator refused the signature".into(),
                transfer_id: Uuid::parse_str(TRANSFER_ID).unwrap_or_default(),
            }
            .into(),
            _ => chain_error(ChainError::Unavailable {
                chain: "base".into(),
                reason: "connection refused".into(),
            }),
        },
        "503" => match operation {
            "chat" | "chat_stream" => ChatError::Llm(LlmError::Unavailable("no LLM is configured".into())).into(),
            "create_call" | "simulate_call" => TransferError::SimulationUnavailable("base".into()).into(),
            _ => not_configured(),
        },
        "504" => match operation {
            "chat" | "chat_stream" => ChatError::Llm(LlmError::Timeout).into(),
            "fetch_paid" => FetchError::Timeout.into(),
            _ => chain_error(ChainError::Timeout { chain: "base".into() }),
        },
        _ => return None,
    };
    // A refusal of another status would document a lie: leave the response without an example instead.
    (error.status().as_str() == status).then_some(error)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every error status the document lists gets an example whose status is that status.
    #[test]
    fn every_documented_error_status_has_a_refusal_of_that_status() {
        let doc = serde_json::to_value(crate::http::openapi()).unwrap();
        let mut seen = 0;
        for (path, item) in doc["paths"].as_object().unwrap() {
            for (method, op) in item.as_object().unwrap() {
                let operation = op["operationId"].as_str().unwrap_or_default();
                for status in op["responses"].as_object().unwrap().keys() {
                    if !(status.starts_with('4') || status.starts_with('5')) {
                        continue;
                    }
                    let error = example(operation, status)
                        .unwrap_or_else(|| panic!("{method} {path} ({operation}) {status}: no refusal"));
                    assert_eq!(error.status().as_str(), status, "{operation}");
                    let body = &op["responses"][status]["content"]["application/json"]["example"];
                    assert_eq!(body, &error.body(), "{method} {path} {status}");
                    seen += 1;
                }
            }
        }
        assert!(seen >= 200, "{seen}");
    }

    /// The code is the one the operation answers, not the status's most common one.
    #[test]
    fn the_refusal_is_the_operations_own() {
        let code = |op: &str, status: &str| example(op, status).map(|e| e.code());
        assert_eq!(code("get_transfer", "404"), Some("transfer_not_found"));
        assert_eq!(code("list_messages", "404"), Some("conversation_not_found"));
        assert_eq!(code("get_agent", "404"), Some("agent_not_found"));
        assert_eq!(code("reissue_token", "401"), Some("invalid_proof"));
        assert_eq!(code("scrape", "401"), Some("unauthorized"));
        assert_eq!(code("approve_transfer", "409"), Some("transfer_expired"));
        assert_eq!(code("cancel_transfer", "409"), Some("transfer_not_pending"));
        assert_eq!(code("fetch_paid", "502"), Some("x402_payment_failed"));
        assert_eq!(code("create_transfer", "503"), Some("chain_not_configured"));
        assert_eq!(code("sweep", "403"), Some("owner_required"));
        assert_eq!(code("sweep", "422"), Some("nothing_to_sweep"));
        // A status no refusal of the operation has stays without an example.
        assert_eq!(code("get_agent", "409"), None);
    }
}
