//! `GET /api/conversations/{id}/stream`: transaction confirmations as server-sent events, resumable with
//! `Last-Event-ID`: stored events after it are replayed first, then live ones follow with no gap or duplicate.

use std::collections::VecDeque;
use std::convert::Infallible;
use std::sync::Arc;
use std::time::Duration;

use axum::extract::{Path, Query, State};
use axum::http::HeaderMap;
use axum::response::sse::{Event, Sse};
use axum::response::{IntoResponse, Response};
use serde::Deserialize;
use tokio::sync::broadcast;
use utoipa::IntoParams;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;
use uuid::Uuid;

use super::auth::TOKEN_HEADER;
use super::conversations::authorized_conversation;
use super::error::{AppError, Result};
use super::views::ErrorBody;
use crate::auth::streams::StreamLease;
use crate::state::AppState;
use crate::store::{EventRecord, Store};

/// Silence after which a `ping` is sent.
pub const PING_INTERVAL: Duration = Duration::from_secs(15);
const REPLAY_PAGE: i64 = 500;

pub fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new().routes(routes!(stream_conversation))
}

#[derive(Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
struct StreamParams {
    /// For EventSource clients that cannot set headers.
    access_token: Option<String>,
    /// Same as the `Last-Event-ID` header: replay stored events after this id (0: from the start).
    last_event_id: Option<String>,
}

/// Stream transfer confirmations
///
/// Server-sent events for a conversation: `tx_confirmation` (confirmed, reverted, dropped or cancelled),
/// `approval_required`, `approval_resolved`, and `ping` on connect and every 15 s. Event ids increase; with
/// `Last-Event-ID` (or `last_event_id`) a reconnecting client first gets what it missed. The token may come as
/// `?access_token=`. Too many open streams for the agent: 429.
#[utoipa::path(get, path = "/api/conversations/{id}/stream", tag = "conversations",
    params(("id" = String, Path, format = "uuid"), StreamParams, ("Last-Event-ID" = Option<String>, Header)),
    security(("agent_token" = [])),
    responses((status = 200, content_type = "text/event-stream", body = String,
        description = "`event: tx_confirmation` with `id:` and data `{type, conversation_id, agent_id, chain, tx_hash, status, \
        block_number, gas_used, confirmations, explorer_url}`; `event: approval_required` `{type, transfer_id, conversation_id, \
        agent_id, chain, asset, to, amount, expires_at}` and `event: approval_resolved` `{type, transfer_id, decision}`; \
        `event: ping` on connect and after 15 s of silence"),
        (status = 401, body = ErrorBody), (status = 403, body = ErrorBody), (status = 404, body = ErrorBody), (status = 410, body = ErrorBody), (status = 422, body = ErrorBody),
        (status = 429, description = "The agent already holds MAX_STREAMS_PER_AGENT open streams on this instance", body = ErrorBody)))]
#[tracing::instrument(skip_all)]
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
    let lease = state.streams.open(conversation.agent_id, token.as_deref())?;
    // Subscribe before replaying, so nothing committed in between is missed.
    let follower = Follower {
        lease,
        live: state.events.subscribe(),
        stop: state.shutdown.clone(),
        conversation_id: conversation.id,
        last_sent: last_event_id.unwrap_or(0),
        replay: last_event_id.is_some(),
        greeted: false,
        backlog: VecDeque::new(),
        last_write: tokio::time::Instant::now(),
        store: state.store.clone(),
    };
    // A stream polled by the connection itself: no task or channel per subscriber, which keeps many cheap.
    let stream = futures::stream::unfold(follower, |mut f| async move {
        f.next().await.map(|e| (Ok::<_, Infallible>(e), f))
    });
    Ok(Sse::new(stream).into_response())
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

/// One subscriber's position: what it was sent last, and stored events still to send.
struct Follower {
    store: Arc<dyn Store>,
    conversation_id: Uuid,
    live: broadcast::Receiver<Arc<EventRecord>>,
    stop: tokio::sync::watch::Receiver<bool>,
    /// Holds one of the agent's stream slots while the stream is open; ends the stream when the token it was opened
    /// with is reissued or the agent deleted.
    lease: StreamLease,
    last_sent: i64,
    /// Stored events after `last_sent` must be read before following live ones.
    replay: bool,
    greeted: bool,
    backlog: VecDeque<Event>,
    /// When the last thing was sent; a ping follows after `PING_INTERVAL` of silence.
    last_write: tokio::time::Instant,
}

impl Follower {
    /// The next event for this subscriber; `None` ends the stream (service stopping, or the store failing).
    async fn next(&mut self) -> Option<Event> {
        let event = self.next_unstamped().await;
        self.last_write = tokio::time::Instant::now();
        event
    }

    async fn next_unstamped(&mut self) -> Option<Event> {
        if !self.greeted {
            self.greeted = true;
            return Some(ping());
        }
        loop {
            if let Some(event) = self.backlog.pop_front() {
                return Some(event);
            }
            if self.replay {
                self.read_stored().await?;
                continue;
            }
            let next = tokio::select! {
                next = self.live.recv() => next,
                _ = tokio::time::sleep_until(self.last_write + PING_INTERVAL) => return Some(ping()),
                _ = self.stop.wait_for(|stopped| *stopped) => return None,
                _ = self.lease.ended() => return None,
            };
            match next {
                Ok(record) if record.conversation_id == Some(self.conversation_id) && record.id > self.last_sent => {
                    self.last_sent = record.id;
                    return Some(event(&record));
                }
                Ok(_) => {}
                // Fell behind the live buffer: the store has everything, catch up from there.
                Err(broadcast::error::RecvError::Lagged(_)) => self.replay = true,
                Err(broadcast::error::RecvError::Closed) => return None,
            }
        }
    }

    /// Moves one page of stored events after `last_sent` into the backlog.
    async fn read_stored(&mut self) -> Option<()> {
        let page = match self
            .store
            .events_after(self.conversation_id, self.last_sent, REPLAY_PAGE)
            .await
        {
            Ok(page) => page,
            Err(e) => {
                tracing::error!(error = %e, "cannot replay events");
                return None;
            }
        };
        self.replay = page.len() as i64 == REPLAY_PAGE;
        if let Some(last) = page.last() {
            self.last_sent = last.id;
        }
        self.backlog.extend(page.iter().map(event));
        Some(())
    }
}
