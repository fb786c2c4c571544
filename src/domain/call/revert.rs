//! Why a simulated call reverted, in words (§18 `call_reverted` `details.reason`). The node gives only the raw
//! `returnData` (of `eth_simulateV1` or `debug_traceCall`): a revert string, a panic code, a custom error, or nothing.

use alloy::dyn_abi::JsonAbiExt;
use alloy::json_abi::{Error, JsonAbi};
use alloy::primitives::U256;
use alloy::sol_types::{Panic, Revert, SolError};

use super::{known, value};

/// The reason a call reverted: `Error(string)` → the string; `Panic(uint256)` → `panic 0x11 (arithmetic overflow or
/// underflow)`; a custom error of the standard set or of `abis` → `Name(args)`; anything else → the raw 0x data, or
/// `no reason` when empty (a bare `revert()`, or running out of gas).
pub fn revert_reason<'a>(data: &[u8], abis: impl IntoIterator<Item = &'a JsonAbi>) -> String {
    if data.is_empty() {
        return "no reason".into();
    }
    if let Ok(revert) = Revert::abi_decode(data) {
        return revert.reason;
    }
    if let Ok(panic) = Panic::abi_decode(data) {
        return panic_text(panic.code);
    }
    let selector = data.get(..4);
    let named = |error: &Error| {
        if Some(error.selector().as_slice()) != selector {
            return None;
        }
        let values = error.abi_decode_input(&data[4..]).ok()?;
        let args: Vec<String> = values.iter().map(value::display).collect();
        Some(format!("{}({})", error.name, args.join(", ")))
    };
    known::errors()
        .iter()
        .find_map(named)
        .or_else(|| abis.into_iter().flat_map(JsonAbi::errors).find_map(named))
        .unwrap_or_else(|| alloy::hex::encode_prefixed(data))
}

/// Solidity's panic codes (the language documentation's list).
fn panic_text(code: U256) -> String {
    let Ok(code) = u64::try_from(code) else {
        return format!("panic {code:#x} (unknown panic code)");
    };
    let meaning = match code {
        0x00 => "generic compiler panic",
        0x01 => "assertion failed",
        0x11 => "arithmetic overflow or underflow",
        0x12 => "division or modulo by zero",
        0x21 => "invalid enum value",
        0x22 => "invalid storage byte array encoding",
        0x31 => "pop on an empty array",
        0x32 => "array index out of bounds",
        0x41 => "out of memory",
        0x51 => "call to a zero-initialized function",
        _ => "unknown panic code",
    };
    format!("panic 0x{code:02x} ({meaning})")
}

#[cfg(test)]
mod tests {
    use super::*;
    use alloy::primitives::Address;
    use alloy::sol_types::SolValue;

    fn with_selector(selector: &str, args: Vec<u8>) -> Vec<u8> {
        let mut data = alloy::hex::decode(selector).expect("hex");
        data.extend(args);
        data
    }

    #[test]
    fn reasons_are_decoded_in_words() {
        let wallet: Address = "0x5aaeb6053f3e94c9b9a09f33669435e7ef1beaed".parse().expect("address");
        let abi = JsonAbi::parse(["error Nope(address who, uint256 n)"]).expect("abi");
        let nope = with_selector("0xc3b28518", (wallet, U256::from(42)).abi_encode_params());
        let cases: [(Vec<u8>, &str); 9] = [
            (vec![], "no reason"),
            (
                Revert {
                    reason: "UniswapV2Router: INSUFFICIENT_OUTPUT_AMOUNT".into(),
                }
                .abi_encode(),
                "UniswapV2Router: INSUFFICIENT_OUTPUT_AMOUNT",
            ),
            (
                Panic { code: U256::from(0x11) }.abi_encode(),
                "panic 0x11 (arithmetic overflow or underflow)",
            ),
            (
                Panic { code: U256::from(0x12) }.abi_encode(),
                "panic 0x12 (division or modulo by zero)",
            ),
            (
                Panic { code: U256::from(0x01) }.abi_encode(),
                "panic 0x01 (assertion failed)",
            ),
            (
                Panic { code: U256::from(0x99) }.abi_encode(),
                "panic 0x99 (unknown panic code)",
            ),
            (
                with_selector(
                    "0xe450d38c",
                    (wallet, U256::from(1_000_000_000u64), U256::from(10_000_000_000u64)).abi_encode_params(),
                ),
                "ERC20InsufficientBalance(0x5aAeb6053F3E94C9b9A09f33669435E7Ef1BeAed, 1000000000, 10000000000)",
            ),
            (nope.clone(), "Nope(0x5aAeb6053F3E94C9b9A09f33669435E7Ef1BeAed, 42)"),
            (vec![0xde, 0xad], "0xdead"),
        ];
        for (data, expected) in cases {
            assert_eq!(revert_reason(&data, [&abi]), expected);
        }
        // Without the ABI, the custom error stays raw.
        assert_eq!(revert_reason(&nope, []), alloy::hex::encode_prefixed(&nope));
        // A known selector whose arguments do not decode stays raw too.
        let broken = with_selector("0xe450d38c", vec![1, 2, 3]);
        assert_eq!(revert_reason(&broken, []), "0xe450d38c010203");
    }
}
