//! Group commit (issue 36): work that arrives while a round is being written waits for the next round, and a round
//! writes all of it in one database transaction, so one commit (one `fsync` on SQLite) carries many sends.
//!
//! - `Group` is the queue: the first item to find no round running starts one in its own task (a request that goes
//!   away cannot cut a round short between its commit and its answers); each round takes everything waiting, up to
//!   `MOST`.
//! - `reserve_round` reserves on-chain sends of any agents: each (agent, chain)'s send lock is taken once, in one
//!   order (one guard for all: `Store::lock_senders`); every send is decided in turn in one reserving transaction, the ones before it counted as they will be
//!   stored. A send whose key is in memory is signed in that transaction once its decision allowed it (microseconds),
//!   so a round of such sends is one pass and one commit; a token's sends are signed outside the transaction and
//!   decided again and stored in the next pass. A send is never signed before a decision allowed it, and is stored
//!   only with a signature made at the nonce the decision named (§20), as on the one-send path
//!   (`Transfers::reserve`), which remains for a send under a lock its caller holds (a call simulated under it,
//!   §18) and for anything without a nonce.
//! - The audit entries of sends answered since (`Record`: the `pending` mark of one the node took, and its
//!   `transfer_accepted`) wait for the next round of the first shard and are written in its committing transaction,
//!   after its sends; with no send waiting, alone (`record_round`): one writer's commit carries both kinds, and only
//!   one round at a time holds the audit chain's head (`Rounds::push`).
//! - A transfer's entry is kept with its reservation (`OwedEntry`), so its send is answered without waiting for the
//!   entry's round: the entry is lazy (`Group::push_lazily`), riding in the first shard's next round of sends, or
//!   in one of its own after `LAZY`. A read of the log waits for what was answered before it
//!   (`Rounds::entries_written`); a process that dies first leaves the kept entry for the watcher.

use std::collections::VecDeque;
use std::future::Future;
use std::hash::{Hash, Hasher};
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use tokio::sync::oneshot;
use uuid::Uuid;

use super::reserve::{Applied, SIGNING_ROUNDS, SignNow, apply};
use super::{TransferError, sign_transfer, signer_error, store_error};
use crate::domain::chain::ChainInfo;
use crate::signer::WalletSigner;
use crate::store::{OutflowEntry, Presigned, Reservation, Store, StoreError, TransferRequest};

/// The most items one round takes.
const MOST: usize = 64;

/// How long an entry nobody waits for may wait for a round that runs anyway before it takes one of its own.
const LAZY: std::time::Duration = std::time::Duration::from_millis(20);

type Round<I> = Box<dyn Fn(Vec<I>) -> Pin<Box<dyn Future<Output = ()> + Send>> + Send + Sync>;

/// A queue whose items are handled in rounds, at most `leaders` rounds at a time, on `runs_on` (a round thread's
/// runtime) or else on the caller's.
pub(super) struct Group<I> {
    shared: Arc<Shared<I>>,
    runs_on: Option<tokio::runtime::Handle>,
}

impl<I> Clone for Group<I> {
    fn clone(&self) -> Self {
        Group {
            shared: self.shared.clone(),
            runs_on: self.runs_on.clone(),
        }
    }
}

struct Shared<I> {
    queue: Mutex<Queue<I>>,
    leaders: usize,
    round: Round<I>,
}

struct Queue<I> {
    /// Each item with whether it starts a round (`push`) or waits for one (`push_lazily`).
    waiting: VecDeque<(I, bool)>,
    /// Items waiting that start a round.
    eager: usize,
    running: usize,
    /// A round is to be started for the lazy items waiting (`flush`, or their wait is over).
    forced: bool,
    /// A task will force one once the lazy items' wait is over.
    kick_pending: bool,
}

impl<I: Send + 'static> Group<I> {
    pub(super) fn new(leaders: usize, round: Round<I>, runs_on: Option<tokio::runtime::Handle>) -> Self {
        Group {
            runs_on,
            shared: Arc::new(Shared {
                queue: Mutex::new(Queue {
                    waiting: VecDeque::new(),
                    eager: 0,
                    running: 0,
                    forced: false,
                    kick_pending: false,
                }),
                leaders: leaders.max(1),
                round,
            }),
        }
    }

    fn queue(&self) -> std::sync::MutexGuard<'_, Queue<I>> {
        self.shared
            .queue
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Queues `item` for the next round, starting one when fewer than `leaders` run.
    pub(super) fn push(&self, item: I) {
        let start = {
            let mut queue = self.queue();
            queue.waiting.push_back((item, true));
            queue.eager += 1;
            take_a_lead(&mut queue, self.shared.leaders)
        };
        if start {
            self.spawn(lead(self.shared.clone()));
        }
    }

    /// Queues `item` for the next round started by an item pushed (`push`), or by `flush`, or else after `wait`:
    /// it rides in a round that runs anyway instead of taking one of its own.
    pub(super) fn push_lazily(&self, item: I, wait: std::time::Duration) {
        let kick = {
            let mut queue = self.queue();
            queue.waiting.push_back((item, false));
            !std::mem::replace(&mut queue.kick_pending, true)
        };
        if kick {
            let (group, shared) = (self.clone(), self.shared.clone());
            self.spawn(async move {
                tokio::time::sleep(wait).await;
                shared
                    .queue
                    .lock()
                    .unwrap_or_else(std::sync::PoisonError::into_inner)
                    .kick_pending = false;
                group.flush();
            });
        }
    }

    /// Starts a round now for whatever waits, lazy items too (after the running one, if any).
    pub(super) fn flush(&self) {
        let start = {
            let mut queue = self.queue();
            if queue.waiting.is_empty() {
                return;
            }
            queue.forced = true;
            take_a_lead(&mut queue, self.shared.leaders)
        };
        if start {
            self.spawn(lead(self.shared.clone()));
        }
    }

    fn spawn(&self, task: impl Future<Output = ()> + Send + 'static) {
        match &self.runs_on {
            Some(runtime) => drop(runtime.spawn(task)),
            None => drop(tokio::spawn(task)),
        }
    }
}

/// Whether a new leader is to start: fewer than `leaders` run and something waits that starts a round.
fn take_a_lead<I>(queue: &mut Queue<I>, leaders: usize) -> bool {
    let start = queue.running < leaders && (queue.eager > 0 || queue.forced);
    if start {
        queue.running += 1;
    }
    start
}

/// Runs rounds while items that start one wait (or a round was forced). A round runs in a task of its own: one
/// that panics drops its items' answers (their callers see the round end without one) and the next round goes on.
/// A leader that leaves lazy items behind leaves them for the next round, or their kick.
async fn lead<I: Send + 'static>(shared: Arc<Shared<I>>) {
    loop {
        let items: Vec<I> = {
            let mut queue = shared.queue.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
            if (queue.eager == 0 && !queue.forced) || queue.waiting.is_empty() {
                queue.running -= 1;
                queue.forced &= !queue.waiting.is_empty();
                return;
            }
            queue.forced = false;
            let n = queue.waiting.len().min(MOST);
            let taken: Vec<(I, bool)> = queue.waiting.drain(..n).collect();
            queue.eager -= taken.iter().filter(|(_, eager)| *eager).count();
            taken.into_iter().map(|(item, _)| item).collect()
        };
        if let Err(e) = tokio::spawn((shared.round)(items)).await {
            tracing::error!(error = %e, "a round of writes ended without answering");
        }
    }
}

/// An on-chain send waiting for a reservation round.
pub(super) struct Sending {
    pub request: TransferRequest,
    pub signer: Arc<dyn WalletSigner>,
    pub chain: &'static ChainInfo,
    pub priority_fee: u128,
    signed: Option<Presigned>,
    answer: oneshot::Sender<Answer>,
}

/// What a round answers a send.
pub(super) enum Answer {
    /// Decided (and stored, when reserved or held), refused, or failed.
    Decided(Result<Reservation, TransferError>),
    /// The round could not take it (a lock or the database failed): the send reserves alone, under its own lock,
    /// and meets the failure itself.
    Alone,
}

impl Sending {
    pub(super) fn new(
        request: TransferRequest,
        signer: Arc<dyn WalletSigner>,
        chain: &'static ChainInfo,
        priority_fee: u128,
    ) -> (Self, oneshot::Receiver<Answer>) {
        let (answer, receiver) = oneshot::channel();
        let send = Sending {
            request,
            signer,
            chain,
            priority_fee,
            signed: None,
            answer,
        };
        (send, receiver)
    }

    fn answer(self, answer: Answer) {
        // A caller that went away needs no answer: what was stored stands (the watcher broadcasts it).
        let _ = self.answer.send(answer);
    }

    fn lock_name(&self) -> (Uuid, &str) {
        (self.request.agent_id, &self.request.chain)
    }
}

/// A round's work: a send to reserve, or an outflow's audit entry to write.
pub(super) enum Item {
    Send(Box<Sending>),
    Record(Box<Record>),
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
    /// Time spent in rounds, in microseconds.
    busy_micros: AtomicU64,
}

/// The rounds of a store: `shards` queues with one round at a time each, a send's queue chosen by its agent, so
/// that one agent's sends wait for the same round and different agents' may run side by side. The first shard's
/// round writes the entries that wait (the sends of every shard accepted since its last round: `pending` marks and
/// `transfer_accepted`) in the same transaction as the sends it reserves: one commit for both.
#[derive(Clone)]
pub(super) struct Rounds {
    shards: Arc<[Group<Item>]>,
    counts: Arc<Counts>,
    written: Arc<Written>,
    /// The round thread, when rounds run on one: it ends when the last clone goes.
    _thread: Option<Arc<RoundThread>>,
}

/// How many entries were pushed, and how many of them rounds are done with (written, or their failure logged):
/// every entry goes to the first shard, whose rounds run one at a time in the order the entries came, so once
/// `done` reaches what `pushed` was, every entry pushed before is done.
struct Written {
    pushed: AtomicU64,
    done: tokio::sync::watch::Sender<u64>,
}

/// Adds a round's entries to `Written::done` when the round ends, however it ends (a panic, its runtime stopped).
struct DoneWhenDropped(Arc<Written>, u64);

impl Drop for DoneWhenDropped {
    fn drop(&mut self) {
        let n = self.1;
        self.0.done.send_modify(|done| *done += n);
    }
}

/// A thread of its own, with a runtime of its own, on which a store's rounds run (`Store::rounds_on_own_thread`). A
/// round is a chain of statements, each a hand-over to the connection's thread and back; on the app's runtime each
/// answer then waits its turn behind the requests its workers are busy with. `bench sends` timed one statement
/// (`SELECT 1`) beside the SQLite one-agent row: 208 µs on average on the app's runtime (p90 505), 75 µs on a thread of
/// its own (p90 100); a round is about twenty of them.
struct RoundThread {
    runtime: tokio::runtime::Handle,
    /// Dropped with the last `Rounds`: the thread's runtime stops (a round still running is dropped, rolled back).
    _stop: oneshot::Sender<()>,
}

impl RoundThread {
    fn start() -> std::io::Result<RoundThread> {
        let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build()?;
        let handle = runtime.handle().clone();
        let (stop, stopped) = oneshot::channel::<()>();
        std::thread::Builder::new()
            .name("agentd-rounds".into())
            .spawn(move || {
                runtime.block_on(async {
                    let _ = stopped.await;
                })
            })?;
        Ok(RoundThread {
            runtime: handle,
            _stop: stop,
        })
    }
}

impl Rounds {
    /// `shards` queues; on a round thread of their own when `own_thread` (if the thread cannot be started, on the
    /// caller's runtime).
    pub(super) fn new(store: Arc<dyn Store>, shards: usize, own_thread: bool) -> Self {
        let thread = match own_thread {
            true => match RoundThread::start() {
                Ok(thread) => Some(Arc::new(thread)),
                Err(e) => {
                    tracing::warn!(error = %e, "no thread for the send rounds; they run on the app's runtime");
                    None
                }
            },
            false => None,
        };
        let runs_on = thread.as_ref().map(|t| t.runtime.clone());
        let counts = Arc::new(Counts::default());
        let written = Arc::new(Written {
            pushed: AtomicU64::new(0),
            done: tokio::sync::watch::Sender::new(0),
        });
        let shards = (0..shards.max(1))
            .map(|_| {
                let (store, counts, written) = (store.clone(), counts.clone(), written.clone());
                Group::new(
                    1,
                    Box::new(move |items| {
                        let entries = items.iter().filter(|i| matches!(i, Item::Record(_))).count() as u64;
                        let done = DoneWhenDropped(written.clone(), entries);
                        Box::pin(round(store.clone(), counts.clone(), items, done)) as _
                    }),
                    runs_on.clone(),
                )
            })
            .collect();
        Rounds {
            shards,
            counts,
            written,
            _thread: thread,
        }
    }

    /// A send goes to its agent's shard; every entry to the first shard, so that one round at a time appends to the
    /// audit chain, whose head row each append holds until its commit: the other shards' rounds commit their sends
    /// without waiting for it (on PostgreSQL, rounds of 8 shards once queued there behind each other's commits). An
    /// entry nobody waits for (`Record::lazy`) rides in that shard's next round, or one of its own after `LAZY`.
    pub(super) fn push(&self, item: Item) {
        match item {
            Item::Send(send) => {
                let mut hasher = std::collections::hash_map::DefaultHasher::new();
                send.request.agent_id.hash(&mut hasher);
                let shard = (hasher.finish() % self.shards.len() as u64) as usize;
                self.shards[shard].push(Item::Send(send));
            }
            Item::Record(record) => {
                self.written.pushed.fetch_add(1, Ordering::SeqCst);
                match record.lazy {
                    true => self.shards[0].push_lazily(Item::Record(record), LAZY),
                    false => self.shards[0].push(Item::Record(record)),
                }
            }
        }
    }

    /// Waits until every entry pushed before the call is written (or its failure logged), at most `within`: a
    /// read of the audit log after a send's answer shows the send's entry, though the answer did not wait for it.
    pub(super) async fn entries_written(&self, within: std::time::Duration) {
        let pushed = self.written.pushed.load(Ordering::SeqCst);
        self.shards[0].flush();
        let mut done = self.written.done.subscribe();
        if tokio::time::timeout(within, done.wait_for(|done| *done >= pushed))
            .await
            .is_err()
        {
            tracing::warn!("audit entries still being written after {within:?}; the log is read without them");
        }
    }

    /// (reservation rounds, sends they took, rounds of entries alone, entries written, microseconds in rounds) so
    /// far, over every shard.
    pub(super) fn figures(&self) -> [u64; 5] {
        let c = &self.counts;
        [
            &c.reservation_rounds,
            &c.reserved,
            &c.record_rounds,
            &c.recorded,
            &c.busy_micros,
        ]
        .map(|n| n.load(Ordering::Relaxed))
    }
}

/// One round: the sends reserved with the entries written in their transaction, or the entries alone; `done` counts
/// the entries done once it ends.
async fn round(store: Arc<dyn Store>, counts: Arc<Counts>, items: Vec<Item>, done: DoneWhenDropped) {
    let _done = done;
    let started = std::time::Instant::now();
    let (mut sends, mut records) = (Vec::new(), Vec::new());
    for item in items {
        match item {
            Item::Send(send) => sends.push(*send),
            Item::Record(record) => records.push(*record),
        }
    }
    counts.recorded.fetch_add(records.len() as u64, Ordering::Relaxed);
    if !sends.is_empty() {
        counts.reservation_rounds.fetch_add(1, Ordering::Relaxed);
        counts.reserved.fetch_add(sends.len() as u64, Ordering::Relaxed);
        records = reserve_round(store.as_ref(), sends, records).await;
    } else {
        counts.record_rounds.fetch_add(1, Ordering::Relaxed);
    }
    if !records.is_empty() {
        record_round(store.as_ref(), records).await;
    }
    let micros = u64::try_from(started.elapsed().as_micros()).unwrap_or(u64::MAX);
    counts.busy_micros.fetch_add(micros, Ordering::Relaxed);
}

/// Reserves a round's sends (see the module's doc), writing `records` in the transaction that commits them; gives
/// back the records it did not write (the round ended before a commit).
async fn reserve_round(store: &dyn Store, mut sends: Vec<Sending>, records: Vec<Record>) -> Vec<Record> {
    // Stable: each agent's sends keep the order they came in.
    sends.sort_by(|a, b| a.lock_name().cmp(&b.lock_name()));
    let mut senders: Vec<(Uuid, &str)> = sends.iter().map(Sending::lock_name).collect();
    senders.dedup();
    let guards = match store.lock_senders(&senders).await {
        Ok(guards) => guards,
        Err(e) => {
            tracing::warn!(error = %e, "the send locks could not be taken for a round; its sends reserve alone");
            sends.into_iter().for_each(|s| s.answer(Answer::Alone));
            return records;
        }
    };
    for _ in 0..SIGNING_ROUNDS {
        // A caller that went away before anything was stored takes nothing.
        sends.retain(|s| !s.answer.is_closed());
        if sends.is_empty() {
            return records;
        }
        let to_sign = match pass(store, &sends, &records).await {
            Ok(Passed::Committed(answers)) => {
                drop(guards);
                for record in records {
                    let _ = record.done.send(());
                }
                for (send, answer) in sends.into_iter().zip(answers) {
                    send.answer(Answer::Decided(answer));
                }
                return Vec::new();
            }
            Ok(Passed::Sign(to_sign)) => to_sign,
            Ok(Passed::Unknown(e)) => {
                // The commit may have been applied (its answer was lost): a send that reserved again alone could be
                // stored twice, an entry written again would be in the log twice. Each send answers the failure;
                // what was stored, if anything, is broadcast by the watcher (one still `signed` too).
                tracing::error!(error = %e, "a reservation round's commit failed; its sends answer the failure");
                drop(guards);
                for record in records {
                    let event = &record.entry.event;
                    tracing::error!(agent_id = %event.agent_id, action = %event.action(), "audit entry may not be recorded");
                    let _ = record.done.send(());
                }
                for send in sends {
                    let unknown = StoreError::Corrupt(format!("the reservation's commit did not answer: {e}"));
                    send.answer(Answer::Decided(Err(TransferError::Store(unknown))));
                }
                return Vec::new();
            }
            Err(e) => {
                tracing::warn!(error = %e, "a reservation round failed; its sends reserve alone");
                drop(guards);
                sends.into_iter().for_each(|s| s.answer(Answer::Alone));
                return records;
            }
        };
        // Signed outside the transaction (a token's key), at the nonces the decisions named; a signer that fails
        // answers its send (nothing of it was stored) and the others are decided again without it.
        let mut failed = Vec::new();
        for (i, nonce) in to_sign {
            let send = &mut sends[i];
            match sign_transfer(
                send.signer.as_ref(),
                send.chain,
                &send.request,
                send.priority_fee,
                nonce.unwrap_or(0),
            ) {
                Ok(signed) => send.signed = Some(Presigned { nonce, signed }),
                Err(e) => failed.push((i, signer_error(send.request.agent_id, e))),
            }
        }
        for (i, error) in failed.into_iter().rev() {
            sends.remove(i).answer(Answer::Decided(Err(error)));
        }
    }
    drop(guards);
    for send in sends {
        send.answer(Answer::Decided(Err(store_error(StoreError::Corrupt(
            "the nonce to sign at moved under the agent's send lock".into(),
        )))));
    }
    records
}

/// What one pass over a round's sends came to.
enum Passed {
    /// Every send decided, and what was allowed stored with its signature (or failed to sign): committed.
    Committed(Vec<Result<Reservation, TransferError>>),
    /// Sends (by index) allowed at a nonce they are not signed for: rolled back, to be signed at these nonces.
    Sign(Vec<(usize, Option<u64>)>),
    /// The commit failed: whether it was applied is not known.
    Unknown(StoreError),
}

/// Decides each send in turn in one reserving transaction. A send whose key is in memory is signed in it, at the
/// nonce its decision named, once the decision allowed it. One allowed at a nonce it is not signed for (a token's
/// key) is applied with a stand-in for its signature when sends come after it, so that they are decided with it
/// counted, and the transaction is rolled back: nothing is committed before every allowed send carries its
/// signature. The committing pass writes `records` last, just before its commit.
async fn pass(store: &dyn Store, sends: &[Sending], records: &[Record]) -> Result<Passed, TransferError> {
    let mut tx = store.reserving().await.map_err(store_error)?;
    let mut answers = Vec::with_capacity(sends.len());
    let mut to_sign = Vec::new();
    for (i, send) in sends.iter().enumerate() {
        // The last send's stand-in would count for nobody: it is decided as alone, writing nothing unsigned.
        let stand_in = i + 1 < sends.len();
        let sign_now = |nonce: Option<u64>| {
            sign_transfer(
                send.signer.as_ref(),
                send.chain,
                &send.request,
                send.priority_fee,
                nonce.unwrap_or(0),
            )
            .map_err(|e| signer_error(send.request.agent_id, e))
        };
        let sign_now: Option<&SignNow<'_>> = match send.signer.in_memory() {
            true => Some(&sign_now),
            false => None,
        };
        match apply(tx.as_mut(), &send.request, send.signed.as_ref(), stand_in, sign_now).await? {
            Applied::Final(reservation) => answers.push(Ok(reservation)),
            Applied::SignerFailed(e) => answers.push(Err(e)),
            Applied::Unsigned { nonce } => to_sign.push((i, nonce)),
        }
    }
    if !to_sign.is_empty() {
        drop(tx);
        return Ok(Passed::Sign(to_sign));
    }
    if !records.is_empty() {
        tx.record_outflows(&entries(records)).await.map_err(store_error)?;
    }
    // Before the commit every failure rolls back (the round's sends may reserve alone); a failed commit may not have.
    if let Err(e) = tx.commit().await {
        return Ok(Passed::Unknown(e));
    }
    Ok(Passed::Committed(answers))
}

/// An outflow's audit entry waiting for a round; `lazy` when its outflow was answered without waiting for it.
pub(super) struct Record {
    pub entry: OutflowEntry,
    pub lazy: bool,
    pub done: oneshot::Sender<()>,
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
    for record in records {
        let _ = record.done.send(());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The items each round took, in turn.
    type Taken = Arc<Mutex<Vec<Vec<u32>>>>;

    /// A group whose rounds record the items each took.
    fn recorded() -> (Group<u32>, Taken) {
        let rounds = Arc::new(Mutex::new(Vec::new()));
        let seen = rounds.clone();
        let group = Group::new(
            1,
            Box::new(move |items| {
                let seen = seen.clone();
                Box::pin(async move { seen.lock().unwrap().push(items) }) as _
            }),
            None,
        );
        (group, rounds)
    }

    async fn settle() {
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }

    #[tokio::test]
    async fn a_lazy_item_rides_in_the_next_round_or_takes_one_of_its_own_once_its_wait_is_over() {
        let wait = std::time::Duration::from_millis(400);
        let (group, rounds) = recorded();
        // Alone, it waits its time, then takes a round.
        group.push_lazily(1, wait);
        settle().await;
        assert!(rounds.lock().unwrap().is_empty(), "no round before its wait is over");
        tokio::time::sleep(wait).await;
        assert_eq!(*rounds.lock().unwrap(), vec![vec![1]]);
        // Beside an item that starts a round, it rides in it.
        group.push_lazily(2, wait);
        group.push(3);
        settle().await;
        assert_eq!(rounds.lock().unwrap()[1], vec![2, 3]);
        tokio::time::sleep(wait * 2).await;
        assert_eq!(rounds.lock().unwrap().len(), 2, "its kick finds nothing left to do");
        // A flush takes it at once.
        group.push_lazily(4, wait);
        group.flush();
        settle().await;
        assert_eq!(rounds.lock().unwrap()[2], vec![4]);
    }
}
