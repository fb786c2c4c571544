//! Group commit (issue 36): work that arrives while a round is being written waits for the next round, and a round
//! writes all of it in one database transaction, so one commit (one `fsync` on SQLite) carries many sends.
//!
//! - `Group` is the queue: the first item to find no round running starts one in its own task (a request that goes
//!   away cannot cut a round short between its commit and its answers); each round takes everything waiting, up to
//!   `MOST`.
//! - `reserve_round` reserves on-chain sends of any agents: each (agent, chain)'s send lock is taken once, in one
//!   order; every send is decided in turn in one reserving transaction, the ones before it counted as they will be
//!   stored; the ones allowed are signed outside the transaction, and decided again and stored with one commit. A
//!   send is never signed before a decision allowed it, and is stored only with a signature made at the nonce the
//!   decision named (§20), as on the one-send path (`Transfers::reserve`), which remains for a send under a lock
//!   its caller holds (a call simulated under it, §18) and for anything without a nonce.
//! - `record_round` marks accepted sends `pending` and appends their audit entries, in one transaction.

use std::collections::VecDeque;
use std::future::Future;
use std::hash::{Hash, Hasher};
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use tokio::sync::oneshot;
use uuid::Uuid;

use super::send::{Applied, SIGNING_ROUNDS, apply};
use super::{TransferError, sign_transfer, signer_error, store_error};
use crate::domain::chain::ChainInfo;
use crate::signer::WalletSigner;
use crate::store::{AuditEvent, Presigned, Reservation, SendGuard, Store, StoreError, TransferRequest};

/// The most items one round takes.
const MOST: usize = 64;

type Round<I> = Box<dyn Fn(Vec<I>) -> Pin<Box<dyn Future<Output = ()> + Send>> + Send + Sync>;

/// A queue whose items are handled in rounds, at most `leaders` rounds at a time.
pub(super) struct Group<I> {
    shared: Arc<Shared<I>>,
}

impl<I> Clone for Group<I> {
    fn clone(&self) -> Self {
        Group {
            shared: self.shared.clone(),
        }
    }
}

struct Shared<I> {
    queue: Mutex<Queue<I>>,
    leaders: usize,
    round: Round<I>,
    /// Rounds run and items they took, for the benchmarks (`Transfers::round_figures`).
    rounds: AtomicU64,
    items: AtomicU64,
}

struct Queue<I> {
    waiting: VecDeque<I>,
    running: usize,
}

impl<I: Send + 'static> Group<I> {
    pub(super) fn new(leaders: usize, round: Round<I>) -> Self {
        Group {
            shared: Arc::new(Shared {
                queue: Mutex::new(Queue {
                    waiting: VecDeque::new(),
                    running: 0,
                }),
                leaders: leaders.max(1),
                round,
                rounds: AtomicU64::new(0),
                items: AtomicU64::new(0),
            }),
        }
    }

    /// Queues `item` for the next round, starting one when fewer than `leaders` run.
    pub(super) fn push(&self, item: I) {
        let start = {
            let mut queue = self
                .shared
                .queue
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner);
            queue.waiting.push_back(item);
            let start = queue.running < self.shared.leaders;
            if start {
                queue.running += 1;
            }
            start
        };
        if start {
            tokio::spawn(lead(self.shared.clone()));
        }
    }

    /// (rounds run, items they took) so far.
    pub(super) fn figures(&self) -> (u64, u64) {
        (
            self.shared.rounds.load(Ordering::Relaxed),
            self.shared.items.load(Ordering::Relaxed),
        )
    }
}

/// Runs rounds while items wait. A round runs in a task of its own: one that panics drops its items' answers (their
/// callers see the round end without one) and the next round goes on.
async fn lead<I: Send + 'static>(shared: Arc<Shared<I>>) {
    loop {
        let items: Vec<I> = {
            let mut queue = shared.queue.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
            if queue.waiting.is_empty() {
                queue.running -= 1;
                return;
            }
            let n = queue.waiting.len().min(MOST);
            queue.waiting.drain(..n).collect()
        };
        shared.rounds.fetch_add(1, Ordering::Relaxed);
        shared.items.fetch_add(items.len() as u64, Ordering::Relaxed);
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

/// The reservation rounds of a store: `shards` queues with one round at a time each, a send's queue chosen by its
/// (agent, chain), so that one agent's sends wait for the same round and different agents' may run side by side.
#[derive(Clone)]
pub(super) struct Reservations {
    shards: Arc<[Group<Sending>]>,
}

impl Reservations {
    pub(super) fn new(store: Arc<dyn Store>, shards: usize) -> Self {
        let shards = (0..shards.max(1))
            .map(|_| {
                let store = store.clone();
                Group::new(
                    1,
                    Box::new(move |sends| Box::pin(reserve_round(store.clone(), sends)) as _),
                )
            })
            .collect();
        Reservations { shards }
    }

    pub(super) fn push(&self, send: Sending) {
        let mut hasher = std::collections::hash_map::DefaultHasher::new();
        send.lock_name().hash(&mut hasher);
        let shard = (hasher.finish() % self.shards.len() as u64) as usize;
        self.shards[shard].push(send);
    }

    /// (rounds run, sends they took) so far, over every shard.
    pub(super) fn figures(&self) -> (u64, u64) {
        self.shards
            .iter()
            .map(Group::figures)
            .fold((0, 0), |(r, s), (dr, ds)| (r + dr, s + ds))
    }
}

/// One reservation round (see the module's doc).
async fn reserve_round(store: Arc<dyn Store>, mut sends: Vec<Sending>) {
    // Stable: each agent's sends keep the order they came in.
    sends.sort_by(|a, b| a.lock_name().cmp(&b.lock_name()));
    let mut guards: Vec<Box<dyn SendGuard>> = Vec::new();
    let mut locked: Option<(Uuid, String)> = None;
    for i in 0..sends.len() {
        let (agent_id, chain) = sends[i].lock_name();
        if locked.as_ref().is_some_and(|(a, c)| *a == agent_id && c == chain) {
            continue;
        }
        match store.lock_sender(agent_id, chain).await {
            Ok(guard) => guards.push(guard),
            Err(e) => {
                tracing::warn!(error = %e, "a send lock could not be taken for a round; its sends reserve alone");
                drop(guards);
                sends.into_iter().for_each(|s| s.answer(Answer::Alone));
                return;
            }
        }
        locked = Some((agent_id, chain.to_string()));
    }
    for _ in 0..SIGNING_ROUNDS {
        // A caller that went away before anything was stored takes nothing.
        sends.retain(|s| !s.answer.is_closed());
        if sends.is_empty() {
            return;
        }
        let to_sign = match pass(store.as_ref(), &sends).await {
            Ok(Passed::Committed(answers)) => {
                drop(guards);
                for (send, answer) in sends.into_iter().zip(answers) {
                    send.answer(Answer::Decided(Ok(answer)));
                }
                return;
            }
            Ok(Passed::Sign(to_sign)) => to_sign,
            Ok(Passed::Unknown(e)) => {
                // The commit may have been applied (its answer was lost): a send that reserved again alone could be
                // stored twice. Each answers the failure; what was stored, if anything, is broadcast by the watcher.
                tracing::error!(error = %e, "a reservation round's commit failed; its sends answer the failure");
                drop(guards);
                for send in sends {
                    let unknown = StoreError::Corrupt(format!("the reservation's commit did not answer: {e}"));
                    send.answer(Answer::Decided(Err(TransferError::Store(unknown))));
                }
                return;
            }
            Err(e) => {
                tracing::warn!(error = %e, "a reservation round failed; its sends reserve alone");
                drop(guards);
                sends.into_iter().for_each(|s| s.answer(Answer::Alone));
                return;
            }
        };
        // Signed outside the transaction, at the nonces the decisions named; a signer that fails answers its send
        // (nothing of it was stored) and the others are decided again without it.
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
}

/// What one pass over a round's sends came to.
enum Passed {
    /// Every send decided, and what was allowed stored with its signature: committed.
    Committed(Vec<Reservation>),
    /// Sends (by index) allowed at a nonce they are not signed for: rolled back, to be signed at these nonces.
    Sign(Vec<(usize, Option<u64>)>),
    /// The commit failed: whether it was applied is not known.
    Unknown(StoreError),
}

/// Decides each send in turn in one reserving transaction. One allowed at a nonce it is not signed for is applied
/// with a stand-in for its signature when sends come after it, so that they are decided with it counted, and the
/// transaction is rolled back: nothing is committed before every allowed send carries its signature.
async fn pass(store: &dyn Store, sends: &[Sending]) -> Result<Passed, TransferError> {
    let mut tx = store.reserving().await.map_err(store_error)?;
    let mut answers = Vec::with_capacity(sends.len());
    let mut to_sign = Vec::new();
    for (i, send) in sends.iter().enumerate() {
        // The last send's stand-in would count for nobody: it is decided as alone, writing nothing unsigned.
        let stand_in = i + 1 < sends.len();
        match apply(tx.as_mut(), &send.request, send.signed.as_ref(), stand_in).await? {
            Applied::Final(reservation) => answers.push(reservation),
            Applied::Unsigned { nonce } => to_sign.push((i, nonce)),
        }
    }
    if !to_sign.is_empty() {
        drop(tx);
        return Ok(Passed::Sign(to_sign));
    }
    // Before the commit every failure rolls back (the round's sends may reserve alone); a failed commit may not have.
    if let Err(e) = tx.commit().await {
        return Ok(Passed::Unknown(e));
    }
    Ok(Passed::Committed(answers))
}

/// An outflow's audit entry waiting for a round; `accepted`: the transfer the node took, marked `pending` with it.
pub(super) struct Record {
    pub accepted: Option<Uuid>,
    pub event: AuditEvent,
    pub done: oneshot::Sender<()>,
}

/// The audit rounds of a store.
pub(super) fn records(store: Arc<dyn Store>, leaders: usize) -> Group<Record> {
    Group::new(
        leaders,
        Box::new(move |records| Box::pin(record_round(store.clone(), records))),
    )
}

/// Writes a round's entries in one transaction; if that fails, each alone, so one bad entry costs only itself.
async fn record_round(store: Arc<dyn Store>, records: Vec<Record>) {
    let all: Vec<(Option<Uuid>, &AuditEvent)> = records.iter().map(|r| (r.accepted, &r.event)).collect();
    if let Err(e) = store.record_outflows(&all).await {
        tracing::warn!(error = %e, "a round of audit entries failed; writing them one by one");
        for one in &all {
            if let Err(e) = store.record_outflows(std::slice::from_ref(one)).await {
                // The transfer stands: one still `signed` is broadcast again by the watcher (the same transaction).
                tracing::error!(agent_id = %one.1.agent_id, action = %one.1.action(), error = %e, "audit entry not recorded");
            }
        }
    }
    for record in records {
        let _ = record.done.send(());
    }
}
