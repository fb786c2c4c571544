//! `BENCH_SPONSORED_RPC=1`: a counting proxy between the app and anvil, to see which node calls a transfer costs
//! (by JSON-RPC method; a batch counts each of its calls). It adds a hop to every call, so a run with it is for
//! the counts, not for the rates.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, PoisonError};

use axum::body::Bytes;
use axum::extract::State;
use axum::http::{StatusCode, header};
use axum::response::IntoResponse;
use serde_json::Value;

/// Calls by method so far, and the time their answers took (from the proxy to anvil and back), in microseconds.
pub type Calls = BTreeMap<String, (u64, u64)>;

pub struct Counter {
    upstream: String,
    client: reqwest::Client,
    calls: Mutex<Calls>,
}

impl Counter {
    /// Serves the proxy in front of `upstream`; its URL, or `None` when `BENCH_SPONSORED_RPC` is not set.
    pub async fn start(upstream: &str) -> Option<(String, Arc<Counter>)> {
        std::env::var("BENCH_SPONSORED_RPC").ok().filter(|v| !v.is_empty())?;
        let counter = Arc::new(Counter {
            upstream: upstream.to_owned(),
            client: crate::common::client(64),
            calls: Mutex::new(Calls::new()),
        });
        let router = axum::Router::new().fallback(forward).with_state(counter.clone());
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("proxy listener");
        let url = format!("http://{}", listener.local_addr().expect("proxy address"));
        tokio::spawn(async move { axum::serve(listener, router).await });
        Some((url, counter))
    }

    pub fn calls(&self) -> Calls {
        self.calls.lock().unwrap_or_else(PoisonError::into_inner).clone()
    }

    /// "method n.nn (m.mm ms), …" per `per` of what was called between `before` and now, and the time anvil took
    /// to answer those calls, the most time first.
    pub fn since(&self, before: &Calls, per: usize) -> String {
        let per = per.max(1) as f64;
        let mut delta: Vec<(String, u64, u64)> = self
            .calls()
            .into_iter()
            .map(|(method, (n, micros))| {
                let (had, took) = before.get(&method).copied().unwrap_or_default();
                (method, n - had, micros - took)
            })
            .filter(|(_, n, _)| *n > 0)
            .collect();
        delta.sort_by_key(|(_, _, micros)| std::cmp::Reverse(*micros));
        let calls: u64 = delta.iter().map(|(_, n, _)| n).sum();
        let micros: u64 = delta.iter().map(|(_, _, t)| t).sum();
        let parts: Vec<String> = delta
            .iter()
            .map(|(method, n, t)| format!("{method} {:.2} ({:.2} ms)", *n as f64 / per, *t as f64 / 1e3 / per))
            .collect();
        format!(
            "{:.2} calls ({:.2} ms of answers): {}",
            calls as f64 / per,
            micros as f64 / 1e3 / per,
            parts.join(", ")
        )
    }
}

/// Forwards a JSON-RPC request to anvil as it is, counting its calls by method.
async fn forward(State(counter): State<Arc<Counter>>, body: Bytes) -> impl IntoResponse {
    let methods: Vec<String> = match serde_json::from_slice::<Value>(&body) {
        Ok(Value::Array(batch)) => batch.iter().map(method).collect(),
        Ok(one) => vec![method(&one)],
        Err(_) => vec!["?".into()],
    };
    let started = std::time::Instant::now();
    let answer = counter
        .client
        .post(&counter.upstream)
        .header(header::CONTENT_TYPE, "application/json")
        .body(body)
        .send()
        .await;
    let answer = match answer {
        Ok(answer) => {
            let status = StatusCode::from_u16(answer.status().as_u16()).unwrap_or(StatusCode::BAD_GATEWAY);
            let bytes = answer.bytes().await.unwrap_or_default();
            (status, [(header::CONTENT_TYPE, "application/json")], bytes).into_response()
        }
        Err(_) => StatusCode::BAD_GATEWAY.into_response(),
    };
    // A batch's time is shared among its calls.
    let micros = started.elapsed().as_micros() as u64 / methods.len().max(1) as u64;
    let mut counts = counter.calls.lock().unwrap_or_else(PoisonError::into_inner);
    for method in methods {
        let entry = counts.entry(method).or_default();
        entry.0 += 1;
        entry.1 += micros;
    }
    answer
}

fn method(call: &Value) -> String {
    call["method"].as_str().unwrap_or("?").to_string()
}
