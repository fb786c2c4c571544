//! Batches of calls on `POST …/calls` and `POST …/calls/simulate` (§22): `calls: [{to, value?, data | function +
//! args}]`, 2 to 16 of them, in place of `to` / `value` / `data`, checked and encoded here; the transfer service
//! simulates, judges and sends them as one outflow.

use axum::Json;
use axum::response::{IntoResponse, Response};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use utoipa::ToSchema;

use super::NewCall;
use crate::auth::Caller;
use crate::domain::agent::parse_address;
use crate::domain::amount::parse_units;
use crate::domain::call::batch::{MAX_CALLS, MIN_CALLS};
use crate::domain::call::{self, CallInput};
use crate::domain::chain as registry;
use crate::domain::transaction::Payer;
use crate::http::error::{AppError, Result};
use crate::http::json::shape;
use crate::http::views::CallView;
use crate::store::Mandate;
use crate::transfers::{BatchCall, BatchOrder, DecisionView, Transacting, Transfers};

/// One call of a batch: `data`, or `function` and `args` for the service to encode.
#[derive(Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub(super) struct NewBatchedCall {
    /// The contract, a 0x address.
    to: String,
    /// Native value sent with the call, a decimal string in whole units (default "0").
    value: Option<String>,
    /// 0x-hex calldata (selector included); or give `function` and `args`.
    data: Option<String>,
    /// A Solidity signature such as `approve(address,uint256)`.
    function: Option<String>,
    /// The arguments, as a single call's.
    #[schema(value_type = Option<Vec<serde_json::Value>>)]
    args: Option<Vec<Value>>,
}

/// A batch's simulation and the verdict it would get now: `call` is null, `calls` lists each call.
#[derive(Serialize)]
struct SimulatedBatch {
    call: Option<CallView>,
    calls: Vec<CallView>,
    simulation: Value,
    decision: DecisionView,
    #[serde(skip_serializing_if = "Option::is_none")]
    message: Option<String>,
}

/// Whether a request body asks for a batch (it names `calls`).
pub(super) fn is_batch(body: &Value) -> bool {
    body.get("calls").is_some()
}

/// The capability, then the batch's fields: the chain one of the agent's, `calls` alone (no `to`, `value`, `data`,
/// `function`, `args` or `delegation` beside it), 2 to 16 of them, each call's contract, value and calldata, and
/// `gas`.
pub(super) fn parse<'a>(caller: &'a Caller, body: Value, mandate: &'a Mandate) -> Result<BatchOrder<'a>> {
    let by = Transacting::check(&caller.agent, mandate, caller.actor(), "calling contracts")?;
    let request: NewCall = shape(body)?;
    let single = [
        ("to", request.to.is_some()),
        ("value", request.value.is_some()),
        ("data", request.data.is_some()),
        ("function", request.function.is_some()),
        ("args", request.args.is_some()),
    ];
    if let Some((field, _)) = single.iter().find(|(_, given)| *given) {
        return Err(AppError::field(
            field,
            "give either calls (a batch) or one call's to and data or function, not both",
        ));
    }
    if request.delegation.is_some() {
        return Err(AppError::field(
            "delegation",
            "a batch cannot redeem a delegation: send the delegated call alone",
        ));
    }
    let asked = request.calls.unwrap_or_default();
    if !(MIN_CALLS..=MAX_CALLS).contains(&asked.len()) {
        return Err(AppError::field(
            "calls",
            format!("must list {MIN_CALLS} to {MAX_CALLS} calls"),
        ));
    }
    let chain = registry::find(request.chain.trim())
        .filter(|c| caller.agent.has_chain(c.name))
        .ok_or_else(|| AppError::field("chain", "must be one of the agent's chains"))?;
    let gas = match request.gas.as_deref().map(str::trim) {
        None => None,
        Some(text) => {
            Some(Payer::parse(text).ok_or_else(|| AppError::field("gas", "must be \"sponsored\" or \"wallet\""))?)
        }
    };
    let calls = asked
        .iter()
        .enumerate()
        .map(|(i, c)| parse_call(chain, i, c))
        .collect::<Result<Vec<_>>>()?;
    Ok(BatchOrder {
        by,
        chain,
        calls,
        gas,
        conversation_id: None,
        guarded: caller.guarded,
    })
}

/// The `i`th call of a batch: a nonzero contract address, a decimal value, and exactly one of `data` or `function`
/// + `args` (errors name the field as `calls[i].…`).
fn parse_call(chain: &'static registry::ChainInfo, i: usize, c: &NewBatchedCall) -> Result<BatchCall> {
    let at = |field: &str| format!("calls[{i}].{field}");
    let to = parse_address(c.to.trim())
        .filter(|to| !to.is_zero())
        .ok_or_else(|| AppError::field(&at("to"), "must be a nonzero 0x address"))?;
    let value = match c.value.as_deref().map(str::trim) {
        None => alloy::primitives::U256::ZERO,
        Some(text) => parse_units(text, chain.decimals)
            .map_err(|_| AppError::field(&at("value"), "must be a decimal amount in whole native units"))?,
    };
    let input = match (c.data.as_deref(), c.function.as_deref()) {
        (Some(data), None) if c.args.is_none() => CallInput::Data(data.trim()),
        (None, Some(signature)) => CallInput::Function {
            signature: signature.trim(),
            args: c.args.as_deref().unwrap_or(&[]),
        },
        _ => {
            return Err(AppError::field(
                &at("data"),
                "give either data (0x-hex calldata) or function with args",
            ));
        }
    };
    let encoded = call::encode(input).map_err(|e| AppError::field(&at(&e.field()), e.to_string()))?;
    Ok(BatchCall { to, value, encoded })
}

/// `POST …/calls/simulate` with `calls`: the batch's simulation and verdict; nothing reserved, signed or recorded.
pub(super) async fn simulate(transfers: &Transfers, caller: &Caller, body: Value) -> Result<Response> {
    let mandate = Mandate::NONE;
    let order = parse(caller, body, &mandate)?;
    let previewed = transfers.preview_batch(&order).await?;
    let decision = transfers.judge_batch(&order, &previewed).await?;
    Ok(Json(SimulatedBatch {
        call: None,
        calls: CallView::batch(&previewed.record).unwrap_or_default(),
        simulation: previewed.record.simulation.clone(),
        message: decision.message.clone(),
        decision,
    })
    .into_response())
}
