//! Reading and writing `calls` (§18). Reading validates everything at once and reports every problem with its path
//! (`rules[0].args.1`, `abis.base:0x…`), which the API answers as 422 field errors; writing gives back the form
//! the owner wrote, with addresses checksummed and amounts normalised.

use std::collections::BTreeMap;

use alloy::dyn_abi::{DynSolType, Specifier};
use alloy::json_abi::{Function, JsonAbi};
use alloy::primitives::Address;
use serde::Deserialize;
use serde_json::{Map, Value};

use super::{AbiKey, ArgCondition, CallAction, CallRule, CallsPolicy, FunctionPattern, Pattern, Rule, TypedDataRule};
use crate::domain::call::condition::{Condition, ConditionError, Kind};
use crate::domain::call::request::parse_function;

/// What is wrong at one place of `calls`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CallsProblem {
    #[error("{0}")]
    Shape(String),
    #[error("is not a Solidity function signature such as approve(address,uint256): {0}")]
    UnparsableFunction(String),
    #[error("the function has no argument {0:?}")]
    UnknownArgument(String),
    #[error("argument conditions need a function, not \"*\"")]
    ArgsNeedAFunction,
    #[error("conditions apply to address, integer, bool, bytes and string arguments, not {0}")]
    NotComparable(String),
    #[error(transparent)]
    Condition(#[from] ConditionError),
    #[error("must be \"*\" or a 0x address of 20 bytes")]
    MalformedAddress,
    #[error("must be \"*\" or a chain name")]
    EmptyChain,
    #[error("must be <chain>:<0x address>")]
    AbiKey,
    #[error("is not a JSON ABI (a list of entries): {0}")]
    Abi(String),
    #[error("must name the primary type")]
    EmptyPrimaryType,
}

/// One problem and where it is, relative to `calls`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{path}: {problem}")]
pub struct CallsError {
    pub path: String,
    pub problem: CallsProblem,
}

/// Every problem of a `calls` that cannot be accepted.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid calls policy: {}", .0.iter().map(ToString::to_string).collect::<Vec<_>>().join("; "))]
pub struct InvalidCallsPolicy(pub Vec<CallsError>);

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawPolicy {
    #[serde(default)]
    default: Option<CallAction>,
    #[serde(default)]
    rules: Vec<Value>,
    #[serde(default)]
    abis: BTreeMap<String, Value>,
    #[serde(default)]
    allow_unlimited_approvals: bool,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawCallRule {
    chain: String,
    to: String,
    function: String,
    #[serde(default)]
    args: BTreeMap<String, Value>,
    value: Option<Value>,
    action: CallAction,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawTypedDataRule {
    typed_data: RawTypedData,
    action: CallAction,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawTypedData {
    #[serde(default)]
    domain: BTreeMap<String, Value>,
    primary_type: String,
    #[serde(default)]
    message: BTreeMap<String, Value>,
}

/// Collects problems so that one answer lists them all.
#[derive(Default)]
struct Problems(Vec<CallsError>);

impl Problems {
    fn add(&mut self, path: impl Into<String>, problem: impl Into<CallsProblem>) {
        self.0.push(CallsError {
            path: path.into(),
            problem: problem.into(),
        });
    }
}

impl TryFrom<Value> for CallsPolicy {
    type Error = InvalidCallsPolicy;

    fn try_from(json: Value) -> Result<Self, Self::Error> {
        let shape = |path: &str, e: serde_json::Error| {
            InvalidCallsPolicy(vec![CallsError {
                path: path.into(),
                problem: CallsProblem::Shape(e.to_string()),
            }])
        };
        let raw: RawPolicy = serde_json::from_value(json).map_err(|e| shape("calls", e))?;
        let mut problems = Problems::default();
        let mut abis = BTreeMap::new();
        for (key, entries) in raw.abis {
            let path = format!("abis.{key}");
            let Some(abi_key) = abi_key(&key) else {
                problems.add(path, CallsProblem::AbiKey);
                continue;
            };
            match serde_json::from_value::<JsonAbi>(entries) {
                Ok(abi) => {
                    abis.insert(abi_key, abi);
                }
                Err(e) => problems.add(path, CallsProblem::Abi(e.to_string())),
            }
        }
        let mut rules = Vec::with_capacity(raw.rules.len());
        for (i, rule) in raw.rules.into_iter().enumerate() {
            let path = format!("rules[{i}]");
            let parsed = if rule.get("typed_data").is_some() {
                serde_json::from_value(rule)
                    .map_err(|e| problems.add(&path, CallsProblem::Shape(e.to_string())))
                    .ok()
                    .and_then(|raw| typed_data_rule(raw, &path, &mut problems))
                    .map(Rule::TypedData)
            } else {
                serde_json::from_value(rule)
                    .map_err(|e| problems.add(&path, CallsProblem::Shape(e.to_string())))
                    .ok()
                    .and_then(|raw| call_rule(raw, &path, &abis, &mut problems))
                    .map(Rule::Call)
            };
            rules.extend(parsed);
        }
        if !problems.0.is_empty() {
            return Err(InvalidCallsPolicy(problems.0));
        }
        Ok(CallsPolicy {
            default: raw.default,
            rules,
            abis,
            allow_unlimited_approvals: raw.allow_unlimited_approvals,
        })
    }
}

/// `<chain>:<address>`, the chain in lower case.
fn abi_key(key: &str) -> Option<AbiKey> {
    let (chain, address) = key.split_once(':')?;
    let chain = chain.trim().to_ascii_lowercase();
    let address = address.trim().parse().ok()?;
    (!chain.is_empty()).then_some(AbiKey { chain, address })
}

fn call_rule(
    raw: RawCallRule,
    path: &str,
    abis: &BTreeMap<AbiKey, JsonAbi>,
    problems: &mut Problems,
) -> Option<CallRule> {
    let before = problems.0.len();
    let chain = match raw.chain.trim() {
        "*" => Pattern::Any,
        "" => {
            problems.add(format!("{path}.chain"), CallsProblem::EmptyChain);
            Pattern::Any
        }
        name => Pattern::Only(name.to_ascii_lowercase()),
    };
    let to = match raw.to.trim() {
        "*" => Pattern::Any,
        text => text.parse::<Address>().map(Pattern::Only).unwrap_or_else(|_| {
            problems.add(format!("{path}.to"), CallsProblem::MalformedAddress);
            Pattern::Any
        }),
    };
    let function = match raw.function.trim() {
        "*" => FunctionPattern::Any,
        text => match parse_function(text) {
            Ok(function) => FunctionPattern::Signature {
                text: text.to_string(),
                function,
            },
            Err(e) => {
                let message = e.to_string();
                problems.add(format!("{path}.function"), CallsProblem::UnparsableFunction(message));
                return None;
            }
        },
    };
    let value = raw.value.and_then(|v| {
        Condition::parse(&v, Kind::Native)
            .map_err(|e| problems.add(format!("{path}.value"), e))
            .ok()
    });
    let mut args = Vec::with_capacity(raw.args.len());
    for (key, condition) in raw.args {
        let at = format!("{path}.args.{key}");
        let FunctionPattern::Signature { function, .. } = &function else {
            problems.add(at, CallsProblem::ArgsNeedAFunction);
            continue;
        };
        // Names come from the rule's own signature, else from the policy's ABI of that very contract.
        let abi = match (&chain, &to) {
            (Pattern::Only(chain), Pattern::Only(address)) => abis.get(&AbiKey {
                chain: chain.clone(),
                address: *address,
            }),
            _ => None,
        };
        let Some(position) = position_of(&key, function, abi) else {
            problems.add(at, CallsProblem::UnknownArgument(key));
            continue;
        };
        let kind = function.inputs[position].resolve().ok().and_then(|ty| kind_of(&ty));
        let Some(kind) = kind else {
            problems.add(at, CallsProblem::NotComparable(function.inputs[position].ty.clone()));
            continue;
        };
        match Condition::parse(&condition, kind) {
            Ok(condition) => args.push(ArgCondition {
                key,
                position,
                condition,
            }),
            Err(e) => problems.add(at, e),
        }
    }
    (problems.0.len() == before).then_some(CallRule {
        chain,
        to,
        function,
        args,
        value,
        action: raw.action,
    })
}

/// A position (`"0"`) within the inputs, or a parameter name.
fn position_of(key: &str, function: &Function, abi: Option<&JsonAbi>) -> Option<usize> {
    if let Ok(position) = key.parse::<usize>() {
        return (position < function.inputs.len()).then_some(position);
    }
    let by_name = |f: &Function| f.inputs.iter().position(|p| !p.name.is_empty() && p.name == key);
    by_name(function).or_else(|| {
        abi?.functions()
            .filter(|f| f.selector() == function.selector())
            .find_map(by_name)
    })
}

fn kind_of(ty: &DynSolType) -> Option<Kind> {
    Some(match ty {
        DynSolType::Address => Kind::Address,
        DynSolType::Uint(_) => Kind::Uint,
        DynSolType::Int(_) => Kind::Int,
        DynSolType::Bool => Kind::Bool,
        DynSolType::Bytes | DynSolType::FixedBytes(_) => Kind::Bytes,
        DynSolType::String => Kind::String,
        _ => return None,
    })
}

fn typed_data_rule(raw: RawTypedDataRule, path: &str, problems: &mut Problems) -> Option<TypedDataRule> {
    let before = problems.0.len();
    let primary_type = raw.typed_data.primary_type.trim().to_string();
    if primary_type.is_empty() {
        problems.add(
            format!("{path}.typed_data.primary_type"),
            CallsProblem::EmptyPrimaryType,
        );
    }
    let mut conditions = |part: &str, fields: BTreeMap<String, Value>| -> BTreeMap<String, Condition> {
        fields
            .into_iter()
            .filter_map(|(field, condition)| match Condition::parse(&condition, Kind::Loose) {
                Ok(condition) => Some((field, condition)),
                Err(e) => {
                    problems.add(format!("{path}.typed_data.{part}.{field}"), e);
                    None
                }
            })
            .collect()
    };
    let domain = conditions("domain", raw.typed_data.domain);
    let message = conditions("message", raw.typed_data.message);
    (problems.0.len() == before).then_some(TypedDataRule {
        domain,
        primary_type,
        message,
        action: raw.action,
    })
}

impl From<CallsPolicy> for Value {
    fn from(policy: CallsPolicy) -> Value {
        let mut out = Map::new();
        if let Some(default) = policy.default {
            out.insert("default".into(), action(default));
        }
        out.insert("rules".into(), policy.rules.iter().map(rule_json).collect());
        let abis = policy
            .abis
            .iter()
            .map(|(key, abi)| (key.to_string(), serde_json::to_value(abi).unwrap_or(Value::Null)))
            .collect();
        out.insert("abis".into(), Value::Object(abis));
        out.insert(
            "allow_unlimited_approvals".into(),
            policy.allow_unlimited_approvals.into(),
        );
        Value::Object(out)
    }
}

fn action(action: CallAction) -> Value {
    serde_json::to_value(action).unwrap_or(Value::Null)
}

fn conditions_json<'a>(entries: impl Iterator<Item = (&'a String, &'a Condition)>) -> Value {
    Value::Object(entries.map(|(k, c)| (k.clone(), c.to_json())).collect())
}

fn rule_json(rule: &Rule) -> Value {
    let mut out = Map::new();
    match rule {
        Rule::Call(r) => {
            let star = || Value::String("*".into());
            let chain = match &r.chain {
                Pattern::Any => star(),
                Pattern::Only(name) => Value::String(name.clone()),
            };
            let to = match r.to {
                Pattern::Any => star(),
                Pattern::Only(address) => Value::String(address.to_checksum(None)),
            };
            let function = match &r.function {
                FunctionPattern::Any => star(),
                FunctionPattern::Signature { text, .. } => Value::String(text.clone()),
            };
            out.insert("chain".into(), chain);
            out.insert("to".into(), to);
            out.insert("function".into(), function);
            if !r.args.is_empty() {
                out.insert(
                    "args".into(),
                    conditions_json(r.args.iter().map(|a| (&a.key, &a.condition))),
                );
            }
            if let Some(value) = &r.value {
                out.insert("value".into(), value.to_json());
            }
            out.insert("action".into(), action(r.action));
        }
        Rule::TypedData(r) => {
            let mut typed = Map::new();
            if !r.domain.is_empty() {
                typed.insert("domain".into(), conditions_json(r.domain.iter()));
            }
            typed.insert("primary_type".into(), Value::String(r.primary_type.clone()));
            if !r.message.is_empty() {
                typed.insert("message".into(), conditions_json(r.message.iter()));
            }
            out.insert("typed_data".into(), Value::Object(typed));
            out.insert("action".into(), action(r.action));
        }
    }
    Value::Object(out)
}
