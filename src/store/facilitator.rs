//! Facilitator tokens (§23): the credentials an x402 resource server presents on an agent's own facilitator
//! endpoints, kept as SHA-256 hashes beside the few characters that tell them apart. A deleted token stays as a row
//! (`deleted_at`), so its hash is never live again.

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use uuid::Uuid;

use super::{AuditEvent, StoreResult};

/// A live facilitator token as it is shown: never its hash.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FacilitatorToken {
    pub id: Uuid,
    pub agent_id: Uuid,
    /// The token's first characters (`fac_` and 8 more).
    pub prefix: String,
    pub created_at: DateTime<Utc>,
    /// When a request last presented it; `None` until one did.
    pub last_used_at: Option<DateTime<Utc>>,
}

/// A token to store: the caller minted it and keeps the plaintext to show once.
#[derive(Debug, Clone)]
pub struct NewFacilitatorToken {
    pub id: Uuid,
    pub agent_id: Uuid,
    /// Lower-case hex SHA-256 of the token (`domain::token::hash`).
    pub token_hash: String,
    pub prefix: String,
}

/// The audit entry of a deletion, given the token deleted.
pub type DeletedAudit<'a> = &'a (dyn Fn(&FacilitatorToken) -> AuditEvent + Send + Sync);

#[async_trait]
pub trait FacilitatorTokenStore: Send + Sync + 'static {
    /// Stores the token (created now, on the store's clock) with `audit`, in one transaction.
    async fn create_facilitator_token(
        &self,
        new: &NewFacilitatorToken,
        audit: &AuditEvent,
    ) -> StoreResult<FacilitatorToken>;
    /// The agent's live tokens, oldest first.
    async fn facilitator_tokens(&self, agent_id: Uuid) -> StoreResult<Vec<FacilitatorToken>>;
    /// Deletes the agent's live token `id` with the audit entry `audit` makes of it, in one transaction; `None`
    /// when the agent has no such live token (unknown, another agent's, or deleted already).
    async fn delete_facilitator_token(
        &self,
        agent_id: Uuid,
        id: Uuid,
        audit: DeletedAudit<'_>,
    ) -> StoreResult<Option<FacilitatorToken>>;
    /// The live token with this hash, whichever agent's (`None`: unknown or deleted); when it is `agent_id`'s, its
    /// `last_used_at` is set to now (a token presented on another agent's endpoints was not used).
    async fn use_facilitator_token(&self, agent_id: Uuid, token_hash: &str) -> StoreResult<Option<FacilitatorToken>>;
}
