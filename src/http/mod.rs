//! The HTTP surface: one router merging the resource routers, with request ids, tracing, timeouts,
//! body limits and CORS.

pub mod agents;
pub mod auth;
pub mod chains;
pub mod chat;
pub mod conversations;
pub mod error;
pub mod json;
pub mod metrics;
pub mod reissue;
pub mod streams;
pub mod transactions;
pub mod wallets;

use std::time::Duration;

use axum::Router;
use axum::extract::{DefaultBodyLimit, Request};
use axum::http::{HeaderName, StatusCode};
use tower_http::cors::{Any, CorsLayer};
use tower_http::request_id::{MakeRequestUuid, PropagateRequestIdLayer, RequestId, SetRequestIdLayer};
use tower_http::timeout::TimeoutLayer;
use tower_http::trace::{DefaultOnResponse, TraceLayer};

use crate::state::AppState;
use error::AppError;

const REQUEST_ID: HeaderName = HeaderName::from_static("x-request-id");

pub fn router(state: AppState) -> Router {
    let body_limit = state.config.max_body_bytes;
    Router::new()
        .merge(agents::router())
        .merge(reissue::router())
        .merge(chains::router())
        .merge(wallets::router())
        .merge(transactions::router())
        .merge(chat::router())
        .merge(conversations::router())
        .merge(streams::router())
        .merge(metrics::router())
        .route_layer(axum::middleware::from_fn_with_state(state.clone(), metrics::track))
        .fallback(|| async { AppError::NotFound })
        .method_not_allowed_fallback(|| async { AppError::MethodNotAllowed })
        .with_state(state)
        .layer(DefaultBodyLimit::max(body_limit))
        .layer(TimeoutLayer::with_status_code(
            StatusCode::GATEWAY_TIMEOUT,
            Duration::from_secs(180),
        ))
        .layer(
            CorsLayer::new()
                .allow_origin(Any)
                .allow_methods(Any)
                .allow_headers(Any)
                .expose_headers([REQUEST_ID]),
        )
        .layer(PropagateRequestIdLayer::new(REQUEST_ID))
        .layer(
            // Spans carry the path only: query strings may hold an access token.
            TraceLayer::new_for_http()
                .make_span_with(|req: &Request| {
                    let id = req
                        .extensions()
                        .get::<RequestId>()
                        .and_then(|id| id.header_value().to_str().ok())
                        .unwrap_or("-");
                    tracing::info_span!("request", method = %req.method(), path = %req.uri().path(), request_id = %id)
                })
                .on_response(DefaultOnResponse::new().level(tracing::Level::INFO)),
        )
        .layer(SetRequestIdLayer::new(REQUEST_ID, MakeRequestUuid))
}
