//! `Idempotency-Key` (docs/api.md §12), shared by `POST /api/agents/{id}/transfers` and `POST /api/chat`: the key is
//! claimed in the database before the work starts and the answer stored after it, so a repeat reaching any instance
//! replays the first answer (same status, same body), waits its turn (409) or is refused for another body (422).
//!
//! What is kept: every answer given after authentication and validation, refusals included. Authentication errors,
//! malformed bodies and validation errors release the claim, so the client can correct the request and reuse the key.
//! A claim is a lease its request renews while it runs (`LEASE`, renewed every `RENEW_EVERY`): only a claim whose
//! lease ran out, a process that died or stopped, may be taken over, and only while it has moved no money. The
//! request's reservations check that the claim is still theirs and mark it as having moved money, with the transfer
//! it moved, in their own transaction (`Mandate`), so a holder that wakes up after a takeover moves nothing, and a
//! takeover never repeats a payment the first holder made.
//!
//! A claim that moved money and whose lease ran out unanswered (its process died between the payment and the
//! answer) is never run again: a repeat is answered from what it stored. `run_once_or_recall` (transfers) answers the
//! transfer the claim recorded, 201 as the first request would have, and keeps that as the key's answer; `run_once`
//! (a chat turn, whose answer is the whole turn) answers 409, as does a claim marked before the transfer was kept.

use std::future::Future;
use std::sync::Arc;

use axum::body::Body;
use axum::extract::FromRequestParts;
use axum::http::request::Parts;
use axum::http::{HeaderName, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde::Serialize;
use serde_json::Value;
use sha2::{Digest, Sha256};
use uuid::Uuid;

use super::error::{AppError, Result};
use crate::domain::clock::Clock;
use crate::store::{ClaimFence, ClaimOutcome, KeyClaim, Store};

pub const KEY_HEADER: HeaderName = HeaderName::from_static("idempotency-key");
/// Set on a replayed answer, so a client can tell it from a fresh one.
pub const REPLAYED_HEADER: HeaderName = HeaderName::from_static("idempotent-replayed");
/// How long a claim holds without being renewed: a request renews it every `RENEW_EVERY` while it runs, so only a
/// holder that stopped (died, paused, cut off from the database) for this long loses it.
const LEASE: chrono::TimeDelta = chrono::TimeDelta::seconds(60);
const RENEW_EVERY: std::time::Duration = std::time::Duration::from_secs(15);
const MAX_KEY_LENGTH: usize = 255;

/// The `Idempotency-Key` header as sent; read without failing, checked by `key()` once the caller is authenticated
/// (so a bad token is still a 401, not a 422).
pub struct IdempotencyHeader(Option<HeaderValue>);

impl<S: Send + Sync> FromRequestParts<S> for IdempotencyHeader {
    type Rejection = std::convert::Infallible;

    async fn from_request_parts(parts: &mut Parts, _state: &S) -> std::result::Result<Self, Self::Rejection> {
        Ok(IdempotencyHeader(parts.headers.get(KEY_HEADER).cloned()))
    }
}

impl IdempotencyHeader {
    /// The key: 1 to 255 visible ASCII characters, else 422.
    pub fn key(&self) -> Result<Option<String>> {
        let Some(value) = &self.0 else { return Ok(None) };
        let bytes = value.as_bytes();
        if bytes.is_empty() || bytes.len() > MAX_KEY_LENGTH || !bytes.iter().all(u8::is_ascii_graphic) {
            return Err(AppError::field(
                "Idempotency-Key",
                "must be 1 to 255 visible ASCII characters",
            ));
        }
        Ok(Some(String::from_utf8_lossy(bytes).into_owned()))
    }
}

/// A request that carries a key: whose it is and what it asked.
pub struct Idempotent {
    agent_id: Uuid,
    key: String,
    fingerprint: String,
}

impl Idempotent {
    /// `None` without a key. The fingerprint covers the method, the path and the JSON value (key order ignored).
    pub fn new(key: Option<String>, agent_id: Uuid, method: &str, path: &str, body: &Value) -> Option<Self> {
        let key = key?;
        let mut hash = Sha256::new();
        hash.update(method.as_bytes());
        hash.update(b"\n");
        hash.update(path.as_bytes());
        hash.update(b"\n");
        hash.update(canonical(body).to_string().as_bytes());
        Some(Idempotent {
            agent_id,
            key,
            fingerprint: alloy::hex::encode(hash.finalize()),
        })
    }
}

/// The same JSON value with every object's keys in order, whatever order the client wrote them in.
fn canonical(value: &Value) -> Value {
    match value {
        Value::Object(map) => {
            let mut entries: Vec<_> = map.iter().collect();
            entries.sort_by(|a, b| a.0.cmp(b.0));
            Value::Object(entries.into_iter().map(|(k, v)| (k.clone(), canonical(v))).collect())
        }
        Value::Array(items) => Value::Array(items.iter().map(canonical).collect()),
        other => other.clone(),
    }
}

/// A successful answer: its status and JSON body, as sent and as kept for replays.
pub struct Answer {
    status: StatusCode,
    body: Value,
}

impl Answer {
    pub fn new(status: StatusCode, view: &impl Serialize) -> Result<Self> {
        let body = serde_json::to_value(view).map_err(AppError::internal)?;
        Ok(Answer { status, body })
    }
}

impl IntoResponse for Answer {
    fn into_response(self) -> Response {
        (self.status, axum::Json(self.body)).into_response()
    }
}

/// Whether an error is an answer to keep: authentication, malformed requests and validation are not (the
/// request never got to do anything, and the client may correct it under the same key). Nor is a signer that did not
/// answer (§20): nothing was recorded, and a retry under the same key signs again. Nor a sponsor that cannot pay
/// now (§22 `sponsor_unfunded`, retryable): nothing was signed, and a retry once the operator funds it may go. Nor
/// a 409 `idempotency_in_progress`: a request still running (a designation of the account unmined, §22) moved
/// nothing, and a retry once it is done may go.
fn is_kept(err: &AppError) -> bool {
    use AppError::*;
    !matches!(
        err,
        Upstream {
            code: "signer_unavailable" | "sponsor_unfunded",
            ..
        } | Conflict {
            code: "idempotency_in_progress",
            ..
        } | InvalidJson(_)
            | BadRequest { .. }
            | MissingToken
            | MissingCredential(_)
            | InvalidToken
            | AdminRequired
            | InvalidProof
            | InvalidOwnerToken
            | Forbidden
            | AgentNotFound
            | ConversationNotFound
            | TransferNotFound
            | NotFound
            | MethodNotAllowed
            | AgentInactive
            | PayloadTooLarge
            | Validation { .. }
            | ChallengeExpired
            | RateLimited { .. }
    )
}

/// Runs `work` at most once per key, given the claim it runs under (to put in its `Mandate`). The work runs in a
/// task of its own, so a client that hangs up never leaves a transfer half-done or a claim unanswered; the claim's
/// lease is renewed while it runs. A repeat of a request that stopped after moving money without an answer is 409
/// (see `run_once_or_recall` for handlers that can tell its answer).
pub async fn run_once<F, W>(
    store: Arc<dyn Store>,
    clock: Arc<dyn Clock>,
    request: Option<Idempotent>,
    work: F,
) -> Result<Response>
where
    F: FnOnce(Option<ClaimFence>) -> W,
    W: Future<Output = Result<Answer>> + Send + 'static,
{
    run_once_or_recall(store, clock, request, |_| async { Ok(None) }, work).await
}

/// `run_once`, where a repeat of a request that stopped after moving money (its lease ran out unanswered: its
/// process died) is answered from what it stored: `recall` is given the transfer it moved money with and tells the
/// answer (`None`: it cannot, and the repeat is 409). That answer is stored as the key's, so later repeats replay it
/// byte for byte. The work never runs again for such a key: its payment stands, and a second would pay twice.
pub async fn run_once_or_recall<R, RF, F, W>(
    store: Arc<dyn Store>,
    clock: Arc<dyn Clock>,
    request: Option<Idempotent>,
    recall: R,
    work: F,
) -> Result<Response>
where
    R: FnOnce(Uuid) -> RF,
    RF: Future<Output = Result<Option<Answer>>>,
    F: FnOnce(Option<ClaimFence>) -> W,
    W: Future<Output = Result<Answer>> + Send + 'static,
{
    let Some(request) = request else {
        let answer = tokio::spawn(work(None)).await.map_err(AppError::internal)??;
        return Ok(answer.into_response());
    };
    let now = clock.now();
    let claim = KeyClaim {
        agent_id: request.agent_id,
        key: &request.key,
        fingerprint: &request.fingerprint,
        now,
        expired_before: now - crate::store::KEY_LIFETIME,
        held_until: now + LEASE,
    };
    let claim_id = match store.claim_key(&claim).await? {
        ClaimOutcome::Claimed(claim_id) => claim_id,
        ClaimOutcome::Answered { status, body } => return Ok(replay(status, body)),
        ClaimOutcome::InProgress => {
            return Err(AppError::Conflict {
                code: "idempotency_in_progress",
                message: "a request with this Idempotency-Key is still running; retry when it has finished".into(),
            });
        }
        ClaimOutcome::Stopped { claim_id, transfer_id } => {
            let answer = match transfer_id {
                Some(id) => recall(id).await?,
                None => None,
            };
            return recalled(store.as_ref(), &request, claim_id, answer).await;
        }
        ClaimOutcome::Reused => {
            return Err(AppError::Unprocessable {
                code: "idempotency_key_reused",
                message: "this Idempotency-Key was used with another request; use a new key".into(),
            });
        }
    };
    let work = work(Some(ClaimFence {
        key: request.key.clone(),
        claim_id,
    }));
    let task = tokio::spawn(async move {
        let result = tokio::select! {
            result = work => result,
            never = renew(store.as_ref(), clock.as_ref(), &request, claim_id) => match never {},
        };
        let kept = match &result {
            Ok(answer) => Some((answer.status, answer.body.to_string())),
            Err(err) if is_kept(err) => Some((err.status(), err.body().to_string())),
            Err(_) => None,
        };
        let (agent_id, key) = (request.agent_id, &request.key);
        let stored = match kept {
            Some((status, body)) => store.answer_key(agent_id, key, claim_id, status.as_u16(), &body).await,
            None => store.release_key(agent_id, key, claim_id).await,
        };
        if let Err(e) = stored {
            // The claim stays unanswered: repeats get 409 until it is stale, never a second execution before that.
            tracing::error!(agent_id = %agent_id, error = %e, "the answer of an idempotent request could not be stored");
        }
        result
    });
    Ok(task.await.map_err(AppError::internal)??.into_response())
}

/// The answer to a repeat of a request that stopped after moving money: `answer`, recalled from what it stored and
/// kept as the key's answer (a first holder that was merely paused and answers after all keeps its own: both name
/// the same transfer), or 409 without one.
async fn recalled(store: &dyn Store, request: &Idempotent, claim_id: Uuid, answer: Option<Answer>) -> Result<Response> {
    let Some(answer) = answer else {
        return Err(AppError::Conflict {
            code: "idempotency_in_progress",
            message: "the request with this Idempotency-Key stopped after moving money, before it answered; it is not \
                      run again (its transfers are in the agent's transactions); use a new key for a new request"
                .into(),
        });
    };
    let (status, body) = (answer.status.as_u16(), answer.body.to_string());
    if let Err(e) = store
        .answer_key(request.agent_id, &request.key, claim_id, status, &body)
        .await
    {
        // Answered all the same: the next repeat recalls it again.
        tracing::warn!(agent_id = %request.agent_id, error = %e, "a recalled idempotent answer could not be stored");
    }
    Ok(replay(status, body))
}

/// Renews the claim's lease every `RENEW_EVERY`, for as long as the work runs (never returns).
async fn renew(store: &dyn Store, clock: &dyn Clock, request: &Idempotent, claim_id: Uuid) -> std::convert::Infallible {
    loop {
        tokio::time::sleep(RENEW_EVERY).await;
        let until = clock.now() + LEASE;
        match store.renew_key(request.agent_id, &request.key, claim_id, until).await {
            Ok(true) => {}
            // Taken over (this process was stopped past its lease): the reservations' check refuses its payments.
            Ok(false) => {
                tracing::warn!(agent_id = %request.agent_id, "an idempotency claim was taken over while its request ran")
            }
            Err(e) => {
                tracing::warn!(agent_id = %request.agent_id, error = %e, "an idempotency claim could not be renewed")
            }
        }
    }
}

/// The first answer again, byte for byte.
fn replay(status: u16, body: String) -> Response {
    let status = StatusCode::from_u16(status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    let mut response = Response::new(Body::from(body));
    *response.status_mut() = status;
    let headers = response.headers_mut();
    headers.insert(header::CONTENT_TYPE, HeaderValue::from_static("application/json"));
    headers.insert(REPLAYED_HEADER, HeaderValue::from_static("true"));
    response
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn fingerprint(method: &str, path: &str, body: Value) -> String {
        Idempotent::new(Some("k".into()), Uuid::nil(), method, path, &body)
            .map(|r| r.fingerprint)
            .unwrap_or_default()
    }

    #[test]
    fn key_order_does_not_change_the_fingerprint_but_values_and_paths_do() {
        let a = fingerprint("POST", "/api/chat", json!({"a": 1, "b": {"x": [1, 2], "y": null}}));
        let b = fingerprint("POST", "/api/chat", json!({"b": {"y": null, "x": [1, 2]}, "a": 1}));
        assert_eq!(a, b);
        assert_ne!(
            a,
            fingerprint("POST", "/api/chat", json!({"a": 2, "b": {"x": [1, 2], "y": null}}))
        );
        assert_ne!(
            a,
            fingerprint("POST", "/api/other", json!({"a": 1, "b": {"x": [1, 2], "y": null}}))
        );
    }

    #[test]
    fn keys_are_one_to_255_visible_ascii_characters() {
        let key = |text: &[u8]| IdempotencyHeader(Some(HeaderValue::from_bytes(text).expect("a header value"))).key();
        assert!(matches!(key(b"order-42:retry_1"), Ok(Some(_))));
        assert!(matches!(key(&[b'k'; 255]), Ok(Some(_))));
        assert!(key(&[b'k'; 256]).is_err());
        assert!(key(b"").is_err());
        assert!(key(b"two words").is_err());
        assert!(key("caf\u{e9}".as_bytes()).is_err());
        assert!(matches!(IdempotencyHeader(None).key(), Ok(None)));
    }
}
