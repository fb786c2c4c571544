//! `POST /mcp`: the MCP server's Streamable HTTP transport in its simplest form. One JSON-RPC message (or batch) per request,
//! authenticated by `X-Agent-Access-Token`; requests get an `application/json` reply, notifications `202 Accepted`.
//! The server keeps no session and opens no SSE stream (`GET /mcp` answers 405, as the specification allows).

use axum::Router;
use axum::body::Bytes;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::post;

use super::auth::TOKEN_HEADER;
use super::error::AppError;
use crate::mcp::{Dispatcher, Session};
use crate::state::AppState;

pub fn router() -> Router<AppState> {
    Router::new().route("/mcp", post(handle))
}

async fn handle(State(state): State<AppState>, headers: HeaderMap, body: Bytes) -> Result<Response, AppError> {
    let token = headers
        .get(TOKEN_HEADER)
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default();
    let (session, _) = Session::authenticate(&state, token).await?;
    let content_type = headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default();
    let essence = content_type.split(';').next().unwrap_or_default().trim();
    if !essence.eq_ignore_ascii_case("application/json") {
        return Err(AppError::BadRequest {
            code: "invalid_content_type",
            message: "expected Content-Type: application/json".into(),
        });
    }
    let dispatcher = Dispatcher::new(state, session, "http");
    Ok(match dispatcher.handle_text(&body).await {
        None => StatusCode::ACCEPTED.into_response(),
        // A message that could not be read at all (no id to answer) is a 400 with the JSON-RPC error as body.
        Some(reply) if reply.get("error").is_some() && reply["id"].is_null() => {
            (StatusCode::BAD_REQUEST, axum::Json(reply)).into_response()
        }
        Some(reply) => axum::Json(reply).into_response(),
    })
}
