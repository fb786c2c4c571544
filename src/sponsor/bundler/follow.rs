//! The bundles signed and not yet done with (§22, with §14's rules for the sponsor's nonces). One mined — this
//! attempt or an earlier one at its nonce — is closed; one whose nonce went to another transaction is `replaced`;
//! one the node does not know (lost in a crash or a restart) is sent again as signed; one pending longer than
//! `STUCK_AFTER_SECS` is replaced at its nonce with higher fees, never above the lowest `maxFeePerGas` it carries
//! (when that leaves no room, it waits). Every re-send and replacement is simulated as a whole first: what can no
//! longer land is left out of a replacement at the same nonce, and a bundle left with nothing is replaced by a
//! zero-value send of the sponsor to itself, so the sponsor's nonces keep no gap and it never pays for a bundle
//! that would revert. Each replacement is stored before it is broadcast (a crash in between sends it again).

use alloy::consensus::TxEnvelope;
use alloy::eips::eip2718::Decodable2718;
use alloy::eips::eip7702::SignedAuthorization;
use alloy::primitives::{Bytes, U256};
use alloy::sol_types::{SolCall, SolValue};
use uuid::Uuid;

use super::Bundler;
use super::carry::{self, Carried};
use crate::chain::Node;
use crate::chain::client::ChainClient;
use crate::chain::userop::{self, PackedUserOperation};
use crate::store::operations::{BundleRecord, OpenOperation};

/// A plain transfer's gas: what the sponsor's zero-value send to itself uses.
const SELF_SEND_GAS: u64 = 21_000;

/// What a signed bundle is, read back from its bytes.
struct Signed {
    fees: (u128, u128),
    /// Its EIP-7702 authorization (a type-4 bundle that designates an account).
    authorization: Option<SignedAuthorization>,
    /// A zero-value send of the sponsor to itself (a bundle replaced by nothing).
    cancel: bool,
    /// Its calldata (`handleOps`, or empty for a cancel).
    input: Bytes,
}

impl Bundler {
    /// Follows `bundles`, those still `signed` when the round began (see the module). Answers how many operations
    /// wait again.
    pub(super) async fn follow_bundles(
        &self,
        client: &ChainClient,
        bundles: Vec<BundleRecord>,
        open: &[OpenOperation],
    ) -> anyhow::Result<u64> {
        if bundles.is_empty() {
            return Ok(0);
        }
        // Read before the receipts: every transaction below it was mined before they were asked for.
        let mined = client.mined_nonce(self.sponsor.key.address()).await?;
        // Every bundle's receipt, read at once.
        let receipts = futures::future::try_join_all(
            bundles
                .iter()
                .map(|bundle| async move { anyhow::Ok(client.receipt(bundle.tx_hash.parse()?).await?) }),
        )
        .await?;
        let mut released = 0;
        // The mined ones are closed together, once the loop is done with them.
        let mut mined_bundles = Vec::new();
        for (bundle, receipt) in bundles.into_iter().zip(receipts) {
            if let Some(receipt) = receipt {
                let cost = receipt.fee_paid();
                if !receipt.success {
                    tracing::warn!(
                        chain = self.sponsor.chain.name,
                        bundle = bundle.tx_hash.as_str(),
                        "a bundle reverted on chain; its operations wait for another"
                    );
                    self.reverted(client, &bundle, receipt.block_number, cost, open).await?;
                }
                mined_bundles.push((bundle.id, "mined", Some(cost)));
                continue;
            }
            if mined > bundle.nonce {
                released += self.nonce_used(client, &bundle).await?;
                continue;
            }
            let stuck = (self.clock.now() - bundle.signed_at).to_std().unwrap_or_default() >= self.stuck_after;
            let known = client.transaction(bundle.tx_hash.parse()?).await?.is_some();
            if stuck || !known {
                match self.revise(client, &bundle, open, (stuck, known)).await {
                    Ok(n) => released += n,
                    Err(e) => tracing::warn!(chain = self.sponsor.chain.name, bundle = bundle.tx_hash.as_str(),
                        error = %e, "a bundle could not be sent again"),
                }
            }
        }
        released += self.store.close_bundles(&mined_bundles).await?;
        Ok(released)
    }

    /// `bundle` reverted on chain in block `block`, costing the sponsor `cost`: the operation whose validation
    /// failed there — the one the EntryPoint names when the bundle is simulated again on that block's state — is
    /// recorded as failed on chain (the cost counts in its agent's sponsorship; its agent has bundles of its own).
    async fn reverted(
        &self,
        client: &ChainClient,
        bundle: &BundleRecord,
        block: Option<u64>,
        cost: U256,
        open: &[OpenOperation],
    ) -> anyhow::Result<()> {
        let signed = read_signed(&bundle.raw_tx)?;
        let Ok(call) = userop::IEntryPoint::handleOpsCall::abi_decode(&signed.input) else {
            return Ok(());
        };
        let sponsor = self.sponsor.key.address();
        let authorizations: Vec<SignedAuthorization> = signed.authorization.into_iter().collect();
        let simulated = client
            .simulate_bundle(
                (sponsor, self.sponsor.entry_point, signed.input),
                bundle.gas_limit,
                &authorizations,
                block,
            )
            .await?;
        let failed = simulated
            .err()
            .and_then(|revert| userop::failed_op(&revert))
            .and_then(|(index, _, _)| call.ops.get(usize::try_from(index).ok()?))
            .and_then(|failed| {
                open.iter()
                    .find(|op| op.sender == failed.sender && U256::from(op.nonce) == failed.nonce)
            });
        let Some(op) = failed else {
            tracing::warn!(
                chain = self.sponsor.chain.name,
                bundle = bundle.tx_hash.as_str(),
                "a bundle reverted on chain and no operation of it is refused on that block's state"
            );
            return Ok(());
        };
        tracing::warn!(chain = self.sponsor.chain.name, bundle = bundle.tx_hash.as_str(), tx_id = %op.transfer_id,
            "an operation failed validation on chain: its agent's operations go in bundles of their own");
        self.store
            .failed_on_chain(op.transfer_id, &bundle.tx_hash, cost)
            .await?;
        Ok(())
    }

    /// The sponsor's nonce of `bundle` is used: by an earlier attempt at it (then that one is the bundle mined), or
    /// by a transaction agentd did not sign (closed as `replaced`). Answers how many operations wait again.
    async fn nonce_used(&self, client: &ChainClient, bundle: &BundleRecord) -> anyhow::Result<u64> {
        for earlier in self.store.bundle_attempts(&bundle.chain, bundle.nonce).await? {
            if let Some(receipt) = client.receipt(earlier.tx_hash.parse()?).await? {
                let cost = receipt.fee_paid();
                tracing::info!(
                    chain = self.sponsor.chain.name,
                    bundle = earlier.tx_hash.as_str(),
                    replaced_by = bundle.tx_hash.as_str(),
                    "an earlier attempt of a bundle was mined"
                );
                return Ok(self.store.earlier_attempt_mined(bundle.id, earlier.id, cost).await?);
            }
        }
        Ok(self.store.close_bundles(&[(bundle.id, "replaced", None)]).await?)
    }

    /// Sends `bundle` again (`known`: whether the node holds it; `stuck`: pending longer than `STUCK_AFTER_SECS`):
    /// the same bytes when everything it carries still passes and its fees need no raise, else a replacement at its
    /// nonce. Answers how many operations wait again.
    async fn revise(
        &self,
        client: &ChainClient,
        bundle: &BundleRecord,
        open: &[OpenOperation],
        (stuck, known): (bool, bool),
    ) -> anyhow::Result<u64> {
        let signed = read_signed(&bundle.raw_tx)?;
        let carried: Vec<(Uuid, PackedUserOperation)> = open
            .iter()
            .filter(|op| op.bundle_id == Some(bundle.id))
            .map(|op| Ok((op.transfer_id, PackedUserOperation::abi_decode(&op.packed)?)))
            .collect::<anyhow::Result<_>>()?;
        let kept = match carried.is_empty() {
            // A cancel, or a bundle whose operations all settled elsewhere: nothing of it is left to land.
            true => None,
            false => {
                self.carry(client, carried.clone(), signed.authorization.as_ref())
                    .await?
            }
        };
        let all_kept = kept.as_ref().is_some_and(|k| k.ops.len() == carried.len());
        if (signed.cancel || all_kept) && !stuck {
            // Lost by the node, young, and all of it still lands: the same bytes again.
            self.send_again(client, bundle).await;
            return Ok(0);
        }
        let cap = kept.as_ref().map(|k| k.caps().0);
        let raised = match stuck {
            true => carry::bumped(signed.fees, cap, &client.fees().await?),
            false => None,
        };
        let fees = match (raised, known) {
            (Some(fees), _) => fees,
            // In the node's pool and no room left to raise it: it waits (a replacement would be refused).
            (None, true) => return Ok(0),
            (None, false) if all_kept || signed.cancel => {
                self.send_again(client, bundle).await;
                return Ok(0);
            }
            // Lost by the node: the same fees, without what can no longer land.
            (None, false) => (
                signed.fees.0.min(cap.unwrap_or(u128::MAX)),
                signed.fees.1.min(cap.unwrap_or(u128::MAX)),
            ),
        };
        let next = match &kept {
            Some(kept) => self.replacement(bundle, kept, fees, signed.authorization)?,
            None => self.cancel(bundle, fees)?,
        };
        let ids = kept.as_ref().map(Carried::ids).unwrap_or_default();
        if !self.store.replace_bundle(bundle.id, &next, &ids).await? {
            return Ok(0);
        }
        self.metrics.count_bundle_replaced(self.sponsor.chain.name);
        tracing::warn!(
            chain = self.sponsor.chain.name,
            nonce = bundle.nonce,
            replaced = bundle.tx_hash.as_str(),
            bundle = next.tx_hash.as_str(),
            operations = ids.len(),
            max_fee_per_gas = fees.0,
            "a bundle was replaced at its nonce"
        );
        if let Err(e) = client.send_raw(&next.raw_tx).await {
            tracing::warn!(chain = self.sponsor.chain.name, bundle = next.tx_hash.as_str(), error = %e,
                "the node refused a bundle's replacement; it is sent again later");
        }
        Ok((carried.len() - ids.len()) as u64)
    }

    /// The bundle that replaces `bundle` at its nonce, carrying `kept` at `fees`.
    fn replacement(
        &self,
        bundle: &BundleRecord,
        kept: &Carried,
        fees: (u128, u128),
        authorization: Option<SignedAuthorization>,
    ) -> anyhow::Result<BundleRecord> {
        let sponsor = self.sponsor.key.address();
        let data = userop::handle_ops_call(&kept.packed(), sponsor);
        // A type-4 bundle carries only the operation of the account it designates: kept, so is its designation.
        self.sign(
            bundle.nonce,
            fees,
            (kept.gas_limit, self.sponsor.entry_point, data),
            authorization,
        )
    }

    /// A zero-value send of the sponsor to itself at `bundle`'s nonce: nothing it carried can land.
    fn cancel(&self, bundle: &BundleRecord, fees: (u128, u128)) -> anyhow::Result<BundleRecord> {
        let sponsor = self.sponsor.key.address();
        self.sign(bundle.nonce, fees, (SELF_SEND_GAS, sponsor, Bytes::new()), None)
    }

    /// The same signed bytes again.
    async fn send_again(&self, client: &ChainClient, bundle: &BundleRecord) {
        if let Err(e) = client.send_raw(&bundle.raw_tx).await {
            tracing::warn!(chain = self.sponsor.chain.name, bundle = bundle.tx_hash.as_str(), error = %e,
                "a bundle could not be sent again");
        }
    }
}

/// What the stored bytes of a bundle are.
fn read_signed(raw: &[u8]) -> anyhow::Result<Signed> {
    match TxEnvelope::decode_2718_exact(raw) {
        Ok(TxEnvelope::Eip1559(signed)) => {
            let tx = signed.tx();
            Ok(Signed {
                fees: (tx.max_fee_per_gas, tx.max_priority_fee_per_gas),
                authorization: None,
                cancel: tx.input.is_empty(),
                input: tx.input.clone(),
            })
        }
        Ok(TxEnvelope::Eip7702(signed)) => {
            let tx = signed.tx();
            Ok(Signed {
                fees: (tx.max_fee_per_gas, tx.max_priority_fee_per_gas),
                authorization: tx.authorization_list.first().cloned(),
                cancel: false,
                input: tx.input.clone(),
            })
        }
        _ => anyhow::bail!("a stored bundle is not a transaction agentd signs"),
    }
}
