//! Fixed-window request counters keyed by agent or client address, answering how long to wait when exceeded.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// Counts requests per key in windows of `window`; a key's window starts at its first request.
#[derive(Debug)]
pub struct RateLimiter {
    window: Duration,
    buckets: Mutex<HashMap<String, (Instant, u32)>>,
}

impl RateLimiter {
    pub fn new(window: Duration) -> Self {
        RateLimiter {
            window,
            buckets: Mutex::new(HashMap::new()),
        }
    }

    /// Records one request for `key`. `Err(seconds)` when the key has used its `limit` in this window.
    pub fn check(&self, key: &str, limit: u32) -> Result<(), u64> {
        let now = Instant::now();
        let mut buckets = self.buckets.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        if buckets.len() > 10_000 {
            buckets.retain(|_, (start, _)| now.duration_since(*start) < self.window);
        }
        let bucket = buckets.entry(key.to_string()).or_insert((now, 0));
        if now.duration_since(bucket.0) >= self.window {
            *bucket = (now, 0);
        }
        if bucket.1 >= limit {
            let wait = self.window.saturating_sub(now.duration_since(bucket.0));
            return Err(wait.as_secs_f64().ceil().max(1.0) as u64);
        }
        bucket.1 += 1;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn allows_the_limit_then_refuses_with_a_wait() {
        let limiter = RateLimiter::new(Duration::from_secs(60));
        for _ in 0..3 {
            assert!(limiter.check("a", 3).is_ok());
        }
        let wait = limiter.check("a", 3).unwrap_err();
        assert!((1..=60).contains(&wait));
        assert!(limiter.check("b", 3).is_ok());
    }

    #[test]
    fn a_new_window_resets_the_count() {
        let limiter = RateLimiter::new(Duration::from_millis(0));
        assert!(limiter.check("a", 1).is_ok());
        assert!(limiter.check("a", 1).is_ok());
    }
}
