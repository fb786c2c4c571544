//! The rolling windows of a policy's limits (§11): what the asset's transfers of the last day and week add up to,
//! and what each window of an asset's limits has left.

use alloy::primitives::U256;
use chrono::{DateTime, Utc};

use crate::domain::policy::AssetLimits;

/// Value of the asset's transfers in the rolling windows (sent ones and unexpired waiting ones), this one excluded.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Windows {
    pub day: U256,
    pub week: U256,
}

/// One rolling window of an asset's limits (or a chain's spending cap) as the decision counts it: the limit, what
/// it has counted, and what is left of it (never below zero). A transfer of up to `left` fits it; more does not.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Window {
    pub limit: U256,
    pub counted: U256,
    pub left: U256,
}

impl Window {
    pub fn of(limit: U256, counted: U256) -> Window {
        Window {
            limit,
            counted,
            left: limit.saturating_sub(counted),
        }
    }
}

/// What each window of an asset's limits has counted and has left: the `windows` the store read for the asset
/// (the same read the decision takes) against `limits`; `None` where the policy sets no such window.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Budget {
    pub per_day: Option<Window>,
    pub per_week: Option<Window>,
}

pub fn budget(limits: &AssetLimits, windows: Windows) -> Budget {
    Budget {
        per_day: limits.per_day.map(|l| Window::of(l, windows.day)),
        per_week: limits.per_week.map(|l| Window::of(l, windows.week)),
    }
}

/// The start of the week window ending at `now`: older transfers never count.
pub fn week_ago(now: DateTime<Utc>) -> DateTime<Utc> {
    now - chrono::Duration::days(7)
}

/// Sums `(value, created_at)` of the asset's transfers into the windows ending at `now` (strictly inside them).
pub fn windows(rows: &[(U256, DateTime<Utc>)], now: DateTime<Utc>) -> Windows {
    let day_ago = now - chrono::Duration::hours(24);
    let mut totals = Windows::default();
    for (value, at) in rows.iter().filter(|(_, at)| *at > week_ago(now)) {
        totals.week = totals.week.saturating_add(*value);
        if *at > day_ago {
            totals.day = totals.day.saturating_add(*value);
        }
    }
    totals
}

#[cfg(test)]
mod tests {
    use super::*;

    fn wei(n: u64) -> U256 {
        U256::from(n)
    }

    #[test]
    fn windows_count_the_last_day_and_week_strictly() {
        let now = DateTime::from_timestamp(1_000_000_000, 0).expect("a time");
        let hours = |h: i64| now - chrono::Duration::hours(h);
        let rows = [
            (wei(1), hours(1)),
            (wei(2), hours(24)),
            (wei(4), hours(23)),
            (wei(8), hours(24 * 7)),
            (wei(16), hours(24 * 7 - 1)),
            (wei(32), hours(24 * 8)),
        ];
        assert_eq!(
            windows(&rows, now),
            Windows {
                day: wei(1 + 4),
                week: wei(1 + 2 + 4 + 16)
            }
        );
        assert_eq!(windows(&[], now), Windows::default());
        assert_eq!(week_ago(now), hours(24 * 7));
    }
}
