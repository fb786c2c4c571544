//! Authentication, in one place: who is calling and on whose behalf. Every HTTP extractor, the chat endpoints,
//! the streams and the MCP server ask this service; nothing else reads a token or `DISABLE_AGENT_AUTH`.
//!
//! Checks run in the contract's order: token present -> agent exists (404) -> token belongs to it (401/403);
//! whether the agent must be active is the caller's choice (`AgentAccess::Active`), since agent detail also
//! answers for inactive agents. Tokens are looked up by their SHA-256 only; the admin token is compared in
//! constant time.

mod facilitator;
mod proofs;
pub mod streams;

use std::sync::Arc;

use secrecy::{ExposeSecret, SecretString};
use subtle::ConstantTimeEq;
use uuid::Uuid;

use crate::domain::agent::Agent;
use crate::domain::token;
use crate::store::{Store, StoreError};

pub use crate::domain::audit::Actor;
pub use proofs::{ProofError, ReissueWith, Reissued};

/// Why a caller is not let through. Each maps to one API error code.
#[derive(Debug, thiserror::Error)]
pub enum AuthError {
    #[error("no access token was given")]
    MissingToken,
    /// No credential on a call that takes the agent token or owner authority: the message names both, so that an
    /// owner is not sent looking for the agent's token (`bearer_ignored`: a bearer was sent to a server without an
    /// admin token, where it proves nothing).
    #[error(
        "no credential was given: this call takes the agent's X-Agent-Access-Token or owner authority \
         (Authorization: Bearer <ADMIN_TOKEN>, or X-Owner-Token from an owner session); where it needs the owner, \
         only owner authority does{}",
        bearer_note(.bearer_ignored)
    )]
    MissingCredential { bearer_ignored: bool },
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
    #[error("the owner token is unknown or expired")]
    InvalidOwnerToken,
    #[error("this change needs the owner's authority (the admin token or an owner session)")]
    OwnerRequired,
    #[error("storage error: {0}")]
    Store(StoreError),
}

fn bearer_note(bearer_ignored: &bool) -> &'static str {
    if *bearer_ignored {
        ". This server sets no ADMIN_TOKEN, so a bearer token proves nothing here"
    } else {
        ""
    }
}

impl AuthError {
    /// The API's error code for this refusal.
    pub fn code(&self) -> &'static str {
        match self {
            AuthError::MissingToken | AuthError::MissingCredential { .. } => "missing_token",
            AuthError::InvalidToken => "invalid_token",
            AuthError::Forbidden => "forbidden",
            AuthError::AdminRequired => "unauthorized",
            AuthError::AgentNotFound => "agent_not_found",
            AuthError::AgentInactive => "agent_inactive",
            AuthError::InvalidOwnerToken => "invalid_owner_token",
            AuthError::OwnerRequired => "owner_required",
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

/// Owner authority a request proved: the operator's admin token, or a session of one of the agent's owners.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum OwnerAuthority {
    Admin,
    Owner { address: alloy::primitives::Address },
}

/// A live owner session (`X-Owner-Token`), as the store keeps it (by the token's hash).
#[derive(Debug, Clone)]
pub struct OwnerSession {
    pub agent_id: Uuid,
    pub address: alloy::primitives::Address,
    /// The chain on which the address owns the agent (`None`: any, for sessions opened before it was recorded).
    pub chain: Option<String>,
    pub expires_at: chrono::DateTime<chrono::Utc>,
}

impl OwnerSession {
    /// Whether the session's address is still the agent's owner on its chain (docs/api.md §15): an owner removed or
    /// replaced ends the sessions it opened, whatever they would be used for.
    pub fn holds_for(&self, agent: &Agent) -> bool {
        match &self.chain {
            Some(chain) => agent.owner_addresses.get(chain) == Some(&self.address),
            None => agent.owner_addresses.values().any(|owner| *owner == self.address),
        }
    }
}

/// The credentials a request carried, as given (checked by `Authenticator::caller`).
#[derive(Debug, Clone, Copy, Default)]
pub struct Credentials<'a> {
    /// `X-Agent-Access-Token`.
    pub agent_token: Option<&'a str>,
    /// `Authorization: Bearer …` (the admin token).
    pub bearer: Option<&'a str>,
    /// `X-Owner-Token` (an owner session).
    pub owner_token: Option<&'a str>,
}

/// The caller of an agent-scoped endpoint: the agent, and which credentials proved the right to act on it.
#[derive(Debug, Clone)]
pub struct Caller {
    pub agent: Agent,
    /// The agent's own live token was presented (or agent auth is disabled in development).
    pub agent_token: bool,
    /// Owner authority, when the request proved it.
    pub owner: Option<OwnerAuthority>,
    /// Guarded agents refuse loosenings made with the agent token alone (docs/api.md §10).
    pub guarded: bool,
    /// The hash of the agent token presented, for the reservation to check again (`None`: none presented, or agent
    /// auth disabled in development).
    pub token_hash: Option<String>,
}

impl Caller {
    /// Who acts, for the audit log: the owner's authority wins over the agent token presented beside it.
    pub fn actor(&self) -> Actor {
        match self.owner {
            Some(OwnerAuthority::Admin) => Actor::Admin,
            Some(OwnerAuthority::Owner { .. }) => Actor::Owner,
            None => Actor::Agent,
        }
    }

    /// A loosening of the agent's guardrails: on a guarded agent only its owner's authority may make it.
    pub fn require_owner_if_guarded(&self) -> Result<(), AuthError> {
        if self.guarded && self.owner.is_none() {
            return Err(AuthError::OwnerRequired);
        }
        Ok(())
    }

    /// Owner authority, whether or not the agent is guarded (approvals, reactivation of a guarded agent …).
    pub fn require_owner(&self) -> Result<(), AuthError> {
        if self.owner.is_none() {
            return Err(AuthError::OwnerRequired);
        }
        Ok(())
    }

    /// Endpoints that act as the agent (chat, transfers, conversations) take its token: owner authority alone is
    /// not enough there.
    pub fn require_agent_token(&self) -> Result<(), AuthError> {
        if !self.agent_token {
            return Err(AuthError::MissingToken);
        }
        Ok(())
    }
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

    /// The proven token's hash.
    pub fn token_hash(&self) -> &str {
        &self.token_hash
    }
}

/// The authentication service: the store for token lookups and the two settings that change how it checks.
#[derive(Clone)]
pub struct Authenticator {
    store: Arc<dyn Store>,
    /// `DISABLE_AGENT_AUTH` (development only): agent tokens are not required.
    agent_auth_disabled: bool,
    admin_token: Option<SecretString>,
    /// What the service reads the time on (the system's clock outside tests).
    clock: Arc<dyn crate::domain::clock::Clock>,
}

impl Authenticator {
    pub fn new(store: Arc<dyn Store>, agent_auth_disabled: bool, admin_token: Option<SecretString>) -> Self {
        Authenticator {
            store,
            agent_auth_disabled,
            admin_token,
            clock: Arc::new(crate::domain::clock::SystemClock),
        }
    }

    /// The same service reading the time on `clock` (a test's, which it can move ahead).
    pub fn with_clock(mut self, clock: Arc<dyn crate::domain::clock::Clock>) -> Self {
        self.clock = clock;
        self
    }

    /// The first check of every agent-scoped call, before its body is read: a token must be present.
    pub fn require_token(&self, token: Option<&str>) -> Result<(), AuthError> {
        if token.is_none() && !self.agent_auth_disabled {
            return Err(AuthError::MissingToken);
        }
        Ok(())
    }

    /// Loads the agent `agent_id` (`None`: a malformed id, i.e. unknown) and checks that `token` is its live token:
    /// `caller` with the agent token as the only credential.
    pub async fn agent(
        &self,
        agent_id: Option<Uuid>,
        token: Option<&str>,
        access: AgentAccess,
    ) -> Result<Agent, AuthError> {
        // Only the agent's token is taken here: a missing one is named as such.
        self.require_token(token)?;
        let credentials = Credentials {
            agent_token: token,
            ..Credentials::default()
        };
        Ok(self.caller(agent_id, credentials, access).await?.agent)
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

    /// Whether the agent is guarded: an admin token is configured, or the agent has owner addresses.
    pub fn is_guarded(&self, agent: &Agent) -> bool {
        self.admin_token.is_some() || !agent.owner_addresses.is_empty()
    }

    /// Checks an agent-scoped call that may carry the agent token, owner authority, or both, in the contract's
    /// order: some credential present -> agent exists (404) -> each credential presented belongs to it (401/403)
    /// -> active (410, unless `access` allows inactive agents). A credential that is presented must be valid: a
    /// wrong one is refused even beside a good one.
    pub async fn caller(
        &self,
        agent_id: Option<Uuid>,
        credentials: Credentials<'_>,
        access: AgentAccess,
    ) -> Result<Caller, AuthError> {
        // Without a configured admin token a bearer proves nothing, so it does not count as a credential.
        let bearer = credentials.bearer.filter(|_| self.admin_token.is_some());
        if credentials.agent_token.is_none() && bearer.is_none() && credentials.owner_token.is_none() {
            self.require_token(None).map_err(|_| AuthError::MissingCredential {
                bearer_ignored: credentials.bearer.is_some(),
            })?;
        }
        let agent_id = agent_id.ok_or(AuthError::AgentNotFound)?;
        let token_hash = credentials
            .agent_token
            .filter(|t| token::is_well_formed(t))
            .map(token::hash)
            .unwrap_or_default();
        let (agent, token_owner) = self.store.get_agent_for_token(agent_id, &token_hash).await?;
        let mut owner = None;
        if let Some(bearer) = bearer {
            self.admin(Some(bearer))?;
            owner = Some(OwnerAuthority::Admin);
        }
        if let Some(owner_token) = credentials.owner_token {
            let session = self.owner_session(owner_token).await?;
            if session.agent_id != agent.id {
                return Err(AuthError::Forbidden);
            }
            if !session.holds_for(&agent) {
                return Err(AuthError::InvalidOwnerToken);
            }
            owner.get_or_insert(OwnerAuthority::Owner {
                address: session.address,
            });
        }
        let agent_token = match credentials.agent_token {
            _ if self.agent_auth_disabled => true,
            None => false,
            Some(_) => match token_owner {
                None => return Err(AuthError::InvalidToken),
                Some(owner_id) if owner_id != agent.id => return Err(AuthError::Forbidden),
                Some(_) => true,
            },
        };
        if access == AgentAccess::Active && !agent.is_active {
            return Err(AuthError::AgentInactive);
        }
        let guarded = self.is_guarded(&agent);
        let token_hash = self.token_to_check(credentials.agent_token);
        Ok(Caller {
            agent,
            agent_token,
            owner,
            guarded,
            token_hash,
        })
    }

    /// The hash of an agent token that a money-moving step checks again in its own transaction; none when agent
    /// auth is disabled (development), where no token is required.
    pub fn token_to_check(&self, token: Option<&str>) -> Option<String> {
        token.filter(|_| !self.agent_auth_disabled).map(token::hash)
    }

    /// The live owner session behind an `X-Owner-Token`.
    /// Sessions are issued by `POST /api/agents/{id}/owner-session` (Sign-In with Ethereum) and looked up by the
    /// token's SHA-256; an unknown, malformed or expired token proves nothing.
    pub async fn owner_session(&self, owner_token: &str) -> Result<OwnerSession, AuthError> {
        if !token::is_well_formed_prefixed(owner_token, token::OWNER_PREFIX) {
            return Err(AuthError::InvalidOwnerToken);
        }
        let session = self
            .store
            .owner_session(&token::hash(owner_token))
            .await?
            .filter(|s| s.expires_at > self.clock.now())
            .ok_or(AuthError::InvalidOwnerToken)?;
        Ok(OwnerSession {
            agent_id: session.agent_id,
            address: session.address,
            chain: session.chain,
            expires_at: session.expires_at,
        })
    }

    /// Whether an `ADMIN_TOKEN` is configured (endpoints only an operator may ever use refuse every caller without).
    pub fn has_admin_token(&self) -> bool {
        self.admin_token.is_some()
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
