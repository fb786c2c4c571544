//! The audit log's hash chain: the canonical form of an entry, its hash, and the check of a whole log.
//!
//! Every entry's `hash` is the HMAC-SHA256, under the audit key, of its canonical JSON (keys sorted, no spaces),
//! which holds its id, time, agent, actor, action, detail and the previous entry's hash (`prev`), so altering,
//! removing or reordering a row breaks the chain from there on, and whoever can only write the database cannot chain
//! a rewritten history again. The key is random, kept encrypted under `ENCRYPTION_KEY`, and applies from the entry
//! `keyed_from` on; entries before it (logs written before the key existed) carry a plain SHA-256, and are bound
//! into the keyed chain by the first keyed entry's `prev`. The store also keeps the head (the newest entry's id and hash): removing the
//! newest entries, which would leave a shorter chain that is valid in itself, is detected against it.

use std::fmt;

use chrono::{DateTime, SecondsFormat, Utc};
use hmac::{Hmac, Mac};
use serde_json::Value;
use sha2::{Digest, Sha256};
use uuid::Uuid;
use zeroize::Zeroizing;

pub mod detail;
#[cfg(test)]
mod snapshots;

pub use detail::Detail;

/// The key the chain is keyed with, and the first entry id it applies to.
#[derive(Clone)]
pub struct AuditKey {
    key: Zeroizing<[u8; 32]>,
    pub keyed_from: i64,
}

impl AuditKey {
    pub fn new(key: [u8; 32], keyed_from: i64) -> Self {
        AuditKey {
            key: Zeroizing::new(key),
            keyed_from,
        }
    }
}

impl fmt::Debug for AuditKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "AuditKey(keyed from entry {}, ..)", self.keyed_from)
    }
}

/// What an audit entry records (its `action`, docs/api.md §10, §15): the one list of the audit's actions, each named
/// as the log and the webhooks derived from it spell it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Action {
    AgentCreated,
    AgentUpdated,
    AgentDeleted,
    AgentReactivated,
    TokenReissued,
    OwnerSessionOpened,
    OwnerSessionClosed,
    KeyExported,
    PolicyUpdated,
    TransferAccepted,
    TransferRefused,
    TypedDataSigned,
    TransferApproved,
    TransferRejected,
    TransferExpired,
    TransferCancelRequested,
    TransferFeeBumped,
    NonceFilled,
    FundsSwept,
    SweepRefused,
    X402PaymentAccepted,
    X402PaymentOutcome,
    X402PaymentExpired,
    McpToolCall,
    WebhookCreated,
    WebhookUpdated,
    WebhookDeleted,
    WebhookSecretRotated,
    WebhookDisabled,
    X402FetchFree,
    X402PaymentRefused,
    DelegationAdded,
    DelegationRemoved,
    DelegationRevoked,
    SponsorshipSet,
    X402PaymentReceived,
    OfferCreated,
    OfferClosed,
    FacilitatorTokenCreated,
    FacilitatorTokenDeleted,
}

impl Action {
    pub const ALL: [Action; 40] = [
        Action::AgentCreated,
        Action::AgentUpdated,
        Action::AgentDeleted,
        Action::AgentReactivated,
        Action::TokenReissued,
        Action::OwnerSessionOpened,
        Action::OwnerSessionClosed,
        Action::KeyExported,
        Action::PolicyUpdated,
        Action::TransferAccepted,
        Action::TransferRefused,
        Action::TypedDataSigned,
        Action::TransferApproved,
        Action::TransferRejected,
        Action::TransferExpired,
        Action::TransferCancelRequested,
        Action::TransferFeeBumped,
        Action::NonceFilled,
        Action::FundsSwept,
        Action::SweepRefused,
        Action::X402PaymentAccepted,
        Action::X402PaymentOutcome,
        Action::X402PaymentExpired,
        Action::McpToolCall,
        Action::WebhookCreated,
        Action::WebhookUpdated,
        Action::WebhookDeleted,
        Action::WebhookSecretRotated,
        Action::WebhookDisabled,
        Action::X402FetchFree,
        Action::X402PaymentRefused,
        Action::DelegationAdded,
        Action::DelegationRemoved,
        Action::DelegationRevoked,
        Action::SponsorshipSet,
        Action::X402PaymentReceived,
        Action::OfferCreated,
        Action::OfferClosed,
        Action::FacilitatorTokenCreated,
        Action::FacilitatorTokenDeleted,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            Action::DelegationAdded => "delegation_added",
            Action::DelegationRemoved => "delegation_removed",
            Action::DelegationRevoked => "delegation_revoked",
            Action::SponsorshipSet => "sponsorship_set",
            Action::X402PaymentReceived => "x402_payment_received",
            Action::OfferCreated => "offer_created",
            Action::OfferClosed => "offer_closed",
            Action::FacilitatorTokenCreated => "facilitator_token_created",
            Action::FacilitatorTokenDeleted => "facilitator_token_deleted",
            Action::AgentCreated => "agent_created",
            Action::AgentUpdated => "agent_updated",
            Action::AgentDeleted => "agent_deleted",
            Action::AgentReactivated => "agent_reactivated",
            Action::TokenReissued => "token_reissued",
            Action::OwnerSessionOpened => "owner_session_opened",
            Action::OwnerSessionClosed => "owner_session_closed",
            Action::KeyExported => "key_exported",
            Action::PolicyUpdated => "policy_updated",
            Action::TransferAccepted => "transfer_accepted",
            Action::TransferRefused => "transfer_refused",
            Action::TypedDataSigned => "typed_data_signed",
            Action::TransferApproved => "transfer_approved",
            Action::TransferRejected => "transfer_rejected",
            Action::TransferExpired => "transfer_expired",
            Action::TransferCancelRequested => "transfer_cancel_requested",
            Action::TransferFeeBumped => "transfer_fee_bumped",
            Action::NonceFilled => "nonce_filled",
            Action::FundsSwept => "funds_swept",
            Action::SweepRefused => "sweep_refused",
            Action::X402PaymentAccepted => "x402_payment_accepted",
            Action::X402PaymentOutcome => "x402_payment_outcome",
            Action::X402PaymentExpired => "x402_payment_expired",
            Action::McpToolCall => "mcp_tool_call",
            Action::WebhookCreated => "webhook_created",
            Action::WebhookUpdated => "webhook_updated",
            Action::WebhookDeleted => "webhook_deleted",
            Action::WebhookSecretRotated => "webhook_secret_rotated",
            Action::WebhookDisabled => "webhook_disabled",
            Action::X402FetchFree => "x402_fetch_free",
            Action::X402PaymentRefused => "x402_payment_refused",
        }
    }
}

impl fmt::Display for Action {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Who did something, as the audit log records it (docs/api.md §10).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Actor {
    Agent,
    Owner,
    Admin,
    Mcp,
    System,
}

impl serde::Serialize for Actor {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(self.as_str())
    }
}

impl<'de> serde::Deserialize<'de> for Actor {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let text = String::deserialize(deserializer)?;
        [Actor::Agent, Actor::Owner, Actor::Admin, Actor::Mcp, Actor::System]
            .into_iter()
            .find(|a| a.as_str() == text)
            .ok_or_else(|| serde::de::Error::custom(format!("unknown actor {text:?}")))
    }
}

/// The accepted entry of an outflow (`transfer_accepted` of a transfer or a call, `funds_swept`,
/// `x402_payment_accepted`, `typed_data_signed`), kept
/// with its reservation in the same transaction (`TransferRequest::owed`): the outflow's own entry, written after
/// the node answered, takes its place; a process that died before writing it leaves it for
/// `AuditStore::write_owed`, which writes it with the transfer's id and hash as stored, `pending`. Every outflow the
/// service stored for the chain has its entry, crash or not.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
#[serde(tag = "entry", rename_all = "snake_case")]
pub enum OwedEntry {
    Transfer {
        actor: Actor,
        asked: detail::AssetAsked,
    },
    Call {
        actor: Actor,
        asked: detail::CallAsked,
    },
    /// A sweep's amount is known once quoted (`with_amount`).
    Sweep {
        actor: Actor,
        asked: detail::AssetAsked,
    },
    /// An x402 payment's `x402_payment_accepted` (`pending`): its authorization may be settled by the resource while
    /// the paid request is out, so its entry is kept before the request is made.
    X402Payment {
        actor: Actor,
        fetch: detail::X402Fetch,
    },
    /// A typed-data signature's `typed_data_signed`: the signature is readable once stored.
    TypedData {
        actor: Actor,
        asked: detail::TypedAsked,
    },
}

impl OwedEntry {
    pub fn actor(&self) -> Actor {
        match self {
            OwedEntry::Transfer { actor, .. }
            | OwedEntry::Call { actor, .. }
            | OwedEntry::Sweep { actor, .. }
            | OwedEntry::X402Payment { actor, .. }
            | OwedEntry::TypedData { actor, .. } => *actor,
        }
    }

    /// A sweep's entry with the amount it was quoted (`amount` in whole units); any other as it is.
    pub fn with_amount(self, amount: impl FnOnce() -> String) -> Self {
        match self {
            OwedEntry::Sweep { actor, mut asked } => {
                asked.amount = Some(amount());
                OwedEntry::Sweep { actor, asked }
            }
            other @ (OwedEntry::Transfer { .. }
            | OwedEntry::Call { .. }
            | OwedEntry::X402Payment { .. }
            | OwedEntry::TypedData { .. }) => other,
        }
    }

    /// The entry as written for stored transfer `transfer_id` with hash `tx_hash` (an x402 payment's and a
    /// signature's name no hash: nothing of theirs is broadcast by agentd).
    pub fn detail(&self, transfer_id: Uuid, tx_hash: Option<String>) -> Detail {
        let accepted = detail::Accepted {
            transfer_id,
            status: "pending".into(),
            tx_hash: Some(tx_hash),
        };
        match self {
            OwedEntry::Transfer { asked, .. } => Detail::TransferAccepted(detail::TransferAccepted {
                asked: detail::Asked::Asset(asked.clone()),
                accepted,
            }),
            OwedEntry::Call { asked, .. } => Detail::TransferAccepted(detail::TransferAccepted {
                asked: detail::Asked::Call(asked.clone()),
                accepted,
            }),
            OwedEntry::Sweep { asked, .. } => Detail::FundsSwept(detail::FundsSwept {
                asked: asked.clone(),
                accepted,
            }),
            OwedEntry::X402Payment { fetch, .. } => Detail::X402PaymentAccepted(detail::X402PaymentAccepted {
                fetch: detail::X402Fetch {
                    transfer_id: Some(transfer_id),
                    ..fetch.clone()
                },
                status: "pending".into(),
            }),
            OwedEntry::TypedData { asked, .. } => Detail::TypedDataSigned(detail::TypedDataSigned {
                asked: asked.clone(),
                transfer_id,
            }),
        }
    }
}

impl Actor {
    pub fn as_str(self) -> &'static str {
        match self {
            Actor::Agent => "agent",
            Actor::Owner => "owner",
            Actor::Admin => "admin",
            Actor::Mcp => "mcp",
            Actor::System => "system",
        }
    }
}

/// The `prev` of the first entry.
pub const GENESIS: &str = "0000000000000000000000000000000000000000000000000000000000000000";

/// One stored entry of the log, as hashed.
#[derive(Debug, Clone, PartialEq)]
pub struct AuditEntry {
    pub id: i64,
    pub at: DateTime<Utc>,
    pub agent_id: Uuid,
    pub actor: String,
    pub action: String,
    /// The detail as stored: canonical JSON text.
    pub detail: String,
    /// The previous entry's hash (`GENESIS` for the first).
    pub prev_hash: String,
    pub hash: String,
}

/// JSON text with object keys sorted and no insignificant whitespace, whatever order the value was built in.
pub fn canonical_json(value: &Value) -> String {
    let mut out = String::new();
    write_canonical(value, &mut out);
    out
}

fn write_canonical(value: &Value, out: &mut String) {
    match value {
        Value::Object(map) => {
            let mut keys: Vec<&String> = map.keys().collect();
            keys.sort();
            out.push('{');
            for (i, key) in keys.into_iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                out.push_str(&Value::String(key.clone()).to_string());
                out.push(':');
                write_canonical(&map[key], out);
            }
            out.push('}');
        }
        Value::Array(items) => {
            out.push('[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                write_canonical(item, out);
            }
            out.push(']');
        }
        scalar => out.push_str(&scalar.to_string()),
    }
}

/// The time as hashed: RFC 3339, UTC, microseconds (the precision both databases keep).
pub fn timestamp(at: DateTime<Utc>) -> String {
    at.to_rfc3339_opts(SecondsFormat::Micros, true)
}

impl AuditEntry {
    /// The hash this entry's stored fields (all but `hash`) give under `key`; `detail` is its canonical JSON text.
    pub fn computed_hash(&self, key: Option<&AuditKey>) -> String {
        // `detail` is embedded as stored: a row whose text was edited, even into equivalent JSON, no longer matches.
        let text = format!(
            "{{\"action\":{},\"actor\":{},\"agent_id\":{},\"at\":{},\"detail\":{},\"id\":{},\"prev\":{}}}",
            Value::from(self.action.as_str()),
            Value::from(self.actor.as_str()),
            Value::from(self.agent_id.to_string()),
            Value::from(timestamp(self.at)),
            self.detail,
            self.id,
            Value::from(self.prev_hash.as_str()),
        );
        match key.filter(|k| self.id >= k.keyed_from) {
            Some(k) => {
                let mut mac =
                    <Hmac<Sha256> as Mac>::new_from_slice(k.key.as_slice()).expect("HMAC takes any key length");
                mac.update(text.as_bytes());
                alloy::hex::encode(mac.finalize().into_bytes())
            }
            None => alloy::hex::encode(Sha256::digest(text.as_bytes())),
        }
    }
}

/// Where the log stops being trustworthy.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AuditBreak {
    /// The entry's stored fields do not give its stored hash.
    Altered { id: i64 },
    /// The entry does not follow the one stored before it: something between them was removed (or that one
    /// was rewritten along with its hash).
    Gap { id: i64, after: i64 },
    /// The newest entries are missing: the head names an entry the log does not end with.
    MissingTail { head_id: i64 },
}

impl fmt::Display for AuditBreak {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            AuditBreak::Altered { id } => write!(f, "entry {id} was altered: its hash does not match its contents"),
            AuditBreak::Gap { id, after: 0 } => {
                write!(
                    f,
                    "entry {id} does not follow the start of the log: an entry before it was removed"
                )
            }
            AuditBreak::Gap { id, after } => write!(
                f,
                "entry {id} does not follow entry {after}: an entry between them was removed or entry {after} was rewritten"
            ),
            AuditBreak::MissingTail { head_id } => write!(
                f,
                "entry {head_id} is missing: the log's head names it as the newest entry (removed at the tail)"
            ),
        }
    }
}

/// Checks a log fed entry by entry, in id order, against the head at the end.
#[derive(Debug)]
pub struct ChainCheck {
    key: Option<AuditKey>,
    last_id: i64,
    last_hash: String,
    checked: u64,
}

impl Default for ChainCheck {
    fn default() -> Self {
        ChainCheck::keyed(None)
    }
}

impl ChainCheck {
    /// A check of a log keyed with `key` (`None`: a log that never had one).
    pub fn keyed(key: Option<AuditKey>) -> Self {
        ChainCheck {
            key,
            last_id: 0,
            last_hash: GENESIS.to_string(),
            checked: 0,
        }
    }

    /// The next entry of the log.
    pub fn push(&mut self, entry: &AuditEntry) -> Result<(), AuditBreak> {
        if entry.computed_hash(self.key.as_ref()) != entry.hash {
            return Err(AuditBreak::Altered { id: entry.id });
        }
        if entry.prev_hash != self.last_hash {
            return Err(AuditBreak::Gap {
                id: entry.id,
                after: self.last_id,
            });
        }
        self.last_id = entry.id;
        self.last_hash = entry.hash.clone();
        self.checked += 1;
        Ok(())
    }

    /// After the last entry: the head must name it. Returns how many entries were checked.
    pub fn finish(self, head_id: i64, head_hash: &str) -> Result<u64, AuditBreak> {
        if head_id != self.last_id || head_hash != self.last_hash {
            return Err(AuditBreak::MissingTail { head_id });
        }
        Ok(self.checked)
    }
}

#[cfg(test)]
mod tests {

    /// A kept entry reads back from its JSON as it was kept, and is written as the entry of its kind: a transfer's
    /// and a call's as `transfer_accepted`, a sweep's as `funds_swept` with the amount it was quoted.
    #[test]
    fn a_kept_entry_reads_back_and_is_written_as_its_kinds_entry() {
        let asset = detail::AssetAsked {
            chain: "base".into(),
            asset: "ETH".into(),
            to: "0x0000000000000000000000000000000000000001".into(),
            amount: None,
            delegation_id: None,
        };
        let call = detail::CallAsked {
            chain: "base".into(),
            to: "0x0000000000000000000000000000000000000002".into(),
            kind: detail::CallKind::Call,
            amount: "0".into(),
            previewed: Some(detail::CallPreview {
                selector: Some("0xa9059cbb".into()),
                function: Some("transfer(address,uint256)".into()),
                simulation: serde_json::json!({"changes": []}),
            }),
        };
        let kept = [
            OwedEntry::Transfer {
                actor: Actor::Agent,
                asked: detail::AssetAsked {
                    amount: Some("0.5".into()),
                    ..asset.clone()
                },
            },
            OwedEntry::Call {
                actor: Actor::Mcp,
                asked: call,
            },
            OwedEntry::Sweep {
                actor: Actor::Owner,
                asked: asset,
            }
            .with_amount(|| "1.25".into()),
        ];
        let id = Uuid::new_v4();
        let mut written = Vec::new();
        for entry in kept {
            let json = serde_json::to_string(&entry).unwrap();
            let back: OwedEntry = serde_json::from_str(&json).unwrap();
            assert_eq!(back, entry, "{json}");
            let detail = back.detail(id, Some("0xabc".into()));
            let json = detail.to_json().unwrap();
            assert_eq!(json["transfer_id"], id.to_string());
            assert_eq!(
                (json["status"].as_str(), json["tx_hash"].as_str()),
                (Some("pending"), Some("0xabc"))
            );
            written.push((back.actor(), detail.action().as_str(), json["amount"].clone()));
        }
        assert_eq!(
            written,
            [
                (Actor::Agent, "transfer_accepted", serde_json::json!("0.5")),
                (Actor::Mcp, "transfer_accepted", serde_json::json!("0")),
                (Actor::Owner, "funds_swept", serde_json::json!("1.25")),
            ]
        );
    }

    #[test]
    fn a_kept_payment_or_signature_entry_reads_back_as_its_own_action() {
        let id = Uuid::new_v4();
        let payment = OwedEntry::X402Payment {
            actor: Actor::Agent,
            fetch: detail::X402Fetch {
                host: Some("paid.example".into()),
                path: "/report".into(),
                max_amount: Some("0.05".into()),
                chosen: Some(detail::X402Choice {
                    chain: "base".into(),
                    asset: "USDC".into(),
                    amount: "0.01".into(),
                    pay_to: "0x0000000000000000000000000000000000000042".into(),
                }),
                transfer_id: Some(id),
            },
        };
        let typed = OwedEntry::TypedData {
            actor: Actor::Mcp,
            asked: detail::TypedAsked {
                chain: "base".into(),
                kind: detail::TypedKind::TypedData,
                to: "0x0000000000000000000000000000000000000002".into(),
                domain: serde_json::json!({"name": "Mail"}),
                primary_type: "Mail".into(),
                digest: alloy::primitives::B256::repeat_byte(7),
                simulation: serde_json::json!(null),
            },
        };
        let mut written = Vec::new();
        for entry in [payment, typed] {
            let json = serde_json::to_string(&entry).unwrap();
            let back: OwedEntry = serde_json::from_str(&json).unwrap();
            assert_eq!(back, entry, "{json}");
            let detail = back.detail(id, None);
            let json = detail.to_json().unwrap();
            assert_eq!(json["transfer_id"], id.to_string(), "{json}");
            written.push((back.actor(), detail.action().as_str(), json["status"].clone()));
        }
        assert_eq!(
            written,
            [
                (Actor::Agent, "x402_payment_accepted", serde_json::json!("pending")),
                (Actor::Mcp, "typed_data_signed", serde_json::Value::Null),
            ]
        );
    }

    #[test]
    fn every_action_has_its_own_name_and_the_reference_names_each() {
        let names: Vec<&str> = Action::ALL.iter().map(|a| a.as_str()).collect();
        let unique: std::collections::BTreeSet<&str> = names.iter().copied().collect();
        assert_eq!(unique.len(), names.len(), "{names:?}");
        let reference = include_str!("../../docs/api.md");
        let missing: Vec<&&str> = names
            .iter()
            .filter(|n| !reference.contains(&format!("`{n}`")))
            .collect();
        assert!(missing.is_empty(), "actions docs/api.md does not name: {missing:?}");
    }
    use super::*;
    use serde_json::json;

    fn chain(n: i64) -> Vec<AuditEntry> {
        keyed_chain(n, None)
    }

    fn keyed_chain(n: i64, key: Option<&AuditKey>) -> Vec<AuditEntry> {
        let agent_id = Uuid::new_v4();
        let mut prev = GENESIS.to_string();
        (1..=n)
            .map(|id| {
                let mut entry = AuditEntry {
                    id,
                    at: crate::domain::now(),
                    agent_id,
                    actor: "admin".into(),
                    action: "agent_updated".into(),
                    detail: canonical_json(&json!({"fields": ["name"], "n": id})),
                    prev_hash: prev.clone(),
                    hash: String::new(),
                };
                entry.hash = entry.computed_hash(key);
                prev = entry.hash.clone();
                entry
            })
            .collect()
    }

    fn check(entries: &[AuditEntry], head: (i64, &str)) -> Result<u64, AuditBreak> {
        let mut check = ChainCheck::default();
        for entry in entries {
            check.push(entry)?;
        }
        check.finish(head.0, head.1)
    }

    #[test]
    fn canonical_json_sorts_keys_at_every_level() {
        let value = json!({"b": 1, "a": {"d": [true, null], "c": "x"}});
        assert_eq!(canonical_json(&value), r#"{"a":{"c":"x","d":[true,null]},"b":1}"#);
    }

    #[test]
    fn an_intact_chain_passes() {
        let entries = chain(3);
        assert_eq!(check(&entries, (3, &entries[2].hash)), Ok(3));
        assert_eq!(check(&[], (0, GENESIS)), Ok(0));
    }

    #[test]
    fn an_altered_entry_is_named() {
        let mut entries = chain(3);
        entries[1].actor = "agent".into();
        assert_eq!(
            check(&entries, (3, &entries[2].hash.clone())),
            Err(AuditBreak::Altered { id: 2 })
        );
    }

    #[test]
    fn a_removed_middle_entry_is_named_by_its_successor() {
        let mut entries = chain(3);
        let head = entries[2].hash.clone();
        entries.remove(1);
        assert_eq!(check(&entries, (3, &head)), Err(AuditBreak::Gap { id: 3, after: 1 }));
    }

    #[test]
    fn a_removed_newest_entry_is_found_through_the_head() {
        let mut entries = chain(3);
        let head = entries[2].hash.clone();
        entries.pop();
        assert_eq!(check(&entries, (3, &head)), Err(AuditBreak::MissingTail { head_id: 3 }));
    }

    #[test]
    fn a_keyed_chain_rewritten_and_chained_again_without_the_key_is_found() {
        let key = AuditKey::new([7; 32], 3);
        let entries = keyed_chain(4, Some(&key));
        assert_eq!(
            entries[0].hash,
            entries[0].computed_hash(None),
            "before keyed_from: plain SHA-256"
        );
        assert_ne!(
            entries[2].hash,
            entries[2].computed_hash(None),
            "from keyed_from on: keyed"
        );
        let verify = |entries: &[AuditEntry], key: Option<AuditKey>| {
            let mut check = ChainCheck::keyed(key);
            for entry in entries {
                check.push(entry)?;
            }
            check.finish(4, &entries[3].hash)
        };
        assert_eq!(verify(&entries, Some(key.clone())), Ok(4));

        // Whoever writes the database rewrites entry 3 and recomputes every hash from there the only way it can.
        let mut forged = entries.clone();
        forged[2].actor = "agent".into();
        for i in 2..4 {
            forged[i].prev_hash = forged[i - 1].hash.clone();
            forged[i].hash = forged[i].computed_hash(None);
        }
        assert_eq!(verify(&forged, Some(key.clone())), Err(AuditBreak::Altered { id: 3 }));
        // An unkeyed entry before keyed_from cannot be rewritten either: the first keyed entry binds it.
        let mut early = entries.clone();
        early[1].action = "agent_deleted".into();
        early[1].hash = early[1].computed_hash(None);
        assert_eq!(
            verify(&early, Some(key.clone())),
            Err(AuditBreak::Gap { id: 3, after: 2 })
        );
        // Another key does not verify it.
        assert!(verify(&entries, Some(AuditKey::new([8; 32], 3))).is_err());
    }
}
