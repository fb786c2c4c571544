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

/// `wrk`: the same reads measured from outside the process by wrk (Debian's `wrk`; the section says so and stops when
/// it is missing), 2 threads and 32 keep-alive connections, 1 s warm-up then 5 s per endpoint: the bench process
/// only serves. The agent's token goes to wrk in a Lua script file, not on its command line.
pub async fn run_wrk() {
    if std::process::Command::new("wrk").arg("--version").output().is_err() {
        println!("wrk is not installed (apt-get install wrk): section skipped");
        return;
    }
    let bare = bare_server().await;
    let app = LocalApp::start(&[]).await;
    let agent = app.create_agent(json!({"name": "bench reader"})).await;
    let dir = tempfile::tempdir().expect("temporary directory");
    let script = dir.path().join("token.lua");
    std::fs::write(
        &script,
        format!("wrk.headers[\"{}\"] = \"{}\"\n", common::TOKEN_HEADER, agent.token),
    )
    .expect("write the wrk script");
    let script = script.display().to_string();
    let endpoints = [
        ("bare axum {\"ok\":true}", bare, None),
        (
            "GET /api/chains (no database)",
            format!("{}/api/chains", app.address),
            None,
        ),
        ("GET /health (SELECT 1)", format!("{}/health", app.address), None),
        (
            "GET /api/agents/{id} (token)",
            format!("{}/api/agents/{}", app.address, agent.id),
            Some(script.as_str()),
        ),
    ];
    let mut rows = Vec::new();
    let mut rates = Vec::new();
    for (name, url, script) in &endpoints {
        wrk(url, *script, 1).await;
        let (rate, p50, p99, out) = wrk(url, *script, 5).await;
        if rate == 0.0 {
            println!("wrk gave no figure for {url}:\n{out}");
        }
        rates.push(rate);
        rows.push(vec![name.to_string(), f(rate, 0), p50, p99]);
    }
    println!("wrk -t2 -c32 --latency, 1 s warm-up + 5 s measured each; the bench process only serves");
    table(&["endpoint", "req/s", "p50", "p99"], &rows);
    let ratio = rates[3] / rates[0];
    println!(
        "  authenticated / bare = {:.0}% (target >= 40%: {})",
        ratio * 100.0,
        verdict(ratio >= 0.4)
    );
}

/// One wrk run of `seconds` against `url`: requests per second, p50 and p99 as wrk prints them, and its output
/// (a run with non-2xx answers or socket errors gives no rate).
async fn wrk(url: &str, script: Option<&str>, seconds: u64) -> (f64, String, String, String) {
    let mut command = std::process::Command::new("wrk");
    command
        .args(["-t2", "-c32", "--latency", "-d"])
        .arg(format!("{seconds}s"));
    if let Some(script) = script {
        command.args(["-s", script]);
    }
    command.arg(url);
    let output = tokio::task::spawn_blocking(move || command.output())
        .await
        .expect("the wrk task")
        .expect("run wrk");
    let out = String::from_utf8_lossy(&output.stdout).into_owned();
    let field = |prefix: &str| {
        out.lines()
            .map(str::trim)
            .find_map(|l| l.strip_prefix(prefix))
            .map(|rest| rest.trim().to_string())
            .unwrap_or_default()
    };
    let failed = out.contains("Non-2xx") || out.contains("Socket errors");
    let rate = if failed {
        0.0
    } else {
        field("Requests/sec:").parse().unwrap_or(0.0)
    };
    (rate, field("50%"), field("99%"), out)
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
