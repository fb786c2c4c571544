//! Nonce gaps. A transfer that can no longer land (the node refuses it again and does not know it, while nothing has
//! used its nonce) would hold back every later transfer of its wallet, each keeping its reservation. Its nonce is
//! filled with a zero-value send from the wallet to itself at today's fees: the later transfers then land at once,
//! without waiting for another transfer to take the nonce over, and nothing already signed is re-signed. Both stay
//! open until one of them lands at that nonce; the transfer is then `dropped` (§14: its nonce was used by a
//! transaction that is none of its attempts) and gives its reservation back, and only the fill's fee counts.

use alloy::primitives::U256;

use super::carriers::wallet::carried;
use super::nonces::sign_fill;
use super::{TransferError, Transfers, l1_probe, nonce_filler, signer_error, store_error};
use crate::chain::Node;
use crate::domain::transaction::StoredTx;
use crate::store::{NonceFill, Presigned};

impl Transfers {
    /// Fills the nonce of `gap`, an open transfer that can no longer land: stores the fill (its fee held out of the
    /// transfer's reservation) and broadcasts it. `None` when there is nothing to fill (settled meanwhile, or its
    /// nonce is already being filled) or the cap cannot hold the fee. A fill the node does not take now stays stored
    /// as `signed`, and the watcher sends it again like any transfer.
    pub async fn fill_gap(&self, client: &dyn Node, gap: &StoredTx) -> Result<Option<StoredTx>, TransferError> {
        let Some(nonce) = gap.nonce() else {
            return Ok(None);
        };
        let chain = client.info();
        let probe = l1_probe(chain, gap.from, U256::ZERO, Default::default());
        let (gas_limit, fees, l1_fee) = tokio::join!(
            client.estimate_transfer_gas(gap.from, gap.from, U256::ZERO),
            client.fees(),
            client.l1_fee(&probe),
        );
        let (gas_limit, fees, l1_fee) = (gas_limit?, fees?, l1_fee?);
        // A transaction that designates the account (§22) is filled by one carrying its authorization, at its gas.
        let gas_limit = match carried(&gap.raw_tx).len() {
            0 => gas_limit,
            n => gas_limit.max(super::replace::self_send_gas(n)),
        };
        let reserved = fees.max_cost(gas_limit).saturating_add(l1_fee);
        let request = nonce_filler(gap, chain, gas_limit, fees.max_fee_per_gas, reserved);
        let signer = self.signer(gap.agent_id).await?;
        // Signed outside the store's transaction, at the gap's nonce (the one the fill takes).
        let priority = fees.max_priority_fee_per_gas;
        let signed = sign_fill(signer.as_ref(), chain, &request, priority, (nonce, &gap.raw_tx))
            .map_err(|e| signer_error(gap.agent_id, e))?;
        let signed = Presigned {
            nonce: Some(nonce),
            signed,
        };
        let fill = match self
            .store
            .fill_nonce(gap.id, &request, &signed)
            .await
            .map_err(store_error)?
        {
            NonceFill::Stored(fill) => *fill,
            NonceFill::NotNeeded => return Ok(None),
            NonceFill::CapExceeded => {
                tracing::warn!(tx_id = %gap.id, chain = chain.name, nonce,
                    "a transfer that cannot land holds back later nonces, and the cap cannot hold the fee to fill it");
                return Ok(None);
            }
        };
        tracing::warn!(tx_id = %gap.id, fill_id = %fill.id, chain = chain.name, nonce,
            "a transfer that cannot land held back later nonces; filling its nonce with a zero-value self-send");
        let detail = crate::domain::audit::Detail::NonceFilled(crate::domain::audit::detail::NonceFilled {
            transfer_id: gap.id,
            fill_id: fill.id,
            chain: chain.name.into(),
            nonce: Some(nonce),
            tx_hash: fill.tx_hash().map(str::to_owned),
        });
        self.audit(gap.agent_id, crate::domain::audit::Actor::System, detail)
            .await;
        match client.send_raw(&fill.raw_tx).await {
            Ok(_) => self.store.mark_broadcast(fill.id).await.map_err(store_error)?,
            Err(e) => {
                tracing::warn!(tx_id = %fill.id, error = %e, "the nonce fill was not accepted yet; it will be sent again")
            }
        }
        Ok(Some(fill))
    }
}
