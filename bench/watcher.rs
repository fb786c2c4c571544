//! `watcher`: the confirmation watcher with many transfers open (issue 21). N transfers from M agents go out to anvil
//! with mining off and stay in its pool; while they wait, the node requests the in-process app makes are counted
//! through a counting proxy in front of anvil (HTTP requests, and the JSON-RPC calls they carry: a batch is one
//! request with many calls). Then one block takes them all, and the time from that block to each transfer's
//! `tx_confirmation` event on the store's feed is measured.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use alloy::primitives::U256;
use axum::body::Bytes;
use axum::extract::State;
use axum::http::{StatusCode, header};
use axum::response::IntoResponse;
use futures::StreamExt;
use serde_json::{Value, json};
use tokio::sync::Semaphore;

use crate::common::{
    self, LocalApp, RECIPIENT, Samples, TOKEN_HEADER, f, start_anvil, table, transacting_agent, verdict,
};

/// Transfers open at once, and the agents they come from; `BENCH_WATCHER_TRANSFERS` / `BENCH_WATCHER_AGENTS`
/// override them.
const TRANSFERS: usize = 1_000;
const AGENTS: usize = 100;
/// Transfer requests in flight while the transfers go out.
const SENDING_AT_ONCE: usize = 32;
/// The watcher's pause between rounds (the test suite's).
const INTERVAL_MS: &str = "50";
/// How long the node requests are counted while every transfer is open.
const WINDOW: Duration = Duration::from_secs(5);
const CONFIRM_TIMEOUT: Duration = Duration::from_secs(60);

/// What went through the proxy.
#[derive(Default)]
struct Counts {
    requests: AtomicU64,
    calls: AtomicU64,
}

impl Counts {
    fn read(&self) -> (u64, u64) {
        (
            self.requests.load(Ordering::Relaxed),
            self.calls.load(Ordering::Relaxed),
        )
    }
}

struct Proxy {
    upstream: String,
    client: reqwest::Client,
    counts: Counts,
}

/// Forwards a JSON-RPC request to anvil as it is, counting it and its calls.
async fn forward(State(proxy): State<Arc<Proxy>>, body: Bytes) -> impl IntoResponse {
    let calls = match serde_json::from_slice::<Value>(&body) {
        Ok(Value::Array(batch)) => batch.len() as u64,
        _ => 1,
    };
    proxy.counts.requests.fetch_add(1, Ordering::Relaxed);
    proxy.counts.calls.fetch_add(calls, Ordering::Relaxed);
    let answer = proxy
        .client
        .post(&proxy.upstream)
        .header(header::CONTENT_TYPE, "application/json")
        .body(body)
        .send()
        .await;
    match answer {
        Ok(answer) => {
            let status = StatusCode::from_u16(answer.status().as_u16()).unwrap_or(StatusCode::BAD_GATEWAY);
            let bytes = answer.bytes().await.unwrap_or_default();
            (status, [(header::CONTENT_TYPE, "application/json")], bytes).into_response()
        }
        Err(_) => StatusCode::BAD_GATEWAY.into_response(),
    }
}

async fn start_proxy(upstream: &str) -> (String, Arc<Proxy>) {
    let proxy = Arc::new(Proxy {
        upstream: upstream.to_owned(),
        client: common::client(64),
        counts: Counts::default(),
    });
    let router = axum::Router::new().fallback(forward).with_state(proxy.clone());
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("proxy listener");
    let url = format!("http://{}", listener.local_addr().expect("proxy address"));
    tokio::spawn(async move { axum::serve(listener, router).await });
    (url, proxy)
}

fn setting(name: &str, default: usize) -> usize {
    std::env::var(name).ok().and_then(|v| v.parse().ok()).unwrap_or(default)
}

pub async fn run() {
    let transfers = setting("BENCH_WATCHER_TRANSFERS", TRANSFERS);
    let agents = setting("BENCH_WATCHER_AGENTS", AGENTS).clamp(1, transfers.max(1));
    let anvil = start_anvil(8453, &["--no-mining"]).await;
    let (proxy_url, proxy) = start_proxy(anvil.url()).await;
    let app = LocalApp::start(&[
        ("RPC_URL_BASE", proxy_url.as_str()),
        ("WATCHER_INTERVAL_MS", INTERVAL_MS),
        ("RUST_LOG", "warn"),
    ])
    .await;

    let mut senders = Vec::with_capacity(agents);
    for i in 0..agents {
        let agent = app.create_agent(transacting_agent(&format!("bench watched {i}"))).await;
        anvil
            .set_balance(agent.address("base"), U256::from(10u128.pow(21)))
            .await;
        senders.push(Arc::new(agent));
    }
    let sending = Arc::new(Semaphore::new(SENDING_AT_ONCE));
    let send_started = Instant::now();
    let mut jobs = Vec::with_capacity(transfers);
    for i in 0..transfers {
        let (client, base, agent, sending) = (
            app.client.clone(),
            app.address.clone(),
            senders[i % agents].clone(),
            sending.clone(),
        );
        jobs.push(tokio::spawn(async move {
            let _permit = sending.acquire().await.expect("semaphore");
            let response = client
                .post(format!("{base}/api/agents/{}/transfers", agent.id))
                .header(TOKEN_HEADER, &agent.token)
                .json(&json!({"chain": "base", "to": RECIPIENT, "amount": "0.0001"}))
                .send()
                .await
                .map_err(|e| e.to_string())?;
            let status = response.status().as_u16();
            let body: Value = response.json().await.unwrap_or(Value::Null);
            if status == 201 && body["status"] == "pending" {
                Ok(())
            } else {
                Err(format!("{status} {body}"))
            }
        }));
    }
    let mut failed = Vec::new();
    for job in jobs {
        if let Err(e) = job.await.expect("transfer task") {
            failed.push(e);
        }
    }
    let sent = transfers - failed.len();
    println!(
        "{sent}/{transfers} transfers from {agents} agents pending in {:.1} s (anvil --no-mining, watcher every {INTERVAL_MS} ms)",
        send_started.elapsed().as_secs_f64()
    );
    if let Some(e) = failed.first() {
        println!("  {} failed; first: {e}", failed.len());
    }

    // A round over every open transfer may outlast the window's start: one settles in first.
    tokio::time::sleep(Duration::from_secs(1)).await;
    let (requests_before, calls_before) = proxy.counts.read();
    tokio::time::sleep(WINDOW).await;
    let (requests_after, calls_after) = proxy.counts.read();
    let seconds = WINDOW.as_secs_f64();
    let requests_per_s = (requests_after - requests_before) as f64 / seconds;
    let calls_per_s = (calls_after - calls_before) as f64 / seconds;

    let mut feed = app.state.store.event_feed().await;
    let mine_started = Instant::now();
    anvil.mine(1).await;
    let mined = Instant::now();
    let mut delays = Vec::with_capacity(sent);
    while delays.len() < sent {
        match tokio::time::timeout_at((mined + CONFIRM_TIMEOUT).into(), feed.next()).await {
            Ok(Some(event)) if event.payload["status"] == "confirmed" => {
                delays.push(Instant::now().saturating_duration_since(mined))
            }
            Ok(Some(_)) => {}
            _ => break,
        }
    }
    let s = Samples::from_durations(&delays);
    table(
        &["figure", "value"],
        &[
            vec![
                format!("node HTTP requests/s, {sent} open ({} s)", WINDOW.as_secs()),
                f(requests_per_s, 1),
            ],
            vec!["JSON-RPC calls/s they carry".into(), f(calls_per_s, 1)],
            vec![
                "anvil_mine call (ms)".into(),
                f((mined - mine_started).as_secs_f64() * 1e3, 1),
            ],
            vec!["confirmed after the block: first (ms)".into(), f(s.min(), 1)],
            vec!["p50 (ms)".into(), f(s.pct(50.0), 1)],
            vec!["p99 (ms)".into(), f(s.pct(99.0), 1)],
            vec!["last (ms)".into(), f(s.max(), 1)],
        ],
    );
    println!(
        "  {}/{sent} confirmed; node requests/s target <= 20: {}; all confirmed within 2 s of the block: {}",
        s.len(),
        verdict(requests_per_s <= 20.0),
        verdict(s.len() == sent && sent == transfers && s.max() < 2000.0)
    );
}
