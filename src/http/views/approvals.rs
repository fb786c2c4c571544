//! A transfer held for approval, and what approving or rejecting it answers.

use chrono::{DateTime, Utc};
use serde::Serialize;
use utoipa::ToSchema;
use uuid::Uuid;

use crate::store::Approval;
use crate::transfers::TransferOutcome;

/// A transfer as the approval endpoints show it: `id` and `transfer_id` are the same.
#[derive(Debug, Serialize, ToSchema)]
pub struct ApprovalTransferView {
    pub id: Uuid,
    pub transfer_id: Uuid,
    pub chain: String,
    /// The asset symbol (`ETH`).
    pub asset: String,
    /// EIP-55 address.
    pub to: String,
    /// Whole units of the asset, as a decimal string.
    pub amount: String,
    /// `awaiting_approval`, `rejected`, `expired`; once approved, `pending` or `submitted` (sent).
    pub status: String,
    /// Set once approved and signed.
    pub tx_hash: Option<String>,
    pub nonce: Option<u64>,
    pub conversation_id: Option<Uuid>,
    pub expires_at: DateTime<Utc>,
    pub created_at: DateTime<Utc>,
}

impl From<&Approval> for ApprovalTransferView {
    fn from(a: &Approval) -> Self {
        ApprovalTransferView {
            id: a.id,
            transfer_id: a.id,
            chain: a.chain.clone(),
            asset: a.asset.clone(),
            to: a.to.to_checksum(None),
            amount: a.amount(),
            status: a.status.as_str().to_string(),
            tx_hash: None,
            nonce: None,
            conversation_id: a.conversation_id,
            expires_at: a.expires_at,
            created_at: a.created_at,
        }
    }
}

impl ApprovalTransferView {
    /// The approved transfer, as sent: the waiting record with its hash, nonce and status.
    pub fn sent(approval: &Approval, outcome: &TransferOutcome) -> Self {
        let mut view = ApprovalTransferView::from(approval);
        match outcome {
            TransferOutcome::Sent { tx, status, .. } => {
                view.status = status.as_str().to_string();
                view.tx_hash = Some(tx.tx_hash.clone());
                view.nonce = Some(tx.nonce);
            }
            TransferOutcome::AwaitingApproval { approval, .. } => view.status = approval.status.as_str().to_string(),
        }
        view
    }
}
