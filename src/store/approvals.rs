//! What both backends share for policies and approvals: the approval row and its conversion, the column list,
//! the events a waiting transfer produces, and how a request becomes a waiting transfer.

use alloy::primitives::U256;
use chrono::{DateTime, Utc};
use serde_json::{Value, json};
use uuid::Uuid;

use super::shared::{address_from_text, wei_from_text};
use super::{AuditEvent, StoreError, StoreResult, TransferRequest};
use crate::domain::amount::format_units;
use crate::domain::audit::Actor;
use crate::domain::audit::{Detail, detail::Decided};
use crate::domain::chain;
use crate::domain::decision::Counted;
use crate::domain::policy::{ApprovalStatus, Holds};
use crate::domain::transaction::{Body, Kind};

pub const APPROVAL_COLUMNS: &str = "id, agent_id, chain, asset, conversation_id, from_address, to_address, value_wei, \
     gas_limit, max_fee_per_gas, reserved_wei, status, expires_at, created_at, updated_at, token_address, asset_decimals, kind, x402, call_record, held_by, delegation, held_above, held_above_asset, held_above_decimals";

/// A transfer held for an owner's approval: no nonce, no signature.
#[derive(Debug, Clone, PartialEq)]
pub struct Approval {
    pub id: Uuid,
    pub agent_id: Uuid,
    pub chain: String,
    /// The asset symbol (`ETH`).
    pub asset: String,
    /// The token moved, for an ERC-20 transfer (`value_wei` is then in its base units).
    pub token: Option<crate::domain::transaction::TokenRef>,
    pub conversation_id: Option<Uuid>,
    pub from: alloy::primitives::Address,
    pub to: alloy::primitives::Address,
    pub value_wei: U256,
    /// What it holds against the cap while it waits (value plus the fee estimate of its request).
    pub reserved_wei: U256,
    pub status: ApprovalStatus,
    pub expires_at: DateTime<Utc>,
    pub created_at: DateTime<Utc>,
    pub updated_at: DateTime<Utc>,
    /// What waits: a transfer, a call with what its simulation showed (§18), an x402 payment with what to fetch
    /// and pay once approved (§16), or typed data to sign.
    pub body: Body<()>,
    /// The rules that asked for the approval, as the policy names them (`Holds::names`); empty for one held before
    /// they were kept.
    pub held_by: Vec<String>,
    /// The `approval_above` threshold in force when it was held (base units of its asset), for a transfer or an
    /// x402 payment that rule held; `None` otherwise and for one held before it was kept.
    pub held_above: Option<U256>,
    /// For a call or typed data that `approval_above` held: the asset `held_above` is of (a call counts per asset).
    pub held_above_asset: Option<LimitAsset>,
}

/// An asset as a policy's `limits` name it: its key (`base:USDC`, or `base:<token address>` for a token outside the
/// registry) and the decimals its limits are written in (0, base units, outside the registry).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LimitAsset {
    pub key: String,
    pub decimals: u8,
}

/// How an approval claim or close went.
#[derive(Debug)]
pub enum Closing {
    /// It was waiting and is now closed with the requested status; the event was stored.
    Closed(Box<Approval>, super::EventRecord),
    /// It was no longer waiting (or past `expires_at` when approved): its status as found.
    NotWaiting(ApprovalStatus),
    NotFound,
}

impl Approval {
    /// The waiting transfer a request becomes at `now`, expiring `ttl_secs` later, held by the rules `holds` names.
    /// `counts` are what a call or typed data counts (`Holds::above_count` names one of them).
    pub fn from_request(
        r: &TransferRequest,
        ttl_secs: u64,
        (holds, counts): (Holds, &[Counted]),
        now: chrono::DateTime<chrono::Utc>,
    ) -> Approval {
        // A transfer's threshold is of its own asset; a call's, of the asset of the count that was above it.
        let held_above_asset = match (holds.above_count.and_then(|i| counts.get(i)), r.check.call()) {
            (Some(count), Some(check)) => Some(LimitAsset {
                key: count.asset_key.clone(),
                decimals: check.decimals_of(&count.asset_key),
            }),
            _ => None,
        };
        let ttl = chrono::Duration::seconds(i64::try_from(ttl_secs).unwrap_or(i64::MAX / 1000).min(i64::MAX / 1000));
        Approval {
            id: r.id,
            agent_id: r.agent_id,
            chain: r.chain.clone(),
            asset: r.asset.clone(),
            token: r.token,
            conversation_id: r.conversation_id,
            from: r.from,
            to: r.to,
            value_wei: r.value_wei,
            reserved_wei: r.reserved_wei,
            status: ApprovalStatus::AwaitingApproval,
            expires_at: now.checked_add_signed(ttl).unwrap_or(DateTime::<Utc>::MAX_UTC),
            created_at: now,
            updated_at: now,
            body: r.body.clone(),
            held_by: holds.names(),
            held_above: holds
                .above
                .filter(|_| matches!(r.body.kind(), Kind::Transfer | Kind::X402) || held_above_asset.is_some()),
            held_above_asset,
        }
    }

    /// The most the network fee could be at the fees of its request (gas limit × `maxFeePerGas`, plus the L1 fee
    /// estimate on OP-stack chains), in whole units of the chain's native coin: half of what its reservation holds
    /// beyond the native coin it moves (`Cost::of`). `None` for what pays no fee of the agent's (x402, typed data).
    pub fn max_fee(&self) -> Option<String> {
        let native = match (self.body.kind(), self.token) {
            (Kind::Transfer, None) | (Kind::Call, _) => self.value_wei,
            (Kind::Transfer, Some(_)) => U256::ZERO,
            (Kind::X402 | Kind::TypedData, _) => return None,
        };
        let fee = self.reserved_wei.saturating_sub(native) / U256::from(2);
        Some(format_units(fee, self.native_decimals()))
    }

    /// The `approval_above` threshold that held it, in whole units, with the key of its asset (`base:USDC`; for a
    /// token outside the registry, `base:<token address>` in base units).
    pub fn held_limit(&self) -> Option<(String, String)> {
        let above = self.held_above?;
        Some(match &self.held_above_asset {
            Some(asset) => (asset.key.clone(), format_units(above, asset.decimals)),
            None => (crate::domain::asset::key(&self.chain, &self.asset), self.units(above)),
        })
    }

    /// The amount in whole units of its asset.
    pub fn amount(&self) -> String {
        self.units(self.value_wei)
    }

    /// `value` (base units of its asset) in whole units of its asset.
    pub fn units(&self, value: U256) -> String {
        let decimals = self.token.map_or_else(|| self.native_decimals(), |t| t.decimals);
        format_units(value, decimals)
    }

    fn native_decimals(&self) -> u8 {
        chain::find(&self.chain).map_or(18, |c| c.decimals)
    }

    /// `transfer`, `call` or `x402`, as shown.
    pub fn kind(&self) -> &'static str {
        self.body.kind().shown()
    }

    /// Whether it can still be approved at `now`.
    pub fn is_expired_at(&self, now: DateTime<Utc>) -> bool {
        now >= self.expires_at
    }

    /// `event: approval_required`.
    pub fn required_event(&self) -> Value {
        let mut event = json!({
            "type": "approval_required",
            "transfer_id": self.id,
            "conversation_id": self.conversation_id,
            "agent_id": self.agent_id,
            "chain": self.chain,
            "asset": self.asset,
            "to": self.to.to_checksum(None),
            "amount": self.amount(),
            "expires_at": self.expires_at,
        });
        // A held call shows what it would do (§18): the decoded call and its simulated changes.
        if let Some(simulation) = self.body.simulation() {
            event["kind"] = json!(self.kind());
            if let Some(call) = self.body.call() {
                event["call"] = call.shown(self.to);
                if !call.calls.is_empty() {
                    event["calls"] = call.calls.iter().map(|c| c.shown()).collect();
                }
            }
            event["simulation"] = simulation.clone();
        }
        event
    }

    /// The audit entry of the decision taken on it (`transfer_approved` with the hash signed, `transfer_rejected`,
    /// `transfer_expired`), written in the transaction that takes it; `None` while it waits.
    /// The audit entry of a decision; `reason` is the owner's, when a rejection gave one.
    pub fn decided_audit(&self, by: Actor, tx_hash: Option<&str>, reason: Option<&str>) -> Option<AuditEvent> {
        let decided = Decided {
            transfer_id: self.id,
            chain: self.chain.clone(),
            asset: self.asset.clone(),
            to: self.to.to_checksum(None),
            amount: self.amount(),
            tx_hash: tx_hash.map(str::to_owned),
            kind: self.kind().into(),
            url: self.body.x402().map(|x| x.url.clone()),
            reason: reason.map(str::to_owned),
        };
        let detail = match self.status {
            ApprovalStatus::Approved => Detail::TransferApproved(decided),
            ApprovalStatus::Rejected => Detail::TransferRejected(decided),
            ApprovalStatus::Expired => Detail::TransferExpired(decided),
            ApprovalStatus::AwaitingApproval => return None,
        };
        Some(AuditEvent::new(self.agent_id, by, detail))
    }

    /// `event: approval_resolved`.
    pub fn resolved_event(&self) -> Value {
        json!({"type": "approval_resolved", "transfer_id": self.id, "decision": self.status.decision()})
    }
}

#[derive(sqlx::FromRow)]
pub struct ApprovalRow {
    id: Uuid,
    agent_id: Uuid,
    chain: String,
    asset: String,
    conversation_id: Option<Uuid>,
    from_address: String,
    to_address: String,
    value_wei: String,
    gas_limit: i64,
    max_fee_per_gas: String,
    reserved_wei: String,
    status: String,
    expires_at: DateTime<Utc>,
    created_at: DateTime<Utc>,
    updated_at: DateTime<Utc>,
    token_address: Option<String>,
    asset_decimals: Option<i64>,
    kind: String,
    x402: Option<String>,
    call_record: Option<String>,
    held_by: Option<String>,
    delegation: Option<String>,
    held_above: Option<String>,
    held_above_asset: Option<String>,
    held_above_decimals: Option<i64>,
}

impl ApprovalRow {
    pub fn into_approval(self) -> StoreResult<Approval> {
        Ok(Approval {
            id: self.id,
            agent_id: self.agent_id,
            chain: self.chain,
            asset: self.asset,
            token: super::shared::token_from_columns(self.token_address, self.asset_decimals)?,
            conversation_id: self.conversation_id,
            from: address_from_text(&self.from_address)?,
            to: address_from_text(&self.to_address)?,
            value_wei: wei_from_text(&self.value_wei, "approvals.value_wei")?,
            reserved_wei: wei_from_text(&self.reserved_wei, "approvals.reserved_wei")?,
            status: ApprovalStatus::parse(&self.status)
                .ok_or_else(|| StoreError::Corrupt(format!("approvals.status {}", self.status)))?,
            expires_at: self.expires_at,
            created_at: self.created_at,
            updated_at: self.updated_at,
            body: super::shared::body_from_columns(
                super::shared::BodyColumns {
                    kind: self.kind,
                    gas_limit: self.gas_limit,
                    max_fee_per_gas: self.max_fee_per_gas,
                    x402: self.x402,
                    call_record: self.call_record,
                    delegation: self.delegation,
                },
                || Ok(()),
                "approvals",
            )?,
            held_by: match self.held_by {
                Some(text) => {
                    serde_json::from_str(&text).map_err(|_| StoreError::Corrupt("approvals.held_by".into()))?
                }
                None => Vec::new(),
            },
            held_above: self
                .held_above
                .map(|w| wei_from_text(&w, "approvals.held_above"))
                .transpose()?,
            held_above_asset: match (self.held_above_asset, self.held_above_decimals) {
                (Some(key), Some(decimals)) => Some(LimitAsset {
                    key,
                    decimals: u8::try_from(decimals)
                        .map_err(|_| StoreError::Corrupt("approvals.held_above_decimals".into()))?,
                }),
                _ => None,
            },
        })
    }
}
