//! The chain registry endpoint and the health check.

use axum::extract::State;
use axum::routing::get;
use axum::{Json, Router};
use serde_json::{Value, json};

use super::error::Result;
use crate::chain::registry::CHAINS;
use crate::state::AppState;

pub fn router() -> Router<AppState> {
    Router::new()
        .route("/api/chains", get(list_chains))
        .route("/health", get(health))
}

async fn list_chains(State(state): State<AppState>) -> Json<Value> {
    let chains = CHAINS
        .iter()
        .map(|c| {
            let configured = state.config.rpc_urls.iter().any(|(name, _)| name == c.name);
            json!({
                "name": c.name,
                "chain_id": c.chain_id,
                "native_symbol": c.native_symbol,
                "decimals": c.decimals,
                "explorer_url": c.explorer_url,
                "configured": configured,
            })
        })
        .collect();
    Json(Value::Array(chains))
}

async fn health(State(state): State<AppState>) -> Result<Json<Value>> {
    state.store.ping().await?;
    Ok(Json(
        json!({ "status": "ok", "version": env!("CARGO_PKG_VERSION"), "database": "ok" }),
    ))
}
