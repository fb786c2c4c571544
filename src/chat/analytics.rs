//! The analytics tools: spending against the cap and the agent's transaction history.

use alloy::primitives::U256;
use serde_json::{Value, json};

use super::tools::ToolError;
use crate::domain::agent::Agent;
use crate::domain::amount::format_units;
use crate::domain::chain::{self as registry, ChainInfo};
use crate::state::AppState;

/// Cap, spent and remaining per chain of the agent, in native units.
pub async fn spending_summary(state: &AppState, agent: &Agent) -> Result<Value, ToolError> {
    let spent = state.store.spent_by_chain(agent.id).await.map_err(store_error)?;
    let chains: Vec<Value> = agent
        .chains
        .iter()
        .filter_map(|name| registry::find(name))
        .map(|chain: &ChainInfo| {
            let used = spent.get(chain.name).copied().unwrap_or(U256::ZERO);
            let remaining = agent.spending_cap_wei.saturating_sub(used);
            json!({
                "chain": chain.name,
                "spending_cap": format_units(agent.spending_cap_wei, chain.decimals),
                "spent": format_units(used, chain.decimals),
                "spent_wei": used.to_string(),
                "remaining": format_units(remaining, chain.decimals),
                "symbol": chain.native_symbol,
            })
        })
        .collect();
    Ok(json!({ "chains": chains }))
}

/// The agent's newest transactions, optionally for one chain.
pub async fn transaction_history(
    state: &AppState,
    agent: &Agent,
    chain: Option<&ChainInfo>,
    limit: i64,
) -> Result<Value, ToolError> {
    let txs = state
        .store
        .list_transactions(agent.id, chain.map(|c| c.name), limit)
        .await
        .map_err(store_error)?;
    let transactions: Vec<Value> = txs.iter().map(crate::http::transactions::transaction_json).collect();
    Ok(json!({ "count": transactions.len(), "transactions": transactions }))
}

fn store_error(err: crate::store::StoreError) -> ToolError {
    tracing::error!(error = %err, "store error in a tool");
    ToolError::new("internal_error", "the data could not be read")
}
