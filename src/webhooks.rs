//! The webhook delivery worker (§19), one per instance: fans recorded events out to the endpoints subscribed to
//! them, leases the deliveries that are due, and attempts each once through the guarded fetch of x402 (the name
//! resolved again and every address checked at each attempt, the connection made to those addresses, no redirects,
//! the answer read up to 64 KiB), signed the Standard Webhooks way. Instances share the work through the store.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use rand_core::RngCore;
use tokio::sync::watch;

use crate::config::{WebhookConfig, X402Config};
use crate::domain::webhook::{self, KEEP_LIMIT, READ_LIMIT};
use crate::net::egress::{FetchError, FetchRequest, Fetcher};
use crate::store::Store;
use crate::store::webhooks::{AttemptOutcome, DueDelivery};
use crate::vault::Vault;

/// How often the worker looks for due deliveries when it found none.
const IDLE_POLL: Duration = Duration::from_millis(250);
/// Deliveries leased per round, and attempted at once.
const BATCH: i64 = 32;
const PARALLEL: usize = 8;
/// Events fanned out per round.
const FAN_OUT_BATCH: i64 = 200;

/// What the worker needs: built once at start.
#[derive(Clone)]
pub struct Deliverer {
    store: Arc<dyn Store>,
    vault: Arc<Vault>,
    fetcher: Fetcher,
    config: WebhookConfig,
}

impl Deliverer {
    pub fn new(store: Arc<dyn Store>, vault: Arc<Vault>, config: WebhookConfig) -> Self {
        let fetcher = Fetcher::new(X402Config {
            allow_private: config.allow_private,
            max_response_bytes: READ_LIMIT,
            timeout: config.timeout,
        });
        Deliverer {
            store,
            vault,
            fetcher,
            config,
        }
    }

    /// One round: fan out new events, lease what is due, attempt it, record each attempt. Answers how many
    /// attempts were made (tests drive rounds with it instead of waiting).
    pub async fn run_once(&self) -> anyhow::Result<usize> {
        while self.store.fan_out_webhook_events(FAN_OUT_BATCH).await? == FAN_OUT_BATCH as usize {}
        let now = crate::domain::now();
        // The lease outlasts the attempt's deadline, so no other instance attempts it meanwhile.
        let lease = chrono::TimeDelta::from_std(self.config.timeout + Duration::from_secs(30))?;
        let due = self.store.claim_deliveries(now, lease, BATCH).await?;
        let count = due.len();
        futures::stream::iter(due)
            .for_each_concurrent(PARALLEL, |d| async move {
                let outcome = self.attempt(&d).await;
                match self.store.record_attempt(&d, &outcome, webhook::DISABLE_AFTER).await {
                    Ok(true) => tracing::warn!(webhook_id = %d.webhook_id, "webhook disabled after 24 h of failures"),
                    Ok(false) => {}
                    // The lease runs out and the attempt is made again: at least once.
                    Err(e) => {
                        tracing::error!(webhook_id = %d.webhook_id, error = %e, "a webhook attempt was not recorded")
                    }
                }
            })
            .await;
        Ok(count)
    }

    /// Rounds until `stop` turns true; a full batch is followed at once by the next round.
    pub async fn run_until_stopped(self, mut stop: watch::Receiver<bool>) {
        loop {
            let wait = match self.run_once().await {
                Ok(n) if n as i64 >= BATCH => Duration::ZERO,
                Ok(_) => IDLE_POLL,
                Err(e) => {
                    tracing::warn!(error = %e, "webhook round failed; trying again");
                    Duration::from_secs(1)
                }
            };
            tokio::select! {
                _ = tokio::time::sleep(wait) => {}
                _ = stop.wait_for(|stopped| *stopped) => return,
            }
        }
    }

    /// One attempt, signed now; what it came to and when the next is due.
    async fn attempt(&self, d: &DueDelivery) -> AttemptOutcome {
        let started = std::time::Instant::now();
        let at = crate::domain::now();
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
