//! What an agent sells (§23): `POST`/`GET …/offers`, `GET`/`DELETE …/offers/{oid}`. Owner authority, or the agent
//! token of an unguarded agent, as for its policy; creating one needs `transact`. The checks, the sealing of the
//! upstream's headers and the audit live in `offers::Offers`; here are the routes, who may call them and the views.

use axum::Json;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use super::auth::{ActiveCaller, parse_id};
use super::error::{AppError, Result};
use super::json::ApiJson;
use super::views::ErrorBody;
use crate::auth::Caller;
use crate::offers::view::{OfferView, OffersView};
use crate::offers::{NewOffer, OfferError, Offers};
use crate::state::AppState;
use crate::store::offers::Offer;

pub fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(create_offer, list_offers))
        .routes(routes!(get_offer, close_offer))
}

/// §23's codes: a field 422 `validation_failed`, the URL rules 422 `url_not_allowed`, a token without EIP-3009 422
/// `asset_not_payable`, the policy's hosts 403 `policy_denied` (`host_not_allowed`), no such offer 404.
impl From<OfferError> for AppError {
    fn from(err: OfferError) -> Self {
        let message = err.to_string();
        match err {
            OfferError::Field { field, reason } => AppError::field(field, reason),
            OfferError::CapabilityDenied => AppError::Denied {
                code: "capability_denied",
                message,
            },
            OfferError::UrlNotAllowed(_) => AppError::Unprocessable {
                code: "url_not_allowed",
                message,
            },
            OfferError::HostNotAllowed(_) => AppError::PolicyDenied {
                rule: crate::domain::policy::PolicyRule::HostNotAllowed.as_str(),
                message,
                available: None,
                reason: None,
                left: None,
                index: None,
            },
            OfferError::AssetNotPayable(_) => AppError::Unprocessable {
                code: "asset_not_payable",
                message,
            },
            OfferError::NotFound => AppError::OfferNotFound,
            // A held offer is decided at the approval endpoints, which answer as for a transfer.
            OfferError::NotHeld => AppError::TransferNotFound,
            OfferError::NotAwaiting(status) => AppError::from(crate::transfers::TransferError::NotAwaiting(status)),
            OfferError::Chain(e) => AppError::Upstream {
                status: StatusCode::from_u16(e.http_status()).unwrap_or(StatusCode::BAD_GATEWAY),
                code: e.code(),
                message,
            },
            OfferError::Store(e) => AppError::from(e),
        }
    }
}

/// The caller, once it proved owner authority where the agent is guarded.
fn authorized(caller: Caller) -> Result<Caller> {
    caller.require_owner_if_guarded()?;
    Ok(caller)
}

/// The view of `offer`: bought at its URL, paid to the agent's wallet on its chain.
fn view(offers: &Offers, caller: &Caller, offer: &Offer) -> OfferView {
    let pay_to = caller.agent.wallet_addresses.get(&offer.chain).copied();
    OfferView::new(offer, offers.url(offer.id), pay_to)
}

/// Create an offer
///
/// Sells a resource (an upstream URL the agent fronts, or a stored body) for a price in an EIP-3009 token, paid to
/// the agent's wallet by any x402 v2 client at the answer's `url` and settled by agentd. Owner authority (the agent
/// token on an unguarded agent) and the `transact` capability. Refusals: 422 `validation_failed` (price above 0
/// with at most the token's decimals, `settle` `on_success` only for `GET`/`HEAD`, `gas_per_day` above 0,
/// `max_timeout_seconds` 60 to 3600, …), `url_not_allowed` (§16's rules), `asset_not_payable` (the token's contract
/// has no `authorizationState` or reports no EIP-712 domain); 403 `policy_denied` (`host_not_allowed`),
/// `capability_denied`, `owner_required`. The upstream's `headers` are kept encrypted and never shown.
#[utoipa::path(post, path = "/api/agents/{id}/offers", tag = "offers",
    params(("id" = String, Path, format = "uuid")), request_body = NewOffer,
    security(("agent_token" = []), ("admin_token" = []), ("owner_token" = [])),
    responses((status = 201, body = OfferView, description = "Created, `active`"),
        (status = 400, body = ErrorBody), (status = 401, body = ErrorBody), (status = 403, body = ErrorBody),
        (status = 404, body = ErrorBody), (status = 410, body = ErrorBody), (status = 413, body = ErrorBody),
        (status = 422, body = ErrorBody), (status = 502, body = ErrorBody), (status = 503, body = ErrorBody),
        (status = 504, body = ErrorBody)))]
#[tracing::instrument(skip_all, fields(agent_id = %caller.agent.id))]
async fn create_offer(
    State(offers): State<Offers>,
    ActiveCaller(caller): ActiveCaller,
    ApiJson(body): ApiJson<NewOffer>,
) -> Result<(StatusCode, Json<OfferView>)> {
    let caller = authorized(caller)?;
    let offer = offers.create(&caller.agent, body, caller.actor()).await?;
    Ok((StatusCode::CREATED, Json(view(&offers, &caller, &offer))))
}

/// List offers
///
/// The agent's offers, newest first, closed ones included. Owner authority (the agent token on an unguarded agent).
#[utoipa::path(get, path = "/api/agents/{id}/offers", tag = "offers",
    params(("id" = String, Path, format = "uuid")),
    security(("agent_token" = []), ("admin_token" = []), ("owner_token" = [])),
    responses((status = 200, body = OffersView, description = "The agent's offers"),
        (status = 401, body = ErrorBody), (status = 403, body = ErrorBody), (status = 404, body = ErrorBody),
        (status = 410, body = ErrorBody)))]
#[tracing::instrument(skip_all, fields(agent_id = %caller.agent.id))]
async fn list_offers(State(offers): State<Offers>, ActiveCaller(caller): ActiveCaller) -> Result<Json<OffersView>> {
    let caller = authorized(caller)?;
    let all = offers.list(caller.agent.id).await?;
    Ok(Json(OffersView {
        offers: all.iter().map(|offer| view(&offers, &caller, offer)).collect(),
    }))
}

/// Read an offer
///
/// One of the agent's offers; an unknown or another agent's id is 404 `offer_not_found`.
#[utoipa::path(get, path = "/api/agents/{id}/offers/{oid}", tag = "offers",
    params(("id" = String, Path, format = "uuid"), ("oid" = String, Path, format = "uuid")),
    security(("agent_token" = []), ("admin_token" = []), ("owner_token" = [])),
    responses((status = 200, body = OfferView, description = "The offer"),
        (status = 401, body = ErrorBody), (status = 403, body = ErrorBody), (status = 404, body = ErrorBody),
        (status = 410, body = ErrorBody)))]
#[tracing::instrument(skip_all, fields(agent_id = %caller.agent.id))]
async fn get_offer(
    State(offers): State<Offers>,
    ActiveCaller(caller): ActiveCaller,
    Path((_, oid)): Path<(String, String)>,
) -> Result<Json<OfferView>> {
    let caller = authorized(caller)?;
    let id = parse_id(&oid).ok_or(AppError::OfferNotFound)?;
    let offer = offers.get(caller.agent.id, id).await?;
    Ok(Json(view(&offers, &caller, &offer)))
}

/// Close an offer
///
/// The offer stops selling: `closed`, and its URL answers 404 `offer_not_found`. Closing a closed offer again
/// answers 204 and changes nothing. Audited (`offer_closed`).
#[utoipa::path(delete, path = "/api/agents/{id}/offers/{oid}", tag = "offers",
    params(("id" = String, Path, format = "uuid"), ("oid" = String, Path, format = "uuid")),
    security(("agent_token" = []), ("admin_token" = []), ("owner_token" = [])),
    responses((status = 204, description = "Closed"),
        (status = 401, body = ErrorBody), (status = 403, body = ErrorBody), (status = 404, body = ErrorBody),
        (status = 410, body = ErrorBody)))]
#[tracing::instrument(skip_all, fields(agent_id = %caller.agent.id))]
async fn close_offer(
    State(offers): State<Offers>,
    ActiveCaller(caller): ActiveCaller,
    Path((_, oid)): Path<(String, String)>,
) -> Result<StatusCode> {
    let caller = authorized(caller)?;
    let id = parse_id(&oid).ok_or(AppError::OfferNotFound)?;
    offers.close(caller.agent.id, id, caller.actor()).await?;
    Ok(StatusCode::NO_CONTENT)
}
