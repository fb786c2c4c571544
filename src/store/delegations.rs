//! On-chain delegations registered per agent and chain (§21): what the HTTP layer and the revocation watcher read
//! and write. A delegation is known by its chain and hash; its row outlives a `DELETE`.

use alloy::primitives::{Address, B256};
use async_trait::async_trait;
use chrono::{DateTime, Utc};
use uuid::Uuid;

use super::{AuditEvent, EventRecord, StoreResult};
use crate::domain::delegation::Status;

/// A registered delegation as stored.
#[derive(Debug, Clone, PartialEq)]
pub struct DelegationRecord {
    pub id: Uuid,
    pub agent_id: Uuid,
    pub chain: String,
    pub hash: B256,
    pub delegator: Address,
    /// The framework's JSON form as registered (signature included).
    pub delegation: serde_json::Value,
    /// `Active`, `Revoked` or `Removed` (`Expired` is read from the timestamp caveat, never stored).
    pub status: Status,
    pub created_at: DateTime<Utc>,
    pub revoked_at: Option<DateTime<Utc>>,
}

/// What registering came to.
#[derive(Debug, Clone, PartialEq)]
pub enum Registration {
    /// Stored, or a removed or revoked one of the same agent made active again by owner authority.
    Added(DelegationRecord),
    /// The chain and hash are known already (409 `delegation_exists`).
    Exists,
}

#[async_trait]
pub trait DelegationStore: Send + Sync + 'static {
    /// Stores `new` (status `active`) with `audit`, in one transaction, unless its chain and hash are known: then a
    /// removed or revoked delegation of the same agent is made active again when `owner` (owner authority) asks,
    /// keeping its id and taking `new`'s JSON form; anything else is `Exists`.
    async fn add_delegation(
        &self,
        new: &DelegationRecord,
        owner: bool,
        audit: &AuditEvent,
    ) -> StoreResult<Registration>;
    /// The agent's delegations, oldest first, removed ones included.
    async fn list_delegations(&self, agent_id: Uuid) -> StoreResult<Vec<DelegationRecord>>;
    /// One of the agent's delegations (`None`: unknown, or another agent's).
    async fn get_delegation(&self, agent_id: Uuid, id: Uuid) -> StoreResult<Option<DelegationRecord>>;
    /// Marks it `removed` with `audit`; `None` for an unknown id, `Some(false)` when it was removed already
    /// (nothing written).
    async fn remove_delegation(&self, agent_id: Uuid, id: Uuid, audit: &AuditEvent) -> StoreResult<Option<bool>>;
    /// What this service's redemptions of delegation `id` in `token` (`None`: the native coin) hold that the chain
    /// may not count yet: those whose nonce the delegate's wallet had not used at `mined_nonce`, in any status that
    /// may spend (§21 `available`).
    async fn unmined_redemptions(
        &self,
        id: Uuid,
        token: Option<alloy::primitives::Address>,
        mined_nonce: u64,
    ) -> StoreResult<alloy::primitives::U256>;
    /// The `active` delegations on `chain`, for the revocation watcher.
    async fn active_delegations(&self, chain: &str) -> StoreResult<Vec<DelegationRecord>>;
    /// `active` -> `revoked` once: records the time, `audit` and the `delegation_revoked` stream event (the
    /// webhook event follows from the audit entry) in one transaction, then announces the event. `None` when it
    /// was no longer active (noticed elsewhere, or removed).
    async fn revoke_delegation(&self, id: Uuid, audit: &AuditEvent) -> StoreResult<Option<EventRecord>>;
}
