//! On-chain delegations the owner grants the agent's wallet (§21): register (owner authority or the agent token:
//! the delegator's signature is the consent), list and read with what is available now, remove (owner authority).

use axum::Json;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use serde::Deserialize;
use utoipa::ToSchema;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use super::auth::{ActiveCaller, parse_id};
use super::error::{AppError, Result};
use super::json::ApiJson;
use super::views::{DelegationView, ErrorBody};
use crate::delegations::{Delegations, NewDelegation};
use crate::domain::delegation::DelegationJson;
use crate::state::AppState;

pub fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(add_delegation, list_delegations))
        .routes(routes!(get_delegation, remove_delegation))
}

/// `POST …/delegations`: the chain and the delegation in the framework's JSON form.
#[derive(Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
struct AddDelegation {
    chain: String,
    /// `{delegate, delegator, authority, caveats: [{enforcer, terms, args}], salt, signature}`: byte strings 0x-hex,
    /// `salt` a decimal or 0x string.
    #[schema(value_type = Object)]
    delegation: serde_json::Value,
}

/// Register a delegation
///
/// A delegation the owner's account (a smart account or an EOA upgraded by EIP-7702) granted the agent's wallet on
/// chain. Checked in this order, the first failure answering 422 with its code and nothing stored:
/// `delegations_unavailable`, `delegate_mismatch`, `delegation_not_root`, `delegator_not_smart`,
/// `invalid_delegation_signature`, `unknown_caveat`, `caveat_conflict`, `delegation_unbounded`; disabled on chain 409
/// `delegation_revoked`; a hash already registered (also removed) 409 `delegation_exists`, except that owner
/// authority may register a removed or revoked one again.
#[utoipa::path(post, path = "/api/agents/{id}/delegations", tag = "delegations",
    params(("id" = String, Path, format = "uuid")), request_body = AddDelegation,
    security(("agent_token" = []), ("admin_token" = []), ("owner_token" = [])),
    responses((status = 201, body = DelegationView, description = "Registered"),
        (status = 400, body = ErrorBody), (status = 413, body = ErrorBody), (status = 401, body = ErrorBody), (status = 403, body = ErrorBody), (status = 404, body = ErrorBody),
        (status = 409, body = ErrorBody), (status = 410, body = ErrorBody), (status = 422, body = ErrorBody),
        (status = 502, body = ErrorBody), (status = 503, body = ErrorBody), (status = 504, body = ErrorBody)))]
#[tracing::instrument(skip_all, fields(agent_id = %caller.agent.id))]
async fn add_delegation(
    State(state): State<AppState>,
    ActiveCaller(caller): ActiveCaller,
    ApiJson(body): ApiJson<AddDelegation>,
) -> Result<(StatusCode, Json<DelegationView>)> {
    let delegation: DelegationJson = super::json::shape(body.delegation)
        .map_err(|_| AppError::field("delegation", "must be the framework's JSON form of a delegation"))?;
    let new = NewDelegation {
        chain: body.chain,
        delegation,
    };
    let described = state
        .delegations
        .register(&caller.agent, &new, caller.owner.is_some(), caller.actor())
        .await?;
    let view = DelegationView::new(&described, state.chains.tokens());
    Ok((StatusCode::CREATED, Json(view)))
}

/// List delegations
///
/// The agent's delegations, oldest first, removed ones included, each limit with what is `available` now (read at
/// the latest block).
#[utoipa::path(get, path = "/api/agents/{id}/delegations", tag = "delegations",
    params(("id" = String, Path, format = "uuid")),
    security(("agent_token" = []), ("admin_token" = []), ("owner_token" = [])),
    responses((status = 200, body = Vec<DelegationView>, description = "The agent's delegations"),
        (status = 401, body = ErrorBody), (status = 403, body = ErrorBody), (status = 404, body = ErrorBody),
        (status = 410, body = ErrorBody)))]
#[tracing::instrument(skip_all, fields(agent_id = %caller.agent.id))]
async fn list_delegations(
    State(state): State<AppState>,
    ActiveCaller(caller): ActiveCaller,
) -> Result<Json<Vec<DelegationView>>> {
    let all = state.delegations.list(caller.agent.id).await?;
    let tokens = state.chains.tokens();
    Ok(Json(all.iter().map(|d| DelegationView::new(d, tokens)).collect()))
}

/// Read a delegation
///
/// One of the agent's delegations with each limit's `available` now; an unknown or another agent's id is 404
/// `delegation_not_found`.
#[utoipa::path(get, path = "/api/agents/{id}/delegations/{did}", tag = "delegations",
    params(("id" = String, Path, format = "uuid"), ("did" = String, Path, format = "uuid")),
    security(("agent_token" = []), ("admin_token" = []), ("owner_token" = [])),
    responses((status = 200, body = DelegationView, description = "The delegation"),
        (status = 401, body = ErrorBody), (status = 403, body = ErrorBody), (status = 404, body = ErrorBody),
        (status = 410, body = ErrorBody)))]
#[tracing::instrument(skip_all, fields(agent_id = %caller.agent.id))]
async fn get_delegation(
    State(delegations): State<Delegations>,
    State(state): State<AppState>,
    ActiveCaller(caller): ActiveCaller,
    Path((_, did)): Path<(String, String)>,
) -> Result<Json<DelegationView>> {
    let id = parse_id(&did).ok_or(AppError::DelegationNotFound)?;
    let described = delegations.get(caller.agent.id, id).await?;
    Ok(Json(DelegationView::new(&described, state.chains.tokens())))
}

/// Remove a delegation
///
/// Owner authority: agentd stops using it (revoking it on chain is the delegator's act, `disableDelegation`). Its
/// hash stays known: the agent token cannot register it again.
#[utoipa::path(delete, path = "/api/agents/{id}/delegations/{did}", tag = "delegations",
    params(("id" = String, Path, format = "uuid"), ("did" = String, Path, format = "uuid")),
    security(("admin_token" = []), ("owner_token" = [])),
    responses((status = 204, description = "Removed"),
        (status = 401, body = ErrorBody), (status = 403, body = ErrorBody), (status = 404, body = ErrorBody),
        (status = 410, body = ErrorBody)))]
#[tracing::instrument(skip_all, fields(agent_id = %caller.agent.id))]
async fn remove_delegation(
    State(delegations): State<Delegations>,
    ActiveCaller(caller): ActiveCaller,
    Path((_, did)): Path<(String, String)>,
) -> Result<StatusCode> {
    caller.require_owner()?;
    let id = parse_id(&did).ok_or(AppError::DelegationNotFound)?;
    delegations.remove(caller.agent.id, id, caller.actor()).await?;
    Ok(StatusCode::NO_CONTENT)
}
