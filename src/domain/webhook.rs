//! Webhooks (§19) without I/O: the event types, which stored change becomes which event, the Standard Webhooks
//! body and signature, the secret's text form, and when a failed delivery is tried again.

use std::time::Duration;

use base64::Engine;
use base64::engine::general_purpose::STANDARD as BASE64;
use chrono::{DateTime, SecondsFormat, Utc};
use hmac::{Hmac, Mac};
use serde::Serialize;
use serde_json::{Map, Value, json};
use sha2::Sha256;
use uuid::Uuid;
use zeroize::Zeroizing;

use crate::domain::audit::{Actor, Detail};

/// Every event type an endpoint may subscribe to (`"*"` stands for all of them).
pub const EVENT_TYPES: &[&str] = &[
    "transfer.pending",
    "transfer.confirmed",
    "transfer.reverted",
    "transfer.dropped",
    "transfer.cancelled",
    "transfer.expired",
    "transfer.replaced",
    "approval.required",
    "approval.resolved",
    "policy.denied",
    "agent.updated",
    "policy.updated",
    "delegation.revoked",
    "payment.received",
    "webhook.test",
];

/// The prefix of a secret's text form.
pub const SECRET_PREFIX: &str = "whsec_";

/// How much of a receiver's answer is read (the rest is dropped unread) and how much of it is kept in the log.
pub const READ_LIMIT: usize = 64 * 1024;
pub const KEEP_LIMIT: usize = 1024;

/// An endpoint whose every attempt failed for this long is disabled.
pub const DISABLE_AFTER: chrono::TimeDelta = chrono::TimeDelta::hours(24);

/// Checks an endpoint's `events`: `["*"]`, or known types (repeats dropped, order kept). The error names the fault.
pub fn check_events(events: &[String]) -> Result<Vec<String>, String> {
    if events.is_empty() {
        return Err("must name at least one event type, or \"*\"".into());
    }
    let mut out: Vec<String> = Vec::new();
    for e in events {
        let e = e.trim();
        if e == "*" {
            if events.len() != 1 {
                return Err("\"*\" stands alone".into());
            }
        } else if !EVENT_TYPES.contains(&e) {
            return Err(format!("unknown event type `{e}` (known: {})", EVENT_TYPES.join(", ")));
        }
        if !out.iter().any(|o| o == e) {
            out.push(e.to_string());
        }
    }
    Ok(out)
}

/// Whether an endpoint subscribed to `events` receives an event of type `ty` (`webhook.test` is sent to one
/// endpoint by name, whatever it subscribed to).
pub fn subscribed(events: &[String], ty: &str) -> bool {
    events.iter().any(|e| e == "*" || e == ty)
}

/// One event to push, as recorded in the change's transaction.
#[derive(Debug, Clone, PartialEq)]
pub struct WebhookEvent {
    /// The `webhook-id` of every attempt to every endpoint.
    pub id: Uuid,
    pub ty: &'static str,
    pub agent_id: Uuid,
    /// `data`, with `agent_id` in it.
    pub data: Value,
    /// Keeps an event that may be recorded again (a transfer marked pending after a fee bump) to one.
    pub dedup: Option<String>,
    pub at: DateTime<Utc>,
}

impl WebhookEvent {
    /// A new event of `ty` about `agent_id` at `at`; `data` is an object (anything else is wrapped) and gains
    /// `agent_id`.
    pub fn new(ty: &'static str, agent_id: Uuid, data: Value, at: DateTime<Utc>) -> Self {
        let mut map = match data {
            Value::Object(map) => map,
            other => Map::from_iter([("value".to_string(), other)]),
        };
        map.remove("type");
        map.insert("agent_id".into(), json!(agent_id));
        WebhookEvent {
            id: Uuid::new_v4(),
            ty,
            agent_id,
            data: Value::Object(map),
            dedup: None,
            at,
        }
    }

    /// The delivered body: `{"type", "timestamp", "data"}`, the same bytes on every attempt.
    pub fn body(&self) -> String {
        body(self.ty, self.at, &self.data)
    }

    /// `transfer_id` in `data`, when it names a transfer.
    pub fn transfer_id(&self) -> Option<Uuid> {
        self.data.get("transfer_id")?.as_str()?.parse().ok()
    }
}

/// The body of an event of `ty` at `at` carrying `data`.
pub fn body(ty: &str, at: DateTime<Utc>, data: &Value) -> String {
    json!({"type": ty, "timestamp": at.to_rfc3339_opts(SecondsFormat::Micros, true), "data": data}).to_string()
}

/// The events an audit entry reports: policy refusals, agent and policy changes, revoked delegations, expiries and
/// fee bumps. `data` is the entry's detail with who acted, and what the event's type adds (an expiry's `status`; a
/// replacement's `replaced` hash named `replaced_hash`).
pub fn from_audit(
    agent_id: Uuid,
    actor: Actor,
    detail: &Detail,
    at: DateTime<Utc>,
) -> Result<Option<WebhookEvent>, serde_json::Error> {
    let (ty, data) = match detail {
        Detail::TransferRefused(d) if d.refused.code == "policy_denied" => {
            ("policy.denied", reported(d, actor, None, None)?)
        }
        Detail::AgentUpdated(d) => ("agent.updated", reported(d, actor, None, None)?),
        Detail::PolicyUpdated(d) => ("policy.updated", reported(d, actor, None, None)?),
        Detail::DelegationRevoked(d) => ("delegation.revoked", reported(d, actor, None, None)?),
        Detail::TransferExpired(d) => ("transfer.expired", reported(d, actor, Some("expired"), None)?),
        Detail::X402PaymentExpired(d) => ("transfer.expired", reported(d, actor, Some("expired"), Some("x402"))?),
        Detail::TransferFeeBumped(d) | Detail::TransferCancelRequested(d) => {
            let data = ReplacedEvent {
                transfer_id: d.transfer_id,
                chain: &d.chain,
                nonce: d.nonce,
                replaced_hash: &d.replaced,
                tx_hash: d.tx_hash.as_deref(),
                actor,
            };
            ("transfer.replaced", serde_json::to_value(data)?)
        }
        _ => return Ok(None),
    };
    Ok(Some(WebhookEvent::new(ty, agent_id, data, at)))
}

fn reported<T: Serialize>(
    detail: &T,
    actor: Actor,
    status: Option<&'static str>,
    kind: Option<&'static str>,
) -> Result<Value, serde_json::Error> {
    serde_json::to_value(Reported {
        detail,
        actor,
        status,
        kind,
    })
}

/// An audit entry's detail as its event carries it.
#[derive(Serialize)]
struct Reported<'a, T> {
    #[serde(flatten)]
    detail: &'a T,
    actor: Actor,
    #[serde(skip_serializing_if = "Option::is_none")]
    status: Option<&'static str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    kind: Option<&'static str>,
}

/// `transfer.replaced`: a `Replaced` detail with the hash it replaced named for the event.
#[derive(Serialize)]
struct ReplacedEvent<'a> {
    transfer_id: Uuid,
    chain: &'a str,
    nonce: u64,
    replaced_hash: &'a str,
    tx_hash: Option<&'a str>,
    actor: Actor,
}

/// The event a stored stream event reports (`tx_confirmation`, `approval_required`, `approval_resolved`), given
/// the transfer's `kind` where the stream event does not carry it.
pub fn from_stream(agent_id: Uuid, kind: &str, payload: &Value, at: DateTime<Utc>) -> Option<WebhookEvent> {
    let ty = match kind {
        "tx_confirmation" => match payload.get("status").and_then(Value::as_str)? {
            "confirmed" => "transfer.confirmed",
            "reverted" => "transfer.reverted",
            "dropped" => "transfer.dropped",
            "cancelled" => "transfer.cancelled",
            "expired" => "transfer.expired",
            _ => return None,
        },
        "approval_required" => "approval.required",
        "approval_resolved" => "approval.resolved",
        // A payment to the agent settled (§23): stored under its webhook name.
        "payment.received" => "payment.received",
        _ => return None,
    };
    Some(WebhookEvent::new(ty, agent_id, payload.clone(), at))
}

/// A new secret: `whsec_` + base64 of 32 random bytes; the bytes are what signs.
pub fn new_secret() -> Zeroizing<[u8; 32]> {
    use rand_core::RngCore;
    let mut bytes = Zeroizing::new([0u8; 32]);
    rand_core::OsRng.fill_bytes(bytes.as_mut());
    bytes
}

/// The secret's text form, shown once.
pub fn secret_text(bytes: &[u8]) -> Zeroizing<String> {
    Zeroizing::new(format!("{SECRET_PREFIX}{}", BASE64.encode(bytes)))
}

/// `webhook-signature`: `v1,` + base64 of HMAC-SHA256(secret bytes, "<id>.<timestamp>.<body>").
pub fn signature(secret: &[u8], id: &str, timestamp: i64, body: &str) -> String {
    let mut mac = Hmac::<Sha256>::new_from_slice(secret).expect("HMAC takes a key of any length");
    mac.update(format!("{id}.{timestamp}.").as_bytes());
    mac.update(body.as_bytes());
    format!("v1,{}", BASE64.encode(mac.finalize().into_bytes()))
}

/// The retry schedule (`WEBHOOK_RETRY_SCHEDULE`): the wait before each retry, in order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RetrySchedule(pub Vec<Duration>);

impl Default for RetrySchedule {
    fn default() -> Self {
        RetrySchedule(
            [5, 30, 120, 600, 3600, 10800, 21600, 43200]
                .into_iter()
                .map(Duration::from_secs)
                .collect(),
        )
    }
}

impl RetrySchedule {
    /// Parses a comma-separated list of seconds (at least one, each above 0).
    pub fn parse(text: &str) -> Result<Self, String> {
        let mut waits = Vec::new();
        for part in text.split(',') {
            let secs: u64 = part
                .trim()
                .parse()
                .map_err(|_| format!("`{}` is not a number of seconds", part.trim()))?;
            if secs == 0 {
                return Err("each wait must be at least 1 second".into());
            }
            waits.push(Duration::from_secs(secs));
        }
        if waits.is_empty() {
            return Err("must hold at least one wait".into());
        }
        Ok(RetrySchedule(waits))
    }

    /// The wait after the `failed`-th failed attempt of a round (1 = the first try), with ±10% jitter from
    /// `unit` (in [0, 1)); `None` once the schedule is spent (the delivery is failed).
    pub fn after(&self, failed: usize, unit: f64) -> Option<Duration> {
        let base = self.0.get(failed.checked_sub(1)?)?;
        let factor = 0.9 + 0.2 * unit.clamp(0.0, 1.0);
        Some(base.mul_f64(factor))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn events_are_checked() {
        assert_eq!(check_events(&["*".into()]).unwrap(), vec!["*"]);
        assert!(check_events(&[]).is_err());
        assert!(check_events(&["transfer.nope".into()]).is_err());
        assert!(check_events(&["*".into(), "transfer.pending".into()]).is_err());
        let twice = check_events(&["transfer.pending".into(), "transfer.pending".into()]).unwrap();
        assert_eq!(twice, vec!["transfer.pending"]);
        assert!(subscribed(&["*".into()], "policy.updated"));
        assert!(!subscribed(&["transfer.pending".into()], "policy.updated"));
    }

    #[test]
    fn the_signature_is_the_standard_webhooks_one() {
        // The example of the Standard Webhooks specification.
        let secret = BASE64.decode("MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw").unwrap();
        let body = r#"{"test": 2432232314}"#;
        assert_eq!(
            signature(&secret, "msg_p5jXN8AQM9LWM0D4loKWxJek", 1614265330, body),
            "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE="
        );
    }

    #[test]
    fn retries_follow_the_schedule_with_jitter_and_end() {
        let s = RetrySchedule::parse("5, 30").unwrap();
        assert_eq!(s.after(1, 0.5), Some(Duration::from_secs(5)));
        assert_eq!(s.after(2, 0.0), Some(Duration::from_secs(27)));
        assert_eq!(s.after(2, 1.0), Some(Duration::from_secs(33)));
        assert_eq!(s.after(3, 0.5), None);
        assert!(RetrySchedule::parse("5,0").is_err());
        assert!(RetrySchedule::parse("").is_err());
        assert_eq!(RetrySchedule::default().0.len(), 8);
    }

    #[test]
    fn audit_entries_become_events() {
        use crate::domain::audit::detail::{Asked, AssetAsked, Refused, Replaced, TransferRefused};
        let agent = Uuid::new_v4();
        let refused = |code: &str, rule: Option<&str>| {
            Detail::TransferRefused(TransferRefused {
                asked: Asked::Asset(AssetAsked {
                    chain: "base".into(),
                    asset: "ETH".into(),
                    to: "0x0000000000000000000000000000000000000001".into(),
                    amount: Some("1".into()),
                    delegation_id: None,
                }),
                refused: Refused {
                    code: code.into(),
                    rule: rule.map(Into::into),
                    limit: None,
                    denial: None,
                },
            })
        };
        let e = from_audit(
            agent,
            Actor::Agent,
            &refused("policy_denied", Some("per_transfer")),
            crate::domain::now(),
        )
        .unwrap()
        .unwrap();
        assert_eq!(e.ty, "policy.denied");
        assert_eq!(e.data["agent_id"], json!(agent));
        assert_eq!(e.data["actor"], "agent");
        assert_eq!(e.data["rule"], "per_transfer");
        assert_eq!(e.data["chain"], "base");
        let capped = refused("spending_cap_exceeded", None);
        assert!(
            from_audit(agent, Actor::Agent, &capped, crate::domain::now())
                .unwrap()
                .is_none()
        );
        let bumped = Detail::TransferFeeBumped(Replaced {
            transfer_id: Uuid::nil(),
            chain: "base".into(),
            nonce: 3,
            replaced: "0xa".into(),
            tx_hash: Some("0xb".into()),
        });
        let bumped = from_audit(agent, Actor::System, &bumped, crate::domain::now())
            .unwrap()
            .unwrap();
        assert_eq!(bumped.ty, "transfer.replaced");
        assert_eq!(
            bumped.data,
            json!({"agent_id": agent, "transfer_id": Uuid::nil(), "chain": "base", "nonce": 3,
                "replaced_hash": "0xa", "tx_hash": "0xb", "actor": "system"})
        );
        let body: Value = serde_json::from_str(&e.body()).unwrap();
        assert_eq!(body["type"], "policy.denied");
        assert!(body["timestamp"].as_str().unwrap().ends_with('Z'));
    }

    #[test]
    fn expiries_carry_the_entry_with_their_status_and_an_authorizations_kind() {
        use crate::domain::audit::detail::{Decided, X402PaymentExpired};
        let agent = Uuid::new_v4();
        let held = Detail::TransferExpired(Decided {
            transfer_id: Uuid::nil(),
            chain: "base".into(),
            asset: "ETH".into(),
            to: "0xb".into(),
            amount: "1".into(),
            tx_hash: None,
            kind: "transfer".into(),
            url: None,
            reason: None,
        });
        let e = from_audit(agent, Actor::System, &held, crate::domain::now())
            .unwrap()
            .unwrap();
        assert_eq!(e.ty, "transfer.expired");
        assert_eq!(
            e.data,
            json!({"agent_id": agent, "transfer_id": Uuid::nil(), "chain": "base", "asset": "ETH", "to": "0xb",
                "amount": "1", "tx_hash": null, "kind": "transfer", "url": null, "status": "expired",
                "actor": "system"})
        );
        let unused = Detail::X402PaymentExpired(X402PaymentExpired {
            transfer_id: Uuid::nil(),
            chain: "base".into(),
            asset: "USDC".into(),
            pay_to: "0xb".into(),
            amount: "0.01".into(),
            host: Some("api.example.com".into()),
            path: None,
        });
        let e = from_audit(agent, Actor::System, &unused, crate::domain::now())
            .unwrap()
            .unwrap();
        assert_eq!(e.ty, "transfer.expired");
        assert_eq!(
            e.data,
            json!({"agent_id": agent, "transfer_id": Uuid::nil(), "chain": "base", "asset": "USDC", "pay_to": "0xb",
                "amount": "0.01", "host": "api.example.com", "path": null, "status": "expired", "kind": "x402",
                "actor": "system"})
        );
    }
}
