//! The chain registry endpoint and the health check.

use axum::Json;
use axum::extract::State;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use serde_json::{Value, json};

use super::error::Result;
use super::schemas;
use crate::domain::chain::CHAINS;
use crate::state::AppState;

pub fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(list_chains))
        .routes(routes!(health))
}

#[utoipa::path(get, path = "/api/chains", tag = "chains", responses((status = 200, description = "The chain registry", body = Vec<schemas::ChainEntry>)))]
async fn list_chains(State(state): State<AppState>) -> Json<Value> {
    let chains = CHAINS
        .iter()
        .map(|c| {
            let configured = state.config.chains.rpc_urls.iter().any(|(name, _)| name == c.name);
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

#[utoipa::path(get, path = "/health", tag = "operations", responses((status = 200, body = schemas::Health), (status = 500, body = schemas::ErrorBody)))]
async fn health(State(state): State<AppState>) -> Result<Json<Value>> {
    state.store.ping().await?;
    Ok(Json(
        json!({ "status": "ok", "version": env!("CARGO_PKG_VERSION"), "database": "ok" }),
    ))
}
