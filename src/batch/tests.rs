//! The batcher's timing, driven: a round held at a gate stands for a slow one, the lazy items' wait passes on a
//! `ManualClock` (their real timer is an hour away), and nothing waits on real time but a flush's bound.

use std::sync::Mutex;

use tokio::sync::{Semaphore, mpsc};

use super::*;
use crate::domain::clock::ManualClock;

/// The lazy items' wait: long enough that their real timer never fires during a test.
const WAIT: Duration = Duration::from_secs(3600);

/// An item whose round drops its answer.
const DROPPED: u32 = 1000;
/// An item whose round panics.
const PANICS: u32 = 2000;

/// The items each round took, in turn.
type Taken = Arc<Mutex<Vec<Vec<u32>>>>;

/// Records the items each round took and answers each ten times itself; with a gate, tells `started` of each round
/// and holds it until the gate gives it a permit.
struct Recorder {
    taken: Taken,
    gate: Option<(mpsc::UnboundedSender<Vec<u32>>, Arc<Semaphore>)>,
}

impl Work for Recorder {
    type Item = u32;
    type Answer = u32;

    async fn round(&self, batch: Vec<(u32, Reply<u32>)>) {
        let items: Vec<u32> = batch.iter().map(|(item, _)| *item).collect();
        self.taken.lock().unwrap().push(items.clone());
        if let Some((started, gate)) = &self.gate {
            started.send(items).unwrap();
            gate.acquire().await.unwrap().forget();
        }
        for (item, reply) in batch {
            match item {
                DROPPED => drop(reply),
                PANICS => panic!("a round that panics"),
                item => reply.send(item * 10),
            }
        }
    }
}

struct Setup {
    batcher: Batcher<Recorder>,
    taken: Taken,
    clock: Arc<ManualClock>,
}

fn settings(most: usize, clock: Arc<ManualClock>) -> Settings {
    Settings {
        most,
        lazy_wait: WAIT,
        clock,
        runs_on: None,
    }
}

/// A batcher whose rounds run as soon as they start.
fn free(most: usize) -> Setup {
    let (taken, clock) = (Taken::default(), Arc::new(ManualClock::default()));
    let work = Recorder {
        taken: taken.clone(),
        gate: None,
    };
    let batcher = Batcher::new(work, settings(most, clock.clone()));
    Setup { batcher, taken, clock }
}

/// A batcher whose rounds wait for a permit each: the receiver hears of each round started, with its items.
fn gated() -> (Setup, mpsc::UnboundedReceiver<Vec<u32>>, Arc<Semaphore>) {
    let (taken, clock) = (Taken::default(), Arc::new(ManualClock::default()));
    let (started, rounds) = mpsc::unbounded_channel();
    let gate = Arc::new(Semaphore::new(0));
    let work = Recorder {
        taken: taken.clone(),
        gate: Some((started, gate.clone())),
    };
    let batcher = Batcher::new(work, settings(64, clock.clone()));
    (Setup { batcher, taken, clock }, rounds, gate)
}

/// Lets every task that can run, run.
async fn settle() {
    for _ in 0..20 {
        tokio::task::yield_now().await;
    }
}

fn taken(setup: &Setup) -> Vec<Vec<u32>> {
    setup.taken.lock().unwrap().clone()
}

#[tokio::test]
async fn an_eager_item_starts_a_round_at_once() {
    let setup = free(64);
    assert_eq!(setup.batcher.submit(1).await, Ok(10));
    assert_eq!(taken(&setup), vec![vec![1]]);
    let figures = setup.batcher.figures();
    assert_eq!((figures.rounds, figures.items), (1, 1));
}

#[tokio::test]
async fn items_submitted_while_a_round_runs_go_together_in_the_next() {
    let (setup, mut started, gate) = gated();
    let first = setup.batcher.submit(1);
    assert_eq!(started.recv().await, Some(vec![1]));
    let (second, third) = (setup.batcher.submit(2), setup.batcher.submit(3));
    settle().await;
    assert_eq!(taken(&setup), vec![vec![1]], "no second round while the first runs");
    gate.add_permits(2);
    assert_eq!((first.await, second.await, third.await), (Ok(10), Ok(20), Ok(30)));
    assert_eq!(taken(&setup), vec![vec![1], vec![2, 3]]);
}

#[tokio::test]
async fn a_lazy_item_rides_in_the_next_round_an_eager_one_starts() {
    let setup = free(64);
    let lazy = setup.batcher.submit_lazily(1);
    settle().await;
    assert!(taken(&setup).is_empty(), "a lazy item starts no round");
    assert_eq!(setup.batcher.submit(2).await, Ok(20));
    assert_eq!(lazy.await, Ok(10));
    assert_eq!(taken(&setup), vec![vec![1, 2]]);
    // Its wait, once over, finds nothing left to do.
    setup.clock.advance(WAIT);
    setup.batcher.tick();
    settle().await;
    assert_eq!(taken(&setup).len(), 1);
}

#[tokio::test]
async fn a_lazy_item_alone_takes_a_round_of_its_own_once_its_wait_is_over_on_the_clock() {
    let setup = free(64);
    let lazy = setup.batcher.submit_lazily(1);
    setup.batcher.tick();
    settle().await;
    setup.clock.advance(WAIT / 2);
    setup.batcher.tick();
    settle().await;
    assert!(taken(&setup).is_empty(), "no round before its wait is over");
    setup.clock.advance(WAIT / 2);
    setup.batcher.tick();
    assert_eq!(lazy.await, Ok(10));
    assert_eq!(taken(&setup), vec![vec![1]]);
    // The next lazy item waits its own time, from when it came.
    let next = setup.batcher.submit_lazily(2);
    setup.batcher.tick();
    settle().await;
    assert_eq!(taken(&setup).len(), 1, "a new wait started with the next lazy item");
    setup.clock.advance(WAIT);
    setup.batcher.tick();
    assert_eq!(next.await, Ok(20));
    assert_eq!(taken(&setup), vec![vec![1], vec![2]]);
}

#[tokio::test]
async fn flush_waits_for_what_was_submitted_before_it() {
    let (setup, mut started, gate) = gated();
    let first = setup.batcher.submit(1);
    assert_eq!(started.recv().await, Some(vec![1]));
    let lazy = setup.batcher.submit_lazily(2);
    let flush = tokio::spawn({
        let batcher = setup.batcher.clone();
        async move { batcher.flush(WAIT).await }
    });
    settle().await;
    assert!(!flush.is_finished(), "the running round is not done");
    gate.add_permits(2);
    assert!(flush.await.unwrap());
    assert_eq!(
        taken(&setup),
        vec![vec![1], vec![2]],
        "the lazy item took a round of its own"
    );
    assert_eq!((first.await, lazy.await), (Ok(10), Ok(20)));
    // With nothing submitted since, a flush has nothing to wait for.
    assert!(setup.batcher.flush(WAIT).await);
}

#[tokio::test]
async fn flush_gives_up_after_its_bound_when_a_round_does_not_end() {
    let (setup, mut started, _gate) = gated();
    let _first = setup.batcher.submit(1);
    assert_eq!(started.recv().await, Some(vec![1]));
    assert!(!setup.batcher.flush(Duration::from_millis(10)).await);
}

#[tokio::test]
async fn a_flush_takes_every_lazy_item_waiting_in_rounds_of_at_most_their_size() {
    let setup = free(2);
    let answers: Vec<_> = (1..=5).map(|item| setup.batcher.submit_lazily(item)).collect();
    assert!(setup.batcher.flush(WAIT).await);
    assert_eq!(taken(&setup), vec![vec![1, 2], vec![3, 4], vec![5]]);
    for (item, answer) in (1..=5).zip(answers) {
        assert_eq!(answer.await, Ok(item * 10));
    }
}

#[tokio::test]
async fn a_round_that_dropped_an_answer_does_not_hang_the_next_caller() {
    let setup = free(64);
    assert_eq!(setup.batcher.submit(DROPPED).await, Err(Unanswered));
    assert_eq!(setup.batcher.submit(2).await, Ok(20));
    // A round that panics answers nobody, and is done with its items all the same.
    assert_eq!(setup.batcher.submit(PANICS).await, Err(Unanswered));
    assert_eq!(setup.batcher.submit(3).await, Ok(30));
    assert!(setup.batcher.flush(WAIT).await);
    assert_eq!(taken(&setup), vec![vec![DROPPED], vec![2], vec![PANICS], vec![3]]);
}

/// Answers each item with the name of the thread its round ran on.
struct ThreadName;

impl Work for ThreadName {
    type Item = ();
    type Answer = Option<String>;

    async fn round(&self, batch: Vec<((), Reply<Option<String>>)>) {
        for ((), reply) in batch {
            reply.send(std::thread::current().name().map(str::to_owned));
        }
    }
}

#[tokio::test]
async fn rounds_run_on_the_thread_they_were_given() {
    let thread = Arc::new(Thread::start("batch-test").unwrap());
    let settings = Settings {
        most: 64,
        lazy_wait: WAIT,
        clock: Arc::new(ManualClock::default()),
        runs_on: Some(thread),
    };
    let batcher = Batcher::new(ThreadName, settings);
    assert_eq!(batcher.submit(()).await, Ok(Some("batch-test".to_owned())));
}
