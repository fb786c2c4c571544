//! The `calls` part of a policy (§18) and its verdict on one call. Rules are validated once, when the policy is
//! read (`parse`), into typed patterns and conditions: a function signature parsed, argument names resolved to
//! positions, operands read as the type they meet. Judging then only compares; it never fails.

use std::collections::BTreeMap;

use alloy::dyn_abi::JsonAbiExt;
use alloy::json_abi::{Function, JsonAbi};
use alloy::primitives::{Address, U256};
use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::condition::{Condition, Operand, operand_of};
use super::request;
use super::typed::TypedFacts;

pub mod parse;
mod why;

pub use parse::{CallsError, CallsProblem, InvalidCallsPolicy};
pub use why::{denial, typed_denial};

/// Which part of a policy's `calls` decided a call (§18).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CallRuleRef {
    /// `calls.rules[i]`.
    Rule(usize),
    /// `calls.default`.
    Default,
}

/// What a rule, or the default, does with a call it matches.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum CallAction {
    Allow,
    /// Refused: 403 `policy_denied`, rule `call_denied`.
    Deny,
    /// Held for the owner's approval.
    Approve,
}

/// The verdict of the `calls` rules on one call. It never lifts the limits, the cap or the unlimited-approval guard.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CallVerdict {
    Allow,
    Deny,
    Approve,
}

impl From<CallAction> for CallVerdict {
    fn from(action: CallAction) -> Self {
        match action {
            CallAction::Allow => CallVerdict::Allow,
            CallAction::Deny => CallVerdict::Deny,
            CallAction::Approve => CallVerdict::Approve,
        }
    }
}

impl CallVerdict {
    /// The verdict when nothing decides (no `calls`, or no rule matches and no `default`): an owner who guards the
    /// agent has to allow calls explicitly; an unguarded agent has nobody to ask, and the limits still hold.
    pub fn unruled(guarded: bool) -> Self {
        if guarded { CallVerdict::Deny } else { CallVerdict::Allow }
    }
}

/// `"*"` or one value.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Pattern<T> {
    Any,
    Only(T),
}

/// `"*"`, or a function matched by the selector of the calldata actually sent. The text is kept as written so the
/// parameter names it gives stay usable as `args` keys.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum FunctionPattern {
    Any,
    Signature { text: String, function: Function },
}

/// A condition on one argument; `key` as written (`"0"` or a name), `position` what it resolved to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ArgCondition {
    pub key: String,
    pub position: usize,
    pub condition: Condition,
}

/// A rule over contract calls.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CallRule {
    /// A chain name as the registry spells it.
    pub chain: Pattern<String>,
    pub to: Pattern<Address>,
    pub function: FunctionPattern,
    pub args: Vec<ArgCondition>,
    /// Over the call's value in wei (written in whole native units).
    pub value: Option<Condition>,
    pub action: CallAction,
}

/// A rule over EIP-712 signatures (`sign-typed-data`); fields of `message` may be dotted paths.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TypedDataRule {
    pub domain: BTreeMap<String, Condition>,
    pub primary_type: String,
    pub message: BTreeMap<String, Condition>,
    pub action: CallAction,
}

/// Each kind of rule matches only its own kind of request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Rule {
    Call(CallRule),
    TypedData(TypedDataRule),
}

/// A contract whose ABI the policy names, `<chain>:<address>` (written with the address in lower case).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct AbiKey {
    pub chain: String,
    pub address: Address,
}

impl std::fmt::Display for AbiKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}:{:#x}", self.chain, self.address)
    }
}

/// The `calls` of a policy. Stored and answered in the form it was written in (`Into<Value>`), read only through
/// validation (`TryFrom<Value>`), so a stored policy is always a valid one.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(try_from = "Value", into = "Value")]
pub struct CallsPolicy {
    /// What happens when no rule matches; `None`: as with no `calls` (`CallVerdict::unruled`).
    pub default: Option<CallAction>,
    pub rules: Vec<Rule>,
    /// ABIs that name functions (for decoding and `args` names) and custom errors (for revert reasons).
    pub abis: BTreeMap<AbiKey, JsonAbi>,
    pub allow_unlimited_approvals: bool,
}

/// A call as the rules see it.
#[derive(Debug, Clone, Copy)]
pub struct CallFacts<'a> {
    pub chain: &'a str,
    pub to: Address,
    pub calldata: &'a [u8],
    pub value_wei: U256,
    /// Stands for `"$agent"`.
    pub agent: Address,
}

impl CallsPolicy {
    /// The first call rule that matches decides, else `default`, else `CallVerdict::unruled`.
    pub fn judge(&self, call: &CallFacts<'_>, guarded: bool) -> CallVerdict {
        self.judged_by(call, guarded).0
    }

    /// The verdict with the part of `calls` that gave it (`None`: nothing decided, `CallVerdict::unruled`).
    pub fn judged_by(&self, call: &CallFacts<'_>, guarded: bool) -> (CallVerdict, Option<CallRuleRef>) {
        let matched = self.rules.iter().enumerate().find_map(|(i, rule)| match rule {
            Rule::Call(rule) if rule.matches(call) => Some((rule.action, CallRuleRef::Rule(i))),
            _ => None,
        });
        match matched.or(self.default.map(|d| (d, CallRuleRef::Default))) {
            Some((action, by)) => (action.into(), Some(by)),
            None => (CallVerdict::unruled(guarded), None),
        }
    }

    /// The ABI the policy names for `to` on `chain`.
    pub fn abi_for(&self, chain: &str, to: Address) -> Option<&JsonAbi> {
        self.abis.get(&AbiKey {
            chain: chain.to_ascii_lowercase(),
            address: to,
        })
    }

    /// Whether a rule or the default holds calls for an owner (refused on unguarded agents: nobody could approve).
    pub fn has_approval_rules(&self) -> bool {
        let approve = |a: CallAction| a == CallAction::Approve;
        self.default.is_some_and(approve)
            || self.rules.iter().any(|rule| match rule {
                Rule::Call(r) => approve(r.action),
                Rule::TypedData(r) => approve(r.action),
            })
    }
}

impl CallsPolicy {
    /// The first typed-data rule that matches decides; none: refused, on every agent (§18: typed data is signed
    /// only where a rule says so; `default` is for calls).
    pub fn judge_typed(&self, typed: &TypedFacts<'_>) -> CallVerdict {
        self.typed_judged_by(typed).0
    }

    /// The verdict on typed data with the rule that gave it (`None`: no rule matched, refused).
    pub fn typed_judged_by(&self, typed: &TypedFacts<'_>) -> (CallVerdict, Option<CallRuleRef>) {
        self.rules
            .iter()
            .enumerate()
            .find_map(|(i, rule)| match rule {
                Rule::TypedData(rule) if rule.matches(typed) => Some((rule.action.into(), Some(CallRuleRef::Rule(i)))),
                _ => None,
            })
            .unwrap_or((CallVerdict::Deny, None))
    }
}

impl TypedDataRule {
    /// Whether the primary type is the rule's and every domain and message condition holds (an absent field
    /// holds none).
    pub fn matches(&self, typed: &TypedFacts<'_>) -> bool {
        let holds = |in_domain: bool, conditions: &BTreeMap<String, Condition>| {
            conditions.iter().all(|(path, condition)| {
                typed
                    .operand(in_domain, path)
                    .is_some_and(|actual| condition.holds(&actual, typed.agent))
            })
        };
        self.primary_type == typed.primary_type && holds(true, &self.domain) && holds(false, &self.message)
    }
}

/// The verdict for a policy that may have no `calls` at all.
pub fn judge(calls: Option<&CallsPolicy>, call: &CallFacts<'_>, guarded: bool) -> CallVerdict {
    calls.map_or(CallVerdict::unruled(guarded), |c| c.judge(call, guarded))
}

/// How one call rule meets a call.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RuleCheck<'r> {
    /// Its chain, contract or function is another.
    Unmatched,
    /// It matches and every condition holds: it decides.
    Holds,
    /// It names the call's chain, contract and function, but a condition fails.
    Fails(Failure<'r>),
}

/// The condition of a rule that a call did not meet.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Failure<'r> {
    Value {
        condition: &'r Condition,
        actual: U256,
    },
    /// `actual`: `None` when the argument is no comparable value.
    Arg {
        arg: &'r ArgCondition,
        actual: Option<Operand>,
    },
    /// The calldata does not decode as the rule's function.
    Undecodable,
}

impl CallRule {
    /// Whether the rule's chain, contract and function match and every condition holds.
    pub fn matches(&self, call: &CallFacts<'_>) -> bool {
        self.check(call) == RuleCheck::Holds
    }

    /// How the rule meets the call. Conditions on arguments read the calldata as the rule's own function: calldata
    /// its types cannot decode matches no such rule.
    pub fn check(&self, call: &CallFacts<'_>) -> RuleCheck<'_> {
        let chain = match &self.chain {
            Pattern::Any => true,
            Pattern::Only(name) => name.eq_ignore_ascii_case(call.chain),
        };
        let to = match self.to {
            Pattern::Any => true,
            Pattern::Only(address) => address == call.to,
        };
        if !(chain && to) {
            return RuleCheck::Unmatched;
        }
        let function = match &self.function {
            FunctionPattern::Any => None,
            FunctionPattern::Signature { function, .. } => {
                if request::selector(call.calldata) != Some(function.selector()) {
                    return RuleCheck::Unmatched;
                }
                Some(function)
            }
        };
        if let Some(value) = &self.value
            && !value.holds(&Operand::Uint(call.value_wei), call.agent)
        {
            return RuleCheck::Fails(Failure::Value {
                condition: value,
                actual: call.value_wei,
            });
        }
        if self.args.is_empty() {
            return RuleCheck::Holds;
        }
        let Some(values) = function.and_then(|f| f.abi_decode_input(&call.calldata[4..]).ok()) else {
            return RuleCheck::Fails(Failure::Undecodable);
        };
        let failed = self.args.iter().find_map(|arg| {
            let actual = values.get(arg.position).and_then(operand_of);
            match &actual {
                Some(a) if arg.condition.holds(a, call.agent) => None,
                _ => Some(Failure::Arg { arg, actual }),
            }
        });
        failed.map_or(RuleCheck::Holds, RuleCheck::Fails)
    }
}

#[cfg(test)]
mod tests;
