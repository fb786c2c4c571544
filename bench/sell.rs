//! `sell`: what agentd adds to a paid request when it sells (§23), on anvil (automine) with the EIP-3009 test token at
//! USDC's base address and the in-process app (SQLite), every node call passing through a recording proxy.
//!
//! 1. `added`: N paid `GET /x402/{id}` of an `on_success` offer of a stored body, and N of an offer fronting a local
//!    upstream, one request at a time, each with a payment signed beforehand by a fresh buyer (the 402 is read once,
//!    as a client caching the terms would). Each request's end-to-end time is split, from the proxy's record of the
//!    node calls made while it ran, into the chain's inclusion — the settlement's broadcast (`eth_sendRawTransaction`,
//!    which on anvil's automine includes mining the block) and the seller's wait for its receipt (from its first
//!    `eth_getTransactionReceipt` to the one that found it, the polling pauses included) — and the rest. For the
//!    upstream offer, the upstream's own time is a direct `GET` of it by the bench, alternating with the paid
//!    requests. added = end to end − inclusion − the resource's own time, per request; p50 and p99.
//! 2. `verify`: N `POST /api/agents/{id}/x402/verify` (the agent's own facilitator, a facilitator token) of fresh
//!    payments: the checks before any chain write, alone.
//!
//! Node calls per request are counted by method (a JSON-RPC batch counts each call and is shown as one round
//! trip). The proxy adds a loopback hop to each call, so the figures are an upper bound on a direct connection.
//! `BENCH_SELL_N` (default 200) sets N.

use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use alloy::primitives::{Address, B256, U256};
use alloy::signers::SignerSync;
use alloy::signers::local::PrivateKeySigner;
use alloy::sol_types::{SolStruct, eip712_domain};
use axum::body::Bytes;
use axum::extract::State;
use axum::http::{StatusCode, header};
use axum::response::IntoResponse;
use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use serde_json::{Value, json};

use crate::common::{LocalApp, Samples, TOKEN_HEADER, f, start_anvil, table, transacting_agent, verdict};
use crate::paywall::TransferWithAuthorization;
use crate::solidity;

const BASE_CHAIN_ID: u64 = 8453;
const ETHER: u128 = 1_000_000_000_000_000_000;
/// 0.01 USDC (6 decimals).
const PRICE: u64 = 10_000;
const BODY: &str = r#"{"report":"quarterly numbers"}"#;

/// One node call the proxy forwarded: its method(s), when it started and ended (from the bench's start), and
/// whether it was a batch.
#[derive(Clone)]
struct NodeCall {
    methods: Vec<String>,
    batch: bool,
    start: Duration,
    end: Duration,
}

/// The recording proxy between the app and anvil.
struct Recorder {
    upstream: String,
    client: reqwest::Client,
    epoch: Instant,
    calls: Mutex<Vec<NodeCall>>,
}

impl Recorder {
    async fn start(upstream: &str) -> (String, Arc<Recorder>) {
        let recorder = Arc::new(Recorder {
            upstream: upstream.to_owned(),
            client: crate::common::client(64),
            epoch: Instant::now(),
            calls: Mutex::new(Vec::new()),
        });
        let router = axum::Router::new().fallback(forward).with_state(recorder.clone());
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("proxy listener");
        let url = format!("http://{}", listener.local_addr().expect("proxy address"));
        tokio::spawn(async move { axum::serve(listener, router).await });
        (url, recorder)
    }

    fn now(&self) -> Duration {
        self.epoch.elapsed()
    }

    /// The calls that started within `[from, to]`.
    fn between(&self, from: Duration, to: Duration) -> Vec<NodeCall> {
        let calls = self.calls.lock().unwrap_or_else(PoisonError::into_inner);
        calls
            .iter()
            .filter(|c| c.start >= from && c.start <= to)
            .cloned()
            .collect()
    }
}

async fn forward(State(recorder): State<Arc<Recorder>>, body: Bytes) -> impl IntoResponse {
    let method = |call: &Value| call["method"].as_str().unwrap_or("?").to_string();
    let (methods, batch) = match serde_json::from_slice::<Value>(&body) {
        Ok(Value::Array(calls)) => (calls.iter().map(method).collect(), true),
        Ok(one) => (vec![method(&one)], false),
        Err(_) => (vec!["?".into()], false),
    };
    let start = recorder.now();
    let answer = recorder
        .client
        .post(&recorder.upstream)
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
    let end = recorder.now();
    recorder
        .calls
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .push(NodeCall {
            methods,
            batch,
            start,
            end,
        });
    answer
}

/// What one paid request's node calls came to: the inclusion (the broadcast plus the receipt wait), the other calls
/// and their time.
#[derive(Default)]
struct Split {
    inclusion: Duration,
    broadcast: Duration,
    receipt_polls: usize,
    /// The node calls that were not the inclusion's: (round trips, calls, their time), by the method of each call.
    other: Vec<(String, Duration)>,
    round_trips: usize,
    /// The wall time those other calls took, overlapping calls counted once: what the request waited on the node
    /// outside the inclusion.
    node_wall: Duration,
}

/// The length of the union of `intervals`.
fn union(mut intervals: Vec<(Duration, Duration)>) -> Duration {
    intervals.sort();
    let mut total = Duration::ZERO;
    let mut current: Option<(Duration, Duration)> = None;
    for (start, end) in intervals {
        current = match current {
            Some((s, e)) if start <= e => Some((s, e.max(end))),
            Some((s, e)) => {
                total += e - s;
                Some((start, end))
            }
            None => Some((start, end)),
        };
    }
    if let Some((s, e)) = current {
        total += e - s;
    }
    total
}

fn split(calls: &[NodeCall]) -> Split {
    let mut split = Split::default();
    // The seller's wait asks for one receipt at a time; the watcher asks in batches (and its rounds overlap).
    let waits: Vec<&NodeCall> = calls
        .iter()
        .filter(|c| !c.batch && c.methods[0] == "eth_getTransactionReceipt")
        .collect();
    if let (Some(first), Some(last)) = (waits.first(), waits.last()) {
        split.inclusion += last.end - first.start;
        split.receipt_polls = waits.len();
    }
    let mut intervals = Vec::new();
    for call in calls {
        if call.batch
            && call
                .methods
                .iter()
                .all(|m| m == "eth_getTransactionReceipt" || m == "eth_blockNumber")
        {
            // The watcher's rounds run beside the request, not in it.
            continue;
        }
        if !call.batch && call.methods[0] == "eth_getTransactionReceipt" {
            continue;
        }
        if !call.batch && call.methods[0] == "eth_sendRawTransaction" {
            split.broadcast += call.end - call.start;
            split.inclusion += call.end - call.start;
            continue;
        }
        split.round_trips += 1;
        intervals.push((call.start, call.end));
        let share = (call.end - call.start) / call.methods.len().max(1) as u32;
        for method in &call.methods {
            split.other.push((method.clone(), share));
        }
    }
    split.node_wall = union(intervals);
    split
}

/// A payment document for `entry` by `payer` with `nonce`, valid for five minutes, signed now.
fn signed(entry: &Value, resource: &str, payer: &PrivateKeySigner, nonce: B256) -> Value {
    let now = SystemTime::now().duration_since(UNIX_EPOCH).unwrap().as_secs();
    let asset: Address = entry["asset"].as_str().unwrap().parse().unwrap();
    let terms = TransferWithAuthorization {
        from: payer.address(),
        to: entry["payTo"].as_str().unwrap().parse().unwrap(),
        value: U256::from(PRICE),
        validAfter: U256::ZERO,
        validBefore: U256::from(now + 300),
        nonce,
    };
    let domain = eip712_domain! {
        name: "USD Coin",
        version: "2",
        chain_id: BASE_CHAIN_ID,
        verifying_contract: asset,
    };
    let signature = payer
        .sign_hash_sync(&terms.eip712_signing_hash(&domain))
        .expect("sign the authorization");
    json!({
        "x402Version": 2,
        "accepted": entry,
        "resource": {"url": resource, "description": "", "mimeType": "application/json"},
        "payload": {
            "signature": signature.to_string(),
            "authorization": {
                "from": terms.from.to_checksum(None),
                "to": terms.to.to_checksum(None),
                "value": terms.value.to_string(),
                "validAfter": "0",
                "validBefore": terms.validBefore.to_string(),
                "nonce": terms.nonce.to_string(),
            },
        },
    })
}

fn count() -> usize {
    std::env::var("BENCH_SELL_N")
        .ok()
        .and_then(|v| v.trim().parse().ok())
        .filter(|n| *n > 0)
        .unwrap_or(200)
}

/// A local upstream answering `BODY` at once.
async fn upstream() -> String {
    let router = axum::Router::new().route(
        "/report",
        axum::routing::get(|| async { ([(header::CONTENT_TYPE, "application/json")], BODY) }),
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("upstream listener");
    let url = format!("http://{}/report", listener.local_addr().expect("upstream address"));
    tokio::spawn(async move { axum::serve(listener, router).await });
    url
}

struct Bench {
    anvil: crate::anvil::Anvil,
    app: LocalApp,
    recorder: Arc<Recorder>,
    usdc: Address,
    agent: crate::common::CreatedAgent,
}

impl Bench {
    async fn offer(&self, resource: Value) -> (String, Value) {
        let body = json!({"chain": "base", "asset": "USDC", "price": "0.01", "description": "a benchmark offer",
            "resource": resource, "settle": "on_success", "gas_per_day": "100"});
        let response = self
            .app
            .client
            .post(format!("{}/api/agents/{}/offers", self.app.address, self.agent.id))
            .header(TOKEN_HEADER, &self.agent.token)
            .json(&body)
            .send()
            .await
            .expect("POST …/offers");
        assert_eq!(
            response.status().as_u16(),
            201,
            "{}",
            response.text().await.unwrap_or_default()
        );
        let offer: Value = response.json().await.expect("the offer");
        let url = offer["url"].as_str().expect("the offer's url").to_owned();
        let unpaid = self.app.client.get(&url).send().await.expect("the unpaid 402");
        assert_eq!(unpaid.status().as_u16(), 402);
        let required = unpaid.headers()["payment-required"].to_str().unwrap().to_owned();
        let required: Value = serde_json::from_slice(&STANDARD.decode(required).unwrap()).unwrap();
        (url, required["accepts"][0].clone())
    }

    /// `n` buyers each holding the price (one payment per payer and offer is in flight at a time, and the benchmark
    /// does not wait for the watcher to mark the previous one settled).
    async fn buyers(&self, n: usize) -> Vec<PrivateKeySigner> {
        let mut buyers = Vec::with_capacity(n);
        for _ in 0..n {
            let buyer = PrivateKeySigner::random();
            solidity::mint(&self.anvil, self.usdc, buyer.address(), U256::from(PRICE)).await;
            buyers.push(buyer);
        }
        buyers
    }

    /// One paid request: its time, the node calls made while it ran, and whether it was served.
    async fn paid(&self, url: &str, payment: &Value) -> (Duration, Vec<NodeCall>, Result<(), String>) {
        let header = STANDARD.encode(payment.to_string());
        let from = self.recorder.now();
        let started = Instant::now();
        let response = self
            .app
            .client
            .get(url)
            .header("PAYMENT-SIGNATURE", header)
            .send()
            .await
            .expect("GET /x402/{id}");
        let status = response.status().as_u16();
        let settled = response.headers().contains_key("payment-response");
        let body = response.text().await.unwrap_or_default();
        let took = started.elapsed();
        let calls = self.recorder.between(from, self.recorder.now());
        let served = match status == 200 && settled && body == BODY {
            true => Ok(()),
            false => Err(format!("{status}: {body}")),
        };
        (took, calls, served)
    }
}

pub async fn run() {
    let n = count();
    let anvil = start_anvil(BASE_CHAIN_ID, &[]).await;
    let (node, recorder) = Recorder::start(anvil.url()).await;
    // One client sends every payment: the per-client limit of `/x402/{id}` (`REISSUE_LIMIT_PER_IP`) is lifted.
    let app = LocalApp::start(&[
        ("RPC_URL_BASE", node.as_str()),
        ("OFFER_ALLOW_PRIVATE", "true"),
        ("REISSUE_LIMIT_PER_IP", "1000000"),
    ])
    .await;
    let agent = app.create_agent(transacting_agent("bench seller")).await;
    anvil.set_balance(agent.address("base"), U256::from(100 * ETHER)).await;
    let usdc = solidity::usdc_on_base(&anvil).await;
    let bench = Bench {
        anvil,
        app,
        recorder,
        usdc,
        agent,
    };
    println!(
        "anvil automine; in-process app (SQLite), its node calls through a recording proxy; N = {n} of each; \
         one request at a time; times in ms"
    );
    added(&bench, n).await;
    verify(&bench, n).await;
}

/// Part 1 (see the module's doc).
async fn added(bench: &Bench, n: usize) {
    let upstream_url = upstream().await;
    let (stored_url, stored_entry) = bench
        .offer(json!({"content": BODY, "content_type": "application/json"}))
        .await;
    let (fronted_url, fronted_entry) = bench.offer(json!({"url": upstream_url})).await;
    let buyers = bench.buyers(2 * (n + 1)).await;
    let mut buyers = buyers.iter();
    let nonce = |i: usize| B256::from(U256::from(i + 1));
    let client = &bench.app.client;

    // Warm-up, not counted: one of each.
    for (url, entry) in [(&stored_url, &stored_entry), (&fronted_url, &fronted_entry)] {
        let payment = signed(entry, url, buyers.next().unwrap(), nonce(0));
        bench.paid(url, &payment).await.2.expect("a warm-up sale");
    }

    let (mut stored, mut fronted, mut own) = (Rows::default(), Rows::default(), Vec::with_capacity(n));
    let mut errors = Vec::new();
    for i in 0..n {
        let payment = signed(&stored_entry, &stored_url, buyers.next().unwrap(), nonce(i + 1));
        match bench.paid(&stored_url, &payment).await {
            (took, calls, Ok(())) => stored.push(took, &split(&calls), Duration::ZERO),
            (_, _, Err(e)) => errors.push(e),
        }
        let started = Instant::now();
        let direct = client.get(&upstream_url).send().await.expect("the upstream");
        let _ = direct.text().await;
        let upstream_own = started.elapsed();
        own.push(upstream_own);
        let payment = signed(&fronted_entry, &fronted_url, buyers.next().unwrap(), nonce(i + 1));
        match bench.paid(&fronted_url, &payment).await {
            (took, calls, Ok(())) => fronted.push(took, &split(&calls), upstream_own),
            (_, _, Err(e)) => errors.push(e),
        }
    }

    println!("\nadded: paid GET /x402/{{id}}, settle on_success; added = end to end - inclusion - the resource's own");
    let row = |name: &str, s: Samples| {
        vec![
            name.to_string(),
            s.len().to_string(),
            f(s.pct(50.0), 2),
            f(s.pct(99.0), 2),
        ]
    };
    let own = Samples::from_durations(&own);
    table(
        &["", "n", "p50 ms", "p99 ms"],
        &[
            row("stored body: end to end", stored.total()),
            row("stored body: inclusion (broadcast + receipt wait)", stored.inclusion()),
            row("stored body: added by agentd", stored.added()),
            row(
                "  of which waiting on the node (checks, simulations, quote)",
                Samples::from_durations(&stored.node_wall),
            ),
            row(
                "  of which agentd's own work (added - node wait)",
                Samples::from_durations(&stored.own),
            ),
            row("upstream: end to end", fronted.total()),
            row("upstream: inclusion (broadcast + receipt wait)", fronted.inclusion()),
            row("upstream: its own time (direct GET)", own),
            row("upstream: added by agentd", fronted.added()),
            row(
                "  of which waiting on the node (checks, simulations, quote)",
                Samples::from_durations(&fronted.node_wall),
            ),
            row(
                "  of which agentd's own work (added - node wait)",
                Samples::from_durations(&fronted.own),
            ),
        ],
    );
    for (name, rows) in [("stored body", &stored), ("upstream", &fronted)] {
        println!(
            "  {name}: the broadcast {} ms p50 (anvil mines in it); receipt polls per request {}; \
             other node calls per request: {}",
            f(Samples::from_durations(&rows.broadcast).pct(50.0), 2),
            f(rows.polls as f64 / rows.len().max(1) as f64, 2),
            rows.node_calls()
        );
    }
    let (s, u) = (stored.added().pct(50.0), fronted.added().pct(50.0));
    println!(
        "  target: added p50 under 5 ms: stored body {} ms ({}), upstream {} ms ({}); errors {}",
        f(s, 2),
        verdict(s < 5.0),
        f(u, 2),
        verdict(u < 5.0),
        errors.len()
    );
    if let Some(e) = errors.first() {
        println!("  first error: {e}");
    }
}

/// Part 2 (see the module's doc).
async fn verify(bench: &Bench, n: usize) {
    let (url, entry) = bench
        .offer(json!({"content": BODY, "content_type": "application/json"}))
        .await;
    let client = &bench.app.client;
    let created = client
        .post(format!(
            "{}/api/agents/{}/facilitator-tokens",
            bench.app.address, bench.agent.id
        ))
        .header(TOKEN_HEADER, &bench.agent.token)
        .send()
        .await
        .expect("POST …/facilitator-tokens");
    assert_eq!(created.status().as_u16(), 201);
    let token = created.json::<Value>().await.unwrap()["token"]
        .as_str()
        .unwrap()
        .to_owned();
    let verify_url = format!("{}/api/agents/{}/x402/verify", bench.app.address, bench.agent.id);
    let buyer = bench.buyers(1).await.remove(0);
    let mut times = Vec::with_capacity(n);
    let mut calls_seen = Vec::new();
    let (mut node_wall, mut own) = (Vec::with_capacity(n), Vec::with_capacity(n));
    let mut errors = Vec::new();
    for i in 0..=n {
        let payment = signed(&entry, &url, &buyer, B256::from(U256::from(1_000_000 + i)));
        let body = json!({"x402Version": 2, "paymentPayload": payment, "paymentRequirements": entry});
        let from = bench.recorder.now();
        let started = Instant::now();
        let response = client
            .post(&verify_url)
            .bearer_auth(&token)
            .json(&body)
            .send()
            .await
            .expect("POST …/x402/verify");
        let answer: Value = response.json().await.unwrap_or(Value::Null);
        let took = started.elapsed();
        if i == 0 {
            continue; // warm-up
        }
        if answer["isValid"] != true {
            errors.push(answer.to_string());
            continue;
        }
        times.push(took);
        let calls = bench.recorder.between(from, bench.recorder.now());
        let waited = split(&calls).node_wall;
        node_wall.push(waited);
        own.push(took.saturating_sub(waited));
        calls_seen.extend(calls);
    }
    let s = Samples::from_durations(&times);
    println!("\nverify: POST …/x402/verify (facilitator token), a fresh valid payment each time");
    table(
        &["", "n", "p50 ms", "p99 ms", "max ms"],
        &[
            vec![
                "verification alone".into(),
                s.len().to_string(),
                f(s.pct(50.0), 2),
                f(s.pct(99.0), 2),
                f(s.max(), 2),
            ],
            {
                let w = Samples::from_durations(&node_wall);
                vec![
                    "  of which waiting on the node".into(),
                    w.len().to_string(),
                    f(w.pct(50.0), 2),
                    f(w.pct(99.0), 2),
                    f(w.max(), 2),
                ]
            },
            {
                let o = Samples::from_durations(&own);
                vec![
                    "  of which agentd's own work".into(),
                    o.len().to_string(),
                    f(o.pct(50.0), 2),
                    f(o.pct(99.0), 2),
                    f(o.max(), 2),
                ]
            },
        ],
    );
    let seen = split(&calls_seen);
    let rows = Rows {
        calls: seen.other,
        round_trips: seen.round_trips,
        total: vec![Duration::ZERO; times.len()],
        ..Default::default()
    };
    println!("  node calls per verification: {}", rows.node_calls());
    println!(
        "  target: p50 under 2 ms: {} ms ({}); errors {}",
        f(s.pct(50.0), 2),
        verdict(s.pct(50.0) < 2.0),
        errors.len()
    );
    if let Some(e) = errors.first() {
        println!("  first error: {e}");
    }
}

/// The samples of one kind of paid request.
#[derive(Default)]
struct Rows {
    total: Vec<Duration>,
    inclusion: Vec<Duration>,
    added: Vec<Duration>,
    broadcast: Vec<Duration>,
    polls: usize,
    calls: Vec<(String, Duration)>,
    round_trips: usize,
    node_wall: Vec<Duration>,
    /// added less the node wall: agentd's own work (and the proxy's hops).
    own: Vec<Duration>,
}

impl Rows {
    fn push(&mut self, took: Duration, split: &Split, own: Duration) {
        self.total.push(took);
        self.inclusion.push(split.inclusion);
        self.broadcast.push(split.broadcast);
        let added = took.saturating_sub(split.inclusion).saturating_sub(own);
        self.added.push(added);
        self.node_wall.push(split.node_wall);
        self.own.push(added.saturating_sub(split.node_wall));
        self.polls += split.receipt_polls;
        self.round_trips += split.round_trips;
        self.calls.extend(split.other.iter().cloned());
    }

    fn len(&self) -> usize {
        self.total.len()
    }

    fn total(&self) -> Samples {
        Samples::from_durations(&self.total)
    }

    fn inclusion(&self) -> Samples {
        Samples::from_durations(&self.inclusion)
    }

    fn added(&self) -> Samples {
        Samples::from_durations(&self.added)
    }

    /// "r round trips, c calls (t ms): method n (ms), …" per request, the most time first.
    fn node_calls(&self) -> String {
        let per = self.total.len().max(1) as f64;
        let mut by: std::collections::BTreeMap<&str, (usize, Duration)> = Default::default();
        for (method, took) in &self.calls {
            let entry = by.entry(method.as_str()).or_default();
            entry.0 += 1;
            entry.1 += *took;
        }
        let mut by: Vec<_> = by.into_iter().collect();
        by.sort_by_key(|(_, (_, took))| std::cmp::Reverse(*took));
        let all: Duration = by.iter().map(|(_, (_, t))| *t).sum();
        let parts: Vec<String> = by
            .iter()
            .map(|(m, (k, t))| format!("{m} {:.2} ({:.2} ms)", *k as f64 / per, t.as_secs_f64() * 1e3 / per))
            .collect();
        format!(
            "{:.2} round trips, {:.2} calls ({:.2} ms): {}",
            self.round_trips as f64 / per,
            self.calls.len() as f64 / per,
            all.as_secs_f64() * 1e3 / per,
            parts.join(", ")
        )
    }
}
