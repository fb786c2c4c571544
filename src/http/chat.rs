//! `POST /api/chat` and `POST /api/chat/stream`: one turn runner, answered whole or as server-sent events. The
//! whole answer honours `Idempotency-Key` (docs/api.md §12); the stream ignores it.

use std::convert::Infallible;
use std::time::Duration;

use axum::extract::State;
use axum::http::StatusCode;
use axum::response::sse::{Event, KeepAlive, Sse};
use axum::response::{IntoResponse, Response};
use utoipa::ToSchema;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use futures::StreamExt;
use serde::Deserialize;
use serde_json::Value;
use tokio::sync::mpsc;
use tokio_stream::wrappers::ReceiverStream;
use uuid::Uuid;

use super::auth::AgentToken;
use super::error::{AppError, Result};
use super::idempotency::{Answer, IdempotencyHeader, Idempotent, run_once};
use super::json::{ApiJson, shape};
use super::views::{ChatResponseView, ErrorBody};
use crate::auth::AgentAccess;
use crate::chat::ChatEvent;
use crate::chat::runner::{self, Turn};
use crate::domain::agent::{Agent, parse_address};
use crate::state::AppState;
use crate::store::Mandate;

pub fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new().routes(routes!(chat)).routes(routes!(chat_stream))
}

#[derive(Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
struct ChatRequest {
    agent_id: Uuid,
    /// 1 to 8000 characters, not only blanks.
    #[schema(min_length = 1, max_length = 8000)]
    message: String,
    /// Absent or null: a new conversation.
    conversation_id: Option<Uuid>,
    connected_wallet_address: Option<String>,
}

/// The agent the token speaks for, which must be the request's `agent_id`.
async fn authenticate(state: &AppState, token: &AgentToken, body: &ChatRequest) -> Result<Agent> {
    Ok(state
        .auth
        .agent(Some(body.agent_id), token.0.as_deref(), AgentAccess::Active)
        .await?)
}

/// Validates a chat request of an authenticated agent; every failure here is a plain HTTP error.
async fn prepare(state: &AppState, agent: Agent, token: &AgentToken, body: ChatRequest) -> Result<Turn> {
    let length = body.message.trim().chars().count();
    if length == 0 || body.message.chars().count() > 8000 {
        return Err(AppError::field("message", "must be 1 to 8000 characters"));
    }
    let connected = match body
        .connected_wallet_address
        .as_deref()
        .map(str::trim)
        .filter(|a| !a.is_empty())
    {
        Some(text) => Some(
            parse_address(text).ok_or_else(|| AppError::field("connected_wallet_address", "must be a 0x address"))?,
        ),
        None => None,
    };
    let mut turn = runner::prepare(
        &state.chat,
        agent,
        body.conversation_id,
        body.message,
        connected,
        Mandate::token(state.auth.token_to_check(token.0.as_deref())),
    )
    .await?;
    turn.guarded = state.auth.is_guarded(&turn.agent);
    Ok(turn)
}

/// Chat with the agent
///
/// One chat turn: the agent answers, calling tools within its capabilities (balances, gas, transfers, ...). The
/// answer lists every tool call with its result or refusal, and the conversation id (a new conversation when none
/// is given). A conversation of another agent is 403, an unknown one 404. With an `Idempotency-Key` a repeat
/// answers the first answer again.
#[utoipa::path(post, path = "/api/chat", tag = "chat", request_body = ChatRequest, security(("agent_token" = [])),
    params(("Idempotency-Key" = Option<String>, Header, description = "1 to 255 visible ASCII characters: a repeat with the same body within 24 h answers the first answer again")),
    responses((status = 200, body = ChatResponseView), (status = 400, body = ErrorBody), (status = 401, body = ErrorBody), (status = 403, body = ErrorBody), (status = 404, body = ErrorBody), (status = 409, body = ErrorBody), (status = 410, body = ErrorBody),
        (status = 422, body = ErrorBody), (status = 502, body = ErrorBody), (status = 503, body = ErrorBody),
        (status = 504, body = ErrorBody)))]
#[tracing::instrument(skip_all)]
async fn chat(
    State(state): State<AppState>,
    token: AgentToken,
    key: IdempotencyHeader,
    ApiJson(raw): ApiJson<Value>,
) -> Result<Response> {
    let body: ChatRequest = shape(raw.clone())?;
    let agent = authenticate(&state, &token, &body).await?;
    let request = Idempotent::new(key.key()?, agent.id, "POST", "/api/chat", &raw);
    // `run_once` runs the turn in a task of its own: a client hanging up does not cancel it half-way. A repeat of a
    // turn whose process died after it moved money, before its answer was stored, stays 409 until the key expires
    // (never a second turn: the model would be asked again and could pay again). Its answer is the whole turn (the
    // model's text, every call, `message_id`), written last, one statement before the key's answer, so such a turn
    // has none to recall; a reply made of its transfers alone would be an answer the first request never gave. Its
    // user message, and the transfers it made, are in the conversation and in the agent's transactions.
    run_once(state.store.clone(), state.clock.clone(), request, |claim| async move {
        let mut turn = prepare(&state, agent, &token, body).await?;
        turn.mandate.claim = claim;
        let (events, _) = mpsc::channel(1);
        let result = runner::run_turn(state.chat.clone(), turn, events).await?;
        Answer::new(StatusCode::OK, &ChatResponseView::from(result))
    })
    .await
}

/// Chat with the agent, streamed
///
/// The same turn as `POST /api/chat`, as server-sent events: `start`, `text_delta`, `tool_call`, `tool_result`,
/// `final` (the whole answer) or `error`, with `: keepalive` comments. Errors before `start` are plain HTTP errors.
/// Too many open streams for the agent: 429.
#[utoipa::path(post, path = "/api/chat/stream", tag = "chat", request_body = ChatRequest, security(("agent_token" = [])),
    responses((status = 200, content_type = "text/event-stream", body = String,
        description = "Server-sent events: `start {conversation_id}`, `text_delta {text}`, `tool_call {id, tool, args}`, \
        `tool_result {id, tool, result | error}`, `final {response, conversation_id, chain_calls, tokens_used, message_id}`, \
        `error {code, message}`; `: keepalive` comments while waiting"),
        (status = 400, body = ErrorBody), (status = 401, body = ErrorBody), (status = 403, body = ErrorBody), (status = 404, body = ErrorBody), (status = 410, body = ErrorBody), (status = 422, body = ErrorBody),
        (status = 429, description = "The agent already holds MAX_STREAMS_PER_AGENT open streams on this instance", body = ErrorBody)))]
#[tracing::instrument(skip_all)]
async fn chat_stream(
    State(state): State<AppState>,
    token: AgentToken,
    ApiJson(body): ApiJson<ChatRequest>,
) -> Result<Response> {
    let agent = authenticate(&state, &token, &body).await?;
    let lease = state.streams.open(agent.id, token.0.as_deref())?;
    let turn = prepare(&state, agent, &token, body).await?;
    let (events, receiver) = mpsc::channel(256);
    let open = state.metrics.chat_stream_opened();
    tokio::spawn(runner::run_turn(state.chat.clone(), turn, events));
    // The stream ends when the token is reissued or the agent deleted; the turn itself runs to its end and is stored.
    let revoked = lease.revoked();
    let stream = ReceiverStream::new(receiver)
        .map(move |event: ChatEvent| {
            let _held = (&open, &lease);
            let (name, data) = event.to_sse();
            Ok::<_, Infallible>(Event::default().event(name).data(data.to_string()))
        })
        .take_until(revoked);
    let keep_alive = KeepAlive::new().interval(Duration::from_secs(10)).text("keepalive");
    Ok(Sse::new(stream).keep_alive(keep_alive).into_response())
}
