//! Contract calls (docs/api.md §18): `POST /api/agents/{id}/calls` simulates, judges and sends a call through the
//! transfer service's one send path; `POST …/calls/simulate` answers the same simulation and verdict and reserves,
//! signs and records nothing.

use axum::Json;
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
use super::views::{CallView, ErrorBody, TransferView};
use axum::response::IntoResponse;

mod batch;
use crate::auth::Caller;
use crate::domain::agent::parse_address;
use crate::domain::amount::parse_units;
use crate::domain::call::{self, CallInput};
use crate::domain::chain as registry;
use crate::state::AppState;
use crate::store::Mandate;
use crate::transfers::{CallOrder, DecisionView, Transacting, Transfers};

pub fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(create_call))
        .routes(routes!(simulate_call))
}

/// A contract call: `data`, or `function` and `args` for the service to encode.
#[derive(Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
struct NewCall {
    /// One of the agent's chains.
    #[schema(min_length = 1)]
    chain: String,
    /// The contract, a 0x address (not with `calls`).
    to: Option<String>,
    /// Native value sent with the call, a decimal string in whole units (default "0").
    value: Option<String>,
    /// 0x-hex calldata (selector included); or give `function` and `args`.
    data: Option<String>,
    /// A Solidity signature such as `approve(address,uint256)`.
    function: Option<String>,
    /// The arguments: addresses and byte strings as 0x-hex, integers as decimal strings, booleans, arrays and
    /// tuples as arrays.
    #[schema(value_type = Option<Vec<serde_json::Value>>)]
    args: Option<Vec<Value>>,
    /// An on-chain delegation of the agent's to redeem (§21): the call runs from the delegator's account, judged as
    /// its execution (a registry token's `transfer`, or a plain native send).
    #[schema(format = "uuid")]
    delegation: Option<String>,
    /// A batch (§22): 2 to 16 calls the agent's account runs in order, all or nothing, in place of `to`, `value`,
    /// `data` / `function` + `args`.
    #[schema(value_type = Option<Vec<batch::NewBatchedCall>>)]
    calls: Option<Vec<batch::NewBatchedCall>>,
    /// Who pays the gas (§22): `sponsored` (a user operation of the agent's account, the operator's sponsorship
    /// paying) or `wallet`; the default is `sponsored` where the agent has a sponsorship on the chain.
    gas: Option<String>,
}

/// A call's simulation and the verdict it would get now.
#[derive(Serialize, ToSchema)]
struct SimulatedCall {
    call: CallView,
    #[schema(value_type = Object)]
    simulation: Value,
    #[schema(value_type = Object)]
    decision: DecisionView,
    /// A refusal (`decision.result` `deny`) in the words the same call's 403 would give.
    #[serde(skip_serializing_if = "Option::is_none")]
    message: Option<String>,
}

/// Call a contract
///
/// Simulates the call from the agent's wallet, judges it by the policy's `calls` rules, the unlimited-approval guard,
/// the limits of every asset it takes or allows and the spending cap, in one atomic step; then signs it (EIP-1559) and
/// sends it, or, with `gas: "sponsored"`, signs it as a user operation of the agent's account that a bundle carries. 201 with the transfer (`kind: "call"`, `call`, `simulation`), `pending` or `awaiting_approval`. A call
/// that reverts: 422 `call_reverted` with `details.reason`; a node that cannot simulate: 503
/// `simulation_unavailable`. With an `Idempotency-Key` a repeat answers the first answer again.
#[utoipa::path(post, path = "/api/agents/{id}/calls", tag = "wallets", request_body = NewCall,
    params(("id" = String, Path, format = "uuid"),
        ("Idempotency-Key" = Option<String>, Header, description = "1 to 255 visible ASCII characters: a repeat with the same body within 24 h answers the first answer again")),
    security(("agent_token" = [])),
    responses((status = 201, description = "Simulated, signed, stored and handed to the node (`pending`), or held for an owner's approval (`awaiting_approval`)", body = TransferView),
        (status = 400, body = ErrorBody), (status = 401, body = ErrorBody), (status = 403, body = ErrorBody),
        (status = 404, body = ErrorBody), (status = 409, body = ErrorBody), (status = 410, body = ErrorBody),
        (status = 422, body = ErrorBody), (status = 502, body = ErrorBody), (status = 503, body = ErrorBody),
        (status = 504, body = ErrorBody)))]
#[tracing::instrument(skip_all, fields(agent_id = %caller.agent.id))]
async fn create_call(
    State(state): State<AppState>,
    State(transfers): State<Transfers>,
    ActiveCaller(caller): ActiveCaller,
    key: IdempotencyHeader,
    ApiJson(body): ApiJson<Value>,
) -> Result<Response> {
    // Calling acts as the agent: owner authority alone does not send.
    caller.require_agent_token()?;
    let path = format!("/api/agents/{}/calls", caller.agent.id);
    let request = Idempotent::new(key.key()?, caller.agent.id, "POST", &path, &body);
    run_once(state.store.clone(), state.clock.clone(), request, |claim| async move {
        let mandate = Mandate {
            token_hash: caller.token_hash.clone(),
            claim,
        };
        if batch::is_batch(&body) {
            let order = batch::parse(&caller, body, &mandate)?;
            let (outcome, _) = transfers.batch(order).await?;
            return Answer::new(StatusCode::CREATED, &TransferView::from(&outcome));
        }
        let parsed = parse(&caller, body)?;
        let delegation = parsed.delegation;
        let order = parsed.order(&caller, &mandate)?;
        let outcome = match delegation {
            Some(id) => transfers.call_through(order, id).await?,
            None => transfers.call(order).await?.0,
        };
        Answer::new(StatusCode::CREATED, &TransferView::from(&outcome))
    })
    .await
}

/// Simulate a contract call
///
/// The same simulation and verdict as `POST …/calls` (`decision.result` `allow`, `deny` with its `code` and `rule`,
/// or `approve`); nothing is reserved, signed or recorded. A call that reverts: 422 `call_reverted`.
#[utoipa::path(post, path = "/api/agents/{id}/calls/simulate", tag = "wallets", request_body = NewCall,
    params(("id" = String, Path, format = "uuid")),
    security(("agent_token" = []), ("admin_token" = []), ("owner_token" = [])),
    responses((status = 200, body = SimulatedCall, description = "The call, what it would do, and the verdict"),
        (status = 400, body = ErrorBody), (status = 401, body = ErrorBody), (status = 403, body = ErrorBody),
        (status = 404, body = ErrorBody), (status = 410, body = ErrorBody), (status = 422, body = ErrorBody),
        (status = 502, body = ErrorBody), (status = 503, body = ErrorBody), (status = 504, body = ErrorBody)))]
#[tracing::instrument(skip_all, fields(agent_id = %caller.agent.id))]
async fn simulate_call(
    State(transfers): State<Transfers>,
    ActiveCaller(caller): ActiveCaller,
    ApiJson(body): ApiJson<Value>,
) -> Result<Response> {
    if batch::is_batch(&body) {
        return batch::simulate(&transfers, &caller, body).await;
    }
    let parsed = parse(&caller, body)?;
    if parsed.delegation.is_some() {
        return Err(AppError::field(
            "delegation",
            "a delegated call is judged as its transfer: send it with POST …/calls or POST …/transfers",
        ));
    }
    let mandate = Mandate::NONE;
    let order = parsed.order(&caller, &mandate)?;
    let previewed = transfers.preview_call(&order).await?;
    let decision = transfers.judge_call(&order, &previewed).await?;
    Ok(Json(SimulatedCall {
        call: CallView::new(order.to, &previewed.record),
        simulation: previewed.record.simulation.clone(),
        message: decision.message.clone(),
        decision,
    })
    .into_response())
}

/// A call request, checked and encoded.
struct Parsed {
    chain: &'static crate::domain::chain::ChainInfo,
    to: alloy::primitives::Address,
    value: alloy::primitives::U256,
    encoded: call::Encoded,
    delegation: Option<uuid::Uuid>,
    gas: Option<crate::domain::transaction::Payer>,
}

impl Parsed {
    fn order<'a>(self, caller: &'a Caller, mandate: &'a Mandate) -> Result<CallOrder<'a>> {
        Ok(CallOrder {
            by: Transacting::check(&caller.agent, mandate, caller.actor(), "calling contracts")?,
            chain: self.chain,
            to: self.to,
            value: self.value,
            encoded: self.encoded,
            conversation_id: None,
            guarded: caller.guarded,
            gas: self.gas,
        })
    }
}

/// The capability, then the request's fields: the chain one of the agent's, the contract a nonzero address, the value
/// a decimal amount, and exactly one of `data` or `function` + `args`.
fn parse(caller: &Caller, body: Value) -> Result<Parsed> {
    Transacting::check(&caller.agent, &Mandate::NONE, caller.actor(), "calling contracts")?;
    let request: NewCall = shape(body)?;
    let chain = registry::find(request.chain.trim())
        .filter(|c| caller.agent.has_chain(c.name))
        .ok_or_else(|| AppError::field("chain", "must be one of the agent's chains"))?;
    if request.calls.is_some() {
        return Err(AppError::field(
            "calls",
            "give either calls or to with data or function",
        ));
    }
    let gas = match request.gas.as_deref().map(str::trim) {
        None => None,
        Some(text) => Some(
            crate::domain::transaction::Payer::parse(text)
                .ok_or_else(|| AppError::field("gas", "must be \"sponsored\" or \"wallet\""))?,
        ),
    };
    let to = request.to.as_deref().map(str::trim).unwrap_or_default();
    let to = parse_address(to).ok_or_else(|| AppError::field("to", "must be a 0x address"))?;
    // The agent's own address is refused by the transfer service with the other addresses no call reaches (§22).
    if to == alloy::primitives::Address::ZERO {
        return Err(AppError::field("to", "must be a contract, not the zero address"));
    }
    let value = match request.value.as_deref().map(str::trim) {
        None => alloy::primitives::U256::ZERO,
        Some(text) => parse_units(text, chain.decimals)
            .map_err(|_| AppError::field("value", "must be a decimal amount in whole native units, e.g. \"0.01\""))?,
    };
    let input = match (request.data.as_deref(), request.function.as_deref()) {
        (Some(data), None) if request.args.is_none() => CallInput::Data(data.trim()),
        (None, Some(signature)) => CallInput::Function {
            signature: signature.trim(),
            args: request.args.as_deref().unwrap_or(&[]),
        },
        _ => {
            return Err(AppError::field(
                "data",
                "give either data (0x-hex calldata) or function with args",
            ));
        }
    };
    let encoded = call::encode(input).map_err(|e| AppError::field(&e.field(), e.to_string()))?;
    let delegation =
        crate::delegations::named(request.delegation.as_deref()).map_err(|m| AppError::field("delegation", m))?;
    Ok(Parsed {
        chain,
        to,
        value,
        encoded,
        delegation,
        gas,
    })
}
