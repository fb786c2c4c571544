//! `POST /mcp`: the MCP server's Streamable HTTP transport in its simplest form. One JSON-RPC message (or batch) per
//! request, authenticated by `X-Agent-Access-Token`; requests get an `application/json` reply, notifications
//! `202 Accepted`. The server keeps no session and opens no SSE stream (`GET /mcp` answers 405, as the specification
//! allows). Refusals before dispatch carry their HTTP status and a JSON-RPC error body (docs/api.md §17), so an MCP
//! client can read them like any other error.

use axum::Router;
use axum::body::Bytes;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use serde_json::{Value, json};

use super::auth::TOKEN_HEADER;
use super::error::AppError;
use crate::auth::AuthError;
use crate::mcp::protocol::{self, INTERNAL_ERROR, INVALID_REQUEST, RpcError, UNAUTHORIZED};
use crate::mcp::{Dispatcher, Session};
use crate::state::AppState;

pub fn router() -> Router<AppState> {
    Router::new().route("/mcp", post(handle))
}

/// A refusal answered before any message is dispatched: the HTTP status with a JSON-RPC error (no id to answer).
fn refusal(status: StatusCode, error: RpcError) -> Response {
    (status, axum::Json(protocol::response(Value::Null, Err(error)))).into_response()
}

/// The status the rest of the API gives this refusal; the body is the JSON-RPC error the dispatcher gives an expired
/// session (-32001 with `data.code`), or an internal error whose cause stays in the log.
fn auth_refusal(err: AuthError) -> Response {
    let code = err.code();
    let (rpc_code, message) = match &err {
        AuthError::Store(cause) => {
            tracing::error!(error = %cause, "MCP authentication failed on the store");
            (INTERNAL_ERROR, "internal error".to_string())
        }
        other => (UNAUTHORIZED, other.to_string()),
    };
    let status = AppError::from(err).status();
    let mut error = RpcError::new(rpc_code, message);
    error.data = Some(json!({ "code": code }));
    refusal(status, error)
}

async fn handle(State(state): State<AppState>, headers: HeaderMap, body: Bytes) -> Response {
    let token = headers
        .get(TOKEN_HEADER)
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default();
    let session = match Session::authenticate(&state, token).await {
        Ok((session, _)) => session,
        Err(err) => return auth_refusal(err),
    };
    let content_type = headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default();
    let essence = content_type.split(';').next().unwrap_or_default().trim();
    if !essence.eq_ignore_ascii_case("application/json") {
        let mut error = RpcError::new(INVALID_REQUEST, "expected Content-Type: application/json");
        error.data = Some(json!({ "code": "invalid_content_type" }));
        return refusal(StatusCode::BAD_REQUEST, error);
    }
    let dispatcher = Dispatcher::new(state, session, "http");
    match dispatcher.handle_text(&body).await {
        None => StatusCode::ACCEPTED.into_response(),
        // A message that could not be read at all (no id to answer) is a 400 with the JSON-RPC error as body.
        Some(reply) if reply.get("error").is_some() && reply["id"].is_null() => {
            (StatusCode::BAD_REQUEST, axum::Json(reply)).into_response()
        }
        Some(reply) => axum::Json(reply).into_response(),
    }
}
