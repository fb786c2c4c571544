//! Group commit (issue 36), the money's part: what a round of sends and audit entries does. Work that arrives while
//! a round is being written waits for the next round, and a round writes all of it in one database transaction, so
//! one commit (one `fsync` on SQLite) carries many sends. The queue is the batcher's (`crate::batch`: the first item
//! to find no round running starts one in its own task, so a request that goes away cannot cut a round short
//! between its commit and its answers; each round takes everything waiting, up to `MOST`); this file is its work.
//!
//! - `reserve_round` reserves on-chain sends of any agents: each (agent, chain)'s send lock is taken once, in one
//!   order (one guard for all: `Store::lock_senders`), and the one sign-and-apply loop (`reserve::sign_and_apply_all`)
//!   decides every send in turn in one reserving transaction, the ones before it counted as they will be stored. A
//!   send whose key is in memory is signed in that transaction once its decision allowed it (microseconds), so a round
//!   of such sends is one pass and one commit; a token's sends are signed outside the transaction and decided again
//!   and stored in the next pass. A send is never signed before a decision allowed it, and is stored only with a
//!   signature made at the nonce the decision named (§20). A send under a lock its caller holds (a call simulated
//!   under it, §18), anything without a nonce, and a send a round could not take are a round of one of the same loop,
//!   run at once (`reserve::sign_and_apply`), waiting for no round.
//! - The audit entries of outflows answered since (`Rounds::record`: the `pending` mark of one the node took, and
//!   its `transfer_accepted`) wait for the next round of the first shard and are written in its committing
//!   transaction, after its sends; with no send waiting, alone (`record_round`): one writer's commit carries both
//!   kinds, and only one round at a time holds the audit chain's head.
//! - An entry kept with its outflow's reservation (`AuditProtocol::KeptWithReservation`) is lazy
//!   (`Rounds::record_lazily`): its outflow is answered without waiting for it, and it rides in the first shard's
//!   next round of sends, or in one of its own after `LAZY`. A read of the log waits for what was answered before it
//!   (`Rounds::entries_written`); a process that dies first leaves the kept entry for the watcher.

use std::hash::{Hash, Hasher};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use uuid::Uuid;

use super::reserve::{End, Outcome, ToReserve, sign_and_apply_all};
use super::{TransferError, sign_transfer, signer_error, store_error};
use crate::batch::{self, Batcher, Reply, Unanswered};
use crate::domain::chain::ChainInfo;
use crate::domain::clock::SystemClock;
use crate::signer::WalletSigner;
use crate::store::{OutflowEntry, Reservation, SignedTx, Store, StoreError, TransferRequest};

/// The most items one round takes.
const MOST: usize = 64;

/// How long an entry nobody waits for may wait for a round that runs anyway before it takes one of its own.
const LAZY: Duration = Duration::from_millis(20);

/// How a send in a round is signed at the nonce its decision named (its carrier's signature: a wallet transaction,
/// or a user operation of the agent's account with the paymaster's approval, §22).
pub(super) type SignAt = Arc<dyn Fn(&TransferRequest, Option<u64>) -> Result<SignedTx, TransferError> + Send + Sync>;

/// An on-chain send to reserve in a round: its request, how it is signed, and whether every key that signs it is in
/// this process's memory (`WalletSigner::in_memory`: signed inside the reserving transaction).
pub(super) struct Sending {
    pub request: TransferRequest,
    pub sign: SignAt,
    pub in_memory: bool,
}

impl Sending {
    /// A wallet-paid transaction of the agent's key (EIP-1559).
    pub(super) fn transaction(
        request: TransferRequest,
        signer: Arc<dyn WalletSigner>,
        chain: &'static ChainInfo,
        priority_fee: u128,
    ) -> Self {
        let in_memory = signer.in_memory();
        let sign = move |request: &TransferRequest, nonce: Option<u64>| {
            sign_transfer(signer.as_ref(), chain, request, priority_fee, nonce.unwrap_or(0))
                .map_err(|e| signer_error(request.agent_id, e))
        };
        Sending {
            request,
            sign: Arc::new(sign),
            in_memory,
        }
    }
}

/// A round's work: a send to reserve, or an outflow's audit entry to write.
enum Item {
    Send(Box<Sending>),
    Record(Box<OutflowEntry>),
}

/// What a round did with an item (what the batcher hands its caller).
enum Done {
    /// A send decided: stored (reserved or held), refused, or failed.
    Reserved(Result<Reservation, TransferError>),
    /// A send the round could not take (a lock or the database failed before its commit): it reserves alone, under
    /// its own lock, and meets the failure itself.
    Untaken,
    /// An entry written, or its failure logged.
    Written,
}

/// What a store's rounds did so far, for the benchmarks (`Transfers::round_figures`).
#[derive(Default)]
struct Counts {
    /// Rounds that reserved sends (writing the entries waiting with them), and the sends they took.
    reservation_rounds: AtomicU64,
    reserved: AtomicU64,
    /// Rounds of entries alone (no send was waiting), and the entries every round wrote.
    record_rounds: AtomicU64,
    recorded: AtomicU64,
}

/// The rounds of a store: `shards` batchers with one round at a time each, a send's chosen by its agent, so that
/// one agent's sends wait for the same round and different agents' may run side by side. The first shard's round
/// writes the entries that wait (the sends of every shard accepted since its last round: `pending` marks and
/// `transfer_accepted`) in the same transaction as the sends it reserves: one commit for both.
#[derive(Clone)]
pub(super) struct Rounds {
    shards: Arc<[Batcher<Round>]>,
    counts: Arc<Counts>,
}

/// One shard's work: a round of its items against the store.
struct Round {
    store: Arc<dyn Store>,
    counts: Arc<Counts>,
}

impl Rounds {
    /// `shards` batchers; on a thread of their own when `own_thread` (`Store::rounds_on_own_thread`: a round is a
    /// chain of statements, each a hand-over to the connection's thread and back, and on the app's runtime each
    /// answer waits its turn behind the requests its workers are busy with; `bench sends` timed one statement,
    /// `SELECT 1`, beside the SQLite one-agent row: 208 µs on average on the app's runtime, p90 505, 75 µs on a
    /// thread of its own, p90 100; a round is about twenty of them). If the thread cannot be started, on the
    /// caller's runtime.
    pub(super) fn new(store: Arc<dyn Store>, shards: usize, own_thread: bool) -> Self {
        let thread = match own_thread {
            true => match batch::Thread::start("agentd-rounds") {
                Ok(thread) => Some(Arc::new(thread)),
                Err(e) => {
                    tracing::warn!(error = %e, "no thread for the send rounds; they run on the app's runtime");
                    None
                }
            },
            false => None,
        };
        let counts = Arc::new(Counts::default());
        let shards = (0..shards.max(1))
            .map(|_| {
                let round = Round {
                    store: store.clone(),
                    counts: counts.clone(),
                };
                let settings = batch::Settings {
                    most: MOST,
                    lazy_wait: LAZY,
                    clock: Arc::new(SystemClock),
                    runs_on: thread.clone(),
                };
                Batcher::new(round, settings)
            })
            .collect();
        Rounds { shards, counts }
    }

    /// Reserves `send` in its agent's shard's next round: its reservation or failure; `None` when the round could
    /// not take it (the send then reserves alone, under its own lock).
    pub(super) async fn reserve(&self, send: Sending) -> Option<Result<Reservation, TransferError>> {
        let mut hasher = std::collections::hash_map::DefaultHasher::new();
        send.request.agent_id.hash(&mut hasher);
        let shard = (hasher.finish() % self.shards.len() as u64) as usize;
        match self.shards[shard].submit(Item::Send(Box::new(send))).await {
            Ok(Done::Reserved(reservation)) => Some(reservation),
            Ok(Done::Untaken) => None,
            // A round answers a send with a send's answer: anything else is none.
            Ok(Done::Written) | Err(Unanswered) => Some(Err(store_error(StoreError::Corrupt(
                "the round reserving a transfer ended without an answer".into(),
            )))),
        }
    }

    /// Writes `entry` in the first shard's next round, and returns once it is written (or its failure logged).
    /// Every entry goes to the first shard, so that one round at a time appends to the audit chain, whose head row
    /// each append holds until its commit: the other shards' rounds commit their sends without waiting for it (on
    /// PostgreSQL, rounds of 8 shards once queued there behind each other's commits).
    pub(super) async fn record(&self, entry: OutflowEntry) {
        let _ = self.shards[0].submit(Item::Record(Box::new(entry))).await;
    }

    /// `record` for an entry nobody waits for: it rides in the first shard's next round, or one of its own after
    /// `LAZY`.
    pub(super) fn record_lazily(&self, entry: OutflowEntry) {
        drop(self.shards[0].submit_lazily(Item::Record(Box::new(entry))));
    }

    /// Waits until every entry recorded before the call is written (or its failure logged), at most `within`: a
    /// read of the audit log after a send's answer shows the send's entry, though the answer did not wait for it.
    /// (The first shard's rounds run one at a time in the order their items came: once what it was given before
    /// the call is done, so are those entries.)
    pub(super) async fn entries_written(&self, within: Duration) {
        if !self.shards[0].flush(within).await {
            tracing::warn!("audit entries still being written after {within:?}; the log is read without them");
        }
    }

    /// (reservation rounds, sends they took, rounds of entries alone, entries written, microseconds in rounds) so
    /// far, over every shard.
    pub(super) fn figures(&self) -> [u64; 5] {
        let c = &self.counts;
        let busy: Duration = self.shards.iter().map(|shard| shard.figures().busy).sum();
        let [reservation_rounds, reserved, record_rounds, recorded] =
            [&c.reservation_rounds, &c.reserved, &c.record_rounds, &c.recorded].map(|n| n.load(Ordering::Relaxed));
        let busy_micros = u64::try_from(busy.as_micros()).unwrap_or(u64::MAX);
        [reservation_rounds, reserved, record_rounds, recorded, busy_micros]
    }
}

impl batch::Work for Round {
    type Item = Item;
    type Answer = Done;

    /// One round: the sends reserved with the entries written in their transaction, or the entries alone.
    async fn round(&self, items: Vec<(Item, Reply<Done>)>) {
        let (mut sends, mut records) = (Vec::new(), Vec::new());
        for (item, reply) in items {
            match item {
                Item::Send(send) => sends.push(Reserving::new(*send, reply)),
                Item::Record(entry) => records.push(Record { entry: *entry, reply }),
            }
        }
        let counts = &self.counts;
        counts.recorded.fetch_add(records.len() as u64, Ordering::Relaxed);
        if !sends.is_empty() {
            counts.reservation_rounds.fetch_add(1, Ordering::Relaxed);
            counts.reserved.fetch_add(sends.len() as u64, Ordering::Relaxed);
            records = reserve_round(self.store.as_ref(), sends, records).await;
        } else {
            counts.record_rounds.fetch_add(1, Ordering::Relaxed);
        }
        if !records.is_empty() {
            record_round(self.store.as_ref(), records).await;
        }
    }
}

/// A send in a round: what was submitted, and where its answer goes.
struct Reserving {
    send: Sending,
    reply: Reply<Done>,
}

impl Reserving {
    fn new(send: Sending, reply: Reply<Done>) -> Self {
        Reserving { send, reply }
    }

    fn answer(self, done: Done) {
        // A caller that went away needs no answer: what was stored stands (the watcher broadcasts it).
        self.reply.send(done);
    }

    fn lock_name(&self) -> (Uuid, &str) {
        (self.send.request.agent_id, &self.send.request.chain)
    }
}

impl ToReserve for Reserving {
    fn request(&self) -> &TransferRequest {
        &self.send.request
    }

    fn in_memory(&self) -> bool {
        self.send.in_memory
    }

    fn sign(&self, nonce: Option<u64>) -> Result<SignedTx, TransferError> {
        (self.send.sign)(&self.send.request, nonce)
    }

    fn gone(&self) -> bool {
        self.reply.is_closed()
    }
}

/// An outflow's audit entry in a round.
struct Record {
    entry: OutflowEntry,
    reply: Reply<Done>,
}

impl Record {
    /// Tells whoever waits that the round is done with it (written, or its failure logged).
    fn done(self) {
        self.reply.send(Done::Written);
    }
}

/// Reserves a round's sends (see the module's doc) by the one sign-and-apply loop (`reserve::sign_and_apply_all`),
/// writing `records` in the transaction that commits them; gives back the records it did not write.
async fn reserve_round(store: &dyn Store, mut sends: Vec<Reserving>, records: Vec<Record>) -> Vec<Record> {
    // Stable: each agent's sends keep the order they came in.
    sends.sort_by(|a, b| a.lock_name().cmp(&b.lock_name()));
    let mut senders: Vec<(Uuid, &str)> = sends.iter().map(Reserving::lock_name).collect();
    senders.dedup();
    let guards = match store.lock_senders(&senders).await {
        Ok(guards) => guards,
        Err(e) => {
            tracing::warn!(error = %e, "the send locks could not be taken for a round; its sends reserve alone");
            sends.into_iter().for_each(|s| s.answer(Done::Untaken));
            return records;
        }
    };
    let Outcome { decided, end } = sign_and_apply_all(store, sends, &entries(&records)).await;
    drop(guards);
    let records = match end {
        End::Committed => {
            records.into_iter().for_each(Record::done);
            Vec::new()
        }
        End::Uncommitted => records,
        End::Failed(sends, e) => {
            tracing::warn!(error = %e, "a reservation round failed; its sends reserve alone");
            sends.into_iter().for_each(|s| s.answer(Done::Untaken));
            records
        }
        End::Unknown(sends, e) => {
            // The commit may have been applied (its answer was lost): a send that reserved again alone could be
            // stored twice, an entry written again would be in the log twice. Each send answers the failure; what
            // was stored, if anything, is broadcast by the watcher (one still `signed` too).
            tracing::error!(error = %e, "a reservation round's commit failed; its sends answer the failure");
            for record in records {
                let event = &record.entry.event;
                tracing::error!(agent_id = %event.agent_id, action = %event.action(), "audit entry may not be recorded");
                record.done();
            }
            for send in sends {
                let unknown = StoreError::Corrupt(format!("the reservation's commit did not answer: {e}"));
                send.answer(Done::Reserved(Err(TransferError::Store(unknown))));
            }
            Vec::new()
        }
    };
    for (send, answer) in decided {
        send.answer(Done::Reserved(answer));
    }
    records
}

/// What `record_outflows` writes of `records`.
fn entries(records: &[Record]) -> Vec<&OutflowEntry> {
    records.iter().map(|r| &r.entry).collect()
}

/// Writes a round's entries in one transaction; if that fails, each alone, so one bad entry costs only itself.
async fn record_round(store: &dyn Store, records: Vec<Record>) {
    let all = entries(&records);
    if let Err(e) = store.record_outflows(&all).await {
        tracing::warn!(error = %e, "a round of audit entries failed; writing them one by one");
        for one in &all {
            if let Err(e) = store.record_outflows(std::slice::from_ref(one)).await {
                // The transfer stands: one still `signed` is broadcast again by the watcher (the same transaction),
                // and a transfer's entry kept with its reservation is written by the watcher (`write_owed`).
                tracing::error!(agent_id = %one.event.agent_id, action = %one.event.action(), error = %e, "audit entry not recorded");
            }
        }
    }
    records.into_iter().for_each(Record::done);
}
