//! Fee figures of a chain and exact decimal renderings of wei amounts for tools and API answers.

use alloy::primitives::U256;
use serde::Serialize;

use crate::domain::amount::format_units;

/// One gwei in wei.
pub const GWEI: u128 = 1_000_000_000;

/// The priority fee used when a node does not implement `eth_maxPriorityFeePerGas`.
pub const FALLBACK_PRIORITY_FEE: u128 = GWEI;

/// The gas a plain native transfer to an account without code costs.
pub const TRANSFER_GAS: u64 = 21_000;

/// Current EIP-1559 fee figures of a chain, all in wei per gas.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct Fees {
    /// Base fee of the latest block (0 on a chain without EIP-1559).
    pub base_fee_per_gas: u128,
    /// Tip suggested by the node (`eth_maxPriorityFeePerGas`, or 1 gwei when it has none).
    pub max_priority_fee_per_gas: u128,
    /// Fee cap for a new transaction: `2 * base + priority`, which survives several full blocks of
    /// base-fee growth; only `base + priority` is actually paid.
    pub max_fee_per_gas: u128,
    /// The node's legacy `eth_gasPrice`.
    pub gas_price: u128,
}

impl Fees {
    /// Derives the fee cap from the latest base fee and the tip. Without a base fee (a pre-London
    /// chain) the legacy gas price is used for both the cap and the tip.
    pub fn from_parts(base_fee_per_gas: Option<u128>, priority_fee: u128, gas_price: u128) -> Self {
        match base_fee_per_gas {
            Some(base) => Fees {
                base_fee_per_gas: base,
                max_priority_fee_per_gas: priority_fee,
                max_fee_per_gas: base.saturating_mul(2).saturating_add(priority_fee),
                gas_price,
            },
            None => Fees {
                base_fee_per_gas: 0,
                max_priority_fee_per_gas: gas_price,
                max_fee_per_gas: gas_price,
                gas_price,
            },
        }
    }

    /// What a transaction of `gas` units is expected to pay now: `gas * (base + priority)`,
    /// capped by `max_fee_per_gas`.
    pub fn expected_cost(&self, gas: u64) -> U256 {
        let per_gas = self
            .base_fee_per_gas
            .saturating_add(self.max_priority_fee_per_gas)
            .min(self.max_fee_per_gas);
        U256::from(gas) * U256::from(per_gas)
    }

    /// The most a transaction of `gas` units can pay: `gas * max_fee_per_gas` (what a spending
    /// cap must reserve).
    pub fn max_cost(&self, gas: u64) -> U256 {
        U256::from(gas) * U256::from(self.max_fee_per_gas)
    }
}

/// Wei as an exact decimal string of gwei (`1500000000` -> `"1.5"`, `1` -> `"0.000000001"`).
pub fn format_gwei(wei: u128) -> String {
    format_units(U256::from(wei), 9)
}

/// Wei as an exact decimal string of whole native units with `decimals` places (18 for ETH).
pub fn format_native(wei: U256, decimals: u8) -> String {
    format_units(wei, decimals)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn gwei_is_exact() {
        assert_eq!(format_gwei(1_500_000_000), "1.5");
        assert_eq!(format_gwei(1), "0.000000001");
        assert_eq!(format_gwei(0), "0");
        assert_eq!(format_gwei(30 * GWEI), "30");
        assert_eq!(format_gwei(u128::MAX), "340282366920938463463374607431.768211455");
    }

    #[test]
    fn fee_cap_is_twice_base_plus_tip() {
        let fees = Fees::from_parts(Some(10 * GWEI), GWEI, 11 * GWEI);
        assert_eq!(fees.max_fee_per_gas, 21 * GWEI);
        assert_eq!(fees.expected_cost(21_000), U256::from(21_000u128 * 11 * GWEI));
        assert_eq!(fees.max_cost(21_000), U256::from(21_000u128 * 21 * GWEI));
    }

    #[test]
    fn legacy_chains_use_the_gas_price() {
        let fees = Fees::from_parts(None, GWEI, 5 * GWEI);
        assert_eq!(fees.max_fee_per_gas, 5 * GWEI);
        assert_eq!(fees.base_fee_per_gas, 0);
        assert_eq!(fees.expected_cost(1), U256::from(5 * GWEI));
    }
}
