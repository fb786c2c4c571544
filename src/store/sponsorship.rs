//! The operator's gas sponsorship per agent and chain (§22): its daily budget (`per_day`, in wei) and what it
//! counted over the last 24 hours, as the HTTP layer sets and shows them. The reservation step reads the same two
//! figures inside its own transaction (`SqlStore::sponsorship_in`).

use alloy::primitives::U256;
use async_trait::async_trait;
use uuid::Uuid;

use super::{AuditEvent, StoreResult};

/// A sponsorship on one chain: its daily budget and what it paid or holds over the last 24 hours, in wei.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SponsorshipState {
    pub chain: String,
    /// `0` once the operator ended it.
    pub per_day: U256,
    /// Each user operation signed in the last 24 hours and not dropped: its `gas_cost` once mined, else its
    /// `max_cost`.
    pub counted: U256,
}

impl SponsorshipState {
    /// What the sponsorship may still pay today; never below zero (`per_day` lowered under `counted`).
    pub fn left(&self) -> U256 {
        self.per_day.saturating_sub(self.counted)
    }
}

#[async_trait]
pub trait SponsorshipStore: Send + Sync + 'static {
    /// Sets the agent's `per_day` on `chain` (stored or replaced; `counted` is never reset) with `audit`, in one
    /// transaction, and gives the sponsorship as it stands then.
    async fn set_sponsorship(
        &self,
        agent_id: Uuid,
        chain: &str,
        per_day: U256,
        audit: &AuditEvent,
    ) -> StoreResult<SponsorshipState>;
    /// Every chain the operator ever set a sponsorship on for the agent, by chain name, with what it counted now.
    async fn sponsorships(&self, agent_id: Uuid) -> StoreResult<Vec<SponsorshipState>>;
    /// The agent's `per_day` on `chain` alone (`None`: never set), without what it counted: who pays an order's gas
    /// asks only whether a sponsorship is there; the reservation step judges its window under the agent's lock.
    async fn sponsorship_per_day(&self, agent_id: Uuid, chain: &str) -> StoreResult<Option<U256>>;
}
