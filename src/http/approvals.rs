//! Transfers waiting for an owner's approval (docs/api.md §11): list them; approve (signed at today's fees and
//! sent) or reject, with owner authority; both audited with who decided. Offers the `create_offer` tool of a guarded
//! agent held (§23 Tools) are listed and decided here too (`kind: "offer"`, by the offer's id): approving one makes
//! it sell, and signs nothing (`offers::held`).

use axum::Json;
use axum::body::Bytes;
use axum::extract::{Path, State};
use serde::Deserialize;
use utoipa::ToSchema;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;
use uuid::Uuid;

use super::auth::{ActiveCaller, parse_id};
use super::error::{AppError, Result};
use super::json::parse_optional_body;
use super::views::{ErrorBody, TransferView};
use crate::auth::Caller;
use crate::offers::Offers;
use crate::offers::view::OfferView;
use crate::state::AppState;
use crate::store::offers::{Offer, OfferVerdict};
use crate::transfers::Transfers;

pub fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(list_approvals))
        .routes(routes!(approve_transfer))
        .routes(routes!(reject_transfer))
}

/// List transfers awaiting approval
///
/// Transfers held by an approval rule of the policy, with their `expires_at`; they hold their reservation against
/// the cap until approved, rejected or expired. Offers the `create_offer` tool of a guarded agent made are listed
/// too (`kind: "offer"`, with the offer's terms in `offer`): they sell nothing until approved.
#[utoipa::path(get, path = "/api/agents/{id}/approvals", tag = "wallets", params(("id" = String, Path, format = "uuid")),
    security(("agent_token" = []), ("admin_token" = []), ("owner_token" = [])),
    responses((status = 200, body = Vec<TransferView>, description = "Transfers (and offers) awaiting approval, oldest first"),
        (status = 401, body = ErrorBody), (status = 403, body = ErrorBody), (status = 404, body = ErrorBody),
        (status = 410, body = ErrorBody)))]
#[tracing::instrument(skip_all, fields(agent_id = %caller.agent.id))]
async fn list_approvals(
    State(state): State<AppState>,
    ActiveCaller(caller): ActiveCaller,
) -> Result<Json<Vec<TransferView>>> {
    let waiting = state.store.waiting_approvals(caller.agent.id).await?;
    let offers = state.offers.waiting(caller.agent.id).await?;
    let mut views: Vec<TransferView> = waiting.iter().map(TransferView::from).collect();
    views.extend(offers.iter().map(|o| offer_view(&state.offers, &caller, o)));
    views.sort_by_key(|v| (v.created_at, v.id));
    Ok(Json(views))
}

/// A held offer as the approvals show it.
fn offer_view(offers: &Offers, caller: &Caller, offer: &Offer) -> TransferView {
    let pay_to = caller.agent.wallet_addresses.get(&offer.chain).copied();
    TransferView::of_offer(offer, OfferView::new(offer, offers.url(offer.id), pay_to))
}

/// Approve a held transfer
///
/// Owner authority approves a transfer awaiting approval: it is signed at the fees of that moment and broadcast
/// (`pending`). If its reservation no longer fits the cap, 403 `spending_cap_exceeded` and it stays waiting. Past
/// `expires_at` 409 `transfer_expired`; a transfer no longer awaiting 409 `transfer_not_pending`. A held offer
/// (`kind: "offer"`) approved is `approved` and sells from then on (`offer.status` `active`); nothing is signed.
#[utoipa::path(post, path = "/api/agents/{id}/transfers/{transfer_id}/approve", tag = "wallets",
    params(("id" = String, Path, format = "uuid"), ("transfer_id" = String, Path, format = "uuid")),
    security(("admin_token" = []), ("owner_token" = [])),
    responses((status = 200, body = TransferView, description = "Approved: signed and sent"),
        (status = 401, body = ErrorBody), (status = 403, body = ErrorBody), (status = 404, body = ErrorBody),
        (status = 409, body = ErrorBody), (status = 410, body = ErrorBody), (status = 502, body = ErrorBody)))]
#[tracing::instrument(skip_all, fields(agent_id = %caller.agent.id))]
async fn approve_transfer(
    State(transfers): State<Transfers>,
    State(offers): State<Offers>,
    ActiveCaller(caller): ActiveCaller,
    Path((_, transfer_id)): Path<(String, String)>,
) -> Result<Json<TransferView>> {
    caller.require_owner()?;
    let id = transfer_uuid(&transfer_id)?;
    if offers.was_held(caller.agent.id, id).await? {
        let offer = offers
            .decide(&caller.agent, id, OfferVerdict::Approved, caller.actor(), None)
            .await?;
        return Ok(Json(offer_view(&offers, &caller, &offer)));
    }
    let outcome = transfers.approve(&caller.agent, id, caller.actor()).await?;
    Ok(Json(TransferView::from(&outcome)))
}

/// Optional body of a rejection: the owner's reason, kept in the audit entry of the rejection.
#[derive(Deserialize, Default, ToSchema)]
#[serde(deny_unknown_fields)]
struct RejectRequest {
    /// Why the owner rejects it (at most 500 characters; blank is no reason).
    reason: Option<String>,
}

/// The longest reason a rejection keeps, in characters.
const MAX_REASON_CHARS: usize = 500;

/// Reject a held transfer
///
/// Owner authority rejects a transfer awaiting approval: it becomes `rejected` and its reservation is released.
/// An optional body `{"reason": "…"}` (at most 500 characters) is kept in the rejection's audit entry
/// (`detail.reason`). Past `expires_at` 409 `transfer_expired`; a transfer no longer awaiting 409.
#[utoipa::path(post, path = "/api/agents/{id}/transfers/{transfer_id}/reject", tag = "wallets",
    params(("id" = String, Path, format = "uuid"), ("transfer_id" = String, Path, format = "uuid")),
    request_body(content = RejectRequest),
    security(("admin_token" = []), ("owner_token" = [])),
    responses((status = 200, body = TransferView, description = "Rejected: its reservation released"),
        (status = 401, body = ErrorBody), (status = 403, body = ErrorBody), (status = 404, body = ErrorBody),
        (status = 409, body = ErrorBody), (status = 410, body = ErrorBody), (status = 422, body = ErrorBody)))]
#[tracing::instrument(skip_all, fields(agent_id = %caller.agent.id))]
async fn reject_transfer(
    State(transfers): State<Transfers>,
    State(offers): State<Offers>,
    ActiveCaller(caller): ActiveCaller,
    Path((_, transfer_id)): Path<(String, String)>,
    body: Bytes,
) -> Result<Json<TransferView>> {
    caller.require_owner()?;
    let request: RejectRequest = parse_optional_body(&body)?;
    let reason = request.reason.as_deref().map(str::trim).filter(|r| !r.is_empty());
    if reason.is_some_and(|r| r.chars().count() > MAX_REASON_CHARS || r.chars().any(char::is_control)) {
        return Err(AppError::field(
            "reason",
            "must be at most 500 characters, without control characters",
        ));
    }
    let id = transfer_uuid(&transfer_id)?;
    if offers.was_held(caller.agent.id, id).await? {
        let offer = offers
            .decide(&caller.agent, id, OfferVerdict::Rejected, caller.actor(), reason)
            .await?;
        return Ok(Json(offer_view(&offers, &caller, &offer)));
    }
    let rejected = transfers.reject(&caller.agent, id, caller.actor(), reason).await?;
    Ok(Json(TransferView::from(&rejected)))
}

/// A malformed id names no transfer: 404, like an unknown one.
fn transfer_uuid(text: &str) -> Result<Uuid> {
    parse_id(text).ok_or(AppError::NotFound)
}
