//! Transfer policies (docs/api.md §11) and their pure evaluation: per-asset limits, recipient lists, and when a
//! transfer waits for an owner's approval. The store gathers the facts (window totals, whether the recipient was
//! paid before) inside the reserving transaction and asks `Policy::evaluate`; nothing here does I/O.

use std::collections::BTreeMap;

use alloy::primitives::{Address, U256};
use serde::{Deserialize, Serialize};

use super::call::typed::{Forbidden, TypedFacts};
use super::call::{CallFacts, CallRuleRef, CallVerdict, CallsPolicy};

/// How long an approval waits when the policy does not say.
pub const DEFAULT_APPROVAL_TTL_SECS: u64 = 900;

/// Limits on one asset, in its base units; `None` is no limit.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct AssetLimits {
    pub per_transfer: Option<U256>,
    pub per_day: Option<U256>,
    pub per_week: Option<U256>,
    /// A transfer of strictly more than this waits for approval.
    pub approval_above: Option<U256>,
}

/// An agent's policy. The default allows everything (the spending cap still applies).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Policy {
    /// Keyed by asset key (`base:ETH`). Once any asset is named, unnamed assets are refused.
    pub limits: BTreeMap<String, AssetLimits>,
    /// `None`: any recipient.
    pub allowed_recipients: Option<Vec<Address>>,
    pub blocked_recipients: Vec<Address>,
    pub approve_new_recipients: bool,
    pub approval_ttl_secs: u64,
    /// x402 hosts (`host` or `host:port`); stored, read by the x402 client.
    pub allowed_hosts: Option<Vec<String>>,
    /// Contract calls and typed-data signatures (§18); absent from policies written before calls existed, and
    /// then as if absent: `deny` on a guarded agent, `allow` on an unguarded one. Boxed: most policies have
    /// none, and the policy travels by value through the reserving transaction.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub calls: Option<Box<CallsPolicy>>,
}

impl Default for Policy {
    fn default() -> Self {
        Policy {
            limits: BTreeMap::new(),
            allowed_recipients: None,
            blocked_recipients: Vec::new(),
            approve_new_recipients: false,
            approval_ttl_secs: DEFAULT_APPROVAL_TTL_SECS,
            allowed_hosts: None,
            calls: None,
        }
    }
}

/// The rule a refused transfer broke (`details.rule`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PolicyRule {
    PerTransfer,
    PerDay,
    PerWeek,
    AssetNotAllowed,
    RecipientNotAllowed,
    RecipientBlocked,
    /// An x402 fetch of a host `allowed_hosts` does not list (§16).
    HostNotAllowed,
    /// A contract call the `calls` rules refuse (§18).
    CallDenied,
    /// A call that grants an unlimited allowance, without `allow_unlimited_approvals` (§18).
    UnlimitedApproval,
    /// Permit2-domain or `Permit…` typed data the service does not decode (§18).
    PermitNotUnderstood,
    /// Typed data that would delegate the wallet's authority (§18; the Delegation Framework).
    DelegationSignature,
    /// A call to Permit2 or a limited token with a selector the service does not decode into counts (§18).
    CallNotUnderstood,
    /// More gas than the agent's sponsorship has left today (§22).
    SponsorshipLimit,
}

impl From<Forbidden> for PolicyRule {
    fn from(forbidden: Forbidden) -> Self {
        match forbidden {
            Forbidden::DelegationSignature => PolicyRule::DelegationSignature,
            Forbidden::PermitNotUnderstood => PolicyRule::PermitNotUnderstood,
        }
    }
}

impl PolicyRule {
    pub fn as_str(self) -> &'static str {
        match self {
            PolicyRule::PerTransfer => "per_transfer",
            PolicyRule::PerDay => "per_day",
            PolicyRule::PerWeek => "per_week",
            PolicyRule::AssetNotAllowed => "asset_not_allowed",
            PolicyRule::RecipientNotAllowed => "recipient_not_allowed",
            PolicyRule::RecipientBlocked => "recipient_blocked",
            PolicyRule::HostNotAllowed => "host_not_allowed",
            PolicyRule::CallDenied => "call_denied",
            PolicyRule::UnlimitedApproval => "unlimited_approval",
            PolicyRule::PermitNotUnderstood => "permit_not_understood",
            PolicyRule::DelegationSignature => "delegation_signature",
            PolicyRule::CallNotUnderstood => "call_not_understood",
            PolicyRule::SponsorshipLimit => "sponsorship_limit",
        }
    }
}

/// A transfer as the policy sees it, with what the store counted in the same transaction.
#[derive(Debug, Clone)]
pub struct Proposed<'a> {
    pub asset_key: &'a str,
    pub to: Address,
    pub value: U256,
    /// Value of this asset's transfers awaiting approval, pending or confirmed in the last 24 h (this one excluded).
    pub day_total: U256,
    /// The same over the last 7 days.
    pub week_total: U256,
    /// Whether a pending or confirmed transfer already went to `to` (any chain).
    pub paid_before: bool,
}

/// What the policy says about a transfer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    Allow,
    /// Allowed once an owner approves it; what asks for the approval.
    NeedsApproval(Holds),
    Deny(PolicyRule),
}

/// The rules that ask for an owner's approval of one request (§11, §18), kept with it while it waits and shown as
/// `held_by`, named as the policy names them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Holds {
    /// An amount above its asset's `approval_above`.
    pub approval_above: bool,
    /// A recipient never paid before, under `approve_new_recipients`.
    pub new_recipient: bool,
    /// The part of `calls` whose action is `approve`.
    pub call: Option<CallRuleRef>,
    /// The `approval_above` threshold the amount was above (base units of its asset), when that rule asked.
    pub above: Option<U256>,
    /// For a call or typed data, which of its counts (`decision::CallSite::counts`, by position) was above it: its
    /// asset is the one `above` is of.
    pub above_count: Option<usize>,
}

impl Holds {
    /// Both sets of rules.
    pub fn and(self, other: Holds) -> Holds {
        Holds {
            approval_above: self.approval_above || other.approval_above,
            new_recipient: self.new_recipient || other.new_recipient,
            call: self.call.or(other.call),
            above: self.above.or(other.above),
            above_count: match self.above {
                Some(_) => self.above_count,
                None => other.above_count,
            },
        }
    }

    /// Whether any rule asks for approval.
    pub fn any(&self) -> bool {
        self.approval_above || self.new_recipient || self.call.is_some()
    }

    /// The policy's names of them: `approval_above`, `approve_new_recipients`, `calls.rules[2]`, `calls.default`.
    pub fn names(&self) -> Vec<String> {
        let mut names = Vec::new();
        if let Some(call) = self.call {
            names.push(match call {
                CallRuleRef::Rule(i) => format!("calls.rules[{i}]"),
                CallRuleRef::Default => "calls.default".to_string(),
            });
        }
        if self.approval_above {
            names.push("approval_above".to_string());
        }
        if self.new_recipient {
            names.push("approve_new_recipients".to_string());
        }
        names
    }
}

impl Policy {
    /// Whether an x402 fetch may reach `host` on `port`: `allowed_hosts` null allows any; an entry `host` allows
    /// any port, `host:port` that port only; names compare case-insensitively (a trailing dot ignored).
    pub fn allows_host(&self, host: &str, port: u16) -> bool {
        let Some(list) = &self.allowed_hosts else { return true };
        let norm = |h: &str| {
            h.trim()
                .trim_end_matches('.')
                .trim_start_matches('[')
                .trim_end_matches(']')
                .to_ascii_lowercase()
        };
        let host = norm(host);
        list.iter().any(|entry| {
            let entry = entry.trim();
            match entry.rsplit_once(':') {
                Some((name, p)) if !name.contains(':') => norm(name) == host && p.parse::<u16>() == Ok(port),
                _ => norm(entry) == host,
            }
        })
    }

    /// Whether any rule needs an owner to approve transfers or calls (refused on unguarded agents: nobody could).
    pub fn has_approval_rules(&self) -> bool {
        self.approve_new_recipients
            || self.limits.values().any(|l| l.approval_above.is_some())
            || self.calls.as_deref().is_some_and(CallsPolicy::has_approval_rules)
    }

    /// The `calls` rules' verdict on a contract call (§18), `CallVerdict::unruled` when the policy has none, with
    /// the part of `calls` that gave it.
    pub fn judge_call(&self, call: &CallFacts<'_>, guarded: bool) -> (CallVerdict, Option<CallRuleRef>) {
        self.calls
            .as_deref()
            .map_or((CallVerdict::unruled(guarded), None), |c| c.judged_by(call, guarded))
    }

    /// The verdict of the typed-data rules (§18): none matching, or no `calls`, refuses.
    pub fn judge_typed(&self, typed: &TypedFacts<'_>) -> (CallVerdict, Option<CallRuleRef>) {
        self.calls
            .as_deref()
            .map_or((CallVerdict::Deny, None), |c| c.typed_judged_by(typed))
    }

    /// Whether calls and signatures may grant unlimited allowances (§18; by default they may not).
    pub fn allows_unlimited_approvals(&self) -> bool {
        self.calls.as_ref().is_some_and(|c| c.allow_unlimited_approvals)
    }

    /// Whether `evaluate` needs the window totals of `asset_key` (so the store can skip counting them).
    pub fn counts_windows(&self, asset_key: &str) -> bool {
        self.limits
            .get(asset_key)
            .is_some_and(|l| l.per_day.is_some() || l.per_week.is_some())
    }

    /// Refusals first (recipients, asset, limits), then whether it waits for approval. Limits are inclusive
    /// (a total equal to the limit passes); `approval_above` is strict.
    pub fn evaluate(&self, t: &Proposed<'_>) -> Verdict {
        if self.blocked_recipients.contains(&t.to) {
            return Verdict::Deny(PolicyRule::RecipientBlocked);
        }
        if self
            .allowed_recipients
            .as_ref()
            .is_some_and(|list| !list.contains(&t.to))
        {
            return Verdict::Deny(PolicyRule::RecipientNotAllowed);
        }
        let limits = match self.limits.get(t.asset_key) {
            Some(limits) => limits,
            None if self.limits.is_empty() => &AssetLimits::default(),
            None => return Verdict::Deny(PolicyRule::AssetNotAllowed),
        };
        let over = |limit: Option<U256>, total: U256| limit.is_some_and(|l| total.saturating_add(t.value) > l);
        if over(limits.per_transfer, U256::ZERO) {
            return Verdict::Deny(PolicyRule::PerTransfer);
        }
        if over(limits.per_day, t.day_total) {
            return Verdict::Deny(PolicyRule::PerDay);
        }
        if over(limits.per_week, t.week_total) {
            return Verdict::Deny(PolicyRule::PerWeek);
        }
        let holds = Holds {
            approval_above: limits.approval_above.is_some_and(|a| t.value > a),
            new_recipient: self.approve_new_recipients && !t.paid_before,
            call: None,
            above: limits.approval_above.filter(|a| t.value > *a),
            above_count: None,
        };
        match holds.any() {
            true => Verdict::NeedsApproval(holds),
            false => Verdict::Allow,
        }
    }
}

/// Where a transfer held for approval stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ApprovalStatus {
    AwaitingApproval,
    /// Moved to the transfers (signed and sent under the same id).
    Approved,
    Rejected,
    Expired,
}

impl ApprovalStatus {
    pub fn as_str(self) -> &'static str {
        match self {
            ApprovalStatus::AwaitingApproval => "awaiting_approval",
            ApprovalStatus::Approved => "approved",
            ApprovalStatus::Rejected => "rejected",
            ApprovalStatus::Expired => "expired",
        }
    }

    pub fn parse(text: &str) -> Option<Self> {
        [Self::AwaitingApproval, Self::Approved, Self::Rejected, Self::Expired]
            .into_iter()
            .find(|s| s.as_str() == text)
    }

    /// The `decision` of the `approval_resolved` event.
    pub fn decision(self) -> &'static str {
        match self {
            ApprovalStatus::AwaitingApproval => "pending",
            ApprovalStatus::Approved => "approved",
            ApprovalStatus::Rejected => "rejected",
            ApprovalStatus::Expired => "expired",
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const KEY: &str = "base:ETH";

    fn addr(byte: u8) -> Address {
        Address::repeat_byte(byte)
    }

    fn wei(n: u64) -> U256 {
        U256::from(n)
    }

    #[test]
    fn allowed_hosts_match_names_any_case_and_ports_when_given() {
        let policy = Policy {
            allowed_hosts: Some(vec!["API.example.com".into(), "pay.example.org:8443".into()]),
            ..Policy::default()
        };
        assert!(policy.allows_host("api.example.com", 443));
        assert!(policy.allows_host("api.EXAMPLE.com.", 80));
        assert!(policy.allows_host("pay.example.org", 8443));
        assert!(!policy.allows_host("pay.example.org", 443));
        assert!(!policy.allows_host("evil.example.com", 443));
        assert!(Policy::default().allows_host("anything", 1));
        let none = Policy {
            allowed_hosts: Some(vec![]),
            ..Policy::default()
        };
        assert!(!none.allows_host("api.example.com", 443));
    }

    fn proposed(value: u64) -> Proposed<'static> {
        Proposed {
            asset_key: KEY,
            to: addr(1),
            value: wei(value),
            day_total: U256::ZERO,
            week_total: U256::ZERO,
            paid_before: true,
        }
    }

    fn limited(limits: AssetLimits) -> Policy {
        Policy {
            limits: BTreeMap::from([(KEY.to_string(), limits)]),
            ..Policy::default()
        }
    }

    #[test]
    fn the_default_policy_allows_anything() {
        assert_eq!(Policy::default().evaluate(&proposed(u64::MAX)), Verdict::Allow);
    }

    #[test]
    fn limits_are_inclusive() {
        let policy = limited(AssetLimits {
            per_transfer: Some(wei(10)),
            per_day: Some(wei(30)),
            per_week: Some(wei(50)),
            approval_above: None,
        });
        assert_eq!(policy.evaluate(&proposed(10)), Verdict::Allow);
        assert_eq!(policy.evaluate(&proposed(11)), Verdict::Deny(PolicyRule::PerTransfer));
        let day = |total| Proposed {
            day_total: wei(total),
            week_total: wei(total),
            ..proposed(10)
        };
        assert_eq!(policy.evaluate(&day(20)), Verdict::Allow);
        assert_eq!(policy.evaluate(&day(21)), Verdict::Deny(PolicyRule::PerDay));
        let week = |total| Proposed {
            week_total: wei(total),
            ..proposed(10)
        };
        assert_eq!(policy.evaluate(&week(40)), Verdict::Allow);
        assert_eq!(policy.evaluate(&week(41)), Verdict::Deny(PolicyRule::PerWeek));
    }

    #[test]
    fn approval_above_is_strictly_greater() {
        let policy = limited(AssetLimits {
            approval_above: Some(wei(5)),
            ..AssetLimits::default()
        });
        assert_eq!(policy.evaluate(&proposed(5)), Verdict::Allow);
        let above = Holds {
            approval_above: true,
            above: Some(wei(5)),
            ..Holds::default()
        };
        assert_eq!(policy.evaluate(&proposed(6)), Verdict::NeedsApproval(above));
        assert_eq!(above.names(), ["approval_above"]);
        assert!(policy.has_approval_rules());
    }

    #[test]
    fn a_named_asset_excludes_the_others_and_an_empty_entry_allows_it() {
        let policy = limited(AssetLimits::default());
        assert_eq!(policy.evaluate(&proposed(1)), Verdict::Allow);
        let other = Proposed {
            asset_key: "ethereum:ETH",
            ..proposed(1)
        };
        assert_eq!(policy.evaluate(&other), Verdict::Deny(PolicyRule::AssetNotAllowed));
    }

    #[test]
    fn recipients_are_blocked_or_allowed_by_address() {
        // Addresses are parsed values: the spelling (case) of the text they came from does not matter.
        let lower: Address = "0xabcdefabcdefabcdefabcdefabcdefabcdefabcd".parse().expect("address");
        let upper: Address = "0xABCDEFABCDEFABCDEFABCDEFABCDEFABCDEFABCD".parse().expect("address");
        let blocked = Policy {
            blocked_recipients: vec![lower],
            ..Policy::default()
        };
        let to_upper = Proposed {
            to: upper,
            ..proposed(1)
        };
        assert_eq!(blocked.evaluate(&to_upper), Verdict::Deny(PolicyRule::RecipientBlocked));
        let allowed = Policy {
            allowed_recipients: Some(vec![lower]),
            ..Policy::default()
        };
        assert_eq!(allowed.evaluate(&to_upper), Verdict::Allow);
        assert_eq!(
            allowed.evaluate(&proposed(1)),
            Verdict::Deny(PolicyRule::RecipientNotAllowed)
        );
    }

    #[test]
    fn new_recipients_wait_for_approval_when_asked() {
        let policy = Policy {
            approve_new_recipients: true,
            ..Policy::default()
        };
        let new = Proposed {
            paid_before: false,
            ..proposed(1)
        };
        let new_recipient = Holds {
            new_recipient: true,
            ..Holds::default()
        };
        assert_eq!(policy.evaluate(&new), Verdict::NeedsApproval(new_recipient));
        assert_eq!(new_recipient.names(), ["approve_new_recipients"]);
        assert_eq!(policy.evaluate(&proposed(1)), Verdict::Allow);
    }

    #[test]
    fn refusals_come_before_approval() {
        let policy = Policy {
            approve_new_recipients: true,
            blocked_recipients: vec![addr(1)],
            ..Policy::default()
        };
        let new = Proposed {
            paid_before: false,
            ..proposed(1)
        };
        assert_eq!(policy.evaluate(&new), Verdict::Deny(PolicyRule::RecipientBlocked));
    }

    #[test]
    fn calls_are_optional_in_the_stored_policy() {
        // A policy stored before calls existed reads as one without them, and is written back the same.
        let old = r#"{"limits":{},"allowed_recipients":null,"blocked_recipients":[],"approve_new_recipients":false,"approval_ttl_secs":900,"allowed_hosts":null}"#;
        let policy: Policy = serde_json::from_str(old).expect("reads");
        assert_eq!(policy, Policy::default());
        assert_eq!(serde_json::to_string(&policy).expect("writes"), old);
        let with_calls: Policy = serde_json::from_value(serde_json::json!({
            "limits": {}, "allowed_recipients": null, "blocked_recipients": [], "approve_new_recipients": false,
            "approval_ttl_secs": 900, "allowed_hosts": null,
            "calls": {"default": "approve", "allow_unlimited_approvals": true}
        }))
        .expect("reads");
        let text = serde_json::to_string(&with_calls).expect("writes");
        assert_eq!(serde_json::from_str::<Policy>(&text).expect("reads again"), with_calls);
        let invalid = old.replace(
            "null}",
            r#"null,"calls":{"rules":[{"chain":"*","to":"*","function":"x(","action":"allow"}]}}"#,
        );
        assert!(serde_json::from_str::<Policy>(&invalid).is_err());
    }

    #[test]
    fn calls_add_approval_rules_verdicts_and_the_unlimited_switch() {
        let calls = |json: serde_json::Value| Policy {
            calls: Some(Box::new(CallsPolicy::try_from(json).expect("valid"))),
            ..Policy::default()
        };
        let call = CallFacts {
            chain: "base",
            to: addr(1),
            calldata: &[0xd0, 0xe3, 0x0d, 0xb0],
            value_wei: U256::ZERO,
            agent: addr(2),
        };
        let cases = [
            (Policy::default(), false, false, CallVerdict::Deny, CallVerdict::Allow),
            (
                calls(serde_json::json!({})),
                false,
                false,
                CallVerdict::Deny,
                CallVerdict::Allow,
            ),
            (
                calls(serde_json::json!({"default": "allow"})),
                false,
                false,
                CallVerdict::Allow,
                CallVerdict::Allow,
            ),
            (
                calls(serde_json::json!({"default": "approve"})),
                true,
                false,
                CallVerdict::Approve,
                CallVerdict::Approve,
            ),
            (
                calls(
                    serde_json::json!({"rules": [{"chain": "*", "to": "*", "function": "deposit()", "action": "approve"}],
                                         "allow_unlimited_approvals": true}),
                ),
                true,
                true,
                CallVerdict::Approve,
                CallVerdict::Approve,
            ),
        ];
        for (policy, approval_rules, unlimited, guarded, unguarded) in cases {
            assert_eq!(policy.has_approval_rules(), approval_rules, "{policy:?}");
            assert_eq!(policy.allows_unlimited_approvals(), unlimited, "{policy:?}");
            assert_eq!(policy.judge_call(&call, true).0, guarded, "{policy:?}");
            assert_eq!(policy.judge_call(&call, false).0, unguarded, "{policy:?}");
        }
    }

    #[test]
    fn windows_count_only_the_asset_value() {
        // The window totals the store hands in are values; fees never enter them, so a transfer that exactly
        // fills the day passes whatever its fee.
        let policy = limited(AssetLimits {
            per_day: Some(wei(100)),
            ..AssetLimits::default()
        });
        let fill = Proposed {
            day_total: wei(90),
            ..proposed(10)
        };
        assert_eq!(policy.evaluate(&fill), Verdict::Allow);
        assert!(policy.counts_windows(KEY));
        assert!(!policy.counts_windows("ethereum:ETH"));
    }
}
