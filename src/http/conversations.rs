//! Conversations: list per agent (newest first, paged with `limit` and `before`), messages (newest 500, oldest first), delete.

use axum::Json;
use axum::extract::rejection::QueryRejection;
use axum::extract::{Path, Query, State};
use axum::http::StatusCode;
use utoipa::IntoParams;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use serde::Deserialize;

use super::auth::{AgentToken, parse_id};
use super::error::{AppError, Result};
use super::views::{ConversationView, ErrorBody, MessageView};
use crate::auth::AgentAccess;
use crate::state::AppState;
use crate::store::Conversation;

/// Messages returned by the messages endpoint at most.
pub const MAX_MESSAGES: i64 = 500;

pub fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(list_conversations))
        .routes(routes!(delete_conversation))
        .routes(routes!(list_messages))
}

/// Loads a conversation the token may see: token present -> conversation exists -> token is its agent's -> active.
pub async fn authorized_conversation(state: &AppState, id: &str, token: Option<&str>) -> Result<Conversation> {
    state.auth.require_token(token)?;
    let id = parse_id(id).ok_or(AppError::ConversationNotFound)?;
    let conversation = state.store.get_conversation(id).await?;
    state
        .auth
        .agent(Some(conversation.agent_id), token, AgentAccess::Active)
        .await?;
    Ok(conversation)
}

/// Conversations per page by default, and at most.
const DEFAULT_PAGE: i64 = 100;
const MAX_PAGE: i64 = 500;

#[derive(Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
struct ListParams {
    /// The agent whose conversations to list (required; the token must be this agent's).
    #[param(required = true, value_type = String, format = "uuid")]
    agent_id: Option<String>,
    /// At least 1 (larger values are cut to 500); default 100.
    #[param(minimum = 1)]
    limit: Option<i64>,
    /// The id of the last conversation of the previous page: this page starts with the next older one.
    #[param(format = "uuid")]
    before: Option<String>,
}

/// List conversations
///
/// The conversations of the agent named by `agent_id` (required), newest first, paged with `limit` and `before`.
/// Needs that agent's token.
#[utoipa::path(get, path = "/api/conversations", tag = "conversations", params(ListParams), security(("agent_token" = [])),
    responses((status = 200, description = "Newest first, paged with `limit` and `before`", body = Vec<ConversationView>), (status = 401, body = ErrorBody), (status = 403, body = ErrorBody), (status = 404, body = ErrorBody), (status = 410, body = ErrorBody),
        (status = 422, body = ErrorBody)))]
#[tracing::instrument(skip_all)]
async fn list_conversations(
    State(state): State<AppState>,
    AgentToken(token): AgentToken,
    params: std::result::Result<Query<ListParams>, QueryRejection>,
) -> Result<Json<Vec<ConversationView>>> {
    let Query(params) = params.map_err(|_| AppError::field("limit", "limit must be an integer"))?;
    let agent_id = params
        .agent_id
        .filter(|a| !a.is_empty())
        .ok_or_else(|| AppError::field("agent_id", "is required"))?;
    let agent = state
        .auth
        .agent(parse_id(&agent_id), token.as_deref(), AgentAccess::Active)
        .await?;
    let limit = params.limit.unwrap_or(DEFAULT_PAGE);
    if limit < 1 {
        return Err(AppError::field("limit", "must be at least 1"));
    }
    // An empty `before` is no id (the document says uuid): refused like any other malformed cursor.
    let before = match params.before.as_deref().map(str::trim) {
        Some(text) => Some(parse_id(text).ok_or_else(|| AppError::field("before", "must be a conversation id"))?),
        None => None,
    };
    let conversations = state
        .store
        .list_conversations(agent.id, before, limit.min(MAX_PAGE))
        .await?
        .ok_or_else(|| AppError::field("before", "is not one of this agent's conversations"))?;
    Ok(Json(conversations.iter().map(ConversationView::from).collect()))
}

/// Read a conversation's messages
///
/// The messages of a conversation, oldest first, at most 500 (the newest 500 when there are more), with the tool
/// calls of each assistant turn.
#[utoipa::path(get, path = "/api/conversations/{id}/messages", tag = "conversations", params(("id" = String, Path, format = "uuid")),
    security(("agent_token" = [])),
    responses((status = 200, description = "Oldest first; the newest 500 at most", body = Vec<MessageView>), (status = 401, body = ErrorBody), (status = 403, body = ErrorBody), (status = 404, body = ErrorBody), (status = 410, body = ErrorBody)))]
#[tracing::instrument(skip_all)]
async fn list_messages(
    State(state): State<AppState>,
    AgentToken(token): AgentToken,
    Path(id): Path<String>,
) -> Result<Json<Vec<MessageView>>> {
    let conversation = authorized_conversation(&state, &id, token.as_deref()).await?;
    let messages = state.store.recent_messages(conversation.id, MAX_MESSAGES).await?;
    Ok(Json(messages.iter().map(MessageView::from).collect()))
}

/// Delete a conversation
///
/// Deletes a conversation and its messages; later reads answer 404.
#[utoipa::path(delete, path = "/api/conversations/{id}", tag = "conversations", params(("id" = String, Path, format = "uuid")),
    security(("agent_token" = [])),
    responses((status = 204, description = "Deleted with its messages"), (status = 401, body = ErrorBody), (status = 403, body = ErrorBody), (status = 404, body = ErrorBody), (status = 410, body = ErrorBody)))]
#[tracing::instrument(skip_all)]
async fn delete_conversation(
    State(state): State<AppState>,
    AgentToken(token): AgentToken,
    Path(id): Path<String>,
) -> Result<StatusCode> {
    let conversation = authorized_conversation(&state, &id, token.as_deref()).await?;
    if !state.store.delete_conversation(conversation.id).await? {
        return Err(AppError::ConversationNotFound);
    }
    Ok(StatusCode::NO_CONTENT)
}
