//! The HTTP face of authentication: extractors that read the credentials a request carries and ask the one
//! authentication service (`crate::auth::Authenticator`) for a verdict. No check is made here.

use axum::extract::{FromRef, FromRequestParts, Path};
use axum::http::request::Parts;
use uuid::Uuid;

use super::error::AppError;
use crate::auth::{AgentAccess, Authenticator};
use crate::domain::agent::Agent;

pub const TOKEN_HEADER: &str = "x-agent-access-token";

/// An active agent whose token the caller presented (every agent-scoped call).
pub struct ActiveAgent(pub Agent);

/// An agent, active or not, whose token the caller presented (agent detail only).
pub struct AnyAgent(pub Agent);

/// The `X-Agent-Access-Token` header as given, if any: for calls whose agent is named in the body or found through
/// another resource (chat, conversations), which authenticate once they know it.
pub struct AgentToken(pub Option<String>);

/// Guards agent creation and listing when `ADMIN_TOKEN` is set (`Authorization: Bearer <token>`).
pub struct AdminGuard;

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

async fn path_agent<S>(parts: &mut Parts, state: &S, access: AgentAccess) -> Result<Agent, AppError>
where
    S: Send + Sync,
    Authenticator: FromRef<S>,
{
    let token = header_token(parts);
    let id = match Path::<Vec<(String, String)>>::from_request_parts(parts, state).await {
        Ok(Path(params)) => params
            .into_iter()
            .find(|(k, _)| k == "id")
            .and_then(|(_, v)| parse_id(&v)),
        Err(_) => None,
    };
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
        let bearer = parts
            .headers
            .get(axum::http::header::AUTHORIZATION)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.strip_prefix("Bearer "));
        Authenticator::from_ref(state).admin(bearer)?;
        Ok(AdminGuard)
    }
}
