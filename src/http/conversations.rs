//! Conversations: list per agent, messages (newest 500, oldest first), delete.

use axum::Json;
use axum::extract::{Path, Query, State};
use axum::http::StatusCode;
use utoipa::IntoParams;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use serde::Deserialize;
use serde_json::{Value, json};

use super::auth::{AgentToken, parse_id};
use super::error::{AppError, Result};
use super::schemas;
use crate::auth::AgentAccess;
use crate::state::AppState;
use crate::store::{Conversation, Message};

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

#[derive(Deserialize, IntoParams)]
struct ListParams {
    /// Required.
    agent_id: Option<String>,
}

#[utoipa::path(get, path = "/api/conversations", tag = "conversations", params(ListParams), security(("agent_token" = [])),
    responses((status = 200, description = "Newest first", body = Vec<schemas::ConversationSummary>), (status = 401, body = schemas::ErrorBody), (status = 403, body = schemas::ErrorBody), (status = 404, body = schemas::ErrorBody), (status = 410, body = schemas::ErrorBody),
        (status = 422, body = schemas::ErrorBody)))]
async fn list_conversations(
    State(state): State<AppState>,
    AgentToken(token): AgentToken,
    Query(params): Query<ListParams>,
) -> Result<Json<Value>> {
    let agent_id = params
        .agent_id
        .filter(|a| !a.is_empty())
        .ok_or_else(|| AppError::field("agent_id", "is required"))?;
    let agent = state
        .auth
        .agent(parse_id(&agent_id), token.as_deref(), AgentAccess::Active)
        .await?;
    let conversations = state.store.list_conversations(agent.id).await?;
    Ok(Json(Value::Array(
        conversations.iter().map(conversation_json).collect(),
    )))
}

#[utoipa::path(get, path = "/api/conversations/{id}/messages", tag = "conversations", params(("id" = String, Path, format = "uuid")),
    security(("agent_token" = [])),
    responses((status = 200, description = "Oldest first; the newest 500 at most", body = Vec<schemas::MessageBody>), (status = 401, body = schemas::ErrorBody), (status = 403, body = schemas::ErrorBody), (status = 404, body = schemas::ErrorBody), (status = 410, body = schemas::ErrorBody)))]
async fn list_messages(
    State(state): State<AppState>,
    AgentToken(token): AgentToken,
    Path(id): Path<String>,
) -> Result<Json<Value>> {
    let conversation = authorized_conversation(&state, &id, token.as_deref()).await?;
    let messages = state.store.recent_messages(conversation.id, MAX_MESSAGES).await?;
    Ok(Json(Value::Array(messages.iter().map(message_json).collect())))
}

#[utoipa::path(delete, path = "/api/conversations/{id}", tag = "conversations", params(("id" = String, Path, format = "uuid")),
    security(("agent_token" = [])),
    responses((status = 204, description = "Deleted with its messages"), (status = 401, body = schemas::ErrorBody), (status = 403, body = schemas::ErrorBody), (status = 404, body = schemas::ErrorBody), (status = 410, body = schemas::ErrorBody)))]
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

fn conversation_json(c: &Conversation) -> Value {
    json!({
        "id": c.id,
        "agent_id": c.agent_id,
        "title": c.title,
        "created_at": c.created_at,
        "updated_at": c.updated_at,
        "message_count": c.message_count,
    })
}

fn message_json(m: &Message) -> Value {
    json!({
        "id": m.id,
        "role": m.role,
        "content": m.content,
        "chain_calls": m.chain_calls,
        "created_at": m.created_at,
    })
}
