//! An owner's sweep (§20): the whole balance of one asset of the agent's wallet — the native coin less the fee, or a
//! token with the gas paid in the native coin — sent to the owner. It exists so that the funds of an agent whose key
//! cannot be exported (a key in a PKCS#11 token) are never stranded, and works the same with either key backend.
//! It goes through the one send path (`send_outflow`): the agent's send lock, its nonce, the funds the reservation
//! sees and the watcher apply as to any transfer; the cap and the policy do not (they guard the agent, not its
//! owner), and an inactive agent may be swept. Audited as `funds_swept` (or `sweep_refused` with its code).

use alloy::primitives::Address;
use uuid::Uuid;

use super::kinds::{Outflow, Purpose};
use super::{TransferError, TransferOutcome, Transfers};
use crate::domain::agent::Agent;
use crate::domain::amount::format_units;
use crate::domain::asset::Asset;
use crate::domain::audit::{Actor, OwedEntry};
use crate::domain::chain::ChainInfo;
use crate::store::{Clearance, Mandate};

/// A sweep an owner asked for. An owner session sweeps only to one of the agent's owner addresses, the admin token
/// (`anywhere`) to any: decided with everything else (`domain::decision`), and a refusal audited as `sweep_refused`.
pub struct SweepOrder<'a> {
    pub agent: &'a Agent,
    pub chain: &'static ChainInfo,
    pub to: Address,
    /// The registry token to sweep; `None`: the chain's native coin.
    pub token: Option<Asset>,
    /// The owner or the admin, as the audit log records it.
    pub actor: Actor,
    /// The admin token's sweep, which may go to any address.
    pub anywhere: bool,
}

impl Transfers {
    /// Sweeps the whole balance of the order's asset to its recipient (see the module's doc).
    #[tracing::instrument(skip_all, fields(agent_id = %order.agent.id, chain = order.chain.name))]
    pub async fn sweep(&self, order: SweepOrder<'_>) -> Result<TransferOutcome, TransferError> {
        let symbol = order
            .token
            .as_ref()
            .map_or(order.chain.native_symbol, |t| t.symbol.as_str())
            .to_string();
        let mut asked = crate::domain::audit::detail::AssetAsked {
            chain: order.chain.name.into(),
            asset: symbol,
            to: order.to.to_checksum(None),
            amount: None,
            delegation_id: None,
        };
        let owed = OwedEntry::Sweep {
            actor: order.actor,
            asked: asked.clone(),
        };
        let outcome = self.try_sweep(&order, owed).await;
        let decimals = order.token.as_ref().map_or(order.chain.decimals, |t| t.decimals);
        if let Ok(TransferOutcome::Sent { tx, .. }) = &outcome {
            asked.amount = Some(format_units(tx.value_wei, decimals));
        }
        self.record_sweep(order.agent.id, order.actor, asked, outcome.as_ref())
            .await;
        outcome
    }

    async fn try_sweep(&self, order: &SweepOrder<'_>, owed: OwedEntry) -> Result<TransferOutcome, TransferError> {
        // Refused before the node is asked, by the rule the reservation applies again to the owner addresses it reads.
        let owners: Vec<Address> = order.agent.owner_addresses.values().copied().collect();
        if !crate::domain::decision::sweeps_to(order.to, (!order.anywhere).then_some(&owners)) {
            return Err(TransferError::OwnerAddressRequired);
        }
        let to = super::recipient(order.agent, order.chain, order.to)?;
        self.send_outflow(Outflow {
            id: Uuid::new_v4(),
            agent_id: order.agent.id,
            chain: order.chain,
            conversation_id: None,
            from: to.from(),
            to: to.to(),
            // The quote reads the amount: the whole balance.
            value: alloy::primitives::U256::ZERO,
            purpose: Purpose::Sweep(order.token.clone()),
            gas: crate::domain::transaction::Payer::Wallet,
            clearance: Clearance::Sweep {
                anywhere: order.anywhere,
            },
            // Owner authority carries no agent token and no idempotency claim.
            mandate: Mandate::NONE,
            owed: Some(owed),
        })
        .await
    }
}
