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
            // A round rung by new operations carries them at once; the open bundles are followed once a tick at most
            // (from the round that began following them, until one could settle all that landed first; one late by
            // the time a bundle may stay pending before it is replaced settles all of it while it carries, so
            // following, and so replacing stuck bundles, is never put off longer).
            let every = self.follow_every.max(TICK);
            let late = |by: Duration| followed.is_none_or(|at| at.elapsed() >= by);
            let follow = match (late(every), late((every * 2).max(self.stuck_after))) {
                (false, _) => Follow::No,
                (true, false) => Follow::Due,
                (true, true) => Follow::Overdue,
            };
            match self.round(follow).await {
                Ok(round) => {
                    if round.followed {
                        followed = Some(Instant::now());
                    }
                    if let Some(block) = round.held_back {
                        self.next_block(block, &mut stop).await;
                        continue;
                    }
                    // The lock was held: by another instance's round, or still by this one's last (on PostgreSQL a
                    // lease is given back after its round ends). The ring that started this round is spent: try
                    // again shortly rather than at the next ring or tick.
                    if round.locked_out {
                        tokio::select! {
                            _ = tokio::time::sleep(BLOCK_POLL) => {}
                            _ = stop.changed() => {}
                        }
                        continue;
                    }
                }
                Err(e) => tracing::warn!(chain = name, error = %e, "bundler round failed; trying again"),
            }
            tokio::select! {
                _ = self.bell.notified() => {}
                _ = tokio::time::sleep(TICK) => {}
                _ = stop.changed() => {}
            }
        }
    }

    /// One round, under the chain's bundler lock. A round that follows (`follow`: a busy bundler, rung by every
    /// operation signed, follows once `follow_every`, as the watcher follows the wallets' transactions once an
    /// interval) reads every open operation, settles each whose event the chain shows or that can no longer land,
    /// then follows the bundles open when it began (a mined bundle is closed with every operation it landed
    /// settled); a round that only carries reads the operations no bundle carries, and settles those of them that
    /// landed in another's bundle or can no longer land: what agentd's bundles carried settles in the next round that
    /// follows, as the wallets' transactions settle once an interval. Both carry, while they settle, each operation
    /// in no bundle whose event the chain does not show and whose nonce is its sender's next in the EntryPoint's
    /// sequence at the latest block, after its earlier ones carried with it (the EntryPoint refuses any other,
    /// `AA25`); those held back wait for the next block. Carrying does not wait for settlements: with operations to
    /// carry, a round settles a commit at a time while its bundles are sent and no longer than they take, and
    /// follows the bundles only once it settled all it found (else the next round follows, and reads the rest again),
    /// unless following is `Overdue`: then it settles all it found while it carries.
    async fn round(&self, following: Follow) -> anyhow::Result<Round> {
        let follow = following != Follow::No;
        let name = self.sponsor.chain.name;
        let Some(_lock) = self.store.try_lock_watcher(&format!("bundler:{name}")).await? else {
            return Ok(Round {
                locked_out: true,
                ..Round::default()
            });
        };
        let client = self.chains.get(name)?;
        let started = Instant::now();
        let open = self.store.open_operations(name, !follow).await?;
        if open.is_empty() {
            return Ok(Round {
                followed: follow,
                ..Round::default()
            });
        }
        // Read before this round signs any: a bundle signed now is followed from the next round that follows, once
        // its operations' events can have settled them.
        let (bundles, (settling, seen, latest, senders)) = tokio::try_join!(
            async {
                anyhow::Ok(match follow {
                    true => self.store.open_bundles(name).await?,
                    false => Vec::new(),
                })
            },
            self.settlements(client, &open)
        )?;
        let waiting = waiting(&open, &seen, &senders);
        // Operations held back behind an earlier one of their sender (in a bundle not mined yet, or gone): the next
        // round is the one after the next block.
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
                    let groups = self.groups(client, &waiting, &senders).await?;
                    self.send_bundles(client, groups).await.unwrap_or_else(|e| {
                        tracing::warn!(chain = name, error = %e, "the round's bundles were not sent");
                        (0, 0)
                    })
                }
            };
            anyhow::Ok((sent, carried, started.elapsed()))
        };
        // Operations a bundle no longer carries wait again: the next round reads them as they stand then.
        let open_bundles = bundles.len();
        let carrying = (!waiting.is_empty() && following != Follow::Overdue).then(|| AtomicBool::new(true));
        let sending = async {
            let sent = sending.await;
            if let Some(carrying) = &carrying {
                carrying.store(false, Ordering::Relaxed);
            }
            sent
        };
        let closing = async {
            let (settled_ops, all) = self.settle(&settling, carrying.as_ref()).await?;
            let settled = started.elapsed();
            let followed = match all {
                true => {
                    self.follow_bundles(client, bundles, &open).await?;
                    follow
                }
                false => false,
            };
            anyhow::Ok((settled_ops, followed, settled, started.elapsed()))
        };
        let (sending, closing) = tokio::join!(sending, closing);
        let ((sent, carried, sent_at), (settled_ops, followed, settled_at, followed_at)) = (sending?, closing?);
        let ms = |d: Duration| d.as_secs_f64() * 1e3;
        tracing::debug!(
            chain = name,
            open = open.len(),
            waiting = waiting.len(),
            sent,
            carried,
            landed = settling.len(),
            settled = settled_ops,
            followed = if followed { open_bundles } else { 0 },
            read_ms = ms(read),
            send_ms = ms(sent_at - read),
            settle_ms = ms(settled_at - read),
            follow_ms = ms(followed_at - settled_at),
            "bundler round"
        );
        Ok(Round {
            held_back: held_back.then_some(latest),
            followed,
            locked_out: false,
        })
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

    /// How the operations `open` settle now: each whose event the chain shows at the configured depth, and each
    /// signed one whose approval ran out unused or whose nonce another operation used. Answers them with the ids of
    /// every operation not to carry again (those, and those whose event the chain shows at a lesser depth), the
    /// latest block, and each sender of an operation in no bundle as that block shows it: whether it has code, and
    /// its next EntryPoint nonce.
    async fn settlements(
        &self,
        client: &ChainClient,
        open: &[OpenOperation],
    ) -> anyhow::Result<(Vec<SettlingOperation>, Vec<Uuid>, u64, Senders)> {
        let (latest, now) = client.latest_block().await?;
        let hashes: Vec<B256> = open.iter().filter_map(|o| o.user_op_hash.parse().ok()).collect();
        let topic = IEntryPoint::UserOperationEvent::SIGNATURE_HASH;
        let from = events_from(open, latest);
        // The senders of the waiting operations still valid: their code and EntryPoint nonces at `latest`, read in
        // one batch beside the logs (the nonces used only for those without an event; the code tells which
        // accounts are designated already, which each bundle's simulation checks again).
        let mut senders: Vec<Address> = open
            .iter()
            .filter(|o| o.bundle_id.is_none() && o.valid_until >= now)
            .map(|o| o.sender)
            .collect();
        senders.sort();
        senders.dedup();
        let nonces = async {
            let read = client.senders_at(self.sponsor.entry_point, &senders, latest).await?;
            read.into_iter()
                .map(|(code, n)| Some((!code.is_empty(), u64::try_from(n?).ok()?)))
                .collect::<Option<Vec<(bool, u64)>>>()
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
        let used: Senders = senders.into_iter().zip(nonces).collect();
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
                    Some((_, next)) if *next > op.nonce => self.dropped(op),
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
        Ok((settling, seen, latest, used))
    }

    /// Settles a round's operations in write transactions of at most `SETTLED_PER_COMMIT`, as the watcher settles
    /// transfers: on SQLite every writer waits for one, the sends' reservation rounds too (a busy tick's hundreds of
    /// operations in one held the writer for a tenth of a second, the sponsored row's p99 in `bench sponsored`).
    /// In a round that sends bundles (`carrying`, true while they are being sent), commit after commit while they
    /// are sent and no further than the first commit once they are: the round ends, and the next one, which reads
    /// what is left, carries what waited meanwhile. Otherwise (`None`), all of them. Answers how many were settled,
    /// and whether all of `settling` was.
    async fn settle(
        &self,
        settling: &[SettlingOperation],
        carrying: Option<&AtomicBool>,
    ) -> anyhow::Result<(usize, bool)> {
        let mut settled = 0;
        for (i, some) in settling.chunks(crate::store::SETTLED_PER_COMMIT).enumerate() {
            if i > 0 && carrying.is_some_and(|c| !c.load(Ordering::Relaxed)) {
                return Ok((settled, false));
            }
            let records = self.store.settle_operations(some).await?;
            for (op, _) in some.iter().zip(&records).filter(|(_, r)| r.is_some()) {
                tracing::info!(tx_id = %op.id, chain = self.sponsor.chain.name,
                    status = op.settlement.settlement.status.as_str(), "sponsored operation settled");
                settled += 1;
            }
        }
        Ok((settled, true))
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

/// Whether a round follows the open bundles: not yet, due (once `follow_every`), or late by `stuck_after` (at least
/// two intervals: its settlements were cut short by carrying since).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Follow {
    No,
    Due,
    Overdue,
}

/// What a round did that decides the next: the block after which operations it held back can go (`None`: none
/// held back), whether it followed the open bundles (or, with none open, had nothing to follow), and whether it did
/// nothing because the chain's bundler lock was held.
#[derive(Default)]
struct Round {
    held_back: Option<u64>,
    followed: bool,
    locked_out: bool,
}

/// What the latest block shows of each sender of an operation in no bundle: whether it has code, and its next nonce
/// in the EntryPoint's sequence (key 0).
type Senders = BTreeMap<Address, (bool, u64)>;

/// The operations to carry in this round: those in no bundle whose event the chain does not show (`seen`) and whose
/// nonce is their sender's next in `senders`, or follows the one before it carried with it. Any other waits (an
/// earlier one of its sender in a bundle not mined yet, or gone: the EntryPoint would refuse it, `AA25`).
fn waiting<'a>(open: &'a [OpenOperation], seen: &[Uuid], senders: &Senders) -> Vec<&'a OpenOperation> {
    let mut next: BTreeMap<Address, u64> = senders.iter().map(|(sender, (_, nonce))| (*sender, *nonce)).collect();
    let mut candidates: Vec<&OpenOperation> = open
        .iter()
        .filter(|o| o.bundle_id.is_none() && !seen.contains(&o.transfer_id))
        .collect();
    // By agent and nonce (as they are read): an agent's operations are its one sender's, in nonce order.
    candidates.sort_by_key(|o| (o.agent_id, o.nonce));
    candidates.retain(|op| match next.get_mut(&op.sender) {
        Some(expected) if *expected == op.nonce => {
            *expected += 1;
            true
        }
        _ => false,
    });
    candidates
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
            agent_id: Uuid::from_u128(u128::from(sender)),
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

    /// An operation is carried only at its sender's next nonce as the latest block shows it, or right after one
    /// carried with it: one behind an earlier one in a bundle not mined yet, or behind a gap, waits. A round that
    /// only carries reads no operation a bundle carries, so this holds from the chain's nonces alone.
    #[test]
    fn an_operation_waits_while_an_earlier_one_of_its_sender_is_in_a_bundle_not_yet_mined() {
        let bundle = Some(Uuid::new_v4());
        // Sender 1: nonce 4 in a bundle not mined (the chain's next is 4), 5 and 6 waiting. Sender 2: nonce 7 in a
        // bundle whose event the chain shows (next 8), 8 waiting. Sender 3: 2 waiting (next 2), 3 in a bundle
        // (released and carried again in another order). Sender 4: 3, 4 and 6 waiting (next 3): 6 is behind a gap.
        // Sender 5: 9 and 10 waiting, with nothing in a bundle (next 9), read in no order.
        let open = vec![
            op(1, 4, bundle),
            op(1, 5, None),
            op(1, 6, None),
            op(2, 7, bundle),
            op(2, 8, None),
            op(3, 2, None),
            op(3, 3, bundle),
            op(4, 3, None),
            op(4, 4, None),
            op(4, 6, None),
            op(5, 10, None),
            op(5, 9, None),
        ];
        let seen = vec![open[3].transfer_id];
        let senders: Senders = [(1, 4), (2, 8), (3, 2), (4, 3), (5, 9)]
            .into_iter()
            .map(|(sender, next)| (Address::repeat_byte(sender), (true, next)))
            .collect();
        let carried: Vec<(u8, u64)> = waiting(&open, &seen, &senders)
            .iter()
            .map(|o| (o.sender[0], o.nonce))
            .collect();
        assert_eq!(carried, vec![(2, 8), (3, 2), (4, 3), (4, 4), (5, 9), (5, 10)]);
        // Rounds that only carry read the operations in no bundle: the same from them alone.
        let in_no_bundle: Vec<OpenOperation> = open.iter().filter(|o| o.bundle_id.is_none()).cloned().collect();
        let carried: Vec<(u8, u64)> = waiting(&in_no_bundle, &[], &senders)
            .iter()
            .map(|o| (o.sender[0], o.nonce))
            .collect();
        assert_eq!(carried, vec![(2, 8), (3, 2), (4, 3), (4, 4), (5, 9), (5, 10)]);
    }
}
