//! Authentication, in one place: who is calling and on whose behalf. Every HTTP extractor, the chat endpoints,
//! the streams and the MCP server ask this service; nothing else reads a token or `DISABLE_AGENT_AUTH`.
//!
//! Checks run in the contract's order: token present -> agent exists (404) -> token belongs to it (401/403);
//! whether the agent must be active is the caller's choice (`AgentAccess::Active`), since agent detail also
//! answers for inactive agents. Tokens are looked up by their SHA-256 only; the admin token is compared in
//! constant time.

use std::sync::Arc;

use secrecy::{ExposeSecret, SecretString};
use subtle::ConstantTimeEq;
use uuid::Uuid;

use crate::domain::agent::Agent;
use crate::domain::token;
use crate::store::{Store, StoreError};

/// Why a caller is not let through. Each maps to one API error code.
#[derive(Debug, thiserror::Error)]
pub enum AuthError {
    #[error("no access token was given")]
    MissingToken,
    #[error("the access token is malformed, unknown or revoked")]
    InvalidToken,
    #[error("this token does not belong to the requested resource")]
    Forbidden,
    #[error("the admin token is missing or wrong")]
    AdminRequired,
    #[error("the agent does not exist")]
    AgentNotFound,
    #[error("the agent is inactive (deleted)")]
    AgentInactive,
    #[error("storage error: {0}")]
    Store(StoreError),
}

impl AuthError {
    /// The API's error code for this refusal.
    pub fn code(&self) -> &'static str {
        match self {
            AuthError::MissingToken => "missing_token",
            AuthError::InvalidToken => "invalid_token",
            AuthError::Forbidden => "forbidden",
            AuthError::AdminRequired => "unauthorized",
            AuthError::AgentNotFound => "agent_not_found",
            AuthError::AgentInactive => "agent_inactive",
            AuthError::Store(_) => "internal_error",
        }
    }
}

impl From<StoreError> for AuthError {
    fn from(err: StoreError) -> Self {
        match err {
            StoreError::AgentNotFound => AuthError::AgentNotFound,
            other => AuthError::Store(other),
        }
    }
}

/// Whether a call may reach an inactive (soft-deleted) agent.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AgentAccess {
    /// Every agent-scoped call: an inactive agent answers 410.
    Active,
    /// Agent detail: inactive agents are shown too.
    AnyState,
}

/// A proven agent token, kept as its hash: a session (MCP) re-checks it on every call, so a reissue or a deletion
/// ends its access at once.
#[derive(Debug, Clone)]
pub struct AgentSession {
    agent_id: Uuid,
    token_hash: String,
}

impl AgentSession {
    pub fn agent_id(&self) -> Uuid {
        self.agent_id
    }
}

/// The authentication service: the store for token lookups and the two settings that change how it checks.
#[derive(Clone)]
pub struct Authenticator {
    store: Arc<dyn Store>,
    /// `DISABLE_AGENT_AUTH` (development only): agent tokens are not required.
    agent_auth_disabled: bool,
    admin_token: Option<SecretString>,
}

impl Authenticator {
    pub fn new(store: Arc<dyn Store>, agent_auth_disabled: bool, admin_token: Option<SecretString>) -> Self {
        Authenticator {
            store,
            agent_auth_disabled,
            admin_token,
        }
    }

    /// The first check of every agent-scoped call, before its body is read: a token must be present.
    pub fn require_token(&self, token: Option<&str>) -> Result<(), AuthError> {
        if token.is_none() && !self.agent_auth_disabled {
            return Err(AuthError::MissingToken);
        }
        Ok(())
    }

    /// Loads the agent `agent_id` (`None`: a malformed id, i.e. unknown) and checks that `token` is its live token.
    pub async fn agent(
        &self,
        agent_id: Option<Uuid>,
        token: Option<&str>,
        access: AgentAccess,
    ) -> Result<Agent, AuthError> {
        self.require_token(token)?;
        let agent_id = agent_id.ok_or(AuthError::AgentNotFound)?;
        let agent = if self.agent_auth_disabled {
            self.store.get_agent(agent_id).await?
        } else {
            // A malformed token is looked up as no token: the agent's existence (404) is still checked first.
            let hash = token
                .filter(|t| token::is_well_formed(t))
                .map(token::hash)
                .unwrap_or_default();
            let (agent, owner) = self.store.get_agent_for_token(agent_id, &hash).await?;
            match owner {
                None => return Err(AuthError::InvalidToken),
                Some(owner) if owner != agent.id => return Err(AuthError::Forbidden),
                Some(_) => agent,
            }
        };
        if access == AgentAccess::Active && !agent.is_active {
            return Err(AuthError::AgentInactive);
        }
        Ok(agent)
    }

    /// Opens a session from a token alone (MCP): the token must be live and its agent active.
    pub async fn open_session(&self, token: &str) -> Result<(AgentSession, Agent), AuthError> {
        let token = token.trim();
        if token.is_empty() {
            return Err(AuthError::MissingToken);
        }
        if !token::is_well_formed(token) {
            return Err(AuthError::InvalidToken);
        }
        let token_hash = token::hash(token);
        let agent_id = self
            .store
            .agent_for_token(&token_hash)
            .await?
            .ok_or(AuthError::InvalidToken)?;
        let session = AgentSession { agent_id, token_hash };
        let agent = self.session_agent(&session).await?;
        Ok((session, agent))
    }

    /// The session's agent, loaded afresh: its token still live, the agent still active.
    pub async fn session_agent(&self, session: &AgentSession) -> Result<Agent, AuthError> {
        match self.store.agent_for_token(&session.token_hash).await? {
            Some(owner) if owner == session.agent_id => {}
            _ => return Err(AuthError::InvalidToken),
        }
        let agent = self.store.get_agent(session.agent_id).await?;
        if !agent.is_active {
            return Err(AuthError::AgentInactive);
        }
        Ok(agent)
    }

    /// Operator calls (creating and listing agents): open when no `ADMIN_TOKEN` is set, else its bearer token.
    pub fn admin(&self, bearer: Option<&str>) -> Result<(), AuthError> {
        let Some(expected) = &self.admin_token else {
            return Ok(());
        };
        let presented = bearer.unwrap_or_default().as_bytes();
        if bool::from(presented.ct_eq(expected.expose_secret().as_bytes())) {
            Ok(())
        } else {
            Err(AuthError::AdminRequired)
        }
    }
}
