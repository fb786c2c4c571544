//! What an outflow costs the wallet and the spending cap (§8, §13, §14), and whether an amount fits under the cap.

use alloy::primitives::U256;

/// What a transfer costs the wallet and the cap (§8, §13, §14), from the native coin it moves and one maximum fee
/// (gas limit × `maxFeePerGas`, plus the L1 fee estimate on OP-stack chains).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Cost {
    /// What the wallet must hold: the native value and one maximum fee.
    pub needed: U256,
    /// What it holds against the cap until it settles: the native value and twice the maximum fee, room for fee
    /// bumps.
    pub reserved: U256,
}

impl Cost {
    pub fn of(native_value: U256, max_fee: U256) -> Cost {
        let needed = native_value.saturating_add(max_fee);
        Cost {
            needed,
            reserved: needed.saturating_add(max_fee),
        }
    }
}

/// Whether `more` fits under `cap` on top of `spent`: a total equal to the cap passes.
/// A sum past `U256::MAX` never fits (saturating would let it pass a cap of `U256::MAX`).
pub fn fits(cap: U256, spent: U256, more: U256) -> bool {
    spent.checked_add(more).is_some_and(|total| total <= cap)
}

/// What counts against the cap after adding `add` and giving back `sub` (never below zero).
pub fn spent_after(spent: U256, add: U256, sub: U256) -> U256 {
    spent.saturating_add(add).saturating_sub(sub)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn wei(n: u64) -> U256 {
        U256::from(n)
    }

    #[test]
    fn a_transfer_reserves_its_value_and_twice_its_maximum_fee_and_needs_one() {
        assert_eq!(
            Cost::of(wei(100), wei(7)),
            Cost {
                needed: wei(107),
                reserved: wei(114)
            }
        );
        // A token transfer moves no native coin: it needs one fee and reserves two.
        assert_eq!(
            Cost::of(U256::ZERO, wei(7)),
            Cost {
                needed: wei(7),
                reserved: wei(14)
            }
        );
        assert_eq!(Cost::of(U256::MAX, wei(1)).reserved, U256::MAX);
    }

    #[test]
    fn spending_moves_by_what_is_added_and_given_back_never_below_zero() {
        assert_eq!(spent_after(wei(10), wei(5), wei(3)), wei(12));
        assert_eq!(spent_after(wei(10), wei(0), wei(30)), wei(0));
        assert_eq!(spent_after(U256::MAX, wei(1), wei(0)), U256::MAX);
        assert!(fits(wei(10), wei(4), wei(6)));
        assert!(!fits(wei(10), wei(4), wei(7)));
        assert!(!fits(U256::MAX, wei(1), U256::MAX));
    }
}
