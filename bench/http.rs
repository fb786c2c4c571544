//! `http`: authenticated `GET /api/agents/{id}` of the real app next to a bare axum JSON handler, same client,
//! same load (keep-alive, `WORKERS` concurrent requesters, a warm-up, then a measured window).

use std::time::{Duration, Instant};

use axum::Json;
use axum::routing::get;
use serde_json::json;

use crate::common::{self, LocalApp, Samples, f, table, verdict};

const WORKERS: usize = 32;
const WARM_UP: Duration = Duration::from_secs(1);
const MEASURE: Duration = Duration::from_secs(5);

/// What one load run produced.
struct Load {
    requests: usize,
    errors: usize,
    window: Duration,
    latencies_ms: Samples,
}

impl Load {
    fn rate(&self) -> f64 {
        self.requests as f64 / self.window.as_secs_f64()
    }
}

pub async fn run() {
    let bare = bare_server().await;
    let app = LocalApp::start(&[]).await;
    let agent = app.create_agent(json!({"name": "bench reader"})).await;
    let agent_url = format!("{}/api/agents/{}", app.address, agent.id);

    let bare_load = load(&bare, None).await;
    // Two rungs between the bare handler and the authenticated read, to show where the time goes: the app's
    // middleware alone (no database), then one trivial query.
    let chains_load = load(&format!("{}/api/chains", app.address), None).await;
    let health_load = load(&format!("{}/health", app.address), None).await;
    let app_load = load(&agent_url, Some(&agent.token)).await;

    let row = |name: &str, l: &Load| {
        vec![
            name.to_string(),
            f(l.rate(), 0),
            f(l.latencies_ms.pct(50.0), 2),
            f(l.latencies_ms.pct(99.0), 2),
            l.requests.to_string(),
            l.errors.to_string(),
        ]
    };
    println!(
        "{WORKERS} keep-alive workers, {} s warm-up + {} s measured each, one reqwest client per run",
        WARM_UP.as_secs(),
        MEASURE.as_secs()
    );
    table(
        &["endpoint", "req/s", "p50 ms", "p99 ms", "requests", "errors"],
        &[
            row("bare axum {\"ok\":true}", &bare_load),
            row("GET /api/chains (no database)", &chains_load),
            row("GET /health (SELECT 1)", &health_load),
            row("GET /api/agents/{id} (token)", &app_load),
        ],
    );
    let ratio = app_load.rate() / bare_load.rate();
    println!(
        "  authenticated / bare = {:.0}% (target >= 50%: {})",
        ratio * 100.0,
        verdict(ratio >= 0.5)
    );
}

/// A bare axum app answering `{"ok":true}` on its own listener; returns its URL.
async fn bare_server() -> String {
    let router = axum::Router::new().route("/", get(|| async { Json(json!({"ok": true})) }));
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind the bare server");
    let url = format!("http://{}/", listener.local_addr().expect("bound address"));
    tokio::spawn(async move { axum::serve(listener, router).await });
    url
}

/// `WORKERS` tasks request `url` back to back; only requests started after the warm-up count.
async fn load(url: &str, token: Option<&str>) -> Load {
    let client = common::client(WORKERS);
    let start = Instant::now();
    let measure_from = start + WARM_UP;
    let end = measure_from + MEASURE;
    let workers: Vec<_> = (0..WORKERS)
        .map(|_| {
            let (client, url, token) = (client.clone(), url.to_string(), token.map(String::from));
            tokio::spawn(async move {
                let mut latencies = Vec::with_capacity(1 << 16);
                let mut errors = 0;
                loop {
                    let sent = Instant::now();
                    if sent >= end {
                        break;
                    }
                    let mut request = client.get(&url);
                    if let Some(token) = &token {
                        request = request.header(common::TOKEN_HEADER, token);
                    }
                    let ok = match request.send().await {
                        Ok(response) => {
                            let status_ok = response.status().is_success();
                            response.bytes().await.is_ok() && status_ok
                        }
                        Err(_) => false,
                    };
                    if sent >= measure_from {
                        latencies.push(sent.elapsed().as_secs_f64() * 1e3);
                        errors += usize::from(!ok);
                    }
                }
                (latencies, errors)
            })
        })
        .collect();
    let mut all = Vec::new();
    let mut errors = 0;
    for worker in workers {
        let (latencies, worker_errors) = worker.await.expect("load worker");
        all.extend(latencies);
        errors += worker_errors;
    }
    // The window ends when the last measured request came back.
    let window = Instant::now().saturating_duration_since(measure_from);
    Load {
        requests: all.len(),
        errors,
        window,
        latencies_ms: Samples::new(all),
    }
}
