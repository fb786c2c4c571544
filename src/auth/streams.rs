//! Open server-sent event streams (chat and conversation streams), per agent on this instance (docs/api.md §15).
//!
//! A stream is opened with a lease: at most `MAX_STREAMS_PER_AGENT` leases per agent exist at once, and each
//! lease ends its stream when the credential it was opened with stops holding. The credential is checked again
//! from the store every `STREAM_RECHECK_MS`, once per distinct (agent, token) however many streams share it, so a
//! reissue or a deletion made on any instance sharing the database ends the streams here within that interval.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use futures::StreamExt;
use tokio::sync::watch;
use uuid::Uuid;

use super::{AuthError, Authenticator};
use crate::domain::token;
use crate::store::StoreError;

/// How many credentials are checked at once in one round.
const CHECKS_IN_FLIGHT: usize = 8;

/// The agent already holds its maximum number of open streams on this instance.
#[derive(Debug, thiserror::Error)]
#[error("this agent already has {limit} open streams")]
pub struct TooManyStreams {
    pub limit: usize,
}

/// What a stream was opened with: the agent, and the hash of its token (`None` when agent auth is disabled).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
struct Holder {
    agent_id: Uuid,
    token_hash: Option<String>,
}

/// The streams of one holder and the switch that ends them all.
struct Held {
    streams: usize,
    revoked: watch::Sender<bool>,
}

#[derive(Default)]
struct Open {
    per_agent: HashMap<Uuid, usize>,
    holders: HashMap<Holder, Held>,
}

/// The open streams of this instance.
pub struct OpenStreams {
    auth: Authenticator,
    limit: usize,
    recheck: Duration,
    open: Mutex<Open>,
}

impl OpenStreams {
    pub fn new(auth: Authenticator, limit: usize, recheck: Duration) -> Arc<Self> {
        Arc::new(OpenStreams {
            auth,
            limit,
            recheck,
            open: Mutex::default(),
        })
    }

    fn lock(&self) -> MutexGuard<'_, Open> {
        self.open.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// Takes one of the agent's stream slots for a stream opened with `token` (already authenticated).
    pub fn open(self: &Arc<Self>, agent_id: Uuid, token: Option<&str>) -> Result<StreamLease, TooManyStreams> {
        let token_hash = match token {
            Some(token) if !self.auth.agent_auth_disabled => Some(token::hash(token.trim())),
            _ => None,
        };
        let holder = Holder { agent_id, token_hash };
        let mut open = self.lock();
        let count = open.per_agent.entry(agent_id).or_default();
        if *count >= self.limit {
            return Err(TooManyStreams { limit: self.limit });
        }
        *count += 1;
        let held = open.holders.entry(holder.clone()).or_insert_with(|| Held {
            streams: 0,
            revoked: watch::channel(false).0,
        });
        held.streams += 1;
        let revoked = held.revoked.subscribe();
        Ok(StreamLease {
            streams: self.clone(),
            holder,
            revoked,
        })
    }

    /// Streams open now for `agent_id`.
    pub fn open_for(&self, agent_id: Uuid) -> usize {
        self.lock().per_agent.get(&agent_id).copied().unwrap_or(0)
    }

    fn close(&self, holder: &Holder) {
        let mut open = self.lock();
        if let Some(count) = open.per_agent.get_mut(&holder.agent_id) {
            *count = count.saturating_sub(1);
            if *count == 0 {
                open.per_agent.remove(&holder.agent_id);
            }
        }
        if let Some(held) = open.holders.get_mut(holder) {
            held.streams = held.streams.saturating_sub(1);
            if held.streams == 0 {
                open.holders.remove(holder);
            }
        }
    }

    /// Checks every credential with open streams once and ends the streams of those that no longer hold. A store
    /// that fails keeps the streams open until a later round can tell.
    pub async fn check_once(&self) {
        let holders: Vec<Holder> = self.lock().holders.keys().cloned().collect();
        futures::stream::iter(holders)
            .for_each_concurrent(CHECKS_IN_FLIGHT, |holder| async move {
                match self
                    .auth
                    .still_holds(holder.agent_id, holder.token_hash.as_deref())
                    .await
                {
                    Ok(true) => {}
                    Ok(false) => {
                        if let Some(held) = self.lock().holders.get(&holder) {
                            let _ = held.revoked.send(true);
                        }
                    }
                    Err(e) => tracing::warn!(error = %e, "cannot check an open stream's credential"),
                }
            })
            .await;
    }

    /// Checks the open streams' credentials every `STREAM_RECHECK_MS` until `stop` turns true.
    pub async fn run_until_stopped(self: Arc<Self>, mut stop: watch::Receiver<bool>) {
        loop {
            tokio::select! {
                _ = tokio::time::sleep(self.recheck) => {}
                _ = stop.wait_for(|stopped| *stopped) => return,
            }
            self.check_once().await;
        }
    }
}

/// One open stream's slot; dropping it frees the slot.
pub struct StreamLease {
    streams: Arc<OpenStreams>,
    holder: Holder,
    revoked: watch::Receiver<bool>,
}

impl StreamLease {
    /// Resolves when the stream must end: its token was reissued or its agent deleted. Borrows the lease, so a
    /// stream that owns its lease needs no future of its own for this.
    pub async fn ended(&mut self) {
        // The sender lives as long as any lease of this holder, this one included: an error cannot come first.
        let _ = self.revoked.wait_for(|revoked| *revoked).await;
    }

    /// Resolves when the stream must end: its token was reissued or its agent deleted.
    pub fn revoked(&self) -> impl Future<Output = ()> + Send + 'static {
        let mut revoked = self.revoked.clone();
        async move {
            // The sender lives as long as any lease of this holder, this one included: an error cannot come first.
            let _ = revoked.wait_for(|revoked| *revoked).await;
        }
    }
}

impl Drop for StreamLease {
    fn drop(&mut self) {
        self.streams.close(&self.holder);
    }
}

impl Authenticator {
    /// Whether a credential a stream was opened with still holds: the agent exists and is active, and the token
    /// (when one was checked) is still its live token.
    async fn still_holds(&self, agent_id: Uuid, token_hash: Option<&str>) -> Result<bool, AuthError> {
        let (agent, token_owner) = match self
            .store
            .get_agent_for_token(agent_id, token_hash.unwrap_or_default())
            .await
        {
            Ok(found) => found,
            Err(StoreError::AgentNotFound) => return Ok(false),
            Err(e) => return Err(e.into()),
        };
        Ok(agent.is_active && token_hash.is_none_or(|_| token_owner == Some(agent_id)))
    }
}
