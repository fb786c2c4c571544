//! What a bundle carries and how it is priced and signed (§22). A bundle's gas limit is computed from the limits of
//! the operations it carries (`gas_limit`), and the bundle is simulated as a whole right before it is signed, by one
//! `eth_call` of `handleOps` at that gas limit on the latest block: an operation the EntryPoint refuses there
//! (`FailedOp(opIndex, reason)`) is left out with every later operation of its agent, and the rest is simulated
//! again, until it passes or nothing is left. Its fee is never above the lowest `maxFeePerGas` of the operations it
//! carries (the EntryPoint pays the sponsor back at each operation's own price); its first attempt leaves room below
//! that for fee bumps.

use std::time::Duration;

use alloy::consensus::{SignableTransaction, TxEip1559, TxEip7702, TxEnvelope};
use alloy::eips::eip2718::Encodable2718;
use alloy::eips::eip7702::SignedAuthorization;
use alloy::primitives::{Address, Bytes, TxKind, U256};
use uuid::Uuid;

use super::Bundler;
use super::group::Group;
use crate::chain::Fees;
use crate::chain::Node;
use crate::chain::client::ChainClient;
use crate::chain::userop::{self, PackedUserOperation};
use crate::store::operations::BundleRecord;

/// How old the fees a first attempt is priced at may be.
const FEE_MAX_AGE: Duration = Duration::from_secs(2);

/// EntryPoint v0.7's `INNER_GAS_OVERHEAD`: what `innerHandleOp` requires beyond an operation's `callGasLimit` and
/// `paymasterPostOpGasLimit` before it calls the account (else the whole bundle reverts, `AA95 out of gas`).
const INNER_GAS_OVERHEAD: u128 = 10_000;
/// What a bundle spends outside its operations' own limits and `preVerificationGas`: the transaction's intrinsic
/// 21,000 (not left to the operations' `preVerificationGas`, which agentd sizes for each operation's calldata and
/// share), and `handleOps`' own work once a bundle — its reentrancy guard's writes, `BeforeExecution`, the operations'
/// records in memory, the payment to the beneficiary (a call with value, about 9,000) — with room to spare.
const BUNDLE_OVERHEAD: u128 = 50_000;
/// EIP-7702's `PER_EMPTY_ACCOUNT_COST`: the intrinsic gas of each authorization a type-4 bundle carries.
const PER_AUTHORIZATION_GAS: u128 = 25_000;
/// EIP-7825's cap on a transaction's gas limit (2^24): the operations that would take a bundle past it wait.
const MAX_BUNDLE_GAS: u64 = 1 << 24;

/// The gas limit of a bundle of `ops` carrying `authorizations` EIP-7702 authorizations, from the operations' own
/// limits as the EntryPoint v0.7 enforces them: each operation's validation within its `verificationGasLimit`
/// (`AA26`) and its paymaster's within `paymasterVerificationGasLimit` (`AA36`), its execution within its
/// `callGasLimit` and `paymasterPostOpGasLimit` plus `INNER_GAS_OVERHEAD`, and `preVerificationGas` for what the
/// EntryPoint does not measure (its calldata, its part of the loop); so each operation counts all five and
/// `INNER_GAS_OVERHEAD`. `innerHandleOp` also checks, before running an operation, that 63/64 of the gas it was
/// given covers that operation's call, postOp and `INNER_GAS_OVERHEAD`, and it was itself given 63/64 of what was
/// left: the largest of those, times (64/63)² − 1 (127/3969, under 1/31), must be left on top. Then the bundle's own
/// `BUNDLE_OVERHEAD`, and `PER_AUTHORIZATION_GAS` for each authorization. The simulation runs at this gas limit, so a
/// shortfall would show there (as `AA95` or running out of gas) and nothing would be sent.
pub(super) fn gas_limit(ops: &[PackedUserOperation], authorizations: usize) -> u64 {
    let mut total = BUNDLE_OVERHEAD.saturating_add(PER_AUTHORIZATION_GAS.saturating_mul(authorizations as u128));
    let mut margin: u128 = 0;
    for op in ops {
        let limits = u128::try_from(userop::total_gas(op)).unwrap_or(u128::MAX);
        total = total.saturating_add(limits).saturating_add(INNER_GAS_OVERHEAD);
        let (_, call) = userop::unpack_pair(op.accountGasLimits);
        let post_op = userop::paymaster_fields(&op.paymasterAndData).map_or(0, |f| f.post_op_gas_limit);
        let executing = call.saturating_add(post_op).saturating_add(INNER_GAS_OVERHEAD);
        margin = margin.max(executing.div_ceil(31));
    }
    u64::try_from(total.saturating_add(margin)).unwrap_or(u64::MAX)
}

/// How many of `ops` (the first ones) a bundle can carry under `MAX_BUNDLE_GAS`: at least one.
fn fitting(ops: &[(Uuid, PackedUserOperation)], authorizations: usize) -> usize {
    let packed: Vec<PackedUserOperation> = ops.iter().map(|(_, op)| op.clone()).collect();
    (2..=packed.len())
        .take_while(|n| gas_limit(&packed[..*n], authorizations) <= MAX_BUNDLE_GAS)
        .last()
        .unwrap_or(1)
}

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
        // A prefix, so that each sender's operations left for later follow those it carries.
        ops.truncate(fitting(&ops, authorizations.len()));
        loop {
            if ops.is_empty() {
                return Ok(None);
            }
            let packed: Vec<PackedUserOperation> = ops.iter().map(|(_, op)| op.clone()).collect();
            let gas_limit = gas_limit(&packed, authorizations.len());
            let data = userop::handle_ops_call(&packed, sponsor);
            let revert = match client
                .simulate_bundle(
                    (sponsor, self.sponsor.entry_point, data),
                    gas_limit,
                    &authorizations,
                    None,
                )
                .await?
            {
                Ok(()) => return Ok(Some(Carried { ops, gas_limit })),
                Err(revert) => revert,
            };
            let Some((index, reason, _)) = userop::failed_op(&revert) else {
                anyhow::bail!("the bundle reverts as a whole ({revert})");
            };
            if reason.starts_with("AA95") {
                // The bundle's gas limit, not the operation, is at fault: nothing is left out, nothing is sent.
                anyhow::bail!(
                    "a bundle of {} operations runs out of gas at {gas_limit} ({reason})",
                    ops.len()
                );
            }
            let Some((id, failed)) = usize::try_from(index).ok().and_then(|i| ops.get(i)).cloned() else {
                anyhow::bail!("the EntryPoint refused operation {index} of a bundle of {}", ops.len());
            };
            tracing::warn!(chain = self.sponsor.chain.name, tx_id = %id, reason = reason.as_str(),
                "an operation fails its bundle's simulation: it and its agent's later ones are left out");
            ops.retain(|(_, op)| op.sender != failed.sender || op.nonce < failed.nonce);
        }
    }

    /// Simulates a round's bundles side by side (each group's senders are its own), signs those with something
    /// left to carry at the sponsor's next nonces in turn, records them all in one transaction, then broadcasts them
    /// together, in nonce order. Answers how many bundles were sent and the operations they carry. A bundle whose
    /// simulation fails is not signed (the others are); one whose broadcast fails is recorded, and followed from the
    /// next round (sent again as signed, or replaced at its nonce).
    pub(super) async fn send_bundles(
        &self,
        client: &ChainClient,
        groups: Vec<Group>,
    ) -> anyhow::Result<(usize, usize)> {
        let sponsor = self.sponsor.key.address();
        let started = std::time::Instant::now();
        let carrying = futures::future::join_all(groups.into_iter().map(|group| async move {
            let operations = group.ops.len();
            let carried = self.carry(client, group.ops, group.authorization.as_ref()).await;
            (carried, group.authorization, operations)
        }));
        // The fees and the sponsor's next nonce (the node's and the store's) are read while the bundles are simulated.
        let (carried, now, stored, pending) = tokio::try_join!(
            async { anyhow::Ok(carrying.await) },
            async { anyhow::Ok(client.recent_fees(FEE_MAX_AGE).await?) },
            async { anyhow::Ok(self.store.next_bundle_nonce(self.sponsor.chain.name).await?) },
            async { anyhow::Ok(client.pending_nonce(sponsor).await?) },
        )?;
        let mut nonce = pending.max(stored.unwrap_or(0));
        let mut signed = Vec::new();
        for (carried, authorization, operations) in carried {
            let carried = match carried {
                Ok(Some(carried)) => carried,
                Ok(None) => continue,
                Err(e) => {
                    tracing::warn!(chain = self.sponsor.chain.name, error = %e, operations, "a bundle was not sent");
                    continue;
                }
            };
            let fees = first_fees(carried.caps(), &now);
            let data = userop::handle_ops_call(&carried.packed(), sponsor);
            let to = self.sponsor.entry_point;
            let bundle = self.sign(nonce, fees, (carried.gas_limit, to, data), authorization)?;
            nonce += 1;
            signed.push((bundle, carried.ids()));
        }
        if signed.is_empty() {
            return Ok((0, 0));
        }
        let simulated = started.elapsed();
        self.store.record_bundles(&signed).await?;
        let recorded = started.elapsed();
        let carried: usize = signed.iter().map(|(_, ids)| ids.len()).sum();
        // All at once: the chain's broadcast queue takes them in nonce order and sends them in one JSON-RPC batch
        // (with any wallet transfer broadcast meanwhile), so the node can put several in one block instead of
        // mining each before the next is sent.
        let broadcasts = signed.iter().map(|(bundle, ids)| async move {
            self.metrics.count_bundle(self.sponsor.chain.name, ids.len());
            (bundle, ids, client.send_raw(&bundle.raw_tx).await)
        });
        for (bundle, ids, sent) in futures::future::join_all(broadcasts).await {
            match sent {
                Ok(_) => tracing::info!(
                    chain = self.sponsor.chain.name,
                    bundle = bundle.tx_hash.as_str(),
                    operations = ids.len(),
                    "bundle sent"
                ),
                Err(e) => tracing::warn!(chain = self.sponsor.chain.name, bundle = bundle.tx_hash.as_str(),
                    error = %e, "a bundle's broadcast failed; it is followed from the next round"),
            }
        }
        let ms = |d: Duration| d.as_secs_f64() * 1e3;
        tracing::debug!(
            chain = self.sponsor.chain.name,
            bundles = signed.len(),
            operations = carried,
            simulated_ms = ms(simulated),
            record_ms = ms(recorded - simulated),
            broadcast_ms = ms(started.elapsed() - recorded),
            "bundle timings"
        );
        Ok((signed.len(), carried))
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

    /// An operation with agentd's limits for a transfer: verification 150,000, call `call`, the paymaster's
    /// verification 80,000 and postOp 0, `preVerificationGas` 60,000.
    fn op(call: u128) -> PackedUserOperation {
        let approval = userop::PaymasterApproval {
            paymaster: Address::repeat_byte(7),
            verification_gas_limit: 80_000,
            valid_until: 1,
            valid_after: 0,
        };
        PackedUserOperation {
            accountGasLimits: userop::account_gas_limits(150_000, call),
            preVerificationGas: U256::from(60_000),
            paymasterAndData: userop::unsigned_paymaster_and_data(&approval).expect("in range"),
            ..Default::default()
        }
    }

    #[test]
    fn a_bundles_gas_limit_adds_its_operations_limits_and_the_entry_points_margins() {
        // 350,000 of limits + INNER_GAS_OVERHEAD 10,000, + BUNDLE_OVERHEAD 50,000, + the 63/64 margin of the
        // execution (60,000 + 0 + 10,000) / 31 rounded up: 2,259.
        assert_eq!(gas_limit(&[op(60_000)], 0), 412_259);
        // A type-4 bundle: the authorization's 25,000 more.
        assert_eq!(gas_limit(&[op(60_000)], 1), 437_259);
        // Two operations: both limits, the larger execution's margin once ((100,000 + 10,000) / 31: 3,549).
        assert_eq!(
            gas_limit(&[op(60_000), op(100_000)], 0),
            50_000 + 360_000 + 400_000 + 3_549
        );
        // The limits of agentd's transfers (callGasLimit about 60,000): 16 fit far below EIP-7825's cap.
        let sixteen: Vec<(Uuid, PackedUserOperation)> = (0..16).map(|_| (Uuid::new_v4(), op(60_000))).collect();
        assert_eq!(fitting(&sixteen, 0), 16);
        // Calls of 3,000,000 gas each: five fit under 2^24, the rest wait; one alone always goes.
        let large: Vec<(Uuid, PackedUserOperation)> = (0..8).map(|_| (Uuid::new_v4(), op(3_000_000))).collect();
        assert_eq!(fitting(&large, 0), 5);
        assert_eq!(fitting(&large[..1], 0), 1);
        let huge = vec![(Uuid::new_v4(), op(20_000_000))];
        assert_eq!(fitting(&huge, 0), 1);
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
