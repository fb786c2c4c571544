//! `/mcp`: the MCP server's Streamable HTTP transport (`crate::mcp::streamable`, on rmcp). This edge authenticates
//! every request (`X-Agent-Access-Token`, and owner authority when presented beside it), binds session ids to the
//! agent that opened them, and gives every refusal a JSON-RPC error body with the HTTP status: 401 / 410 with
//! -32001 and `data.code` as in docs/api.md §2, 404 for a session this instance does not hold, 400 for a message
//! that cannot be read (batches included: MCP 2025-06-18 removed them and rmcp has none).

use std::sync::Arc;

use axum::body::{Body, Bytes};
use axum::extract::{Request, State};
use axum::http::{HeaderMap, Method, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::any;
use axum::{Extension, Router};
use rmcp::model::ClientJsonRpcMessage;
use serde_json::{Value, json};

use super::auth::{OWNER_TOKEN_HEADER, TOKEN_HEADER};
use super::body_limit;
use super::error::AppError;
use crate::auth::{AgentAccess, AuthError, Credentials};
use crate::mcp::streamable::{Route, SESSION_HEADER, StreamableMcp};
use crate::mcp::{McpCaller, UNAUTHORIZED};
use crate::state::AppState;

const PARSE_ERROR: i64 = -32700;
const INVALID_REQUEST: i64 = -32600;
const INVALID_PARAMS: i64 = -32602;
const INTERNAL_ERROR: i64 = -32603;

pub fn router(state: &AppState) -> Router<AppState> {
    let mcp = Arc::new(StreamableMcp::new(state));
    Router::new().route("/mcp", any(handle)).layer(Extension(mcp))
}

/// A JSON-RPC error answered with an HTTP status (no request id to answer).
fn rpc_refusal(status: StatusCode, code: i64, message: &str, data_code: &str) -> Response {
    let body = json!({"jsonrpc": "2.0", "id": null,
        "error": {"code": code, "message": message, "data": {"code": data_code}}});
    (status, axum::Json(body)).into_response()
}

/// The status the rest of the API gives this refusal, with -32001 and the API's code (a store failure is an
/// internal error whose cause stays in the log).
fn auth_refusal(err: AuthError) -> Response {
    let code = err.code();
    let (rpc_code, message) = match &err {
        AuthError::Store(cause) => {
            tracing::error!(error = %cause, "MCP authentication failed on the store");
            (INTERNAL_ERROR, "internal error".to_string())
        }
        other => (i64::from(UNAUTHORIZED), other.to_string()),
    };
    rpc_refusal(AppError::from(err).status(), rpc_code, &message, code)
}

fn header<'a>(headers: &'a HeaderMap, name: &str) -> Option<&'a str> {
    headers
        .get(name)
        .and_then(|v| v.to_str().ok())
        .map(str::trim)
        .filter(|v| !v.is_empty())
}

/// The agent token's session, and owner authority when a credential for it is presented too (a presented
/// credential must be valid).
async fn authenticate(state: &AppState, headers: &HeaderMap) -> Result<McpCaller, AuthError> {
    let (session, agent) = state
        .auth
        .open_session(header(headers, TOKEN_HEADER).unwrap_or_default())
        .await?;
    let bearer = header(headers, header::AUTHORIZATION.as_str()).and_then(|v| v.strip_prefix("Bearer "));
    let owner_token = header(headers, OWNER_TOKEN_HEADER);
    let mut owner = None;
    if bearer.is_some() || owner_token.is_some() {
        let credentials = Credentials {
            agent_token: None,
            bearer,
            owner_token,
        };
        owner = state
            .auth
            .caller(Some(agent.id), credentials, AgentAccess::Active)
            .await?
            .owner;
    }
    Ok(McpCaller { session, owner })
}

async fn handle(
    State(state): State<AppState>,
    Extension(mcp): Extension<Arc<StreamableMcp>>,
    request: Request,
) -> Response {
    if !origin_allowed(&state, request.headers()) {
        let message = "this Origin may not call /mcp: list it in CORS_ORIGINS";
        return rpc_refusal(StatusCode::FORBIDDEN, INVALID_REQUEST, message, "forbidden");
    }
    let caller = match authenticate(&state, request.headers()).await {
        Ok(caller) => caller,
        Err(err) => return auth_refusal(err),
    };
    let session = header(request.headers(), SESSION_HEADER).map(str::to_string);
    if let Some(id) = &session
        && !mcp.holds(caller.session.agent_id(), id).await
    {
        return rpc_refusal(
            StatusCode::NOT_FOUND,
            INVALID_REQUEST,
            "Session not found",
            "session_not_found",
        );
    }
    let route = match (request.method().clone(), session) {
        (Method::POST, session) => {
            let (parts, body) = request.into_parts();
            // The body is capped by the global limit layer (`super::body_limit`), which no raw read can bypass.
            let bytes = match axum::body::to_bytes(body, usize::MAX).await {
                Ok(bytes) => bytes,
                Err(e) if body_limit::is_too_large(&e) => return body_limit::too_large(parts.uri.path()),
                Err(_) => {
                    let message = "the request body could not be read";
                    return rpc_refusal(StatusCode::BAD_REQUEST, INVALID_REQUEST, message, "invalid_body");
                }
            };
            let is_initialize = match read_message(&bytes) {
                Ok(is_initialize) => is_initialize,
                Err(response) => return response,
            };
            let route = match session {
                Some(id) => Route::Session(id),
                None => mcp.route_new(is_initialize, accepts_event_stream(&parts.headers)),
            };
            let request = Request::from_parts(parts, Body::from(bytes));
            return with_rpc_error_body(mcp.serve(route, request, caller).await).await;
        }
        (Method::GET | Method::DELETE, Some(id)) => Route::Session(id),
        _ => {
            let message = "POST a JSON-RPC message; GET and DELETE need an Mcp-Session-Id";
            return rpc_refusal(
                StatusCode::METHOD_NOT_ALLOWED,
                INVALID_REQUEST,
                message,
                "method_not_allowed",
            );
        }
    };
    with_rpc_error_body(mcp.serve(route, request, caller).await).await
}

/// The browser rule of docs/api.md §15 for `/mcp` (which MCP asks servers to apply against DNS rebinding): a request
/// without `Origin` (not from a page) passes; one from a page passes when its origin is listed in `CORS_ORIGINS`,
/// is `PUBLIC_URL`'s, or is the origin the request was addressed to (the console, same-origin).
fn origin_allowed(state: &AppState, headers: &HeaderMap) -> bool {
    let Some(origin) = headers.get(header::ORIGIN) else {
        return true;
    };
    let Ok(origin) = origin.to_str().map(|o| o.trim().to_ascii_lowercase()) else {
        return false;
    };
    if state.config.server.cors_origins.contains(&origin) {
        return true;
    }
    if let Some(public) = &state.config.security.public_url {
        return public.origin.eq_ignore_ascii_case(&origin);
    }
    let host = header(headers, header::HOST.as_str()).map(str::to_ascii_lowercase);
    host.is_some_and(|host| origin == format!("http://{host}") || origin == format!("https://{host}"))
}

/// Checks that the body is one JSON-RPC message rmcp can read: whether it is an `initialize`, or the refusal.
/// A request whose params cannot be read (`tools/call` with `arguments: 5`) is answered -32602 with its id.
#[allow(clippy::result_large_err)]
fn read_message(bytes: &Bytes) -> Result<bool, Response> {
    let value: Value = serde_json::from_slice(bytes).map_err(|_| {
        rpc_refusal(
            StatusCode::BAD_REQUEST,
            PARSE_ERROR,
            "Parse error: the body is not JSON",
            "parse_error",
        )
    })?;
    if value.is_array() {
        let message = "batches are not supported (MCP 2025-06-18 removed them): send one message per request";
        return Err(rpc_refusal(
            StatusCode::BAD_REQUEST,
            INVALID_REQUEST,
            message,
            "batch_not_supported",
        ));
    }
    match serde_json::from_value::<ClientJsonRpcMessage>(value.clone()) {
        Ok(_) => Ok(value.get("method").and_then(Value::as_str) == Some("initialize")),
        Err(e) => {
            let id = value.get("id").filter(|id| id.is_string() || id.is_number());
            let is_request = value.get("jsonrpc").and_then(Value::as_str) == Some("2.0")
                && value.get("method").is_some_and(Value::is_string);
            match id {
                Some(id) if is_request => {
                    let body = json!({"jsonrpc": "2.0", "id": id,
                        "error": {"code": INVALID_PARAMS, "message": format!("Invalid params: {e}")}});
                    Err(axum::Json(body).into_response())
                }
                _ => Err(rpc_refusal(
                    StatusCode::BAD_REQUEST,
                    INVALID_REQUEST,
                    "Invalid Request: expected a JSON-RPC 2.0 message",
                    "invalid_request",
                )),
            }
        }
    }
}

fn accepts_event_stream(headers: &HeaderMap) -> bool {
    headers
        .get_all(header::ACCEPT)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(','))
        .any(|media| {
            media
                .split(';')
                .next()
                .is_some_and(|m| m.trim().eq_ignore_ascii_case("text/event-stream"))
        })
}

/// rmcp answers its own refusals (406, 415, 400 …) in plain text: they get a JSON-RPC body here, with the same
/// status. Its internal errors keep their cause out of the body.
async fn with_rpc_error_body(response: Response) -> Response {
    let status = response.status();
    let is_json = response
        .headers()
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.starts_with("application/json"));
    if !(status.is_client_error() || status.is_server_error()) || is_json {
        return response;
    }
    if status.is_server_error() {
        tracing::error!(%status, "the MCP transport failed");
        return rpc_refusal(status, INTERNAL_ERROR, "internal error", "internal_error");
    }
    let text = axum::body::to_bytes(response.into_body(), 4096)
        .await
        .unwrap_or_default();
    let message = String::from_utf8_lossy(&text);
    let code = match status {
        StatusCode::NOT_ACCEPTABLE => "not_acceptable",
        StatusCode::UNSUPPORTED_MEDIA_TYPE => "unsupported_media_type",
        StatusCode::NOT_FOUND => "session_not_found",
        StatusCode::METHOD_NOT_ALLOWED => "method_not_allowed",
        _ => "invalid_request",
    };
    rpc_refusal(status, INVALID_REQUEST, message.trim(), code)
}
