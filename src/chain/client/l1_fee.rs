//! What a transaction costs on an OP-stack chain (base, optimism, base-sepolia) beyond its L2 gas: the L1 data fee.
//! The node reports it in the receipt (`l1Fee`) and charges it to the sender; before signing, the GasPriceOracle
//! predeploy (`0x420000000000000000000000000000000000000F`, `getL1Fee(bytes)` of the unsigned RLP-encoded
//! transaction, per the OP-stack specification) estimates it, so that the spending cap reserves it too (§8, §14).
//! The oracle's call is `Node::l1_fee` of `ChainClient`.

use alloy::primitives::{Address, U256, address};

use crate::domain::chain::ChainInfo;

/// The GasPriceOracle predeploy of every OP-stack chain.
pub const GAS_PRICE_ORACLE: Address = address!("0x420000000000000000000000000000000000000F");

alloy::sol! {
    function getL1Fee(bytes _data) external view returns (uint256);
}

/// Whether the chain charges an L1 data fee (an OP-stack rollup).
pub fn is_op_stack(chain: &ChainInfo) -> bool {
    matches!(chain.name, "base" | "optimism" | "base-sepolia")
}

/// The `l1Fee` of a receipt as the node sent it (a hex quantity); zero when it has none.
pub(crate) fn from_receipt(receipt: &serde_json::Value) -> U256 {
    receipt
        .get("l1Fee")
        .and_then(serde_json::Value::as_str)
        .and_then(|hex| U256::from_str_radix(hex.trim_start_matches("0x"), 16).ok())
        .unwrap_or(U256::ZERO)
}

#[cfg(test)]
mod tests {
    use alloy::sol_types::SolCall;

    use super::*;
    use crate::domain::chain as registry;

    #[test]
    fn op_stack_chains_are_the_rollups_that_charge_l1_fees() {
        let op: Vec<&str> = registry::CHAINS
            .iter()
            .filter(|c| is_op_stack(c))
            .map(|c| c.name)
            .collect();
        assert_eq!(op, ["base", "optimism", "base-sepolia"]);
    }

    #[test]
    fn a_receipt_without_l1_fee_counts_zero() {
        assert_eq!(from_receipt(&serde_json::json!({"l1Fee": "0x10"})), U256::from(16));
        assert_eq!(from_receipt(&serde_json::json!({"gasUsed": "0x5208"})), U256::ZERO);
    }

    #[test]
    fn the_oracle_call_has_the_published_selector() {
        assert_eq!(getL1FeeCall::SELECTOR, [0x49, 0x94, 0x8e, 0x0e]);
    }
}
