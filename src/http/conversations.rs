//! Conversations: list per agent, messages (newest 500, oldest first), delete.

use axum::Json;
use axum::extract::{Path, Query, State};
use axum::http::StatusCode;
use axum::http::request::Parts;
use utoipa::IntoParams;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use serde::Deserialize;

use super::auth::{authorize, ensure_active, header_token, parse_id};
use super::error::{AppError, Result};
use super::views::{ConversationView, ErrorBody, MessageView};
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

/// The token header as given (presence is checked by `authorize`).
pub struct MaybeToken(pub Option<String>);

impl axum::extract::FromRequestParts<AppState> for MaybeToken {
    type Rejection = AppError;

    async fn from_request_parts(parts: &mut Parts, _: &AppState) -> Result<Self> {
        Ok(MaybeToken(header_token(parts)))
    }
}

/// Loads a conversation the token may see: token present -> conversation exists -> token is its agent's -> active.
pub async fn authorized_conversation(state: &AppState, id: &str, token: Option<&str>) -> Result<Conversation> {
    if token.is_none() && !state.config.disable_agent_auth {
        return Err(AppError::MissingToken);
    }
    let id = parse_id(id).ok_or(AppError::ConversationNotFound)?;
    let conversation = state.store.get_conversation(id).await?;
    ensure_active(authorize(state, Some(conversation.agent_id), token).await?)?;
    Ok(conversation)
}

#[derive(Deserialize, IntoParams)]
struct ListParams {
    /// Required.
    agent_id: Option<String>,
}

#[utoipa::path(get, path = "/api/conversations", tag = "conversations", params(ListParams), security(("agent_token" = [])),
    responses((status = 200, description = "Newest first", body = Vec<ConversationView>), (status = 401, body = ErrorBody), (status = 403, body = ErrorBody), (status = 404, body = ErrorBody), (status = 410, body = ErrorBody),
        (status = 422, body = ErrorBody)))]
async fn list_conversations(
    State(state): State<AppState>,
    MaybeToken(token): MaybeToken,
    Query(params): Query<ListParams>,
) -> Result<Json<Vec<ConversationView>>> {
    if token.is_none() && !state.config.disable_agent_auth {
        return Err(AppError::MissingToken);
    }
    let agent_id = params
        .agent_id
        .filter(|a| !a.is_empty())
        .ok_or_else(|| AppError::field("agent_id", "is required"))?;
    let agent = ensure_active(authorize(&state, parse_id(&agent_id), token.as_deref()).await?)?;
    let conversations = state.store.list_conversations(agent.id).await?;
    Ok(Json(conversations.iter().map(ConversationView::from).collect()))
}

#[utoipa::path(get, path = "/api/conversations/{id}/messages", tag = "conversations", params(("id" = String, Path, format = "uuid")),
    security(("agent_token" = [])),
    responses((status = 200, description = "Oldest first; the newest 500 at most", body = Vec<MessageView>), (status = 401, body = ErrorBody), (status = 403, body = ErrorBody), (status = 404, body = ErrorBody), (status = 410, body = ErrorBody)))]
async fn list_messages(
    State(state): State<AppState>,
    MaybeToken(token): MaybeToken,
    Path(id): Path<String>,
) -> Result<Json<Vec<MessageView>>> {
    let conversation = authorized_conversation(&state, &id, token.as_deref()).await?;
    let messages = state.store.recent_messages(conversation.id, MAX_MESSAGES).await?;
    Ok(Json(messages.iter().map(MessageView::from).collect()))
}

#[utoipa::path(delete, path = "/api/conversations/{id}", tag = "conversations", params(("id" = String, Path, format = "uuid")),
    security(("agent_token" = [])),
    responses((status = 204, description = "Deleted with its messages"), (status = 401, body = ErrorBody), (status = 403, body = ErrorBody), (status = 404, body = ErrorBody), (status = 410, body = ErrorBody)))]
async fn delete_conversation(
    State(state): State<AppState>,
    MaybeToken(token): MaybeToken,
    Path(id): Path<String>,
) -> Result<StatusCode> {
    let conversation = authorized_conversation(&state, &id, token.as_deref()).await?;
    if !state.store.delete_conversation(conversation.id).await? {
        return Err(AppError::ConversationNotFound);
    }
    Ok(StatusCode::NO_CONTENT)
}
