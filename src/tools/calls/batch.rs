//! Batches on the contract-call tools (§22): `call_contract` and `simulate_call` take `calls` (2 to 16 of `{to,
//! value?, data | function + args}`) in place of `to` / `value` / `data`, and `call_contract` takes `gas`. Their
//! results are the API's answers: `call` null, `calls` listing each call.

use serde_json::{Value, json};

use crate::domain::amount::parse_units;
use crate::domain::call::batch::{MAX_CALLS, MIN_CALLS};
use crate::domain::call::{self, CallInput};
use crate::tools::{Args, ToolContext, ToolError, ToolResult};
use crate::transfers::{BatchCall, BatchOrder, TransferOutcome};

/// The batch a tool call asks for, when it names `calls`: 2 to 16 of them, nothing of a single call beside them.
pub(super) fn order<'a>(cx: &'a ToolContext<'a>, args: &Args<'a>) -> Result<Option<BatchOrder<'a>>, ToolError> {
    let Some(items) = args.list("calls")? else {
        return Ok(None);
    };
    for single in ["to", "value", "data", "function", "args", "delegation"] {
        if args.text(single).ok().flatten().is_some() || args.list(single).ok().flatten().is_some() {
            return Err(ToolError::invalid(format!(
                "give either calls (a batch) or one call's fields, not {single} beside calls"
            )));
        }
    }
    if !(MIN_CALLS..=MAX_CALLS).contains(&items.len()) {
        return Err(ToolError::invalid(format!(
            "calls must list {MIN_CALLS} to {MAX_CALLS} calls"
        )));
    }
    let chain = args.chain(cx.agent)?;
    let mut calls = Vec::with_capacity(items.len());
    for (i, item) in items.iter().enumerate() {
        let call = Args::new(item).map_err(|_| ToolError::invalid(format!("calls[{i}] must be an object")))?;
        let invalid = |what: &str| ToolError::invalid(format!("calls[{i}].{what}"));
        let to = call
            .address("to")
            .map_err(|_| invalid("to must be a 0x address"))?
            .filter(|to| !to.is_zero())
            .ok_or_else(|| invalid("to is required (a nonzero 0x address)"))?;
        let value = match call.text("value")? {
            None => alloy::primitives::U256::ZERO,
            Some(text) => parse_units(text, chain.decimals)
                .map_err(|_| invalid("value must be a decimal amount in whole native units"))?,
        };
        let input = match (call.text("data")?, call.text("function")?) {
            (Some(data), None) => CallInput::Data(data),
            (None, Some(signature)) => CallInput::Function {
                signature,
                args: call.list("args")?.unwrap_or(&[]),
            },
            _ => return Err(invalid("give either data or function with args")),
        };
        let encoded = call::encode(input).map_err(|e| invalid(&format!("{}: {e}", e.field())))?;
        calls.push(BatchCall { to, value, encoded });
    }
    Ok(Some(BatchOrder {
        by: cx.transacting("calling contracts")?,
        chain,
        calls,
        gas: args.gas()?,
        conversation_id: cx.conversation_id,
        guarded: cx.guarded,
    }))
}

/// Each call of a previewed batch as the API shows it.
fn calls_json(record: &crate::domain::transaction::CallRecord) -> Value {
    record.calls.iter().map(|c| c.shown()).collect()
}

/// `call_contract` with `calls`: simulated, judged and sent as one outflow.
pub(super) async fn send(cx: &ToolContext<'_>, order: BatchOrder<'_>) -> ToolResult {
    let (outcome, previewed) = cx.services.transfers.batch(order).await?;
    let calls = calls_json(&previewed.record);
    Ok(match outcome {
        TransferOutcome::Sent { chain, tx, status } => {
            let mut sent = json!({
                "transfer_id": tx.id, "kind": "call", "chain": chain.name, "status": status.as_str(),
                "tx_hash": tx.tx_hash(), "nonce": tx.nonce(),
                "explorer_url": tx.tx_hash().map(|h| chain.tx_url(h)),
                "call": null, "calls": calls, "simulation": previewed.record.simulation,
            });
            cx.mark_local_node(chain.name, &mut sent);
            sent
        }
        TransferOutcome::AwaitingApproval { approval, .. } => json!({
            "transfer_id": approval.id, "kind": "call", "status": "awaiting_approval",
            "expires_at": approval.expires_at, "call": null, "calls": calls,
            "simulation": previewed.record.simulation,
        }),
    })
}

/// `simulate_call` with `calls`: the batch's simulation and verdict, nothing signed.
pub(super) async fn simulate(cx: &ToolContext<'_>, order: BatchOrder<'_>) -> ToolResult {
    let transfers = &cx.services.transfers;
    let previewed = transfers.preview_batch(&order).await?;
    let decision = transfers.judge_batch(&order, &previewed).await?;
    let mut answer = json!({"call": null, "calls": calls_json(&previewed.record),
        "simulation": previewed.record.simulation, "decision": decision});
    if let Some(message) = &decision.message {
        answer["message"] = json!(message);
    }
    Ok(answer)
}
