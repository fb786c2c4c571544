//! A call the `calls` rules refuse, in words (§18): the rule that denies it, or the first rule that names its chain,
//! contract and function but whose condition it did not meet, with the value it had — what an owner needs to see to
//! mend the rule, rather than "no rule allows it".

use alloy::primitives::Address;

use super::{
    CallAction, CallFacts, CallRule, CallsPolicy, Failure, FunctionPattern, Pattern, Rule, RuleCheck, TypedDataRule,
};
use crate::domain::call::condition::{Condition, Operand};
use crate::domain::call::typed::TypedFacts;

impl CallsPolicy {
    /// Why the rules refuse `call` (meant for a call they refuse). Rules are numbered from 1, in the order of
    /// `calls.rules`, as the console numbers them.
    pub fn denial(&self, call: &CallFacts<'_>, guarded: bool) -> String {
        let mut missed = None;
        for (i, rule) in self.rules.iter().enumerate() {
            let Rule::Call(rule) = rule else { continue };
            match rule.check(call) {
                RuleCheck::Holds if rule.action == CallAction::Deny => {
                    return format!("rule {} ({}) denies it", i + 1, described(rule));
                }
                RuleCheck::Holds => return "no rule allows it".to_string(),
                RuleCheck::Fails(failure) if missed.is_none() => missed = Some((i, rule, failure)),
                RuleCheck::Fails(_) | RuleCheck::Unmatched => {}
            }
        }
        if let Some((i, rule, failure)) = missed {
            let why = failed(rule, &failure, call.agent);
            return format!("rule {} ({}) did not allow it: {why}", i + 1, described(rule));
        }
        match self.default {
            Some(CallAction::Deny) => "no rule matches it, and calls.default is deny".to_string(),
            Some(_) => "no rule allows it".to_string(),
            None => unruled(guarded),
        }
    }
}

impl CallsPolicy {
    /// Why the rules refuse to sign `typed` (meant for typed data they refuse): the rule that denies it, or the
    /// first rule of its primary type whose domain or message condition it did not meet, with the value it had.
    pub fn typed_denial(&self, typed: &TypedFacts<'_>) -> String {
        let mut missed = None;
        for (i, rule) in self.rules.iter().enumerate() {
            let Rule::TypedData(rule) = rule else { continue };
            if rule.primary_type != typed.primary_type {
                continue;
            }
            match unmet(rule, typed) {
                None if rule.action == CallAction::Deny => {
                    return format!("rule {} (typed data {}) denies it", i + 1, rule.primary_type);
                }
                None => return "no rule allows it".to_string(),
                Some(why) if missed.is_none() => missed = Some((i, why)),
                Some(_) => {}
            }
        }
        match missed {
            Some((i, why)) => format!(
                "rule {} (typed data {}) did not allow it: {why}",
                i + 1,
                typed.primary_type
            ),
            None => typed_unruled(typed),
        }
    }
}

/// Why a policy that may have no `calls` at all refuses to sign `typed`.
pub fn typed_denial(calls: Option<&CallsPolicy>, typed: &TypedFacts<'_>) -> String {
    calls.map_or_else(|| typed_unruled(typed), |c| c.typed_denial(typed))
}

/// Why typed data no rule names is refused.
fn typed_unruled(typed: &TypedFacts<'_>) -> String {
    format!(
        "no rule names typed data {}, and typed data is signed only when a rule allows it",
        typed.primary_type
    )
}

/// The first domain, then message, condition of `rule` that `typed` does not meet, in words with the value it had
/// (`None`: every condition holds).
fn unmet(rule: &TypedDataRule, typed: &TypedFacts<'_>) -> Option<String> {
    let sides = [(true, "domain", &rule.domain), (false, "message", &rule.message)];
    sides.into_iter().find_map(|(in_domain, side, conditions)| {
        conditions.iter().find_map(|(path, condition)| {
            let Some(actual) = typed.operand(in_domain, path) else {
                return Some(format!(
                    "{side}.{path} must be set; it is absent or no value a condition can compare"
                ));
            };
            let comparison = condition.first_failing(&actual, typed.agent)?;
            Some(format!(
                "{side}.{path} {}; it was {}",
                condition.comparison_words(comparison, typed.agent),
                condition.words_of(&actual)
            ))
        })
    })
}

/// Why the rules of a policy that may have no `calls` at all refuse `call`.
pub fn denial(calls: Option<&CallsPolicy>, call: &CallFacts<'_>, guarded: bool) -> String {
    calls.map_or_else(|| unruled(guarded), |c| c.denial(call, guarded))
}

/// Why a policy without `calls`, or without a `default`, refuses a call no rule matches.
fn unruled(guarded: bool) -> String {
    match guarded {
        true => "no rule matches it, and a guarded agent's calls are refused unless a rule allows them".to_string(),
        false => "no rule allows it".to_string(),
    }
}

/// `approve(address,uint256) on 0x…`.
fn described(rule: &CallRule) -> String {
    let function = match &rule.function {
        FunctionPattern::Any => "any function".to_string(),
        FunctionPattern::Signature { function, .. } => function.signature(),
    };
    let to = match rule.to {
        Pattern::Any => "any contract".to_string(),
        Pattern::Only(address) => address.to_checksum(None),
    };
    format!("{function} on {to}")
}

/// The condition not met, with the value the call had.
fn failed(rule: &CallRule, failure: &Failure<'_>, agent: Address) -> String {
    let unmet = |condition: &Condition, actual: &Operand| {
        let comparison = condition.first_failing(actual, agent);
        let must = comparison.map_or_else(|| "fails".to_string(), |c| condition.comparison_words(c, agent));
        format!("{must}; it was {}", condition.words_of(actual))
    };
    match failure {
        Failure::Value { condition, actual } => format!("value {}", unmet(condition, &Operand::Uint(*actual))),
        Failure::Undecodable => match &rule.function {
            FunctionPattern::Signature { function, .. } => {
                format!("its arguments do not decode as {}", function.signature())
            }
            FunctionPattern::Any => "its arguments do not decode".to_string(),
        },
        Failure::Arg { arg, actual } => {
            let name = match (&rule.function, arg.key.parse::<usize>()) {
                (_, Err(_)) => Some(arg.key.clone()),
                (FunctionPattern::Signature { function, .. }, Ok(_)) => function
                    .inputs
                    .get(arg.position)
                    .map(|p| p.name.clone())
                    .filter(|n| !n.is_empty()),
                (FunctionPattern::Any, Ok(_)) => None,
            };
            let named = match name {
                Some(name) => format!("argument {} ({name})", arg.position),
                None => format!("argument {}", arg.position),
            };
            match actual {
                Some(actual) => format!("{named} {}", unmet(&arg.condition, actual)),
                None => format!("{named} is no value a condition can compare"),
            }
        }
    }
}
