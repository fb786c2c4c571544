//! What the agent earned (§23): `GET /api/agents/{id}/income`, one record per payment taken, newest first, paged
//! with `limit` and `before` as `GET …/transactions` is, filtered by `offer` and `status`.

use axum::Json;
use axum::extract::rejection::QueryRejection;
use axum::extract::{Query, State};
use serde::Deserialize;
use utoipa::IntoParams;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use super::auth::{ActiveCaller, parse_id};
use super::error::{AppError, Result};
use super::views::ErrorBody;
use crate::offers::view::{IncomeListView, IncomeView};
use crate::state::AppState;
use crate::store::income_list::IncomeFilter;

const DEFAULT_PAGE: i64 = 100;
const MAX_PAGE: i64 = 500;
/// The statuses a record can be in.
const STATUSES: &[&str] = &["settling", "settled", "failed", "released"];

pub fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new().routes(routes!(list_income))
}

#[derive(Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
struct IncomeParams {
    /// Only the payments of this offer.
    #[param(format = "uuid")]
    offer: Option<String>,
    /// Only records in this status: `settling`, `settled`, `failed` or `released`.
    status: Option<String>,
    /// At least 1 (larger values are cut to 500); default 100.
    #[param(minimum = 1)]
    limit: Option<i64>,
    /// The id of the last record of the previous page: this page starts with the next older one.
    #[param(format = "uuid")]
    before: Option<String>,
}

/// List income
///
/// The payments the agent took (its offers', and its own facilitator's with `offer_id` null), newest first, paged
/// with `limit` (default 100, at most 500) and `before` (a record id); `?offer=` and `?status=` filter. The agent
/// token or owner authority.
#[utoipa::path(get, path = "/api/agents/{id}/income", tag = "offers",
    params(("id" = String, Path, format = "uuid"), IncomeParams),
    security(("agent_token" = []), ("admin_token" = []), ("owner_token" = [])),
    responses((status = 200, description = "Payments taken, newest first", body = IncomeListView),
        (status = 401, body = ErrorBody), (status = 403, body = ErrorBody), (status = 404, body = ErrorBody),
        (status = 410, body = ErrorBody), (status = 422, body = ErrorBody)))]
#[tracing::instrument(skip_all, fields(agent_id = %caller.agent.id))]
async fn list_income(
    State(state): State<AppState>,
    ActiveCaller(caller): ActiveCaller,
    params: std::result::Result<Query<IncomeParams>, QueryRejection>,
) -> Result<Json<IncomeListView>> {
    let Query(params) = params.map_err(|_| AppError::field("limit", "limit must be an integer"))?;
    let limit = params.limit.unwrap_or(DEFAULT_PAGE);
    if limit < 1 {
        return Err(AppError::field("limit", "must be at least 1"));
    }
    let id = |name: &str, text: Option<&str>, what: &str| match text.map(str::trim) {
        Some(text) => parse_id(text)
            .map(Some)
            .ok_or_else(|| AppError::field(name, format!("must be {what}"))),
        None => Ok(None),
    };
    let before = id("before", params.before.as_deref(), "an income record id")?;
    let offer_id = id("offer", params.offer.as_deref(), "an offer id")?;
    let status = match params.status.as_deref().map(str::trim) {
        Some(s) if STATUSES.contains(&s) => Some(s.to_string()),
        Some(_) => {
            return Err(AppError::field(
                "status",
                "must be settling, settled, failed or released",
            ));
        }
        None => None,
    };
    let filter = IncomeFilter { offer_id, status };
    let records = state
        .store
        .income_page(caller.agent.id, &filter, before, limit.min(MAX_PAGE))
        .await?
        .ok_or_else(|| AppError::field("before", "is not one of this agent's income records"))?;
    Ok(Json(IncomeListView {
        income: records.iter().map(IncomeView::from).collect(),
    }))
}
