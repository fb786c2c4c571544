//! Persistence behind small traits, one per aggregate, implemented once in SQL (`sql::SqlStore`) over a SQLite or a
//! PostgreSQL `Backend` chosen by URL scheme. `Store` is all of them together, so callers hold one
//! `Arc<dyn Store>`; bring the methods into scope with `use crate::store::prelude::*;`.

mod approvals;
mod audit;
mod connections;
pub mod delegations;
pub mod facilitator;
mod feed;
mod idempotency;
pub mod income;
pub mod income_list;
mod locks;
mod model;
pub mod offers;
pub mod operations;
mod postgres;
mod shared;
mod speedups;
pub mod sponsorship;
mod sql;
mod sqlite;
pub mod webhooks;

use std::collections::BTreeMap;
use std::sync::Arc;

use alloy::primitives::{Address, U256};
use anyhow::Context;
use async_trait::async_trait;
use secrecy::ExposeSecret;
use uuid::Uuid;

pub use crate::domain::outflow::{CallCheck, Clearance, NativeFunds, TransferRequest};
pub use approvals::{Approval, Closing};
pub use audit::verify_audit;
pub use connections::PoolStatus;
pub use delegations::DelegationStore;
pub use facilitator::FacilitatorTokenStore;
pub use feed::EventFeed;
pub use idempotency::{ClaimFence, ClaimOutcome, IdempotencyStore, KEY_LIFETIME, KeyClaim, Mandate};
pub use income::IncomeStore;
pub use income_list::IncomeListStore;
pub use model::{
    AgentUpdate, AuditEvent, Challenge, Conversation, CountChange, EventRecord, Gathered, Message, NewAgent, NonceFill,
    OutflowEntry, OwnerChallenge, OwnerSessionRecord, Presigned, ReissueProof, Replacement, ResealFn, Reservation,
    Reserve, Role, Settlement, Settling, SignedTx,
};
pub use offers::OfferStore;
pub use operations::OperationStore;
pub use postgres::PgStore;
pub use sponsorship::SponsorshipStore;
pub use sql::{Backend, SqlStore};
pub use sqlite::SqliteStore;
pub use webhooks::WebhookStore;

use crate::config::{Config, DatabaseKind};
use crate::domain::agent::Agent;
use crate::domain::audit::AuditEntry;
use crate::domain::transaction::{Attempt, StoredTx};
use crate::vault::{EncryptedKey, KeyCheck, SealedAuditKey};

/// Storage failures. The database's own message stays in the log.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    #[error("agent not found")]
    AgentNotFound,
    #[error("conversation not found")]
    ConversationNotFound,
    #[error("database error: {0}")]
    Database(#[source] sqlx::Error),
    #[error("migration error: {0}")]
    Migrate(#[from] sqlx::migrate::MigrateError),
    #[error("corrupt row: {0}")]
    Corrupt(String),
    #[error("a wallet key could not be re-encrypted: {0}")]
    Reseal(String),
    #[error("the database's master key was rotated: restart this instance with the new ENCRYPTION_KEY")]
    KeyRotated,
}

pub type StoreResult<T> = Result<T, StoreError>;

impl From<sqlx::Error> for StoreError {
    /// Notes connections that ran out on the way, for `/health` and the log (`HealthStore::connections`).
    fn from(error: sqlx::Error) -> Self {
        connections::note(&error);
        StoreError::Database(error)
    }
}

/// The most outflows one settling transaction takes (the watcher's transfers, the bundler's operations; a round's
/// landed ones go in several): on SQLite every writer waits for it, a send's reservation round too, so it is held
/// for milliseconds, not for a whole busy second's receipts (hundreds at a time held the writer for about 45 ms in
/// `bench sends`, the rows' p99; a busy tick's operations 100-480 ms in `bench sponsored`).
pub const SETTLED_PER_COMMIT: usize = 32;

/// Held while one (agent, chain) sends: reserve -> sign -> store -> broadcast is not interleaved with another send,
/// so a refused broadcast can give its nonce back without leaving a gap. Dropping it releases the lock.
pub trait SendGuard: Send {}

/// The traits, for `use crate::store::prelude::*;` wherever a `Store`'s methods are called.
pub mod prelude {
    pub use super::OperationStore;
    pub use super::{
        AgentStore, AttemptStore, AuditStore, ConversationStore, DelegationStore, EventStore, FacilitatorTokenStore,
        HealthStore, IdempotencyStore, KeyStore, OwnerStore, PolicyStore, PurgeStore, SettlementStore,
        SponsorshipStore, Store, TokenStore, TransferStore, WebhookStore,
    };
    pub use super::{IncomeListStore, IncomeStore, OfferStore};
}

/// Every aggregate's operations: what the service holds as `Arc<dyn Store>`.
pub trait Store:
    HealthStore
    + AgentStore
    + TokenStore
    + ConversationStore
    + TransferStore
    + AttemptStore
    + SettlementStore
    + EventStore
    + AuditStore
    + OwnerStore
    + PolicyStore
    + IdempotencyStore
    + KeyStore
    + PurgeStore
    + WebhookStore
    + DelegationStore
    + OperationStore
    + SponsorshipStore
    + FacilitatorTokenStore
    + OfferStore
    + IncomeListStore
    + IncomeStore
{
}

impl<T> Store for T where
    T: HealthStore
        + AgentStore
        + TokenStore
        + ConversationStore
        + TransferStore
        + AttemptStore
        + SettlementStore
        + EventStore
        + AuditStore
        + OwnerStore
        + PolicyStore
        + IdempotencyStore
        + KeyStore
        + PurgeStore
        + WebhookStore
        + DelegationStore
        + OperationStore
        + SponsorshipStore
        + FacilitatorTokenStore
        + OfferStore
        + IncomeListStore
        + IncomeStore
{
}

/// What grows with use and is useless past an age (docs/api.md §15), removed by the purge worker.
#[async_trait]
pub trait PurgeStore: Send + Sync + 'static {
    /// Deletes what has outlived its use as of `now`: expired owner sessions, challenges expired for a while,
    /// idempotency records past their 24 h window. Returns the rows removed.
    async fn purge(&self, now: chrono::DateTime<chrono::Utc>) -> StoreResult<u64>;
}

/// Whether the database answers.
#[async_trait]
pub trait HealthStore: Send + Sync + 'static {
    async fn ping(&self) -> StoreResult<()>;
    /// The connection pool's size and use, and when its connections ran out (read without a connection).
    fn connections(&self) -> PoolStatus;
    /// Whether a commit is on stable storage before it returns (SQLite `synchronous` FULL or EXTRA, PostgreSQL
    /// `synchronous_commit` not off), read from a pooled connection: a reservation must survive a power loss once
    /// its transaction is broadcast.
    async fn durable_commits(&self) -> StoreResult<bool>;
}

/// Agents with their wallet keys, wallet and owner addresses.
#[async_trait]
pub trait AgentStore: Send + Sync + 'static {
    /// The agent, its key, addresses and first token, in one transaction.
    /// Stores the agent, its key and token, and `audit`, in one transaction.
    async fn create_agent(&self, new: &NewAgent, audit: &AuditEvent) -> StoreResult<()>;
    /// Newest first; without wallet and owner addresses.
    async fn list_agents(&self, limit: i64, offset: i64) -> StoreResult<Vec<Agent>>;
    async fn get_agent(&self, id: Uuid) -> StoreResult<Agent>;
    /// The agent, and the agent that owns the live token with this hash (if any), read together.
    async fn get_agent_for_token(&self, id: Uuid, token_hash: &str) -> StoreResult<(Agent, Option<Uuid>)>;
    /// Applies the update; `wallet_address` is the agent's address, recorded for newly added chains.
    /// `audit` is given the agent before and after and says what to record, in the same transaction.
    async fn update_agent(
        &self,
        id: Uuid,
        update: &AgentUpdate,
        wallet_address: Address,
        audit: AuditOf<'_>,
    ) -> StoreResult<Agent>;
    /// Soft delete; `false` when it was already inactive.
    async fn deactivate_agent(&self, id: Uuid, audit: &AuditEvent) -> StoreResult<bool>;
    async fn wallet_key(&self, agent_id: Uuid) -> StoreResult<EncryptedKey>;
}

/// Access tokens (hashes only) and reissue challenges.
#[async_trait]
pub trait TokenStore: Send + Sync + 'static {
    /// The agent owning a live token with this hash.
    async fn agent_for_token(&self, token_hash: &str) -> StoreResult<Option<Uuid>>;
    async fn insert_challenge(&self, challenge: &Challenge) -> StoreResult<()>;
    async fn get_challenge(&self, nonce: &str) -> StoreResult<Option<Challenge>>;
    /// Atomically consumes the proof, revokes every live token of the agent and stores the new hash.
    /// `false` when the proof was no longer valid (token superseded, challenge used meanwhile).
    async fn reissue_token(
        &self,
        agent_id: Uuid,
        proof: ReissueProof<'_>,
        new_hash: &str,
        audit: &AuditEvent,
    ) -> StoreResult<bool>;
}

/// Conversations and their messages.
#[async_trait]
pub trait ConversationStore: Send + Sync + 'static {
    async fn create_conversation(&self, conversation: &Conversation) -> StoreResult<()>;
    /// A new conversation with its first message, in one write (a chat turn's start: one commit instead of two).
    async fn start_conversation(&self, conversation: &Conversation, first: &Message) -> StoreResult<()>;
    async fn get_conversation(&self, id: Uuid) -> StoreResult<Conversation>;
    /// Newest first, at most `limit`, starting after the conversation `before` (the last of the previous page);
    /// `None` when `before` is not one of the agent's conversations.
    async fn list_conversations(
        &self,
        agent_id: Uuid,
        before: Option<Uuid>,
        limit: i64,
    ) -> StoreResult<Option<Vec<Conversation>>>;
    /// Deletes the conversation and its messages; `false` when it did not exist.
    async fn delete_conversation(&self, id: Uuid) -> StoreResult<bool>;
    /// Appends a message and marks the conversation as updated.
    async fn insert_message(&self, message: &Message) -> StoreResult<()>;
    /// The newest `limit` messages, returned oldest first.
    async fn recent_messages(&self, conversation_id: Uuid, limit: i64) -> StoreResult<Vec<Message>>;
}

/// Outgoing transfers: reservations under the cap, nonces, send and watcher locks, settlement.
#[async_trait]
pub trait TransferStore: Send + Sync + 'static {
    /// Newest first, optionally for one chain.
    async fn list_transactions(&self, agent_id: Uuid, chain: Option<&str>, limit: i64) -> StoreResult<Vec<StoredTx>>;
    /// What counts against the cap per chain (actual costs, reservations of open transfers).
    async fn spent_by_chain(&self, agent_id: Uuid) -> StoreResult<BTreeMap<String, U256>>;
    /// Stored transfers per status (for metrics).
    async fn count_transactions_by_status(&self) -> StoreResult<Vec<(String, i64)>>;
    /// Serialises sends of one (agent, chain), across instances on PostgreSQL.
    async fn lock_sender(&self, agent_id: Uuid, chain: &str) -> StoreResult<Box<dyn SendGuard>>;
    /// `lock_sender` of each of `senders` (sorted, without repeats), taken in that order and held as one guard: a
    /// round's locks (on PostgreSQL one statement takes what is free, one releases them all).
    async fn lock_senders(&self, senders: &[(Uuid, &str)]) -> StoreResult<Box<dyn SendGuard>>;
    /// The next nonce the store would hand out, if it has one.
    async fn next_nonce(&self, agent_id: Uuid, chain: &str) -> StoreResult<Option<u64>>;
    /// Opens a reserving transaction (`Reserving`): the facts of each request it reads stay still until it commits,
    /// so what `domain::decision::decide` answers on them holds when it is applied. Dropped without `commit`, it
    /// writes nothing (a preview, a refusal, a decision that waits for its signature).
    async fn reserving(&self) -> StoreResult<Box<dyn Reserving + '_>>;
    /// How many reservation rounds may write at once: one where the database has one writer (SQLite), a few
    /// where transactions of different agents run side by side (PostgreSQL).
    fn round_leaders(&self) -> usize;
    /// Whether reservation rounds run on a thread of their own (`transfers::rounds`): where a connection is not
    /// bound to the runtime that opened it (SQLite's connections are threads of their own, spoken to over channels).
    fn rounds_on_own_thread(&self) -> bool;
    /// `signed` -> `pending` once a node accepted it.
    async fn mark_broadcast(&self, id: Uuid) -> StoreResult<()>;
    /// Removes a transfer no node accepted and gives its nonce back (it is the newest, under the send lock);
    /// `resync_to` moves the next nonce up to the node's count.
    async fn discard_transfer(&self, id: Uuid, resync_to: Option<u64>) -> StoreResult<()>;
    /// Removes a transfer no node accepted (broadcast after the send lock was released) and gives its reservation
    /// back; its nonce too when it is still the newest. When later nonces were handed out meanwhile, `fill` (a
    /// zero-value send to the wallet itself, `signed` beforehand at the transfer's nonce) is stored as `signed` in
    /// the same transaction, so that they do not wait behind a nonce nothing uses: `Some(fill)`.
    async fn discard_or_fill(
        &self,
        id: Uuid,
        fill: &TransferRequest,
        signed: &Presigned,
    ) -> StoreResult<Option<StoredTx>>;
    /// Stores a zero-value send to the wallet itself (`signed` beforehand at the nonce of the open transfer `gap`,
    /// which can no longer land), so that later nonces do not wait behind it. Its fee is held out of `gap`'s
    /// reservation (any excess against the cap); the two stay open until one of them lands.
    async fn fill_nonce(&self, gap: Uuid, fill: &TransferRequest, signed: &Presigned) -> StoreResult<NonceFill>;
    /// Transfers still `signed` or `pending` on a chain, by nonce.
    async fn open_transactions(&self, chain: &str) -> StoreResult<Vec<StoredTx>>;
    /// One agent's transfers still `signed` or `pending` on a chain, by nonce.
    async fn open_transactions_of(&self, agent_id: Uuid, chain: &str) -> StoreResult<Vec<StoredTx>>;
    /// Settles an open transfer, storing its event and conversation message in the same transaction, and hands
    /// the event to the event feed once committed. `None` when it was no longer open (settled elsewhere).
    async fn settle_transaction(
        &self,
        id: Uuid,
        settlement: &Settlement,
        event: serde_json::Value,
        message: Option<&Message>,
    ) -> StoreResult<Option<EventRecord>>;
    /// x402 payments still `signed` or `pending` on a chain (unused authorizations), oldest first.
    async fn open_authorizations(&self, chain: &str) -> StoreResult<Vec<StoredTx>>;
    /// The end of a paid x402 request, in one transaction: the payment `signed` -> `pending` (as `mark_broadcast`,
    /// with its `transfer.pending` event), its answer and settlement merged (as `merge_x402`) where given, then
    /// `accepted` in place of the entry kept with the payment's reservation (left out when `write_owed` wrote that
    /// one already) and `outcome`. One commit between the paid answer and the caller.
    async fn record_paid(
        &self,
        id: Uuid,
        response: Option<serde_json::Value>,
        settlement_tx: Option<String>,
        accepted: Option<&AuditEvent>,
        outcome: &AuditEvent,
    ) -> StoreResult<()>;
    /// Sets what is given of an x402 payment's paid answer and settlement transaction, keeping the rest of its
    /// record as stored (the request path and the watcher each write their part).
    async fn merge_x402(
        &self,
        id: Uuid,
        response: Option<serde_json::Value>,
        settlement_tx: Option<String>,
    ) -> StoreResult<()>;
    /// An open x402 payment whose `validBefore` passed unused becomes `expired`, its reservation released; no
    /// event. `false` when it was no longer open.
    /// `audit` is appended in the same transaction.
    async fn expire_authorization(&self, id: Uuid, audit: &AuditEvent) -> StoreResult<bool>;
    /// Whether this instance may watch `chain` now (one watcher per chain across instances); the guard holds it.
    async fn try_lock_watcher(&self, chain: &str) -> StoreResult<Option<Box<dyn SendGuard>>>;
    /// One of the agent's transfers (`None` for an unknown id or another agent's).
    async fn get_transaction(&self, agent_id: Uuid, id: Uuid) -> StoreResult<Option<StoredTx>>;
    /// A page of the agent's transfers, newest first, after the transfer `before` (`None` when `before` is not one
    /// of the agent's transfers).
    async fn transaction_page(
        &self,
        agent_id: Uuid,
        before: Option<Uuid>,
        limit: i64,
    ) -> StoreResult<Option<Vec<StoredTx>>>;
}

/// One reserving transaction (`TransferStore::reserving`): the store reads the facts of a request under its agent's
/// lock and applies the decision the service took on them in the domain (`TransferRequest::decision_request`,
/// `domain::decision::decide`); it decides nothing itself. A refusal, or a reservation that waits for its signature,
/// is applied by dropping it.
#[async_trait]
pub trait Reserving: Send {
    /// Takes the request's agent's lock (`BEGIN IMMEDIATE` on SQLite, the agent's row on PostgreSQL) and reads what
    /// the decision reads: the standing, the cap and what counts against it, the funds' holds, the gate, the
    /// store's nonce for a transaction, and for a call the allowances counted before it (`Gathered::counted`).
    /// `Facts::call_windows` is left empty: see `call_windows`.
    async fn facts(&mut self, request: &TransferRequest) -> StoreResult<Gathered>;
    /// For a call judged by `policy`: the windows of each asset `counts` names and whether its party was paid
    /// before, in `counts` order (`Facts::call_windows`).
    async fn call_windows(
        &mut self,
        request: &TransferRequest,
        counts: &[crate::domain::decision::Counted],
        policy: &crate::domain::policy::Policy,
    ) -> StoreResult<Vec<(crate::domain::decision::Windows, bool)>>;
    /// Applies `Decision::Hold`: stored waiting for an owner's approval, holding its reservation; a call counts in
    /// the windows while it waits (its allowances only once reserved for signing, §18).
    async fn hold(
        &mut self,
        request: &TransferRequest,
        hold: (u64, crate::domain::policy::Holds),
        count: &crate::domain::outflow::CallCount,
    ) -> StoreResult<Approval>;
    /// Applies `Decision::Reserve` with the signature made at its nonce: the nonce handed out, the record stored as
    /// `signed`, its reservation counted against the cap (`spent` as `facts` read it, less `release`), what a call
    /// counts and leaves of the allowances stored, and an approval it carries out closed and audited.
    async fn reserve(
        &mut self,
        request: &TransferRequest,
        reserve: Reserve,
        signed: SignedTx,
        count: &crate::domain::outflow::CallCount,
    ) -> StoreResult<StoredTx>;
    /// `AuditStore::record_outflows` in this transaction: a round's audit entries (and `pending` marks) committed
    /// with the reservations it decided, one commit for both.
    async fn record_outflows(&mut self, records: &[&OutflowEntry]) -> StoreResult<()>;
    /// Commits what was applied, then announces its events.
    async fn commit(self: Box<Self>) -> StoreResult<()>;
}

/// What the confirmation watcher reads and writes once per round for all the open transfers of a chain, however
/// many they are.
#[async_trait]
pub trait SettlementStore: Send + Sync + 'static {
    /// Every attempt of each open (`signed` or `pending`) transfer on `chain`, by transfer, the latest first (as
    /// `AttemptStore::attempts`), read in one statement.
    async fn open_attempts(&self, chain: &str) -> StoreResult<BTreeMap<Uuid, Vec<Attempt>>>;
    /// Settles each of `batch` as `TransferStore::settle_transaction` does, all in one transaction (agents locked
    /// in the order of their ids), and hands the events to the event feed once committed; in `batch`'s order,
    /// `None` for a transfer that was no longer open. An error settles none of them.
    async fn settle_transactions(&self, batch: &[Settling]) -> StoreResult<Vec<Option<EventRecord>>>;
}

/// Stored events (confirmations) and the live feed of new ones.
/// The attempts of a transfer at its nonce (§14): fee bumps and cancels replace the latest one; every attempt stays
/// stored, since any of them may land.
#[async_trait]
pub trait AttemptStore: Send + Sync + 'static {
    /// Stores `next` as the latest attempt of open transfer `id` in place of `replaced` (which joins the earlier
    /// ones), as long as the reservation covers `needed`; with `may_grow`, a reservation below it grows within the
    /// cap instead. The transfer goes back to `signed` until the node takes the new attempt (`mark_broadcast`).
    async fn replace_attempt(
        &self,
        id: Uuid,
        replaced: &str,
        next: &Attempt,
        needed: U256,
        may_grow: bool,
    ) -> StoreResult<Replacement>;
    /// The node refused attempt `hash`, the latest of transfer `id`: the one it replaced is the latest again
    /// (`pending`). False when `hash` is no longer the latest.
    async fn withdraw_attempt(&self, id: Uuid, hash: &str) -> StoreResult<bool>;
    /// Every attempt of a transfer, the latest first.
    async fn attempts(&self, id: Uuid) -> StoreResult<Vec<Attempt>>;
    /// The replaced (earlier) attempts' hashes of the agent's transfers, oldest first, by transfer.
    async fn replaced_hashes(&self, agent_id: Uuid) -> StoreResult<BTreeMap<Uuid, Vec<String>>>;
}

#[async_trait]
pub trait EventStore: Send + Sync + 'static {
    /// Events of a conversation after `after_id`, oldest first.
    async fn events_after(&self, conversation_id: Uuid, after_id: i64, limit: i64) -> StoreResult<Vec<EventRecord>>;
    async fn event_by_id(&self, id: i64) -> StoreResult<Option<EventRecord>>;
    /// Events stored from now on by any instance sharing the database, as they commit. SQLite serves it in-process
    /// (one instance per file); PostgreSQL adds `LISTEN/NOTIFY`, and falls back to this instance's events (with an
    /// error in the log) when it cannot listen. The feed may repeat an event; consumers skip ids they have seen.
    async fn event_feed(&self) -> EventFeed;
}

/// Who did what to which agent: one hash chain across all agents (`crate::domain::audit`).
#[async_trait]
pub trait AuditStore: Send + Sync + 'static {
    /// Appends the event to the chain and moves the head, in one transaction serialised with every other append
    /// (SQLite's write lock; PostgreSQL: the head row `FOR UPDATE`).
    /// From now on, entries are hashed under `key` from its `keyed_from` on (set once, at start).
    fn use_audit_key(&self, key: crate::domain::audit::AuditKey);
    async fn insert_audit(&self, event: &AuditEvent) -> StoreResult<()>;
    /// Outflows' audit entries appended in order, each accepted transfer moved `signed` -> `pending` (as
    /// `mark_broadcast`) with its entry, all in one transaction: a round of sends' records, one commit. An entry that
    /// `owes` a kept one takes its place (the kept one is dropped), or is left out when it was written already.
    async fn record_outflows(&self, records: &[&OutflowEntry]) -> StoreResult<()>;
    /// Writes the kept entries (`TransferRequest::owed`) of `chain`'s transfers stored before `cutoff` whose own
    /// entries never came (the process died between the reservation and its entry), each with the transfer's id and
    /// hash as stored, and drops them, in one transaction; the number written. A cheap read when there are none.
    async fn write_owed(&self, chain: &str, cutoff: chrono::DateTime<chrono::Utc>) -> StoreResult<usize>;
    /// The agent's entries newest first, older than the entry `before` when given.
    async fn list_audit(&self, agent_id: Uuid, before: Option<i64>, limit: i64) -> StoreResult<Vec<AuditEntry>>;
    /// Every agent's entries with an id above `after_id`, oldest first (for `agentd audit verify`). Rows written
    /// before the chain began have an empty hash.
    async fn audit_entries_after(&self, after_id: i64, limit: i64) -> StoreResult<Vec<AuditEntry>>;
    /// The chain's head: the newest entry's id and hash (`0` and the genesis hash for an empty chain).
    async fn audit_head(&self) -> StoreResult<(i64, String)>;
    /// The newest entry's id, hash and time, for anchoring the chain's head elsewhere; `None` while the log is empty.
    async fn audit_head_entry(&self) -> StoreResult<Option<(i64, String, chrono::DateTime<chrono::Utc>)>>;
}

/// Owner authority: Sign-In with Ethereum challenges, owner sessions (token hashes only), and reactivation.
#[async_trait]
pub trait OwnerStore: Send + Sync + 'static {
    async fn insert_owner_challenge(&self, challenge: &OwnerChallenge) -> StoreResult<()>;
    async fn get_owner_challenge(&self, nonce: &str) -> StoreResult<Option<OwnerChallenge>>;
    /// Atomically uses the challenge (still unused and unexpired) and stores the session; `false` when the
    /// challenge was no longer usable (used meanwhile).
    async fn open_owner_session(
        &self,
        nonce: &str,
        session: &OwnerSessionRecord,
        audit: &AuditEvent,
    ) -> StoreResult<bool>;
    /// The session with this token hash, if it was ever issued (expired ones included: the caller checks).
    async fn owner_session(&self, token_hash: &str) -> StoreResult<Option<OwnerSessionRecord>>;
    /// Ends the session with this token hash (sign-out); `false` when there was none.
    async fn close_owner_session(&self, token_hash: &str, audit: &AuditEvent) -> StoreResult<bool>;
    /// Marks the agent active again; `false` when it already was.
    async fn reactivate_agent(&self, id: Uuid, audit: &AuditEvent) -> StoreResult<bool>;
}

/// Transfer policies and the transfers held for an owner's approval. Holding and approving happen inside
/// `Reserving` (the same transaction as the cap); these are the reads and the closings.
#[async_trait]
pub trait PolicyStore: Send + Sync + 'static {
    /// The agent's policy (the default when none was set).
    async fn get_policy(&self, agent_id: Uuid) -> StoreResult<crate::domain::policy::Policy>;
    /// The agent's policy and, for each asset whose limits have a rolling window, what the windows count now,
    /// read as the reserving transaction reads them for a decision (§11, §18).
    async fn budget_windows(
        &self,
        agent_id: Uuid,
    ) -> StoreResult<(
        crate::domain::policy::Policy,
        BTreeMap<String, crate::domain::decision::Windows>,
    )>;
    /// The allowances the service counted for the agent on `chain` (§18).
    async fn allowance_ledger(
        &self,
        agent_id: Uuid,
        chain: &str,
    ) -> StoreResult<Vec<crate::domain::call::ledger::Remaining>>;
    async fn put_policy(
        &self,
        agent_id: Uuid,
        policy: &crate::domain::policy::Policy,
        audit: &AuditEvent,
    ) -> StoreResult<()>;
    async fn get_approval(&self, id: Uuid) -> StoreResult<Option<Approval>>;
    /// The agent's transfers still awaiting approval, oldest first.
    async fn waiting_approvals(&self, agent_id: Uuid) -> StoreResult<Vec<Approval>>;
    /// Waiting transfers on `chain` whose `expires_at` has passed at `now`.
    async fn due_approvals(&self, chain: &str, now: chrono::DateTime<chrono::Utc>) -> StoreResult<Vec<Approval>>;
    /// `awaiting_approval` -> `status` (rejected or expired): releases the reservation and stores the
    /// `approval_resolved` event and the audit entry of `by`'s decision (with `reason`, the owner's for a rejection,
    /// when given) in one transaction, then announces the event.
    async fn close_approval(
        &self,
        id: Uuid,
        status: crate::domain::policy::ApprovalStatus,
        by: crate::domain::audit::Actor,
        reason: Option<&str>,
    ) -> StoreResult<Closing>;
    /// `approved` -> `awaiting_approval` again, for an approved transfer the node refused (its sent record was
    /// discarded): it holds its reservation again and a new `approval_required` event is stored and announced.
    /// `false` when it was not approved.
    async fn reopen_approval(&self, id: Uuid) -> StoreResult<bool>;
}

/// The master-key check (`crate::vault::KeyCheck`) and the re-encryption of wallet keys under a new master key.
#[async_trait]
pub trait KeyStore: Send + Sync + 'static {
    async fn key_check(&self) -> StoreResult<Option<KeyCheck>>;
    /// Stores `check` unless a check is stored already; answers the stored one (this or an earlier one).
    async fn init_key_check(&self, check: &KeyCheck) -> StoreResult<KeyCheck>;
    /// One stored wallet key, if any (to vouch for a key in a database written before the check existed).
    async fn any_wallet_key(&self) -> StoreResult<Option<(Uuid, EncryptedKey)>>;
    /// The active agents whose key is in the PKCS#11 token (§20), with their addresses: each must be found there
    /// before the service starts.
    async fn token_keys(&self) -> StoreResult<Vec<(Uuid, Address)>>;
    /// Every wallet key still held in the database (`secp256k1`), active agent or not, by agent id.
    async fn local_keys(&self) -> StoreResult<Vec<(Uuid, EncryptedKey)>>;
    /// Records that agent `agent_id`'s key, of `address`, now lives in the PKCS#11 token: in one update, the scheme
    /// becomes `pkcs11` and the ciphertext and nonce are removed. `false` when the row was no longer a local key of
    /// that address (nothing changed).
    async fn move_key_to_token(&self, agent_id: Uuid, address: Address) -> StoreResult<bool>;
    /// In one transaction, while the stored check is still `from`: every wallet key, the audit key and every waiting
    /// payment's request through `reseal`, and the check replaced by `to`. Answers how many wallet keys moved, or
    /// `None` when the stored check was not `from` (nothing changed); a failing reseal changes nothing either.
    async fn rotate_keys(&self, from: &KeyCheck, to: &KeyCheck, reseal: &Resealers<'_>) -> StoreResult<Option<usize>>;
    /// The audit chain's sealed key, if one was made.
    async fn audit_key(&self) -> StoreResult<Option<SealedAuditKey>>;
    /// Makes the audit key unless one exists: `seal` gets the first entry id it will key (the one after the chain's
    /// current head, read in the write transaction that stores the key, so no entry is appended in between).
    /// Answers the stored key (this or an earlier one).
    async fn create_audit_key(&self, seal: AuditSealFn<'_>) -> StoreResult<SealedAuditKey>;
}

/// What an agent update records in the audit log, from the agent before and after (`None`: nothing changed).
pub type AuditOf<'a> = &'a (dyn Fn(&Agent, &Agent) -> Option<AuditEvent> + Send + Sync);

/// Seals a new audit key keying entries from the given id on.
pub type AuditSealFn<'a> = &'a (dyn Fn(i64) -> SealedAuditKey + Send + Sync);
/// Reseals the audit key under the next master key.
/// Reseals a waiting payment's request (by the payment's id) under the next master key.
pub type RequestResealFn<'a> = &'a (
        dyn Fn(
    Uuid,
    &crate::domain::transaction::SealedRequest,
) -> Result<crate::domain::transaction::SealedRequest, String>
            + Send
            + Sync
    );

/// How `rotate_keys` moves each thing sealed under the master key to the next one.
pub struct Resealers<'a> {
    pub wallet: ResealFn<'a>,
    pub audit: AuditResealFn<'a>,
    pub request: RequestResealFn<'a>,
    pub webhook: WebhookResealFn<'a>,
    pub offer: OfferResealFn<'a>,
}

/// Reseals an offer's upstream headers (by the offer's id, §23) under the next master key.
pub type OfferResealFn<'a> = &'a (dyn Fn(Uuid, &[u8]) -> Result<Vec<u8>, String> + Send + Sync);

/// Reseals a webhook endpoint's secret (by the endpoint's id) under the next master key.
pub type WebhookResealFn<'a> =
    &'a (dyn Fn(Uuid, &crate::vault::SealedSecret) -> Result<crate::vault::SealedSecret, String> + Send + Sync);

pub type AuditResealFn<'a> = &'a (dyn Fn(&SealedAuditKey) -> Result<SealedAuditKey, String> + Send + Sync);

/// Opens the configured database and applies the embedded migrations.
pub async fn open(config: &Config) -> anyhow::Result<Arc<dyn Store>> {
    open_on(config, Arc::new(crate::domain::clock::SystemClock)).await
}

/// `open` with the times the store writes read on `clock` (a test's `ManualClock`).
pub async fn open_on(config: &Config, clock: Arc<dyn crate::domain::clock::Clock>) -> anyhow::Result<Arc<dyn Store>> {
    let url = config.database.url.expose_secret();
    Ok(match &config.database.kind {
        DatabaseKind::Sqlite(path) => {
            let store = SqliteStore::connect(url, path)
                .await
                .context("cannot open the SQLite database")?
                .with_clock(clock);
            store.migrate().await.context("cannot migrate the SQLite database")?;
            Arc::new(store)
        }
        DatabaseKind::Postgres => {
            let store = PgStore::connect(url, config.database.max_connections)
                .await
                .context("cannot connect to PostgreSQL")?
                .with_clock(clock);
            store
                .migrate()
                .await
                .context("cannot migrate the PostgreSQL database")?;
            Arc::new(store)
        }
    })
}
