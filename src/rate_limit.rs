//! Request limits keyed by client address or canonical agent id, over governor's keyed GCRA limiter, in tables of
//! bounded size; a refusal says how many seconds to wait.

use std::hash::Hash;
use std::net::{IpAddr, Ipv6Addr};
use std::num::NonZeroU32;
use std::sync::Mutex;
use std::time::Duration;

use governor::clock::{Clock, DefaultClock, Reference};
use governor::middleware::NoOpMiddleware;
use governor::state::keyed::DefaultKeyedStateStore;
use governor::{Quota, RateLimiter};
use uuid::Uuid;

/// Keys one table holds at most (tens of bytes each), whatever number of distinct addresses or ids is thrown at it.
pub const MAX_KEYS: usize = 100_000;

/// How often a full table may be swept: a sweep walks the whole table, so it must not run on every request.
const SWEEP_EVERY: Duration = Duration::from_secs(1);

/// `limit` requests a minute per key: a burst of `limit`, refilled evenly over the minute. A key whose count is back
/// to fresh is dropped by the next sweep; a table that is still full after a sweep refuses keys until one frees
/// room (it fails closed: memory stays bounded, and the limits it guards still hold).
pub struct KeyedLimiter<K: Hash + Eq + Clone, C: Clock = DefaultClock> {
    limiter: RateLimiter<K, DefaultKeyedStateStore<K>, C, NoOpMiddleware<C::Instant>>,
    max_keys: usize,
    /// When the table was last swept (`None`: never).
    last_sweep: Mutex<Option<C::Instant>>,
}

impl<K: Hash + Eq + Clone> KeyedLimiter<K> {
    pub fn per_minute(limit: NonZeroU32) -> Self {
        Self::with_clock(limit, MAX_KEYS, DefaultClock::default())
    }
}

impl<K: Hash + Eq + Clone, C: Clock> KeyedLimiter<K, C> {
    pub fn with_clock(limit: NonZeroU32, max_keys: usize, clock: C) -> Self {
        KeyedLimiter {
            limiter: RateLimiter::dashmap_with_clock(Quota::per_minute(limit), clock),
            max_keys,
            last_sweep: Mutex::new(None),
        }
    }

    /// Counts one request for `key`; `Err(seconds)` when the key has used its limit (or the table is full).
    pub fn check(&self, key: &K) -> Result<(), u64> {
        if self.limiter.len() >= self.max_keys && !self.make_room() {
            return Err(whole_seconds(SWEEP_EVERY));
        }
        let clock = self.limiter.clock();
        self.limiter
            .check_key(key)
            .map_err(|not_until| whole_seconds(not_until.wait_time_from(clock.now())))
    }

    /// Keys the table holds now.
    pub fn len(&self) -> usize {
        self.limiter.len()
    }

    pub fn is_empty(&self) -> bool {
        self.limiter.is_empty()
    }

    /// Drops the keys whose count is back to fresh, at most once per `SWEEP_EVERY`; whether there is room now.
    fn make_room(&self) -> bool {
        let now = self.limiter.clock().now();
        let mut last = self.last_sweep.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        let due = last.is_none_or(|at| Duration::from(now.duration_since(at)) >= SWEEP_EVERY);
        if due {
            self.limiter.retain_recent();
            self.limiter.shrink_to_fit();
            *last = Some(now);
        }
        self.limiter.len() < self.max_keys
    }
}

fn whole_seconds(wait: Duration) -> u64 {
    wait.as_secs_f64().ceil().max(1.0) as u64
}

/// The proof endpoints a client's requests are counted on, each on its own (docs/api.md §4, §10).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ProofEndpoint {
    ReissueChallenge,
    ReissueToken,
    OwnerChallenge,
    OwnerSession,
    /// A payment sent to an offer at `/x402/{id}` (§23): no credential, so the client's address is what is counted.
    OfferPayment,
}

/// The limits of the reissue and owner-session endpoints: requests per client address on each endpoint
/// (`REISSUE_LIMIT_PER_IP`), and failed proofs per agent, reissue and owner session together
/// (`REISSUE_LIMIT_PER_AGENT`). Only failures count per agent, so strangers cannot lock the owner out.
pub struct ProofLimits {
    clients: KeyedLimiter<(ProofEndpoint, IpAddr)>,
    failed_proofs: KeyedLimiter<Uuid>,
}

impl ProofLimits {
    pub fn new(per_client: NonZeroU32, failed_per_agent: NonZeroU32) -> Self {
        ProofLimits {
            clients: KeyedLimiter::per_minute(per_client),
            failed_proofs: KeyedLimiter::per_minute(failed_per_agent),
        }
    }

    /// Counts one request of `client` on `endpoint`.
    pub fn check_client(&self, endpoint: ProofEndpoint, client: IpAddr) -> Result<(), u64> {
        self.clients.check(&(endpoint, client_key(client)))
    }

    /// Counts one failed proof for the agent.
    pub fn count_failed_proof(&self, agent_id: Uuid) -> Result<(), u64> {
        self.failed_proofs.check(&agent_id)
    }

    /// Keys held: (client table, failed-proof table).
    pub fn sizes(&self) -> (usize, usize) {
        (self.clients.len(), self.failed_proofs.len())
    }
}

/// One key per IPv4 address and per IPv6 /64 (one host usually holds a whole /64, so single addresses would give it
/// as many counts as it likes).
fn client_key(ip: IpAddr) -> IpAddr {
    match ip.to_canonical() {
        IpAddr::V6(v6) => {
            let prefix = u128::from(v6) & !(u128::from(u64::MAX));
            IpAddr::V6(Ipv6Addr::from(prefix))
        }
        v4 => v4,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use governor::clock::FakeRelativeClock;

    fn limit(n: u32) -> NonZeroU32 {
        NonZeroU32::new(n).unwrap()
    }

    #[test]
    fn allows_the_limit_then_refuses_with_a_wait() {
        let limiter = KeyedLimiter::per_minute(limit(3));
        for _ in 0..3 {
            assert!(limiter.check(&"a").is_ok());
        }
        let wait = limiter.check(&"a").unwrap_err();
        assert!((1..=60).contains(&wait), "{wait}");
        assert!(limiter.check(&"b").is_ok());
    }

    #[test]
    fn a_key_gets_its_count_back_over_the_minute() {
        let clock = FakeRelativeClock::default();
        let limiter = KeyedLimiter::with_clock(limit(2), 10, clock.clone());
        assert!(limiter.check(&1).is_ok() && limiter.check(&1).is_ok());
        assert!(limiter.check(&1).is_err());
        clock.advance(Duration::from_secs(30));
        assert!(limiter.check(&1).is_ok());
        assert!(limiter.check(&1).is_err());
    }

    #[test]
    fn any_number_of_distinct_keys_never_grows_the_table_past_its_bound() {
        let clock = FakeRelativeClock::default();
        let limiter = KeyedLimiter::with_clock(limit(10), 1_000, clock.clone());
        for round in 0..5u64 {
            for key in 0..10_000u64 {
                let _ = limiter.check(&(round, key));
                assert!(limiter.len() <= 1_000, "{} keys", limiter.len());
            }
            clock.advance(Duration::from_secs(61));
        }
        // Swept once the keys' counts were fresh again: new keys are served.
        assert!(limiter.check(&(99, 0)).is_ok());
    }

    #[test]
    fn a_full_table_refuses_new_keys_until_a_sweep_frees_room() {
        let clock = FakeRelativeClock::default();
        let limiter = KeyedLimiter::with_clock(limit(5), 3, clock.clone());
        for key in 0..3 {
            assert!(limiter.check(&key).is_ok());
        }
        assert!(limiter.check(&3).is_err(), "no room: refused");
        assert_eq!(limiter.len(), 3);
        clock.advance(Duration::from_secs(60));
        assert!(limiter.check(&3).is_ok(), "the sweep dropped the fresh keys");
        assert!(limiter.len() <= 3);
    }

    #[test]
    fn client_addresses_share_a_count_per_ipv6_64() {
        let a: IpAddr = "2001:db8:1:2:aaaa::1".parse().unwrap();
        let b: IpAddr = "2001:db8:1:2:bbbb::2".parse().unwrap();
        let other: IpAddr = "2001:db8:1:3::1".parse().unwrap();
        assert_eq!(client_key(a), client_key(b));
        assert_ne!(client_key(a), client_key(other));
        let mapped: IpAddr = "::ffff:192.0.2.7".parse().unwrap();
        assert_eq!(client_key(mapped), "192.0.2.7".parse::<IpAddr>().unwrap());
    }

    #[test]
    fn proof_limits_count_clients_per_endpoint_and_failures_per_agent() {
        let limits = ProofLimits::new(limit(1), limit(1));
        let ip: IpAddr = "192.0.2.1".parse().unwrap();
        assert!(limits.check_client(ProofEndpoint::ReissueChallenge, ip).is_ok());
        assert!(limits.check_client(ProofEndpoint::ReissueChallenge, ip).is_err());
        assert!(limits.check_client(ProofEndpoint::OwnerChallenge, ip).is_ok());
        let agent = Uuid::new_v4();
        assert!(limits.count_failed_proof(agent).is_ok());
        assert!(limits.count_failed_proof(agent).is_err());
        assert_eq!(limits.sizes(), (2, 1));
    }
}
