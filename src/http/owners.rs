//! Owner authority (docs/api.md §10): Sign-In with Ethereum challenges, owner sessions opened by a signature of one
//! of the agent's `owner_addresses`, and reactivation of a deleted agent.
//!
//! An owner address is an EVM account, the same key on every chain: a signature by the address listed for any of
//! the agent's chains proves ownership; the `chain` only sets the message's Chain ID, and must match it.

use alloy::primitives::Address;
use axum::Json;
use axum::extract::{Path, Query, State};
use axum::http::{HeaderMap, header};
use rand_core::{OsRng, RngCore};
use serde::Deserialize;
use utoipa::{IntoParams, ToSchema};
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use super::auth::{AnyCaller, OWNER_TOKEN_HEADER, counted_failure, limited_agent_any_state, parse_id};
use super::client_addr::ClientAddr;
use super::error::{AppError, Result};
use super::json::ApiJson;
use super::views::{AgentDetailView, ErrorBody, OwnerChallengeView, OwnerSessionView};
use crate::auth::Actor;
use crate::domain::audit::Detail;
use crate::domain::audit::detail::{Nothing, OwnerSessionClosed};
use crate::domain::chain as registry;
use crate::domain::siwe::{self, SiweMessage};
use crate::domain::token;
use crate::rate_limit::ProofEndpoint;
use crate::state::AppState;
use crate::store::{AuditEvent, OwnerChallenge};

pub fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(owner_challenge))
        .routes(routes!(owner_session, close_owner_session))
        .routes(routes!(reactivate_agent))
}

#[derive(Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
struct ChallengeParams {
    /// A registry chain: its id is the message's Chain ID.
    chain: Option<String>,
    /// The owner address that will sign.
    address: Option<String>,
}

/// The domain and origin the message names: `PUBLIC_URL` when set, else the request's `Host`.
fn sign_in_origin(state: &AppState, headers: &HeaderMap) -> Result<(String, String)> {
    if let Some(public) = &state.config.security.public_url {
        return Ok((public.host.clone(), public.origin.clone()));
    }
    let host = headers
        .get(header::HOST)
        .and_then(|h| h.to_str().ok())
        .filter(|h| {
            !h.is_empty() && h.len() <= 255 && h.bytes().all(|b| b.is_ascii_alphanumeric() || b"-.:[]".contains(&b))
        })
        .ok_or_else(|| AppError::field("host", "the request needs a Host header (or set PUBLIC_URL)"))?;
    Ok((host.to_string(), format!("http://{host}")))
}

/// Get an owner sign-in challenge
///
/// A Sign-In with Ethereum (EIP-4361) message for `address` on `chain`, single use, valid 5 minutes; its domain is
/// the host of `PUBLIC_URL` (else the request's `Host`). Issued for any address: the endpoint reveals nothing about
/// the owners. Rate limited (429).
#[utoipa::path(get, path = "/api/agents/{id}/owner-challenge", tag = "owners",
    params(("id" = String, Path, format = "uuid"), ChallengeParams),
    responses((status = 200, description = "An EIP-4361 message to sign; single use, 5 minutes", body = OwnerChallengeView),
        (status = 404, body = ErrorBody), (status = 422, body = ErrorBody), (status = 429, body = ErrorBody)))]
#[tracing::instrument(skip_all)]
async fn owner_challenge(
    State(state): State<AppState>,
    ClientAddr(client): ClientAddr,
    Path(id): Path<String>,
    Query(params): Query<ChallengeParams>,
    headers: HeaderMap,
) -> Result<Json<OwnerChallengeView>> {
    let agent = limited_agent_any_state(&state, ProofEndpoint::OwnerChallenge, &id, client).await?;
    let chain = params.chain.unwrap_or_default();
    let chain_id = registry::find(&chain)
        .map(|c| c.chain_id)
        .ok_or_else(|| AppError::field("chain", "must be a registry chain"))?;
    let address: Address = params
        .address
        .and_then(|a| a.trim().parse().ok())
        .ok_or_else(|| AppError::field("address", "must be a 0x address"))?;
    let (domain, origin) = sign_in_origin(&state, &headers)?;
    let mut bytes = [0u8; 16];
    OsRng.fill_bytes(&mut bytes);
    let nonce = alloy::hex::encode(bytes);
    let issued_at = state.clock.now();
    let expires_at = issued_at + chrono::Duration::seconds(siwe::CHALLENGE_LIFETIME_SECS);
    let message = SiweMessage {
        domain,
        address,
        statement: Some(format!("Sign in as an owner of agentd agent {}.", agent.id)),
        uri: format!("{origin}/api/agents/{}", agent.id),
        chain_id,
        nonce: nonce.clone(),
        issued_at,
        expiration_time: Some(expires_at),
    }
    .to_text();
    let challenge = OwnerChallenge {
        nonce: nonce.clone(),
        agent_id: agent.id,
        chain,
        address,
        message: message.clone(),
        expires_at,
        used: false,
    };
    state.store.insert_owner_challenge(&challenge).await?;
    Ok(Json(OwnerChallengeView {
        message,
        nonce,
        expires_at,
    }))
}

#[derive(Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
struct OpenSession {
    #[schema(min_length = 1)]
    chain: String,
    /// The challenge message exactly as issued.
    message: String,
    /// EIP-191 `personal_sign` signature, 0x + 65 bytes hex.
    signature: String,
}

/// Open an owner session
///
/// Exchanges a signed owner challenge for an owner token (`own_...`, 15 minutes) to send as `X-Owner-Token`. A
/// signature by an address that is not one of the agent's `owner_addresses` is 401 `invalid_proof`; failed proofs
/// count with reissue's per agent (429).
#[utoipa::path(post, path = "/api/agents/{id}/owner-session", tag = "owners",
    params(("id" = String, Path, format = "uuid")), request_body = OpenSession,
    responses((status = 200, description = "An owner session (15 minutes), for X-Owner-Token", body = OwnerSessionView),
        (status = 400, description = "invalid_json or malformed_challenge", body = ErrorBody),
        (status = 401, description = "invalid_proof", body = ErrorBody), (status = 404, body = ErrorBody),
        (status = 422, description = "validation_failed or challenge_expired", body = ErrorBody),
        (status = 429, body = ErrorBody)))]
#[tracing::instrument(skip_all)]
async fn owner_session(
    State(state): State<AppState>,
    ClientAddr(client): ClientAddr,
    Path(id): Path<String>,
    body: Result<ApiJson<OpenSession>>,
) -> Result<Json<OwnerSessionView>> {
    // Only failed proofs count per agent (below), so strangers cannot lock the owner out.
    let agent = limited_agent_any_state(&state, ProofEndpoint::OwnerSession, &id, client).await?;
    let ApiJson(body) = body?;
    if registry::find(&body.chain).is_none() {
        return Err(AppError::field("chain", "must be a registry chain"));
    }
    let issued = token::issue_prefixed(token::OWNER_PREFIX);
    let session = state
        .auth
        .open_owner_session(
            &agent,
            &body.chain,
            &body.message,
            &body.signature,
            issued.hash.clone(),
            client.to_string(),
        )
        .await
        .map_err(|e| counted_failure(&state, agent.id, e.into()))?;
    tracing::info!(agent_id = %agent.id, "owner session opened");
    Ok(Json(OwnerSessionView {
        owner_token: issued.expose().to_string(),
        expires_at: session.expires_at,
    }))
}

/// Sign out of an owner session
///
/// Ends the owner session presented in `X-Owner-Token` at once (it would otherwise last its 15 minutes, or until its
/// address stops being the agent's owner). 401 `invalid_owner_token` for a missing, unknown or expired session, 403
/// for another agent's. Audited.
#[utoipa::path(delete, path = "/api/agents/{id}/owner-session", tag = "owners",
    params(("id" = String, Path, format = "uuid")), security(("owner_token" = [])),
    responses((status = 204, description = "The session is ended"), (status = 401, body = ErrorBody),
        (status = 403, body = ErrorBody), (status = 404, body = ErrorBody)))]
#[tracing::instrument(skip_all)]
async fn close_owner_session(
    State(state): State<AppState>,
    Path(id): Path<String>,
    headers: HeaderMap,
) -> Result<axum::http::StatusCode> {
    let agent_id = parse_id(&id).ok_or(AppError::AgentNotFound)?;
    let presented = headers
        .get(OWNER_TOKEN_HEADER)
        .and_then(|v| v.to_str().ok())
        .map(str::trim)
        .filter(|t| !t.is_empty())
        .ok_or(AppError::InvalidOwnerToken)?;
    let session = state.auth.owner_session(presented).await?;
    if session.agent_id != agent_id {
        return Err(AppError::Forbidden);
    }
    let closed = OwnerSessionClosed {
        address: session.address.to_checksum(None),
        chain: session.chain,
    };
    let event = AuditEvent::new(agent_id, Actor::Owner, Detail::OwnerSessionClosed(closed));
    if state.store.close_owner_session(&token::hash(presented), &event).await? {
        tracing::info!(%agent_id, "owner session closed");
    }
    Ok(axum::http::StatusCode::NO_CONTENT)
}

/// Reactivate a deleted agent
///
/// Owner authority (the operator's bearer token or an owner session) makes an inactive agent active again and
/// answers its detail. The agent's own token is not enough on a guarded agent (403 `owner_required`). Audited.
#[utoipa::path(post, path = "/api/agents/{id}/reactivate", tag = "owners",
    params(("id" = String, Path, format = "uuid")),
    security(("admin_token" = []), ("owner_token" = []), ("agent_token" = [])),
    responses((status = 200, description = "The agent, active again", body = AgentDetailView),
        (status = 401, body = ErrorBody),
        (status = 403, description = "forbidden, or owner_required on a guarded agent", body = ErrorBody),
        (status = 404, body = ErrorBody)))]
#[tracing::instrument(skip_all, fields(agent_id = %caller.agent.id))]
async fn reactivate_agent(
    State(state): State<AppState>,
    AnyCaller(caller): AnyCaller,
) -> Result<Json<AgentDetailView>> {
    // Guarded: only the owner (a deleted agent's token must not bring it back); unguarded: its token may too.
    caller.require_owner_if_guarded()?;
    let agent = &caller.agent;
    let event = AuditEvent::new(agent.id, caller.actor(), Detail::AgentReactivated(Nothing {}));
    if state.store.reactivate_agent(agent.id, &event).await? {
        tracing::info!(agent_id = %agent.id, "agent reactivated");
    }
    let agent = state.store.get_agent(agent.id).await?;
    Ok(Json(AgentDetailView::new(&agent, caller.guarded)))
}
