//! Delivery: a stored transaction handed to the node (once more after a lost answer or a restart), and the send
//! that fills the nonce of a refused one.

use super::Transfers;
use crate::chain::{ChainError, Node, RefusalKind};
use crate::domain::audit::{Actor, Detail, detail};
use crate::domain::transaction::StoredTx;

impl Transfers {
    /// Records and broadcasts the send that fills the nonce of a refused transfer.
    pub(super) async fn send_fill(&self, client: &dyn Node, refused: &StoredTx, fill: &StoredTx) {
        let at = fill.on_chain().map(|t| &t.at);
        tracing::warn!(tx_id = %refused.id, fill_id = %fill.id, chain = %fill.chain, nonce = ?at.map(|a| a.nonce),
            "a refused transfer's nonce was followed by later ones; filling it with a zero-value self-send");
        let detail = Detail::NonceFilled(detail::NonceFilled {
            transfer_id: refused.id,
            fill_id: fill.id,
            chain: fill.chain.clone(),
            nonce: at.map(|a| a.nonce),
            tx_hash: at.map(|a| a.tx_hash.clone()),
        });
        self.audit(fill.agent_id, Actor::System, detail).await;
        match client.send_raw(&fill.raw_tx).await {
            Ok(_) => {
                if let Err(e) = self.store.mark_broadcast(fill.id).await {
                    tracing::error!(fill_id = %fill.id, error = %e, "a nonce fill's broadcast was not recorded");
                }
            }
            Err(e) => {
                tracing::warn!(fill_id = %fill.id, error = %e, "the nonce fill was not accepted yet; it will be sent again")
            }
        }
    }

    /// Hands the stored transaction to the node. A refusal can follow our own earlier attempt that did land (the
    /// client retries once after a lost answer; the node then calls the nonce used): a transaction the node knows
    /// counts as accepted and is never discarded.
    pub(super) async fn broadcast(&self, client: &dyn Node, tx: &StoredTx) -> Result<(), ChainError> {
        if self.faults.exit_before_broadcast {
            tracing::error!(tx_id = %tx.id, "FAULT_EXIT_BEFORE_BROADCAST: exiting after storing a signed transfer");
            std::process::exit(86);
        }
        if self.faults.lost_broadcast_answer {
            let _ = client.send_raw(&tx.raw_tx).await;
        }
        match client.send_raw(&tx.raw_tx).await {
            Err(e) if !e.is_transport() && node_knows(client, tx).await => Ok(()),
            other => other.map(|_| ()),
        }
    }
}

/// Whether the node knows this exact transaction (pending or mined). Unknown when the node cannot be asked: then
/// `true`, so that nothing that may be on chain is ever discarded; the watcher settles it later.
async fn node_knows(client: &dyn Node, tx: &StoredTx) -> bool {
    let Some(Ok(hash)) = tx.on_chain().map(|t| t.at.tx_hash.parse()) else {
        return false;
    };
    match client.transaction(hash).await {
        Ok(found) => found.is_some(),
        Err(e) => {
            tracing::warn!(tx_id = %tx.id, error = %e, "cannot tell whether the node has the transaction; keeping it");
            true
        }
    }
}

/// Broadcasts a stored transaction again (after a restart or a lost broadcast). `Ok(true)` when a node has it.
pub async fn rebroadcast(client: &dyn Node, tx: &StoredTx) -> Result<bool, ChainError> {
    match client.send_raw(&tx.raw_tx).await {
        Ok(_) => Ok(true),
        Err(e) if e.refusal() == Some(RefusalKind::NonceTooLow) => Ok(false),
        Err(e) => Err(e),
    }
}
