//! The audit log of one agent (docs/api.md §10): newest first, paged by entry id; and the head of the whole chain
//! for anchoring it elsewhere (§15).

use axum::Json;
use axum::extract::{Query, State};
use serde::Deserialize;
use utoipa::IntoParams;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use super::auth::{AdminGuard, AnyCaller};
use super::error::{AppError, Result};
use super::views::{AuditEntryView, AuditHeadView, ErrorBody};
use crate::auth::AuthError;
use crate::state::AppState;

pub fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(list_audit))
        .routes(routes!(audit_head))
}

#[derive(Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
struct AuditParams {
    /// 1..500, default 100.
    #[param(minimum = 1, maximum = 500)]
    limit: Option<i64>,
    /// Only entries older than this entry id (the `id` of the last entry of the previous page).
    #[param(minimum = 1)]
    before: Option<i64>,
}

/// Read the audit log
///
/// The agent's audit entries, newest first, paged with `limit` (default 100, at most 500) and `before` (an entry
/// id). Entries form one hash chain across all agents; `agentd audit verify` checks it. Agent token or owner
/// authority; with owner authority it also works on an inactive agent.
#[utoipa::path(get, path = "/api/agents/{id}/audit", tag = "agents",
    params(("id" = String, Path, format = "uuid"), AuditParams),
    security(("agent_token" = []), ("admin_token" = []), ("owner_token" = [])),
    responses((status = 200, description = "Entries, newest first", body = Vec<AuditEntryView>),
        (status = 401, body = ErrorBody), (status = 403, body = ErrorBody), (status = 404, body = ErrorBody),
        (status = 410, description = "inactive, without owner authority", body = ErrorBody),
        (status = 422, body = ErrorBody)))]
#[tracing::instrument(skip_all, fields(agent_id = %caller.agent.id))]
async fn list_audit(
    State(state): State<AppState>,
    AnyCaller(caller): AnyCaller,
    params: std::result::Result<Query<AuditParams>, axum::extract::rejection::QueryRejection>,
) -> Result<Json<Vec<AuditEntryView>>> {
    if !caller.agent.is_active && caller.owner.is_none() {
        return Err(AuthError::AgentInactive.into());
    }
    let Query(params) = params.map_err(|_| AppError::field("limit", "limit and before must be integers"))?;
    let limit = params.limit.unwrap_or(100);
    if !(1..=500).contains(&limit) {
        return Err(AppError::field("limit", "must be between 1 and 500"));
    }
    if params.before.is_some_and(|b| b < 1) {
        return Err(AppError::field("before", "must be an entry id"));
    }
    // A send is answered before its entry's round commits: the entries of what was answered come first.
    state.transfers.entries_written().await;
    let entries = state.store.list_audit(caller.agent.id, params.before, limit).await?;
    Ok(Json(entries.iter().map(AuditEntryView::from).collect()))
}

/// Read the audit chain's head
///
/// The newest entry of the one hash chain across all agents: its id, hash and time. Record it somewhere the
/// database's writers cannot reach (a ticket, another system's log, a chain): `agentd audit verify` then shows whether
/// the log still ends with it. Admin token; 404 while the log is empty.
#[utoipa::path(get, path = "/api/audit/head", tag = "operations", security((), ("admin_token" = [])),
    responses((status = 200, description = "The newest entry", body = AuditHeadView),
        (status = 401, body = ErrorBody), (status = 404, body = ErrorBody)))]
#[tracing::instrument(skip_all)]
async fn audit_head(State(state): State<AppState>, _admin: AdminGuard) -> Result<Json<AuditHeadView>> {
    state.transfers.entries_written().await;
    let (id, hash, at) = state.store.audit_head_entry().await?.ok_or(AppError::NotFound)?;
    Ok(Json(AuditHeadView { id, hash, at }))
}
