//! Persistence behind one `Store` trait, with SQLite and PostgreSQL implementations chosen by URL scheme.

mod locks;
mod postgres;
mod rows;
mod sql;
mod sqlite;

use std::collections::BTreeMap;

use alloy::primitives::{Address, U256};
use async_trait::async_trait;
use chrono::{DateTime, Utc};
use uuid::Uuid;

pub use postgres::{EVENTS_CHANNEL, PgStore};
pub use sqlite::SqliteStore;

use crate::domain::agent::{Agent, Capability};
use crate::domain::transaction::StoredTx;
use crate::vault::EncryptedKey;

/// Storage failures. The database's own message stays in the log.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    #[error("agent not found")]
    AgentNotFound,
    #[error("conversation not found")]
    ConversationNotFound,
    #[error("database error: {0}")]
    Database(#[from] sqlx::Error),
    #[error("migration error: {0}")]
    Migrate(#[from] sqlx::migrate::MigrateError),
    #[error("corrupt row: {0}")]
    Corrupt(String),
    #[error("signing failed: {0}")]
    Signing(String),
}

pub type StoreResult<T> = Result<T, StoreError>;

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

/// An audit record: who did what to which agent (never secrets).
#[derive(Debug, Clone)]
pub struct AuditEvent {
    pub agent_id: Uuid,
    pub action: &'static str,
    pub actor: String,
    pub detail: serde_json::Value,
}

/// A conversation summary.
#[derive(Debug, Clone, PartialEq)]
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

/// A transfer to reserve: the cap check, nonce allocation and insert happen in one database transaction.
#[derive(Debug, Clone)]
pub struct TransferRequest {
    pub id: Uuid,
    pub agent_id: Uuid,
    pub chain: String,
    pub conversation_id: Option<Uuid>,
    pub from: Address,
    pub to: Address,
    pub value_wei: U256,
    pub gas_limit: u64,
    pub max_fee_per_gas: u128,
    /// `value + gas_limit * max_fee_per_gas`.
    pub reserved_wei: U256,
    /// The node's pending nonce, used when the store has none yet (or to move past transactions sent elsewhere).
    pub node_nonce: Option<u64>,
}

/// A signed transaction ready to store: EIP-2718 bytes and the 0x hash.
#[derive(Clone)]
pub struct SignedTx {
    pub raw: Vec<u8>,
    pub hash: String,
}

/// Signs the transfer for a nonce, inside the reserving transaction.
pub type SignFn<'a> = &'a (dyn Fn(u64) -> Result<SignedTx, String> + Send + Sync);

/// The outcome of a reservation.
#[derive(Debug)]
pub enum Reservation {
    Reserved(Box<StoredTx>),
    CapExceeded { cap: U256, spent: U256 },
}

/// How a transfer ended, as the watcher saw it.
#[derive(Debug, Clone)]
pub struct Settlement {
    pub status: crate::domain::transaction::TxState,
    pub block_number: Option<u64>,
    pub gas_used: Option<u64>,
    pub actual_cost_wei: Option<U256>,
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

/// Held while one (agent, chain) sends: reserve -> sign -> store -> broadcast is not interleaved with another send,
/// so a refused broadcast can give its nonce back without leaving a gap. Dropping it releases the lock.
pub trait SendGuard: Send {}

/// The persistence operations of the service.
#[async_trait]
pub trait Store: Send + Sync + 'static {
    async fn ping(&self) -> StoreResult<()>;

    async fn create_agent(&self, new: &NewAgent) -> StoreResult<()>;
    /// Newest first; without wallet and owner addresses.
    async fn list_agents(&self, limit: i64, offset: i64) -> StoreResult<Vec<Agent>>;
    async fn get_agent(&self, id: Uuid) -> StoreResult<Agent>;
    /// The agent, and the agent that owns the live token with this hash (if any), read together.
    async fn get_agent_for_token(&self, id: Uuid, token_hash: &str) -> StoreResult<(Agent, Option<Uuid>)>;
    /// Applies the update; `wallet_address` is the agent's address, recorded for newly added chains.
    async fn update_agent(&self, id: Uuid, update: &AgentUpdate, wallet_address: Address) -> StoreResult<Agent>;
    /// Soft delete; `false` when it was already inactive.
    async fn deactivate_agent(&self, id: Uuid) -> StoreResult<bool>;

    /// The agent owning a live token with this hash.
    async fn agent_for_token(&self, token_hash: &str) -> StoreResult<Option<Uuid>>;
    async fn wallet_key(&self, agent_id: Uuid) -> StoreResult<EncryptedKey>;

    async fn insert_challenge(&self, challenge: &Challenge) -> StoreResult<()>;
    async fn get_challenge(&self, nonce: &str) -> StoreResult<Option<Challenge>>;
    /// Atomically consumes the proof, revokes every live token of the agent and stores the new hash.
    /// `false` when the proof was no longer valid (token superseded, challenge used meanwhile).
    async fn reissue_token(&self, agent_id: Uuid, proof: ReissueProof<'_>, new_hash: &str) -> StoreResult<bool>;

    async fn insert_audit(&self, event: &AuditEvent) -> StoreResult<()>;

    async fn create_conversation(&self, conversation: &Conversation) -> StoreResult<()>;
    async fn get_conversation(&self, id: Uuid) -> StoreResult<Conversation>;
    /// Newest first.
    async fn list_conversations(&self, agent_id: Uuid) -> StoreResult<Vec<Conversation>>;
    /// Deletes the conversation and its messages; `false` when it did not exist.
    async fn delete_conversation(&self, id: Uuid) -> StoreResult<bool>;
    /// Appends a message and marks the conversation as updated.
    async fn insert_message(&self, message: &Message) -> StoreResult<()>;
    /// The newest `limit` messages, returned oldest first.
    async fn recent_messages(&self, conversation_id: Uuid, limit: i64) -> StoreResult<Vec<Message>>;

    /// Newest first, optionally for one chain.
    async fn list_transactions(&self, agent_id: Uuid, chain: Option<&str>, limit: i64) -> StoreResult<Vec<StoredTx>>;
    /// What counts against the cap per chain (actual costs, reservations of open transfers).
    async fn spent_by_chain(&self, agent_id: Uuid) -> StoreResult<BTreeMap<String, U256>>;

    /// Stored transfers per status (for metrics).
    async fn count_transactions_by_status(&self) -> StoreResult<Vec<(String, i64)>>;
    /// Serialises sends of one (agent, chain), across instances on PostgreSQL.
    async fn lock_sender(&self, agent_id: Uuid, chain: &str) -> StoreResult<Box<dyn SendGuard>>;
    /// The next nonce the store would hand out, if it has one.
    async fn next_nonce(&self, agent_id: Uuid, chain: &str) -> StoreResult<Option<u64>>;
    /// In one transaction: check the cap, allocate the nonce, sign, insert the transfer as `signed`.
    async fn reserve_transfer(&self, request: &TransferRequest, sign: SignFn<'_>) -> StoreResult<Reservation>;
    /// `signed` -> `pending` once a node accepted it.
    async fn mark_broadcast(&self, id: Uuid) -> StoreResult<()>;
    /// Removes a transfer no node accepted and gives its nonce back (it is the newest, under the send lock);
    /// `resync_to` moves the next nonce up to the node's count.
    async fn discard_transfer(&self, id: Uuid, resync_to: Option<u64>) -> StoreResult<()>;
    /// Transfers still `signed` or `pending` on a chain, by nonce.
    async fn open_transactions(&self, chain: &str) -> StoreResult<Vec<StoredTx>>;
    /// Settles an open transfer, storing its event and conversation message in the same transaction.
    /// `None` when it was no longer open (settled elsewhere).
    async fn settle_transaction(
        &self,
        id: Uuid,
        settlement: &Settlement,
        event: serde_json::Value,
        message: Option<&Message>,
    ) -> StoreResult<Option<EventRecord>>;
    /// Events of a conversation after `after_id`, oldest first.
    async fn events_after(&self, conversation_id: Uuid, after_id: i64, limit: i64) -> StoreResult<Vec<EventRecord>>;
    async fn event_by_id(&self, id: i64) -> StoreResult<Option<EventRecord>>;
    /// Whether this instance may watch `chain` now (one watcher per chain across instances); the guard holds it.
    async fn try_lock_watcher(&self, chain: &str) -> StoreResult<Option<Box<dyn SendGuard>>>;
}
