//! The transact tools (capability `transact`): `send_native`, `send_token` and `pay_http` (x402, §16), through the
//! transfer service; its typed outcome
//! becomes the tool's JSON here (a transfer held for approval answers `{transfer_id, status, expires_at}`).

use futures::future::BoxFuture;
use serde::Serialize;
use serde_json::{Value, json};

use super::{Args, Effect, Tool, ToolContext, ToolError, ToolResult};
use crate::chain::format_gwei;
use crate::domain::agent::Capability;
use crate::domain::amount::{Amount, AmountError, format_units};
use crate::domain::audit::detail::{Asked, AssetAsked};
use crate::transfers::{Paid, PayOrder, Payment, TransferError, TransferOrder, TransferOutcome};

pub const TOOLS: &[Tool] = &[
    Tool {
        name: "send_native",
        capability: Capability::Transact,
        effect: Effect::MovesFunds,
        description: "Send native tokens from the agent's wallet to an address (signed by the service, within the spending cap).",
        arguments: |f| json!({ "chain": f.chain, "to": { "type": "string", "pattern": "^0x[0-9a-fA-F]{40}$", "description": "recipient" }, "amount": f.amount, "delegation": f.delegation }),
        required: &["chain", "to", "amount"],
        run: send_native,
    },
    Tool {
        name: "send_token",
        capability: Capability::Transact,
        effect: Effect::MovesFunds,
        description: "Send an ERC-20 token of the chain's registry (e.g. USDC) from the agent's wallet to an address; the gas is paid in the native coin within the spending cap, the amount counts against the token's policy limits.",
        arguments: |f| json!({ "chain": f.chain, "token": f.token, "to": { "type": "string", "pattern": "^0x[0-9a-fA-F]{40}$", "description": "recipient" }, "amount": { "type": "string", "description": "decimal amount in whole tokens, e.g. \"5\" or \"0.25\"" }, "delegation": f.delegation }),
        required: &["chain", "token", "to", "amount"],
        run: send_token,
    },
    Tool {
        name: "pay_http",
        capability: Capability::Transact,
        effect: Effect::MovesFunds,
        description: "Fetch an http(s) URL and, if it answers 402 Payment Required (x402), pay its price in a registry token such as USDC up to max_amount, under the agent's policy; returns the resource's answer and the payment.",
        arguments: |_| {
            json!({
                "url": { "type": "string", "description": "the http or https URL to fetch" },
                "max_amount": { "type": "string", "description": "the most to pay, a decimal amount in whole tokens, e.g. \"0.05\"" },
                "asset": { "type": "string", "description": "the token to pay in (a registry symbol such as USDC); any registry token when absent" },
                "method": { "type": "string", "enum": ["GET", "POST", "PUT", "PATCH", "DELETE", "HEAD", "OPTIONS"], "description": "GET when absent" },
                "body": { "type": "string", "description": "the request body, as text" }
            })
        },
        required: &["url", "max_amount"],
        run: pay_http,
    },
];

fn pay_http<'a>(cx: &'a ToolContext<'a>, args: Args<'a>) -> BoxFuture<'a, ToolResult> {
    Box::pin(async move {
        let url = args
            .text("url")?
            .ok_or_else(|| ToolError::invalid("url is required (an http or https URL)"))?;
        let max_amount = args
            .text("max_amount")?
            .ok_or_else(|| ToolError::invalid("max_amount is required, as a decimal string such as \"0.05\""))?;
        if crate::domain::amount::parse_units(max_amount, 36).is_err() {
            return Err(ToolError::invalid(
                "max_amount must be a decimal amount such as \"0.05\"",
            ));
        }
        let headers = std::collections::BTreeMap::new();
        let paid = cx
            .services
            .transfers
            .pay(PayOrder {
                by: cx.transacting("paying")?,
                url,
                max_amount,
                method: args.text("method")?,
                headers: &headers,
                body: args.text("body")?.map(str::to_owned),
                asset: args.text("asset")?,
                conversation_id: cx.conversation_id,
            })
            .await?;
        Ok(paid_json(&paid))
    })
}

/// The §16 answer `{status, headers, body, truncated, payment}`; while a payment waits for approval, also the
/// top-level `transfer_id`, `status: "awaiting_approval"` and `expires_at` that approval-aware clients look for.
fn paid_json(paid: &Paid) -> Value {
    let answer = &paid.answer;
    let mut result = json!({"status": answer.status, "headers": answer.headers, "body": answer.text(),
        "truncated": answer.truncated, "payment": null});
    match &paid.payment {
        None => {}
        Some(Payment::Signed(tx)) => {
            let x402 = tx.body.x402();
            result["payment"] = json!({
                "id": tx.id, "transfer_id": tx.id, "kind": "x402", "chain": tx.chain, "asset": tx.asset,
                "amount": format_units(tx.value_wei, tx.decimals()), "to": tx.to.to_checksum(None),
                "status": "pending", "tx_hash": x402.and_then(|x| x.settlement_tx.clone()),
                "x402": x402.map(|x| json!({"url": x.url, "network": x.network, "nonce": x.nonce,
                    "valid_before": x.valid_before})),
            });
        }
        Some(Payment::AwaitingApproval(a)) => {
            let x402 = a.body.x402();
            result["payment"] = json!({
                "id": a.id, "transfer_id": a.id, "kind": "x402", "chain": a.chain, "asset": a.asset,
                "amount": a.amount(), "to": a.to.to_checksum(None), "status": "awaiting_approval",
                "expires_at": a.expires_at,
                "x402": x402.map(|x| json!({"url": x.url, "network": x.network})),
            });
            // `status` stays the resource's 402 (§16); the waiting transfer is also named at the top level.
            result["transfer_id"] = json!(a.id);
            result["expires_at"] = json!(a.expires_at);
        }
    }
    result
}

fn send_native<'a>(cx: &'a ToolContext<'a>, args: Args<'a>) -> BoxFuture<'a, ToolResult> {
    send(cx, args, false)
}

fn send_token<'a>(cx: &'a ToolContext<'a>, args: Args<'a>) -> BoxFuture<'a, ToolResult> {
    send(cx, args, true)
}

/// Both send tools: `send_token` names a registry token (required), `send_native` moves the chain's coin.
fn send<'a>(cx: &'a ToolContext<'a>, args: Args<'a>, names_token: bool) -> BoxFuture<'a, ToolResult> {
    Box::pin(async move {
        let chain = args.chain(cx.agent)?;
        let token = match names_token {
            false => None,
            true => Some(args.token(cx.services.chains.tokens(), chain)?.ok_or_else(|| {
                ToolError::invalid(
                    "token is required: a token of the chain's registry (send_native sends the native coin)",
                )
            })?),
        };
        let to = args
            .address("to")?
            .ok_or_else(|| ToolError::invalid("to is required (a 0x address)"))?;
        let text = args.amount()?;
        let decimals = token.as_ref().map_or(chain.decimals, |t| t.decimals);
        let amount = match Amount::parse(&text, decimals) {
            Ok(amount) => amount,
            Err(e) => {
                let refusal = match e {
                    AmountError::Zero => TransferError::ZeroAmount,
                    other => TransferError::InvalidAmount(other.to_string()),
                };
                let symbol = token.as_ref().map_or(chain.native_symbol, |t| t.symbol.as_str());
                let asked = Asked::Asset(AssetAsked {
                    chain: chain.name.into(),
                    asset: symbol.into(),
                    to: to.to_checksum(None),
                    amount: Some(text),
                    delegation_id: None,
                });
                let refused = cx.services.transfers.refused_order(cx.agent, cx.actor, asked, refusal);
                return Err(refused.await.into());
            }
        };
        let delegation = args.delegation()?;
        let order = TransferOrder {
            by: cx.transacting("sending")?,
            chain,
            to,
            token,
            amount,
            conversation_id: cx.conversation_id,
            delegation,
            gas: args.gas()?,
        };
        let outcome = cx.services.transfers.send(order).await?;
        Ok(outcome_json(&outcome, cx.services.chains.is_local_node(chain.name)))
    })
}

/// A send tool's result (§6): the signed transfer.
#[derive(Serialize)]
struct Sent {
    chain: &'static str,
    tx_hash: String,
    status: &'static str,
    from: String,
    to: String,
    amount: String,
    amount_wei: String,
    symbol: String,
    token_address: Option<String>,
    nonce: u64,
    gas_limit: u64,
    max_fee_per_gas_gwei: String,
    reserved: String,
    explorer_url: String,
    /// Present (`true`) when the chain's node is a local one: no public explorer knows the transaction.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    local_node: bool,
}

/// A send tool's result (§6) when the transfer waits: nothing is signed yet, and what the model can tell the user is
/// that an owner has to approve it.
#[derive(Serialize)]
struct Held {
    transfer_id: uuid::Uuid,
    status: &'static str,
    expires_at: chrono::DateTime<chrono::Utc>,
}

fn outcome_json(outcome: &TransferOutcome, local_node: bool) -> Value {
    let result = match outcome {
        TransferOutcome::AwaitingApproval { approval, .. } => serde_json::to_value(Held {
            transfer_id: approval.id,
            status: "awaiting_approval",
            expires_at: approval.expires_at,
        }),
        TransferOutcome::Sent { chain, tx, status } => serde_json::to_value(Sent {
            chain: chain.name,
            tx_hash: tx.tx_hash().unwrap_or_default().to_string(),
            status: status.as_str(),
            from: tx.from.to_checksum(None),
            to: tx.to.to_checksum(None),
            amount: format_units(tx.value_wei, tx.decimals()),
            amount_wei: tx.value_wei.to_string(),
            symbol: tx.asset.clone(),
            token_address: tx.token.map(|t| t.address.to_checksum(None)),
            nonce: tx.nonce().unwrap_or_default(),
            gas_limit: tx.body.fees().0,
            max_fee_per_gas_gwei: format_gwei(tx.body.fees().1),
            reserved: format_units(tx.reserved_wei, chain.decimals),
            explorer_url: chain.tx_url(tx.tx_hash().unwrap_or_default()),
            local_node,
        }),
    };
    result.expect("a send result serialises")
}
