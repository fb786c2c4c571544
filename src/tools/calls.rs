//! The contract-call tools (capability `transact`, §18): `call_contract` simulates, judges and sends a call through
//! the transfer service; `simulate_call` answers the same simulation and verdict and signs nothing;
//! `sign_typed_data` signs EIP-712 typed data a rule allows. Their results are the API's answers.

use futures::future::BoxFuture;
use serde_json::{Value, json};

use super::{Args, Effect, Tool, ToolContext, ToolError, ToolResult};
use crate::domain::agent::Capability;
use crate::domain::amount::parse_units;
use crate::domain::call::{self, CallInput};
use crate::transfers::{CallOrder, TransferOutcome};

mod batch;

fn arguments(f: &super::Fragments) -> Value {
    json!({
        "chain": f.chain,
        "to": { "type": "string", "pattern": "^0x[0-9a-fA-F]{40}$", "description": "the contract" },
        "function": { "type": "string", "description": "a Solidity signature such as approve(address,uint256)" },
        "args": { "type": "array", "description": "the arguments: addresses and bytes as 0x-hex, integers as decimal strings, booleans, arrays and tuples as arrays" },
        "data": { "type": "string", "description": "0x-hex calldata, instead of function and args" },
        "value": { "type": "string", "description": "native value sent with the call, in whole units (default \"0\")" },
        "calls": { "type": "array", "minItems": 2, "maxItems": 16, "items": { "type": "object" },
            "description": "a batch, instead of to/value/data: 2 to 16 calls {to, value?, data | function + args} the agent's account runs in order, all or nothing" },
        "gas": { "type": "string", "enum": ["sponsored", "wallet"],
            "description": "who pays the gas of the call or batch: sponsored (the operator's sponsorship, a user operation of the agent's account) or wallet (default: sponsored where the agent has a sponsorship on the chain)" }
    })
}

pub const TOOLS: &[Tool] = &[
    Tool {
        name: "call_contract",
        capability: Capability::Transact,
        effect: Effect::MovesFunds,
        description: "Call a contract from the agent's wallet (a swap, a deposit, an approval): the service simulates it first, judges what it would take or allow by the agent's policy and spending cap, then signs and sends it.",
        arguments: call_contract_arguments,
        required: &["chain"],
        run: call_contract,
    },
    Tool {
        name: "simulate_call",
        capability: Capability::Transact,
        effect: Effect::ReadsChain,
        description: "Simulate a contract call from the agent's wallet without signing it: what it would send, receive and allow, and whether the policy would allow it, refuse it or ask the owner.",
        arguments,
        required: &["chain"],
        run: simulate_call,
    },
    Tool {
        name: "sign_typed_data",
        capability: Capability::Transact,
        effect: Effect::MovesFunds,
        description: "Sign EIP-712 typed data with the agent's key (a permit, an order): allowed only by a typed-data rule of the agent's policy; a permit counts as the allowance it grants. The domain's chainId must be the chain's.",
        arguments: typed_data_arguments,
        required: &["chain", "typed_data"],
        run: sign_typed_data,
    },
];

/// `call_contract` also takes a delegation to run the call through (§21); `simulate_call` does not.
fn call_contract_arguments(f: &super::Fragments) -> Value {
    let mut all = arguments(f);
    all["delegation"] = f.delegation.clone();
    all
}

fn typed_data_arguments(f: &super::Fragments) -> Value {
    json!({
        "chain": f.chain,
        "typed_data": { "type": "object", "description": "EIP-712 typed data: {types, primaryType, domain, message}" }
    })
}

fn sign_typed_data<'a>(cx: &'a ToolContext<'a>, args: Args<'a>) -> BoxFuture<'a, ToolResult> {
    Box::pin(async move {
        let chain = args.chain(cx.agent)?;
        let json = args
            .object("typed_data")?
            .ok_or_else(|| ToolError::invalid("typed_data is required (EIP-712 typed data)"))?;
        let typed = call::typed::parse(json, chain.chain_id).map_err(|e| ToolError::invalid(e.to_string()))?;
        let digest = typed.digest.to_string();
        let outcome = cx
            .services
            .transfers
            .sign_typed_data(crate::transfers::TypedOrder {
                by: cx.transacting("signing typed data")?,
                chain,
                typed,
                conversation_id: cx.conversation_id,
                guarded: cx.guarded,
            })
            .await?;
        Ok(match outcome {
            TransferOutcome::Sent { tx, .. } => json!({
                "transfer_id": tx.id, "kind": "typed_data", "signature": alloy::hex::encode_prefixed(&tx.raw_tx),
                "digest": digest,
            }),
            TransferOutcome::AwaitingApproval { approval, .. } => json!({
                "transfer_id": approval.id, "kind": "typed_data", "status": "awaiting_approval",
                "expires_at": approval.expires_at, "digest": digest,
            }),
        })
    })
}

/// The order a tool call asks for.
fn order<'a>(cx: &'a ToolContext<'a>, args: &Args<'a>) -> Result<CallOrder<'a>, ToolError> {
    let chain = args.chain(cx.agent)?;
    let to = args
        .address("to")?
        .ok_or_else(|| ToolError::invalid("to is required (the contract's 0x address)"))?;
    // The agent's own address is refused by the transfer service with the other addresses no call reaches (§22).
    if to == alloy::primitives::Address::ZERO {
        return Err(ToolError::invalid("to must be a contract, not the zero address"));
    }
    let value = match args.text("value")? {
        None => alloy::primitives::U256::ZERO,
        Some(text) => parse_units(text, chain.decimals)
            .map_err(|_| ToolError::invalid("value must be a decimal amount in whole native units"))?,
    };
    let input = match (args.text("data")?, args.text("function")?) {
        (Some(data), None) => CallInput::Data(data),
        (None, Some(signature)) => CallInput::Function {
            signature,
            args: args.list("args")?.unwrap_or(&[]),
        },
        _ => return Err(ToolError::invalid("give either data or function with args")),
    };
    let encoded = call::encode(input).map_err(|e| ToolError::invalid(format!("{}: {e}", e.field())))?;
    Ok(CallOrder {
        by: cx.transacting("calling contracts")?,
        chain,
        to,
        value,
        encoded,
        conversation_id: cx.conversation_id,
        guarded: cx.guarded,
        gas: args.gas()?,
    })
}

fn call_json(to: alloy::primitives::Address, record: &crate::domain::transaction::CallRecord) -> Value {
    json!({"to": to.to_checksum(None), "selector": record.selector, "function": record.function, "args": record.args})
}

fn call_contract<'a>(cx: &'a ToolContext<'a>, args: Args<'a>) -> BoxFuture<'a, ToolResult> {
    Box::pin(async move {
        if let Some(order) = batch::order(cx, &args)? {
            return batch::send(cx, order).await;
        }
        let order = order(cx, &args)?;
        let to = order.to;
        if let Some(id) = args.delegation()? {
            // Judged as its execution: a delegated transfer from the delegator's account, or refused (§21).
            let outcome = cx.services.transfers.call_through(order, id).await?;
            return Ok(match outcome {
                TransferOutcome::Sent { chain, tx, status } => {
                    let mut sent = json!({
                        "transfer_id": tx.id, "kind": "transfer", "chain": chain.name, "status": status.as_str(),
                        "tx_hash": tx.tx_hash(), "nonce": tx.nonce(), "delegation_id": id,
                        "explorer_url": tx.tx_hash().map(|h| chain.tx_url(h)),
                    });
                    cx.mark_local_node(chain.name, &mut sent);
                    sent
                }
                TransferOutcome::AwaitingApproval { approval, .. } => json!({
                    "transfer_id": approval.id, "kind": "transfer", "status": "awaiting_approval",
                    "expires_at": approval.expires_at, "delegation_id": id,
                }),
            });
        }
        let (outcome, previewed) = cx.services.transfers.call(order).await?;
        let call = call_json(to, &previewed.record);
        Ok(match outcome {
            TransferOutcome::Sent { chain, tx, status } => {
                let mut sent = json!({
                    "transfer_id": tx.id, "kind": "call", "chain": chain.name, "status": status.as_str(),
                    "tx_hash": tx.tx_hash(), "nonce": tx.nonce(),
                    "explorer_url": tx.tx_hash().map(|h| chain.tx_url(h)),
                    "call": call, "simulation": previewed.record.simulation,
                });
                cx.mark_local_node(chain.name, &mut sent);
                sent
            }
            TransferOutcome::AwaitingApproval { approval, .. } => json!({
                "transfer_id": approval.id, "kind": "call", "status": "awaiting_approval",
                "expires_at": approval.expires_at, "call": call, "simulation": previewed.record.simulation,
            }),
        })
    })
}

fn simulate_call<'a>(cx: &'a ToolContext<'a>, args: Args<'a>) -> BoxFuture<'a, ToolResult> {
    Box::pin(async move {
        if let Some(order) = batch::order(cx, &args)? {
            return batch::simulate(cx, order).await;
        }
        let order = order(cx, &args)?;
        let transfers = &cx.services.transfers;
        let previewed = transfers.preview_call(&order).await?;
        let decision = transfers.judge_call(&order, &previewed).await?;
        let mut answer = json!({"call": call_json(order.to, &previewed.record),
            "simulation": previewed.record.simulation, "decision": decision});
        if let Some(message) = &decision.message {
            answer["message"] = json!(message);
        }
        Ok(answer)
    })
}
