//! Who an MCP session acts for: one agent, identified by its access token. The authentication service keeps only
//! the token's hash and loads the agent again for every listing and call, so a changed cap or capability applies at
//! once and a deactivated agent or a revoked (reissued) token is refused.

use uuid::Uuid;

use crate::auth::AgentSession;
pub use crate::auth::AuthError as SessionError;
use crate::domain::agent::Agent;
use crate::state::AppState;

/// An authenticated session of one agent.
#[derive(Debug, Clone)]
pub struct Session(AgentSession);

impl Session {
    /// Checks a plaintext token: well-formed, live, its agent existing and active.
    pub async fn authenticate(state: &AppState, token: &str) -> Result<(Session, Agent), SessionError> {
        let (session, agent) = state.auth.open_session(token).await?;
        Ok((Session(session), agent))
    }

    pub fn agent_id(&self) -> Uuid {
        self.0.agent_id()
    }

    /// Loads the agent afresh, checking that the token is still its live token and that it is active.
    pub async fn agent(&self, state: &AppState) -> Result<Agent, SessionError> {
        state.auth.session_agent(&self.0).await
    }
}
