//! `POST /api/agents/{id}/x402/fetch` (docs/api.md §16): the agent fetches a URL and pays an x402 paywall under
//! its guardrails, through the transfers service's `pay` (host rule, price, policy, cap, reservation, balance, then
//! the signature), with `Idempotency-Key` as for transfers.

use std::collections::BTreeMap;

use axum::extract::State;
use axum::http::StatusCode;
use axum::response::Response;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use utoipa::ToSchema;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use super::auth::ActiveCaller;
use super::error::{AppError, Result};
use super::idempotency::{Answer, IdempotencyHeader, Idempotent, run_once};
use super::json::{ApiJson, shape};
use super::views::{ErrorBody, TransferView};
use crate::auth::Actor;
use crate::domain::agent::Agent;
use crate::domain::amount::parse_units;
use crate::state::AppState;
use crate::store::Mandate;
use crate::transfers::{Paid, PayOrder, Payment, Transacting, Transfers};

pub fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new().routes(routes!(fetch_paid))
}

/// A fetch to make, paying up to `max_amount` if the resource asks.
#[derive(Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
struct FetchBody {
    /// `http` or `https`, no credentials; its query is never stored or logged.
    url: String,
    /// The most to pay, a decimal string in whole units of the token paid (e.g. "0.05").
    max_amount: String,
    /// GET (the default), POST, PUT, PATCH, DELETE, HEAD or OPTIONS.
    method: Option<String>,
    /// Request headers; `Host`, hop-by-hop headers, `Content-Length`, `Payment-*` and `X-Payment*` are refused.
    headers: Option<BTreeMap<String, String>>,
    /// The request body, as text.
    body: Option<String>,
    /// A registry token's symbol or address the payment must be in (e.g. "USDC").
    asset: Option<String>,
}

/// The resource's answer and the payment made for it.
#[derive(Debug, Serialize, ToSchema)]
pub struct X402FetchView {
    /// The resource's status (its 402 while a payment awaits approval).
    pub status: u16,
    /// Lower-case names.
    pub headers: BTreeMap<String, String>,
    /// As text (invalid UTF-8 replaced).
    pub body: String,
    /// The body was cut at `X402_MAX_RESPONSE_BYTES`.
    pub truncated: bool,
    /// Null when the resource asked for no payment; else the transfer of `kind: "x402"`.
    #[schema(required = true)]
    pub payment: Option<TransferView>,
}

impl X402FetchView {
    fn new(paid: &Paid) -> Self {
        X402FetchView {
            status: paid.answer.status,
            headers: paid.answer.headers.clone(),
            body: paid.answer.text(),
            truncated: paid.answer.truncated,
            payment: paid.payment.as_ref().map(|p| match p {
                Payment::Signed(tx) => TransferView::from(tx.as_ref()),
                Payment::AwaitingApproval(a) => TransferView::from(a.as_ref()),
            }),
        }
    }
}

/// Fetch an HTTP resource, paying its x402 paywall
///
/// Fetches `url` for the agent (agent token, `transact`). A resource that answers 402 with an x402 price (protocol
/// v2 `PAYMENT-REQUIRED`, or v1 in the body) is paid from the agent's wallet with an EIP-3009 authorization of a
/// registry token, under the same guardrails as a transfer: the price (at most `max_amount`), the policy (per-asset
/// limits, recipients, `allowed_hosts`), the cap and the reservation are decided before anything is signed. Answers
/// 200 with the resource's answer and the payment (null when the resource asked for none), or 202 when the payment
/// awaits an owner's approval. URLs that are not public http(s) are refused (422 `url_not_allowed`); redirects are
/// passed back unfollowed. With an `Idempotency-Key` a repeat answers the first answer again.
#[utoipa::path(post, path = "/api/agents/{id}/x402/fetch", tag = "wallets", request_body = FetchBody,
    params(("id" = String, Path, format = "uuid"),
        ("Idempotency-Key" = Option<String>, Header, description = "1 to 255 visible ASCII characters: a repeat with the same body within 24 h answers the first answer again")),
    security(("agent_token" = [])),
    responses((status = 200, description = "The resource's answer (passed through, 3xx included), and the payment made for it if it asked for one", body = X402FetchView),
        (status = 202, description = "The payment awaits an owner's approval: the resource's 402, nothing signed", body = X402FetchView),
        (status = 401, body = ErrorBody), (status = 403, body = ErrorBody, description = "`policy_denied` (incl. `host_not_allowed`), `spending_cap_exceeded`, `capability_denied`"),
        (status = 404, body = ErrorBody), (status = 409, body = ErrorBody), (status = 410, body = ErrorBody),
        (status = 422, body = ErrorBody, description = "`url_not_allowed`, `x402_unsupported`, `price_above_max`, `insufficient_funds`, `validation_failed`"),
        (status = 502, body = ErrorBody, description = "`x402_payment_failed` (details.reason, details.transfer_id) or `upstream_unavailable`"),
        (status = 504, body = ErrorBody, description = "`upstream_timeout`")))]
#[tracing::instrument(skip_all, fields(agent_id = %caller.agent.id))]
async fn fetch_paid(
    State(state): State<AppState>,
    ActiveCaller(caller): ActiveCaller,
    key: IdempotencyHeader,
    ApiJson(body): ApiJson<Value>,
) -> Result<Response> {
    // Paying acts as the agent: owner authority alone does not pay (as for transfers).
    caller.require_agent_token()?;
    let (agent, token_hash) = (caller.agent, caller.token_hash);
    let path = format!("/api/agents/{}/x402/fetch", agent.id);
    let request = Idempotent::new(key.key()?, agent.id, "POST", &path, &body);
    let transfers = state.transfers.clone();
    run_once(state.store.clone(), state.clock.clone(), request, |claim| async move {
        let mandate = Mandate { token_hash, claim };
        fetch(&transfers, &agent, &mandate, body).await
    })
    .await
}

async fn fetch(transfers: &Transfers, agent: &Agent, mandate: &Mandate, body: Value) -> Result<Answer> {
    let by = Transacting::check(agent, mandate, Actor::Agent, "paying")?;
    let request: FetchBody = shape(body)?;
    let max_amount = request.max_amount.trim();
    // Checked as an amount now; against the chosen token's decimals once a price is known.
    if parse_units(max_amount, 36).is_err() {
        return Err(AppError::field("max_amount", "must be a decimal amount, e.g. \"0.05\""));
    }
    let headers = request.headers.unwrap_or_default();
    let paid = transfers
        .pay(PayOrder {
            by,
            url: request.url.trim(),
            max_amount,
            method: request.method.as_deref(),
            headers: &headers,
            body: request.body,
            asset: request.asset.as_deref().map(str::trim),
            conversation_id: None,
        })
        .await?;
    let status = match paid.payment {
        Some(Payment::AwaitingApproval(_)) => StatusCode::ACCEPTED,
        _ => StatusCode::OK,
    };
    Answer::new(status, &X402FetchView::new(&paid))
}
