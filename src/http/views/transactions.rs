//! The view of a stored transfer (also what the `transaction_history` tool returns).

use chrono::{DateTime, Utc};
use serde::Serialize;
use utoipa::ToSchema;
use uuid::Uuid;

use crate::domain::amount::format_units;
use crate::domain::transaction::{StoredTx, TxState};

/// Where a transfer stands, as clients see it.
#[derive(Debug, Clone, Copy, Serialize, ToSchema)]
#[serde(rename_all = "lowercase")]
pub enum TxStatusView {
    Pending,
    Confirmed,
    Reverted,
    Dropped,
    Cancelled,
    /// An x402 authorization unused past its `validBefore` (§16).
    Expired,
}

impl From<TxState> for TxStatusView {
    fn from(state: TxState) -> Self {
        match state {
            // Stored-but-not-yet-accepted transfers are still on their way: to clients they are pending.
            TxState::Signed | TxState::Pending => Self::Pending,
            TxState::Confirmed => Self::Confirmed,
            TxState::Reverted => Self::Reverted,
            TxState::Dropped => Self::Dropped,
            TxState::Cancelled => Self::Cancelled,
            TxState::Expired => Self::Expired,
        }
    }
}

#[derive(Debug, Serialize, ToSchema)]
pub struct TransactionView {
    pub id: Uuid,
    pub chain: String,
    /// `transfer`, or `x402` for a payment authorization (§16): then `tx_hash` is its settlement transaction (empty
    /// until known) and `x402` says what was paid.
    pub kind: &'static str,
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(nullable = false)]
    pub x402: Option<super::transfers::X402View>,
    pub tx_hash: String,
    /// EIP-55 address of the agent's wallet, or of the delegator's account for a redemption of an on-chain
    /// delegation (§21), as on the transfer.
    pub from: String,
    /// Set on a transfer that redeems an on-chain delegation (§21), as on the transfer: the money left the delegator's
    /// account, so a history can tell it from the agent's own.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(nullable = false)]
    pub delegation: Option<super::transfers::DelegationUseView>,
    /// EIP-55 address of the recipient (of the token, for a token transfer).
    pub to: String,
    /// The native coin the transaction moves, in wei (decimal string; "0" for a token transfer).
    pub value_wei: String,
    /// The same in native units.
    pub value: String,
    /// The asset moved: the native symbol or the token's.
    pub asset: String,
    /// Decimal string in whole units of `asset`.
    pub amount: String,
    /// EIP-55 address of the token contract; null for the native coin.
    #[schema(required = true)]
    pub token_address: Option<String>,
    pub nonce: u64,
    /// Earlier attempts at the same nonce that a fee bump or a cancel replaced, oldest first (§14).
    pub replaced_hashes: Vec<String>,
    pub status: TxStatusView,
    #[schema(required = true)]
    pub block_number: Option<u64>,
    #[schema(required = true)]
    pub gas_used: Option<u64>,
    #[schema(required = true)]
    pub conversation_id: Option<Uuid>,
    pub created_at: DateTime<Utc>,
    pub updated_at: DateTime<Utc>,
}

impl From<&StoredTx> for TransactionView {
    fn from(tx: &StoredTx) -> Self {
        Self {
            id: tx.id,
            chain: tx.chain.clone(),
            kind: tx.kind(),
            x402: tx.body.x402().map(super::transfers::X402View::new),
            tx_hash: tx.chain_hash().unwrap_or_default().to_string(),
            from: tx.body.via().map_or(tx.from, |v| v.delegator).to_checksum(None),
            delegation: tx.body.via().map(super::transfers::DelegationUseView::new),
            to: tx.to.to_checksum(None),
            value_wei: tx.native_value().to_string(),
            value: format_units(tx.native_value(), 18),
            asset: tx.asset.clone(),
            amount: format_units(tx.value_wei, tx.decimals()),
            token_address: tx.token.map(|t| t.address.to_checksum(None)),
            nonce: tx.nonce().unwrap_or_default(),
            replaced_hashes: Vec::new(),
            status: tx.status.into(),
            block_number: tx.block_number,
            gas_used: tx.gas_used,
            conversation_id: tx.conversation_id,
            created_at: tx.created_at,
            updated_at: tx.updated_at,
        }
    }
}
