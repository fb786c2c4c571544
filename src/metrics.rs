//! Prometheus metrics: counters and latency histograms kept in memory, rendered in the text exposition format.

use std::collections::{BTreeMap, HashMap};
use std::fmt::Write;
use std::sync::atomic::{AtomicI64, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock, RwLock};
use std::time::Duration;

use axum::http::Method;

/// One route's latency histogram, as rendered.
struct Histogram {
    counts: [u64; BUCKETS.len()],
    sum: f64,
    count: u64,
}

/// Upper bounds (seconds) of the latency histogram buckets.
const BUCKETS: [f64; 12] = [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 10.0];
/// The same bounds in nanoseconds, compared with a request's elapsed time without a float conversion.
const BUCKET_NANOS: [u64; 12] = [
    1_000_000,
    2_500_000,
    5_000_000,
    10_000_000,
    25_000_000,
    50_000_000,
    100_000_000,
    250_000_000,
    500_000_000,
    1_000_000_000,
    2_500_000_000,
    10_000_000_000,
];
/// The methods counted without a lock, in this order; any other method is counted in `Metrics::other_requests`.
const METHODS: [Method; 7] = [
    Method::GET,
    Method::POST,
    Method::PUT,
    Method::DELETE,
    Method::PATCH,
    Method::HEAD,
    Method::OPTIONS,
];
/// Statuses counted without a lock: 100 to 599 (the `http` crate allows up to 999; those go to the locked map).
const FIRST_STATUS: u16 = 100;
const STATUS_SLOTS: usize = 500;

/// The figures of one route: its latency histogram and, per method, its answers by status. Counters are atomics, so
/// requests never wait for each other to be counted; a method's status table is allocated on its first request.
struct RouteStats {
    buckets: [AtomicU64; BUCKETS.len()],
    sum_nanos: AtomicU64,
    count: AtomicU64,
    statuses: [OnceLock<Box<[AtomicU64]>>; METHODS.len()],
}

impl RouteStats {
    fn new() -> Self {
        RouteStats {
            buckets: Default::default(),
            sum_nanos: AtomicU64::new(0),
            count: AtomicU64::new(0),
            statuses: Default::default(),
        }
    }
}

/// The counters of the route a request matched, found once before the request runs.
pub struct RouteHandle<'a> {
    metrics: &'a Metrics,
    route: &'a str,
    stats: RouteRef<'a>,
}

enum RouteRef<'a> {
    Known(&'a RouteStats),
    Added(Arc<RouteStats>),
}

impl RouteHandle<'_> {
    /// Counts one answered request of this route.
    pub fn record(&self, method: &Method, status: u16, elapsed: Duration) {
        let stats = match &self.stats {
            RouteRef::Known(s) => *s,
            RouteRef::Added(s) => s,
        };
        let nanos = u64::try_from(elapsed.as_nanos()).unwrap_or(u64::MAX);
        for (bucket, bound) in stats.buckets.iter().zip(BUCKET_NANOS) {
            if nanos <= bound {
                bucket.fetch_add(1, Ordering::Relaxed);
            }
        }
        stats.sum_nanos.fetch_add(nanos, Ordering::Relaxed);
        stats.count.fetch_add(1, Ordering::Relaxed);
        let slot = usize::from(status.wrapping_sub(FIRST_STATUS));
        match METHODS.iter().position(|m| m == method) {
            Some(m) if slot < STATUS_SLOTS => {
                let table = stats.statuses[m].get_or_init(|| (0..STATUS_SLOTS).map(|_| AtomicU64::new(0)).collect());
                table[slot].fetch_add(1, Ordering::Relaxed);
            }
            _ => bump(
                &self.metrics.other_requests,
                (method.to_string(), self.route.to_string(), status),
            ),
        }
    }
}

/// The service's metrics. Chain RPC counts and transaction totals are read at scrape time from their owners.
#[derive(Default)]
pub struct Metrics {
    /// Routes known when the router was built (`register_routes`): read without any lock.
    known_routes: OnceLock<HashMap<Box<str>, RouteStats>>,
    /// Routes met later (none in the app, which registers all of its documented ones): read-locked on each request,
    /// write-locked once per new route.
    added_routes: RwLock<HashMap<Box<str>, Arc<RouteStats>>>,
    /// Requests with a method or status the lock-free tables do not hold.
    other_requests: Mutex<BTreeMap<(String, String, u16), u64>>,
    turns: Mutex<BTreeMap<&'static str, u64>>,
    tool_calls: Mutex<BTreeMap<(String, String), u64>>,
    /// Chat streams open now (confirmation-stream subscribers are counted by the event bus).
    pub chat_streams: AtomicI64,
    /// Bundles sent per chain (§22): how many, the operations they carried, the most in one, how many were
    /// replaced at their nonce (a fee bump, or without what could no longer land).
    bundles: Mutex<BTreeMap<String, [u64; 4]>>,
}

fn bump<K: Ord>(map: &Mutex<BTreeMap<K, u64>>, key: K) {
    *map.lock().unwrap_or_else(|p| p.into_inner()).entry(key).or_default() += 1;
}

impl Metrics {
    /// Counts a bundle of `operations` user operations sent on `chain` (§22).
    pub fn count_bundle(&self, chain: &str, operations: usize) {
        let mut bundles = self.bundles.lock().unwrap_or_else(|p| p.into_inner());
        let entry = bundles.entry(chain.to_string()).or_default();
        let operations = operations as u64;
        entry[0] += 1;
        entry[1] += operations;
        entry[2] = entry[2].max(operations);
    }

    /// Counts a bundle replaced at its nonce on `chain` (§22).
    pub fn count_bundle_replaced(&self, chain: &str) {
        let mut bundles = self.bundles.lock().unwrap_or_else(|p| p.into_inner());
        bundles.entry(chain.to_string()).or_default()[3] += 1;
    }

    /// Gives each of `routes` (matched-path templates) its counters up front, so counting their requests takes no
    /// lock. Only the first call counts.
    pub fn register_routes<I: IntoIterator<Item = String>>(&self, routes: I) {
        let _ = self.known_routes.set(
            routes
                .into_iter()
                .map(|r| (r.into_boxed_str(), RouteStats::new()))
                .collect(),
        );
    }

    /// The counters of `route` (a matched-path template, or `unmatched`).
    pub fn route<'a>(&'a self, route: &'a str) -> RouteHandle<'a> {
        if let Some(stats) = self.known_routes.get().and_then(|known| known.get(route)) {
            return RouteHandle {
                metrics: self,
                route,
                stats: RouteRef::Known(stats),
            };
        }
        let found = self
            .added_routes
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .get(route)
            .cloned();
        let stats = found.unwrap_or_else(|| {
            self.added_routes
                .write()
                .unwrap_or_else(|p| p.into_inner())
                .entry(route.into())
                .or_insert_with(|| Arc::new(RouteStats::new()))
                .clone()
        });
        RouteHandle {
            metrics: self,
            route,
            stats: RouteRef::Added(stats),
        }
    }

    /// Every counted request as `(method, route, status) -> count`, and every route's histogram, in label order.
    #[allow(clippy::type_complexity)]
    fn snapshot(&self) -> (BTreeMap<(String, String, u16), u64>, BTreeMap<String, Histogram>) {
        let mut requests = self.other_requests.lock().unwrap_or_else(|p| p.into_inner()).clone();
        let mut latency = BTreeMap::new();
        let added = self.added_routes.read().unwrap_or_else(|p| p.into_inner());
        let known = self.known_routes.get().into_iter().flatten();
        for (route, stats) in known.chain(added.iter().map(|(r, s)| (r, &**s))) {
            let count = stats.count.load(Ordering::Relaxed);
            if count == 0 {
                continue;
            }
            for (method, table) in METHODS.iter().zip(&stats.statuses) {
                let Some(table) = table.get() else { continue };
                for (slot, n) in table.iter().enumerate() {
                    let n = n.load(Ordering::Relaxed);
                    if n > 0 {
                        let status = FIRST_STATUS + slot as u16;
                        *requests
                            .entry((method.to_string(), route.to_string(), status))
                            .or_default() += n;
                    }
                }
            }
            latency.insert(
                route.to_string(),
                Histogram {
                    counts: std::array::from_fn(|i| stats.buckets[i].load(Ordering::Relaxed)),
                    sum: stats.sum_nanos.load(Ordering::Relaxed) as f64 / 1e9,
                    count,
                },
            );
        }
        (requests, latency)
    }

    pub fn record_turn(&self, outcome: &'static str) {
        bump(&self.turns, outcome);
    }

    pub fn record_tool_call(&self, tool: &str, outcome: &str) {
        bump(&self.tool_calls, (tool.to_string(), outcome.to_string()));
    }

    /// Counts an open chat stream until the guard is dropped.
    pub fn chat_stream_opened(self: &Arc<Self>) -> ChatStreamGuard {
        self.chat_streams.fetch_add(1, Ordering::Relaxed);
        ChatStreamGuard(self.clone())
    }

    /// Renders everything; `extra` carries the gauges read from other parts at scrape time.
    pub fn render(&self, extra: &ScrapeExtras) -> String {
        let mut out = String::new();
        self.render_http(&mut out);
        self.render_turns_and_tools(&mut out);
        render_chains(&mut out, extra);
        self.render_sponsorship(&mut out, extra);
        self.render_streams(&mut out, extra);
        out
    }

    /// HTTP requests by route, method and status, and their latency by route.
    fn render_http(&self, out: &mut String) {
        header(
            out,
            "agentd_http_requests_total",
            "counter",
            "HTTP requests by route, method and status.",
        );
        let (requests, latency) = self.snapshot();
        for ((method, route, status), n) in &requests {
            let _ = writeln!(
                out,
                "agentd_http_requests_total{{method=\"{method}\",route=\"{}\",status=\"{status}\"}} {n}",
                esc(route)
            );
        }
        header(
            out,
            "agentd_http_request_duration_seconds",
            "histogram",
            "HTTP request latency by route.",
        );
        for (route, h) in &latency {
            let route = esc(route);
            for (bound, n) in BUCKETS.iter().zip(h.counts) {
                let _ = writeln!(
                    out,
                    "agentd_http_request_duration_seconds_bucket{{route=\"{route}\",le=\"{bound}\"}} {n}"
                );
            }
            let _ = writeln!(
                out,
                "agentd_http_request_duration_seconds_bucket{{route=\"{route}\",le=\"+Inf\"}} {}",
                h.count
            );
            let _ = writeln!(
                out,
                "agentd_http_request_duration_seconds_sum{{route=\"{route}\"}} {}",
                h.sum
            );
            let _ = writeln!(
                out,
                "agentd_http_request_duration_seconds_count{{route=\"{route}\"}} {}",
                h.count
            );
        }
    }

    /// Chat turns by outcome, tool calls by tool and outcome.
    fn render_turns_and_tools(&self, out: &mut String) {
        header(out, "agentd_chat_turns_total", "counter", "Chat turns by outcome.");
        for (outcome, n) in self.turns.lock().unwrap_or_else(|p| p.into_inner()).iter() {
            let _ = writeln!(out, "agentd_chat_turns_total{{outcome=\"{outcome}\"}} {n}");
        }
        header(
            out,
            "agentd_tool_calls_total",
            "counter",
            "Tool calls by tool and outcome (ok or an error code).",
        );
        for ((tool, outcome), n) in self.tool_calls.lock().unwrap_or_else(|p| p.into_inner()).iter() {
            let _ = writeln!(
                out,
                "agentd_tool_calls_total{{tool=\"{}\",outcome=\"{}\"}} {n}",
                esc(tool),
                esc(outcome)
            );
        }
    }

    /// Open server-sent event streams by kind.
    fn render_streams(&self, out: &mut String, extra: &ScrapeExtras) {
        header(
            out,
            "agentd_sse_subscribers",
            "gauge",
            "Open server-sent event streams by kind.",
        );
        let _ = writeln!(
            out,
            "agentd_sse_subscribers{{stream=\"chat\"}} {}",
            self.chat_streams.load(Ordering::Relaxed)
        );
        let _ = writeln!(
            out,
            "agentd_sse_subscribers{{stream=\"confirmations\"}} {}",
            extra.confirmation_subscribers
        );
    }
}

/// The chain nodes' JSON-RPC attempts and failures, and the stored transfers by status.
fn render_chains(out: &mut String, extra: &ScrapeExtras) {
    header(
        out,
        "agentd_rpc_calls_total",
        "counter",
        "JSON-RPC attempts towards chain nodes by chain.",
    );
    for (chain, calls, _) in &extra.rpc {
        let _ = writeln!(out, "agentd_rpc_calls_total{{chain=\"{chain}\"}} {calls}");
    }
    header(
        out,
        "agentd_rpc_errors_total",
        "counter",
        "Failed JSON-RPC attempts by chain.",
    );
    for (chain, _, errors) in &extra.rpc {
        let _ = writeln!(out, "agentd_rpc_errors_total{{chain=\"{chain}\"}} {errors}");
    }
    header(out, "agentd_transactions", "gauge", "Stored transfers by status.");
    for (status, n) in &extra.transactions {
        let _ = writeln!(out, "agentd_transactions{{status=\"{status}\"}} {n}");
    }
}

impl Metrics {
    /// Sponsored gas (§22): each sponsorable chain's paymaster deposit and sponsor balance as read at the scrape,
    /// and the bundles sent by this instance with the operations they carried.
    fn render_sponsorship(&self, out: &mut String, extra: &ScrapeExtras) {
        header(
            out,
            "agentd_sponsor_deposit_wei",
            "gauge",
            "The paymaster's deposit at the EntryPoint by chain.",
        );
        for (chain, deposit, _) in &extra.sponsors {
            let _ = writeln!(out, "agentd_sponsor_deposit_wei{{chain=\"{chain}\"}} {deposit}");
        }
        header(
            out,
            "agentd_sponsor_balance_wei",
            "gauge",
            "The sponsor key's balance (it pays the bundles' gas).",
        );
        for (chain, _, balance) in &extra.sponsors {
            let _ = writeln!(out, "agentd_sponsor_balance_wei{{chain=\"{chain}\"}} {balance}");
        }
        let bundles = self.bundles.lock().unwrap_or_else(|p| p.into_inner()).clone();
        header(
            out,
            "agentd_bundles_total",
            "counter",
            "handleOps bundles this instance sent, by chain.",
        );
        for (chain, [sent, _, _, _]) in &bundles {
            let _ = writeln!(out, "agentd_bundles_total{{chain=\"{}\"}} {sent}", esc(chain));
        }
        header(
            out,
            "agentd_bundled_operations_total",
            "counter",
            "User operations those bundles carried.",
        );
        for (chain, [_, operations, _, _]) in &bundles {
            let _ = writeln!(
                out,
                "agentd_bundled_operations_total{{chain=\"{}\"}} {operations}",
                esc(chain)
            );
        }
        header(
            out,
            "agentd_bundle_operations_max",
            "gauge",
            "The most operations one bundle carried.",
        );
        for (chain, [_, _, most, _]) in &bundles {
            let _ = writeln!(out, "agentd_bundle_operations_max{{chain=\"{}\"}} {most}", esc(chain));
        }
        header(
            out,
            "agentd_bundles_replaced_total",
            "counter",
            "Bundles this instance replaced at their nonce (a fee bump, or without what could no longer land).",
        );
        for (chain, [_, _, _, replaced]) in &bundles {
            let _ = writeln!(
                out,
                "agentd_bundles_replaced_total{{chain=\"{}\"}} {replaced}",
                esc(chain)
            );
        }
    }
}

/// Figures owned elsewhere, gathered when `/metrics` is scraped.
#[derive(Default)]
pub struct ScrapeExtras {
    /// `(chain, calls, errors)`.
    pub rpc: Vec<(&'static str, u64, u64)>,
    /// `(status, count)`.
    pub transactions: Vec<(String, i64)>,
    pub confirmation_subscribers: usize,
    /// `(chain, paymaster deposit, sponsor balance)` in wei, of each sponsorable chain whose parts answered (§22).
    pub sponsors: Vec<(&'static str, String, String)>,
}

/// Decrements the open chat-stream gauge when the stream ends.
pub struct ChatStreamGuard(Arc<Metrics>);

impl Drop for ChatStreamGuard {
    fn drop(&mut self) {
        self.0.chat_streams.fetch_sub(1, Ordering::Relaxed);
    }
}

fn header(out: &mut String, name: &str, kind: &str, help: &str) {
    let _ = writeln!(out, "# HELP {name} {help}\n# TYPE {name} {kind}");
}

fn esc(label: &str) -> String {
    label.replace('\\', "\\\\").replace('"', "\\\"").replace('\n', "\\n")
}
