//! The transact tools (capability `transact`): `send_native` and `send_token`, through the transfer service; its typed outcome
//! becomes the tool's JSON here (a transfer held for approval answers `{transfer_id, status, expires_at}`).

use futures::future::BoxFuture;
use serde_json::{Value, json};

use super::{Args, Effect, Tool, ToolContext, ToolError, ToolResult};
use crate::chain::format_gwei;
use crate::domain::agent::Capability;
use crate::domain::amount::format_units;
use crate::transfers::{TransferOrder, TransferOutcome};

pub const TOOLS: &[Tool] = &[
    Tool {
        name: "send_native",
        capability: Capability::Transact,
        effect: Effect::MovesFunds,
        description: "Send native tokens from the agent's wallet to an address (signed by the service, within the spending cap).",
        arguments: |f| json!({ "chain": f.chain, "to": { "type": "string", "pattern": "^0x[0-9a-fA-F]{40}$", "description": "recipient" }, "amount": f.amount }),
        required: &["chain", "to", "amount"],
        run: send_native,
    },
    Tool {
        name: "send_token",
        capability: Capability::Transact,
        effect: Effect::MovesFunds,
        description: "Send an ERC-20 token of the chain's registry (e.g. USDC) from the agent's wallet to an address; the gas is paid in the native coin within the spending cap, the amount counts against the token's policy limits.",
        arguments: |f| json!({ "chain": f.chain, "token": f.token, "to": { "type": "string", "pattern": "^0x[0-9a-fA-F]{40}$", "description": "recipient" }, "amount": { "type": "string", "description": "decimal amount in whole tokens, e.g. \"5\" or \"0.25\"" } }),
        required: &["chain", "token", "to", "amount"],
        run: send_token,
    },
];

fn send_native<'a>(cx: &'a ToolContext<'a>, args: Args<'a>) -> BoxFuture<'a, ToolResult> {
    Box::pin(async move {
        let chain = args.chain(cx.agent)?;
        let to = args
            .address("to")?
            .ok_or_else(|| ToolError::invalid("to is required (a 0x address)"))?;
        let amount = args.amount()?;
        let order = TransferOrder {
            agent: cx.agent,
            chain,
            to,
            token: None,
            amount: &amount,
            conversation_id: cx.conversation_id,
            actor: cx.actor,
        };
        let outcome = cx.services.transfers.send(order).await?;
        Ok(outcome_json(&outcome))
    })
}

fn send_token<'a>(cx: &'a ToolContext<'a>, args: Args<'a>) -> BoxFuture<'a, ToolResult> {
    Box::pin(async move {
        let chain = args.chain(cx.agent)?;
        let token = args.token(cx.services.chains.tokens(), chain)?.ok_or_else(|| {
            ToolError::invalid("token is required: a token of the chain's registry (send_native sends the native coin)")
        })?;
        let to = args
            .address("to")?
            .ok_or_else(|| ToolError::invalid("to is required (a 0x address)"))?;
        let amount = args.amount()?;
        let order = TransferOrder {
            agent: cx.agent,
            chain,
            to,
            token: Some(token),
            amount: &amount,
            conversation_id: cx.conversation_id,
            actor: cx.actor,
        };
        let outcome = cx.services.transfers.send(order).await?;
        Ok(outcome_json(&outcome))
    })
}

fn outcome_json(outcome: &TransferOutcome) -> Value {
    let (chain, tx, status) = match outcome {
        TransferOutcome::Sent { chain, tx, status } => (*chain, tx, status),
        // Nothing is signed yet: what the model can tell the user is that an owner has to approve it.
        TransferOutcome::AwaitingApproval { approval, .. } => {
            return json!({
                "transfer_id": approval.id,
                "status": "awaiting_approval",
                "expires_at": approval.expires_at,
            });
        }
    };
    json!({
        "chain": chain.name,
        "tx_hash": tx.tx_hash,
        "status": status.as_str(),
        "from": tx.from.to_checksum(None),
        "to": tx.to.to_checksum(None),
        "amount": format_units(tx.value_wei, tx.decimals()),
        "amount_wei": tx.value_wei.to_string(),
        "symbol": tx.asset,
        "token_address": tx.token.map(|t| t.address.to_checksum(None)),
        "nonce": tx.nonce,
        "gas_limit": tx.gas_limit,
        "max_fee_per_gas_gwei": format_gwei(tx.max_fee_per_gas),
        "reserved": format_units(tx.reserved_wei, chain.decimals),
        "explorer_url": chain.tx_url(&tx.tx_hash),
    })
}
