//! The values the store reads and writes: what callers hand in (`NewAgent`, `TransferRequest`, ...) and the
//! records they get back (`Conversation`, `Message`, `EventRecord`, ...). Plain data, no I/O.

use std::collections::BTreeMap;

use alloy::primitives::{Address, U256};
use chrono::{DateTime, Utc};
use uuid::Uuid;

use crate::domain::agent::{Agent, Capability};
use crate::domain::transaction::StoredTx;
use crate::vault::EncryptedKey;

/// Everything written when an agent is created, in one transaction.
#[derive(Debug)]
pub struct NewAgent {
    pub agent: Agent,
    pub key: EncryptedKey,
    pub token_hash: String,
}

/// A partial update; `None` leaves the field as it is.
#[derive(Debug, Default)]
pub struct AgentUpdate {
    pub name: Option<String>,
    pub description: Option<Option<String>>,
    pub chains: Option<Vec<String>>,
    pub capabilities: Option<Vec<Capability>>,
    pub spending_cap_wei: Option<U256>,
    pub owner_addresses: Option<BTreeMap<String, Address>>,
}

impl AgentUpdate {
    /// Sets the agent's own columns that the update names (addresses live in their own tables).
    pub fn apply_to(&self, agent: &mut Agent) {
        if let Some(name) = &self.name {
            agent.name = name.clone();
        }
        if let Some(description) = &self.description {
            agent.description = description.clone();
        }
        if let Some(chains) = &self.chains {
            agent.chains = chains.clone();
        }
        if let Some(capabilities) = &self.capabilities {
            agent.capabilities = capabilities.clone();
        }
        if let Some(cap) = self.spending_cap_wei {
            agent.spending_cap_wei = cap;
        }
    }
}

/// A stored reissue challenge.
#[derive(Debug, Clone)]
pub struct Challenge {
    pub nonce: String,
    pub agent_id: Uuid,
    pub message: String,
    pub expires_at: DateTime<Utc>,
    pub used: bool,
}

/// How a reissue proves ownership; checked and consumed inside the same transaction as the token swap.
#[derive(Debug)]
pub enum ReissueProof<'a> {
    /// The hash of the current token, which must be live and belong to the agent.
    CurrentToken { token_hash: &'a str },
    /// A challenge nonce, which must be unused.
    Challenge { nonce: &'a str },
}

/// A stored Sign-In with Ethereum challenge for an owner session (single use).
#[derive(Debug, Clone)]
pub struct OwnerChallenge {
    pub nonce: String,
    pub agent_id: Uuid,
    pub chain: String,
    /// The address the message names.
    pub address: Address,
    pub message: String,
    pub expires_at: DateTime<Utc>,
    pub used: bool,
}

/// An owner session, stored by the hash of its `own_` token only.
#[derive(Debug, Clone)]
pub struct OwnerSessionRecord {
    pub token_hash: String,
    pub agent_id: Uuid,
    pub address: Address,
    pub expires_at: DateTime<Utc>,
    /// The chain on which `address` is the agent's owner; the session holds while it still is (`None`: a session
    /// opened before this was recorded, which holds while the address is an owner on any chain).
    pub chain: Option<String>,
}

/// An audit record to append: who did what to which agent (never secrets). Its action is its detail's.
#[derive(Debug, Clone, PartialEq)]
pub struct AuditEvent {
    pub agent_id: Uuid,
    pub actor: crate::domain::audit::Actor,
    pub detail: crate::domain::audit::Detail,
}

impl AuditEvent {
    pub fn new(agent_id: Uuid, actor: crate::domain::audit::Actor, detail: crate::domain::audit::Detail) -> Self {
        AuditEvent {
            agent_id,
            actor,
            detail,
        }
    }

    /// What the entry records (`agent_created`, ...): its detail's action.
    pub fn action(&self) -> crate::domain::audit::Action {
        self.detail.action()
    }
}

/// An outflow's audit entry as a round writes it (`AuditStore::record_outflows`).
#[derive(Debug)]
pub struct OutflowEntry {
    /// The transfer the node accepted: moved `signed` -> `pending` with the entry.
    pub accepted: Option<Uuid>,
    /// The transfer stored with its entry kept (`TransferRequest::owed`): this entry takes the kept one's place, and
    /// is left out when `AuditStore::write_owed` wrote the kept one already.
    pub owes: Option<Uuid>,
    pub event: AuditEvent,
}

/// A conversation summary (read straight from its row).
#[derive(Debug, Clone, PartialEq, sqlx::FromRow)]
pub struct Conversation {
    pub id: Uuid,
    pub agent_id: Uuid,
    pub title: String,
    pub created_at: DateTime<Utc>,
    pub updated_at: DateTime<Utc>,
    pub message_count: i64,
}

/// One stored message. `chain_calls` is the JSON array of the turn's tool calls (empty for user messages).
#[derive(Debug, Clone, PartialEq)]
pub struct Message {
    pub id: Uuid,
    pub conversation_id: Uuid,
    pub role: Role,
    pub content: String,
    pub chain_calls: serde_json::Value,
    pub tokens_used: i64,
    pub created_at: DateTime<Utc>,
}

/// Who wrote a message.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Role {
    User,
    Assistant,
}

impl Role {
    pub fn as_str(self) -> &'static str {
        match self {
            Role::User => "user",
            Role::Assistant => "assistant",
        }
    }
}

/// A signed transaction ready to store: EIP-2718 bytes and the 0x hash.
#[derive(Clone)]
pub struct SignedTx {
    pub raw: Vec<u8>,
    pub hash: String,
}

/// Re-encrypts one agent's wallet key under the new master key, inside the rotating transaction.
pub type ResealFn<'a> = &'a (dyn Fn(Uuid, &EncryptedKey) -> Result<EncryptedKey, String> + Send + Sync);

/// A signature made outside every database transaction (§20: a network HSM answers in tens of milliseconds, and
/// SQLite has one writer), at the nonce a reservation named (`None`: an outflow that uses no nonce of the agent's).
/// The store takes it only if its decision, taken again under the agent's lock, reserves at that same nonce.
#[derive(Clone)]
pub struct Presigned {
    pub nonce: Option<u64>,
    pub signed: SignedTx,
}

/// What a reserving transaction read for a request (`Reserving::facts`).
#[derive(Debug, Clone)]
pub struct Gathered {
    pub facts: crate::domain::decision::Facts,
    /// The allowances the service counted for the agent on the chain (a call's counts start from them, §18).
    pub counted: Vec<crate::domain::call::ledger::Remaining>,
}

/// A `Decision::Reserve` to apply: the nonce to hand out (`None`: an outflow that uses none of the agent's), what
/// counted against the cap when the facts were read, and what an approved transfer held while it waited.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Reserve {
    pub nonce: Option<u64>,
    pub spent: U256,
    pub release: U256,
}

/// The outcome of a reservation.
#[derive(Debug)]
pub enum Reservation {
    Reserved(Box<StoredTx>),
    /// Allowed at this nonce, but not signed for it: nothing was written. Sign at `nonce` (outside the database,
    /// still under the agent's send lock) and reserve again with the signature.
    Sign {
        nonce: Option<u64>,
    },
    /// Stored as waiting for an owner's approval, holding its reservation; no nonce, no signature.
    AwaitingApproval(Box<super::Approval>),
    /// Refused: nothing was written.
    Refused(crate::domain::decision::Refusal),
}

/// What became of a request to fill the nonce of a transfer that can no longer land.
#[derive(Debug)]
pub enum NonceFill {
    /// The filling send, stored as `signed` at the transfer's nonce.
    Stored(Box<StoredTx>),
    /// Nothing to fill: the transfer is settled, or another open transfer already holds its nonce.
    NotNeeded,
    /// The filling send's fee, beyond what the transfer held, does not fit in the cap.
    CapExceeded,
}

/// How a transfer ended, as the watcher saw it.
#[derive(Debug, Clone)]
pub struct Settlement {
    pub status: crate::domain::transaction::TxState,
    /// The hash of the attempt that landed, when it is not the latest one (an earlier attempt of a replaced
    /// transfer): it becomes the transfer's `tx_hash` again (§14).
    pub landed: Option<String>,
    pub block_number: Option<u64>,
    pub gas_used: Option<u64>,
    pub actual_cost_wei: Option<U256>,
    /// A mined call's receipt against its simulation (§18): what its `call_outflows` gain or lose, per asset.
    pub counts: Vec<CountChange>,
}

/// How much more (or less) a mined call counts of one asset than its simulation did, the asset spelled as
/// `call_outflows.asset` (a registry symbol, or a token's lower-case 0x address).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CountChange {
    pub asset: String,
    pub more: U256,
    pub less: U256,
}

/// One transfer's settlement with the event and conversation message stored with it (`settle_transactions`).
#[derive(Debug, Clone)]
pub struct Settling {
    pub id: Uuid,
    /// The transfer's agent (settlements lock agents in the order of their ids).
    pub agent_id: Uuid,
    pub settlement: Settlement,
    pub event: serde_json::Value,
    pub message: Option<Message>,
}

/// A stored event (a confirmation), with its increasing id.
#[derive(Debug, Clone, PartialEq)]
pub struct EventRecord {
    pub id: i64,
    pub conversation_id: Option<Uuid>,
    pub agent_id: Uuid,
    pub kind: String,
    pub payload: serde_json::Value,
}

/// What became of a request to replace a transfer's latest attempt (a fee bump or a cancel, §14).
#[derive(Debug)]
pub enum Replacement {
    /// The new attempt is stored as the latest (status `signed` until the node takes it); the transfer as it is now.
    Stored(Box<StoredTx>),
    /// The transfer settled, or another attempt replaced the one named, meanwhile: nothing was stored.
    Changed,
    /// The transfer's reservation does not cover the new attempt, and it may not grow.
    NotCovered,
    /// The reservation had to grow for the new attempt (a cancel), and the cap cannot hold it.
    CapExceeded { cap: U256, spent: U256 },
}
