//! The agent's transfers: `GET /api/agents/{id}/transactions`.

use axum::Json;
use axum::extract::State;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use super::auth::ActiveCaller;
use super::error::Result;
use super::views::{ErrorBody, TransactionView};
use crate::auth::Caller;
use crate::state::AppState;

pub fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new().routes(routes!(list_transactions))
}

#[utoipa::path(get, path = "/api/agents/{id}/transactions", tag = "wallets", params(("id" = String, Path, format = "uuid")),
    security(("agent_token" = []), ("admin_token" = []), ("owner_token" = [])),
    responses((status = 200, description = "Transfers, newest first", body = Vec<TransactionView>), (status = 401, body = ErrorBody), (status = 403, body = ErrorBody), (status = 404, body = ErrorBody), (status = 410, body = ErrorBody)))]
#[tracing::instrument(skip_all, fields(agent_id = %agent.id))]
async fn list_transactions(
    State(state): State<AppState>,
    ActiveCaller(Caller { agent, .. }): ActiveCaller,
) -> Result<Json<Vec<TransactionView>>> {
    let txs = state.store.list_transactions(agent.id, None, 500).await?;
    Ok(Json(txs.iter().map(TransactionView::from).collect()))
}
