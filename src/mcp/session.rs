//! Who an MCP session acts for: one agent, identified by its access token. Only the token's hash is kept, and the
//! agent is loaded again for every listing and call, so a changed cap or capability applies at once and a
//! deactivated agent or a revoked (reissued) token is refused.

use uuid::Uuid;

use crate::domain::agent::Agent;
use crate::domain::token;
use crate::state::AppState;
use crate::store::StoreError;

/// Why a token does not (or no longer) authorize the session.
#[derive(Debug, thiserror::Error)]
pub enum SessionError {
    #[error("no access token was given")]
    MissingToken,
    #[error("the access token is malformed, unknown or revoked")]
    InvalidToken,
    #[error("the agent no longer exists")]
    AgentNotFound,
    #[error("the agent is inactive (deleted)")]
    AgentInactive,
    #[error("storage error: {0}")]
    Store(StoreError),
}

impl SessionError {
    /// The API's error code for this refusal.
    pub fn code(&self) -> &'static str {
        match self {
            SessionError::MissingToken => "missing_token",
            SessionError::InvalidToken => "invalid_token",
            SessionError::AgentNotFound => "agent_not_found",
            SessionError::AgentInactive => "agent_inactive",
            SessionError::Store(_) => "internal_error",
        }
    }
}

impl From<StoreError> for SessionError {
    fn from(err: StoreError) -> Self {
        match err {
            StoreError::AgentNotFound => SessionError::AgentNotFound,
            other => SessionError::Store(other),
        }
    }
}

impl From<SessionError> for crate::http::error::AppError {
    fn from(err: SessionError) -> Self {
        use crate::http::error::AppError;
        match err {
            SessionError::MissingToken => AppError::MissingToken,
            SessionError::InvalidToken => AppError::InvalidToken,
            SessionError::AgentNotFound => AppError::AgentNotFound,
            SessionError::AgentInactive => AppError::AgentInactive,
            SessionError::Store(e) => AppError::from(e),
        }
    }
}

/// An authenticated session: the agent's id and the hash of the token that proved it.
#[derive(Debug, Clone)]
pub struct Session {
    agent_id: Uuid,
    token_hash: String,
}

impl Session {
    /// Checks a plaintext token: well-formed, live, its agent existing and active.
    pub async fn authenticate(state: &AppState, token: &str) -> Result<(Session, Agent), SessionError> {
        let token = token.trim();
        if token.is_empty() {
            return Err(SessionError::MissingToken);
        }
        if !token::is_well_formed(token) {
            return Err(SessionError::InvalidToken);
        }
        let token_hash = token::hash(token);
        let agent_id = state
            .store
            .agent_for_token(&token_hash)
            .await?
            .ok_or(SessionError::InvalidToken)?;
        let session = Session { agent_id, token_hash };
        let agent = session.agent(state).await?;
        Ok((session, agent))
    }

    pub fn agent_id(&self) -> Uuid {
        self.agent_id
    }

    /// Loads the agent afresh, checking that the token is still its live token and that it is active.
    pub async fn agent(&self, state: &AppState) -> Result<Agent, SessionError> {
        match state.store.agent_for_token(&self.token_hash).await? {
            Some(owner) if owner == self.agent_id => {}
            _ => return Err(SessionError::InvalidToken),
        }
        let agent = state.store.get_agent(self.agent_id).await?;
        if !agent.is_active {
            return Err(SessionError::AgentInactive);
        }
        Ok(agent)
    }
}
