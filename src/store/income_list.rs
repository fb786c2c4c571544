//! Reading an agent's income (§23, `GET /api/agents/{id}/income`): the records of `x402_income` as they stand, newest
//! first, paged like the agent's transactions and filtered by offer and status. The seller writes them
//! (`store::income`); this is only their list.

use alloy::primitives::U256;
use async_trait::async_trait;
use chrono::{DateTime, Utc};
use uuid::Uuid;

use super::StoreResult;

/// Which records a page holds.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct IncomeFilter {
    /// Only the payments of this offer.
    pub offer_id: Option<Uuid>,
    /// Only records in this status (`settling`, `settled`, `failed`, `released`).
    pub status: Option<String>,
}

/// One payment taken, as listed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IncomeRecord {
    pub id: Uuid,
    /// `None`: settled through the agent's own facilitator.
    pub offer_id: Option<Uuid>,
    pub chain: String,
    /// The registry token's symbol.
    pub asset: String,
    pub decimals: u8,
    /// In the token's base units.
    pub amount: U256,
    /// As stored (EIP-55).
    pub payer: String,
    /// The authorization's nonce, 0x-hex.
    pub nonce: String,
    pub status: String,
    /// `agentd` or `external`, once settled.
    pub settled_by: Option<String>,
    pub tx_hash: Option<String>,
    /// What the settlement cost the agent, in wei (`None`: nothing recorded).
    pub fee: Option<U256>,
    pub created_at: DateTime<Utc>,
    pub settled_at: Option<DateTime<Utc>>,
}

#[async_trait]
pub trait IncomeListStore: Send + Sync + 'static {
    /// The agent's income records matching `filter`, newest first, at most `limit`, starting after record `before`;
    /// `None` when `before` is not one of the agent's records.
    async fn income_page(
        &self,
        agent_id: Uuid,
        filter: &IncomeFilter,
        before: Option<Uuid>,
        limit: i64,
    ) -> StoreResult<Option<Vec<IncomeRecord>>>;
}
