//! Authentication: the agent access-token extractors and the admin guard, checking in the contract's order:
//! token present -> agent exists (404) -> token belongs to it (401/403) -> agent active (410).

use axum::extract::{FromRequestParts, Path};
use axum::http::request::Parts;
use secrecy::ExposeSecret;
use subtle::ConstantTimeEq;
use uuid::Uuid;

use super::error::AppError;
use crate::domain::agent::Agent;
use crate::domain::token;
use crate::state::AppState;

pub const TOKEN_HEADER: &str = "x-agent-access-token";

/// An active agent whose token the caller presented (every agent-scoped call).
pub struct ActiveAgent(pub Agent);

/// An agent, active or not, whose token the caller presented (agent detail only).
pub struct AnyAgent(pub Agent);

/// The token from the `X-Agent-Access-Token` header, if any.
pub fn header_token(parts: &Parts) -> Option<String> {
    parts
        .headers
        .get(TOKEN_HEADER)
        .and_then(|v| v.to_str().ok())
        .map(str::trim)
        .filter(|t| !t.is_empty())
        .map(String::from)
}

/// Parses the `{id}` path segment; a malformed uuid is an unknown agent (404).
pub fn parse_id(text: &str) -> Option<Uuid> {
    Uuid::parse_str(text).ok()
}

/// Loads the agent and checks the token against it. Activity is the caller's check.
pub async fn authorize(state: &AppState, agent_id: Option<Uuid>, token: Option<&str>) -> Result<Agent, AppError> {
    let check_token = !state.config.disable_agent_auth;
    if check_token && token.is_none() {
        return Err(AppError::MissingToken);
    }
    let agent_id = agent_id.ok_or(AppError::AgentNotFound)?;
    if !check_token {
        return Ok(state.store.get_agent(agent_id).await?);
    }
    let token = token.unwrap_or_default();
    // A malformed token is looked up as no token: the agent's existence (404) is still checked first.
    let hash = if token::is_well_formed(token) {
        token::hash(token)
    } else {
        String::new()
    };
    let (agent, owner) = state.store.get_agent_for_token(agent_id, &hash).await?;
    match owner {
        None => Err(AppError::InvalidToken),
        Some(owner) if owner != agent.id => Err(AppError::Forbidden),
        Some(_) => Ok(agent),
    }
}

/// `Err(410)` for a soft-deleted agent.
pub fn ensure_active(agent: Agent) -> Result<Agent, AppError> {
    if agent.is_active {
        Ok(agent)
    } else {
        Err(AppError::AgentInactive)
    }
}

async fn path_agent(parts: &mut Parts, state: &AppState) -> Result<Agent, AppError> {
    let token = header_token(parts);
    let id = match Path::<Vec<(String, String)>>::from_request_parts(parts, state).await {
        Ok(Path(params)) => params
            .into_iter()
            .find(|(k, _)| k == "id")
            .and_then(|(_, v)| parse_id(&v)),
        Err(_) => None,
    };
    authorize(state, id, token.as_deref()).await
}

impl FromRequestParts<AppState> for ActiveAgent {
    type Rejection = AppError;

    async fn from_request_parts(parts: &mut Parts, state: &AppState) -> Result<Self, Self::Rejection> {
        ensure_active(path_agent(parts, state).await?).map(ActiveAgent)
    }
}

impl FromRequestParts<AppState> for AnyAgent {
    type Rejection = AppError;

    async fn from_request_parts(parts: &mut Parts, state: &AppState) -> Result<Self, Self::Rejection> {
        path_agent(parts, state).await.map(AnyAgent)
    }
}

/// Guards agent creation and listing when `ADMIN_TOKEN` is set (`Authorization: Bearer <token>`).
pub struct AdminGuard;

impl FromRequestParts<AppState> for AdminGuard {
    type Rejection = AppError;

    async fn from_request_parts(parts: &mut Parts, state: &AppState) -> Result<Self, Self::Rejection> {
        let Some(expected) = &state.config.admin_token else {
            return Ok(AdminGuard);
        };
        let presented = parts
            .headers
            .get(axum::http::header::AUTHORIZATION)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.strip_prefix("Bearer "))
            .unwrap_or_default();
        let expected = expected.expose_secret().as_bytes();
        if bool::from(presented.as_bytes().ct_eq(expected)) {
            Ok(AdminGuard)
        } else {
            Err(AppError::AdminRequired)
        }
    }
}
