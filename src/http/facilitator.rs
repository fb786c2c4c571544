//! The agent's own x402 facilitator (§23). Its tokens: created (the token shown once, kept as its SHA-256), listed
//! and deleted by the agent's owner (owner authority on a guarded agent, as its webhooks: a token opens payments to
//! the agent to an outside server). Its endpoints, `…/x402/verify`, `…/x402/settle` and `…/x402/supported`, take a
//! facilitator token of that agent and nothing else, parse the body as JSON only and answer whatever the seller
//! service (`crate::sell::Seller`) decides, 200 for any body that parses.

use axum::Json;
use axum::extract::{FromRef, FromRequestParts, Path, State};
use axum::http::StatusCode;
use axum::http::request::Parts;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use super::auth::{ActiveCaller, parse_id};
use super::error::{AppError, Result};
use super::json::ApiJson;
use super::views::{
    ErrorBody, FacilitatorRequest, FacilitatorSettleView, FacilitatorSupportedView, FacilitatorTokenCreatedView,
    FacilitatorTokenView, FacilitatorTokensView, FacilitatorVerifyView,
};
use crate::auth::{AuthError, Authenticator, Caller};
use crate::domain::agent::Agent;
use crate::domain::audit::Detail;
use crate::domain::audit::detail::FacilitatorToken as TokenDetail;
use crate::domain::token;
use crate::state::AppState;
use crate::store::AuditEvent;
use crate::store::facilitator::{FacilitatorToken, NewFacilitatorToken};

pub fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(create_facilitator_token, list_facilitator_tokens))
        .routes(routes!(delete_facilitator_token))
        .routes(routes!(facilitator_verify))
        .routes(routes!(facilitator_settle))
        .routes(routes!(facilitator_supported))
}

/// The active agent named in the path whose facilitator token (`Authorization: Bearer fac_…`) the request
/// presents. Neither the agent token nor owner authority is taken in its place.
pub struct FacilitatorOf(pub Agent);

impl<S> FromRequestParts<S> for FacilitatorOf
where
    S: Send + Sync,
    Authenticator: FromRef<S>,
{
    type Rejection = AppError;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, Self::Rejection> {
        let bearer = parts
            .headers
            .get(axum::http::header::AUTHORIZATION)
            .and_then(|v| v.to_str().ok())
            .map(str::trim)
            .and_then(|v| v.split_once(' '))
            .filter(|(scheme, _)| scheme.eq_ignore_ascii_case("bearer"))
            .map(|(_, token)| token.trim())
            .filter(|token| !token.is_empty())
            .map(String::from);
        let id = match Path::<Vec<(String, String)>>::from_request_parts(parts, state).await {
            Ok(Path(params)) => params
                .into_iter()
                .find(|(k, _)| k == "id")
                .and_then(|(_, v)| parse_id(&v)),
            Err(_) => None,
        };
        let auth = Authenticator::from_ref(state);
        match auth.facilitator(id, bearer.as_deref()).await {
            Ok(agent) => Ok(FacilitatorOf(agent)),
            Err(AuthError::MissingToken) => Err(AppError::MissingCredential(
                "this call takes one of the agent's facilitator tokens: Authorization: Bearer fac_…".into(),
            )),
            Err(other) => Err(other.into()),
        }
    }
}

/// Who may manage the agent's facilitator tokens: its owner where the agent is guarded (§10), as for webhooks.
fn owner(caller: &Caller) -> Result<()> {
    Ok(caller.require_owner_if_guarded()?)
}

fn token_detail(token: &FacilitatorToken) -> TokenDetail {
    TokenDetail {
        token_id: token.id,
        prefix: token.prefix.clone(),
    }
}

/// Create a facilitator token
///
/// A token for an x402 resource server built with the official SDKs: point its facilitator client at
/// `<agentd>/api/agents/{id}/x402` with `Authorization: Bearer <token>` in its auth headers. The token is shown in
/// this answer only (the service keeps its SHA-256) and opens the agent's `x402/verify`, `x402/settle` and
/// `x402/supported` only. Owner authority on a guarded agent (the agent token alone: 403 `owner_required`). Any
/// body is ignored. Audited (`facilitator_token_created`).
#[utoipa::path(post, path = "/api/agents/{id}/facilitator-tokens", tag = "facilitator",
    params(("id" = String, Path, format = "uuid")),
    security(("admin_token" = []), ("owner_token" = []), ("agent_token" = [])),
    responses((status = 201, body = FacilitatorTokenCreatedView, description = "Created: the token, shown once"),
        (status = 401, body = ErrorBody), (status = 403, body = ErrorBody), (status = 404, body = ErrorBody),
        (status = 410, body = ErrorBody)))]
#[tracing::instrument(skip_all, fields(agent_id = %caller.agent.id))]
async fn create_facilitator_token(
    State(state): State<AppState>,
    ActiveCaller(caller): ActiveCaller,
) -> Result<(StatusCode, Json<FacilitatorTokenCreatedView>)> {
    owner(&caller)?;
    let issued = token::issue_prefixed(token::FACILITATOR_PREFIX);
    let new = NewFacilitatorToken {
        id: uuid::Uuid::new_v4(),
        agent_id: caller.agent.id,
        token_hash: issued.hash.clone(),
        prefix: issued.expose()[..token::FACILITATOR_SHOWN_CHARS].to_string(),
    };
    let detail = Detail::FacilitatorTokenCreated(TokenDetail {
        token_id: new.id,
        prefix: new.prefix.clone(),
    });
    let audit = AuditEvent::new(caller.agent.id, caller.actor(), detail);
    let created = state.store.create_facilitator_token(&new, &audit).await?;
    let view = FacilitatorTokenCreatedView {
        id: created.id,
        token: issued.expose().to_string(),
        created_at: created.created_at,
    };
    Ok((StatusCode::CREATED, Json(view)))
}

/// List facilitator tokens
///
/// The agent's live facilitator tokens, oldest first, each by its `prefix` (never the token) with when a request
/// last presented it. Owner authority on a guarded agent.
#[utoipa::path(get, path = "/api/agents/{id}/facilitator-tokens", tag = "facilitator",
    params(("id" = String, Path, format = "uuid")),
    security(("admin_token" = []), ("owner_token" = []), ("agent_token" = [])),
    responses((status = 200, body = FacilitatorTokensView, description = "The agent's live facilitator tokens"),
        (status = 401, body = ErrorBody), (status = 403, body = ErrorBody), (status = 404, body = ErrorBody),
        (status = 410, body = ErrorBody)))]
#[tracing::instrument(skip_all, fields(agent_id = %caller.agent.id))]
async fn list_facilitator_tokens(
    State(state): State<AppState>,
    ActiveCaller(caller): ActiveCaller,
) -> Result<Json<FacilitatorTokensView>> {
    owner(&caller)?;
    let all = state.store.facilitator_tokens(caller.agent.id).await?;
    Ok(Json(FacilitatorTokensView {
        facilitator_tokens: all.iter().map(FacilitatorTokenView::from).collect(),
    }))
}

/// Delete a facilitator token
///
/// The token stops opening the facilitator at once. An unknown, another agent's or an already deleted token is 404
/// `facilitator_token_not_found`. Owner authority on a guarded agent. Audited (`facilitator_token_deleted`).
#[utoipa::path(delete, path = "/api/agents/{id}/facilitator-tokens/{tid}", tag = "facilitator",
    params(("id" = String, Path, format = "uuid"), ("tid" = String, Path, format = "uuid")),
    security(("admin_token" = []), ("owner_token" = []), ("agent_token" = [])),
    responses((status = 204, description = "Deleted"),
        (status = 401, body = ErrorBody), (status = 403, body = ErrorBody), (status = 404, body = ErrorBody),
        (status = 410, body = ErrorBody)))]
#[tracing::instrument(skip_all, fields(agent_id = %caller.agent.id))]
async fn delete_facilitator_token(
    State(state): State<AppState>,
    ActiveCaller(caller): ActiveCaller,
    Path((_, tid)): Path<(String, String)>,
) -> Result<StatusCode> {
    owner(&caller)?;
    let id = parse_id(&tid).ok_or(AppError::FacilitatorTokenNotFound)?;
    let (agent_id, actor) = (caller.agent.id, caller.actor());
    let audit = move |deleted: &FacilitatorToken| {
        AuditEvent::new(agent_id, actor, Detail::FacilitatorTokenDeleted(token_detail(deleted)))
    };
    state
        .store
        .delete_facilitator_token(agent_id, id, &audit)
        .await?
        .ok_or(AppError::FacilitatorTokenNotFound)?;
    Ok(StatusCode::NO_CONTENT)
}

/// Verify a payment (x402 facilitator)
///
/// x402 v2's `POST /verify` for this agent: the same checks as an offer's payment, for requirements whose `payTo`
/// is this agent's wallet (any other: `isValid: false`, `invalidReason: "pay_to_not_agent"`). Changes nothing.
/// 200 for any JSON object, the verdict in the body (another JSON value: 422 `validation_failed`). Takes a
/// facilitator token of this agent only.
#[utoipa::path(post, path = "/api/agents/{id}/x402/verify", tag = "facilitator",
    params(("id" = String, Path, format = "uuid")), request_body = FacilitatorRequest,
    security(("facilitator_token" = [])),
    responses((status = 200, body = FacilitatorVerifyView, description = "The verdict"),
        (status = 401, body = ErrorBody), (status = 403, body = ErrorBody), (status = 404, body = ErrorBody),
        (status = 410, body = ErrorBody), (status = 422, body = ErrorBody)))]
#[tracing::instrument(skip_all, fields(agent_id = %agent.id))]
async fn facilitator_verify(
    State(state): State<AppState>,
    FacilitatorOf(agent): FacilitatorOf,
    ApiJson(body): ApiJson<serde_json::Value>,
) -> Json<serde_json::Value> {
    Json(state.seller.facilitator_verify(&agent, &body).await)
}

/// Settle a payment (x402 facilitator)
///
/// x402 v2's `POST /settle` for this agent: verified as `verify` does, then the authorization is held and settled
/// from the agent's wallet (an outflow of gas only, counted in its cap); it appears in `GET …/income` with
/// `offer_id` null. A repeat with the same signature answers the first outcome; `settlement_pending` (with its
/// `transaction`) while it is not included. 200 for any JSON object. Takes a facilitator token of this agent only.
#[utoipa::path(post, path = "/api/agents/{id}/x402/settle", tag = "facilitator",
    params(("id" = String, Path, format = "uuid")), request_body = FacilitatorRequest,
    security(("facilitator_token" = [])),
    responses((status = 200, body = FacilitatorSettleView, description = "The settlement's outcome"),
        (status = 401, body = ErrorBody), (status = 403, body = ErrorBody), (status = 404, body = ErrorBody),
        (status = 410, body = ErrorBody), (status = 422, body = ErrorBody)))]
#[tracing::instrument(skip_all, fields(agent_id = %agent.id))]
async fn facilitator_settle(
    State(state): State<AppState>,
    FacilitatorOf(agent): FacilitatorOf,
    ApiJson(body): ApiJson<serde_json::Value>,
) -> Json<serde_json::Value> {
    Json(state.seller.facilitator_settle(&agent, &body).await)
}

/// What the facilitator settles (x402 facilitator)
///
/// x402 v2's `GET /supported` for this agent: the `exact` scheme on its networks, no extensions, and the agent's
/// wallet as the signer of its settlements. Takes a facilitator token of this agent only.
#[utoipa::path(get, path = "/api/agents/{id}/x402/supported", tag = "facilitator",
    params(("id" = String, Path, format = "uuid")),
    security(("facilitator_token" = [])),
    responses((status = 200, body = FacilitatorSupportedView, description = "The kinds it settles"),
        (status = 401, body = ErrorBody), (status = 403, body = ErrorBody), (status = 404, body = ErrorBody),
        (status = 410, body = ErrorBody)))]
#[tracing::instrument(skip_all, fields(agent_id = %agent.id))]
async fn facilitator_supported(
    State(state): State<AppState>,
    FacilitatorOf(agent): FacilitatorOf,
) -> Json<serde_json::Value> {
    Json(state.seller.supported(&agent))
}
