//! Cancelling a pending transfer (docs/api.md §14): `POST /api/agents/{id}/transfers/{transfer_id}/cancel`, with the
//! agent's token or owner authority, replaces it with a zero-value send to the agent's own wallet at its nonce.
//! 200 once the node took the replacement, 202 when its broadcast answer was lost and the watcher sends it after the
//! answer; the transfer becomes `cancelled` when the replacement lands (or settles as usual if the original does).

use axum::Json;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use super::auth::{ActiveCaller, parse_id};
use super::error::{AppError, Result};
use super::views::{ErrorBody, TransferView};
use crate::domain::transaction::StoredTx;
use crate::state::AppState;
use crate::transfers::{Cancelled, Transfers};

pub fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new().routes(routes!(cancel_transfer))
}

/// Cancel a pending transfer
///
/// Replaces a pending transfer with a zero-value send to the agent itself at the same nonce (200, or 202 when the
/// replacement is sent after the answer); once that lands the transfer is `cancelled` and only its fee counts. A
/// mined transfer, one awaiting approval (reject it instead) or an x402 payment is 409.
#[utoipa::path(post, path = "/api/agents/{id}/transfers/{transfer_id}/cancel", tag = "wallets",
    params(("id" = String, Path, format = "uuid"), ("transfer_id" = String, Path, format = "uuid")),
    security(("agent_token" = []), ("admin_token" = []), ("owner_token" = [])),
    responses((status = 200, body = TransferView, description = "The zero-value self-send replacing it was sent; the transfer stays `pending` until one of its attempts lands"),
        (status = 202, body = TransferView, description = "The replacement is stored and is sent after this answer"),
        (status = 401, body = ErrorBody), (status = 403, body = ErrorBody), (status = 404, body = ErrorBody),
        (status = 409, body = ErrorBody, description = "`transfer_not_pending`: already mined or settled, or awaiting approval (reject it instead)"),
        (status = 410, body = ErrorBody), (status = 502, body = ErrorBody), (status = 503, body = ErrorBody),
        (status = 504, body = ErrorBody)))]
#[tracing::instrument(skip_all, fields(agent_id = %caller.agent.id))]
async fn cancel_transfer(
    State(state): State<AppState>,
    State(transfers): State<Transfers>,
    ActiveCaller(caller): ActiveCaller,
    Path((_, transfer_id)): Path<(String, String)>,
) -> Result<(StatusCode, Json<TransferView>)> {
    let id = parse_id(&transfer_id).ok_or(AppError::TransferNotFound)?;
    let (status, tx) = match transfers.cancel(&caller.agent, id, caller.actor()).await? {
        Cancelled::Sent(tx) => (StatusCode::OK, tx),
        Cancelled::Queued(tx) => (StatusCode::ACCEPTED, tx),
    };
    Ok((status, Json(sent_view(&state, &tx).await?)))
}

/// The view of a sent transfer, with its replaced attempts.
pub(super) async fn sent_view(state: &AppState, tx: &StoredTx) -> Result<TransferView> {
    let mut replaced = state.store.replaced_hashes(tx.agent_id).await?;
    let mut view = TransferView::from(tx)
        .with_replaced(replaced.remove(&tx.id).unwrap_or_default())
        .with_response(tx.body.x402());
    // A sponsored outflow's user operation, its bundle and its cost (§22).
    if let Some(part) = state.store.operation_part(tx.id).await? {
        view.sponsorship = Some(crate::http::views::transfers::SponsorshipPartView::new(
            &part,
            crate::domain::chain::find(&tx.chain).map_or(18, |c| c.decimals),
        ));
    }
    Ok(view)
}
