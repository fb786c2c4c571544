//! `GET /api/conversations/{id}/stream`: transaction confirmations as server-sent events, resumable with
//! `Last-Event-ID`: stored events after it are replayed first, then live ones follow with no gap or duplicate.

use std::convert::Infallible;
use std::time::Duration;

use axum::extract::{Path, Query, State};
use axum::http::HeaderMap;
use axum::response::sse::{Event, Sse};
use axum::response::{IntoResponse, Response};
use serde::Deserialize;
use tokio::sync::{broadcast, mpsc};
use tokio_stream::wrappers::ReceiverStream;
use utoipa::IntoParams;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;
use uuid::Uuid;

use super::auth::TOKEN_HEADER;
use super::conversations::authorized_conversation;
use super::error::{AppError, Result};
use super::schemas;
use crate::state::AppState;
use crate::store::EventRecord;

/// Silence after which a `ping` is sent.
pub const PING_INTERVAL: Duration = Duration::from_secs(15);
const REPLAY_PAGE: i64 = 500;

pub fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new().routes(routes!(stream_conversation))
}

#[derive(Deserialize, IntoParams)]
struct StreamParams {
    /// For EventSource clients that cannot set headers.
    access_token: Option<String>,
    /// Same as the `Last-Event-ID` header: replay stored events after this id (0: from the start).
    last_event_id: Option<String>,
}

#[utoipa::path(get, path = "/api/conversations/{id}/stream", tag = "conversations",
    params(("id" = String, Path, format = "uuid"), StreamParams, ("Last-Event-ID" = Option<String>, Header)),
    security(("agent_token" = [])),
    responses((status = 200, content_type = "text/event-stream", body = String,
        description = "`event: tx_confirmation` with `id:` and data `{type, conversation_id, agent_id, chain, tx_hash, status, \
        block_number, gas_used, confirmations, explorer_url}`; `event: ping` on connect and after 15 s of silence"),
        (status = 401, body = schemas::ErrorBody), (status = 403, body = schemas::ErrorBody), (status = 404, body = schemas::ErrorBody), (status = 410, body = schemas::ErrorBody), (status = 422, body = schemas::ErrorBody)))]
async fn stream_conversation(
    State(state): State<AppState>,
    headers: HeaderMap,
    Path(id): Path<String>,
    Query(params): Query<StreamParams>,
) -> Result<Response> {
    let header = |name: &str| {
        headers
            .get(name)
            .and_then(|v| v.to_str().ok())
            .map(str::trim)
            .filter(|v| !v.is_empty())
    };
    let token = header(TOKEN_HEADER)
        .map(String::from)
        .or(params.access_token.filter(|t| !t.is_empty()));
    let conversation = authorized_conversation(&state, &id, token.as_deref()).await?;
    let last_event_id = match header("last-event-id").map(String::from).or(params.last_event_id) {
        Some(text) => Some(
            text.trim()
                .parse::<i64>()
                .ok()
                .filter(|n| *n >= 0)
                .ok_or_else(|| AppError::field("last_event_id", "must be a non-negative integer event id"))?,
        ),
        None => None,
    };
    // Subscribe before replaying, so nothing committed in between is missed.
    let live = state.events.subscribe();
    let (sender, receiver) = mpsc::channel(32);
    tokio::spawn(follow(state, conversation.id, last_event_id, live, sender));
    let stream = ReceiverStream::new(receiver);
    Ok(Sse::new(futures::StreamExt::map(stream, Ok::<_, Infallible>)).into_response())
}

fn event(record: &EventRecord) -> Event {
    Event::default()
        .event(record.kind.as_str())
        .id(record.id.to_string())
        .data(record.payload.to_string())
}

fn ping() -> Event {
    Event::default().event("ping").data("{}")
}

/// Feeds one subscriber until it goes away or the service stops.
async fn follow(
    state: AppState,
    conversation_id: Uuid,
    last_event_id: Option<i64>,
    mut live: broadcast::Receiver<std::sync::Arc<EventRecord>>,
    out: mpsc::Sender<Event>,
) {
    let mut stop = state.shutdown.clone();
    if out.send(ping()).await.is_err() {
        return;
    }
    let mut last_sent = last_event_id.unwrap_or(0);
    if last_event_id.is_some() && !replay(&state, conversation_id, &mut last_sent, &out).await {
        return;
    }
    loop {
        let next = tokio::select! {
            next = live.recv() => next,
            _ = tokio::time::sleep(PING_INTERVAL) => {
                if out.send(ping()).await.is_err() { return }
                continue;
            }
            _ = stop.changed() => return,
        };
        match next {
            Ok(record) if record.conversation_id == Some(conversation_id) && record.id > last_sent => {
                last_sent = record.id;
                if out.send(event(&record)).await.is_err() {
                    return;
                }
            }
            Ok(_) => {}
            // Fell behind the live buffer: the store has everything, catch up from there.
            Err(broadcast::error::RecvError::Lagged(_)) => {
                if !replay(&state, conversation_id, &mut last_sent, &out).await {
                    return;
                }
            }
            Err(broadcast::error::RecvError::Closed) => return,
        }
    }
}

/// Sends every stored event after `last_sent`; `false` when the subscriber is gone.
async fn replay(state: &AppState, conversation_id: Uuid, last_sent: &mut i64, out: &mpsc::Sender<Event>) -> bool {
    loop {
        let page = match state.store.events_after(conversation_id, *last_sent, REPLAY_PAGE).await {
            Ok(page) => page,
            Err(e) => {
                tracing::error!(error = %e, "cannot replay events");
                return false;
            }
        };
        for record in &page {
            *last_sent = record.id;
            if out.send(event(record)).await.is_err() {
                return false;
            }
        }
        if (page.len() as i64) < REPLAY_PAGE {
            return true;
        }
    }
}
