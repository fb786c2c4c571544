//! Prometheus metrics: counters and latency histograms kept in memory, rendered in the text exposition format.

use std::collections::BTreeMap;
use std::fmt::Write;
use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// Upper bounds (seconds) of the latency histogram buckets.
const BUCKETS: [f64; 12] = [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 10.0];

#[derive(Default, Clone)]
struct Histogram {
    counts: [u64; BUCKETS.len()],
    sum: f64,
    count: u64,
}

/// The service's metrics. Chain RPC counts and transaction totals are read at scrape time from their owners.
#[derive(Default)]
pub struct Metrics {
    requests: Mutex<BTreeMap<(String, String, u16), u64>>,
    latency: Mutex<BTreeMap<String, Histogram>>,
    turns: Mutex<BTreeMap<&'static str, u64>>,
    tool_calls: Mutex<BTreeMap<(String, String), u64>>,
    /// Chat streams open now (confirmation-stream subscribers are counted by the event bus).
    pub chat_streams: AtomicI64,
}

fn bump<K: Ord>(map: &Mutex<BTreeMap<K, u64>>, key: K) {
    *map.lock().unwrap_or_else(|p| p.into_inner()).entry(key).or_default() += 1;
}

impl Metrics {
    pub fn record_request(&self, method: &str, route: &str, status: u16, elapsed: Duration) {
        bump(&self.requests, (method.to_string(), route.to_string(), status));
        let seconds = elapsed.as_secs_f64();
        let mut latency = self.latency.lock().unwrap_or_else(|p| p.into_inner());
        let h = latency.entry(route.to_string()).or_default();
        for (i, bound) in BUCKETS.iter().enumerate() {
            if seconds <= *bound {
                h.counts[i] += 1;
            }
        }
        h.sum += seconds;
        h.count += 1;
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
        header(
            &mut out,
            "agentd_http_requests_total",
            "counter",
            "HTTP requests by route, method and status.",
        );
        for ((method, route, status), n) in self.requests.lock().unwrap_or_else(|p| p.into_inner()).iter() {
            let _ = writeln!(
                out,
                "agentd_http_requests_total{{method=\"{method}\",route=\"{}\",status=\"{status}\"}} {n}",
                esc(route)
            );
        }
        header(
            &mut out,
            "agentd_http_request_duration_seconds",
            "histogram",
            "HTTP request latency by route.",
        );
        for (route, h) in self.latency.lock().unwrap_or_else(|p| p.into_inner()).iter() {
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
        header(&mut out, "agentd_chat_turns_total", "counter", "Chat turns by outcome.");
        for (outcome, n) in self.turns.lock().unwrap_or_else(|p| p.into_inner()).iter() {
            let _ = writeln!(out, "agentd_chat_turns_total{{outcome=\"{outcome}\"}} {n}");
        }
        header(
            &mut out,
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
        header(
            &mut out,
            "agentd_rpc_calls_total",
            "counter",
            "JSON-RPC attempts towards chain nodes by chain.",
        );
        for (chain, calls, _) in &extra.rpc {
            let _ = writeln!(out, "agentd_rpc_calls_total{{chain=\"{chain}\"}} {calls}");
        }
        header(
            &mut out,
            "agentd_rpc_errors_total",
            "counter",
            "Failed JSON-RPC attempts by chain.",
        );
        for (chain, _, errors) in &extra.rpc {
            let _ = writeln!(out, "agentd_rpc_errors_total{{chain=\"{chain}\"}} {errors}");
        }
        header(&mut out, "agentd_transactions", "gauge", "Stored transfers by status.");
        for (status, n) in &extra.transactions {
            let _ = writeln!(out, "agentd_transactions{{status=\"{status}\"}} {n}");
        }
        header(
            &mut out,
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
        out
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
