//! `GET /metrics` (Prometheus text format; behind `METRICS_TOKEN` when it is set) and the middleware that counts requests by matched route.

use std::time::Instant;

use axum::extract::{MatchedPath, Request, State};
use axum::http::{HeaderMap, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use secrecy::ExposeSecret;
use subtle::ConstantTimeEq;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use super::error::AppError;
use super::views::ErrorBody;
use crate::chain::Node;
use crate::metrics::ScrapeExtras;
use crate::state::AppState;

pub fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new().routes(routes!(scrape))
}

/// Records method, matched route template (never the concrete path: ids stay out of labels), status and latency.
/// The route's counters are found before the request runs; counting takes no lock and allocates nothing.
pub async fn track(State(state): State<AppState>, request: Request, next: Next) -> Response {
    let matched = request.extensions().get::<MatchedPath>().cloned();
    let method = request.method().clone();
    let route = state
        .metrics
        .route(matched.as_ref().map_or("unmatched", MatchedPath::as_str));
    let started = Instant::now();
    let response = next.run(request).await;
    route.record(&method, response.status().as_u16(), started.elapsed());
    response
}

/// With `METRICS_TOKEN` set, a scrape must carry it as a bearer token (compared in constant time); unset, `/metrics`
/// is open.
fn authorize(state: &AppState, headers: &HeaderMap) -> Result<(), AppError> {
    let Some(expected) = &state.config.server.metrics_token else {
        return Ok(());
    };
    let presented = headers
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Bearer "))
        .map(str::trim)
        .unwrap_or_default();
    if bool::from(presented.as_bytes().ct_eq(expected.expose_secret().as_bytes())) {
        Ok(())
    } else {
        Err(AppError::MetricsTokenRequired)
    }
}

/// Prometheus metrics
///
/// Prometheus text format. Needs `Authorization: Bearer <METRICS_TOKEN>` when the server sets one.
#[utoipa::path(get, path = "/metrics", tag = "operations", security((), ("metrics_token" = [])),
    responses((status = 200, content_type = "text/plain", body = String, description = "Prometheus text format"),
        (status = 401, description = "METRICS_TOKEN is set and the request does not carry it as a bearer token", body = ErrorBody)))]
async fn scrape(State(state): State<AppState>, headers: HeaderMap) -> Response {
    if let Err(refused) = authorize(&state, &headers) {
        return refused.into_response();
    }
    let extras = ScrapeExtras {
        rpc: state
            .chains
            .iter()
            .map(|c| (c.name(), c.rpc_counts().0, c.rpc_counts().1))
            .collect(),
        transactions: state.store.count_transactions_by_status().await.unwrap_or_default(),
        confirmation_subscribers: state.events.subscribers(),
        sponsors: sponsor_figures(&state).await,
    };
    (
        [(header::CONTENT_TYPE, "text/plain; version=0.0.4; charset=utf-8")],
        state.metrics.render(&extras),
    )
        .into_response()
}

/// Each sponsorable chain's paymaster deposit and sponsor balance, read now (a chain whose parts do not answer is
/// left out of this scrape).
async fn sponsor_figures(state: &AppState) -> Vec<(&'static str, String, String)> {
    let mut figures = Vec::new();
    for sponsor in state.sponsors.all() {
        let Ok(client) = state.chains.get(sponsor.chain.name) else {
            continue;
        };
        if let Ok(status) = crate::sponsor::status::read(client, sponsor).await {
            figures.push((
                sponsor.chain.name,
                status.deposit.to_string(),
                status.sponsor_balance.to_string(),
            ));
        }
    }
    figures
}
