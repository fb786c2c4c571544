//! The bundler (§22): per sponsorable chain, one instance at a time, it carries the signed operations in
//! `handleOps` bundles the sponsor key signs and sends (the sponsor their beneficiary), and settles every open
//! operation by the `UserOperationEvent` of its `user_op_hash`, in whichever transaction it appeared. An account
//! still without code designates the implementation by the agent key's EIP-7702 authorization, in a type-4 bundle
//! of its own, at the wallet's next nonce and only while the wallet has no transaction of its own open there.
//! Every bundle is simulated as a whole (`eth_estimateGas`) right before it is signed; one that fails is not sent.

use std::sync::Arc;
use std::time::Duration;

use alloy::consensus::{SignableTransaction, TxEip1559, TxEip7702, TxEnvelope};
use alloy::eips::eip2718::Encodable2718;
use alloy::eips::eip7702::{Authorization, SignedAuthorization};
use alloy::primitives::{Address, B256, U256};
use alloy::sol_types::{SolEvent, SolValue};
use serde_json::json;
use uuid::Uuid;

use super::SponsorChain;
use crate::chain::Chains;
use crate::chain::client::ChainClient;
use crate::chain::userop::{self, IEntryPoint, PackedUserOperation};
use crate::domain::amount::format_units;
use crate::domain::transaction::TxState;
use crate::signer::Keys;
use crate::store::operations::{BundleRecord, OpenOperation, OperationSettlement};
use crate::store::{Settlement, Store};

/// Operations in one bundle at most.
pub const MAX_OPERATIONS: usize = 16;
/// How often the bundler looks when nothing rang it.
const TICK: Duration = Duration::from_millis(500);
/// How far back the settlement looks for an operation's event.
const LOOKBACK_BLOCKS: u64 = 5_000;

/// What the bundler of one chain works with.
pub struct Bundler {
    pub store: Arc<dyn Store>,
    pub chains: Arc<Chains>,
    pub keys: Arc<Keys>,
    pub sponsor: SponsorChain,
    pub bell: Arc<tokio::sync::Notify>,
    pub metrics: Arc<crate::metrics::Metrics>,
}

impl Bundler {
    /// Bundles and settles until `stop` turns true.
    pub async fn run_until_stopped(self, mut stop: tokio::sync::watch::Receiver<bool>) {
        let name = self.sponsor.chain.name;
        loop {
            if *stop.borrow() {
                return;
            }
            if let Err(e) = self.round().await {
                tracing::warn!(chain = name, error = %e, "bundler round failed; trying again");
            }
            tokio::select! {
                _ = self.bell.notified() => {}
                _ = tokio::time::sleep(TICK) => {}
                _ = stop.changed() => {}
            }
        }
    }

    /// One round: settle what landed, then carry what waits, under the chain's bundler lock.
    async fn round(&self) -> anyhow::Result<()> {
        let name = self.sponsor.chain.name;
        let Some(_lock) = self.store.try_lock_watcher(&format!("bundler:{name}")).await? else {
            return Ok(());
        };
        let client = self.chains.get(name)?;
        let open = self.store.open_operations(name).await?;
        if open.is_empty() {
            return Ok(());
        }
        let settled = self.settle(client, &open).await?;
        if self.follow_bundles(client).await? > 0 {
            // Operations a bundle no longer carries wait again: read them as they stand now.
            return Ok(());
        }
        let waiting: Vec<&OpenOperation> = open
            .iter()
            .filter(|o| o.bundle_id.is_none() && !settled.contains(&o.transfer_id))
            .collect();
        for group in self.groups(client, &waiting).await? {
            if let Err(e) = self.send_bundle(client, &group).await {
                tracing::warn!(chain = name, error = %e, operations = group.ops.len(), "a bundle was not sent");
            }
        }
        Ok(())
    }

    /// Settles every open operation whose event the chain shows at the configured depth; a signed one whose
    /// approval ran out unused is dropped. Answers the ids settled.
    async fn settle(&self, client: &ChainClient, open: &[OpenOperation]) -> anyhow::Result<Vec<Uuid>> {
        let (latest, now) = client.latest_block().await?;
        let hashes: Vec<B256> = open.iter().filter_map(|o| o.user_op_hash.parse().ok()).collect();
        let topic = IEntryPoint::UserOperationEvent::SIGNATURE_HASH;
        let from = latest.saturating_sub(LOOKBACK_BLOCKS);
        let logs = client
            .user_operation_logs(self.sponsor.entry_point, topic, &hashes, from)
            .await?;
        let mut settled = Vec::new();
        for op in open {
            let found = logs.iter().find_map(|l| {
                let event = userop::user_operation_event(self.sponsor.entry_point, &l.log)?;
                (format!("{:#x}", event.userOpHash) == op.user_op_hash).then_some((l, event))
            });
            let settlement = match found {
                Some((log, _)) if latest + 1 < log.block_number + client.confirmations() => continue,
                Some((log, event)) => self.landed(op, log.tx_hash, log.block_number, &event),
                None if op.valid_until < now && op.bundle_id.is_none() => self.dropped(op),
                None => continue,
            };
            if self
                .store
                .settle_operation(op.transfer_id, &settlement)
                .await?
                .is_some()
            {
                tracing::info!(tx_id = %op.transfer_id, chain = self.sponsor.chain.name,
                    status = settlement.settlement.status.as_str(), "sponsored operation settled");
                settled.push(op.transfer_id);
            }
        }
        Ok(settled)
    }

    fn landed(
        &self,
        op: &OpenOperation,
        tx_hash: B256,
        block: u64,
        event: &IEntryPoint::UserOperationEvent,
    ) -> OperationSettlement {
        let status = match event.success {
            true => TxState::Confirmed,
            false => TxState::Reverted,
        };
        let tx_hash = format!("{tx_hash:#x}");
        let gas_cost = event.actualGasCost;
        let chain = self.sponsor.chain;
        OperationSettlement {
            settlement: Settlement {
                status,
                landed: None,
                block_number: Some(block),
                gas_used: u64::try_from(event.actualGasUsed).ok(),
                // The gas is the sponsorship's: the cap keeps only the native coin the account moved.
                actual_cost_wei: Some(match event.success {
                    true => op.reserved,
                    false => U256::ZERO,
                }),
                counts: Vec::new(),
            },
            landed_in: Some(tx_hash.clone()),
            gas_cost: Some(gas_cost),
            event: json!({
                "type": "tx_confirmation",
                "agent_id": op.agent_id,
                "chain": chain.name,
                "tx_hash": tx_hash,
                "status": status.as_str(),
                "block_number": block,
                "gas_used": u64::try_from(event.actualGasUsed).ok(),
                "confirmations": 1,
                "explorer_url": chain.tx_url(&tx_hash),
                "sponsored": true,
                "user_op_hash": op.user_op_hash,
                "gas_cost": format_units(gas_cost, chain.decimals),
            }),
            message: None,
        }
    }

    fn dropped(&self, op: &OpenOperation) -> OperationSettlement {
        OperationSettlement {
            settlement: Settlement {
                status: TxState::Dropped,
                landed: None,
                block_number: None,
                gas_used: None,
                actual_cost_wei: Some(U256::ZERO),
                counts: Vec::new(),
            },
            landed_in: None,
            gas_cost: Some(U256::ZERO),
            event: json!({
                "type": "tx_confirmation",
                "agent_id": op.agent_id,
                "chain": self.sponsor.chain.name,
                "tx_hash": serde_json::Value::Null,
                "status": "dropped",
                "sponsored": true,
                "user_op_hash": op.user_op_hash,
            }),
            message: None,
        }
    }
}

impl Bundler {
    /// Follows the bundles still `signed`: one mined is closed (its operations settled above, or waiting again when
    /// its event never came: the bundle reverted or left them out); one whose nonce the sponsor used for another
    /// transaction is closed as `replaced` (its operations wait again); one the node does not know (lost in a
    /// crash before or after its broadcast) is sent again as signed. Answers how many operations wait again.
    async fn follow_bundles(&self, client: &ChainClient) -> anyhow::Result<u64> {
        let sponsor = self.sponsor.key.address();
        let mut released = 0;
        for bundle in self.store.open_bundles(self.sponsor.chain.name).await? {
            let hash = bundle.tx_hash.parse()?;
            if let Some(receipt) = client.receipt(hash).await? {
                let cost = U256::from(receipt.gas_used) * U256::from(receipt.effective_gas_price);
                if !receipt.success {
                    tracing::warn!(
                        chain = self.sponsor.chain.name,
                        bundle = bundle.tx_hash.as_str(),
                        "a bundle reverted on chain; its operations wait for another"
                    );
                }
                released += self.store.close_bundle(bundle.id, "mined", Some(cost)).await?;
                continue;
            }
            if client.mined_nonce(sponsor).await? > bundle.nonce {
                released += self.store.close_bundle(bundle.id, "replaced", None).await?;
                continue;
            }
            if client.transaction(hash).await?.is_none() {
                // Signed and recorded, then lost (a crash, a node restart): the same bytes again, so that each of
                // its operations lands at most once (the EntryPoint's nonce) and the sponsor's nonce keeps no gap.
                if let Err(e) = client.send_raw(&bundle.raw_tx).await {
                    tracing::warn!(chain = self.sponsor.chain.name, bundle = bundle.tx_hash.as_str(), error = %e,
                        "a bundle could not be sent again");
                }
            }
        }
        Ok(released)
    }
}

/// Operations to carry in one bundle, with the authorization that designates the account of the first when it
/// has no code yet.
struct Group {
    ops: Vec<(Uuid, PackedUserOperation)>,
    authorization: Option<SignedAuthorization>,
}

impl Bundler {
    /// The bundles to send now: each account still without code alone with its designation (when its wallet has
    /// nothing of its own open on the chain), the others together, up to `MAX_OPERATIONS` a bundle.
    async fn groups(&self, client: &ChainClient, waiting: &[&OpenOperation]) -> anyhow::Result<Vec<Group>> {
        let mut shared = Vec::new();
        let mut alone = Vec::new();
        let mut designating: Vec<Address> = Vec::new();
        for op in waiting {
            let packed = PackedUserOperation::abi_decode(&op.packed)?;
            let code = client.code(op.sender).await?;
            if !code.is_empty() {
                shared.push((op.transfer_id, packed));
                continue;
            }
            // One designation per account at a time; its later operations wait for it to land.
            if designating.contains(&op.sender) {
                continue;
            }
            designating.push(op.sender);
            match self.authorization(client, op).await? {
                Some(authorization) => alone.push(Group {
                    ops: vec![(op.transfer_id, packed)],
                    authorization: Some(authorization),
                }),
                None => continue,
            }
        }
        let mut groups = alone;
        for chunk in shared.chunks(MAX_OPERATIONS) {
            groups.push(Group {
                ops: chunk.to_vec(),
                authorization: None,
            });
        }
        Ok(groups)
    }

    /// The agent key's EIP-7702 authorization of the configured implementation, with the chain's own id, at the
    /// wallet's next nonce; none while the wallet has a transaction of its own open on the chain.
    async fn authorization(
        &self,
        client: &ChainClient,
        op: &OpenOperation,
    ) -> anyhow::Result<Option<SignedAuthorization>> {
        let chain = self.sponsor.chain.name;
        if !self.store.open_transactions_of(op.agent_id, chain).await?.is_empty() {
            return Ok(None);
        }
        let nonce = client.pending_nonce(op.sender).await?;
        let authorization = Authorization {
            chain_id: U256::from(self.sponsor.chain.chain_id),
            address: self.sponsor.account_implementation,
            nonce,
        };
        let key = self.store.wallet_key(op.agent_id).await?;
        let signer = self.keys.open(op.agent_id, &key)?;
        let signature = signer.sign_hash(&authorization.signature_hash())?;
        Ok(Some(authorization.into_signed(signature)))
    }

    /// Simulates, signs, records and broadcasts one bundle.
    async fn send_bundle(&self, client: &ChainClient, group: &Group) -> anyhow::Result<()> {
        let sponsor = self.sponsor.key.address();
        let ops: Vec<PackedUserOperation> = group.ops.iter().map(|(_, op)| op.clone()).collect();
        let data = userop::handle_ops_call(&ops, sponsor);
        let auths: Vec<SignedAuthorization> = group.authorization.iter().cloned().collect();
        let gas = client
            .estimate_bundle(sponsor, self.sponsor.entry_point, data.clone(), U256::ZERO, &auths)
            .await?;
        // Never above the lowest fee the operations allow.
        let fees: Vec<(u128, u128)> = ops.iter().map(|op| userop::unpack_pair(op.gasFees)).collect();
        let max_fee = fees.iter().map(|(_, max)| *max).min().unwrap_or_default();
        let priority = fees.iter().map(|(tip, _)| *tip).min().unwrap_or_default().min(max_fee);
        let stored = self.store.next_bundle_nonce(self.sponsor.chain.name).await?;
        let nonce = client.pending_nonce(sponsor).await?.max(stored.unwrap_or(0));
        let gas_limit = gas + gas / 5 + 10_000;
        let chain_id = self.sponsor.chain.chain_id;
        let to = self.sponsor.entry_point;
        let envelope = match group.authorization.clone() {
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
                    input: data,
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
                    to: alloy::primitives::TxKind::Call(to),
                    value: U256::ZERO,
                    input: data,
                    access_list: Default::default(),
                };
                let signature = self.sponsor.key.sign_hash(&tx.signature_hash())?;
                TxEnvelope::from(tx.into_signed(signature))
            }
        };
        let bundle = BundleRecord {
            id: Uuid::new_v4(),
            chain: self.sponsor.chain.name.to_string(),
            nonce,
            tx_hash: envelope.tx_hash().to_string(),
            raw_tx: envelope.encoded_2718(),
            gas_limit,
            max_fee_per_gas: max_fee,
        };
        let ids: Vec<Uuid> = group.ops.iter().map(|(id, _)| *id).collect();
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
}
