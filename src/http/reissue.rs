//! Token reissue: server-side challenges and the two proofs (current token, EIP-191 wallet signature).

use std::net::IpAddr;

use alloy::primitives::{Address, Signature};
use axum::Json;
use axum::extract::{Path, State};
use utoipa::ToSchema;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use chrono::{TimeZone, Utc};
use rand_core::{OsRng, RngCore};
use serde::Deserialize;
use serde_json::json;
use uuid::Uuid;

use super::auth::parse_id;
use super::client_addr::ClientAddr;
use super::error::{AppError, Result};
use super::json::ApiJson;
use super::views::{AgentDetailView, ChallengeView, ErrorBody, ReissuedView};
use crate::auth::Actor;
use crate::domain::agent::Agent;
use crate::domain::chain as registry;
use crate::domain::{challenge, token};
use crate::rate_limit::ProofEndpoint;
use crate::state::AppState;
use crate::store::{AuditEvent, Challenge, ReissueProof};

pub fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(issue_challenge))
        .routes(routes!(reissue_token))
}

/// Parses the id (a malformed one is an unknown agent, 404, and touches no limiter), applies the per-client limit of
/// `endpoint`, then loads the agent. Every spelling of an id parses to the one canonical id.
pub(super) async fn limited_agent_any_state(
    state: &AppState,
    endpoint: ProofEndpoint,
    id: &str,
    client: IpAddr,
) -> Result<Agent> {
    let id = parse_id(id).ok_or(AppError::AgentNotFound)?;
    state
        .reissue_limits
        .check_client(endpoint, client)
        .map_err(|retry_after_secs| AppError::RateLimited { retry_after_secs })?;
    Ok(state.store.get_agent(id).await?)
}

/// As `limited_agent_any_state`, for an active agent (410 otherwise).
async fn limited_agent(state: &AppState, endpoint: ProofEndpoint, id: &str, client: IpAddr) -> Result<Agent> {
    let agent = limited_agent_any_state(state, endpoint, id, client).await?;
    if !agent.is_active {
        return Err(AppError::AgentInactive);
    }
    Ok(agent)
}

/// Counts a failed proof of ownership (reissue or owner session: one count per agent, docs/api.md §10). Past
/// `REISSUE_LIMIT_PER_AGENT` failures a minute the failure answers 429 instead; a valid proof is never counted nor
/// refused, so strangers' failures do not lock the owner out.
pub(super) fn counted_failure(state: &AppState, agent_id: Uuid, error: AppError) -> AppError {
    let failed_proof = matches!(
        error,
        AppError::InvalidProof
            | AppError::ChallengeExpired
            | AppError::BadRequest {
                code: "malformed_challenge",
                ..
            }
    );
    if !failed_proof {
        return error;
    }
    match state.reissue_limits.count_failed_proof(agent_id) {
        Ok(()) => error,
        Err(retry_after_secs) => AppError::RateLimited { retry_after_secs },
    }
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
    let expires_at = crate::domain::now() + chrono::Duration::seconds(challenge::LIFETIME_SECS);
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
    let (actor, mut detail) = prove(&state, &agent, body.proof, &issued.hash)
        .await
        .map_err(|e| counted_failure(&state, agent.id, e))?;
    detail["client"] = json!(client.to_string());
    let event = AuditEvent {
        agent_id: agent.id,
        action: "token_reissued",
        actor: actor.as_str().to_string(),
        detail,
    };
    state.store.insert_audit(&event).await?;
    tracing::info!(agent_id = %agent.id, "access token reissued");
    Ok(Json(ReissuedView {
        access_token: issued.expose().to_string(),
        agent: AgentDetailView::new(&agent, state.auth.is_guarded(&agent)),
    }))
}

/// Checks the proof and swaps the token; answers who proved it (the agent's token or wallet, or an owner wallet)
/// and the audit detail.
async fn prove(state: &AppState, agent: &Agent, proof: Proof, new_hash: &str) -> Result<(Actor, serde_json::Value)> {
    let (accepted, actor, detail) = match proof {
        Proof::CurrentToken { token } => {
            let hash = token::hash(&token);
            let proof = ReissueProof::CurrentToken { token_hash: &hash };
            let ok = state.store.reissue_token(agent.id, proof, new_hash).await?;
            (ok, Actor::Agent, json!({ "proof": "current_token" }))
        }
        Proof::WalletSignature {
            chain,
            message,
            signature,
            public_key,
        } => {
            let (nonce, signer) =
                verify_wallet_proof(state, agent, &chain, &message, &signature, public_key.as_deref()).await?;
            let proof = ReissueProof::Challenge { nonce: &nonce };
            let ok = state.store.reissue_token(agent.id, proof, new_hash).await?;
            let actor = if agent.wallet_addresses.get(&chain) == Some(&signer) {
                Actor::Agent
            } else {
                Actor::Owner
            };
            let detail = json!({ "proof": "wallet_signature", "chain": chain, "signer": signer.to_checksum(None) });
            (ok, actor, detail)
        }
    };
    if !accepted {
        return Err(AppError::InvalidProof);
    }
    Ok((actor, detail))
}

/// Checks a wallet-signature proof without consuming its challenge; returns the nonce and the signer.
async fn verify_wallet_proof(
    state: &AppState,
    agent: &Agent,
    chain: &str,
    message: &str,
    signature: &str,
    public_key: Option<&str>,
) -> Result<(String, Address)> {
    if registry::find(chain).is_none() {
        return Err(AppError::field("proof.chain", "unknown chain"));
    }
    let parsed =
        challenge::parse(&state.config.security.challenge_prefix, message).ok_or_else(|| AppError::BadRequest {
            code: "malformed_challenge",
            message: format!(
                "the message must have the form {}:reissue:<agent_id>:<nonce>:<expires_at>",
                state.config.security.challenge_prefix
            ),
        })?;
    if parsed.agent_id != agent.id {
        return Err(AppError::InvalidProof);
    }
    let now = crate::domain::now();
    if Utc
        .timestamp_opt(parsed.expires_at_unix, 0)
        .single()
        .is_none_or(|t| t <= now)
    {
        return Err(AppError::ChallengeExpired);
    }
    let stored = state
        .store
        .get_challenge(&parsed.nonce)
        .await?
        .ok_or(AppError::InvalidProof)?;
    if stored.agent_id != agent.id || stored.message != message {
        return Err(AppError::InvalidProof);
    }
    if stored.expires_at <= now {
        return Err(AppError::ChallengeExpired);
    }
    if stored.used {
        return Err(AppError::InvalidProof);
    }
    let signer = recover_signer(message, signature, public_key).ok_or(AppError::InvalidProof)?;
    let recognised = [agent.wallet_addresses.get(chain), agent.owner_addresses.get(chain)];
    if !recognised.into_iter().flatten().any(|a| *a == signer) {
        return Err(AppError::InvalidProof);
    }
    Ok((parsed.nonce, signer))
}

/// Recovers the EIP-191 signer; a non-empty public key must belong to that signer.
pub(super) fn recover_signer(message: &str, signature: &str, public_key: Option<&str>) -> Option<Address> {
    let bytes = alloy::hex::decode(signature.trim()).ok()?;
    if bytes.len() != 65 {
        return None;
    }
    let signature = Signature::try_from(bytes.as_slice()).ok()?;
    let signer = signature.recover_address_from_msg(message.as_bytes()).ok()?;
    match public_key.map(str::trim).filter(|k| !k.is_empty()) {
        None => Some(signer),
        Some(key) => {
            let key = alloy::hex::decode(key).ok()?;
            let key = alloy::signers::k256::ecdsa::VerifyingKey::from_sec1_bytes(&key).ok()?;
            (Address::from_public_key(&key) == signer).then_some(signer)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use alloy::signers::SignerSync;
    use alloy::signers::local::PrivateKeySigner;
    use uuid::Uuid;

    #[test]
    fn the_signer_of_a_personal_sign_message_is_recovered() {
        let key = PrivateKeySigner::random();
        let message = format!("agentd:reissue:{}:ab:1", Uuid::new_v4());
        let sig = key.sign_message_sync(message.as_bytes()).unwrap();
        let hex = format!("0x{}", alloy::hex::encode(sig.as_bytes()));
        assert_eq!(recover_signer(&message, &hex, None), Some(key.address()));
        assert_eq!(recover_signer(&message, &hex, Some("")), Some(key.address()));
        let pubkey = alloy::hex::encode(key.credential().verifying_key().to_encoded_point(false).as_bytes());
        assert_eq!(recover_signer(&message, &hex, Some(&pubkey)), Some(key.address()));
        let other = PrivateKeySigner::random();
        let other_pub = alloy::hex::encode(other.credential().verifying_key().to_encoded_point(true).as_bytes());
        assert_eq!(recover_signer(&message, &hex, Some(&other_pub)), None);
        assert_ne!(recover_signer("something else", &hex, None), Some(key.address()));
        assert_eq!(recover_signer(&message, "0x1234", None), None);
    }
}
