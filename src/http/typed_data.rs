//! EIP-712 signatures (docs/api.md §18): `POST /api/agents/{id}/sign-typed-data` signs typed data that a
//! typed-data rule of the policy allows, through the transfer service's one send path (judged and counted in the
//! same atomic step as the cap); one held for the owner answers 202 and is signed once approved.

use axum::extract::State;
use axum::http::StatusCode;
use axum::response::Response;
use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use utoipa::ToSchema;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;
use uuid::Uuid;

use super::auth::ActiveCaller;
use super::error::{AppError, Result};
use super::idempotency::{Answer, IdempotencyHeader, Idempotent, run_once};
use super::json::{ApiJson, shape};
use super::views::ErrorBody;
use crate::domain::call::typed;
use crate::domain::chain as registry;
use crate::state::AppState;
use crate::store::Mandate;
use crate::transfers::{Transacting, TransferOutcome, Transfers, TypedOrder};

pub fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new().routes(routes!(sign_typed_data))
}

/// Typed data to sign on one of the agent's chains.
#[derive(Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
struct NewSignature {
    /// One of the agent's chains; the domain's `chainId` must be its id.
    #[schema(min_length = 1)]
    chain: String,
    /// EIP-712 typed data: `{types, primaryType, domain, message}`.
    #[schema(value_type = Object)]
    typed_data: Value,
}

/// A signature made, or one held for the owner.
#[derive(Serialize, ToSchema)]
#[serde(untagged)]
enum SignatureView {
    Signed {
        /// 0x + 65 bytes (r, s, v).
        signature: String,
        /// 0x + the 32-byte EIP-712 hash signed.
        digest: String,
    },
    Held {
        transfer_id: Uuid,
        /// `awaiting_approval`.
        status: &'static str,
        expires_at: DateTime<Utc>,
        digest: String,
    },
}

/// Sign EIP-712 typed data
///
/// Signs typed data that a typed-data rule of the policy's `calls` allows (none matching: 403 `policy_denied`, rule
/// `call_denied`, on every agent). The domain's `chainId` must be the chain's id; EIP-3009 authorizations are
/// refused (paid through x402 only). Permits (EIP-2612, DAI, Permit2 with its witness forms) count whole as the
/// allowances or transfers they grant, against the assets' limits and the unlimited-approval guard; values are read
/// as the digest encodes them, undeclared keys are refused (422), and so is typed data past 64 types, depth 16 or
/// 1,024 values. Undecoded Permit2 or `Permit…` typed data (rule `permit_not_understood`) and delegations (rule
/// `delegation_signature`) are refused whatever the rules. 200 `{signature, digest}`, or 202 when held for approval.
#[utoipa::path(post, path = "/api/agents/{id}/sign-typed-data", tag = "wallets", request_body = NewSignature,
    params(("id" = String, Path, format = "uuid"),
        ("Idempotency-Key" = Option<String>, Header, description = "1 to 255 visible ASCII characters: a repeat with the same body within 24 h answers the first answer again")),
    security(("agent_token" = [])),
    responses((status = 200, description = "Signed", body = SignatureView),
        (status = 202, description = "Held for an owner's approval", body = SignatureView),
        (status = 400, body = ErrorBody), (status = 401, body = ErrorBody), (status = 403, body = ErrorBody),
        (status = 404, body = ErrorBody), (status = 409, body = ErrorBody), (status = 410, body = ErrorBody),
        (status = 422, body = ErrorBody), (status = 503, body = ErrorBody)))]
#[tracing::instrument(skip_all, fields(agent_id = %caller.agent.id))]
async fn sign_typed_data(
    State(state): State<AppState>,
    State(transfers): State<Transfers>,
    ActiveCaller(caller): ActiveCaller,
    key: IdempotencyHeader,
    ApiJson(body): ApiJson<Value>,
) -> Result<Response> {
    caller.require_agent_token()?;
    Transacting::check(&caller.agent, &Mandate::NONE, caller.actor(), "signing typed data")?;
    let path = format!("/api/agents/{}/sign-typed-data", caller.agent.id);
    let request = Idempotent::new(key.key()?, caller.agent.id, "POST", &path, &body);
    run_once(state.store.clone(), state.clock.clone(), request, |claim| async move {
        let asked: NewSignature = shape(body)?;
        let chain = registry::find(asked.chain.trim())
            .filter(|c| caller.agent.has_chain(c.name))
            .ok_or_else(|| AppError::field("chain", "must be one of the agent's chains"))?;
        let typed = typed::parse(&asked.typed_data, chain.chain_id)
            .map_err(|e| AppError::field("typed_data", e.to_string()))?;
        let mandate = Mandate {
            token_hash: caller.token_hash.clone(),
            claim,
        };
        let outcome = transfers
            .sign_typed_data(TypedOrder {
                by: Transacting::check(&caller.agent, &mandate, caller.actor(), "signing typed data")?,
                chain,
                typed,
                conversation_id: None,
                guarded: caller.guarded,
            })
            .await?;
        let (status, view) = answer(&outcome);
        Answer::new(status, &view)
    })
    .await
}

/// The answer for a signature made (200) or held (202).
fn answer(outcome: &TransferOutcome) -> (StatusCode, SignatureView) {
    match outcome {
        TransferOutcome::Sent { tx, .. } => (
            StatusCode::OK,
            SignatureView::Signed {
                signature: alloy::hex::encode_prefixed(&tx.raw_tx),
                digest: digest_of(&tx.body),
            },
        ),
        TransferOutcome::AwaitingApproval { approval, .. } => (
            StatusCode::ACCEPTED,
            SignatureView::Held {
                transfer_id: approval.id,
                status: "awaiting_approval",
                expires_at: approval.expires_at,
                digest: digest_of(&approval.body),
            },
        ),
    }
}

fn digest_of<P>(body: &crate::domain::transaction::Body<P>) -> String {
    body.signature().map(|t| t.digest.to_string()).unwrap_or_default()
}
