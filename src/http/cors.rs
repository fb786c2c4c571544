//! Cross-origin requests (docs/api.md §15): same-origin by default; the origins in `CORS_ORIGINS` may call the API
//! from their pages. A request or preflight from any other origin gets no `Access-Control-*` header at all, so a
//! browser keeps the answer from the page that asked.
//!
//! Written here rather than with tower-http's `CorsLayer`, which adds `Access-Control-Allow-Methods` and
//! `-Expose-Headers` to answers for origins it does not allow.

use std::sync::Arc;

use axum::body::Body;
use axum::extract::{Request, State};
use axum::http::header::{self, HeaderValue};
use axum::http::{Method, StatusCode};
use axum::middleware::Next;
use axum::response::Response;

/// Methods a listed origin may use.
const ALLOW_METHODS: &str = "GET, POST, PUT, DELETE";
/// Headers a listed origin's scripts may read besides the CORS-safelisted ones.
const EXPOSE_HEADERS: &str = "x-request-id, retry-after";
/// How long a browser may cache a preflight answer, in seconds.
const MAX_AGE: &str = "600";

/// The origins allowed to call the API from a browser (already in the form browsers send).
#[derive(Clone, Default)]
pub struct AllowedOrigins(Arc<Vec<String>>);

impl AllowedOrigins {
    pub fn new(origins: Vec<String>) -> Self {
        AllowedOrigins(Arc::new(origins))
    }

    /// No origin is listed: every answer stays same-origin and the middleware has nothing to do.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// The request's `Origin` when it is listed.
    fn listed(&self, request: &Request) -> Option<HeaderValue> {
        let origin = request.headers().get(header::ORIGIN)?;
        let text = origin.to_str().ok()?.to_ascii_lowercase();
        self.0.contains(&text).then(|| origin.clone())
    }
}

/// Answers preflights of listed origins and marks their other answers as readable by them; leaves every other
/// request as it is (a preflight from elsewhere reaches the router and gets its usual 405, without CORS headers).
pub async fn cors(State(origins): State<AllowedOrigins>, request: Request, next: Next) -> Response {
    if origins.0.is_empty() {
        return next.run(request).await;
    }
    let Some(origin) = origins.listed(&request) else {
        let mut response = next.run(request).await;
        // The answer depends on the Origin header: caches must not hand a listed origin's answer to another.
        response
            .headers_mut()
            .append(header::VARY, HeaderValue::from_static("origin"));
        return response;
    };
    let preflight =
        request.method() == Method::OPTIONS && request.headers().contains_key(header::ACCESS_CONTROL_REQUEST_METHOD);
    if preflight {
        let mut response = Response::new(Body::empty());
        *response.status_mut() = StatusCode::NO_CONTENT;
        let headers = response.headers_mut();
        headers.insert(header::ACCESS_CONTROL_ALLOW_ORIGIN, origin);
        headers.insert(
            header::ACCESS_CONTROL_ALLOW_METHODS,
            HeaderValue::from_static(ALLOW_METHODS),
        );
        // A listed origin is trusted by the operator: whatever request headers it asks for are allowed (the token
        // headers, Idempotency-Key, an MCP client's own headers).
        if let Some(asked) = request.headers().get(header::ACCESS_CONTROL_REQUEST_HEADERS) {
            headers.insert(header::ACCESS_CONTROL_ALLOW_HEADERS, asked.clone());
        }
        headers.insert(header::ACCESS_CONTROL_MAX_AGE, HeaderValue::from_static(MAX_AGE));
        headers.insert(
            header::VARY,
            HeaderValue::from_static("origin, access-control-request-method, access-control-request-headers"),
        );
        return response;
    }
    let mut response = next.run(request).await;
    let headers = response.headers_mut();
    headers.insert(header::ACCESS_CONTROL_ALLOW_ORIGIN, origin);
    headers.insert(
        header::ACCESS_CONTROL_EXPOSE_HEADERS,
        HeaderValue::from_static(EXPOSE_HEADERS),
    );
    headers.append(header::VARY, HeaderValue::from_static("origin"));
    response
}
