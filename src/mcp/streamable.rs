//! The Streamable HTTP transport behind `POST /mcp`, on rmcp's server: two services over the same handler.
//! - Sessions: an `initialize` from a client that accepts `text/event-stream` opens a session (`Mcp-Session-Id`),
//!   answered in server-sent events; its later requests, `GET /mcp` (the server's stream) and `DELETE /mcp` go to
//!   it. Sessions live in this instance's memory: behind several instances, route `/mcp` by the
//!   `Mcp-Session-Id` header (sticky) or turn sessions off (`MCP_HTTP_SESSIONS=false`).
//! - Stateless: everything else (a request without a session id, an `initialize` from a client that takes JSON
//!   only, every request when sessions are off) is answered on its own with `application/json`, so any instance
//!   answers it. Such a client cannot be asked anything (no elicitation): it gets the tool result.
//!
//! Authentication, the JSON-RPC bodies of refusals and the checks rmcp does not make live at the HTTP edge
//! (`http::mcp`).

use std::sync::Arc;

use axum::body::Body;
use axum::http::{HeaderValue, Request, Response, header};
use rmcp::transport::streamable_http_server::session::local::{LocalSessionManager, SessionConfig};
use rmcp::transport::streamable_http_server::session::never::NeverSessionManager;
use rmcp::transport::{StreamableHttpServerConfig, StreamableHttpService};
use tokio_util::sync::CancellationToken;
use uuid::Uuid;

use super::server::{AgentServer, McpCaller};
use super::sessions::SessionOwners;
use crate::state::AppState;

pub const SESSION_HEADER: &str = "mcp-session-id";

/// Where a request goes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Route {
    /// To the open session it names (checked to be the caller's agent's).
    Session(String),
    /// An `initialize` that opens a session.
    OpenSession,
    /// Answered on its own.
    Stateless,
}

pub struct StreamableMcp {
    sessions: StreamableHttpService<AgentServer, LocalSessionManager>,
    stateless: StreamableHttpService<AgentServer, NeverSessionManager>,
    owners: SessionOwners,
    sessions_enabled: bool,
}

impl StreamableMcp {
    /// Both services for `state`; their streams end when the service shuts down.
    pub fn new(state: &AppState) -> Self {
        let config = &state.config.mcp;
        let cancel = CancellationToken::new();
        let mut shutdown = state.shutdown.clone();
        let on_shutdown = cancel.clone();
        tokio::spawn(async move {
            let _ = shutdown.wait_for(|stopping| *stopping).await;
            on_shutdown.cancel();
        });
        let mut session_config = SessionConfig::default();
        session_config.keep_alive = Some(config.session_idle);
        let mut manager = LocalSessionManager::default();
        manager.session_config = session_config;
        let manager = Arc::new(manager);
        // Requests are authenticated by token headers, never by cookies, so a rebound DNS name carries no
        // credential: the Host check meant for local servers would only refuse the service's own public names.
        let http_config = StreamableHttpServerConfig::default()
            .disable_allowed_hosts()
            .with_cancellation_token(cancel)
            .with_sse_keep_alive(Some(std::time::Duration::from_secs(15)));
        let factory_state = state.clone();
        let sessions = StreamableHttpService::new(
            move || Ok(AgentServer::http(factory_state.clone())),
            manager.clone(),
            http_config.clone(),
        );
        let factory_state = state.clone();
        let stateless = StreamableHttpService::new(
            move || Ok(AgentServer::http(factory_state.clone())),
            Arc::new(NeverSessionManager::default()),
            http_config.with_legacy_session_mode(false).with_json_response(true),
        );
        StreamableMcp {
            sessions,
            stateless,
            owners: SessionOwners::new(manager, config.max_sessions_per_agent),
            sessions_enabled: config.http_sessions,
        }
    }

    /// The route of a request without a session id.
    pub fn route_new(&self, is_initialize: bool, accepts_sse: bool) -> Route {
        if self.sessions_enabled && is_initialize && accepts_sse {
            Route::OpenSession
        } else {
            Route::Stateless
        }
    }

    /// Whether `id` is an open session of this agent.
    pub async fn holds(&self, agent_id: Uuid, id: &str) -> bool {
        self.owners.holds(agent_id, id).await
    }

    /// Hands the request to rmcp with the caller in its extensions.
    pub async fn serve(&self, route: Route, mut request: Request<Body>, caller: McpCaller) -> Response<Body> {
        let agent_id = caller.session.agent_id();
        request.extensions_mut().insert(caller);
        let response = match &route {
            Route::Stateless => {
                // This path answers with JSON alone; rmcp asks every POST to accept both.
                request.headers_mut().insert(
                    header::ACCEPT,
                    HeaderValue::from_static("application/json, text/event-stream"),
                );
                self.stateless.handle(request).await
            }
            Route::Session(id) => {
                let closing = request.method() == axum::http::Method::DELETE;
                let response = self.sessions.handle(request).await;
                if closing && response.status().is_success() {
                    self.owners.closed(id);
                }
                response
            }
            Route::OpenSession => self.sessions.handle(request).await,
        };
        if route == Route::OpenSession
            && let Some(id) = response.headers().get(SESSION_HEADER).and_then(|v| v.to_str().ok())
        {
            self.owners.opened(agent_id, id).await;
        }
        response.map(Body::new)
    }
}
