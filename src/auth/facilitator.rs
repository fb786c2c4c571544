//! Facilitator tokens (§23): the one credential an agent's own x402 facilitator endpoints take, an
//! `Authorization: Bearer fac_…` its owner created for an x402 resource server. Good for this agent's facilitator
//! only: neither the agent token nor owner authority opens those endpoints, and a facilitator token opens nothing
//! else. Checked in the contract's order: present -> agent exists (404) -> the token is live (401) and this agent's
//! (403) -> agent active (410).

use uuid::Uuid;

use super::{AuthError, Authenticator};
use crate::domain::agent::Agent;
use crate::domain::token;

impl Authenticator {
    /// The agent `agent_id` (`None`: a malformed id, i.e. unknown) whose facilitator `bearer` presents, its
    /// `last_used_at` moved to now. `DISABLE_AGENT_AUTH` does not apply: it waives the agent token only.
    pub async fn facilitator(&self, agent_id: Option<Uuid>, bearer: Option<&str>) -> Result<Agent, AuthError> {
        let bearer = bearer.ok_or(AuthError::MissingToken)?;
        let agent = self.store.get_agent(agent_id.ok_or(AuthError::AgentNotFound)?).await?;
        if !token::is_well_formed_prefixed(bearer, token::FACILITATOR_PREFIX) {
            return Err(AuthError::InvalidToken);
        }
        let used = self
            .store
            .use_facilitator_token(agent.id, &token::hash(bearer))
            .await?
            .ok_or(AuthError::InvalidToken)?;
        if used.agent_id != agent.id {
            return Err(AuthError::Forbidden);
        }
        if !agent.is_active {
            return Err(AuthError::AgentInactive);
        }
        Ok(agent)
    }
}
