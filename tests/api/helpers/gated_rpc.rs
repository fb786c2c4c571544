//! A JSON-RPC proxy in front of a node that can hold back broadcasts (`eth_sendRawTransaction`), or calls of another
//! method, until told to let them through, counting the ones it holds: for tests of what happens between a
//! transfer's signing and its broadcast, or between its authentication and its reservation.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use axum::body::Bytes;
use axum::extract::State;
use axum::response::IntoResponse;
use tokio::sync::watch;

#[derive(Clone)]
struct Gate {
    client: reqwest::Client,
    url: String,
    /// `true` while broadcasts are held.
    closed: watch::Sender<bool>,
    held: Arc<AtomicUsize>,
    /// The method held while closed.
    method: Arc<std::sync::Mutex<&'static str>>,
}

/// A running proxy; it stops with the test's runtime.
pub struct GatedRpc {
    url: String,
    gate: Gate,
}

impl GatedRpc {
    /// Forwards every POST to `upstream`; broadcasts pass until `hold` is called.
    pub async fn start(upstream: &str) -> GatedRpc {
        let gate = Gate {
            client: reqwest::Client::new(),
            url: upstream.to_string(),
            closed: watch::channel(false).0,
            held: Arc::default(),
            method: Arc::new(std::sync::Mutex::new("eth_sendRawTransaction")),
        };
        let router = axum::Router::new()
            .route("/", axum::routing::post(forward))
            .with_state(gate.clone());
        let url = super::relay::serve(router).await;
        GatedRpc { url, gate }
    }

    /// The URL to give the service as `RPC_URL_<CHAIN>`.
    pub fn url(&self) -> &str {
        &self.url
    }

    /// Broadcasts from now on wait for `release`.
    pub fn hold(&self) {
        self.hold_method("eth_sendRawTransaction");
    }

    /// Calls of `method` (alone or in a batch) from now on wait for `release`.
    pub fn hold_method(&self, method: &'static str) {
        *self.gate.method.lock().unwrap() = method;
        self.gate.closed.send_replace(true);
    }

    /// Lets every held broadcast (and later ones) through.
    pub fn release(&self) {
        self.gate.closed.send_replace(false);
    }

    /// How many broadcasts were held so far.
    pub fn held(&self) -> usize {
        self.gate.held.load(Ordering::SeqCst)
    }

    /// Waits until `count` broadcasts are held; panics after `timeout`.
    pub async fn wait_held(&self, count: usize, timeout: Duration) {
        let deadline = Instant::now() + timeout;
        while self.gate.held.load(Ordering::SeqCst) < count {
            assert!(
                Instant::now() < deadline,
                "{count} broadcasts held within {timeout:?} (held: {})",
                self.gate.held.load(Ordering::SeqCst)
            );
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    }
}

async fn forward(State(gate): State<Gate>, body: Bytes) -> impl IntoResponse {
    let held_method = *gate.method.lock().unwrap();
    // A single call of the method, or a batch with some (agentd broadcasts the transactions that wait together):
    // each call of it counts as one held.
    let calls = match serde_json::from_slice::<serde_json::Value>(&body) {
        Ok(serde_json::Value::Array(batch)) => batch.iter().filter(|call| call["method"] == held_method).count(),
        Ok(request) => usize::from(request["method"] == held_method),
        Err(_) => 0,
    };
    if calls > 0 && *gate.closed.borrow() {
        gate.held.fetch_add(calls, Ordering::SeqCst);
        let mut closed = gate.closed.subscribe();
        let _ = closed.wait_for(|closed| !closed).await;
    }
    super::relay::relay(&gate.client, &gate.url, body).await
}
