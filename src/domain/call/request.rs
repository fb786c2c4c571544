//! The calldata of a call request (§18): given whole as `data`, or built from a Solidity signature and JSON
//! `args`. Errors name the field at fault (`data`, `function`, `args`, `args[1][0]`) so the API can answer 422
//! `validation_failed` with them.

use alloy::dyn_abi::{JsonAbiExt, Specifier};
use alloy::json_abi::Function;
use alloy::primitives::{Bytes, Selector};
use serde_json::Value;

use super::value::{self, ArgError};

/// How a request spells its call.
#[derive(Debug, Clone, Copy)]
pub enum CallInput<'a> {
    /// `data`: 0x-hex calldata, selector included.
    Data(&'a str),
    /// `function` + `args`.
    Function { signature: &'a str, args: &'a [Value] },
}

/// The calldata to send, with the function the request named (it is the first tried when decoding).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Encoded {
    pub calldata: Bytes,
    pub function: Option<Function>,
}

/// Why a call request cannot be encoded.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RequestError {
    #[error("must be 0x-hex calldata")]
    DataNotHex,
    #[error("must hold at least a 4-byte selector")]
    DataTooShort,
    #[error("is not a Solidity function signature such as approve(address,uint256): {0}")]
    UnparsableFunction(String),
    #[error("must list {expected} arguments, got {got}")]
    ArgCount { expected: usize, got: usize },
    #[error(transparent)]
    Arg(#[from] ArgError),
    #[error("cannot be encoded: {0}")]
    Encoding(String),
}

impl RequestError {
    /// The request field the error belongs to, as the API names it in `details`.
    pub fn field(&self) -> String {
        match self {
            RequestError::DataNotHex | RequestError::DataTooShort => "data".into(),
            RequestError::UnparsableFunction(_) => "function".into(),
            RequestError::ArgCount { .. } | RequestError::Encoding(_) => "args".into(),
            RequestError::Arg(e) => e.path.clone(),
        }
    }
}

/// The calldata a request asks for.
pub fn encode(input: CallInput<'_>) -> Result<Encoded, RequestError> {
    match input {
        CallInput::Data(hex) => {
            let bytes = value::hex_bytes(&Value::String(hex.to_string())).ok_or(RequestError::DataNotHex)?;
            if bytes.len() < 4 {
                return Err(RequestError::DataTooShort);
            }
            Ok(Encoded {
                calldata: bytes.into(),
                function: None,
            })
        }
        CallInput::Function { signature, args } => {
            let function = parse_function(signature)?;
            if args.len() != function.inputs.len() {
                return Err(RequestError::ArgCount {
                    expected: function.inputs.len(),
                    got: args.len(),
                });
            }
            let mut values = Vec::with_capacity(args.len());
            for (i, (param, arg)) in function.inputs.iter().zip(args).enumerate() {
                let ty = param
                    .resolve()
                    .map_err(|e| RequestError::UnparsableFunction(e.to_string()))?;
                values.push(value::from_json(&ty, arg, &format!("args[{i}]"))?);
            }
            let calldata = function
                .abi_encode_input(&values)
                .map_err(|e| RequestError::Encoding(e.to_string()))?;
            Ok(Encoded {
                calldata: calldata.into(),
                function: Some(function),
            })
        }
    }
}

/// Parses a signature as people write it (`approve(address,uint256)`, `function approve(address spender, uint
/// amount)`, tuples and arrays), refusing anything that is not a function with a name.
pub fn parse_function(signature: &str) -> Result<Function, RequestError> {
    let text = signature.trim();
    let text = text.strip_prefix("function ").unwrap_or(text);
    let function = Function::parse(text).map_err(|e| RequestError::UnparsableFunction(e.to_string()))?;
    if function.name.is_empty() {
        return Err(RequestError::UnparsableFunction("the function has no name".into()));
    }
    for param in &function.inputs {
        param
            .resolve()
            .map_err(|e| RequestError::UnparsableFunction(e.to_string()))?;
    }
    Ok(function)
}

/// The 4-byte selector of calldata; `None` when it is shorter (a plain value send, a `receive`).
pub fn selector(calldata: &[u8]) -> Option<Selector> {
    calldata.get(..4).map(Selector::from_slice)
}

/// `0x` + 8 lower-case hex digits, the API's spelling of a selector.
pub fn selector_hex(calldata: &[u8]) -> Option<String> {
    selector(calldata).map(|s| alloy::hex::encode_prefixed(s.as_slice()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use alloy::primitives::{Address, U256};
    use serde_json::json;

    #[test]
    fn signatures_are_parsed_to_their_canonical_form() {
        let cases = [
            ("approve(address,uint256)", "approve(address,uint256)", "0x095ea7b3"),
            (
                "function approve(address spender, uint amount)",
                "approve(address,uint256)",
                "0x095ea7b3",
            ),
            (
                " permit(address,((address,uint160,uint48,uint48),address,uint256),bytes) ",
                "permit(address,((address,uint160,uint48,uint48),address,uint256),bytes)",
                "0x2b67b570",
            ),
            (
                "safeBatchTransferFrom(address,address,uint256[],uint256[],bytes)",
                "safeBatchTransferFrom(address,address,uint256[],uint256[],bytes)",
                "0x2eb2c2d6",
            ),
            ("deposit()", "deposit()", "0xd0e30db0"),
        ];
        for (text, canonical, selector) in cases {
            let f = parse_function(text).expect(text);
            assert_eq!(f.signature(), canonical);
            assert_eq!(alloy::hex::encode_prefixed(f.selector()), selector);
        }
    }

    #[test]
    fn unparsable_signatures_are_refused() {
        for text in [
            "",
            "approve",
            "approve(address,uint256",
            "approve(adress,uint256)",
            "(address)",
            "event X(uint256)",
        ] {
            assert!(
                matches!(parse_function(text), Err(RequestError::UnparsableFunction(_))),
                "{text}"
            );
        }
    }

    #[test]
    fn data_must_be_hex_with_a_selector() {
        let cases: [(&str, Result<&[u8], RequestError>); 6] = [
            ("0x095ea7b3", Ok(&[0x09, 0x5e, 0xa7, 0xb3])),
            ("0X095EA7B3ff", Ok(&[0x09, 0x5e, 0xa7, 0xb3, 0xff])),
            ("0x095ea7", Err(RequestError::DataTooShort)),
            ("0x", Err(RequestError::DataTooShort)),
            ("095ea7b3", Err(RequestError::DataNotHex)),
            ("0x095ea7b", Err(RequestError::DataNotHex)),
        ];
        for (hex, expected) in cases {
            let got = encode(CallInput::Data(hex)).map(|e| e.calldata.to_vec());
            assert_eq!(got, expected.map(<[u8]>::to_vec), "{hex}");
        }
    }

    #[test]
    fn function_and_args_are_encoded_by_the_abi() {
        let spender = Address::repeat_byte(0x22);
        let args = [json!(spender.to_string()), json!("1000")];
        let encoded = encode(CallInput::Function {
            signature: "approve(address,uint256)",
            args: &args,
        })
        .expect("encodes");
        assert_eq!(selector_hex(&encoded.calldata).as_deref(), Some("0x095ea7b3"));
        assert_eq!(encoded.calldata.len(), 4 + 64);
        assert_eq!(&encoded.calldata[16..36], spender.as_slice());
        assert_eq!(U256::from_be_slice(&encoded.calldata[36..]), U256::from(1000));
        assert_eq!(
            encoded.function.map(|f| f.signature()).as_deref(),
            Some("approve(address,uint256)")
        );
    }

    #[test]
    fn bad_arguments_are_named_by_position() {
        let cases: [(&str, Value, &str); 4] = [
            ("approve(address,uint256)", json!(["0x1", "1"]), "args[0]"),
            (
                "approve(address,uint256)",
                json!([Address::ZERO.to_string(), "x"]),
                "args[1]",
            ),
            ("approve(address,uint256)", json!([Address::ZERO.to_string()]), "args"),
            (
                "f((address,uint256)[])",
                json!([[[Address::ZERO.to_string(), "-1"]]]),
                "args[0][0][1]",
            ),
        ];
        for (signature, args, field) in cases {
            let args = args.as_array().cloned().unwrap_or_default();
            let err = encode(CallInput::Function { signature, args: &args }).expect_err(signature);
            assert_eq!(err.field(), field, "{signature}: {err}");
        }
    }

    #[test]
    fn selectors_need_four_bytes() {
        assert_eq!(
            selector_hex(&[0xA9, 0x05, 0x9C, 0xBB, 0]).as_deref(),
            Some("0xa9059cbb")
        );
        assert_eq!(selector_hex(&[0xA9, 0x05, 0x9C]), None);
        assert_eq!(selector_hex(&[]), None);
    }
}
