//! The view of one transfer wherever it stands: waiting for approval (no nonce, no signature), sent, settled,
//! rejected or expired. The transfers API (`POST /api/agents/{id}/transfers`, `GET …/{transfer_id}`) and the
//! approval endpoints answer it.

use chrono::{DateTime, Utc};
use serde::Serialize;
use utoipa::ToSchema;
use uuid::Uuid;

use crate::domain::amount::format_units;
use crate::domain::chain as registry;
use crate::domain::policy::ApprovalStatus;
use crate::domain::transaction::{StoredTx, TxState};
use crate::store::Approval;
use crate::transfers::TransferOutcome;

/// Where a transfer stands (docs/api.md §14): `awaiting_approval` → `pending` | `rejected` | `expired`;
/// `pending` → `confirmed` | `reverted` | `dropped` | `cancelled`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum TransferStatusView {
    AwaitingApproval,
    Pending,
    Confirmed,
    Reverted,
    Dropped,
    Cancelled,
    Rejected,
    Expired,
}

impl From<TxState> for TransferStatusView {
    fn from(state: TxState) -> Self {
        match state {
            // Stored-but-not-yet-accepted transfers are on their way: to clients they are pending.
            TxState::Signed | TxState::Pending => Self::Pending,
            TxState::Confirmed => Self::Confirmed,
            TxState::Reverted => Self::Reverted,
            TxState::Dropped => Self::Dropped,
            TxState::Cancelled => Self::Cancelled,
        }
    }
}

impl From<ApprovalStatus> for TransferStatusView {
    fn from(status: ApprovalStatus) -> Self {
        match status {
            ApprovalStatus::AwaitingApproval => Self::AwaitingApproval,
            // An approved transfer lives on as a sent one; its waiting record says it left for the node.
            ApprovalStatus::Approved => Self::Pending,
            ApprovalStatus::Rejected => Self::Rejected,
            ApprovalStatus::Expired => Self::Expired,
        }
    }
}

#[derive(Debug, Serialize, ToSchema)]
pub struct TransferView {
    pub id: Uuid,
    /// The same as `id`, under the name the approval endpoints use.
    pub transfer_id: Uuid,
    pub chain: String,
    /// The asset's symbol (the chain's native symbol for native transfers).
    pub asset: String,
    /// EIP-55 address of the token contract; null for the native coin.
    #[schema(required = true)]
    pub token_address: Option<String>,
    /// EIP-55 address of the agent's wallet.
    pub from: String,
    /// EIP-55 address.
    pub to: String,
    /// Decimal string in whole units of the asset.
    pub amount: String,
    /// The amount in the asset's smallest unit, as a decimal string.
    pub amount_wei: String,
    pub status: TransferStatusView,
    /// Null while the transfer has not been signed.
    #[schema(required = true)]
    pub tx_hash: Option<String>,
    /// Null while the transfer has not been signed.
    #[schema(required = true)]
    pub nonce: Option<u64>,
    /// Earlier attempts at the same nonce that a fee bump or a cancel replaced, oldest first (§14); `tx_hash` names
    /// the latest, or the one that landed.
    pub replaced_hashes: Vec<String>,
    #[schema(required = true)]
    pub block_number: Option<u64>,
    #[schema(required = true)]
    pub conversation_id: Option<Uuid>,
    #[schema(required = true)]
    pub explorer_url: Option<String>,
    /// When a transfer awaiting approval expires; null for transfers that never waited.
    #[schema(required = true)]
    pub expires_at: Option<DateTime<Utc>>,
    pub created_at: DateTime<Utc>,
    pub updated_at: DateTime<Utc>,
}

impl From<&StoredTx> for TransferView {
    fn from(tx: &StoredTx) -> Self {
        let chain = registry::find(&tx.chain);
        Self {
            id: tx.id,
            transfer_id: tx.id,
            chain: tx.chain.clone(),
            asset: tx.asset.clone(),
            token_address: tx.token.map(|t| t.address.to_checksum(None)),
            from: tx.from.to_checksum(None),
            to: tx.to.to_checksum(None),
            amount: format_units(tx.value_wei, tx.decimals()),
            amount_wei: tx.value_wei.to_string(),
            status: tx.status.into(),
            tx_hash: Some(tx.tx_hash.clone()),
            nonce: Some(tx.nonce),
            replaced_hashes: Vec::new(),
            block_number: tx.block_number,
            conversation_id: tx.conversation_id,
            explorer_url: chain.map(|c| c.tx_url(&tx.tx_hash)),
            expires_at: None,
            created_at: tx.created_at,
            updated_at: tx.updated_at,
        }
    }
}

impl From<&Approval> for TransferView {
    fn from(a: &Approval) -> Self {
        Self {
            id: a.id,
            transfer_id: a.id,
            chain: a.chain.clone(),
            asset: a.asset.clone(),
            token_address: a.token.map(|t| t.address.to_checksum(None)),
            from: a.from.to_checksum(None),
            to: a.to.to_checksum(None),
            amount: a.amount(),
            amount_wei: a.value_wei.to_string(),
            status: a.status.into(),
            tx_hash: None,
            nonce: None,
            replaced_hashes: Vec::new(),
            block_number: None,
            conversation_id: a.conversation_id,
            explorer_url: None,
            expires_at: Some(a.expires_at),
            created_at: a.created_at,
            updated_at: a.updated_at,
        }
    }
}

impl TransferView {
    /// The view of a sent transfer with the hashes of its replaced attempts.
    pub fn with_replaced(mut self, hashes: Vec<String>) -> Self {
        self.replaced_hashes = hashes;
        self
    }
}

impl From<&TransferOutcome> for TransferView {
    fn from(outcome: &TransferOutcome) -> Self {
        match outcome {
            TransferOutcome::Sent { tx, .. } => Self::from(tx),
            TransferOutcome::AwaitingApproval { approval, .. } => Self::from(approval),
        }
    }
}
