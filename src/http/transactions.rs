//! The agent's transfers: `GET /api/agents/{id}/transactions`, newest first, paged with `limit` and `before`.

use axum::Json;
use axum::extract::rejection::QueryRejection;
use axum::extract::{Query, State};
use serde::Deserialize;
use utoipa::IntoParams;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use super::auth::{ActiveCaller, parse_id};
use super::error::{AppError, Result};
use super::views::{ErrorBody, TransactionView};
use crate::state::AppState;

const DEFAULT_PAGE: i64 = 100;
const MAX_PAGE: i64 = 500;

pub fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new().routes(routes!(list_transactions))
}

#[derive(Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
struct PageParams {
    /// At least 1 (larger values are cut to 500); default 100.
    #[param(minimum = 1)]
    limit: Option<i64>,
    /// The id of the last transfer of the previous page: this page starts with the next older one.
    #[param(format = "uuid")]
    before: Option<String>,
}

/// List transactions
///
/// The agent's transfers as transactions, newest first, paged with `limit` (default 100, at most 500) and `before`
/// (a transfer id).
#[utoipa::path(get, path = "/api/agents/{id}/transactions", tag = "wallets",
    params(("id" = String, Path, format = "uuid"), PageParams),
    security(("agent_token" = []), ("admin_token" = []), ("owner_token" = [])),
    responses((status = 200, description = "Transfers, newest first", body = Vec<TransactionView>), (status = 401, body = ErrorBody), (status = 403, body = ErrorBody), (status = 404, body = ErrorBody), (status = 410, body = ErrorBody), (status = 422, body = ErrorBody)))]
#[tracing::instrument(skip_all, fields(agent_id = %caller.agent.id))]
async fn list_transactions(
    State(state): State<AppState>,
    ActiveCaller(caller): ActiveCaller,
    params: std::result::Result<Query<PageParams>, QueryRejection>,
) -> Result<Json<Vec<TransactionView>>> {
    let Query(params) = params.map_err(|_| AppError::field("limit", "limit must be an integer"))?;
    let limit = params.limit.unwrap_or(DEFAULT_PAGE);
    if limit < 1 {
        return Err(AppError::field("limit", "must be at least 1"));
    }
    // An empty `before` is no id (the document says uuid): refused like any other malformed cursor.
    let before = match params.before.as_deref().map(str::trim) {
        Some(text) => Some(parse_id(text).ok_or_else(|| AppError::field("before", "must be a transfer id"))?),
        None => None,
    };
    let txs = state
        .store
        .transaction_page(caller.agent.id, before, limit.min(MAX_PAGE))
        .await?
        .ok_or_else(|| AppError::field("before", "is not one of this agent's transfers"))?;
    let mut replaced = state.store.replaced_hashes(caller.agent.id).await?;
    let views = txs
        .iter()
        .map(|tx| TransactionView {
            replaced_hashes: replaced.remove(&tx.id).unwrap_or_default(),
            ..TransactionView::from(tx)
        })
        .collect();
    Ok(Json(views))
}
