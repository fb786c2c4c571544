//! A batcher: items submitted one at a time are handled in rounds, each round one call of the owner's work over
//! everything waiting (group commit's queue, issue 36). It knows nothing of what the items are or what a round does:
//! the owner supplies the work (`Work`), and each item's caller gets the answer the work gives it.
//!
//! - `submit`: the item starts a round now when none runs, or rides in the running one's next.
//! - `submit_lazily`: the item rides in the next round something else starts, or takes one of its own once its wait
//!   (`Settings::lazy_wait`, read on the batcher's clock) is over.
//! - `flush`: starts a round for whatever waits, lazy items too, and waits (bounded) until everything submitted
//!   before it is done.
//!
//! One round runs at a time, taking the items in the order they came (at most `Settings::most`), so items are done
//! in that order. A round runs in a task of its own: a caller that goes away cannot cut a round short (between a
//! commit and its answers, say), and a round that panics drops its items' answers (their callers see `Unanswered`)
//! while the next round goes on. Rounds run on the caller's runtime, or on a thread of their own (`Thread`).

use std::collections::VecDeque;
use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use tokio::sync::{oneshot, watch};

use crate::domain::clock::Clock;

mod thread;

#[cfg(test)]
mod tests;

pub use thread::Thread;

/// What a round does: the owner's part of a batcher.
pub trait Work: Send + Sync + 'static {
    /// What is submitted.
    type Item: Send + 'static;
    /// What its caller is answered.
    type Answer: Send + 'static;

    /// Handles one round: every item taken, each with where its answer goes. An item whose `Reply` is dropped
    /// unanswered is answered `Unanswered`.
    fn round(&self, batch: Vec<(Self::Item, Reply<Self::Answer>)>) -> impl Future<Output = ()> + Send;
}

/// Where one item's answer goes.
pub struct Reply<A>(oneshot::Sender<A>);

impl<A> Reply<A> {
    /// Answers the item's caller; one that went away needs no answer.
    pub fn send(self, answer: A) {
        let _ = self.0.send(answer);
    }

    /// Whether the caller went away (dropped its `Answer`): nobody waits for this one.
    pub fn is_closed(&self) -> bool {
        self.0.is_closed()
    }
}

/// The answer to one submitted item, once its round gave it.
#[must_use = "an answer does nothing unless awaited; drop it when nobody waits for it"]
pub struct Answer<A>(oneshot::Receiver<A>);

impl<A> Future for Answer<A> {
    type Output = Result<A, Unanswered>;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        Pin::new(&mut self.0).poll(cx).map_err(|_| Unanswered)
    }
}

/// The item's round ended without answering it (its work dropped the `Reply`, or panicked).
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("the round ended without answering")]
pub struct Unanswered;

/// How a batcher runs.
pub struct Settings {
    /// The most items one round takes (at least one).
    pub most: usize,
    /// How long a lazy item waits for a round that runs anyway before it takes one of its own.
    pub lazy_wait: Duration,
    /// What the lazy items' wait is read on.
    pub clock: Arc<dyn Clock>,
    /// A thread of its own the rounds run on; `None`: the runtime of whoever submits.
    pub runs_on: Option<Arc<Thread>>,
}

/// What a batcher did so far.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Figures {
    /// Rounds started.
    pub rounds: u64,
    /// Items they took.
    pub items: u64,
    /// Time spent in rounds that ended (on the batcher's clock).
    pub busy: Duration,
}

/// A queue whose items are handled in rounds of `W`'s work, one round at a time. Clones share the queue; the thread
/// the rounds run on (if any) stops when the last clone goes.
pub struct Batcher<W: Work> {
    shared: Arc<Shared<W>>,
    _thread: Option<Arc<Thread>>,
}

impl<W: Work> Clone for Batcher<W> {
    fn clone(&self) -> Self {
        Batcher {
            shared: self.shared.clone(),
            _thread: self._thread.clone(),
        }
    }
}

struct Shared<W: Work> {
    work: W,
    queue: Mutex<Queue<W::Item, W::Answer>>,
    most: usize,
    lazy_wait: Duration,
    clock: Arc<dyn Clock>,
    runtime: Option<tokio::runtime::Handle>,
    /// How many items rounds are done with (answered or not), in the order they were submitted.
    done: watch::Sender<u64>,
    figures: Mutex<Figures>,
}

struct Waiting<I, A> {
    item: I,
    reply: Reply<A>,
    /// Submitted with `submit` (it starts a round), not `submit_lazily`.
    eager: bool,
}

struct Queue<I, A> {
    waiting: VecDeque<Waiting<I, A>>,
    /// Items waiting that start a round.
    eager: usize,
    /// A round's leader runs.
    running: bool,
    /// Items ever submitted, and ever taken by a round.
    submitted: u64,
    taken: u64,
    /// Rounds are to run until every item up to this count is taken (`flush`, or the lazy items' wait is over).
    forced_through: u64,
    /// When the lazy items' wait is over, while one is pending.
    kick: Option<Instant>,
}

impl<W: Work> Batcher<W> {
    pub fn new(work: W, settings: Settings) -> Self {
        let runtime = settings.runs_on.as_ref().map(|thread| thread.runtime().clone());
        Batcher {
            shared: Arc::new(Shared {
                work,
                queue: Mutex::new(Queue {
                    waiting: VecDeque::new(),
                    eager: 0,
                    running: false,
                    submitted: 0,
                    taken: 0,
                    forced_through: 0,
                    kick: None,
                }),
                most: settings.most.max(1),
                lazy_wait: settings.lazy_wait,
                clock: settings.clock,
                runtime,
                done: watch::Sender::new(0),
                figures: Mutex::new(Figures::default()),
            }),
            _thread: settings.runs_on,
        }
    }

    /// Queues `item` for the next round, starting one now when none runs. Queued before this returns; the answer
    /// need not be awaited for the item to be handled.
    pub fn submit(&self, item: W::Item) -> Answer<W::Answer> {
        self.shared.enqueue(item, true)
    }

    /// Queues `item` for the next round something else starts (`submit`, `flush`), or else one of its own once
    /// `Settings::lazy_wait` is over: it rides in a round that runs anyway instead of taking one of its own.
    pub fn submit_lazily(&self, item: W::Item) -> Answer<W::Answer> {
        self.shared.enqueue(item, false)
    }

    /// Starts a round for whatever waits, lazy items too (after the running one, if any), and waits until every
    /// item submitted before the call is done (answered, or its round ended without answering), at most `within`
    /// (real time). Whether they were done within it.
    pub async fn flush(&self, within: Duration) -> bool {
        let submitted = self.shared.force();
        let mut done = self.shared.done.subscribe();
        matches!(
            tokio::time::timeout(within, done.wait_for(|done| *done >= submitted)).await,
            Ok(Ok(_))
        )
    }

    /// Starts a round for the lazy items waiting if their wait is over by the clock. Their timer does this when it
    /// fires; a test that moved its `ManualClock` ahead calls it.
    pub fn tick(&self) {
        self.shared.tick();
    }

    /// What the batcher did so far.
    pub fn figures(&self) -> Figures {
        *lock(&self.shared.figures)
    }
}

fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}

impl<W: Work> Shared<W> {
    fn enqueue(self: &Arc<Self>, item: W::Item, eager: bool) -> Answer<W::Answer> {
        let (reply, answer) = oneshot::channel();
        let (start, kick) = {
            let mut queue = lock(&self.queue);
            queue.waiting.push_back(Waiting {
                item,
                reply: Reply(reply),
                eager,
            });
            queue.submitted += 1;
            let mut kick = None;
            if eager {
                queue.eager += 1;
            } else if queue.kick.is_none() {
                let now = self.clock.instant();
                let at = now.checked_add(self.lazy_wait).unwrap_or(now);
                queue.kick = Some(at);
                kick = Some(at);
            }
            (take_a_lead(&mut queue), kick)
        };
        if start {
            self.spawn(lead(self.clone()));
        }
        if let Some(at) = kick {
            let shared = self.clone();
            self.spawn(async move {
                tokio::time::sleep(at.saturating_duration_since(shared.clock.instant())).await;
                shared.tick();
            });
        }
        Answer(answer)
    }

    /// Forces rounds until everything waiting now is taken, starting one when none runs; the count submitted so far.
    fn force(self: &Arc<Self>) -> u64 {
        let (start, submitted) = {
            let mut queue = lock(&self.queue);
            queue.forced_through = queue.submitted;
            (take_a_lead(&mut queue), queue.submitted)
        };
        if start {
            self.spawn(lead(self.clone()));
        }
        submitted
    }

    fn tick(self: &Arc<Self>) {
        let due = {
            let mut queue = lock(&self.queue);
            match queue.kick {
                Some(at) if self.clock.instant() >= at => queue.kick.take().is_some(),
                _ => false,
            }
        };
        if due {
            self.force();
        }
    }

    fn spawn(&self, task: impl Future<Output = ()> + Send + 'static) {
        match &self.runtime {
            Some(runtime) => drop(runtime.spawn(task)),
            None => drop(tokio::spawn(task)),
        }
    }
}

impl<I, A> Queue<I, A> {
    /// Whether something waiting is to be taken by a round: an item that starts one, or a forced one.
    fn wants_a_round(&self) -> bool {
        !self.waiting.is_empty() && (self.eager > 0 || self.taken < self.forced_through)
    }
}

/// Whether a leader is to start: none runs and something waiting wants a round.
fn take_a_lead<I, A>(queue: &mut Queue<I, A>) -> bool {
    let start = !queue.running && queue.wants_a_round();
    if start {
        queue.running = true;
    }
    start
}

/// Adds a round's items to `Shared::done` when the round ends, however it ends (a panic, its runtime stopped).
struct DoneWhenDropped<W: Work>(Arc<Shared<W>>, u64);

impl<W: Work> Drop for DoneWhenDropped<W> {
    fn drop(&mut self) {
        let n = self.1;
        self.0.done.send_modify(|done| *done += n);
    }
}

/// Runs rounds while something waiting wants one. A leader that leaves lazy items behind leaves them for the next
/// round, or their timer.
async fn lead<W: Work>(shared: Arc<Shared<W>>) {
    loop {
        let batch: Vec<(W::Item, Reply<W::Answer>)> = {
            let mut queue = lock(&shared.queue);
            if !queue.wants_a_round() {
                queue.running = false;
                return;
            }
            let n = queue.waiting.len().min(shared.most);
            let taken: Vec<_> = queue.waiting.drain(..n).collect();
            queue.eager -= taken.iter().filter(|w| w.eager).count();
            queue.taken += n as u64;
            taken.into_iter().map(|w| (w.item, w.reply)).collect()
        };
        let n = batch.len() as u64;
        {
            let mut figures = lock(&shared.figures);
            figures.rounds += 1;
            figures.items += n;
        }
        let _done = DoneWhenDropped(shared.clone(), n);
        let round = {
            let shared = shared.clone();
            async move {
                let started = shared.clock.instant();
                shared.work.round(batch).await;
                let spent = shared.clock.instant().saturating_duration_since(started);
                lock(&shared.figures).busy += spent;
            }
        };
        if let Err(e) = tokio::spawn(round).await {
            tracing::error!(error = %e, "a round ended without answering");
        }
    }
}
