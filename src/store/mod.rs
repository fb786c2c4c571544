//! Persistence behind one `Store` trait, with SQLite and PostgreSQL implementations chosen by URL scheme.

mod postgres;
mod rows;
mod sql;
mod sqlite;

use std::collections::BTreeMap;

use alloy::primitives::{Address, U256};
use async_trait::async_trait;
use chrono::{DateTime, Utc};
use uuid::Uuid;

pub use postgres::PgStore;
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

/// The persistence operations of the service.
#[async_trait]
pub trait Store: Send + Sync + 'static {
    async fn ping(&self) -> StoreResult<()>;

    async fn create_agent(&self, new: &NewAgent) -> StoreResult<()>;
    /// Newest first; without wallet and owner addresses.
    async fn list_agents(&self, limit: i64, offset: i64) -> StoreResult<Vec<Agent>>;
    async fn get_agent(&self, id: Uuid) -> StoreResult<Agent>;
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
}
