//! What the chain layer reports about a transaction: a plain summary of the node's transaction and receipt.

use alloy::consensus::Transaction as _;
use alloy::network::{ReceiptResponse, TransactionResponse};
use alloy::primitives::{Address, TxHash, U256, keccak256};
use alloy::rpc::types::{Transaction, TransactionReceipt};
use serde::Serialize;

/// Where a transaction stands, as the API and tools show it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum TxStatus {
    /// In the mempool, or included but with fewer blocks on top than the chain's confirmations.
    Pending,
    /// Included, succeeded and confirmed.
    Confirmed,
    /// Included and confirmed, but its execution failed (the fee is still paid).
    Reverted,
}

impl TxStatus {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Pending => "pending",
            Self::Confirmed => "confirmed",
            Self::Reverted => "reverted",
        }
    }
}

/// A receipt reduced to what agentd needs (spending accounting, status, and the logs a call's counts are read from).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ReceiptInfo {
    pub tx_hash: TxHash,
    pub block_number: Option<u64>,
    /// True when execution succeeded.
    pub success: bool,
    pub gas_used: u64,
    pub effective_gas_price: u128,
    /// The L1 data fee an OP-stack chain charged on top of the L2 gas (`l1Fee`); zero elsewhere.
    pub l1_fee: U256,
    /// The logs the transaction emitted (§18: a mined call's real outflows and allowances).
    #[serde(skip)]
    pub logs: Vec<crate::domain::call::SimLog>,
}

impl ReceiptInfo {
    pub(crate) fn from_rpc(receipt: &TransactionReceipt) -> Self {
        ReceiptInfo {
            tx_hash: receipt.transaction_hash(),
            block_number: ReceiptResponse::block_number(receipt),
            success: receipt.status(),
            gas_used: receipt.gas_used(),
            effective_gas_price: receipt.effective_gas_price(),
            l1_fee: U256::ZERO,
            logs: receipt
                .inner
                .logs()
                .iter()
                .map(|log| crate::domain::call::SimLog {
                    address: log.address(),
                    topics: log.topics().to_vec(),
                    data: log.data().data.clone(),
                })
                .collect(),
        }
    }

    /// The fee actually paid: `gas_used * effective_gas_price`, plus the L1 data fee on OP-stack chains.
    pub fn fee_paid(&self) -> U256 {
        U256::from(self.gas_used) * U256::from(self.effective_gas_price) + self.l1_fee
    }
}

/// A transaction with its receipt, when it has one.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct TxInfo {
    pub hash: TxHash,
    pub from: Address,
    /// `None` for a contract creation.
    pub to: Option<Address>,
    pub value: U256,
    pub nonce: u64,
    pub gas_limit: u64,
    pub block_number: Option<u64>,
    pub status: TxStatus,
    /// Blocks from the including block to the latest, both counted (1 = just included).
    pub confirmations: u64,
    pub gas_used: Option<u64>,
    pub effective_gas_price: Option<u128>,
}

impl TxInfo {
    /// Combines a transaction, its receipt and the latest block number. `required` is the
    /// chain's `CONFIRMATIONS_<CHAIN>` (at least 1): below it an included transaction stays pending.
    pub(crate) fn from_rpc(
        tx: &Transaction,
        receipt: Option<&TransactionReceipt>,
        latest_block: Option<u64>,
        required: u64,
    ) -> Self {
        let receipt = receipt.map(ReceiptInfo::from_rpc);
        let block_number = receipt
            .as_ref()
            .and_then(|r| r.block_number)
            .or(TransactionResponse::block_number(tx));
        let confirmations = match (receipt.as_ref().and_then(|r| r.block_number), latest_block) {
            (Some(included), Some(latest)) => latest.saturating_sub(included) + 1,
            (Some(_), None) => 1,
            _ => 0,
        };
        let status = match &receipt {
            Some(r) if confirmations >= required.max(1) => {
                if r.success {
                    TxStatus::Confirmed
                } else {
                    TxStatus::Reverted
                }
            }
            _ => TxStatus::Pending,
        };
        TxInfo {
            hash: tx.tx_hash(),
            from: TransactionResponse::from(tx),
            to: tx.to(),
            value: tx.value(),
            nonce: tx.nonce(),
            gas_limit: tx.gas_limit(),
            block_number,
            status,
            confirmations,
            gas_used: receipt.as_ref().map(|r| r.gas_used),
            effective_gas_price: receipt.as_ref().map(|r| r.effective_gas_price),
        }
    }

    /// The fee paid, once there is a receipt.
    pub fn fee_paid(&self) -> Option<U256> {
        Some(U256::from(self.gas_used?) * U256::from(self.effective_gas_price?))
    }
}

/// The hash of a signed, EIP-2718-encoded transaction, computed locally. It is known before the
/// broadcast, so a broadcast that times out can still be tracked (it may have reached the node).
pub fn raw_tx_hash(raw: &[u8]) -> TxHash {
    keccak256(raw)
}
