//! What the calldata actually sent means (§18 `call`): the selector always; the function and its arguments when
//! some known signature both has that selector and decodes the data. Whatever the request said, the bytes decide,
//! so an owner reads what will be signed, not what was claimed.

use alloy::dyn_abi::{DynSolValue, JsonAbiExt};
use alloy::json_abi::{Function, JsonAbi};
use serde::Serialize;
use serde_json::Value;

use super::{known, request, value};

/// The API's `call` fields besides `to`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct DecodedCall {
    /// `0x` + 8 lower-case hex digits; empty calldata (a plain value send) has none.
    pub selector: Option<String>,
    /// The canonical signature (`name(type,…)`, no spaces, no parameter names), `None` when unknown.
    pub function: Option<String>,
    /// The arguments in order, spelled as a request spells them (addresses EIP-55 checksummed, integers as
    /// decimal strings), `None` when unknown.
    pub args: Option<Vec<Value>>,
}

/// A call decoded against one signature: the function it matched and its values.
#[derive(Debug, Clone)]
pub struct Matched<'a> {
    pub function: &'a Function,
    pub values: Vec<DynSolValue>,
}

/// Finds the first signature that explains `calldata`, in order: the request's own, the standard set, then the
/// functions of `abi` (the policy's ABI for that chain and contract). A signature explains it when the selector is
/// its own and the rest decodes as its inputs.
pub fn identify<'a>(calldata: &[u8], requested: Option<&'a Function>, abi: Option<&'a JsonAbi>) -> Option<Matched<'a>> {
    let selector = request::selector(calldata)?;
    let candidates = requested
        .into_iter()
        .chain(known::function(selector))
        .chain(abi.into_iter().flat_map(|abi| abi.functions()));
    candidates.filter(|f| f.selector() == selector).find_map(|function| {
        let values = function.abi_decode_input(&calldata[4..]).ok()?;
        Some(Matched { function, values })
    })
}

/// The `call` view of `calldata` (see `identify` for the order in which signatures are tried).
pub fn decode(calldata: &[u8], requested: Option<&Function>, abi: Option<&JsonAbi>) -> DecodedCall {
    let matched = identify(calldata, requested, abi);
    DecodedCall {
        selector: request::selector_hex(calldata),
        function: matched.as_ref().map(|m| m.function.signature()),
        args: matched.map(|m| m.values.iter().map(value::to_json).collect()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::call::request::{CallInput, encode, parse_function};
    use alloy::primitives::Address;
    use serde_json::json;

    fn calldata(signature: &str, args: Value) -> Vec<u8> {
        let args = args.as_array().cloned().unwrap_or_default();
        encode(CallInput::Function { signature, args: &args })
            .expect(signature)
            .calldata
            .to_vec()
    }

    const SPENDER: &str = "0x5aAeb6053F3E94C9b9A09f33669435E7Ef1BeAed";

    #[test]
    fn standard_functions_are_named_without_an_abi() {
        let cases = [
            ("approve(address,uint256)", json!([SPENDER, "5"])),
            ("increaseAllowance(address,uint256)", json!([SPENDER, "5"])),
            ("setApprovalForAll(address,bool)", json!([SPENDER, true])),
            ("deposit()", json!([])),
            ("withdraw(uint256)", json!(["1"])),
            (
                "approve(address,address,uint160,uint48)",
                json!([SPENDER, SPENDER, "7", "9"]),
            ),
            (
                "permit(address,((address,uint160,uint48,uint48),address,uint256),bytes)",
                json!([SPENDER, [[SPENDER, "1", "2", "3"], SPENDER, "4"], "0x01"]),
            ),
        ];
        for (signature, args) in cases {
            let decoded = decode(&calldata(signature, args.clone()), None, None);
            assert_eq!(decoded.function.as_deref(), Some(signature));
            assert_eq!(decoded.args, args.as_array().cloned(), "{signature}");
        }
    }

    #[test]
    fn addresses_come_back_checksummed() {
        let lower = SPENDER.to_lowercase();
        let decoded = decode(&calldata("transfer(address,uint256)", json!([lower, 1])), None, None);
        assert_eq!(decoded.args, Some(vec![json!(SPENDER), json!("1")]));
        assert_eq!(decoded.selector.as_deref(), Some("0xa9059cbb"));
    }

    #[test]
    fn the_request_signature_comes_first_then_standard_then_the_policy_abi() {
        let custom = "swapExactETHForTokens(uint256,address[],address,uint256)";
        let data = calldata(custom, json!(["1", [SPENDER], SPENDER, "99"]));
        // Unknown without help.
        let unknown = decode(&data, None, None);
        assert_eq!(
            (unknown.selector.as_deref(), unknown.function, unknown.args),
            (Some("0x7ff36ab5"), None, None)
        );
        // Named by the request's own signature.
        let requested = parse_function(custom).expect("parses");
        assert_eq!(decode(&data, Some(&requested), None).function.as_deref(), Some(custom));
        // Named by an ABI from the policy, names dropped from the canonical form.
        let abi = JsonAbi::parse([
            "function swapExactETHForTokens(uint amountOutMin, address[] path, address to, uint deadline) payable",
        ])
        .expect("abi");
        let by_abi = identify(&data, None, Some(&abi)).expect("matched");
        assert_eq!(by_abi.function.signature(), custom);
        assert_eq!(by_abi.function.inputs[1].name, "path");
    }

    #[test]
    fn calldata_that_does_not_decode_stays_unknown() {
        let mut data = calldata("approve(address,uint256)", json!([SPENDER, "1"]));
        data.truncate(4 + 32);
        let decoded = decode(&data, None, None);
        assert_eq!((decoded.function, decoded.args), (None, None));
        assert_eq!(decoded.selector.as_deref(), Some("0x095ea7b3"));
    }

    #[test]
    fn a_request_signature_for_another_selector_is_not_used() {
        let data = calldata("approve(address,uint256)", json!([Address::ZERO.to_string(), "1"]));
        let other = parse_function("notApprove(address,uint256)").expect("parses");
        let decoded = decode(&data, Some(&other), None);
        assert_eq!(decoded.function.as_deref(), Some("approve(address,uint256)"));
    }

    #[test]
    fn empty_calldata_has_no_selector() {
        assert_eq!(
            decode(&[], None, None),
            DecodedCall {
                selector: None,
                function: None,
                args: None
            }
        );
    }
}
