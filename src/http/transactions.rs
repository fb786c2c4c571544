//! The agent's transfers: `GET /api/agents/{id}/transactions`.

use axum::Json;
use axum::extract::State;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use serde_json::{Value, json};

use super::auth::ActiveAgent;
use super::error::Result;
use super::schemas;
use crate::domain::amount::format_units;
use crate::domain::transaction::{StoredTx, TxState};
use crate::state::AppState;

pub fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new().routes(routes!(list_transactions))
}

#[utoipa::path(get, path = "/api/agents/{id}/transactions", tag = "wallets", params(("id" = String, Path, format = "uuid")),
    security(("agent_token" = [])),
    responses((status = 200, description = "Transfers, newest first", body = Vec<schemas::TransactionBody>), (status = 401, body = schemas::ErrorBody), (status = 403, body = schemas::ErrorBody), (status = 404, body = schemas::ErrorBody), (status = 410, body = schemas::ErrorBody)))]
async fn list_transactions(State(state): State<AppState>, ActiveAgent(agent): ActiveAgent) -> Result<Json<Value>> {
    let txs = state.store.list_transactions(agent.id, None, 500).await?;
    Ok(Json(Value::Array(txs.iter().map(transaction_json).collect())))
}

/// The API shape of a transfer (also used by the `transaction_history` tool).
pub fn transaction_json(tx: &StoredTx) -> Value {
    json!({
        "id": tx.id,
        "chain": tx.chain,
        "tx_hash": tx.tx_hash,
        "from": tx.from.to_checksum(None),
        "to": tx.to.to_checksum(None),
        "value_wei": tx.value_wei.to_string(),
        "value": format_units(tx.value_wei, 18),
        "nonce": tx.nonce,
        // Stored-but-not-yet-accepted transfers are still on their way: to clients they are pending.
        "status": match tx.status {
            TxState::Signed => TxState::Pending.as_str(),
            other => other.as_str(),
        },
        "block_number": tx.block_number,
        "gas_used": tx.gas_used,
        "conversation_id": tx.conversation_id,
        "created_at": tx.created_at,
        "updated_at": tx.updated_at,
    })
}
