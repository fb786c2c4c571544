//! A call the `calls` rules refuse, in words (§18): the rule that denies it, or the first rule that names its chain,
//! contract and function but whose condition it did not meet, with the value it had — what an owner needs to see to
//! mend the rule, rather than "no rule allows it".

use alloy::primitives::Address;

use super::{CallAction, CallFacts, CallRule, CallsPolicy, Failure, FunctionPattern, Pattern, Rule, RuleCheck};
use crate::domain::call::condition::{Condition, Operand};

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
