//! The compare tools (capability `compare`): questions across chains, asked concurrently with a per-chain error
//! entry, and the cost of a transfer before it is made.

use alloy::primitives::{Bytes, U256};
use futures::future::{BoxFuture, join_all};
use serde_json::{Value, json};

use super::{Args, Effect, Tool, ToolContext, ToolError, ToolResult, balance_json};
use crate::chain::{Node, TRANSFER_GAS, format_gwei};
use crate::domain::agent::Capability;
use crate::domain::amount::{format_units, parse_units};

pub const TOOLS: &[Tool] = &[
    Tool {
        name: "compare_gas",
        capability: Capability::Compare,
        effect: Effect::ReadsChain,
        description: "Compare gas prices across chains and find the cheapest for a plain transfer.",
        arguments: |f| json!({ "chains": f.chain_list }),
        required: &[],
        run: compare_gas,
    },
    Tool {
        name: "compare_balances",
        capability: Capability::Compare,
        effect: Effect::ReadsChain,
        description: "Native balances of an address (default: the agent's wallet) across chains.",
        arguments: |f| json!({ "chains": f.chain_list, "address": f.address }),
        required: &[],
        run: compare_balances,
    },
    Tool {
        name: "estimate_transfer_cost",
        capability: Capability::Compare,
        effect: Effect::ReadsChain,
        description: "Estimate the fee and total cost of sending an amount on a chain.",
        arguments: |f| json!({ "chain": f.chain, "amount": f.amount }),
        required: &["chain", "amount"],
        run: estimate_transfer_cost,
    },
];

fn compare_gas<'a>(cx: &'a ToolContext<'a>, args: Args<'a>) -> BoxFuture<'a, ToolResult> {
    Box::pin(async move {
        let chains = args.chains(cx.agent)?;
        let rows = join_all(chains.iter().map(|chain| async move {
            match cx.services.chains.get(chain.name) {
                Ok(client) => client.fees().await.map(|f| (chain, f)).map_err(|e| (chain, e)),
                Err(e) => Err((chain, e)),
            }
        }))
        .await;
        let mut cheapest: Option<(&str, U256)> = None;
        let entries: Vec<Value> = rows
            .into_iter()
            .map(|row| match row {
                Ok((chain, fees)) => {
                    let cost = fees.expected_cost(TRANSFER_GAS);
                    if cheapest.is_none_or(|(_, best)| cost < best) {
                        cheapest = Some((chain.name, cost));
                    }
                    json!({
                        "chain": chain.name,
                        "base_fee_gwei": format_gwei(fees.base_fee_per_gas),
                        "priority_fee_gwei": format_gwei(fees.max_priority_fee_per_gas),
                        "gas_price_gwei": format_gwei(fees.base_fee_per_gas.saturating_add(fees.max_priority_fee_per_gas)),
                        "transfer_cost_wei": cost.to_string(),
                        "transfer_cost": format_units(cost, chain.decimals),
                        "symbol": chain.native_symbol,
                    })
                }
                Err((chain, e)) => json!({ "chain": chain.name, "error": ToolError::from(e).to_json() }),
            })
            .collect();
        Ok(json!({ "cheapest": cheapest.map(|(name, _)| name), "transfer_gas": TRANSFER_GAS, "chains": entries }))
    })
}

fn compare_balances<'a>(cx: &'a ToolContext<'a>, args: Args<'a>) -> BoxFuture<'a, ToolResult> {
    Box::pin(async move {
        let chains = args.chains(cx.agent)?;
        let address = args.address("address")?;
        let rows = join_all(chains.iter().map(|chain| async move {
            let address = match address {
                Some(a) => a,
                None => cx.wallet(chain)?,
            };
            let tokens: Vec<_> = cx.services.chains.tokens().tokens(chain).cloned().collect();
            let client = cx.services.chains.get(chain.name)?;
            let (wei, in_tokens) = client.balances_with_tokens(address, &tokens).await;
            let in_tokens: Vec<_> = tokens.into_iter().zip(in_tokens).collect();
            Ok::<_, ToolError>(balance_json(chain, address, wei?, &in_tokens))
        }))
        .await;
        let entries: Vec<Value> = rows
            .into_iter()
            .zip(&chains)
            .map(|(row, chain)| row.unwrap_or_else(|e| json!({ "chain": chain.name, "error": e.to_json() })))
            .collect();
        Ok(json!({ "balances": entries }))
    })
}

fn estimate_transfer_cost<'a>(cx: &'a ToolContext<'a>, args: Args<'a>) -> BoxFuture<'a, ToolResult> {
    Box::pin(async move {
        let chain = args.chain(cx.agent)?;
        let amount = args.amount()?;
        let value = parse_units(&amount, chain.decimals).map_err(|e| ToolError::invalid(format!("amount {e}")))?;
        let client = cx.services.chains.get(chain.name)?;
        let from = cx.wallet(chain)?;
        let to = cx.connected_wallet.unwrap_or(from);
        // A plain transfer to an account costs 21,000 gas; the node's estimate also covers contract recipients.
        let gas_limit = client
            .estimate_transfer_gas(from, to, U256::ZERO)
            .await
            .unwrap_or(TRANSFER_GAS)
            .max(TRANSFER_GAS);
        // On OP-stack chains the L1 data fee is part of what the wallet pays (§14), estimated as the reservation does.
        let probe = crate::transfers::l1_probe(chain, to, value, Bytes::new());
        let (fees, l1_fee) = futures::join!(client.fees(), client.l1_fee(&probe));
        let (fees, l1_fee) = (fees?, l1_fee?);
        let fee = fees.expected_cost(gas_limit).saturating_add(l1_fee);
        let max_fee = fees.max_cost(gas_limit).saturating_add(l1_fee);
        // U256 arithmetic wraps: an amount near 2^256 wei would show a tiny total. Such an amount is refused.
        let total = value
            .checked_add(fee)
            .filter(|_| value.checked_add(max_fee).is_some())
            .ok_or_else(|| ToolError::invalid("amount is too large: with the fee it exceeds what a chain can hold"))?;
        Ok(json!({
            "chain": chain.name,
            "amount": format_units(value, chain.decimals),
            "amount_wei": value.to_string(),
            "gas_limit": gas_limit,
            "base_fee_gwei": format_gwei(fees.base_fee_per_gas),
            "priority_fee_gwei": format_gwei(fees.max_priority_fee_per_gas),
            "max_fee_per_gas_gwei": format_gwei(fees.max_fee_per_gas),
            "l1_fee_wei": l1_fee.to_string(),
            "fee_wei": fee.to_string(),
            "fee": format_units(fee, chain.decimals),
            "max_fee_wei": max_fee.to_string(),
            "total_wei": total.to_string(),
            "total": format_units(total, chain.decimals),
            "symbol": chain.native_symbol,
        }))
    })
}
