//! The HTTP surface: one router merging the resource routers, with request ids, tracing, timeouts,
//! body limits and CORS.

pub mod agents;
pub mod approvals;
pub mod audit;
pub mod auth;
pub mod body_limit;
pub mod calls;
pub mod cancel;
pub mod chains;
pub mod chat;
pub mod client_addr;
pub mod console;
pub mod conversations;
pub mod cors;
pub mod delegations;
pub mod error;
pub mod facilitator;
pub mod idempotency;
pub mod income;
pub mod json;
pub mod mcp;
pub mod metrics;
pub mod offers;
pub mod openapi;
pub mod owners;
pub mod policy;
pub mod reissue;
pub mod sale;
pub mod sponsorship;
pub mod streams;
pub mod sweep;
pub mod transactions;
pub mod transfers;
pub mod typed_data;
pub mod views;
pub mod wallets;
pub mod webhooks;
pub mod x402;

use axum::Router;
use axum::extract::{DefaultBodyLimit, Request};
use axum::http::{HeaderName, StatusCode};
use tower_http::request_id::{MakeRequestUuid, PropagateRequestIdLayer, RequestId, SetRequestIdLayer};
use tower_http::timeout::TimeoutLayer;
use tower_http::trace::{DefaultOnResponse, TraceLayer};

use utoipa::openapi::security::{ApiKey, ApiKeyValue, HttpAuthScheme, HttpBuilder, SecurityScheme};
use utoipa::{Modify, OpenApi};
use utoipa_axum::router::OpenApiRouter;
use utoipa_swagger_ui::SwaggerUi;

use crate::config::HTTP_REQUEST_TIMEOUT;
use crate::state::AppState;
use error::AppError;

const REQUEST_ID: HeaderName = HeaderName::from_static("x-request-id");

/// The OpenAPI document's frame: title, security schemes, tags. Paths come from the handlers' annotations.
#[derive(OpenApi)]
#[openapi(
    info(title = "agentd", description = "Crypto wallets for AI agents, and chat with them."),
    modifiers(&SecuritySchemes),
    tags(
        (name = "agents", description = "Create, read, update, soft-delete agents; export a wallet key"),
        (name = "reissue", description = "Reissue a lost access token with a proof"),
        (name = "owners", description = "Owner authority: Sign-In with Ethereum sessions, reactivation"),
        (name = "wallets", description = "Balances, funding instructions, transfers"),
        (name = "chat", description = "Chat turns, whole or streamed"),
        (name = "conversations", description = "Stored conversations and the confirmation stream"),
        (name = "chains", description = "The chain registry"),
        (name = "webhooks", description = "Signed pushes of events to HTTP endpoints (Standard Webhooks)"),
        (name = "facilitator", description = "The agent's own x402 facilitator: its tokens, verify, settle, supported"),
        (name = "offers", description = "What agents sell over x402 (offers) and what they earned (income)"),
        (name = "operations", description = "Health and metrics"),
    )
)]
struct ApiDoc;

struct SecuritySchemes;

impl Modify for SecuritySchemes {
    fn modify(&self, openapi: &mut utoipa::openapi::OpenApi) {
        let components = openapi.components.get_or_insert_with(Default::default);
        components.add_security_scheme(
            "agent_token",
            SecurityScheme::ApiKey(ApiKey::Header(ApiKeyValue::with_description(
                "X-Agent-Access-Token",
                "The agent's access token (`agt_...`), returned once at creation or reissue",
            ))),
        );
        components.add_security_scheme(
            "admin_token",
            SecurityScheme::Http(
                HttpBuilder::new()
                    .scheme(HttpAuthScheme::Bearer)
                    .description(Some("ADMIN_TOKEN, when the server sets one"))
                    .build(),
            ),
        );
        components.add_security_scheme(
            "metrics_token",
            SecurityScheme::Http(
                HttpBuilder::new()
                    .scheme(HttpAuthScheme::Bearer)
                    .description(Some("METRICS_TOKEN, when the server sets one"))
                    .build(),
            ),
        );
        components.add_security_scheme(
            "facilitator_token",
            SecurityScheme::Http(
                HttpBuilder::new()
                    .scheme(HttpAuthScheme::Bearer)
                    .description(Some(
                        "A facilitator token of the agent (`fac_...`) from POST /api/agents/{id}/facilitator-tokens: \
                         its x402 verify, settle and supported only",
                    ))
                    .build(),
            ),
        );
        components.add_security_scheme(
            "owner_token",
            SecurityScheme::ApiKey(ApiKey::Header(ApiKeyValue::with_description(
                "X-Owner-Token",
                "An owner session (`own_...`) from POST /api/agents/{id}/owner-session",
            ))),
        );
    }
}

/// Every documented route, with the document built from their annotations (one source, no drift).
pub fn api() -> OpenApiRouter<AppState> {
    OpenApiRouter::with_openapi(ApiDoc::openapi())
        .merge(agents::router())
        .merge(reissue::router())
        .merge(owners::router())
        .merge(audit::router())
        .merge(chains::router())
        .merge(wallets::router())
        .merge(transactions::router())
        .merge(transfers::router())
        .merge(sweep::router())
        .merge(calls::router())
        .merge(typed_data::router())
        .merge(x402::router())
        .merge(cancel::router())
        .merge(chat::router())
        .merge(conversations::router())
        .merge(streams::router())
        .merge(metrics::router())
        .merge(policy::router())
        .merge(approvals::router())
        .merge(webhooks::router())
        .merge(delegations::router())
        .merge(sponsorship::router())
        .merge(facilitator::router())
        .merge(offers::router())
        .merge(income::router())
        .merge(sale::router())
}

/// The OpenAPI document served at `/api/openapi.json`.
pub fn openapi() -> utoipa::openapi::OpenApi {
    openapi::finish(api().into_openapi())
}

pub fn router(state: AppState) -> Router {
    let body_limits = body_limit::BodyLimits::new(state.config.server.max_body_bytes);
    let origins = cors::AllowedOrigins::new(state.config.server.cors_origins.clone());
    let (api_router, document) = api().split_for_parts();
    // Every route's request counters exist before the first request, so counting takes no lock. Routes outside the
    // document (docs, console, MCP) are listed here; one forgotten is still counted, behind a read lock.
    let undocumented = [
        "/api/openapi.json",
        "/",
        "/assets/console.js",
        "/assets/console.css",
        "/mcp",
    ];
    state.metrics.register_routes(
        document
            .paths
            .paths
            .keys()
            .cloned()
            .chain(undocumented.iter().map(|r| r.to_string())),
    );
    let routes = api_router
        .merge(SwaggerUi::new("/docs").url("/api/openapi.json", openapi::finish(document)))
        .merge(console::router())
        .merge(mcp::router(&state))
        .route_layer(axum::middleware::from_fn_with_state(state.clone(), metrics::track))
        .fallback(|| async { AppError::NotFound })
        .method_not_allowed_fallback(|| async { AppError::MethodNotAllowed })
        .with_state(state)
        // Extractors may read up to the largest limit; the layer below sets each route's own, before any read.
        .layer(DefaultBodyLimit::max(body_limits.large))
        .layer(axum::middleware::from_fn_with_state(body_limits, body_limit::limit))
        .layer(TimeoutLayer::with_status_code(
            StatusCode::GATEWAY_TIMEOUT,
            HTTP_REQUEST_TIMEOUT,
        ));
    // Without CORS_ORIGINS the middleware would pass every request through unchanged: it is left out.
    let routes = if origins.is_empty() {
        routes
    } else {
        routes.layer(axum::middleware::from_fn_with_state(origins, cors::cors))
    };
    routes
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
