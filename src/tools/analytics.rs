//! The analytics tools (capability `analytics`): spending against the cap and the agent's transaction history,
//! read from the service's own records.

use alloy::primitives::U256;
use chrono::{DateTime, Utc};
use futures::future::BoxFuture;
use serde::Serialize;
use serde_json::json;
use uuid::Uuid;

use super::{Args, Effect, Tool, ToolContext, ToolError, ToolResult};
use crate::domain::agent::Capability;
use crate::domain::amount::format_units;
use crate::domain::chain as registry;
use crate::domain::transaction::{StoredTx, TxState};
use crate::store::StoreError;

pub const TOOLS: &[Tool] = &[
    Tool {
        name: "spending_summary",
        capability: Capability::Analytics,
        effect: Effect::ReadsRecords,
        description: "Spending cap, amount spent and remaining allowance per chain.",
        arguments: |_| json!({}),
        required: &[],
        run: spending_summary,
    },
    Tool {
        name: "transaction_history",
        capability: Capability::Analytics,
        effect: Effect::ReadsRecords,
        description: "The agent's recent transactions, optionally for one chain.",
        arguments: |f| json!({ "chain": f.chain, "limit": { "type": "integer", "minimum": 1, "maximum": 100 } }),
        required: &[],
        run: transaction_history,
    },
];

/// One chain of `spending_summary`, in native units.
#[derive(Serialize)]
struct ChainSpending {
    chain: &'static str,
    spending_cap: String,
    spent: String,
    spent_wei: String,
    remaining: String,
    symbol: &'static str,
}

/// One transfer of `transaction_history`: the same shape as the transactions endpoint.
#[derive(Serialize)]
struct HistoryEntry<'a> {
    id: Uuid,
    chain: &'a str,
    /// `transfer`, or `x402` for a payment authorization (its `tx_hash` the settlement, empty until known).
    kind: &'static str,
    tx_hash: &'a str,
    from: String,
    to: String,
    value_wei: String,
    value: String,
    asset: &'a str,
    amount: String,
    token_address: Option<String>,
    nonce: u64,
    /// Earlier attempts at the same nonce (fee bumps, a cancel), oldest first.
    replaced_hashes: Vec<String>,
    status: &'static str,
    block_number: Option<u64>,
    gas_used: Option<u64>,
    conversation_id: Option<Uuid>,
    created_at: DateTime<Utc>,
    updated_at: DateTime<Utc>,
}

impl<'a> From<&'a StoredTx> for HistoryEntry<'a> {
    fn from(tx: &'a StoredTx) -> Self {
        HistoryEntry {
            id: tx.id,
            chain: &tx.chain,
            kind: tx.kind(),
            tx_hash: tx.chain_hash().unwrap_or(""),
            from: tx.from.to_checksum(None),
            to: tx.to.to_checksum(None),
            value_wei: tx.native_value().to_string(),
            value: format_units(tx.native_value(), 18),
            asset: &tx.asset,
            amount: format_units(tx.value_wei, tx.decimals()),
            token_address: tx.token.map(|t| t.address.to_checksum(None)),
            nonce: tx.nonce().unwrap_or_default(),
            replaced_hashes: Vec::new(),
            // Stored-but-not-yet-accepted transfers are still on their way: to clients they are pending.
            status: match tx.status {
                TxState::Signed => TxState::Pending.as_str(),
                other => other.as_str(),
            },
            block_number: tx.block_number,
            gas_used: tx.gas_used,
            conversation_id: tx.conversation_id,
            created_at: tx.created_at,
            updated_at: tx.updated_at,
        }
    }
}

/// Cap, spent and remaining per chain of the agent, in native units.
fn spending_summary<'a>(cx: &'a ToolContext<'a>, _args: Args<'a>) -> BoxFuture<'a, ToolResult> {
    Box::pin(async move {
        let agent = cx.agent;
        let spent = cx.services.store.spent_by_chain(agent.id).await.map_err(store_error)?;
        let chains: Vec<ChainSpending> = agent
            .chains
            .iter()
            .filter_map(|name| registry::find(name))
            .map(|chain| {
                let used = spent.get(chain.name).copied().unwrap_or(U256::ZERO);
                let remaining = agent.spending_cap_wei.saturating_sub(used);
                ChainSpending {
                    chain: chain.name,
                    spending_cap: format_units(agent.spending_cap_wei, chain.decimals),
                    spent: format_units(used, chain.decimals),
                    spent_wei: used.to_string(),
                    remaining: format_units(remaining, chain.decimals),
                    symbol: chain.native_symbol,
                }
            })
            .collect();
        Ok(json!({ "chains": chains }))
    })
}

/// The agent's newest transactions, optionally for one chain.
fn transaction_history<'a>(cx: &'a ToolContext<'a>, args: Args<'a>) -> BoxFuture<'a, ToolResult> {
    Box::pin(async move {
        let chain = args.optional_chain(cx.agent)?;
        let limit = args.limit()?;
        let txs = cx
            .services
            .store
            .list_transactions(cx.agent.id, chain.map(|c| c.name), limit)
            .await
            .map_err(store_error)?;
        let mut replaced = cx
            .services
            .store
            .replaced_hashes(cx.agent.id)
            .await
            .map_err(store_error)?;
        let transactions: Vec<HistoryEntry> = txs
            .iter()
            .map(|tx| HistoryEntry {
                replaced_hashes: replaced.remove(&tx.id).unwrap_or_default(),
                ..HistoryEntry::from(tx)
            })
            .collect();
        Ok(json!({ "count": transactions.len(), "transactions": transactions }))
    })
}

fn store_error(err: StoreError) -> ToolError {
    tracing::error!(error = %err, "store error in a tool");
    ToolError::new("internal_error", "the data could not be read")
}
