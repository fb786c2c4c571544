//! The webhook delivery worker (§19), one per instance: fans recorded events out to the endpoints subscribed to
//! them, leases the deliveries that are due, and attempts each once through the guarded fetch of x402 (the name
//! resolved again and every address checked at each attempt, the connection made to those addresses, no redirects,
//! the answer read up to 64 KiB), signed the Standard Webhooks way. Instances share the work through the store; an
//! outbox row wakes the worker when it commits, and a slow poll catches the rest. `endpoints` is the service that
//! registers and changes the endpoints themselves.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use rand_core::RngCore;
use tokio::sync::{Semaphore, mpsc, watch};

use crate::config::{WebhookConfig, X402Config};
use crate::domain::webhook::{self, KEEP_LIMIT, READ_LIMIT};
use crate::net::egress::{FetchError, FetchRequest, Fetcher};
use crate::store::Store;
use crate::store::webhooks::{AttemptOutcome, DueDelivery};
use crate::vault::Vault;

pub mod endpoints;

pub use endpoints::Endpoints;

/// How often the worker looks for due deliveries without being woken: retries that come due, leases another
/// instance let run out, a wake that was missed. New events wake it as they commit (`OutboxWake`).
const IDLE_POLL: Duration = Duration::from_secs(1);
/// Deliveries leased per claim, at most.
const BATCH: i64 = 32;
/// Attempts in flight at once, whatever their endpoints: a slow receiver holds one slot per attempt, not a round.
const PARALLEL: usize = 32;
/// Finished attempts recorded per transaction, at most.
const RECORD_BATCH: usize = 64;
/// The shortest time between two claims, and between two records: each is a commit (on SQLite, a turn of the one
/// writer that the money path also waits for), so under a burst one takes what came meanwhile instead of one commit
/// per event. An idle worker woken by a commit claims at once.
const COMMIT_GAP: Duration = Duration::from_millis(5);
/// Events fanned out per round.
const FAN_OUT_BATCH: i64 = 200;

/// An attempt made, waiting to be recorded.
type Done = (DueDelivery, AttemptOutcome);

/// What the worker needs: built once at start.
#[derive(Clone)]
pub struct Deliverer {
    store: Arc<dyn Store>,
    vault: Arc<Vault>,
    fetcher: Fetcher,
    config: WebhookConfig,
    /// What attempts are stamped and leases and retries timed on (the system's clock outside tests).
    clock: Arc<dyn crate::domain::clock::Clock>,
}

impl Deliverer {
    pub fn new(
        store: Arc<dyn Store>,
        vault: Arc<Vault>,
        config: WebhookConfig,
        clock: Arc<dyn crate::domain::clock::Clock>,
    ) -> Self {
        let fetcher = Fetcher::new(X402Config {
            allow_private: config.allow_private,
            offer_allow_private: false,
            max_response_bytes: READ_LIMIT,
            timeout: config.timeout,
        });
        Deliverer {
            store,
            vault,
            fetcher,
            config,
            clock,
        }
    }

    /// One round: fan out new events, lease what is due, attempt it, record the attempts. Answers how many
    /// attempts were made (tests drive rounds with it instead of waiting).
    pub async fn run_once(&self) -> anyhow::Result<usize> {
        let due = self.claim(BATCH).await?;
        let count = due.len();
        let done: Vec<Done> = futures::stream::iter(due)
            .map(|d| async move {
                let outcome = self.attempt(&d).await;
                (d, outcome)
            })
            .buffer_unordered(PARALLEL)
            .collect()
            .await;
        self.record(&done).await;
        Ok(count)
    }

    /// Delivers until `stop` turns true. What is due is leased as soon as a slot is free and attempted at once,
    /// each attempt on its own (different endpoints in parallel, none waiting for a round to end); finished
    /// attempts are recorded together by a second task. Between claims the worker sleeps until an outbox row
    /// commits (`OutboxWake`) or `IDLE_POLL` passes.
    pub async fn run_until_stopped(self, mut stop: watch::Receiver<bool>) {
        let mut wake = self.store.outbox_wake().await;
        let slots = Arc::new(Semaphore::new(PARALLEL));
        let (finished, to_record) = mpsc::unbounded_channel();
        // Records until every sender is gone: attempts still running at the stop are recorded when they end.
        tokio::spawn(self.clone().record_until_closed(to_record));
        let mut next_claim = tokio::time::Instant::now();
        loop {
            tokio::time::sleep_until(next_claim).await;
            next_claim = tokio::time::Instant::now() + COMMIT_GAP;
            let full = match self.start_due(&slots, &finished).await {
                Ok(full) => full,
                Err(e) => {
                    tracing::warn!(error = %e, "webhook round failed; trying again");
                    tokio::select! {
                        _ = tokio::time::sleep(Duration::from_secs(1)) => continue,
                        _ = stop.wait_for(|stopped| *stopped) => return,
                    }
                }
            };
            if full {
                // More may be due: claim again once a slot is free.
                tokio::select! {
                    _ = slots.acquire() => {}
                    _ = stop.wait_for(|stopped| *stopped) => return,
                }
            } else {
                tokio::select! {
                    _ = tokio::time::sleep(IDLE_POLL) => {}
                    _ = wake.wait() => {}
                    _ = stop.wait_for(|stopped| *stopped) => return,
                }
            }
        }
    }

    /// Fans out new events, leases as many due deliveries as there are free slots and starts their attempts.
    /// Answers whether every free slot was filled (more may be due).
    async fn start_due(&self, slots: &Arc<Semaphore>, finished: &mpsc::UnboundedSender<Done>) -> anyhow::Result<bool> {
        let free = slots.available_permits().min(BATCH as usize);
        if free == 0 {
            return Ok(true);
        }
        let due = self.claim(free as i64).await?;
        let full = due.len() == free;
        for d in due {
            // Only this loop takes slots, and it asks no more than were free: this never waits.
            let slot = slots.clone().acquire_owned().await?;
            let this = self.clone();
            let finished = finished.clone();
            tokio::spawn(async move {
                let outcome = this.attempt(&d).await;
                drop(slot);
                // The recorder is gone only after a stop; the lease runs out and the attempt is made again.
                let _ = finished.send((d, outcome));
            });
        }
        Ok(full)
    }

    /// New events fanned out, then up to `limit` due deliveries leased.
    async fn claim(&self, limit: i64) -> anyhow::Result<Vec<DueDelivery>> {
        while self.store.fan_out_webhook_events(FAN_OUT_BATCH).await? == FAN_OUT_BATCH as usize {}
        // The lease outlasts the attempt's deadline, so no other instance attempts it meanwhile.
        let lease = chrono::TimeDelta::from_std(self.config.timeout + Duration::from_secs(30))?;
        Ok(self.store.claim_deliveries(self.clock.now(), lease, limit).await?)
    }

    /// Records what finished, in batches: whatever ended while the previous batch was being written.
    async fn record_until_closed(self, mut finished: mpsc::UnboundedReceiver<Done>) {
        let mut batch = Vec::with_capacity(RECORD_BATCH);
        while finished.recv_many(&mut batch, RECORD_BATCH).await > 0 {
            self.record(&batch).await;
            batch.clear();
            tokio::time::sleep(COMMIT_GAP).await;
        }
    }

    async fn record(&self, done: &[Done]) {
        match self.store.record_attempts(done, webhook::DISABLE_AFTER).await {
            Ok(disabled) => {
                for webhook_id in disabled {
                    tracing::warn!(%webhook_id, "webhook disabled after 24 h of failures");
                }
            }
            // The leases run out and the attempts are made again: at least once.
            Err(e) => tracing::error!(attempts = done.len(), error = %e, "webhook attempts were not recorded"),
        }
    }

    /// One attempt, signed now; what it came to and when the next is due.
    async fn attempt(&self, d: &DueDelivery) -> AttemptOutcome {
        let started = std::time::Instant::now();
        let at = self.clock.now();
        let result = self.send(d, at.timestamp()).await;
        let duration_ms = started.elapsed().as_millis() as i64;
        let (status_code, error, response, delivered) = match result {
            Ok((status, body)) => {
                let ok = (200..300).contains(&status);
                let error = (!ok).then(|| format!("the receiver answered {status}"));
                (Some(i64::from(status)), error, Some(body), ok)
            }
            Err(error) => (None, Some(error), None, false),
        };
        let next_at = if delivered {
            None
        } else {
            let unit = (rand_core::OsRng.next_u32() as f64) / (u32::MAX as f64 + 1.0);
            self.config
                .retry_schedule
                .after(d.round as usize + 1, unit)
                .and_then(|wait| chrono::TimeDelta::from_std(wait).ok())
                .map(|wait| at + wait)
        };
        AttemptOutcome {
            status_code,
            error,
            response,
            duration_ms,
            at,
            delivered,
            next_at,
        }
    }

    /// Posts the body with the Standard Webhooks headers; the status and the first KiB of the answer, or why no
    /// answer came (never the address a name resolved to).
    async fn send(&self, d: &DueDelivery, timestamp: i64) -> Result<(u16, String), String> {
        let secret = self
            .vault
            .open_webhook_secret(d.webhook_id, &d.secret)
            .map_err(|_| "the endpoint's secret could not be opened".to_string())?;
        let id = d.event_id.to_string();
        let headers = BTreeMap::from([
            ("content-type".to_string(), "application/json".to_string()),
            ("webhook-id".to_string(), id.clone()),
            ("webhook-timestamp".to_string(), timestamp.to_string()),
            (
                "webhook-signature".to_string(),
                webhook::signature(&secret, &id, timestamp, &d.body),
            ),
            ("user-agent".to_string(), "agentd-webhooks".to_string()),
        ]);
        let request =
            FetchRequest::new(Some("POST"), &d.url, &headers, Some(d.body.clone())).map_err(|e| e.to_string())?;
        match self.fetcher.send(&request, self.fetcher.deadline()).await {
            Ok(answer) => {
                let mut kept = answer.body;
                kept.truncate(KEEP_LIMIT);
                Ok((answer.status, String::from_utf8_lossy(&kept).into_owned()))
            }
            Err(FetchError::UrlNotAllowed(e)) => Err(format!("refused: {e}")),
            Err(FetchError::HostNotFound) => Err("the endpoint's host does not resolve".into()),
            Err(FetchError::Timeout) => Err("no answer within WEBHOOK_TIMEOUT_MS".into()),
            Err(e) => Err(e.to_string()),
        }
    }
}
