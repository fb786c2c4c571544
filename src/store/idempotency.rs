//! Idempotency keys (docs/api.md §12): the trait both backends implement and the types of a claim. A request claims
//! its key in a transaction of its own before doing anything, and stores its answer once it has one, so a repeat
//! reaching any instance sharing the database sees the first request running or its answer.

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use uuid::Uuid;

use super::StoreResult;

/// How long a key is remembered after its first use (docs/api.md §12).
pub const KEY_LIFETIME: chrono::TimeDelta = chrono::TimeDelta::hours(24);

pub use crate::domain::outflow::{ClaimFence, Mandate};

/// What a request asks for when it claims a key.
#[derive(Debug, Clone)]
pub struct KeyClaim<'a> {
    pub agent_id: Uuid,
    pub key: &'a str,
    /// Hash of the method, the path and the canonical JSON body.
    pub fingerprint: &'a str,
    pub now: DateTime<Utc>,
    /// Keys created before this are forgotten (the 24 h window).
    pub expired_before: DateTime<Utc>,
    /// The claim's lease: until then (and for as long as its request renews it) nobody else takes the key over.
    pub held_until: DateTime<Utc>,
}

/// The store's answer to a claim.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ClaimOutcome {
    /// The key is this request's: do the work, then `answer_key` or `release_key` with this claim id.
    Claimed(Uuid),
    /// The first request with this key and body answered this.
    Answered { status: u16, body: String },
    /// The first request with this key is still running.
    InProgress,
    /// The first request with this key stopped without an answer after moving money: its lease ran out (its process
    /// died, or stopped past it) and it was not taken over, as a claim that moved money never is. `transfer_id` is
    /// the transfer it moved money with (none on claims marked before it was kept); an answer found from it is
    /// stored with `answer_key` under `claim_id`, the stopped claim's.
    Stopped { claim_id: Uuid, transfer_id: Option<Uuid> },
    /// The key was used with another request.
    Reused,
}

/// A stored key as read back inside a claim.
#[derive(Debug, sqlx::FromRow)]
pub(super) struct KeyRow {
    pub fingerprint: String,
    pub claim_id: Uuid,
    pub status_code: Option<i32>,
    pub body: Option<String>,
    pub held_until: Option<DateTime<Utc>>,
    pub acted_at: Option<DateTime<Utc>>,
    pub transfer_id: Option<Uuid>,
}

impl KeyRow {
    /// What a request with `fingerprint` is told at `now` when it finds this row holding its key.
    pub(super) fn outcome(self, fingerprint: &str, now: DateTime<Utc>) -> ClaimOutcome {
        if self.fingerprint != fingerprint {
            return ClaimOutcome::Reused;
        }
        match (self.status_code, self.body) {
            (Some(status), Some(body)) => match u16::try_from(status) {
                Ok(status) => ClaimOutcome::Answered { status, body },
                Err(_) => ClaimOutcome::InProgress,
            },
            // Unanswered past its lease: had it moved no money, the claim would have been forgotten just before.
            _ if self.acted_at.is_some() && self.held_until.is_some_and(|until| until < now) => ClaimOutcome::Stopped {
                claim_id: self.claim_id,
                transfer_id: self.transfer_id,
            },
            _ => ClaimOutcome::InProgress,
        }
    }
}

/// The SQL both dialects share (`$n` placeholders work on both).
pub(super) mod sql {
    /// Forgets the agent's expired keys, and this key's claim when its lease ran out before it moved any money.
    pub const FORGET: &str = "DELETE FROM idempotency_keys WHERE agent_id = $1 \
        AND (created_at < $2 OR (idem_key = $3 AND status_code IS NULL AND acted_at IS NULL AND held_until < $4))";
    pub const INSERT: &str = "INSERT INTO idempotency_keys \
        (agent_id, idem_key, fingerprint, claim_id, created_at, held_until) \
        VALUES ($1, $2, $3, $4, $5, $6) ON CONFLICT (agent_id, idem_key) DO NOTHING";
    pub const RENEW: &str = "UPDATE idempotency_keys SET held_until = $1 \
        WHERE agent_id = $2 AND idem_key = $3 AND claim_id = $4 AND status_code IS NULL";
    /// Inside a reservation: whether the claim is still the request's (0 or 1).
    pub const HELD: &str = "SELECT COUNT(*) FROM idempotency_keys \
        WHERE agent_id = $1 AND idem_key = $2 AND claim_id = $3 AND status_code IS NULL";
    /// Inside a reservation that moves (or holds) money: the claim can no longer be taken over, and a repeat after
    /// its request stopped answers the transfer `$5` (its first).
    pub const ACTED: &str = "UPDATE idempotency_keys SET acted_at = $1, transfer_id = $5 \
        WHERE agent_id = $2 AND idem_key = $3 AND claim_id = $4 AND acted_at IS NULL";
    pub const SELECT: &str = "SELECT fingerprint, claim_id, status_code, body, held_until, acted_at, transfer_id \
        FROM idempotency_keys WHERE agent_id = $1 AND idem_key = $2";
    pub const ANSWER: &str = "UPDATE idempotency_keys SET status_code = $1, body = $2 \
        WHERE agent_id = $3 AND idem_key = $4 AND claim_id = $5 AND status_code IS NULL";
    pub const RELEASE: &str = "DELETE FROM idempotency_keys \
        WHERE agent_id = $1 AND idem_key = $2 AND claim_id = $3 AND status_code IS NULL";
}

/// Idempotency keys per agent.
#[async_trait]
pub trait IdempotencyStore: Send + Sync + 'static {
    /// In one transaction: forget expired keys and a stale claim of this key, then claim it or report who holds it.
    async fn claim_key(&self, claim: &KeyClaim<'_>) -> StoreResult<ClaimOutcome>;
    /// Extends the claim's lease to `until`; `false` when it is no longer this claim's (taken over, or answered).
    async fn renew_key(&self, agent_id: Uuid, key: &str, claim_id: Uuid, until: DateTime<Utc>) -> StoreResult<bool>;
    /// Stores the answer of a claim (nothing when the claim was taken over meanwhile).
    async fn answer_key(&self, agent_id: Uuid, key: &str, claim_id: Uuid, status: u16, body: &str) -> StoreResult<()>;
    /// Gives up an unanswered claim, so that the key can be used again.
    async fn release_key(&self, agent_id: Uuid, key: &str, claim_id: Uuid) -> StoreResult<()>;
}
