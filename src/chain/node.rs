//! What the money path asks of a chain's node, as a trait (`Node`): the balances and nonces the transfer service
//! reads, the fees and gas it quotes, the simulation it judges a call by, and the broadcast; and what the watcher
//! reads to settle what was sent (the head, receipts in a batch, a transaction, an x402 authorization's state and
//! log). `impl Node for ChainClient` (in `client.rs`, beside the client's timeout, retry and caches) is the node over
//! JSON-RPC, and the only implementation of these reads: `ChainClient` has no inherent twin of them. The unit tests
//! of `transfers::tests` script one (`Script`), so the send path's branches (a nonce too low, a refusal and the nonce
//! filled, a simulation that reverts) and the watcher's settling run without anvil or a fault proxy.

use std::time::Duration;

use alloy::primitives::{Address, B256, Bytes, TxHash, U256};
use async_trait::async_trait;
use serde_json::Value;

use super::authorizations::AuthorizationLog;
use super::error::ChainError;
use super::fees::Fees;
use super::simulate::{SimCall, SimMethod, Simulated, SimulationError};
use super::tx::{ReceiptInfo, TxInfo};
use crate::domain::asset::Asset;
use crate::domain::chain::ChainInfo;

/// A chain's node as the transfer service and the watcher use it (see `impl Node for ChainClient` for what each call
/// does over JSON-RPC).
#[async_trait]
pub trait Node: Send + Sync {
    fn info(&self) -> &'static ChainInfo;
    fn name(&self) -> &'static str {
        self.info().name
    }
    /// Blocks on top of the including block (counting it) before a transaction counts as confirmed
    /// (`CONFIRMATIONS_<CHAIN>`).
    fn confirmations(&self) -> u64;
    /// The latest block number.
    async fn block_number(&self) -> Result<u64, ChainError>;
    async fn balance(&self, address: Address) -> Result<U256, ChainError>;
    async fn token_balance(&self, owner: Address, token: &Asset) -> Result<U256, ChainError>;
    async fn pending_nonce(&self, address: Address) -> Result<u64, ChainError>;
    async fn mined_nonce(&self, address: Address) -> Result<u64, ChainError>;
    /// The wallet's mined nonce, then its native balance, read in that order: every transaction of the wallet below
    /// that nonce is in the balance, so a reservation holds against it only the transfers at or above it (a transfer
    /// the node mined is not counted twice while the watcher has yet to settle it; one mined after the first read
    /// stays held).
    async fn mined_nonce_then_balance(&self, address: Address) -> Result<(u64, U256), ChainError> {
        let mined = self.mined_nonce(address).await?;
        Ok((mined, self.balance(address).await?))
    }
    async fn fees(&self) -> Result<Fees, ChainError>;
    async fn recent_fees(&self, max_age: Duration) -> Result<Fees, ChainError>;
    async fn transfer_gas(&self, from: Address, to: Address, value: U256) -> Result<u64, ChainError>;
    async fn estimate_transfer_gas(&self, from: Address, to: Address, value: U256) -> Result<u64, ChainError>;
    async fn estimate_call_gas(&self, from: Address, to: Address, data: Bytes) -> Result<u64, ChainError>;
    /// An `eth_call` of `data` from `from` to `to` with `gas` at the latest block: `Err` with a refusal when it
    /// reverts or runs out of that gas (the simulation of a transaction about to be signed with that gas limit).
    async fn call_as(&self, from: Address, to: Address, data: Bytes, gas: u64) -> Result<(), ChainError>;
    async fn l1_fee(&self, unsigned: &[u8]) -> Result<U256, ChainError>;
    async fn recent_l1_fee(&self, unsigned: &[u8], max_age: Duration) -> Result<U256, ChainError>;
    async fn simulate(
        &self,
        calls: &[SimCall],
        validate: bool,
        overrides: Option<Value>,
    ) -> Result<(SimMethod, Vec<Simulated>), SimulationError>;
    async fn send_raw(&self, raw: &[u8]) -> Result<TxHash, ChainError>;
    /// A transaction with its receipt and status, or `None` when the node does not know the hash.
    async fn transaction(&self, hash: TxHash) -> Result<Option<TxInfo>, ChainError>;
    /// The receipts of `hashes`, in their order (`None` while a transaction is pending or unknown): the outer error is
    /// the node's (nothing could be read), an inner one that hash's alone.
    async fn receipts(&self, hashes: &[TxHash]) -> Result<Vec<Result<Option<ReceiptInfo>, ChainError>>, ChainError>;
    /// Whether `authorizer`'s EIP-3009 authorization `nonce` on `token` is used or cancelled (x402, §16).
    async fn authorization_state(&self, token: Address, authorizer: Address, nonce: B256) -> Result<bool, ChainError>;
    /// The log saying how that authorization was used or cancelled, in the blocks up to `latest` the node is asked
    /// about, if any.
    async fn authorization_log(
        &self,
        token: Address,
        authorizer: Address,
        nonce: B256,
        latest: u64,
    ) -> Result<Option<AuthorizationLog>, ChainError>;
}
