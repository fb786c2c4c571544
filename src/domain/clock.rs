//! The time as the service reads it, behind one seam: the system's clock in the service, a clock tests move
//! (`ManualClock`) where waiting out an interval would make a test slow (`DECIMALS_RECHECK`, the fee and code caches).

use std::sync::{Mutex, PoisonError};
use std::time::{Duration, Instant};

use chrono::{DateTime, Utc};

/// A source of the time.
pub trait Clock: Send + Sync + std::fmt::Debug {
    /// The wall clock, to the microsecond (as `domain::now`, what both databases store).
    fn now(&self) -> DateTime<Utc>;
    /// A monotonic instant, for intervals and the age of what is cached.
    fn instant(&self) -> Instant;
}

/// The system's clock.
#[derive(Debug, Clone, Copy, Default)]
pub struct SystemClock;

impl Clock for SystemClock {
    fn now(&self) -> DateTime<Utc> {
        super::now()
    }

    fn instant(&self) -> Instant {
        Instant::now()
    }
}

/// The system's clock moved ahead by what `advance` added: time passes as usual, and a test skips an interval.
#[derive(Debug, Default)]
pub struct ManualClock {
    ahead: Mutex<Duration>,
}

impl ManualClock {
    /// Moves the clock `by` ahead (both its wall clock and its instants).
    pub fn advance(&self, by: Duration) {
        let mut ahead = self.ahead.lock().unwrap_or_else(PoisonError::into_inner);
        *ahead = ahead.saturating_add(by);
    }

    fn ahead(&self) -> Duration {
        *self.ahead.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

impl Clock for ManualClock {
    fn now(&self) -> DateTime<Utc> {
        let ahead = chrono::Duration::from_std(self.ahead()).unwrap_or(chrono::Duration::MAX);
        super::now()
            .checked_add_signed(ahead)
            .unwrap_or(DateTime::<Utc>::MAX_UTC)
    }

    fn instant(&self) -> Instant {
        let now = Instant::now();
        now.checked_add(self.ahead()).unwrap_or(now)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_manual_clock_moves_its_instants_and_its_wall_clock_by_what_was_advanced() {
        let clock = ManualClock::default();
        let (before, wall) = (clock.instant(), clock.now());
        clock.advance(Duration::from_secs(61));
        assert!(clock.instant().duration_since(before) >= Duration::from_secs(61));
        assert!(clock.now() - wall >= chrono::Duration::seconds(61));
        assert!(SystemClock.instant() < clock.instant());
    }
}
