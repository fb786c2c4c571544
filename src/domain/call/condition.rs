//! Conditions of `calls` rules (§18): `{"<op>": operand}` objects over one argument, the call's `value`, or a typed
//! data field. Operands are read once, at validation, as the type they are compared with (an address, an integer,
//! whole native units…), so judging compares typed values and a malformed operand is a 422, not a silent mismatch.

use std::collections::BTreeMap;

use alloy::dyn_abi::DynSolValue;
use alloy::primitives::{Address, I256, U256};
use serde_json::Value;

use super::value::{hex_bytes, parse_int, parse_uint};
use crate::domain::amount::{format_units, parse_units};

/// Decimals of the native coin of every supported chain: `value` conditions are written in whole units.
const NATIVE_DECIMALS: u8 = 18;

/// Stands for the agent's own address in any operand.
pub const AGENT: &str = "$agent";

/// What a condition compares, which decides how its operands are read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    Address,
    Uint,
    Int,
    Bool,
    /// `bytes` and `bytesN`, as 0x-hex.
    Bytes,
    String,
    /// The call's `value`: whole native units in the policy, wei once read.
    Native,
    /// A typed-data field, whose type the policy does not know: the operand's own spelling decides.
    Loose,
}

/// One operand, typed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Operand {
    Agent,
    Address(Address),
    Uint(U256),
    Int(I256),
    Bool(bool),
    Bytes(Vec<u8>),
    String(String),
}

/// One comparison; all of a condition's comparisons must hold.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Comparison {
    Eq(Operand),
    Ne(Operand),
    In(Vec<Operand>),
    NotIn(Vec<Operand>),
    Lt(Operand),
    Lte(Operand),
    Gt(Operand),
    Gte(Operand),
}

/// A condition as written (`{"gte": "1", "lte": "10"}`): every comparison must hold.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Condition {
    pub kind: Kind,
    pub comparisons: Vec<Comparison>,
}

/// Why a condition is refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ConditionError {
    #[error("must be an object of conditions such as {{\"eq\": …}}")]
    NotAnObject,
    #[error("names no condition")]
    Empty,
    #[error("unknown condition {0:?} (expected eq, ne, in, not_in, lt, lte, gt or gte)")]
    UnknownOperator(String),
    #[error("{op}: must be {expected}")]
    Malformed { op: String, expected: &'static str },
    #[error("{op}: must be a list")]
    NotAList { op: String },
    #[error("{op}: only integers and amounts can be ordered")]
    NotOrdered { op: String },
}

impl Condition {
    /// Reads a condition over values of `kind`.
    pub fn parse(json: &Value, kind: Kind) -> Result<Condition, ConditionError> {
        let object = json.as_object().ok_or(ConditionError::NotAnObject)?;
        if object.is_empty() {
            return Err(ConditionError::Empty);
        }
        let mut comparisons = Vec::with_capacity(object.len());
        for (op, operand) in object {
            let one = || read_operand(operand, kind, op);
            let list = || {
                operand
                    .as_array()
                    .ok_or_else(|| ConditionError::NotAList { op: op.clone() })?
                    .iter()
                    .map(|o| read_operand(o, kind, op))
                    .collect::<Result<Vec<_>, _>>()
            };
            let ordered = || {
                let operand = one()?;
                match operand {
                    Operand::Uint(_) | Operand::Int(_) => Ok(operand),
                    _ => Err(ConditionError::NotOrdered { op: op.clone() }),
                }
            };
            comparisons.push(match op.as_str() {
                "eq" => Comparison::Eq(one()?),
                "ne" => Comparison::Ne(one()?),
                "in" => Comparison::In(list()?),
                "not_in" => Comparison::NotIn(list()?),
                "lt" => Comparison::Lt(ordered()?),
                "lte" => Comparison::Lte(ordered()?),
                "gt" => Comparison::Gt(ordered()?),
                "gte" => Comparison::Gte(ordered()?),
                other => return Err(ConditionError::UnknownOperator(other.to_string())),
            });
        }
        Ok(Condition { kind, comparisons })
    }

    /// Whether `actual` satisfies every comparison; `"$agent"` is `agent`. Validation read the operands as the type
    /// of what they are compared with, so only an ordering of a non-integer (never holds) can meet another type.
    pub fn holds(&self, actual: &Operand, agent: Address) -> bool {
        self.first_failing(actual, agent).is_none()
    }

    /// The first comparison `actual` does not satisfy (`None`: the condition holds).
    pub fn first_failing(&self, actual: &Operand, agent: Address) -> Option<&Comparison> {
        let resolve = |o: &Operand| match o {
            Operand::Agent => Operand::Address(agent),
            other => other.clone(),
        };
        let actual = resolve(actual);
        let order = |o: &Operand| compare(&actual, &resolve(o));
        self.comparisons.iter().find(|c| !match c {
            Comparison::Eq(o) => actual == resolve(o),
            Comparison::Ne(o) => actual != resolve(o),
            Comparison::In(list) => list.iter().any(|o| actual == resolve(o)),
            Comparison::NotIn(list) => !list.iter().any(|o| actual == resolve(o)),
            Comparison::Lt(o) => order(o).is_some_and(|c| c.is_lt()),
            Comparison::Lte(o) => order(o).is_some_and(|c| c.is_le()),
            Comparison::Gt(o) => order(o).is_some_and(|c| c.is_gt()),
            Comparison::Gte(o) => order(o).is_some_and(|c| c.is_ge()),
        })
    }

    /// `actual` in the words a refusal uses: what the operands are written as (whole native units for `value`).
    pub fn words_of(&self, actual: &Operand) -> String {
        words(actual, self.kind)
    }

    /// A comparison in words (`must be at most 100`), `"$agent"` with the address it stands for.
    pub fn comparison_words(&self, comparison: &Comparison, agent: Address) -> String {
        let one = |o: &Operand| match o {
            Operand::Agent => format!("{AGENT} ({})", agent.to_checksum(None)),
            other => words(other, self.kind),
        };
        let list = |l: &[Operand]| l.iter().map(one).collect::<Vec<_>>().join(", ");
        match comparison {
            Comparison::Eq(o) => format!("must be {}", one(o)),
            Comparison::Ne(o) => format!("must not be {}", one(o)),
            Comparison::In(l) => format!("must be in [{}]", list(l)),
            Comparison::NotIn(l) => format!("must not be in [{}]", list(l)),
            Comparison::Lt(o) => format!("must be less than {}", one(o)),
            Comparison::Lte(o) => format!("must be at most {}", one(o)),
            Comparison::Gt(o) => format!("must be more than {}", one(o)),
            Comparison::Gte(o) => format!("must be at least {}", one(o)),
        }
    }

    /// The condition as the policy writes it (the stored and answered form).
    pub fn to_json(&self) -> Value {
        let write = |o: &Operand| write_operand(o, self.kind);
        let entries: BTreeMap<&str, Value> = self
            .comparisons
            .iter()
            .map(|c| match c {
                Comparison::Eq(o) => ("eq", write(o)),
                Comparison::Ne(o) => ("ne", write(o)),
                Comparison::In(l) => ("in", Value::Array(l.iter().map(write).collect())),
                Comparison::NotIn(l) => ("not_in", Value::Array(l.iter().map(write).collect())),
                Comparison::Lt(o) => ("lt", write(o)),
                Comparison::Lte(o) => ("lte", write(o)),
                Comparison::Gt(o) => ("gt", write(o)),
                Comparison::Gte(o) => ("gte", write(o)),
            })
            .collect();
        serde_json::to_value(entries).unwrap_or(Value::Null)
    }
}

/// A decoded argument as an operand; `None` for arrays and tuples, which conditions do not reach.
pub fn operand_of(value: &DynSolValue) -> Option<Operand> {
    Some(match value {
        DynSolValue::Address(a) => Operand::Address(*a),
        DynSolValue::Uint(v, _) => Operand::Uint(*v),
        DynSolValue::Int(v, _) => Operand::Int(*v),
        DynSolValue::Bool(b) => Operand::Bool(*b),
        DynSolValue::FixedBytes(word, size) => Operand::Bytes(word[..*size].to_vec()),
        DynSolValue::Bytes(b) => Operand::Bytes(b.clone()),
        DynSolValue::String(s) => Operand::String(s.clone()),
        _ => return None,
    })
}

/// An operand as the policy writes it, without JSON quotes.
fn words(operand: &Operand, kind: Kind) -> String {
    match write_operand(operand, kind) {
        Value::String(s) => s,
        other => other.to_string(),
    }
}

fn compare(a: &Operand, b: &Operand) -> Option<std::cmp::Ordering> {
    match (a, b) {
        (Operand::Uint(a), Operand::Uint(b)) => Some(a.cmp(b)),
        (Operand::Int(a), Operand::Int(b)) => Some(a.cmp(b)),
        _ => None,
    }
}

fn read_operand(json: &Value, kind: Kind, op: &str) -> Result<Operand, ConditionError> {
    let malformed = |expected| ConditionError::Malformed {
        op: op.to_string(),
        expected,
    };
    if json.as_str() == Some(AGENT) && matches!(kind, Kind::Address | Kind::Loose) {
        return Ok(Operand::Agent);
    }
    match kind {
        Kind::Address => json
            .as_str()
            .and_then(|s| s.trim().parse().ok())
            .map(Operand::Address)
            .ok_or(malformed("a 0x address of 20 bytes or \"$agent\"")),
        Kind::Uint => parse_uint(json)
            .map(Operand::Uint)
            .ok_or(malformed("a non-negative integer as a decimal string")),
        Kind::Int => parse_int(json)
            .map(Operand::Int)
            .ok_or(malformed("an integer as a decimal string")),
        Kind::Bool => json.as_bool().map(Operand::Bool).ok_or(malformed("true or false")),
        Kind::Bytes => hex_bytes(json).map(Operand::Bytes).ok_or(malformed("0x-hex bytes")),
        Kind::String => json
            .as_str()
            .map(|s| Operand::String(s.to_string()))
            .ok_or(malformed("a string")),
        Kind::Native => {
            let text = match json {
                Value::String(s) => s.clone(),
                Value::Number(n) => n.to_string(),
                _ => String::new(),
            };
            parse_units(&text, NATIVE_DECIMALS)
                .map(Operand::Uint)
                .map_err(|_| malformed("an amount in whole native units such as \"0.05\""))
        }
        Kind::Loose => loose(json).ok_or(malformed("a string, an integer or a boolean")),
    }
}

/// A typed-data operand read by its spelling: a 20-byte 0x value is an address (a `0x` string of another length
/// is bytes), digits an integer, anything else a string.
pub fn loose(json: &Value) -> Option<Operand> {
    match json {
        Value::Bool(b) => Some(Operand::Bool(*b)),
        Value::Number(_) => parse_uint(json)
            .map(Operand::Uint)
            .or_else(|| parse_int(json).map(Operand::Int)),
        Value::String(s) if s.starts_with("0x") => match hex_bytes(json)? {
            b if b.len() == 20 => Some(Operand::Address(Address::from_slice(&b))),
            b => Some(Operand::Bytes(b)),
        },
        Value::String(s) => Some(
            parse_uint(json)
                .map(Operand::Uint)
                .or_else(|| parse_int(json).map(Operand::Int))
                .unwrap_or_else(|| Operand::String(s.clone())),
        ),
        _ => None,
    }
}

fn write_operand(operand: &Operand, kind: Kind) -> Value {
    match operand {
        Operand::Agent => Value::String(AGENT.into()),
        Operand::Address(a) => Value::String(a.to_checksum(None)),
        Operand::Uint(v) if kind == Kind::Native => Value::String(format_units(*v, NATIVE_DECIMALS)),
        Operand::Uint(v) => Value::String(v.to_string()),
        Operand::Int(v) => Value::String(v.to_string()),
        Operand::Bool(b) => Value::Bool(*b),
        Operand::Bytes(b) => Value::String(alloy::hex::encode_prefixed(b)),
        Operand::String(s) => Value::String(s.clone()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    const ME: Address = Address::repeat_byte(0xa1);
    const OTHER: Address = Address::repeat_byte(0xb2);

    fn holds(kind: Kind, condition: Value, actual: Operand) -> bool {
        Condition::parse(&condition, kind).expect("valid").holds(&actual, ME)
    }

    fn uint(n: u64) -> Operand {
        Operand::Uint(U256::from(n))
    }

    #[test]
    fn integer_comparisons_hold_on_every_boundary() {
        let cases = [
            (json!({"eq": "10"}), 10, true),
            (json!({"eq": 10}), 11, false),
            (json!({"ne": "10"}), 10, false),
            (json!({"lt": "10"}), 9, true),
            (json!({"lt": "10"}), 10, false),
            (json!({"lte": "10"}), 10, true),
            (json!({"lte": "10"}), 11, false),
            (json!({"gt": "10"}), 10, false),
            (json!({"gt": "10"}), 11, true),
            (json!({"gte": "10"}), 10, true),
            (json!({"gte": "10"}), 9, false),
            (json!({"in": ["1", 2]}), 2, true),
            (json!({"in": []}), 2, false),
            (json!({"not_in": ["1", "2"]}), 3, true),
            (json!({"not_in": ["1", "2"]}), 1, false),
            (json!({"gte": "1", "lte": "10"}), 10, true),
            (json!({"gte": "1", "lte": "10"}), 0, false),
        ];
        for (condition, actual, expected) in cases {
            assert_eq!(
                holds(Kind::Uint, condition.clone(), uint(actual)),
                expected,
                "{condition} {actual}"
            );
        }
        let big = Operand::Uint(U256::MAX);
        assert!(holds(Kind::Uint, json!({"gt": "100000000000000000000000000000"}), big));
        let minus = Operand::Int(I256::MINUS_ONE);
        assert!(holds(Kind::Int, json!({"lt": "0", "gte": -1}), minus));
    }

    #[test]
    fn addresses_compare_case_insensitively_and_agent_is_the_agent() {
        let lower = format!("{ME:#x}");
        let upper = format!("0x{}", lower[2..].to_uppercase());
        let cases = [
            (json!({"eq": lower}), ME, true),
            (json!({"eq": upper}), ME, true),
            (json!({"eq": "$agent"}), ME, true),
            (json!({"eq": "$agent"}), OTHER, false),
            (json!({"ne": "$agent"}), OTHER, true),
            (json!({"in": [OTHER.to_string(), "$agent"]}), ME, true),
            (json!({"not_in": [OTHER.to_string()]}), OTHER, false),
        ];
        for (condition, actual, expected) in cases {
            assert_eq!(
                holds(Kind::Address, condition.clone(), Operand::Address(actual)),
                expected,
                "{condition}"
            );
        }
    }

    #[test]
    fn native_amounts_are_whole_units_compared_in_wei() {
        let wei = |n: u128| Operand::Uint(U256::from(n));
        let tenth = 100_000_000_000_000_000u128;
        assert!(holds(Kind::Native, json!({"lte": "0.1"}), wei(tenth)));
        assert!(!holds(Kind::Native, json!({"lte": "0.1"}), wei(tenth + 1)));
        assert!(holds(Kind::Native, json!({"eq": 0}), wei(0)));
        assert!(holds(Kind::Native, json!({"gt": "0.000000000000000001"}), wei(2)));
        let written = Condition::parse(&json!({"lte": "0.10"}), Kind::Native)
            .expect("valid")
            .to_json();
        assert_eq!(written, json!({"lte": "0.1"}));
    }

    #[test]
    fn other_kinds_compare_by_equality() {
        assert!(holds(Kind::Bool, json!({"eq": true}), Operand::Bool(true)));
        assert!(holds(
            Kind::Bytes,
            json!({"eq": "0xABcd"}),
            Operand::Bytes(vec![0xab, 0xcd])
        ));
        assert!(holds(
            Kind::String,
            json!({"in": ["a", "b"]}),
            Operand::String("b".into())
        ));
        // Ordering something that is not an integer never holds.
        assert!(!holds(Kind::Uint, json!({"lt": "1"}), Operand::Bool(false)));
    }

    #[test]
    fn malformed_conditions_are_refused() {
        let malformed = |op: &str| ConditionError::Malformed {
            op: op.into(),
            expected: "",
        };
        let cases = [
            (Kind::Uint, json!("10"), ConditionError::NotAnObject),
            (Kind::Uint, json!({}), ConditionError::Empty),
            (
                Kind::Uint,
                json!({"le": "1"}),
                ConditionError::UnknownOperator("le".into()),
            ),
            (Kind::Uint, json!({"eq": "-1"}), malformed("eq")),
            (Kind::Uint, json!({"eq": "1.5"}), malformed("eq")),
            (
                Kind::Uint,
                json!({"in": "1"}),
                ConditionError::NotAList { op: "in".into() },
            ),
            (Kind::Uint, json!({"in": ["1", "x"]}), malformed("in")),
            (Kind::Address, json!({"eq": "0x1234"}), malformed("eq")),
            (Kind::Address, json!({"eq": "$owner"}), malformed("eq")),
            (
                Kind::Address,
                json!({"lt": "$agent"}),
                ConditionError::NotOrdered { op: "lt".into() },
            ),
            (
                Kind::Bool,
                json!({"gte": true}),
                ConditionError::NotOrdered { op: "gte".into() },
            ),
            (Kind::Bool, json!({"eq": "true"}), malformed("eq")),
            (Kind::Bytes, json!({"eq": "abcd"}), malformed("eq")),
            (Kind::Native, json!({"lte": "0.0000000000000000001"}), malformed("lte")),
            (
                Kind::Loose,
                json!({"lt": "abc"}),
                ConditionError::NotOrdered { op: "lt".into() },
            ),
            (Kind::Loose, json!({"eq": null}), malformed("eq")),
        ];
        for (kind, condition, expected) in cases {
            let got = Condition::parse(&condition, kind).expect_err("refused");
            let same = match (&got, &expected) {
                (ConditionError::Malformed { op: a, .. }, ConditionError::Malformed { op: b, .. }) => a == b,
                _ => got == expected,
            };
            assert!(same, "{kind:?} {condition}: {got:?}");
        }
    }

    #[test]
    fn typed_data_operands_are_read_by_their_spelling() {
        let cases = [
            (json!(OTHER.to_string()), Operand::Address(OTHER)),
            (json!("$agent"), Operand::Agent),
            (json!("0x0102"), Operand::Bytes(vec![1, 2])),
            (json!("100"), uint(100)),
            (json!(7), uint(7)),
            (json!("-3"), Operand::Int(I256::try_from(-3).expect("i"))),
            (json!(true), Operand::Bool(true)),
            (json!("Permit"), Operand::String("Permit".into())),
        ];
        for (json, expected) in cases {
            assert_eq!(read_operand(&json, Kind::Loose, "eq"), Ok(expected), "{json}");
        }
    }

    #[test]
    fn conditions_are_written_back_as_read() {
        let cases = [
            (
                Kind::Uint,
                json!({"gte": 1, "lte": "10"}),
                json!({"gte": "1", "lte": "10"}),
            ),
            (
                Kind::Address,
                json!({"in": ["$agent", format!("{OTHER:#x}")]}),
                json!({"in": ["$agent", OTHER.to_checksum(None)]}),
            ),
            (Kind::Bytes, json!({"ne": "0xABCD"}), json!({"ne": "0xabcd"})),
        ];
        for (kind, input, written) in cases {
            let condition = Condition::parse(&input, kind).expect("valid");
            assert_eq!(condition.to_json(), written);
            assert_eq!(Condition::parse(&written, kind), Ok(condition));
        }
    }
}
