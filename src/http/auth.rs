//! The HTTP face of authentication: extractors that read the credentials a request carries and ask the one
//! authentication service (`crate::auth::Authenticator`) for a verdict. No check is made here; the proof endpoints
//! (reissue, owner session) share their rate limits from here: per client before the agent is loaded, per agent on
//! failed proofs.

use std::net::IpAddr;

use axum::extract::{FromRef, FromRequestParts, Path};
use axum::http::request::Parts;
use uuid::Uuid;

use super::error::AppError;
use crate::auth::{AgentAccess, Authenticator, Caller, Credentials};
use crate::domain::agent::Agent;
use crate::rate_limit::ProofEndpoint;
use crate::state::AppState;

pub const TOKEN_HEADER: &str = "x-agent-access-token";
pub const OWNER_TOKEN_HEADER: &str = "x-owner-token";

/// An active agent whose token the caller presented (every agent-scoped call).
pub struct ActiveAgent(pub Agent);

/// An agent, active or not, whose token the caller presented (agent detail only).
pub struct AnyAgent(pub Agent);

/// The `X-Agent-Access-Token` header as given, if any: for calls whose agent is named in the body or found through
/// another resource (chat, conversations), which authenticate once they know it.
pub struct AgentToken(pub Option<String>);

/// The caller of an agent-scoped endpoint that accepts the agent token, owner authority, or both (docs/api.md
/// §10), for an active agent. Handlers decide what the caller may do (`Caller::require_owner_if_guarded` …).
pub struct ActiveCaller(pub Caller);

/// As `ActiveCaller`, also for an inactive agent (reactivation, export and audit with owner authority).
pub struct AnyCaller(pub Caller);

/// Guards agent creation and listing when `ADMIN_TOKEN` is set (`Authorization: Bearer <token>`).
pub struct AdminGuard;

/// The token from the `X-Agent-Access-Token` header, if any.
pub fn header_token(parts: &Parts) -> Option<String> {
    header(parts, TOKEN_HEADER).map(String::from)
}

/// Parses the `{id}` path segment; a malformed uuid is an unknown agent (404).
pub fn parse_id(text: &str) -> Option<Uuid> {
    Uuid::parse_str(text).ok()
}

fn header<'a>(parts: &'a Parts, name: &str) -> Option<&'a str> {
    parts
        .headers
        .get(name)
        .and_then(|v| v.to_str().ok())
        .map(str::trim)
        .filter(|t| !t.is_empty())
}

fn bearer(parts: &Parts) -> Option<&str> {
    header(parts, axum::http::header::AUTHORIZATION.as_str()).and_then(|v| v.strip_prefix("Bearer "))
}

async fn path_id<S: Send + Sync>(parts: &mut Parts, state: &S) -> Option<Uuid> {
    match Path::<Vec<(String, String)>>::from_request_parts(parts, state).await {
        Ok(Path(params)) => params
            .into_iter()
            .find(|(k, _)| k == "id")
            .and_then(|(_, v)| parse_id(&v)),
        Err(_) => None,
    }
}

async fn path_caller<S>(parts: &mut Parts, state: &S, access: AgentAccess) -> Result<Caller, AppError>
where
    S: Send + Sync,
    Authenticator: FromRef<S>,
{
    let id = path_id(parts, state).await;
    let credentials = Credentials {
        agent_token: header(parts, TOKEN_HEADER),
        bearer: bearer(parts),
        owner_token: header(parts, OWNER_TOKEN_HEADER),
    };
    let auth = Authenticator::from_ref(state);
    Ok(auth.caller(id, credentials, access).await?)
}

impl<S> FromRequestParts<S> for ActiveCaller
where
    S: Send + Sync,
    Authenticator: FromRef<S>,
{
    type Rejection = AppError;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, Self::Rejection> {
        path_caller(parts, state, AgentAccess::Active).await.map(ActiveCaller)
    }
}

impl<S> FromRequestParts<S> for AnyCaller
where
    S: Send + Sync,
    Authenticator: FromRef<S>,
{
    type Rejection = AppError;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, Self::Rejection> {
        path_caller(parts, state, AgentAccess::AnyState).await.map(AnyCaller)
    }
}

async fn path_agent<S>(parts: &mut Parts, state: &S, access: AgentAccess) -> Result<Agent, AppError>
where
    S: Send + Sync,
    Authenticator: FromRef<S>,
{
    let token = header_token(parts);
    let id = path_id(parts, state).await;
    let auth = Authenticator::from_ref(state);
    Ok(auth.agent(id, token.as_deref(), access).await?)
}

impl<S> FromRequestParts<S> for ActiveAgent
where
    S: Send + Sync,
    Authenticator: FromRef<S>,
{
    type Rejection = AppError;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, Self::Rejection> {
        path_agent(parts, state, AgentAccess::Active).await.map(ActiveAgent)
    }
}

impl<S> FromRequestParts<S> for AnyAgent
where
    S: Send + Sync,
    Authenticator: FromRef<S>,
{
    type Rejection = AppError;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, Self::Rejection> {
        path_agent(parts, state, AgentAccess::AnyState).await.map(AnyAgent)
    }
}

impl<S> FromRequestParts<S> for AgentToken
where
    S: Send + Sync,
    Authenticator: FromRef<S>,
{
    type Rejection = AppError;

    /// Refuses a missing token at once, before the body is read.
    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, Self::Rejection> {
        let token = header_token(parts);
        Authenticator::from_ref(state).require_token(token.as_deref())?;
        Ok(AgentToken(token))
    }
}

impl<S> FromRequestParts<S> for AdminGuard
where
    S: Send + Sync,
    Authenticator: FromRef<S>,
{
    type Rejection = AppError;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, Self::Rejection> {
        Authenticator::from_ref(state).admin(bearer(parts))?;
        Ok(AdminGuard)
    }
}

/// Parses the id (a malformed one is an unknown agent, 404, and touches no limiter), applies the per-client limit of
/// `endpoint`, then loads the agent. Every spelling of an id parses to the one canonical id.
pub(super) async fn limited_agent_any_state(
    state: &AppState,
    endpoint: ProofEndpoint,
    id: &str,
    client: IpAddr,
) -> Result<Agent, AppError> {
    let id = parse_id(id).ok_or(AppError::AgentNotFound)?;
    state
        .reissue_limits
        .check_client(endpoint, client)
        .map_err(|retry_after_secs| AppError::RateLimited { retry_after_secs })?;
    Ok(state.store.get_agent(id).await?)
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
