//! Webhook endpoints (§19): the operator's under `/api/webhooks` (every agent, or one; `ADMIN_TOKEN` required, so
//! with none set they answer 401) and an owner's under `/api/agents/{id}/webhooks` (that agent only; owner
//! authority on a guarded agent, as for its policy). Both call one service, `webhooks::Endpoints` (checks, audit,
//! store), the `Scope` saying whose endpoints they reach; here are the routes, who may call them, and the views.

use axum::Json;
use axum::extract::{FromRequestParts, Path, Query, State};
use axum::http::StatusCode;
use axum::http::request::Parts;
use serde::{Deserialize, Deserializer};
use utoipa::{IntoParams, ToSchema};
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use super::auth::ActiveCaller;
use super::error::{AppError, Result};
use super::json::ApiJson;
use super::views::webhooks::WebhookEventType;
use super::views::{DeliveryView, ErrorBody, QueuedEventView, WebhookSecretView, WebhookView};
use crate::auth::{Authenticator, Caller};
use crate::state::AppState;
use crate::webhooks::endpoints::{EndpointEdit, NewEndpoint, Scope};

pub fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(create_webhook, list_webhooks))
        .routes(routes!(get_webhook, update_webhook, delete_webhook))
        .routes(routes!(rotate_webhook_secret))
        .routes(routes!(test_webhook))
        .routes(routes!(list_webhook_deliveries))
        .routes(routes!(redeliver_webhook_event))
        .routes(routes!(create_agent_webhook, list_agent_webhooks))
        .routes(routes!(get_agent_webhook, update_agent_webhook, delete_agent_webhook))
        .routes(routes!(rotate_agent_webhook_secret))
        .routes(routes!(test_agent_webhook))
        .routes(routes!(list_agent_webhook_deliveries))
        .routes(routes!(redeliver_agent_webhook_event))
}

/// The operator (`Authorization: Bearer <ADMIN_TOKEN>`); without a configured admin token nobody (401).
pub struct Operator;

impl<S> FromRequestParts<S> for Operator
where
    S: Send + Sync,
    Authenticator: axum::extract::FromRef<S>,
{
    type Rejection = AppError;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, Self::Rejection> {
        let auth = <Authenticator as axum::extract::FromRef<S>>::from_ref(state);
        if !auth.has_admin_token() {
            return Err(AppError::AdminRequired);
        }
        let bearer = parts
            .headers
            .get(axum::http::header::AUTHORIZATION)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.trim().strip_prefix("Bearer "));
        auth.admin(bearer)?;
        Ok(Operator)
    }
}

/// A new endpoint.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
struct CreateWebhook {
    /// `http` or `https`; no credentials; no private or local address unless `WEBHOOK_ALLOW_PRIVATE=true`.
    url: String,
    /// Event types, or `["*"]`.
    #[schema(value_type = Vec<WebhookEventType>)]
    events: Vec<String>,
    /// Operator endpoints only: one agent's events; absent or null = every agent. Under `/api/agents/{id}` it may
    /// only name that agent.
    #[schema(format = "uuid")]
    agent_id: Option<String>,
    description: Option<String>,
}

/// A change: the fields given.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
struct UpdateWebhook {
    url: Option<String>,
    #[schema(value_type = Option<Vec<WebhookEventType>>)]
    events: Option<Vec<String>>,
    enabled: Option<bool>,
    /// `null` clears it.
    #[serde(default, deserialize_with = "present")]
    #[schema(value_type = Option<String>)]
    description: Option<Option<String>>,
}

/// A field that is present (`Some`, `null` included) or absent (`None`, through `default`).
fn present<'de, D: Deserializer<'de>>(d: D) -> std::result::Result<Option<Option<String>>, D::Error> {
    Option::<String>::deserialize(d).map(Some)
}

#[derive(Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
struct DeliveryParams {
    /// 1..500, default 50.
    #[param(minimum = 1, maximum = 500)]
    limit: Option<i64>,
    /// Only attempts older than this delivery `id`.
    #[param(minimum = 1)]
    before: Option<i64>,
}

/// The agent's endpoints, once its caller proved owner authority where the agent is guarded.
fn owner(caller: &Caller) -> Result<Scope> {
    caller.require_owner_if_guarded().map_err(AppError::from)?;
    Ok(Scope::Agent {
        agent_id: caller.agent.id,
        actor: caller.actor(),
    })
}

async fn create(state: &AppState, scope: Scope, body: CreateWebhook) -> Result<(StatusCode, Json<WebhookSecretView>)> {
    let new = NewEndpoint {
        url: body.url,
        events: body.events,
        agent_id: body.agent_id,
        description: body.description,
    };
    let created = state.webhooks.create(scope, new).await?;
    Ok((
        StatusCode::CREATED,
        Json(WebhookSecretView::new(&created.webhook, created.secret)),
    ))
}

async fn list(state: &AppState, scope: Scope) -> Result<Json<Vec<WebhookView>>> {
    let all = state.webhooks.list(scope).await?;
    Ok(Json(all.iter().map(WebhookView::from).collect()))
}

async fn get(state: &AppState, scope: Scope, wid: &str) -> Result<Json<WebhookView>> {
    Ok(Json(WebhookView::from(&state.webhooks.get(scope, wid).await?)))
}

async fn update(state: &AppState, scope: Scope, wid: &str, body: UpdateWebhook) -> Result<Json<WebhookView>> {
    let edit = EndpointEdit {
        url: body.url,
        events: body.events,
        enabled: body.enabled,
        description: body.description,
    };
    Ok(Json(WebhookView::from(&state.webhooks.update(scope, wid, edit).await?)))
}

async fn delete(state: &AppState, scope: Scope, wid: &str) -> Result<StatusCode> {
    state.webhooks.delete(scope, wid).await?;
    Ok(StatusCode::NO_CONTENT)
}

async fn rotate(state: &AppState, scope: Scope, wid: &str) -> Result<Json<WebhookSecretView>> {
    let rotated = state.webhooks.rotate(scope, wid).await?;
    Ok(Json(WebhookSecretView::new(&rotated.webhook, rotated.secret)))
}

async fn test(state: &AppState, scope: Scope, wid: &str) -> Result<(StatusCode, Json<QueuedEventView>)> {
    let event_id = state.webhooks.test(scope, wid).await?;
    Ok((StatusCode::ACCEPTED, Json(QueuedEventView { event_id })))
}

async fn deliveries(
    state: &AppState,
    scope: Scope,
    wid: &str,
    params: std::result::Result<Query<DeliveryParams>, axum::extract::rejection::QueryRejection>,
) -> Result<Json<Vec<DeliveryView>>> {
    let w = state.webhooks.get(scope, wid).await?;
    let Query(params) = params.map_err(|_| AppError::field("limit", "limit and before must be integers"))?;
    let list = state.webhooks.deliveries(&w, params.before, params.limit).await?;
    Ok(Json(list.iter().map(DeliveryView::from).collect()))
}

async fn redeliver(
    state: &AppState,
    scope: Scope,
    wid: &str,
    event_id: &str,
) -> Result<(StatusCode, Json<QueuedEventView>)> {
    let event_id = state.webhooks.redeliver(scope, wid, event_id).await?;
    Ok((StatusCode::ACCEPTED, Json(QueuedEventView { event_id })))
}

// The operator's endpoints.

/// Register a webhook (operator)
///
/// An endpoint for every agent's events (`agent_id` absent or null) or one agent's. Answers the secret, once.
/// Needs `ADMIN_TOKEN` (401 when the server has none). Validation → 422 (unknown event type, a URL §16's rules
/// refuse).
#[utoipa::path(post, path = "/api/webhooks", tag = "webhooks", request_body = CreateWebhook,
    security(("admin_token" = [])),
    responses((status = 201, body = WebhookSecretView), (status = 401, body = ErrorBody), (status = 422, body = ErrorBody)))]
#[tracing::instrument(skip_all)]
async fn create_webhook(
    State(state): State<AppState>,
    _op: Operator,
    ApiJson(body): ApiJson<CreateWebhook>,
) -> Result<(StatusCode, Json<WebhookSecretView>)> {
    create(&state, Scope::Operator, body).await
}

/// List webhooks (operator)
///
/// Every endpoint, of every agent and of none, newest first; never a secret.
#[utoipa::path(get, path = "/api/webhooks", tag = "webhooks", security(("admin_token" = [])),
    responses((status = 200, body = Vec<WebhookView>), (status = 401, body = ErrorBody)))]
#[tracing::instrument(skip_all)]
async fn list_webhooks(State(state): State<AppState>, _op: Operator) -> Result<Json<Vec<WebhookView>>> {
    list(&state, Scope::Operator).await
}

/// Read a webhook (operator)
///
/// Any endpoint, an owner's included; never its secret.
#[utoipa::path(get, path = "/api/webhooks/{wid}", tag = "webhooks", params(("wid" = String, Path, format = "uuid")),
    security(("admin_token" = [])),
    responses((status = 200, body = WebhookView), (status = 401, body = ErrorBody), (status = 404, body = ErrorBody)))]
#[tracing::instrument(skip_all)]
async fn get_webhook(
    State(state): State<AppState>,
    _op: Operator,
    Path(wid): Path<String>,
) -> Result<Json<WebhookView>> {
    get(&state, Scope::Operator, &wid).await
}

/// Change a webhook (operator)
///
/// `url`, `events`, `enabled` (enabling it again forgets its failures), `description`. Audited for an agent's
/// endpoint.
#[utoipa::path(patch, path = "/api/webhooks/{wid}", tag = "webhooks", params(("wid" = String, Path, format = "uuid")),
    request_body = UpdateWebhook, security(("admin_token" = [])),
    responses((status = 200, body = WebhookView), (status = 401, body = ErrorBody), (status = 404, body = ErrorBody),
        (status = 422, body = ErrorBody)))]
#[tracing::instrument(skip_all)]
async fn update_webhook(
    State(state): State<AppState>,
    _op: Operator,
    Path(wid): Path<String>,
    ApiJson(body): ApiJson<UpdateWebhook>,
) -> Result<Json<WebhookView>> {
    update(&state, Scope::Operator, &wid, body).await
}

/// Delete a webhook (operator)
///
/// Removes the endpoint, its pending deliveries and its deliveries log. Audited for an agent's endpoint.
#[utoipa::path(delete, path = "/api/webhooks/{wid}", tag = "webhooks", params(("wid" = String, Path, format = "uuid")),
    security(("admin_token" = [])),
    responses((status = 204), (status = 401, body = ErrorBody), (status = 404, body = ErrorBody)))]
#[tracing::instrument(skip_all)]
async fn delete_webhook(State(state): State<AppState>, _op: Operator, Path(wid): Path<String>) -> Result<StatusCode> {
    delete(&state, Scope::Operator, &wid).await
}

/// Rotate a webhook's secret (operator)
///
/// A new secret, shown in this answer only; the old one stops signing at once.
#[utoipa::path(post, path = "/api/webhooks/{wid}/rotate-secret", tag = "webhooks",
    params(("wid" = String, Path, format = "uuid")), security(("admin_token" = [])),
    responses((status = 200, body = WebhookSecretView), (status = 401, body = ErrorBody), (status = 404, body = ErrorBody)))]
#[tracing::instrument(skip_all)]
async fn rotate_webhook_secret(
    State(state): State<AppState>,
    _op: Operator,
    Path(wid): Path<String>,
) -> Result<Json<WebhookSecretView>> {
    rotate(&state, Scope::Operator, &wid).await
}

/// Send a test event (operator)
///
/// A `webhook.test` event to this endpoint only, whatever its `events`.
#[utoipa::path(post, path = "/api/webhooks/{wid}/test", tag = "webhooks", params(("wid" = String, Path, format = "uuid")),
    security(("admin_token" = [])),
    responses((status = 202, body = QueuedEventView), (status = 401, body = ErrorBody), (status = 404, body = ErrorBody)))]
#[tracing::instrument(skip_all)]
async fn test_webhook(
    State(state): State<AppState>,
    _op: Operator,
    Path(wid): Path<String>,
) -> Result<(StatusCode, Json<QueuedEventView>)> {
    test(&state, Scope::Operator, &wid).await
}

/// List a webhook's deliveries (operator)
///
/// One entry per attempt, newest first, paged with `limit` (default 50) and `before` (a delivery id).
#[utoipa::path(get, path = "/api/webhooks/{wid}/deliveries", tag = "webhooks",
    params(("wid" = String, Path, format = "uuid"), DeliveryParams), security(("admin_token" = [])),
    responses((status = 200, body = Vec<DeliveryView>), (status = 401, body = ErrorBody), (status = 404, body = ErrorBody),
        (status = 422, body = ErrorBody)))]
#[tracing::instrument(skip_all)]
async fn list_webhook_deliveries(
    State(state): State<AppState>,
    _op: Operator,
    Path(wid): Path<String>,
    params: std::result::Result<Query<DeliveryParams>, axum::extract::rejection::QueryRejection>,
) -> Result<Json<Vec<DeliveryView>>> {
    deliveries(&state, Scope::Operator, &wid, params).await
}

/// Deliver an event again (operator)
///
/// Due at once, with the whole retry schedule ahead; 404 for an event this endpoint could not receive.
#[utoipa::path(post, path = "/api/webhooks/{wid}/deliveries/{event_id}/redeliver", tag = "webhooks",
    params(("wid" = String, Path, format = "uuid"), ("event_id" = String, Path, format = "uuid")),
    security(("admin_token" = [])),
    responses((status = 202, body = QueuedEventView), (status = 401, body = ErrorBody), (status = 404, body = ErrorBody)))]
#[tracing::instrument(skip_all)]
async fn redeliver_webhook_event(
    State(state): State<AppState>,
    _op: Operator,
    Path((wid, event_id)): Path<(String, String)>,
) -> Result<(StatusCode, Json<QueuedEventView>)> {
    redeliver(&state, Scope::Operator, &wid, &event_id).await
}

// One agent's endpoints, with owner authority (the agent token alone on an unguarded agent).

/// Register a webhook of the agent
///
/// The agent's events only. Owner authority on a guarded agent (403 `owner_required` with the agent token alone).
/// Answers the secret, once.
#[utoipa::path(post, path = "/api/agents/{id}/webhooks", tag = "webhooks", params(("id" = String, Path, format = "uuid")),
    request_body = CreateWebhook, security(("admin_token" = []), ("owner_token" = []), ("agent_token" = [])),
    responses((status = 201, body = WebhookSecretView), (status = 401, body = ErrorBody), (status = 403, body = ErrorBody),
        (status = 404, body = ErrorBody), (status = 410, body = ErrorBody), (status = 422, body = ErrorBody)))]
#[tracing::instrument(skip_all, fields(agent_id = %caller.agent.id))]
async fn create_agent_webhook(
    State(state): State<AppState>,
    ActiveCaller(caller): ActiveCaller,
    ApiJson(body): ApiJson<CreateWebhook>,
) -> Result<(StatusCode, Json<WebhookSecretView>)> {
    create(&state, owner(&caller)?, body).await
}

/// List the agent's webhooks
///
/// The agent's endpoints, newest first; never a secret. Owner authority on a guarded agent.
#[utoipa::path(get, path = "/api/agents/{id}/webhooks", tag = "webhooks", params(("id" = String, Path, format = "uuid")),
    security(("admin_token" = []), ("owner_token" = []), ("agent_token" = [])),
    responses((status = 200, body = Vec<WebhookView>), (status = 401, body = ErrorBody), (status = 403, body = ErrorBody),
        (status = 404, body = ErrorBody), (status = 410, body = ErrorBody)))]
#[tracing::instrument(skip_all, fields(agent_id = %caller.agent.id))]
async fn list_agent_webhooks(
    State(state): State<AppState>,
    ActiveCaller(caller): ActiveCaller,
) -> Result<Json<Vec<WebhookView>>> {
    list(&state, owner(&caller)?).await
}

/// Read one of the agent's webhooks
///
/// Owner authority on a guarded agent; another agent's endpoint is 404 `webhook_not_found`.
#[utoipa::path(get, path = "/api/agents/{id}/webhooks/{wid}", tag = "webhooks",
    params(("id" = String, Path, format = "uuid"), ("wid" = String, Path, format = "uuid")),
    security(("admin_token" = []), ("owner_token" = []), ("agent_token" = [])),
    responses((status = 200, body = WebhookView), (status = 401, body = ErrorBody), (status = 403, body = ErrorBody),
        (status = 404, body = ErrorBody), (status = 410, body = ErrorBody)))]
#[tracing::instrument(skip_all, fields(agent_id = %caller.agent.id))]
async fn get_agent_webhook(
    State(state): State<AppState>,
    ActiveCaller(caller): ActiveCaller,
    Path((_, wid)): Path<(String, String)>,
) -> Result<Json<WebhookView>> {
    get(&state, owner(&caller)?, &wid).await
}

/// Change one of the agent's webhooks
///
/// `url`, `events`, `enabled` (enabling it again forgets its failures), `description`. Owner authority on a
/// guarded agent; audited.
#[utoipa::path(patch, path = "/api/agents/{id}/webhooks/{wid}", tag = "webhooks",
    params(("id" = String, Path, format = "uuid"), ("wid" = String, Path, format = "uuid")),
    request_body = UpdateWebhook, security(("admin_token" = []), ("owner_token" = []), ("agent_token" = [])),
    responses((status = 200, body = WebhookView), (status = 401, body = ErrorBody), (status = 403, body = ErrorBody),
        (status = 404, body = ErrorBody), (status = 410, body = ErrorBody), (status = 422, body = ErrorBody)))]
#[tracing::instrument(skip_all, fields(agent_id = %caller.agent.id))]
async fn update_agent_webhook(
    State(state): State<AppState>,
    ActiveCaller(caller): ActiveCaller,
    Path((_, wid)): Path<(String, String)>,
    ApiJson(body): ApiJson<UpdateWebhook>,
) -> Result<Json<WebhookView>> {
    update(&state, owner(&caller)?, &wid, body).await
}

/// Delete one of the agent's webhooks
///
/// Removes the endpoint, its pending deliveries and its log. Owner authority on a guarded agent; audited.
#[utoipa::path(delete, path = "/api/agents/{id}/webhooks/{wid}", tag = "webhooks",
    params(("id" = String, Path, format = "uuid"), ("wid" = String, Path, format = "uuid")),
    security(("admin_token" = []), ("owner_token" = []), ("agent_token" = [])),
    responses((status = 204), (status = 401, body = ErrorBody), (status = 403, body = ErrorBody),
        (status = 404, body = ErrorBody), (status = 410, body = ErrorBody)))]
#[tracing::instrument(skip_all, fields(agent_id = %caller.agent.id))]
async fn delete_agent_webhook(
    State(state): State<AppState>,
    ActiveCaller(caller): ActiveCaller,
    Path((_, wid)): Path<(String, String)>,
) -> Result<StatusCode> {
    delete(&state, owner(&caller)?, &wid).await
}

/// Rotate the secret of one of the agent's webhooks
///
/// A new secret, shown in this answer only; the old one stops signing at once. Audited.
#[utoipa::path(post, path = "/api/agents/{id}/webhooks/{wid}/rotate-secret", tag = "webhooks",
    params(("id" = String, Path, format = "uuid"), ("wid" = String, Path, format = "uuid")),
    security(("admin_token" = []), ("owner_token" = []), ("agent_token" = [])),
    responses((status = 200, body = WebhookSecretView), (status = 401, body = ErrorBody), (status = 403, body = ErrorBody),
        (status = 404, body = ErrorBody), (status = 410, body = ErrorBody)))]
#[tracing::instrument(skip_all, fields(agent_id = %caller.agent.id))]
async fn rotate_agent_webhook_secret(
    State(state): State<AppState>,
    ActiveCaller(caller): ActiveCaller,
    Path((_, wid)): Path<(String, String)>,
) -> Result<Json<WebhookSecretView>> {
    rotate(&state, owner(&caller)?, &wid).await
}

/// Send a test event to one of the agent's webhooks
///
/// A `webhook.test` event to this endpoint only, whatever its `events`.
#[utoipa::path(post, path = "/api/agents/{id}/webhooks/{wid}/test", tag = "webhooks",
    params(("id" = String, Path, format = "uuid"), ("wid" = String, Path, format = "uuid")),
    security(("admin_token" = []), ("owner_token" = []), ("agent_token" = [])),
    responses((status = 202, body = QueuedEventView), (status = 401, body = ErrorBody), (status = 403, body = ErrorBody),
        (status = 404, body = ErrorBody), (status = 410, body = ErrorBody)))]
#[tracing::instrument(skip_all, fields(agent_id = %caller.agent.id))]
async fn test_agent_webhook(
    State(state): State<AppState>,
    ActiveCaller(caller): ActiveCaller,
    Path((_, wid)): Path<(String, String)>,
) -> Result<(StatusCode, Json<QueuedEventView>)> {
    test(&state, owner(&caller)?, &wid).await
}

/// List the deliveries of one of the agent's webhooks
///
/// One entry per attempt, newest first, paged with `limit` (default 50) and `before` (a delivery id).
#[utoipa::path(get, path = "/api/agents/{id}/webhooks/{wid}/deliveries", tag = "webhooks",
    params(("id" = String, Path, format = "uuid"), ("wid" = String, Path, format = "uuid"), DeliveryParams),
    security(("admin_token" = []), ("owner_token" = []), ("agent_token" = [])),
    responses((status = 200, body = Vec<DeliveryView>), (status = 401, body = ErrorBody), (status = 403, body = ErrorBody),
        (status = 404, body = ErrorBody), (status = 410, body = ErrorBody), (status = 422, body = ErrorBody)))]
#[tracing::instrument(skip_all, fields(agent_id = %caller.agent.id))]
async fn list_agent_webhook_deliveries(
    State(state): State<AppState>,
    ActiveCaller(caller): ActiveCaller,
    Path((_, wid)): Path<(String, String)>,
    params: std::result::Result<Query<DeliveryParams>, axum::extract::rejection::QueryRejection>,
) -> Result<Json<Vec<DeliveryView>>> {
    deliveries(&state, owner(&caller)?, &wid, params).await
}

/// Deliver an event again to one of the agent's webhooks
///
/// Due at once, with the whole retry schedule ahead; 404 for an event this endpoint could not receive.
#[utoipa::path(post, path = "/api/agents/{id}/webhooks/{wid}/deliveries/{event_id}/redeliver", tag = "webhooks",
    params(("id" = String, Path, format = "uuid"), ("wid" = String, Path, format = "uuid"),
        ("event_id" = String, Path, format = "uuid")),
    security(("admin_token" = []), ("owner_token" = []), ("agent_token" = [])),
    responses((status = 202, body = QueuedEventView), (status = 401, body = ErrorBody), (status = 403, body = ErrorBody),
        (status = 404, body = ErrorBody), (status = 410, body = ErrorBody)))]
#[tracing::instrument(skip_all, fields(agent_id = %caller.agent.id))]
async fn redeliver_agent_webhook_event(
    State(state): State<AppState>,
    ActiveCaller(caller): ActiveCaller,
    Path((_, wid, event_id)): Path<(String, String, String)>,
) -> Result<(StatusCode, Json<QueuedEventView>)> {
    redeliver(&state, owner(&caller)?, &wid, &event_id).await
}
