//! Unlimited allowances (§18), refused unless the policy says `allow_unlimited_approvals`: a spender holding one
//! can take the agent's whole balance, now or later, in transactions the agent never signs.

use alloy::primitives::U256;
use serde_json::Value;

use super::decode::DecodedCall;
use super::value::parse_uint;

/// Whether an allowance amount means "infinite": 2^255 or more (uint256 max and its neighbours, which no real
/// amount approaches), or exactly 2^96−1, 2^128−1 or 2^160−1, the maxima that tokens with narrower balances and
/// Permit2 (uint160) treat as infinite.
pub fn is_unlimited_amount(amount: U256) -> bool {
    let max_of = |bits: usize| (U256::from(1u8) << bits) - U256::from(1u8);
    amount >= U256::from(1u8) << 255 || [96, 128, 160].into_iter().any(|bits| amount == max_of(bits))
}

/// Whether calldata grants an unlimited allowance: `approve`, `increaseAllowance`, Permit2's `approve` and
/// `permit` (single and batch), EIP-2612 `permit` with an unlimited amount, DAI's `permit` with `allowed: true`,
/// or `setApprovalForAll(…, true)`. ERC-721's `approve(address,uint256)` shares ERC-20's selector and types, so a
/// token id that looks unlimited is refused too: erring towards refusal, and no real token id is 2^255.
///
/// Permits submitted as calls are judged whoever their owner is: an agent relaying someone else's permit is rare,
/// and a permit of its own would otherwise slip past the guard.
pub fn grants_unlimited(decoded: &DecodedCall) -> bool {
    let (Some(function), Some(args)) = (decoded.function.as_deref(), decoded.args.as_deref()) else {
        return false;
    };
    let unlimited_at = |path: &[usize]| at(args, path).and_then(parse_uint).is_some_and(is_unlimited_amount);
    // Permit2 keeps uint160 amounts: 2^159 and more is unlimited there (§18).
    let permit2_unlimited_at = |path: &[usize]| {
        at(args, path)
            .and_then(parse_uint)
            .is_some_and(is_unlimited_permit2_amount)
    };
    let is_true = |i: usize| args.get(i).and_then(Value::as_bool) == Some(true);
    match function {
        "approve(address,uint256)" | "increaseAllowance(address,uint256)" => unlimited_at(&[1]),
        "approve(address,address,uint160,uint48)" => permit2_unlimited_at(&[2]),
        "setApprovalForAll(address,bool)" => is_true(1),
        "permit(address,address,uint256,uint256,uint8,bytes32,bytes32)" => unlimited_at(&[2]),
        "permit(address,address,uint256,uint256,bool,uint8,bytes32,bytes32)" => is_true(4),
        // PermitSingle: (details (token, amount, expiration, nonce), spender, sigDeadline).
        "permit(address,((address,uint160,uint48,uint48),address,uint256),bytes)" => permit2_unlimited_at(&[1, 0, 1]),
        "permit(address,((address,uint160,uint48,uint48)[],address,uint256),bytes)" => {
            at(args, &[1, 0]).and_then(Value::as_array).is_some_and(|details| {
                details.iter().any(|d| {
                    at_one(d, 1)
                        .and_then(parse_uint)
                        .is_some_and(is_unlimited_permit2_amount)
                })
            })
        }
        _ => false,
    }
}

/// Whether a Permit2 allowance amount means "infinite": 2^159 or more (§18), besides the amounts above.
pub fn is_unlimited_permit2_amount(amount: U256) -> bool {
    amount >= U256::from(1u8) << 159 || is_unlimited_amount(amount)
}

fn at_one(value: &Value, i: usize) -> Option<&Value> {
    value.as_array()?.get(i)
}

fn at<'a>(args: &'a [Value], path: &[usize]) -> Option<&'a Value> {
    let (first, rest) = path.split_first()?;
    rest.iter().try_fold(args.get(*first)?, |v, i| at_one(v, *i))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn pow2(bits: usize) -> U256 {
        U256::from(1u8) << bits
    }

    #[test]
    fn unlimited_amounts_are_the_known_maxima_and_everything_from_2_255() {
        let one = U256::from(1u8);
        let cases = [
            (U256::ZERO, false),
            (U256::from(1_000_000u64), false),
            (pow2(96) - one, true),
            (pow2(96) - U256::from(2u8), false),
            (pow2(96), false),
            (pow2(128) - one, true),
            (pow2(128), false),
            (pow2(160) - one, true),
            (pow2(160) - U256::from(2u8), false),
            (pow2(160), false),
            (pow2(255) - one, false),
            (pow2(255), true),
            (pow2(255) + one, true),
            (U256::MAX - one, true),
            (U256::MAX, true),
        ];
        for (amount, expected) in cases {
            assert_eq!(is_unlimited_amount(amount), expected, "{amount}");
        }
    }

    fn call(function: &str, args: Value) -> DecodedCall {
        DecodedCall {
            selector: None,
            function: Some(function.into()),
            args: args.as_array().cloned(),
        }
    }

    #[test]
    fn calls_that_grant_unlimited_allowances() {
        let max = U256::MAX.to_string();
        let p2 = (pow2(160) - U256::from(1u8)).to_string();
        let a = "0x5aAeb6053F3E94C9b9A09f33669435E7Ef1BeAed";
        let cases = [
            ("approve(address,uint256)", json!([a, max]), true),
            ("approve(address,uint256)", json!([a, "1000"]), false),
            ("increaseAllowance(address,uint256)", json!([a, max]), true),
            ("decreaseAllowance(address,uint256)", json!([a, max]), false),
            ("approve(address,address,uint160,uint48)", json!([a, a, p2, "0"]), true),
            (
                "approve(address,address,uint160,uint48)",
                json!([a, a, "5", "0"]),
                false,
            ),
            ("setApprovalForAll(address,bool)", json!([a, true]), true),
            ("setApprovalForAll(address,bool)", json!([a, false]), false),
            (
                "permit(address,address,uint256,uint256,uint8,bytes32,bytes32)",
                json!([a, a, max, "1", "27", "0x", "0x"]),
                true,
            ),
            (
                "permit(address,address,uint256,uint256,uint8,bytes32,bytes32)",
                json!([a, a, "1", "1", "27", "0x", "0x"]),
                false,
            ),
            (
                "permit(address,address,uint256,uint256,bool,uint8,bytes32,bytes32)",
                json!([a, a, "0", "0", true, "27", "0x", "0x"]),
                true,
            ),
            (
                "permit(address,address,uint256,uint256,bool,uint8,bytes32,bytes32)",
                json!([a, a, "0", "0", false, "27", "0x", "0x"]),
                false,
            ),
            (
                "permit(address,((address,uint160,uint48,uint48),address,uint256),bytes)",
                json!([a, [[a, p2, "0", "0"], a, "0"], "0x"]),
                true,
            ),
            (
                "permit(address,((address,uint160,uint48,uint48),address,uint256),bytes)",
                json!([a, [[a, "9", "0", "0"], a, "0"], "0x"]),
                false,
            ),
            (
                "permit(address,((address,uint160,uint48,uint48)[],address,uint256),bytes)",
                json!([a, [[[a, "9", "0", "0"], [a, p2, "0", "0"]], a, "0"], "0x"]),
                true,
            ),
            (
                "permit(address,((address,uint160,uint48,uint48)[],address,uint256),bytes)",
                json!([a, [[[a, "9", "0", "0"]], a, "0"], "0x"]),
                false,
            ),
            ("transfer(address,uint256)", json!([a, max]), false),
        ];
        for (function, args, expected) in cases {
            assert_eq!(grants_unlimited(&call(function, args)), expected, "{function}");
        }
        let unknown = DecodedCall {
            selector: Some("0x095ea7b3".into()),
            function: None,
            args: None,
        };
        assert!(!grants_unlimited(&unknown));
    }
}
