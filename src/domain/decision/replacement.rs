//! What a replacement (a fee bump or a cancel, §14) and a send that fills a transfer's nonce do to the reservations
//! against the cap.

use alloy::primitives::U256;

use super::cost::fits;

/// What a replacement attempt (a fee bump or a cancel, §14) does to its transfer's reservation.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Growth {
    /// The reservation covers the new attempt.
    Covered,
    /// It grows by `extra`, which fits the cap.
    Grow { extra: U256 },
    /// It would have to grow and may not (a fee bump stays inside what was reserved).
    NotCovered,
    /// It would have to grow, and the cap cannot hold the excess.
    CapExceeded,
}

/// How a reservation of `reserved` meets an attempt that `needed`; `may_grow` for a cancel (which must land).
pub fn growth(reserved: U256, needed: U256, may_grow: bool, cap: U256, spent: U256) -> Growth {
    if needed <= reserved {
        return Growth::Covered;
    }
    if !may_grow {
        return Growth::NotCovered;
    }
    let extra = needed - reserved;
    match fits(cap, spent, extra) {
        true => Growth::Grow { extra },
        false => Growth::CapExceeded,
    }
}

/// How the fee of a send that fills a transfer's nonce is counted (§14): out of what the transfer held, and only the
/// excess (fees rose that much) anew against the cap.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FillCost {
    /// Moved from the transfer's reservation to the fill's.
    pub moved: U256,
    /// New against the cap.
    pub extra: U256,
    /// What the transfer still holds.
    pub left: U256,
}

/// The fill of a nonce whose transfer holds `held`, at a fee of `fee`; `None` when the excess does not fit the cap.
pub fn fill_cost(held: U256, fee: U256, cap: U256, spent: U256) -> Option<FillCost> {
    let moved = held.min(fee);
    let extra = fee - moved;
    (extra.is_zero() || fits(cap, spent, extra)).then_some(FillCost {
        moved,
        extra,
        left: held - moved,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn wei(n: u64) -> U256 {
        U256::from(n)
    }

    #[test]
    fn a_fill_takes_its_fee_from_what_the_transfer_held_and_only_the_excess_from_the_cap() {
        let cost = |moved, extra, left| {
            Some(FillCost {
                moved: wei(moved),
                extra: wei(extra),
                left: wei(left),
            })
        };
        // (held, fee, cap, spent, expected)
        let cases = [
            (100, 30, 0, 500, cost(30, 0, 70)),
            (100, 100, 0, 500, cost(100, 0, 0)),
            (100, 130, 530, 500, cost(100, 30, 0)),
            (100, 131, 530, 500, None),
            (0, 10, 10, 0, cost(0, 10, 0)),
        ];
        for (held, fee, cap, spent, expected) in cases {
            assert_eq!(
                fill_cost(wei(held), wei(fee), wei(cap), wei(spent)),
                expected,
                "held {held}, fee {fee}, cap {cap}, spent {spent}"
            );
        }
    }

    #[test]
    fn a_replacement_stays_inside_its_reservation_unless_it_may_grow_within_the_cap() {
        // (reserved, needed, may grow, cap, spent, expected)
        let cases = [
            (100, 100, false, 0, 500, Growth::Covered),
            (100, 101, false, 1_000, 0, Growth::NotCovered),
            (100, 130, true, 530, 500, Growth::Grow { extra: wei(30) }),
            (100, 131, true, 530, 500, Growth::CapExceeded),
            (100, 50, true, 0, 500, Growth::Covered),
        ];
        for (reserved, needed, may_grow, cap, spent, expected) in cases {
            assert_eq!(
                growth(wei(reserved), wei(needed), may_grow, wei(cap), wei(spent)),
                expected,
                "reserved {reserved}, needed {needed}, may grow {may_grow}"
            );
        }
    }
}
