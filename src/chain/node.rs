//! What the money path asks of a chain's node, as a trait (`Node`): the balances and nonces it reads, the fees and
//! gas it quotes, the simulation it judges a call by, and the broadcast. `ChainClient` is the node over JSON-RPC; the
//! transfer service's unit tests script one (`transfers::tests`), so its branches (a nonce too low, a refusal and
//! the nonce filled, a simulation that reverts) run without anvil or a fault proxy.

use std::time::Duration;

use alloy::primitives::{Address, Bytes, TxHash, U256};
use async_trait::async_trait;
use serde_json::Value;

use super::client::ChainClient;
use super::error::ChainError;
use super::fees::Fees;
use super::simulate::{SimCall, SimMethod, Simulated, SimulationError};
use super::tx::TxInfo;
use crate::domain::asset::Asset;
use crate::domain::chain::ChainInfo;

/// A chain's node as the transfer service uses it (see `ChainClient` for what each call does over JSON-RPC).
#[async_trait]
pub trait Node: Send + Sync {
    fn info(&self) -> &'static ChainInfo;
    fn name(&self) -> &'static str {
        self.info().name
    }
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
    async fn transaction(&self, hash: TxHash) -> Result<Option<TxInfo>, ChainError>;
}

#[async_trait]
impl Node for ChainClient {
    fn info(&self) -> &'static ChainInfo {
        ChainClient::info(self)
    }
    async fn balance(&self, address: Address) -> Result<U256, ChainError> {
        ChainClient::balance(self, address).await
    }
    async fn token_balance(&self, owner: Address, token: &Asset) -> Result<U256, ChainError> {
        ChainClient::token_balance(self, owner, token).await
    }
    async fn pending_nonce(&self, address: Address) -> Result<u64, ChainError> {
        ChainClient::pending_nonce(self, address).await
    }
    async fn mined_nonce(&self, address: Address) -> Result<u64, ChainError> {
        ChainClient::mined_nonce(self, address).await
    }
    async fn mined_nonce_then_balance(&self, address: Address) -> Result<(u64, U256), ChainError> {
        ChainClient::mined_nonce_then_balance(self, address).await
    }
    async fn fees(&self) -> Result<Fees, ChainError> {
        ChainClient::fees(self).await
    }
    async fn recent_fees(&self, max_age: Duration) -> Result<Fees, ChainError> {
        ChainClient::recent_fees(self, max_age).await
    }
    async fn transfer_gas(&self, from: Address, to: Address, value: U256) -> Result<u64, ChainError> {
        ChainClient::transfer_gas(self, from, to, value).await
    }
    async fn estimate_transfer_gas(&self, from: Address, to: Address, value: U256) -> Result<u64, ChainError> {
        ChainClient::estimate_transfer_gas(self, from, to, value).await
    }
    async fn estimate_call_gas(&self, from: Address, to: Address, data: Bytes) -> Result<u64, ChainError> {
        ChainClient::estimate_call_gas(self, from, to, data).await
    }
    async fn call_as(&self, from: Address, to: Address, data: Bytes, gas: u64) -> Result<(), ChainError> {
        let call = crate::chain::authorizations::SettleCall {
            from,
            calldata: data,
            gas,
        };
        ChainClient::settles(self, to, &call).await
    }
    async fn l1_fee(&self, unsigned: &[u8]) -> Result<U256, ChainError> {
        ChainClient::l1_fee(self, unsigned).await
    }
    async fn recent_l1_fee(&self, unsigned: &[u8], max_age: Duration) -> Result<U256, ChainError> {
        ChainClient::recent_l1_fee(self, unsigned, max_age).await
    }
    async fn simulate(
        &self,
        calls: &[SimCall],
        validate: bool,
        overrides: Option<Value>,
    ) -> Result<(SimMethod, Vec<Simulated>), SimulationError> {
        ChainClient::simulate(self, calls, validate, overrides).await
    }
    async fn send_raw(&self, raw: &[u8]) -> Result<TxHash, ChainError> {
        ChainClient::send_raw(self, raw).await
    }
    async fn transaction(&self, hash: TxHash) -> Result<Option<TxInfo>, ChainError> {
        ChainClient::transaction(self, hash).await
    }
}
