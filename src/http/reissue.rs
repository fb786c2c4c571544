//! Token reissue: server-side challenges and the two proofs (current token, EIP-191 wallet signature).

use std::net::IpAddr;

use axum::Json;
use axum::extract::{Path, State};
use utoipa::ToSchema;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use rand_core::{OsRng, RngCore};
use serde::Deserialize;

use super::auth::{counted_failure, limited_agent_any_state};
use super::client_addr::ClientAddr;
use super::error::{AppError, Result};
use super::json::ApiJson;
use super::views::{AgentDetailView, ChallengeView, ErrorBody, ReissuedView};
use crate::auth::ReissueWith;
use crate::domain::agent::Agent;
use crate::domain::{challenge, token};
use crate::rate_limit::ProofEndpoint;
use crate::state::AppState;
use crate::store::Challenge;

pub fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(issue_challenge))
        .routes(routes!(reissue_token))
}

/// As `limited_agent_any_state`, for an active agent (410 otherwise).
async fn limited_agent(state: &AppState, endpoint: ProofEndpoint, id: &str, client: IpAddr) -> Result<Agent> {
    let agent = limited_agent_any_state(state, endpoint, id, client).await?;
    if !agent.is_active {
        return Err(AppError::AgentInactive);
    }
    Ok(agent)
}

/// Get a reissue challenge
///
/// A single-use challenge (5 minutes) to sign for `reissue-token` with a `wallet_signature` proof:
/// `<CHALLENGE_PREFIX>:reissue:<agent_id>:<nonce>:<expires_at_unix>`. Needs no token. Rate limited per client
/// address (429 with `Retry-After`).
#[utoipa::path(get, path = "/api/agents/{id}/reissue-challenge", tag = "reissue", params(("id" = String, Path, format = "uuid")),
    responses((status = 200, description = "A single-use challenge, valid 5 minutes", body = ChallengeView),
        (status = 404, body = ErrorBody), (status = 410, body = ErrorBody), (status = 429, description = "rate_limited, with Retry-After", body = ErrorBody)))]
#[tracing::instrument(skip_all)]
async fn issue_challenge(
    State(state): State<AppState>,
    ClientAddr(client): ClientAddr,
    Path(id): Path<String>,
) -> Result<Json<ChallengeView>> {
    let agent = limited_agent(&state, ProofEndpoint::ReissueChallenge, &id, client).await?;
    let mut bytes = [0u8; 16];
    OsRng.fill_bytes(&mut bytes);
    let nonce = alloy::hex::encode(bytes);
    let expires_at = state.clock.now() + chrono::Duration::seconds(challenge::LIFETIME_SECS);
    let message = challenge::message(
        &state.config.security.challenge_prefix,
        agent.id,
        &nonce,
        expires_at.timestamp(),
    );
    let record = Challenge {
        nonce: nonce.clone(),
        agent_id: agent.id,
        message: message.clone(),
        expires_at,
        used: false,
    };
    state.store.insert_challenge(&record).await?;
    Ok(Json(ChallengeView {
        message,
        nonce,
        expires_at,
    }))
}

#[derive(Deserialize, ToSchema)]
struct ReissueRequest {
    proof: Proof,
}

/// `current_token`, or an EIP-191 `wallet_signature` of a challenge by one of the agent's or owner's addresses.
#[derive(Deserialize, ToSchema)]
#[serde(tag = "type", rename_all = "snake_case")]
enum Proof {
    CurrentToken {
        token: String,
    },
    WalletSignature {
        #[schema(min_length = 1)]
        chain: String,
        message: String,
        signature: String,
        #[serde(default)]
        public_key: Option<String>,
    },
}

impl Proof {
    fn as_given(&self) -> ReissueWith<'_> {
        match self {
            Proof::CurrentToken { token } => ReissueWith::CurrentToken { token },
            Proof::WalletSignature {
                chain,
                message,
                signature,
                public_key,
            } => ReissueWith::WalletSignature {
                chain,
                message,
                signature,
                public_key: public_key.as_deref(),
            },
        }
    }
}

/// Reissue the access token
///
/// Issues a new access token against a proof: the current token, or an EIP-191 signature of a challenge by one of
/// the agent's wallet or owner addresses. The previous token stops working at once. A failed proof is 401
/// `invalid_proof` and does not use up its challenge; an expired challenge 422 `challenge_expired`; a message not
/// of the challenge's shape 400. Rate limited per client address and per agent on failed proofs (429).
#[utoipa::path(post, path = "/api/agents/{id}/reissue-token", tag = "reissue", params(("id" = String, Path, format = "uuid")),
    request_body = ReissueRequest,
    responses((status = 200, description = "A new token; the previous one is dead", body = ReissuedView),
        (status = 400, description = "invalid_json or malformed_challenge", body = ErrorBody),
        (status = 401, description = "invalid_proof", body = ErrorBody), (status = 404, body = ErrorBody),
        (status = 410, body = ErrorBody), (status = 422, description = "validation_failed or challenge_expired", body = ErrorBody),
        (status = 429, body = ErrorBody)))]
#[tracing::instrument(skip_all)]
async fn reissue_token(
    State(state): State<AppState>,
    ClientAddr(client): ClientAddr,
    Path(id): Path<String>,
    body: Result<ApiJson<ReissueRequest>>,
) -> Result<Json<ReissuedView>> {
    let agent = limited_agent(&state, ProofEndpoint::ReissueToken, &id, client).await?;
    let ApiJson(body) = body?;
    let issued = token::issue();
    let prefix = &state.config.security.challenge_prefix;
    // The new token and its audit entry are stored in one transaction (or neither is).
    state
        .auth
        .reissue(&agent, body.proof.as_given(), &issued.hash, prefix, client.to_string())
        .await
        .map_err(|e| counted_failure(&state, agent.id, e.into()))?;
    tracing::info!(agent_id = %agent.id, "access token reissued");
    Ok(Json(ReissuedView {
        access_token: issued.expose().to_string(),
        agent: AgentDetailView::new(&agent, state.auth.is_guarded(&agent)),
    }))
}
