//! `webhooks`: how fast events reach a receiver (docs/api.md §19). The in-process app (SQLite,
//! `WEBHOOK_ALLOW_PRIVATE=true`) has one endpoint for an agent, a receiver on loopback answering 200 at once, and
//! `POST …/webhooks/{wid}/test` records one `webhook.test` event per call, committed when the 202 comes back. The
//! delay is from that 202 to the arrival of the request carrying the event's id as `webhook-id` (so it bounds the
//! delay from commit from above). First one event at a time (each waits for the one before to arrive: the idle
//! worker's pick-up), then a burst of events made by several callers at once (the worker's throughput).

use std::collections::HashMap;
use std::time::{Duration, Instant};

use axum::Router;
use axum::http::HeaderMap;
use futures::StreamExt;
use serde_json::{Value, json};
use tokio::sync::mpsc;

use crate::common::{LocalApp, Samples, TOKEN_HEADER, f, table};

const ONE_AT_A_TIME: usize = 100;
const BURST: usize = 1000;
const CALLERS: usize = 16;
const WAIT: Duration = Duration::from_secs(120);

/// A receiver answering 200 to every request; each arrival's `webhook-id` and time go to the channel.
async fn start_receiver() -> (String, mpsc::UnboundedReceiver<(String, Instant)>) {
    let (tx, rx) = mpsc::unbounded_channel();
    let app = Router::new().fallback(move |headers: HeaderMap| {
        let tx = tx.clone();
        async move {
            let at = Instant::now();
            if let Some(id) = headers.get("webhook-id").and_then(|v| v.to_str().ok()) {
                let _ = tx.send((id.to_string(), at));
            }
            "ok"
        }
    });
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind the receiver");
    let address = listener.local_addr().expect("receiver address");
    tokio::spawn(async move { axum::serve(listener, app).await });
    (format!("http://{address}/hook"), rx)
}

/// One `POST …/test`: the event's id and when its 202 came back.
async fn test_event(client: &reqwest::Client, url: &str, token: &str) -> Result<(String, Instant), String> {
    let response = client
        .post(url)
        .header(TOKEN_HEADER, token)
        .send()
        .await
        .map_err(|e| e.to_string())?;
    let status = response.status();
    let committed = Instant::now();
    let body: Value = response.json().await.map_err(|e| e.to_string())?;
    match body["event_id"].as_str() {
        Some(id) if status.as_u16() == 202 => Ok((id.to_string(), committed)),
        _ => Err(format!("{status}: {body}")),
    }
}

/// Arrivals of the ids in `wanted` (the first of each, later ones counted as repeats), until all came or `WAIT`.
async fn arrivals(
    rx: &mut mpsc::UnboundedReceiver<(String, Instant)>,
    wanted: &HashMap<String, Instant>,
) -> (HashMap<String, Instant>, usize) {
    let mut seen: HashMap<String, Instant> = HashMap::new();
    let mut repeats = 0;
    let deadline = tokio::time::Instant::now() + WAIT;
    while seen.len() < wanted.len() {
        match tokio::time::timeout_at(deadline, rx.recv()).await {
            Ok(Some((id, at))) if wanted.contains_key(&id) => {
                if seen.insert(id, at).is_some() {
                    repeats += 1;
                }
            }
            Ok(Some(_)) => {}
            _ => break,
        }
    }
    (seen, repeats)
}

fn delays(committed: &HashMap<String, Instant>, arrived: &HashMap<String, Instant>) -> Samples {
    Samples::new(
        arrived
            .iter()
            .filter_map(|(id, at)| {
                committed
                    .get(id)
                    .map(|c| at.saturating_duration_since(*c).as_secs_f64() * 1e3)
            })
            .collect(),
    )
}

pub async fn run() {
    let app = LocalApp::start(&[("WEBHOOK_ALLOW_PRIVATE", "true")]).await;
    let (receiver_url, mut rx) = start_receiver().await;
    // An open server: the agent is not guarded, so its token is the owner's authority here.
    let created = app
        .create_agent(json!({"name": "bench hooks", "chains": ["base"], "capabilities": ["read"], "spending_cap": 0}))
        .await;
    let token = created.token.as_str();
    let response = app
        .client
        .post(format!("{}/api/agents/{}/webhooks", app.address, created.id))
        .header(TOKEN_HEADER, token)
        .json(&json!({"url": receiver_url, "events": ["*"]}))
        .send()
        .await
        .expect("POST …/webhooks");
    assert_eq!(response.status().as_u16(), 201, "webhook registration failed");
    let hook: Value = response.json().await.expect("JSON webhook");
    let test_url = format!(
        "{}/api/agents/{}/webhooks/{}/test",
        app.address,
        created.id,
        hook["id"].as_str().expect("webhook id")
    );
    let client = &app.client;
    let mut errors = 0usize;
    let mut first_error: Option<String> = None;

    // One at a time: each event is made once the one before has arrived.
    let mut one_committed = HashMap::new();
    let mut one_arrived = HashMap::new();
    let mut one_repeats = 0;
    for _ in 0..ONE_AT_A_TIME {
        match test_event(client, &test_url, token).await {
            Ok((id, at)) => {
                let wanted = HashMap::from([(id.clone(), at)]);
                let (seen, repeats) = arrivals(&mut rx, &wanted).await;
                one_repeats += repeats;
                one_arrived.extend(seen);
                one_committed.insert(id, at);
            }
            Err(e) => {
                errors += 1;
                first_error.get_or_insert(e);
            }
        }
    }

    // A burst: CALLERS at once make BURST events; arrivals are read meanwhile.
    let started = Instant::now();
    let collector = {
        let calls = futures::stream::iter(0..BURST)
            .map(|_| test_event(client, &test_url, token))
            .buffer_unordered(CALLERS)
            .collect::<Vec<_>>();
        let mut early: Vec<(String, Instant)> = Vec::new();
        tokio::pin!(calls);
        // Drain arrivals while the calls run, so none waits in the channel to be timed (they carry their own time).
        let results = loop {
            tokio::select! {
                results = &mut calls => break results,
                Some(arrival) = rx.recv() => early.push(arrival),
            }
        };
        (results, early)
    };
    let (results, early) = collector;
    let made = started.elapsed();
    let mut burst_committed = HashMap::new();
    for result in results {
        match result {
            Ok((id, at)) => {
                burst_committed.insert(id, at);
            }
            Err(e) => {
                errors += 1;
                first_error.get_or_insert(e);
            }
        }
    }
    let mut burst_arrived: HashMap<String, Instant> = HashMap::new();
    let mut burst_repeats = 0;
    for (id, at) in early {
        if burst_committed.contains_key(&id) && burst_arrived.insert(id, at).is_some() {
            burst_repeats += 1;
        }
    }
    let rest: HashMap<String, Instant> = burst_committed
        .iter()
        .filter(|(id, _)| !burst_arrived.contains_key(*id))
        .map(|(id, at)| (id.clone(), *at))
        .collect();
    let (seen, repeats) = arrivals(&mut rx, &rest).await;
    burst_repeats += repeats;
    burst_arrived.extend(seen);
    let last = burst_arrived.values().max().copied().unwrap_or(started);
    let span = last.saturating_duration_since(started).as_secs_f64();

    let one = delays(&one_committed, &one_arrived);
    let burst = delays(&burst_committed, &burst_arrived);
    println!(
        "webhook.test events to one endpoint on loopback (answers 200 at once); delay = 202 of POST …/test -> arrival, ms"
    );
    table(
        &["events", "made", "arrived", "repeats", "p50", "p99", "max", "events/s"],
        &[
            vec![
                "one at a time".into(),
                one_committed.len().to_string(),
                one_arrived.len().to_string(),
                one_repeats.to_string(),
                f(one.pct(50.0), 1),
                f(one.pct(99.0), 1),
                f(one.max(), 1),
                String::new(),
            ],
            vec![
                format!("burst, {CALLERS} callers"),
                burst_committed.len().to_string(),
                burst_arrived.len().to_string(),
                burst_repeats.to_string(),
                f(burst.pct(50.0), 1),
                f(burst.pct(99.0), 1),
                f(burst.max(), 1),
                f(burst_arrived.len() as f64 / span, 0),
            ],
        ],
    );
    println!(
        "burst: events made in {:.2} s ({:.0}/s), the last arrived after {span:.2} s; errors {errors}",
        made.as_secs_f64(),
        burst_committed.len() as f64 / made.as_secs_f64(),
    );
    if let Some(error) = first_error {
        println!("first error: {error}");
    }
}
