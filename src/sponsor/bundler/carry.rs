//! What a bundle carries and how it is priced and signed (§22). A bundle is simulated as a whole right before it
//! is signed: an operation the EntryPoint refuses there (`FailedOp(opIndex, reason)`) is left out with every later
//! operation of its agent, and the rest is simulated again, until it passes or nothing is left. Its fee is never
//! above the lowest `maxFeePerGas` of the operations it carries (the EntryPoint pays the sponsor back at each
//! operation's own price); its first attempt leaves room below that for fee bumps.

use std::time::Duration;

use alloy::consensus::{SignableTransaction, TxEip1559, TxEip7702, TxEnvelope};
use alloy::eips::eip2718::Encodable2718;
use alloy::eips::eip7702::SignedAuthorization;
use alloy::primitives::{Address, Bytes, TxKind, U256};
use uuid::Uuid;

use super::Bundler;
use super::group::Group;
use crate::chain::Fees;
use crate::chain::client::ChainClient;
use crate::chain::userop::{self, PackedUserOperation};
use crate::store::operations::BundleRecord;

/// How old the fees a first attempt is priced at may be.
const FEE_MAX_AGE: Duration = Duration::from_secs(2);

/// The operations a bundle carries once simulated, with its gas limit.
pub(super) struct Carried {
    pub ops: Vec<(Uuid, PackedUserOperation)>,
    pub gas_limit: u64,
}

impl Carried {
    /// The operations as `handleOps` takes them.
    pub fn packed(&self) -> Vec<PackedUserOperation> {
        self.ops.iter().map(|(_, op)| op.clone()).collect()
    }

    pub fn ids(&self) -> Vec<Uuid> {
        self.ops.iter().map(|(id, _)| *id).collect()
    }

    /// The lowest `maxFeePerGas` and the lowest `maxPriorityFeePerGas` of the operations.
    pub fn caps(&self) -> (u128, u128) {
        let fees: Vec<(u128, u128)> = self.ops.iter().map(|(_, op)| userop::unpack_pair(op.gasFees)).collect();
        let max_fee = fees.iter().map(|(_, max)| *max).min().unwrap_or_default();
        let tip = fees.iter().map(|(tip, _)| *tip).min().unwrap_or_default();
        (max_fee, tip)
    }
}

/// The fee figures (`maxFeePerGas`, `maxPriorityFeePerGas`) of a bundle's first attempt: the lowest tip of its
/// operations over one and a half times the latest base fee, and never above their lowest `maxFeePerGas` (each
/// operation's is twice the base fee it was signed at plus the tip), which leaves room for fee bumps.
pub(super) fn first_fees((cap, tip): (u128, u128), now: &Fees) -> (u128, u128) {
    let base = now.base_fee_per_gas;
    let max_fee = base.saturating_add(base / 2).saturating_add(tip).min(cap);
    (max_fee, tip.min(max_fee))
}

/// `fee` raised by at least 12.5% (an eighth, rounded up), and to no less than what the chain asks now.
fn raised(fee: u128, now: u128) -> u128 {
    fee.saturating_add(fee.div_ceil(8)).max(now)
}

/// The fee figures of the attempt that replaces one at `old`: both raised by at least 12.5%, or to the chain's
/// fees now, and neither above `cap` (the lowest `maxFeePerGas` carried; `None` for a bundle carrying nothing).
/// `None` when the cap leaves less than the 10% on both that nodes ask of a replacement: the bundle waits.
pub(super) fn bumped((max_fee, tip): (u128, u128), cap: Option<u128>, now: &Fees) -> Option<(u128, u128)> {
    let next_max = raised(max_fee, now.max_fee_per_gas).min(cap.unwrap_or(u128::MAX));
    let next_tip = raised(tip, now.max_priority_fee_per_gas).min(next_max);
    let enough = |next: u128, old: u128| next >= old.saturating_add(old.div_ceil(10));
    (enough(next_max, max_fee) && enough(next_tip, tip)).then_some((next_max, next_tip))
}

impl Bundler {
    /// What a bundle of `ops` can carry now: simulated as a whole (with `authorization` when it designates an
    /// account), an operation the EntryPoint refuses left out with every later operation of its agent, until the
    /// rest passes. `None` when nothing is left; `Err` when the bundle fails otherwise (nothing is sent).
    pub(super) async fn carry(
        &self,
        client: &ChainClient,
        mut ops: Vec<(Uuid, PackedUserOperation)>,
        authorization: Option<&SignedAuthorization>,
    ) -> anyhow::Result<Option<Carried>> {
        let sponsor = self.sponsor.key.address();
        let authorizations: Vec<SignedAuthorization> = authorization.into_iter().cloned().collect();
        loop {
            if ops.is_empty() {
                return Ok(None);
            }
            let packed: Vec<PackedUserOperation> = ops.iter().map(|(_, op)| op.clone()).collect();
            let data = userop::handle_ops_call(&packed, sponsor);
            let revert = match client
                .simulate_bundle((sponsor, self.sponsor.entry_point, data), &authorizations, None)
                .await?
            {
                Ok(gas) => {
                    let gas_limit = gas + gas / 5 + 10_000;
                    return Ok(Some(Carried { ops, gas_limit }));
                }
                Err(revert) => revert,
            };
            let Some((index, reason, _)) = userop::failed_op(&revert) else {
                anyhow::bail!("the bundle reverts as a whole ({revert})");
            };
            let Some((id, failed)) = usize::try_from(index).ok().and_then(|i| ops.get(i)).cloned() else {
                anyhow::bail!("the EntryPoint refused operation {index} of a bundle of {}", ops.len());
            };
            tracing::warn!(chain = self.sponsor.chain.name, tx_id = %id, reason = reason.as_str(),
                "an operation fails its bundle's simulation: it and its agent's later ones are left out");
            ops.retain(|(_, op)| op.sender != failed.sender || op.nonce < failed.nonce);
        }
    }

    /// Simulates, signs, records and broadcasts one new bundle at the sponsor's next nonce.
    pub(super) async fn send_bundle(&self, client: &ChainClient, group: Group) -> anyhow::Result<()> {
        let Some(carried) = self.carry(client, group.ops, group.authorization.as_ref()).await? else {
            return Ok(());
        };
        let sponsor = self.sponsor.key.address();
        let fees = first_fees(carried.caps(), &client.recent_fees(FEE_MAX_AGE).await?);
        let stored = self.store.next_bundle_nonce(self.sponsor.chain.name).await?;
        let nonce = client.pending_nonce(sponsor).await?.max(stored.unwrap_or(0));
        let data = userop::handle_ops_call(&carried.packed(), sponsor);
        let to = self.sponsor.entry_point;
        let bundle = self.sign(nonce, fees, (carried.gas_limit, to, data), group.authorization)?;
        let ids = carried.ids();
        self.store.record_bundle(&bundle, &ids).await?;
        self.metrics.count_bundle(self.sponsor.chain.name, ids.len());
        client.send_raw(&bundle.raw_tx).await?;
        tracing::info!(
            chain = self.sponsor.chain.name,
            bundle = bundle.tx_hash.as_str(),
            operations = ids.len(),
            "bundle sent"
        );
        Ok(())
    }

    /// The sponsor key's transaction at `nonce` with `fees`, sending `input` to `to` with `gas_limit` (type 4 when
    /// it carries an authorization), as a bundle to record.
    pub(super) fn sign(
        &self,
        nonce: u64,
        (max_fee, priority): (u128, u128),
        (gas_limit, to, input): (u64, Address, Bytes),
        authorization: Option<SignedAuthorization>,
    ) -> anyhow::Result<BundleRecord> {
        let chain_id = self.sponsor.chain.chain_id;
        let envelope = match authorization {
            Some(authorization) => {
                let tx = TxEip7702 {
                    chain_id,
                    nonce,
                    gas_limit,
                    max_fee_per_gas: max_fee,
                    max_priority_fee_per_gas: priority,
                    to,
                    value: U256::ZERO,
                    access_list: Default::default(),
                    authorization_list: vec![authorization],
                    input,
                };
                let signature = self.sponsor.key.sign_hash(&tx.signature_hash())?;
                TxEnvelope::from(tx.into_signed(signature))
            }
            None => {
                let tx = TxEip1559 {
                    chain_id,
                    nonce,
                    gas_limit,
                    max_fee_per_gas: max_fee,
                    max_priority_fee_per_gas: priority,
                    to: TxKind::Call(to),
                    value: U256::ZERO,
                    input,
                    access_list: Default::default(),
                };
                let signature = self.sponsor.key.sign_hash(&tx.signature_hash())?;
                TxEnvelope::from(tx.into_signed(signature))
            }
        };
        Ok(BundleRecord {
            id: Uuid::new_v4(),
            chain: self.sponsor.chain.name.to_string(),
            nonce,
            tx_hash: envelope.tx_hash().to_string(),
            raw_tx: envelope.encoded_2718(),
            gas_limit,
            max_fee_per_gas: max_fee,
            signed_at: self.clock.now(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fees(base: u128, tip: u128) -> Fees {
        Fees::from_parts(Some(base), tip, base + tip)
    }

    #[test]
    fn a_first_attempt_leaves_room_below_the_lowest_cap_and_never_exceeds_it() {
        // Signed at a base of 100 with a tip of 10: cap 210. The first attempt pays up to 160.
        assert_eq!(first_fees((210, 10), &fees(100, 10)), (160, 10));
        // The base rose past what the operations allow: the cap, not more.
        assert_eq!(first_fees((210, 10), &fees(200, 10)), (210, 10));
        assert_eq!(first_fees((5, 10), &fees(0, 10)), (5, 5));
    }

    #[test]
    fn a_bump_raises_both_fees_by_an_eighth_up_to_the_cap_or_waits() {
        // 160/10 → 180/12 (an eighth, rounded up), or the chain's figures when higher, never past the cap.
        assert_eq!(bumped((160, 10), Some(210), &fees(50, 1)), Some((180, 12)));
        assert_eq!(bumped((160, 10), Some(210), &fees(150, 1)), Some((210, 12)));
        // Less than 10% left below the cap: the bundle waits.
        assert_eq!(bumped((200, 10), Some(210), &fees(50, 1)), None);
        assert_eq!(bumped((210, 10), Some(210), &fees(50, 1)), None);
        // A cancel (nothing carried) has no cap.
        assert_eq!(bumped((210, 10), None, &fees(50, 1)), Some((237, 12)));
    }
}
