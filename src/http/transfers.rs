//! The transfers API (docs/api.md §12): `POST /api/agents/{id}/transfers` sends without the LLM, through the same
//! transfer service as the `send_native` tool (cap, nonce, sign, store, broadcast), with `Idempotency-Key`;
//! `GET /api/agents/{id}/transfers/{transfer_id}` reads one back.

use axum::Json;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::response::Response;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use utoipa::ToSchema;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;
use uuid::Uuid;

use super::auth::{ActiveCaller, parse_id};
use super::error::{AppError, Result};
use super::idempotency::{Answer, IdempotencyHeader, Idempotent, run_once_or_recall};
use super::json::{ApiJson, shape};
use super::views::{ErrorBody, TransferView};
use crate::auth::Actor;
use crate::domain::agent::{Agent, parse_address};
use crate::domain::amount::Amount;
use crate::domain::asset::Registry;
use crate::domain::chain as registry;
use crate::state::AppState;
use crate::store::Mandate;
use crate::transfers::{DecisionView, FeePreview, Transacting, TransferOrder, Transfers};

pub fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(create_transfer))
        .routes(routes!(preview_transfer))
        .routes(routes!(get_transfer))
}

/// A transfer to make.
#[derive(Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
struct NewTransfer {
    /// One of the agent's chains.
    #[schema(min_length = 1)]
    chain: String,
    /// The recipient, a 0x address.
    to: String,
    /// Decimal string in whole units of the asset, e.g. "0.01".
    amount: String,
    /// The asset: the chain's native symbol (the default) or a registry token's symbol or contract address
    /// (`USDC`), any case.
    asset: Option<String>,
    /// An on-chain delegation of the agent's to redeem (§21): the amount leaves its delegator's account.
    #[schema(format = "uuid")]
    delegation: Option<String>,
    /// Who pays the gas (§22): `sponsored` (the operator's sponsorship, a user operation of the agent's account)
    /// or `wallet`; default `sponsored` on a chain where the agent has a sponsorship with a non-zero `per_day`.
    #[schema(required = false, pattern = "^(sponsored|wallet)$")]
    gas: Option<String>,
}

/// Send a transfer
///
/// Sends native coin or a registry token (`asset`, default the chain's native symbol) from the agent's wallet,
/// under its capabilities, spending cap and policy, in one atomic step; signed with EIP-1559 and recorded before
/// broadcast. Answers 201 with the transfer, `pending` or `awaiting_approval`. Refusals: 403 `capability_denied`,
/// `spending_cap_exceeded`, `policy_denied` (with `details.rule`); 422 `validation_failed`, `invalid_recipient`,
/// `insufficient_funds`; 502/503/504 when the node fails. With an `Idempotency-Key` a repeat answers the first
/// answer again.
#[utoipa::path(post, path = "/api/agents/{id}/transfers", tag = "wallets", request_body = NewTransfer,
    params(("id" = String, Path, format = "uuid"),
        ("Idempotency-Key" = Option<String>, Header, description = "1 to 255 visible ASCII characters: a repeat with the same body within 24 h answers the first answer again")),
    security(("agent_token" = [])),
    responses((status = 201, description = "Signed, stored and handed to the node (`pending`), or held for an owner's approval (`awaiting_approval`)", body = TransferView),
        (status = 400, body = ErrorBody), (status = 401, body = ErrorBody), (status = 403, body = ErrorBody),
        (status = 404, body = ErrorBody), (status = 409, body = ErrorBody), (status = 410, body = ErrorBody),
        (status = 422, body = ErrorBody), (status = 502, body = ErrorBody), (status = 503, body = ErrorBody),
        (status = 504, body = ErrorBody)))]
#[tracing::instrument(skip_all, fields(agent_id = %caller.agent.id))]
async fn create_transfer(
    State(state): State<AppState>,
    ActiveCaller(caller): ActiveCaller,
    key: IdempotencyHeader,
    ApiJson(body): ApiJson<Value>,
) -> Result<Response> {
    // Sending acts as the agent: owner authority alone does not send (docs/api.md §10).
    caller.require_agent_token()?;
    let (agent, token_hash) = (caller.agent, caller.token_hash);
    let path = format!("/api/agents/{}/transfers", agent.id);
    let request = Idempotent::new(key.key()?, agent.id, "POST", &path, &body);
    let transfers = state.transfers.clone();
    let assets = state.chains.tokens().clone();
    let (store, clock, agent_id) = (state.store.clone(), state.clock.clone(), agent.id);
    // A repeat of a request that died after reserving its transfer answers that transfer, as the request would have.
    let recall = |id| async move {
        let view = stored_view(&state, agent_id, id).await?;
        view.map(|view| Answer::new(StatusCode::CREATED, &view)).transpose()
    };
    run_once_or_recall(store, clock, request, recall, |claim| async move {
        let mandate = Mandate { token_hash, claim };
        send(&transfers, &assets, &agent, &mandate, body).await
    })
    .await
}

/// What a transfer would do now (§12): the verdict and what its network fee could be at most.
#[derive(Serialize, ToSchema)]
struct TransferPreviewView {
    /// What the send would meet now: `result` `allow`, `approve` (held for the owner) or `deny` with its `code`
    /// and `rule`, as `POST …/calls/simulate` says it (§18).
    #[schema(value_type = Object)]
    decision: DecisionView,
    /// A refusal (`decision.result` `deny`) in the words the send's error would give.
    #[serde(skip_serializing_if = "Option::is_none")]
    message: Option<String>,
    /// Who would pay the network fee (§22): `wallet` (the agent's, in the native coin) or `sponsored`.
    #[schema(example = "wallet")]
    gas: &'static str,
    /// The most the network fee could be, in the chain's native coin (gas limit × `maxFeePerGas`, plus the L1 fee
    /// estimate on OP-stack chains), at the fees of now: the send signs at the fees it reads then (the same within
    /// 2 s). Null when the sponsorship pays, or when it was not quoted: the wallet cannot pay it (`decision` says
    /// `insufficient_funds`) or a delegation's limit refused the send first.
    #[schema(required = true)]
    max_fee: Option<String>,
    /// The gas limit the transaction would be signed with; null as `max_fee`.
    #[schema(required = true)]
    gas_limit: Option<u64>,
    /// Its `maxFeePerGas` in wei, a decimal string; null as `max_fee`.
    #[schema(required = true)]
    max_fee_per_gas_wei: Option<String>,
}

/// Preview a transfer
///
/// The same body as `POST …/transfers`: what the send would decide now (`decision`, as `calls/simulate` says it)
/// and the most its network fee could be (`max_fee`, gas limit × `maxFeePerGas` of the transaction it would
/// sign); nothing is reserved, signed or recorded. A rule's refusal is `decision.result` `deny` with its `code` and
/// `rule`; other refusals answer as the send would (422 `invalid_recipient`, `delegation_not_active`, …).
#[utoipa::path(post, path = "/api/agents/{id}/transfers/preview", tag = "wallets", request_body = NewTransfer,
    params(("id" = String, Path, format = "uuid")),
    security(("agent_token" = []), ("admin_token" = []), ("owner_token" = [])),
    responses((status = 200, description = "The verdict and the network fee at most", body = TransferPreviewView),
        (status = 400, body = ErrorBody), (status = 401, body = ErrorBody), (status = 403, body = ErrorBody),
        (status = 404, body = ErrorBody), (status = 410, body = ErrorBody), (status = 422, body = ErrorBody),
        (status = 502, body = ErrorBody), (status = 503, body = ErrorBody), (status = 504, body = ErrorBody)))]
#[tracing::instrument(skip_all, fields(agent_id = %caller.agent.id))]
async fn preview_transfer(
    State(state): State<AppState>,
    ActiveCaller(caller): ActiveCaller,
    ApiJson(body): ApiJson<Value>,
) -> Result<Json<TransferPreviewView>> {
    let assets = state.chains.tokens().clone();
    let mandate = Mandate::NONE;
    let by = Transacting::check(&caller.agent, &mandate, caller.actor(), "sending")?;
    let order = order(&caller.agent, by, &assets, body)?;
    let preview = state.transfers.preview_transfer(&order).await?;
    let wallet = match preview.fee {
        FeePreview::Wallet(fee) => fee,
        FeePreview::Sponsored => None,
    };
    let decimals = order.chain.decimals;
    Ok(Json(TransferPreviewView {
        message: preview.decision.message.clone(),
        decision: preview.decision,
        gas: match preview.fee {
            FeePreview::Wallet(_) => "wallet",
            FeePreview::Sponsored => "sponsored",
        },
        max_fee: wallet.map(|f| crate::domain::amount::format_units(f.max_fee, decimals)),
        gas_limit: wallet.map(|f| f.gas_limit),
        max_fee_per_gas_wei: wallet.map(|f| f.max_fee_per_gas.to_string()),
    }))
}

/// The capability, the request's fields, then the transfer service.
async fn send(
    transfers: &Transfers,
    assets: &Registry,
    agent: &Agent,
    mandate: &Mandate,
    body: Value,
) -> Result<Answer> {
    let by = Transacting::check(agent, mandate, Actor::Agent, "sending")?;
    let order = order(agent, by, assets, body)?;
    let outcome = transfers.send(order).await?;
    Answer::new(StatusCode::CREATED, &TransferView::from(&outcome))
}

/// The order a transfer's body asks for, its fields checked.
fn order<'a>(agent: &Agent, by: Transacting<'a>, assets: &Registry, body: Value) -> Result<TransferOrder<'a>> {
    let request: NewTransfer = shape(body)?;
    let chain = registry::find(request.chain.trim())
        .filter(|c| agent.has_chain(c.name))
        .ok_or_else(|| AppError::field("chain", "must be one of the agent's chains"))?;
    let asset = assets
        .named(chain, request.asset.as_deref())
        .map_err(|e| AppError::field("asset", e.to_string()))?;
    let to = parse_address(request.to.trim()).ok_or_else(|| AppError::field("to", "must be a 0x address"))?;
    let amount = Amount::parse(&request.amount, asset.decimals)
        .map_err(|_| AppError::field("amount", "must be a decimal amount greater than zero"))?;
    let delegation =
        crate::delegations::named(request.delegation.as_deref()).map_err(|m| AppError::field("delegation", m))?;
    let gas = parse_gas(request.gas.as_deref())?;
    Ok(TransferOrder {
        delegation,
        gas,
        by,
        chain,
        to,
        token: (!asset.is_native()).then_some(asset),
        amount,
        conversation_id: None,
    })
}

/// The `gas` field (§22): `sponsored` or `wallet`; absent, the default of the agent's chain.
pub(crate) fn parse_gas(gas: Option<&str>) -> Result<Option<crate::domain::transaction::Payer>> {
    gas.map(|g| {
        crate::domain::transaction::Payer::parse(g.trim())
            .ok_or_else(|| AppError::field("gas", "must be \"sponsored\" or \"wallet\""))
    })
    .transpose()
}

/// Read a transfer
///
/// One transfer of the agent with its status (`awaiting_approval`, `pending`, `confirmed`, `reverted`, `dropped`,
/// `cancelled`, `rejected`, `expired`), hashes of its attempts and its cost.
#[utoipa::path(get, path = "/api/agents/{id}/transfers/{transfer_id}", tag = "wallets",
    params(("id" = String, Path, format = "uuid"), ("transfer_id" = String, Path, format = "uuid")),
    security(("agent_token" = []), ("admin_token" = []), ("owner_token" = [])),
    responses((status = 200, body = TransferView), (status = 401, body = ErrorBody), (status = 403, body = ErrorBody),
        (status = 404, body = ErrorBody), (status = 410, body = ErrorBody)))]
#[tracing::instrument(skip_all, fields(agent_id = %caller.agent.id))]
async fn get_transfer(
    State(state): State<AppState>,
    ActiveCaller(caller): ActiveCaller,
    Path((_, transfer_id)): Path<(String, String)>,
) -> Result<Json<TransferView>> {
    let id = parse_id(&transfer_id).ok_or(AppError::TransferNotFound)?;
    let view = stored_view(&state, caller.agent.id, id).await?;
    view.map(Json).ok_or(AppError::TransferNotFound)
}

/// One of the agent's transfers as stored now; `None` when it has none of that id.
async fn stored_view(state: &AppState, agent_id: Uuid, id: Uuid) -> Result<Option<TransferView>> {
    // A transfer that waits (or waited and was never sent) lives with the approvals; a sent one with the transactions.
    if let Some(tx) = state.store.get_transaction(agent_id, id).await? {
        return Ok(Some(super::cancel::sent_view(state, &tx).await?));
    }
    let approval = state.store.get_approval(id).await?;
    Ok(approval
        .filter(|a| a.agent_id == agent_id)
        .map(|a| TransferView::from(&a)))
}
