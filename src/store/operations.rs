//! Sponsored user operations and the bundles that carry them (§22): what the bundler and the settlement of
//! operations read and write, and each chain's sponsor key. A sponsored outflow is a `transactions` row of kind
//! `user_op` (reserved by the one reservation protocol); its sponsorship part is a `user_operations` row.

use alloy::primitives::{Address, U256};
use async_trait::async_trait;
use chrono::{DateTime, Utc};
use uuid::Uuid;

use super::{EventRecord, Message, Settlement, StoreResult};
use crate::vault::EncryptedKey;

/// A signed operation a bundle may carry, as the bundler reads it.
#[derive(Debug, Clone, PartialEq)]
pub struct OpenOperation {
    pub transfer_id: Uuid,
    pub agent_id: Uuid,
    /// The agent's address: the operation's sender.
    pub sender: Address,
    /// Its nonce in the account's EntryPoint sequence (key 0).
    pub nonce: u64,
    /// The signed `PackedUserOperation`, ABI-encoded.
    pub packed: Vec<u8>,
    pub user_op_hash: String,
    /// Its `maxFeePerGas` (a bundle's fee is never above the lowest of its operations').
    pub max_fee_per_gas: u128,
    /// The paymaster approval's end (unix seconds).
    pub valid_until: u64,
    /// The bundle carrying it, once one was signed.
    pub bundle_id: Option<Uuid>,
    /// `signed` or `pending`.
    pub status: String,
    /// What it holds against the cap: the native coin the account moves (its gas is the sponsorship's).
    pub reserved: U256,
    /// The block its reads were made at (`None`: stored before agentd kept it): it can only land after it.
    pub read_block: Option<u64>,
    /// Its agent's operations go in bundles of their own: the agent's key was ever exported, or one of its
    /// operations on this chain failed validation on chain (§22).
    pub alone: bool,
}

/// A `handleOps` transaction the sponsor key signed.
#[derive(Debug, Clone, PartialEq)]
pub struct BundleRecord {
    pub id: Uuid,
    pub chain: String,
    pub nonce: u64,
    pub tx_hash: String,
    pub raw_tx: Vec<u8>,
    pub gas_limit: u64,
    pub max_fee_per_gas: u128,
    /// When this attempt at its nonce was signed (a bundle pending longer than `STUCK_AFTER_SECS` is replaced).
    pub signed_at: DateTime<Utc>,
}

/// What the API shows of a sponsored outflow's sponsorship (§22 `sponsorship`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OperationPart {
    pub user_op_hash: String,
    /// The bundle carrying it, once one was signed.
    pub bundle_hash: Option<String>,
    /// Its `actualGasCost` once mined.
    pub gas_cost: Option<U256>,
}

/// How a sponsored operation settles: its settlement as any transfer's, the transaction its `UserOperationEvent`
/// appeared in, and what it cost the sponsorship.
#[derive(Debug, Clone)]
pub struct OperationSettlement {
    pub settlement: Settlement,
    /// The transaction the event appeared in (none for a dropped operation).
    pub landed_in: Option<String>,
    pub gas_cost: Option<U256>,
    pub event: serde_json::Value,
    pub message: Option<Message>,
}

/// One operation of a round's settlements (`settle_operations`).
#[derive(Debug, Clone)]
pub struct SettlingOperation {
    pub id: Uuid,
    /// Its agent (settlements lock agents in the order of their ids).
    pub agent_id: Uuid,
    pub settlement: OperationSettlement,
}

#[async_trait]
pub trait OperationStore: Send + Sync + 'static {
    /// The chain's sponsor key, if one was made.
    async fn sponsor_key(&self, chain: &str) -> StoreResult<Option<EncryptedKey>>;
    /// Stores `key` as the chain's sponsor key unless one is stored already; answers the stored one (this or an
    /// earlier one): every instance on one database signs with the same key.
    async fn init_sponsor_key(&self, chain: &str, key_id: Uuid, key: &EncryptedKey) -> StoreResult<EncryptedKey>;
    /// The chain's operations still `signed` or `pending`, by agent and nonce; with `in_no_bundle`, only those no
    /// bundle carries.
    async fn open_operations(&self, chain: &str, in_no_bundle: bool) -> StoreResult<Vec<OpenOperation>>;
    /// Records that operation `transfer_id`'s bundle carries the agent key's EIP-7702 authorization at the wallet's
    /// `nonce` (`rlp`: the signed authorization), under the agent's lock, only while the agent has no transaction of
    /// its own open on `chain`, the store counts no wallet nonce past `nonce`, and the operation is still open.
    /// From then until the operation settles no transaction of the wallet is signed on the chain (§22). `false`
    /// (nothing recorded) otherwise: the operation waits.
    async fn designate(
        &self,
        (transfer_id, agent_id, chain): (Uuid, Uuid, &str),
        nonce: u64,
        rlp: &[u8],
    ) -> StoreResult<bool>;
    /// The next nonce of the chain's sponsor key the store counts (one more than its newest bundle's).
    async fn next_bundle_nonce(&self, chain: &str) -> StoreResult<Option<u64>>;
    /// Stores a round's signed bundles, each named as the carrier of its operations, in one transaction; those
    /// still `signed` become `pending` (their `transfer.pending` events) once the bundles are recorded, before any
    /// is broadcast.
    async fn record_bundles(&self, bundles: &[(BundleRecord, Vec<Uuid>)]) -> StoreResult<()>;
    /// Settles a round's sponsored operations in one write transaction (agents locked in the order of their ids): each
    /// as `TransferStore::settle_transaction`, with the transaction it landed in and its gas cost; one that landed
    /// carrying the designation (`designate`) moves the wallet's nonce counter past its authorization's. Answers, in
    /// `batch`'s order, each one's event; `None` for one that was no longer open.
    async fn settle_operations(&self, batch: &[SettlingOperation]) -> StoreResult<Vec<Option<EventRecord>>>;
    /// The sponsorship part of a sponsored outflow (`None` for any other).
    async fn operation_part(&self, transfer_id: Uuid) -> StoreResult<Option<OperationPart>>;
    /// What this service's unsettled operations on `chain` hold of the paymaster's deposit.
    async fn held_of_deposit(&self, chain: &str) -> StoreResult<U256>;
    /// The chain's bundles still `signed` (neither seen mined nor given up), oldest nonce first.
    async fn open_bundles(&self, chain: &str) -> StoreResult<Vec<BundleRecord>>;
    /// A bundle is done with: `mined` (its receipt seen, with what the sponsor paid for it), or `replaced` (its
    /// nonce went to another transaction). Its operations not settled by then are no longer carried by it: each
    /// goes back to waiting for a bundle (or is dropped once its approval runs out). Answers how many went back.
    /// Every bundle of `closing` (id, status, gas cost) in one transaction.
    async fn close_bundles(&self, closing: &[(Uuid, &str, Option<U256>)]) -> StoreResult<u64>;
    /// Replaces the open bundle `old` by `new`, signed at the same nonce (a fee bump, or the operations that can
    /// still land without those that no longer can), in one transaction: `old` becomes `replaced` (it stays an
    /// attempt at its nonce, see `bundle_attempts`), `new` is stored `signed` and carries `operations`; the other
    /// operations `old` carried wait again. `false` (nothing stored) when `old` was no longer open.
    async fn replace_bundle(&self, old: Uuid, new: &BundleRecord, operations: &[Uuid]) -> StoreResult<bool>;
    /// The earlier attempts at `nonce` of the chain's sponsor (bundles `replaced` by a fee bump or a re-signing),
    /// newest first: any of them may still be the one mined.
    async fn bundle_attempts(&self, chain: &str, nonce: u64) -> StoreResult<Vec<BundleRecord>>;
    /// An earlier attempt `landed` of the open bundle `live` was mined: `live` becomes `replaced`, `landed`
    /// `mined` with what the sponsor paid, and the operations `live` carried not settled by then wait again.
    /// Answers how many went back.
    async fn earlier_attempt_mined(&self, live: Uuid, landed: Uuid, gas_cost: U256) -> StoreResult<u64>;
    /// Operation `transfer_id` failed validation in bundle `bundle_hash`, which reverted on chain costing the
    /// sponsor `gas_cost`: that cost counts in its agent's sponsorship, and its agent's operations on the chain are
    /// carried in bundles of their own from then on.
    async fn failed_on_chain(&self, transfer_id: Uuid, bundle_hash: &str, gas_cost: U256) -> StoreResult<()>;
}
