//! The read tools (capability `read`): one chain, one question: balance, gas price, latest block, a transaction;
//! and the on-chain delegations the agent was granted, with what each leaves this period (§21).

use futures::future::BoxFuture;
use serde_json::json;

use super::{Args, Effect, Tool, ToolContext, ToolResult, balance_json};
use crate::chain::{Node, format_gwei};
use crate::domain::agent::Capability;
use crate::domain::amount::format_units;

pub const TOOLS: &[Tool] = &[
    Tool {
        name: "get_balance",
        capability: Capability::Read,
        effect: Effect::ReadsChain,
        description: "Native balance and the registry's token balances (USDC, ...) of an address (default: the agent's wallet) on a chain.",
        arguments: |f| json!({ "chain": f.chain, "address": f.address, "token": f.token }),
        required: &["chain"],
        run: get_balance,
    },
    Tool {
        name: "get_gas_price",
        capability: Capability::Read,
        effect: Effect::ReadsChain,
        description: "Current EIP-1559 base fee and priority fee of a chain, in gwei.",
        arguments: |f| json!({ "chain": f.chain }),
        required: &["chain"],
        run: get_gas_price,
    },
    Tool {
        name: "get_block_number",
        capability: Capability::Read,
        effect: Effect::ReadsChain,
        description: "Latest block number of a chain.",
        arguments: |f| json!({ "chain": f.chain }),
        required: &["chain"],
        run: get_block_number,
    },
    Tool {
        name: "get_transaction",
        capability: Capability::Read,
        effect: Effect::ReadsChain,
        description: "Status and details of a transaction by hash on a chain.",
        arguments: |f| json!({ "chain": f.chain, "tx_hash": { "type": "string", "pattern": "^0x[0-9a-fA-F]{64}$" } }),
        required: &["chain", "tx_hash"],
        run: get_transaction,
    },
    Tool {
        name: "list_delegations",
        capability: Capability::Read,
        effect: Effect::ReadsChain,
        description: "The on-chain delegations the owner granted the agent's wallet (§21): what each lets it spend per period from the owner's account, what is available now, and its status; pass one's id as `delegation` to send_native or send_token.",
        arguments: |f| json!({ "chain": f.chain }),
        required: &[],
        run: list_delegations,
    },
];

fn get_balance<'a>(cx: &'a ToolContext<'a>, args: Args<'a>) -> BoxFuture<'a, ToolResult> {
    Box::pin(async move {
        let chain = args.chain(cx.agent)?;
        let address = match args.address("address")? {
            Some(a) => a,
            None => cx.wallet(chain)?,
        };
        // A named token must be one of the chain's; the answer lists every token all the same.
        args.token(cx.services.chains.tokens(), chain)?;
        let tokens: Vec<_> = cx.services.chains.tokens().tokens(chain).cloned().collect();
        let (wei, in_tokens) = cx
            .services
            .chains
            .get(chain.name)?
            .balances_with_tokens(address, &tokens)
            .await;
        let in_tokens: Vec<_> = tokens.into_iter().zip(in_tokens).collect();
        Ok(balance_json(chain, address, wei?, &in_tokens))
    })
}

fn get_gas_price<'a>(cx: &'a ToolContext<'a>, args: Args<'a>) -> BoxFuture<'a, ToolResult> {
    Box::pin(async move {
        let chain = args.chain(cx.agent)?;
        let fees = cx.services.chains.get(chain.name)?.fees().await?;
        Ok(json!({
            "chain": chain.name,
            "base_fee_gwei": format_gwei(fees.base_fee_per_gas),
            "priority_fee_gwei": format_gwei(fees.max_priority_fee_per_gas),
            "max_fee_gwei": format_gwei(fees.max_fee_per_gas),
            "gas_price_gwei": format_gwei(fees.base_fee_per_gas.saturating_add(fees.max_priority_fee_per_gas)),
        }))
    })
}

fn get_block_number<'a>(cx: &'a ToolContext<'a>, args: Args<'a>) -> BoxFuture<'a, ToolResult> {
    Box::pin(async move {
        let chain = args.chain(cx.agent)?;
        let block = cx.services.chains.get(chain.name)?.block_number().await?;
        Ok(json!({ "chain": chain.name, "block_number": block }))
    })
}

fn get_transaction<'a>(cx: &'a ToolContext<'a>, args: Args<'a>) -> BoxFuture<'a, ToolResult> {
    Box::pin(async move {
        let chain = args.chain(cx.agent)?;
        let hash = args.tx_hash()?;
        let tx = cx.services.chains.get(chain.name)?.transaction(hash).await?;
        let Some(tx) = tx else {
            return Ok(json!({ "chain": chain.name, "tx_hash": hash.to_string(), "status": "not_found" }));
        };
        let mut found = json!({
            "chain": chain.name,
            "tx_hash": hash.to_string(),
            "status": tx.status.as_str(),
            "block_number": tx.block_number,
            "confirmations": tx.confirmations,
            "from": tx.from.to_checksum(None),
            "to": tx.to.map(|a| a.to_checksum(None)),
            "value_wei": tx.value.to_string(),
            "value": format_units(tx.value, chain.decimals),
            "symbol": chain.native_symbol,
            "gas_used": tx.gas_used,
            "explorer_url": chain.tx_url(&hash.to_string()),
        });
        cx.mark_local_node(chain.name, &mut found);
        Ok(found)
    })
}

fn list_delegations<'a>(cx: &'a ToolContext<'a>, args: Args<'a>) -> BoxFuture<'a, ToolResult> {
    Box::pin(async move {
        let chain = args.optional_chain(cx.agent)?;
        let listed = cx.services.delegations.list(cx.agent.id).await.map_err(|e| match e {
            crate::delegations::DelegationError::Store(_) => {
                super::ToolError::new("internal_error", "the delegations could not be read")
            }
            other => super::ToolError::new("upstream_unavailable", other.to_string()),
        })?;
        let tokens = cx.services.chains.tokens();
        let views: Vec<_> = listed
            .iter()
            .filter(|d| chain.is_none_or(|c| d.record.chain == c.name))
            .map(|d| crate::delegations::view::DelegationView::new(d, tokens))
            .collect();
        Ok(json!({ "delegations": views }))
    })
}
