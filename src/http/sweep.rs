//! `POST /api/agents/{id}/sweep` (docs/api.md §20): an owner moves the whole balance of one asset of the agent's
//! wallet to one of the agent's owner addresses (any address with the admin token), also on an inactive agent, so
//! that the funds of an agent whose key cannot be exported are never stranded. Exempt from the cap and the policy;
//! the send path is otherwise the transfers' (lock, nonce, funds, watcher), and it is audited.

use axum::extract::State;
use axum::http::StatusCode;
use serde::Deserialize;
use utoipa::ToSchema;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use super::auth::AnyCaller;
use super::error::{AppError, Result};
use super::json::ApiJson;
use super::views::{ErrorBody, TransferView};
use crate::auth::{AuthError, OwnerAuthority};
use crate::domain::agent::parse_address;
use crate::domain::chain as registry;
use crate::state::AppState;
use crate::transfers::SweepOrder;

pub fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new().routes(routes!(sweep))
}

/// A sweep to make.
#[derive(Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
struct Sweep {
    /// One of the agent's chains.
    #[schema(min_length = 1)]
    chain: String,
    /// The recipient, a 0x address: one of the agent's `owner_addresses` (any address with the admin token).
    to: String,
    /// The asset: the chain's native symbol (the default) or a registry token's symbol or contract address
    /// (`USDC`), any case.
    asset: Option<String>,
}

/// Sweep a wallet to its owner
///
/// Sends the whole balance of one asset of the agent's wallet on `chain` to `to`: the native coin less the fee
/// (gas limit × `maxFeePerGas`, plus the L1 fee on OP-stack chains), or the whole balance of a token, whose gas the
/// agent pays in the native coin. Owner authority only (403 `owner_required` with the agent token alone); `to` must
/// be one of the agent's `owner_addresses` with an owner session (403 `owner_address_required`), any address with the
/// admin token. Works on an inactive agent and with either key backend, so that the funds of an agent whose key is
/// in a hardware security module (export refused with `key_not_exportable`) are never stranded. Exempt from the
/// spending cap and the policy, which guard the agent, not its owner; the agent's nonce, send lock and funds apply
/// (a balance held by its transfers on their way is refused with `insufficient_funds`: sweep once they settle).
/// Audited as `funds_swept`. Answers 201 with the transfer; 422 `nothing_to_sweep` when there is nothing to move.
#[utoipa::path(post, path = "/api/agents/{id}/sweep", tag = "wallets", request_body = Sweep,
    params(("id" = String, Path, format = "uuid")),
    security(("admin_token" = []), ("owner_token" = [])),
    responses((status = 201, description = "Signed, stored and handed to the node (`pending`): the whole balance", body = TransferView),
        (status = 400, body = ErrorBody), (status = 401, body = ErrorBody),
        (status = 403, description = "owner_required (the agent token alone), owner_address_required (an owner session sweeping to an address that is not an owner's), forbidden", body = ErrorBody),
        (status = 404, body = ErrorBody), (status = 410, description = "inactive, without owner authority", body = ErrorBody),
        (status = 422, description = "validation_failed (unknown chain or asset, malformed address), invalid_recipient, nothing_to_sweep, insufficient_funds (the gas)", body = ErrorBody),
        (status = 502, body = ErrorBody), (status = 503, body = ErrorBody), (status = 504, body = ErrorBody)))]
#[tracing::instrument(skip_all, fields(agent_id = %caller.agent.id))]
async fn sweep(
    State(state): State<AppState>,
    AnyCaller(caller): AnyCaller,
    body: Result<ApiJson<Sweep>>,
) -> Result<(StatusCode, axum::Json<TransferView>)> {
    // The owner may sweep a deleted agent, so its funds are never stranded; its token may not.
    if !caller.agent.is_active && caller.owner.is_none() {
        return Err(AuthError::AgentInactive.into());
    }
    caller.require_owner()?;
    let ApiJson(body) = body?;
    let agent = &caller.agent;
    let chain = registry::find(body.chain.trim())
        .filter(|c| agent.has_chain(c.name))
        .ok_or_else(|| AppError::field("chain", "must be one of the agent's chains"))?;
    let assets = state.chains.tokens();
    let asset = assets
        .named(chain, body.asset.as_deref())
        .map_err(|e| AppError::field("asset", e.to_string()))?;
    let to = parse_address(body.to.trim()).ok_or_else(|| AppError::field("to", "must be a 0x address"))?;
    let order = SweepOrder {
        agent,
        chain,
        to,
        token: (!asset.is_native()).then_some(asset),
        actor: caller.actor(),
        anywhere: matches!(caller.owner, Some(OwnerAuthority::Admin)),
    };
    let outcome = state.transfers.sweep(order).await?;
    Ok((StatusCode::CREATED, axum::Json(TransferView::from(&outcome))))
}
