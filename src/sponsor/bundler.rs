//! The bundler (§22): per sponsorable chain, one instance at a time, it carries the signed operations in
//! `handleOps` bundles the sponsor key signs and sends (the sponsor their beneficiary), and settles every open
//! operation by the `UserOperationEvent` of its `user_op_hash`, in whichever transaction it appeared. An account
//! still without code designates the implementation by the agent key's EIP-7702 authorization, in a type-4 bundle
//! of its own, at the wallet's next nonce and only while the wallet has no transaction of its own open there; an
//! agent whose key was ever exported, or one of whose operations failed validation on chain, has bundles of its own
//! (`group`). Every bundle is simulated as a whole right
//! before it is signed, re-sent or replaced, and an operation the EntryPoint refuses there is left out with every
//! later operation of its agent (`carry`). A bundle pending longer than `STUCK_AFTER_SECS` is replaced at its nonce
//! with higher fees, never above the lowest `maxFeePerGas` it carries (`follow`).

use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use alloy::primitives::{Address, B256, U256};
use alloy::sol_types::SolEvent;
use serde_json::json;
use uuid::Uuid;

use super::SponsorChain;
use crate::chain::Chains;
use crate::chain::Node;
use crate::chain::client::ChainClient;
use crate::chain::userop::{self, IEntryPoint};
use crate::domain::amount::format_units;
use crate::domain::clock::Clock;
use crate::domain::transaction::TxState;
use crate::signer::Keys;
use crate::store::operations::{OpenOperation, OperationSettlement, SettlingOperation};
use crate::store::{Settlement, Store};

/// Operations in one bundle at most.
pub const MAX_OPERATIONS: usize = 16;
/// How often the bundler looks when nothing rang it.
const TICK: Duration = Duration::from_millis(500);
/// How often the bundler asks for the latest block while operations wait for an earlier one's bundle to be mined.
const BLOCK_POLL: Duration = Duration::from_millis(20);
/// How far back the settlement looks for an operation's event.
const LOOKBACK_BLOCKS: u64 = 5_000;
/// How far before the block an operation's reads were made at its event is still looked for: a reorganisation may
/// put the bundle that carries it at a height the chain had reached before it was signed.
const REORG_MARGIN: u64 = 128;

/// What the bundler of one chain works with.
pub struct Bundler {
    pub store: Arc<dyn Store>,
    pub chains: Arc<Chains>,
    pub keys: Arc<Keys>,
    pub sponsor: SponsorChain,
    pub bell: Arc<tokio::sync::Notify>,
    pub metrics: Arc<crate::metrics::Metrics>,
    /// How long a bundle may stay pending before it is replaced with higher fees (`STUCK_AFTER_SECS`, §14).
    pub stuck_after: Duration,
    /// How often a busy bundler follows its open bundles (replacing stuck ones): the watcher's interval
    /// (`WATCHER_INTERVAL_MS`), at which the wallets' transactions are followed, and never more often than a `TICK`.
    pub follow_every: Duration,
    pub clock: Arc<dyn Clock>,
}

impl Bundler {
    /// Bundles and settles until `stop` turns true.
    pub async fn run_until_stopped(self, mut stop: tokio::sync::watch::Receiver<bool>) {
        let name = self.sponsor.chain.name;
        let mut followed: Option<Instant> = None;
        loop {
            if *stop.borrow() {
                return;
            }
            // A round rung by new operations carries them at once; the open bundles are followed once a tick at most.
            let follow = followed.is_none_or(|at| at.elapsed() >= self.follow_every.max(TICK));
            if follow {
                followed = Some(Instant::now());
            }
            match self.round(follow).await {
                Ok(Some(block)) => {
                    self.next_block(block, &mut stop).await;
                    continue;
                }
                Ok(None) => {}
                Err(e) => tracing::warn!(chain = name, error = %e, "bundler round failed; trying again"),
            }
            tokio::select! {
                _ = self.bell.notified() => {}
                _ = tokio::time::sleep(TICK) => {}
                _ = stop.changed() => {}
            }
        }
    }

    /// One round, under the chain's bundler lock: read what landed or can no longer land, then carry what waits
    /// while the former settle (`settle`: for as long as the bundles take to send, all of them when `follow`) and
    /// (when `follow`) the bundles that were open when the round began are followed. A busy bundler, rung by every
    /// operation signed, follows once a `TICK` (as the watcher follows the wallets' transactions once an interval).
    /// The waiting operations do not wait for the settlements' commits (a waiting operation does not depend on
    /// another's settlement), nor does the next round: what a round leaves unsettled the next reads again. One whose
    /// event the chain shows, at any depth, is not carried again, nor is one whose sender has an earlier operation in
    /// a bundle not yet mined (the EntryPoint would refuse it, `AA25`, until then).
    async fn round(&self, follow: bool) -> anyhow::Result<Option<u64>> {
        let name = self.sponsor.chain.name;
        let Some(_lock) = self.store.try_lock_watcher(&format!("bundler:{name}")).await? else {
            return Ok(None);
        };
        let client = self.chains.get(name)?;
        let started = Instant::now();
        let open = self.store.open_operations(name).await?;
        if open.is_empty() {
            return Ok(None);
        }
        // Read before this round signs any: a bundle signed now is followed from the next round, once its
        // operations' events can have settled them.
        let (bundles, (settling, seen, latest)) = tokio::try_join!(
            async { anyhow::Ok(self.store.open_bundles(name).await?) },
            self.settlements(client, &open)
        )?;
        let waiting = waiting(&open, &seen);
        // Operations held back behind an earlier one of their sender carried in a bundle the chain does not show
        // yet: the next round is the one after the next block.
        let held_back = open
            .iter()
            .filter(|o| o.bundle_id.is_none() && !seen.contains(&o.transfer_id))
            .count()
            > waiting.len();
        let read = started.elapsed();
        let sending = async {
            let (sent, carried) = match waiting.is_empty() {
                true => (0, 0),
                false => {
                    let groups = self.groups(client, &waiting).await?;
                    self.send_bundles(client, groups).await.unwrap_or_else(|e| {
                        tracing::warn!(chain = name, error = %e, "the round's bundles were not sent");
                        (0, 0)
                    })
                }
            };
            anyhow::Ok((sent, carried, started.elapsed()))
        };
        // Operations a bundle no longer carries wait again: the next round reads them as they stand then.
        let bundles = match follow {
            true => bundles,
            false => Vec::new(),
        };
        let followed = bundles.len();
        // What landed settles while the bundles are sent, a commit at a time, and no longer than they take (the rest
        // in the next rounds, which read it again): carrying does not wait for settlements. All of it in a round with
        // nothing to send, and in a round that follows the open bundles, before they are followed: a mined bundle
        // is closed with every operation it landed settled (what it leaves open waits for another bundle).
        let carrying = (!waiting.is_empty() && !follow).then(|| AtomicBool::new(true));
        let sending = async {
            let sent = sending.await;
            if let Some(carrying) = &carrying {
                carrying.store(false, Ordering::Relaxed);
            }
            sent
        };
        let closing = async {
            let settled_ops = self.settle(&settling, carrying.as_ref()).await?;
            let settled = started.elapsed();
            self.follow_bundles(client, bundles, &open).await?;
            anyhow::Ok((settled_ops, settled, started.elapsed()))
        };
        let (sending, closing) = tokio::join!(sending, closing);
        let ((sent, carried, sent_at), (settled_ops, settled_at, followed_at)) = (sending?, closing?);
        let ms = |d: Duration| d.as_secs_f64() * 1e3;
        tracing::debug!(
            chain = name,
            open = open.len(),
            waiting = waiting.len(),
            sent,
            carried,
            landed = settling.len(),
            settled = settled_ops,
            followed,
            read_ms = ms(read),
            send_ms = ms(sent_at - read),
            settle_ms = ms(settled_at - read),
            follow_ms = ms(followed_at - settled_at),
            "bundler round"
        );
        Ok(held_back.then_some(latest))
    }

    /// Waits until the chain's latest block is past `block`, asking every `BLOCK_POLL`, for at most a `TICK` (or
    /// until `stop`).
    async fn next_block(&self, block: u64, stop: &mut tokio::sync::watch::Receiver<bool>) {
        let Ok(client) = self.chains.get(self.sponsor.chain.name) else {
            return;
        };
        let started = Instant::now();
        // Asked at once first: the round's own bundles may be mined already (a node that mines as they come).
        while started.elapsed() < TICK {
            if client.block_number().await.is_ok_and(|latest| latest > block) {
                return;
            }
            tokio::select! {
                _ = tokio::time::sleep(BLOCK_POLL) => {}
                _ = stop.changed() => return,
            }
        }
    }

    /// How the open operations settle now: each whose event the chain shows at the configured depth, and each signed
    /// one whose approval ran out unused or whose nonce another operation used. Answers them with the ids of every
    /// operation not to carry again (those, and those whose event the chain shows at a lesser depth).
    async fn settlements(
        &self,
        client: &ChainClient,
        open: &[OpenOperation],
    ) -> anyhow::Result<(Vec<SettlingOperation>, Vec<Uuid>, u64)> {
        let (latest, now) = client.latest_block().await?;
        let hashes: Vec<B256> = open.iter().filter_map(|o| o.user_op_hash.parse().ok()).collect();
        let topic = IEntryPoint::UserOperationEvent::SIGNATURE_HASH;
        let from = events_from(open, latest);
        // The senders of the waiting operations still valid: their EntryPoint nonces at `latest`, read in one batch
        // beside the logs (used only for those without an event).
        let mut senders: Vec<Address> = open
            .iter()
            .filter(|o| o.bundle_id.is_none() && o.valid_until >= now)
            .map(|o| o.sender)
            .collect();
        senders.sort();
        senders.dedup();
        let nonces = async {
            let nonces = client
                .entry_point_nonces_at(self.sponsor.entry_point, &senders, latest)
                .await?;
            nonces
                .into_iter()
                .map(|n| n.and_then(|n| u64::try_from(n).ok()))
                .collect::<Option<Vec<u64>>>()
                .ok_or_else(|| anyhow::anyhow!("the EntryPoint's getNonce answer is unreadable"))
        };
        let logs = async {
            anyhow::Ok(
                client
                    .user_operation_logs(self.sponsor.entry_point, topic, &hashes, from)
                    .await?,
            )
        };
        let (logs, nonces) = tokio::try_join!(logs, nonces)?;
        let mut events = BTreeMap::new();
        for l in &logs {
            if let Some(event) = userop::user_operation_event(self.sponsor.entry_point, &l.log) {
                events.entry(format!("{:#x}", event.userOpHash)).or_insert((l, event));
            }
        }
        let used: BTreeMap<Address, u64> = senders.into_iter().zip(nonces).collect();
        let mut settling = Vec::new();
        let mut seen = Vec::new();
        for op in open {
            let settlement = match events.get(&op.user_op_hash) {
                Some((log, _)) if latest + 1 < log.block_number + client.confirmations() => {
                    seen.push(op.transfer_id);
                    continue;
                }
                Some((log, event)) => self.landed(op, log.tx_hash, log.block_number, event),
                None if op.bundle_id.is_some() => continue,
                None if op.valid_until < now => self.dropped(op),
                // Waiting and without an event up to `latest`: dropped once that block shows its sender's
                // EntryPoint nonce used by another operation.
                None => match used.get(&op.sender) {
                    Some(next) if *next > op.nonce => self.dropped(op),
                    _ => continue,
                },
            };
            seen.push(op.transfer_id);
            settling.push(SettlingOperation {
                id: op.transfer_id,
                agent_id: op.agent_id,
                settlement,
            });
        }
        Ok((settling, seen, latest))
    }

    /// Settles a round's operations in write transactions of at most `SETTLED_PER_COMMIT`, as the watcher settles
    /// transfers: on SQLite every writer waits for one, the sends' reservation rounds too (a busy tick's hundreds of
    /// operations in one held the writer for a tenth of a second, the sponsored row's p99 in `bench sponsored`).
    /// In a round that sends bundles and follows none (`carrying`, true while they are being sent), commit after
    /// commit while they are sent and no further than the first commit once they are: the round ends, and the next
    /// one, which reads what is left, carries what waited meanwhile. Otherwise (`None`), all of them. Answers how
    /// many were settled.
    async fn settle(&self, settling: &[SettlingOperation], carrying: Option<&AtomicBool>) -> anyhow::Result<usize> {
        let mut settled = 0;
        for (i, some) in settling.chunks(crate::store::SETTLED_PER_COMMIT).enumerate() {
            if i > 0 && carrying.is_some_and(|c| !c.load(Ordering::Relaxed)) {
                break;
            }
            let records = self.store.settle_operations(some).await?;
            for (op, _) in some.iter().zip(&records).filter(|(_, r)| r.is_some()) {
                tracing::info!(tx_id = %op.id, chain = self.sponsor.chain.name,
                    status = op.settlement.settlement.status.as_str(), "sponsored operation settled");
                settled += 1;
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

/// The operations to carry in this round: those in no bundle whose event the chain does not show (`seen`), except
/// those whose sender has an earlier operation in a bundle whose event it does not show yet.
fn waiting<'a>(open: &'a [OpenOperation], seen: &[Uuid]) -> Vec<&'a OpenOperation> {
    let mut carried: BTreeMap<Address, u64> = BTreeMap::new();
    for op in open
        .iter()
        .filter(|o| o.bundle_id.is_some() && !seen.contains(&o.transfer_id))
    {
        let lowest = carried.entry(op.sender).or_insert(op.nonce);
        *lowest = (*lowest).min(op.nonce);
    }
    open.iter()
        .filter(|o| o.bundle_id.is_none() && !seen.contains(&o.transfer_id))
        .filter(|o| carried.get(&o.sender).is_none_or(|lowest| o.nonce < *lowest))
        .collect()
}

mod carry;
mod follow;
mod group;

/// The first block to look for the events of `open` in, `latest` being the latest: none can be in a block before the
/// one its reads were made at (it was signed after that block was mined), less `REORG_MARGIN`; an operation stored
/// without that block sends the search `LOOKBACK_BLOCKS` back, as does an empty `open`. Never further back than
/// that: the node's log search costs about the blocks it goes through, and the chain's history grows.
fn events_from(open: &[OpenOperation], latest: u64) -> u64 {
    let lookback = latest.saturating_sub(LOOKBACK_BLOCKS);
    // `None` orders first: one operation without its read block (or none open) sends the search back in full.
    match open.iter().map(|o| o.read_block).min().flatten() {
        Some(block) => block.saturating_sub(REORG_MARGIN).max(lookback),
        None => lookback,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn op(sender: u8, nonce: u64, bundle: Option<Uuid>) -> OpenOperation {
        OpenOperation {
            transfer_id: Uuid::new_v4(),
            agent_id: Uuid::nil(),
            sender: Address::repeat_byte(sender),
            nonce,
            packed: Vec::new(),
            user_op_hash: String::new(),
            max_fee_per_gas: 0,
            valid_until: 0,
            bundle_id: bundle,
            status: "signed".into(),
            reserved: U256::ZERO,
            read_block: None,
            alone: false,
        }
    }

    /// The events of the open operations are looked for from the earliest block their reads were made at, less the
    /// margin for reorganisations; without that block for any of them, `LOOKBACK_BLOCKS` back.
    #[test]
    fn the_events_are_looked_for_from_the_earliest_read_block() {
        let at = |read: Option<u64>| OpenOperation {
            read_block: read,
            ..op(1, 0, None)
        };
        let latest = 10_000;
        assert_eq!(
            events_from(&[at(Some(9_900)), at(Some(9_950))], latest),
            9_900 - REORG_MARGIN
        );
        assert_eq!(
            events_from(&[at(Some(9_900)), at(None)], latest),
            latest - LOOKBACK_BLOCKS
        );
        assert_eq!(events_from(&[], latest), latest - LOOKBACK_BLOCKS);
        assert_eq!(events_from(&[at(Some(1_000))], latest), latest - LOOKBACK_BLOCKS);
        assert_eq!(events_from(&[at(Some(50))], 100), 0);
    }

    #[test]
    fn an_operation_waits_while_an_earlier_one_of_its_sender_is_in_a_bundle_not_yet_mined() {
        let bundle = Some(Uuid::new_v4());
        // Sender 1: nonce 4 in a bundle, 5 and 6 waiting. Sender 2: nonce 7 in a bundle whose event the chain shows,
        // 8 waiting. Sender 3: 2 waiting, 3 in a bundle (released and carried again in another order).
        let open = vec![
            op(1, 4, bundle),
            op(1, 5, None),
            op(1, 6, None),
            op(2, 7, bundle),
            op(2, 8, None),
            op(3, 2, None),
            op(3, 3, bundle),
        ];
        let seen = vec![open[3].transfer_id];
        let carried: Vec<(u8, u64)> = waiting(&open, &seen).iter().map(|o| (o.sender[0], o.nonce)).collect();
        assert_eq!(carried, vec![(2, 8), (3, 2)]);
    }
}
