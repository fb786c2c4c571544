//! Payments an agent takes (§23): the hold written before anything is fetched or settled, its settlement, and what
//! became of it. A payment is taken once — the unique (chain, token, payer, nonce) — and one payment per payer and
//! offer is in flight at a time; the hold carries the settlement's priced gas so that the offer's `gas_per_day` is
//! judged in the same transaction that takes it. The watcher's settlement of the settling transaction (`settle_in`)
//! marks its payment settled or failed with its `payment.received` event and audit entry.

use alloy::primitives::{Address, B256, U256};
use async_trait::async_trait;
use chrono::{DateTime, Utc};
use uuid::Uuid;

use super::{AuditEvent, StoreResult};

/// A payment to hold.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Hold {
    pub id: Uuid,
    pub agent_id: Uuid,
    /// None through the agent's own facilitator.
    pub offer_id: Option<Uuid>,
    pub chain: String,
    pub asset: String,
    pub token: Address,
    pub decimals: u8,
    pub amount: U256,
    pub payer: Address,
    pub nonce: B256,
    pub valid_before: u64,
    /// The keccak of the payment's signature (a repeated settle answers its first outcome).
    pub signature_key: String,
    /// The settlement's gas as priced now (its gas limit times the latest base fee plus the priority fee).
    pub gas: U256,
    /// The settlement's transaction of the agent's, named with the hold before it is recorded, so that a crash
    /// anywhere leaves the two linked (a hold whose transaction was never recorded is let go by the recovery).
    pub transfer_id: Uuid,
}

impl Hold {
    /// The payment as `take_hold` stored it at `at`.
    pub fn taken(&self, at: DateTime<Utc>) -> Income {
        Income {
            id: self.id,
            agent_id: self.agent_id,
            offer_id: self.offer_id,
            chain: self.chain.clone(),
            asset: self.asset.clone(),
            token: self.token,
            decimals: self.decimals,
            amount: self.amount,
            payer: self.payer,
            nonce: self.nonce,
            valid_before: self.valid_before,
            signature_key: self.signature_key.clone(),
            status: IncomeStatus::Settling,
            settled_by: None,
            transfer_id: Some(self.transfer_id),
            tx_hash: None,
            fee: None,
            outcome: None,
            created_at: at,
            settled_at: None,
        }
    }
}

/// What holding came to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Held {
    Taken,
    /// The (chain, token, payer, nonce) is held already, or the payer has a payment of this offer in flight.
    NonceHeld,
    /// The offer's settlements of the last 24 hours and the holds in flight leave less than `gas`.
    GasExhausted,
}

/// A payment's state (§23 `status`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum IncomeStatus {
    Settling,
    Settled,
    Failed,
    Released,
}

impl IncomeStatus {
    pub fn as_str(self) -> &'static str {
        match self {
            IncomeStatus::Settling => "settling",
            IncomeStatus::Settled => "settled",
            IncomeStatus::Failed => "failed",
            IncomeStatus::Released => "released",
        }
    }

    pub fn parse(text: &str) -> Option<Self> {
        match text {
            "settling" => Some(IncomeStatus::Settling),
            "settled" => Some(IncomeStatus::Settled),
            "failed" => Some(IncomeStatus::Failed),
            "released" => Some(IncomeStatus::Released),
            _ => None,
        }
    }
}

/// A payment as stored.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Income {
    pub id: Uuid,
    pub agent_id: Uuid,
    pub offer_id: Option<Uuid>,
    pub chain: String,
    pub asset: String,
    pub token: Address,
    pub decimals: u8,
    pub amount: U256,
    pub payer: Address,
    pub nonce: B256,
    pub valid_before: u64,
    pub signature_key: String,
    pub status: IncomeStatus,
    /// `agentd`, or `external` when someone else's transaction used the authorization.
    pub settled_by: Option<String>,
    /// The settlement's transaction of the agent's (its id in `transactions`), once one is planned.
    pub transfer_id: Option<Uuid>,
    pub tx_hash: Option<String>,
    /// What the settlement cost the agent's gas, in wei.
    pub fee: Option<U256>,
    /// The first settle answer given for it (the facilitator answers a repeat with it).
    pub outcome: Option<serde_json::Value>,
    pub created_at: DateTime<Utc>,
    pub settled_at: Option<DateTime<Utc>>,
}

#[async_trait]
pub trait IncomeStore: Send + Sync + 'static {
    /// Whether one of `payer`'s settlements reverted in the 24 hours before now.
    async fn payer_blocked(&self, payer: Address) -> StoreResult<bool>;
    /// The payment held for (chain, token, payer, nonce), if any.
    async fn income_by_nonce(
        &self,
        chain: &str,
        token: Address,
        payer: Address,
        nonce: B256,
    ) -> StoreResult<Option<Income>>;
    /// What `payer`'s other authorizations of `token` this service holds and has not settled or let go (`settling`).
    async fn held_of_payer(&self, chain: &str, token: Address, payer: Address) -> StoreResult<U256>;
    /// What the offer's settlements cost over the last 24 hours (their fee once mined) and its holds in flight (their
    /// priced gas) — what counts against its `gas_per_day`.
    async fn offer_gas_counted(&self, offer_id: Uuid) -> StoreResult<U256>;
    /// Takes the hold (see `Held`): in one transaction, under the agent's lock, the offer's `gas_per_day` (when it
    /// has one) judged with what it counted, the row inserted or refused by its unique keys.
    async fn take_hold(&self, hold: &Hold, gas_per_day: Option<U256>) -> StoreResult<Held>;
    /// A `settling` payment let go: `released` (its resource failed, a check failed again before signing; nothing
    /// was sent) or `failed` (its settlement reverted, or could not be sent). `false` when it was not settling.
    async fn end_hold(&self, id: Uuid, status: IncomeStatus) -> StoreResult<bool>;
    /// A payment whose authorization the chain shows used by someone else's transaction: `settled`, `settled_by:
    /// "external"`, with its event and audit entry.
    async fn settled_externally(&self, id: Uuid, tx_hash: Option<String>, audit: &AuditEvent) -> StoreResult<bool>;
    /// Keeps the first outcome given for it (a facilitator's settle answer; `"served"` once an offer served it):
    /// `false` when one was kept already.
    async fn keep_outcome(&self, id: Uuid, outcome: &serde_json::Value) -> StoreResult<bool>;
    /// One payment by id.
    async fn income(&self, id: Uuid) -> StoreResult<Option<Income>>;
    /// `settling` payments whose hold is older than `before` (a crash may have left them): the recovery's work.
    async fn stale_holds(&self, before: DateTime<Utc>) -> StoreResult<Vec<Income>>;
    /// Deletes the released and failed holds, and those never taken, whose `validBefore` passed (unix seconds).
    async fn purge_holds(&self, now_unix: u64) -> StoreResult<u64>;
}
