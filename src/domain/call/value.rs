//! Solidity values as the API writes them (§18): addresses and byte strings as 0x-hex, integers as decimal
//! strings (JSON integers accepted on the way in), booleans, arrays and tuples as JSON arrays. The ABI codec itself
//! is alloy's; this module only maps between its `DynSolValue` and that JSON spelling, naming the position of
//! whatever does not fit.

use alloy::dyn_abi::{DynSolType, DynSolValue};
use alloy::primitives::{Address, B256, I256, U256};
use serde_json::Value;

/// What is wrong with one argument.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ArgProblem {
    #[error("must be a 0x address of 20 bytes")]
    Address,
    #[error("must be an integer (a decimal string) that fits {0}")]
    Integer(String),
    #[error("must be true or false")]
    Bool,
    #[error("must be 0x-hex bytes")]
    Hex,
    #[error("must be 0x-hex of exactly {0} bytes")]
    ByteLength(usize),
    #[error("must be a string")]
    String,
    #[error("must be an array")]
    Array,
    #[error("must be an array of {0} elements")]
    Length(usize),
}

/// An argument that does not fit its type; `path` names it as the API reports it (`args[1]`, `args[2][0]`).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{path} {problem}")]
pub struct ArgError {
    pub path: String,
    pub problem: ArgProblem,
}

/// Converts one JSON argument into a value of `ty`, strictly: no unit suffixes, no silent truncation.
pub fn from_json(ty: &DynSolType, json: &Value, path: &str) -> Result<DynSolValue, ArgError> {
    let fail = |problem| ArgError {
        path: path.to_string(),
        problem,
    };
    match ty {
        DynSolType::Address => json
            .as_str()
            .and_then(|s| s.trim().parse::<Address>().ok())
            .map(DynSolValue::Address)
            .ok_or_else(|| fail(ArgProblem::Address)),
        DynSolType::Bool => json
            .as_bool()
            .map(DynSolValue::Bool)
            .ok_or_else(|| fail(ArgProblem::Bool)),
        DynSolType::Uint(bits) => parse_uint(json)
            .filter(|v| v.bit_len() <= *bits)
            .map(|v| DynSolValue::Uint(v, *bits))
            .ok_or_else(|| fail(ArgProblem::Integer(format!("uint{bits}")))),
        DynSolType::Int(bits) => parse_int(json)
            .filter(|v| int_fits(*v, *bits))
            .map(|v| DynSolValue::Int(v, *bits))
            .ok_or_else(|| fail(ArgProblem::Integer(format!("int{bits}")))),
        DynSolType::Bytes => hex_bytes(json)
            .map(DynSolValue::Bytes)
            .ok_or_else(|| fail(ArgProblem::Hex)),
        DynSolType::FixedBytes(size) => hex_bytes(json)
            .filter(|b| b.len() == *size)
            .map(|b| DynSolValue::FixedBytes(B256::right_padding_from(&b), *size))
            .ok_or_else(|| fail(ArgProblem::ByteLength(*size))),
        DynSolType::Function => hex_bytes(json)
            .filter(|b| b.len() == 24)
            .map(|b| DynSolValue::Function(alloy::primitives::Function::from_slice(&b)))
            .ok_or_else(|| fail(ArgProblem::ByteLength(24))),
        DynSolType::String => json
            .as_str()
            .map(|s| DynSolValue::String(s.to_string()))
            .ok_or_else(|| fail(ArgProblem::String)),
        DynSolType::Array(inner) => {
            let items = json.as_array().ok_or_else(|| fail(ArgProblem::Array))?;
            elements(std::iter::repeat(inner.as_ref()), items, path).map(DynSolValue::Array)
        }
        DynSolType::FixedArray(inner, len) => {
            let items = json
                .as_array()
                .filter(|a| a.len() == *len)
                .ok_or_else(|| fail(ArgProblem::Length(*len)))?;
            elements(std::iter::repeat(inner.as_ref()), items, path).map(DynSolValue::FixedArray)
        }
        DynSolType::Tuple(types) => {
            let items = json
                .as_array()
                .filter(|a| a.len() == types.len())
                .ok_or_else(|| fail(ArgProblem::Length(types.len())))?;
            elements(types.iter(), items, path).map(DynSolValue::Tuple)
        }
        #[allow(unreachable_patterns)] // `CustomStruct` exists only with alloy's `eip712` feature.
        _ => Err(fail(ArgProblem::Array)),
    }
}

fn elements<'t>(
    types: impl Iterator<Item = &'t DynSolType>,
    items: &[Value],
    path: &str,
) -> Result<Vec<DynSolValue>, ArgError> {
    types
        .zip(items)
        .enumerate()
        .map(|(i, (ty, item))| from_json(ty, item, &format!("{path}[{i}]")))
        .collect()
}

/// A non-negative integer: a decimal string of digits only, or a JSON integer.
pub fn parse_uint(json: &Value) -> Option<U256> {
    match json {
        Value::String(s) if !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit()) => U256::from_str_radix(s, 10).ok(),
        Value::Number(n) => n.as_u64().map(U256::from),
        _ => None,
    }
}

/// A signed integer: a decimal string (optionally starting with `-`), or a JSON integer.
pub fn parse_int(json: &Value) -> Option<I256> {
    match json {
        Value::String(s) => {
            let digits = s.strip_prefix('-').unwrap_or(s);
            if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
                return None;
            }
            I256::from_dec_str(s).ok()
        }
        Value::Number(n) => n.as_i64().map(I256::try_from).and_then(Result::ok),
        _ => None,
    }
}

/// Whether `v` lies in the range of `int<bits>`: -2^(bits-1) ..= 2^(bits-1) - 1.
fn int_fits(v: I256, bits: usize) -> bool {
    if bits >= 256 {
        return true;
    }
    let half = I256::from_raw(U256::from(1u8) << (bits - 1));
    v >= -half && v < half
}

/// `0x`-prefixed hex of whole bytes (either case).
pub fn hex_bytes(json: &Value) -> Option<Vec<u8>> {
    let text = json.as_str()?.trim();
    let digits = text.strip_prefix("0x").or_else(|| text.strip_prefix("0X"))?;
    alloy::hex::decode(digits).ok()
}

/// The JSON spelling of a decoded value: addresses EIP-55 checksummed (the form the rest of the API answers),
/// integers as decimal strings (JSON numbers lose precision past 2^53), bytes as lower-case 0x-hex.
pub fn to_json(value: &DynSolValue) -> Value {
    match value {
        DynSolValue::Address(a) => Value::String(a.to_checksum(None)),
        DynSolValue::Bool(b) => Value::Bool(*b),
        DynSolValue::Uint(v, _) => Value::String(v.to_string()),
        DynSolValue::Int(v, _) => Value::String(v.to_string()),
        DynSolValue::FixedBytes(word, size) => Value::String(alloy::hex::encode_prefixed(&word[..*size])),
        DynSolValue::Bytes(b) => Value::String(alloy::hex::encode_prefixed(b)),
        DynSolValue::Function(f) => Value::String(alloy::hex::encode_prefixed(f.as_slice())),
        DynSolValue::String(s) => Value::String(s.clone()),
        DynSolValue::Array(items) | DynSolValue::FixedArray(items) | DynSolValue::Tuple(items) => {
            Value::Array(items.iter().map(to_json).collect())
        }
        #[allow(unreachable_patterns)] // `CustomStruct` exists only with alloy's `eip712` feature.
        _ => Value::Null,
    }
}

/// A short human spelling for messages (`Nope(0xAb…, 42)`): like `to_json`, but strings quoted and tuples in
/// parentheses.
pub fn display(value: &DynSolValue) -> String {
    let list = |items: &[DynSolValue]| items.iter().map(display).collect::<Vec<_>>().join(", ");
    match value {
        DynSolValue::String(s) => Value::String(s.clone()).to_string(),
        DynSolValue::Tuple(items) => format!("({})", list(items)),
        DynSolValue::Array(items) | DynSolValue::FixedArray(items) => format!("[{}]", list(items)),
        other => match to_json(other) {
            Value::String(s) => s,
            json => json.to_string(),
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn ty(text: &str) -> DynSolType {
        text.parse().expect("type")
    }

    #[test]
    fn json_arguments_become_values_of_their_type() {
        let a = Address::repeat_byte(0xab);
        let cases: &[(&str, Value, DynSolValue)] = &[
            ("address", json!(a.to_string()), DynSolValue::Address(a)),
            ("address", json!(a.to_string().to_lowercase()), DynSolValue::Address(a)),
            ("bool", json!(true), DynSolValue::Bool(true)),
            (
                "uint256",
                json!("12345678901234567890123"),
                DynSolValue::Uint(U256::from(12345678901234567890123u128), 256),
            ),
            ("uint256", json!(7), DynSolValue::Uint(U256::from(7), 256)),
            ("uint8", json!("255"), DynSolValue::Uint(U256::from(255), 8)),
            (
                "int8",
                json!("-128"),
                DynSolValue::Int(I256::try_from(-128).expect("i"), 8),
            ),
            ("int8", json!(127), DynSolValue::Int(I256::try_from(127).expect("i"), 8)),
            (
                "bytes",
                json!("0xdeadBEEF"),
                DynSolValue::Bytes(vec![0xde, 0xad, 0xbe, 0xef]),
            ),
            ("bytes", json!("0x"), DynSolValue::Bytes(vec![])),
            (
                "bytes2",
                json!("0x0102"),
                DynSolValue::FixedBytes(B256::right_padding_from(&[1, 2]), 2),
            ),
            ("string", json!("hi"), DynSolValue::String("hi".into())),
            (
                "uint256[]",
                json!(["1", 2]),
                DynSolValue::Array(vec![
                    DynSolValue::Uint(U256::from(1), 256),
                    DynSolValue::Uint(U256::from(2), 256),
                ]),
            ),
            (
                "bool[1]",
                json!([false]),
                DynSolValue::FixedArray(vec![DynSolValue::Bool(false)]),
            ),
            (
                "(address,uint160)",
                json!([a.to_string(), "5"]),
                DynSolValue::Tuple(vec![DynSolValue::Address(a), DynSolValue::Uint(U256::from(5), 160)]),
            ),
        ];
        for (text, json, expected) in cases {
            assert_eq!(
                &from_json(&ty(text), json, "args[0]").expect(text),
                expected,
                "{text} {json}"
            );
        }
    }

    #[test]
    fn arguments_that_do_not_fit_name_their_position() {
        let cases: &[(&str, Value, &str, ArgProblem)] = &[
            ("address", json!("0x1234"), "args[0]", ArgProblem::Address),
            ("address", json!(5), "args[0]", ArgProblem::Address),
            ("bool", json!("true"), "args[0]", ArgProblem::Bool),
            ("uint8", json!("256"), "args[0]", ArgProblem::Integer("uint8".into())),
            ("uint256", json!("-1"), "args[0]", ArgProblem::Integer("uint256".into())),
            ("uint256", json!(-1), "args[0]", ArgProblem::Integer("uint256".into())),
            ("uint256", json!(1.5), "args[0]", ArgProblem::Integer("uint256".into())),
            (
                "uint256",
                json!("1e18"),
                "args[0]",
                ArgProblem::Integer("uint256".into()),
            ),
            ("uint256", json!(" 1"), "args[0]", ArgProblem::Integer("uint256".into())),
            ("uint256", json!(""), "args[0]", ArgProblem::Integer("uint256".into())),
            (
                "uint256",
                json!("0x10"),
                "args[0]",
                ArgProblem::Integer("uint256".into()),
            ),
            ("int8", json!("128"), "args[0]", ArgProblem::Integer("int8".into())),
            ("int8", json!("-129"), "args[0]", ArgProblem::Integer("int8".into())),
            ("int8", json!("-"), "args[0]", ArgProblem::Integer("int8".into())),
            ("bytes", json!("dead"), "args[0]", ArgProblem::Hex),
            ("bytes", json!("0xabc"), "args[0]", ArgProblem::Hex),
            ("bytes2", json!("0x010203"), "args[0]", ArgProblem::ByteLength(2)),
            ("string", json!(1), "args[0]", ArgProblem::String),
            ("uint256[]", json!("1"), "args[0]", ArgProblem::Array),
            (
                "uint256[]",
                json!(["1", "x"]),
                "args[0][1]",
                ArgProblem::Integer("uint256".into()),
            ),
            ("bool[2]", json!([true]), "args[0]", ArgProblem::Length(2)),
            (
                "(address,bool)",
                json!([Address::ZERO.to_string()]),
                "args[0]",
                ArgProblem::Length(2),
            ),
            (
                "(address,(bool,uint8))",
                json!([Address::ZERO.to_string(), [true, "300"]]),
                "args[0][1][1]",
                ArgProblem::Integer("uint8".into()),
            ),
        ];
        for (text, json, path, problem) in cases {
            let err = from_json(&ty(text), json, "args[0]").expect_err(text);
            assert_eq!((err.path.as_str(), &err.problem), (*path, problem), "{text} {json}");
        }
    }

    #[test]
    fn values_render_as_the_api_writes_them() {
        let a: Address = "0x5aaeb6053f3e94c9b9a09f33669435e7ef1beaed".parse().expect("address");
        let value = DynSolValue::Tuple(vec![
            DynSolValue::Address(a),
            DynSolValue::Uint(U256::MAX, 256),
            DynSolValue::Int(I256::MINUS_ONE, 256),
            DynSolValue::FixedBytes(B256::right_padding_from(&[0xAB]), 1),
            DynSolValue::String("x".into()),
        ]);
        let max = U256::MAX.to_string();
        assert_eq!(
            to_json(&value),
            json!(["0x5aAeb6053F3E94C9b9A09f33669435E7Ef1BeAed", max, "-1", "0xab", "x"])
        );
        assert_eq!(
            display(&value),
            format!("(0x5aAeb6053F3E94C9b9A09f33669435E7Ef1BeAed, {max}, -1, 0xab, \"x\")")
        );
    }
}
