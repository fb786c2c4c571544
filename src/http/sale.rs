//! `GET`/`HEAD`/`POST /x402/{oid}` (docs/api.md §23): an offer sold to any x402 v2 client, no credential. The
//! seller (`crate::sell`) decides; this edge reads the request (the `PAYMENT-SIGNATURE` header, the query and body
//! the offer may forward) and renders the answer: a 402 with `PAYMENT-REQUIRED`, the resource with
//! `PAYMENT-RESPONSE`, a 502 `upstream_failed` with nothing of the upstream's body, a 404 `offer_not_found`.

use axum::body::Body;
use axum::extract::{Path, RawQuery, State};
use axum::http::{HeaderMap, HeaderValue, Method, StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde_json::{Value, json};
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;
use uuid::Uuid;

use super::client_addr::ClientAddr;
use super::error::AppError;
use super::views::ErrorBody;
use crate::domain::sale::Reason;
use crate::sell::{Sale, SaleRequest};
use crate::state::AppState;

pub fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new().routes(routes!(buy, buy_posted))
}

const PAYMENT_SIGNATURE: &str = "payment-signature";
const PAYMENT_REQUIRED: &str = "payment-required";
const PAYMENT_RESPONSE: &str = "payment-response";

/// Buys an offer (§23)
///
/// Without `PAYMENT-SIGNATURE`, a 402 whose `PAYMENT-REQUIRED` header holds the terms (x402 v2); with one, the
/// payment is checked, held and settled by agentd, and the resource served once it is settled (`on_success`: only
/// when the resource answered 2xx; `before_serving`: settled first). No credential.
#[utoipa::path(
    get,
    path = "/x402/{oid}",
    tag = "offers",
    params(("oid" = Uuid, Path, description = "The offer's id")),
    responses(
        (status = 200, content_type = "application/octet-stream", body = String,
         description = "The resource, paid, in the offer's own type (its `mime_type`, or a stored body's \
                        `content_type`); `PAYMENT-RESPONSE` holds the settlement"),
        (status = 402, description = "Payment required: `PAYMENT-REQUIRED` holds the terms (and `error` when a \
                                      payment was refused)", body = ErrorBody),
        (status = 404, description = "No such active offer (`offer_not_found`)", body = ErrorBody),
        (status = 429, description = "Too many payments from this client or payer (`rate_limited`)", body = ErrorBody),
        (status = 502, description = "The resource failed (`upstream_failed`, `details.status`)", body = ErrorBody),
    ),
    security(()),
)]
async fn buy(
    State(state): State<AppState>,
    ClientAddr(client): ClientAddr,
    method: Method,
    Path(oid): Path<String>,
    RawQuery(query): RawQuery,
    headers: HeaderMap,
) -> Response {
    sell(&state, client, method, &oid, query, &headers, None).await
}

/// Buys an offer by POST (§23)
///
/// Only an offer settled `before_serving` is sold by POST; the request's body (any text) reaches the resource when
/// the offer's `forward` says `body`. Otherwise as `GET /x402/{oid}`.
#[utoipa::path(
    post,
    path = "/x402/{oid}",
    tag = "offers",
    params(("oid" = Uuid, Path, description = "The offer's id")),
    responses(
        (status = 200, content_type = "application/octet-stream", body = String,
         description = "The resource, paid, in the offer's own type (its `mime_type`, or a stored body's \
                        `content_type`); `PAYMENT-RESPONSE` holds the settlement"),
        (status = 402, description = "Payment required: `PAYMENT-REQUIRED` holds the terms", body = ErrorBody),
        (status = 404, description = "No such active offer (`offer_not_found`)", body = ErrorBody),
        (status = 405, description = "The offer is not sold by POST (`method_not_allowed`)", body = ErrorBody),
        (status = 429, description = "Too many payments from this client or payer (`rate_limited`)", body = ErrorBody),
        (status = 502, description = "The resource failed (`upstream_failed`, `details.status`)", body = ErrorBody),
    ),
    security(()),
)]
async fn buy_posted(
    State(state): State<AppState>,
    ClientAddr(client): ClientAddr,
    Path(oid): Path<String>,
    RawQuery(query): RawQuery,
    headers: HeaderMap,
    body: String,
) -> Response {
    sell(&state, client, Method::POST, &oid, query, &headers, Some(body)).await
}

async fn sell(
    state: &AppState,
    client: std::net::IpAddr,
    method: Method,
    oid: &str,
    query: Option<String>,
    headers: &HeaderMap,
    body: Option<String>,
) -> Response {
    let Ok(offer_id) = Uuid::parse_str(oid) else {
        return AppError::OfferNotFound.into_response();
    };
    let payment = headers
        .get(PAYMENT_SIGNATURE)
        .and_then(|v| v.to_str().ok())
        .map(str::to_string);
    // Payments are counted per client (§15); asking for the terms costs a read and is not.
    if payment.is_some()
        && let Err(retry_after_secs) = state
            .reissue_limits
            .check_client(crate::rate_limit::ProofEndpoint::OfferPayment, client)
    {
        return AppError::RateLimited { retry_after_secs }.into_response();
    }
    let request = SaleRequest {
        offer_id,
        method: method.as_str().to_string(),
        payment,
        query,
        body,
        resource_url: state.offers.url(offer_id),
    };
    let sale = match state.seller.sell(request).await {
        Ok(sale) => sale,
        Err(e) => {
            tracing::error!(error = %e, "an offer could not be sold");
            return AppError::Upstream {
                status: StatusCode::BAD_GATEWAY,
                code: "node_error",
                message: "the chain or the store could not be read; try again".into(),
            }
            .into_response();
        }
    };
    render(sale)
}

fn encoded(document: &Value) -> HeaderValue {
    use base64::Engine;
    let text = base64::engine::general_purpose::STANDARD.encode(document.to_string());
    HeaderValue::from_str(&text).unwrap_or_else(|_| HeaderValue::from_static(""))
}

/// The body of a 402 (§23): the error shape of every refusal, its code the refusal's (`payment_required` when no
/// payment came); the terms themselves travel in `PAYMENT-REQUIRED`.
pub fn payment_required_error(reason: Option<Reason>) -> AppError {
    AppError::Upstream {
        status: StatusCode::PAYMENT_REQUIRED,
        code: reason.map_or("payment_required", Reason::code),
        message: match reason {
            None => "payment required: the terms are in the PAYMENT-REQUIRED header (x402 v2)".into(),
            Some(reason) => format!(
                "the payment was refused ({}); the terms are in the PAYMENT-REQUIRED header",
                reason.code()
            ),
        },
    }
}

/// The body of a 502 whose resource did not answer with a success (§23): nothing of the upstream's body.
pub fn upstream_failed_error() -> AppError {
    AppError::Upstream {
        status: StatusCode::BAD_GATEWAY,
        code: "upstream_failed",
        message: "the resource did not answer with a success; nothing was settled for it".into(),
    }
}

fn payment_required(document: Value, response: Option<&Value>) -> Response {
    let reason = document["error"].as_str().and_then(Reason::of_code);
    let mut answer = payment_required_error(reason).into_response();
    let h = answer.headers_mut();
    h.insert(PAYMENT_REQUIRED, encoded(&document));
    if let Some(response) = response {
        h.insert(PAYMENT_RESPONSE, encoded(response));
    }
    h.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    answer
}

fn render(sale: Sale) -> Response {
    match sale {
        Sale::NotFound => AppError::OfferNotFound.into_response(),
        Sale::RateLimited(retry_after_secs) => AppError::RateLimited { retry_after_secs }.into_response(),
        Sale::MethodNotAllowed => AppError::MethodNotAllowed.into_response(),
        Sale::Required(document) => payment_required(document, None),
        Sale::NotSettled { response, required } => payment_required(required, Some(&response)),
        Sale::UpstreamFailed { status, response } => {
            let AppError::Upstream { code, message, .. } = upstream_failed_error() else {
                unreachable!("upstream_failed_error is an Upstream")
            };
            let body = json!({"error": {"code": code, "message": message, "details": {"status": status}}});
            let mut answer = (StatusCode::BAD_GATEWAY, axum::Json(body)).into_response();
            if let Some(response) = response {
                // Settled before serving: the payment stands, and says so.
                answer.headers_mut().insert(PAYMENT_RESPONSE, encoded(&response));
            }
            answer
                .headers_mut()
                .insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
            answer
        }
        Sale::Served {
            status,
            headers,
            body,
            response,
        } => {
            let mut answer = Response::new(Body::from(body));
            *answer.status_mut() = StatusCode::from_u16(status).unwrap_or(StatusCode::OK);
            let h = answer.headers_mut();
            for (name, value) in headers {
                if let (Ok(name), Ok(value)) = (
                    header::HeaderName::from_bytes(name.as_bytes()),
                    HeaderValue::from_str(&value),
                ) {
                    h.insert(name, value);
                }
            }
            h.insert(PAYMENT_RESPONSE, encoded(&response));
            h.insert(header::CACHE_CONTROL, HeaderValue::from_static("private"));
            h.insert(header::X_CONTENT_TYPE_OPTIONS, HeaderValue::from_static("nosniff"));
            h.insert(header::CONTENT_SECURITY_POLICY, HeaderValue::from_static("sandbox"));
            answer
        }
    }
}
