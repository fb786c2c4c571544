//! Driving the confirmation watcher instead of waiting for it: `TestApp::settle` runs watcher rounds
//! (`Watcher::poll_once`) on `base` until no transfer is open there, `TestApp::settle_until` until a check holds.
//! The app's own watcher keeps running beside: the store's watcher lock lets one round at a time through, so a round
//! driven here while the app's is under way settles nothing and the next one goes on.
#![allow(dead_code)] // Each test file uses a different part of this helper.

use std::time::{Duration, Instant};

use agentd::watcher::Watcher;

use super::TestApp;
use super::chain::SETTLE_TIMEOUT;

/// The pause after a round that settled nothing: what the test waits for then comes with time (a block, an expiry,
/// `STUCK_AFTER_SECS`), or the app's own watcher held the round.
const IDLE_ROUND_PAUSE: Duration = Duration::from_millis(10);

impl TestApp {
    /// A watcher of this app's `chain`, beside the app's own.
    pub fn watcher(&self, chain: &'static str) -> Watcher {
        Watcher::new(agentd::app::watcher_state(&self.state), chain)
    }

    /// Runs watcher rounds on `base` until no transfer is open there (`signed` or `pending`).
    pub async fn settle(&self) {
        self.settle_until(async || {
            let open = self
                .state
                .store
                .open_transactions("base")
                .await
                .expect("open transfers");
            match open.is_empty() {
                true => Ok(()),
                false => Err(format!("{} transfers still open: {open:#?}", open.len())),
            }
        })
        .await
    }

    /// Runs watcher rounds on `base` until `check` answers `Ok`, and returns its answer; `Err` says what is there
    /// instead, for the panic after `SETTLE_TIMEOUT`.
    pub async fn settle_until<T>(&self, mut check: impl AsyncFnMut() -> Result<T, String>) -> T {
        let watcher = self.watcher("base");
        let deadline = Instant::now() + SETTLE_TIMEOUT;
        loop {
            match check().await {
                Ok(done) => return done,
                Err(what) => assert!(Instant::now() < deadline, "{what}"),
            }
            // A failed round (the node away) is logged by the watcher; the next one tries again.
            if watcher.poll_once().await.unwrap_or(0) == 0 {
                tokio::time::sleep(IDLE_ROUND_PAUSE).await;
            }
        }
    }
}
