//! The request body limit, applied to every route before anything reads the body or authenticates the caller
//! (docs/api.md §15): a declared `Content-Length` over the limit is refused at once, and every body is wrapped so
//! that reading past the limit fails instead of buffering. `DefaultBodyLimit` alone is not enough: it limits axum's
//! extractors only, and a handler that reads the raw body (`POST /mcp`) would buffer whatever a client sends.
//!
//! A response to a request whose body was not read to its end (refused before it was read: a 401 on a `PUT`)
//! says `Connection: close`. hyper drains such a body only when its bytes already arrived, and otherwise closes the
//! connection after the response without saying so; a client that keeps the connection for its next request (as
//! every HTTP client does) then loses that request on a connection the server has closed.

use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::task::{Context, Poll};

use axum::body::{Body, Bytes, HttpBody};
use axum::extract::{Request, State};
use axum::http::{Method, StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use http_body_util::Limited;
use hyper::body::{Frame, SizeHint};

use super::error::AppError;

/// Routes that may carry ABIs (the MCP endpoint, an agent's policy) get at least this much.
pub const LARGE_BODY_BYTES: usize = 1 << 20;

/// The limits in force: `MAX_BODY_BYTES` for every route, and the larger one for `POST /mcp` and
/// `PUT /api/agents/{id}/policy`.
#[derive(Clone, Copy, Debug)]
pub struct BodyLimits {
    pub default: usize,
    pub large: usize,
}

impl BodyLimits {
    pub fn new(max_body_bytes: usize) -> Self {
        BodyLimits {
            default: max_body_bytes,
            large: max_body_bytes.max(LARGE_BODY_BYTES),
        }
    }

    /// The limit for a request to `method` `path`.
    pub fn for_request(&self, method: &Method, path: &str) -> usize {
        if (method == Method::POST && is_mcp(path)) || (method == Method::PUT && is_policy(path)) {
            self.large
        } else {
            self.default
        }
    }
}

fn is_mcp(path: &str) -> bool {
    path == "/mcp" || path == "/mcp/"
}

/// `/api/agents/{id}/policy`, whatever the id's spelling (the handler checks it).
fn is_policy(path: &str) -> bool {
    let mut segments = path.trim_end_matches('/').split('/');
    matches!(
        (segments.next(), segments.next(), segments.next(), segments.next(), segments.next(), segments.next()),
        (Some(""), Some("api"), Some("agents"), Some(id), Some("policy"), None) if !id.is_empty()
    )
}

/// The refusal: the contract's error body, or a JSON-RPC error on the MCP endpoint (whose clients read those).
pub fn too_large(path: &str) -> Response {
    if is_mcp(path) {
        let body = serde_json::json!({"jsonrpc": "2.0", "id": null, "error": {"code": -32600,
            "message": "the request body is too large", "data": {"code": "payload_too_large"}}});
        return (StatusCode::PAYLOAD_TOO_LARGE, axum::Json(body)).into_response();
    }
    AppError::PayloadTooLarge.into_response()
}

/// Refuses a declared length over the limit before reading a byte, and caps whatever is read of any other body.
pub async fn limit(State(limits): State<BodyLimits>, request: Request, next: Next) -> Response {
    let limit = limits.for_request(request.method(), request.uri().path());
    let declared = request
        .headers()
        .get(header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.trim().parse::<u64>().ok());
    if declared.is_some_and(|len| len > limit as u64) {
        return too_large(request.uri().path());
    }
    let read = Arc::new(AtomicBool::new(request.body().is_end_stream()));
    let request = request.map(|body| {
        Body::new(Tracked {
            inner: Body::new(Limited::new(body, limit)),
            read: read.clone(),
        })
    });
    let mut response = next.run(request).await;
    if !read.load(Ordering::Acquire) {
        response
            .headers_mut()
            .insert(header::CONNECTION, header::HeaderValue::from_static("close"));
    }
    response
}

/// A request body that notes when it has been read to its end.
struct Tracked {
    inner: Body,
    read: Arc<AtomicBool>,
}

impl HttpBody for Tracked {
    type Data = Bytes;
    type Error = axum::Error;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Self::Data>, Self::Error>>> {
        let polled = Pin::new(&mut self.inner).poll_frame(cx);
        if matches!(polled, Poll::Ready(None)) || self.inner.is_end_stream() {
            self.read.store(true, Ordering::Release);
        }
        polled
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.inner.size_hint()
    }
}

/// Whether a body read failed because it went past the limit (as opposed to a broken connection).
pub fn is_too_large(err: &axum::Error) -> bool {
    let mut source: Option<&(dyn std::error::Error + 'static)> = Some(err);
    while let Some(e) = source {
        if e.is::<http_body_util::LengthLimitError>() {
            return true;
        }
        source = e.source();
    }
    false
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_large_limit_applies_to_mcp_posts_and_policy_puts_only() {
        let limits = BodyLimits::new(64 * 1024);
        let id = "/api/agents/7f9c4b1e-0000-4000-8000-000000000000/policy";
        assert_eq!(limits.for_request(&Method::POST, "/mcp"), 1 << 20);
        assert_eq!(limits.for_request(&Method::PUT, id), 1 << 20);
        assert_eq!(limits.for_request(&Method::GET, id), 64 * 1024);
        assert_eq!(
            limits.for_request(&Method::PUT, "/api/agents/x/policy/extra"),
            64 * 1024
        );
        assert_eq!(limits.for_request(&Method::PUT, "/api/agents//policy"), 64 * 1024);
        assert_eq!(limits.for_request(&Method::POST, "/api/agents"), 64 * 1024);
        assert_eq!(limits.for_request(&Method::GET, "/mcp"), 64 * 1024);
    }

    #[test]
    fn a_configured_limit_above_one_mib_applies_everywhere() {
        let limits = BodyLimits::new(4 << 20);
        assert_eq!(limits.for_request(&Method::POST, "/mcp"), 4 << 20);
        assert_eq!(limits.for_request(&Method::POST, "/api/chat"), 4 << 20);
    }
}
