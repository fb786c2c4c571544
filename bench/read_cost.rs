//! What one read costs the server, in CPU time rather than wall-clock rate (which other load on the machine skews):
//! the app serves on its own runtime (threads `srv`, plus SQLite's worker threads), a client on another runtime
//! sends a fixed number of keep-alive requests per endpoint, and each thread's on-CPU time is read from
//! `/proc/self/task/*/schedstat` (Linux) before and after. Rows as in `cargo bench --bench agentd -- http`.
//!
//! `cargo bench --bench read_cost [-- REQUESTS]` (default 20000 per row).

use std::collections::BTreeMap;
use std::time::Instant;

use agentd::app::App;
use agentd::config::Config;
use axum::Json;
use axum::routing::get;
use serde_json::{Value, json};

const WORKERS: usize = 32;
const ENCRYPTION_KEY: &str = "e17cbbe009243e23cd94262fddb8f83fca4de05f2e0d7058a0a203439f8f8910";

/// On-CPU nanoseconds of this process's threads, summed by group: the server's (`srv`, `sqlx-sqlite-*`) and the
/// rest (the client).
fn cpu() -> (u64, u64) {
    let (mut server, mut client) = (0, 0);
    for task in std::fs::read_dir("/proc/self/task").expect("/proc/self/task").flatten() {
        let path = task.path();
        let name = std::fs::read_to_string(path.join("comm")).unwrap_or_default();
        let on_cpu: u64 = std::fs::read_to_string(path.join("schedstat"))
            .ok()
            .and_then(|s| s.split_whitespace().next().and_then(|n| n.parse().ok()))
            .unwrap_or(0);
        if name.starts_with("srv") || name.starts_with("sqlx-sqlite") {
            server += on_cpu;
        } else {
            client += on_cpu;
        }
    }
    (server, client)
}

async fn load(client: &reqwest::Client, url: &str, token: Option<&str>, requests: usize) -> usize {
    let per_worker = requests / WORKERS;
    let workers: Vec<_> = (0..WORKERS)
        .map(|_| {
            let (client, url, token) = (client.clone(), url.to_string(), token.map(String::from));
            tokio::spawn(async move {
                let mut errors = 0;
                for _ in 0..per_worker {
                    let mut request = client.get(&url);
                    if let Some(token) = &token {
                        request = request.header("x-agent-access-token", token);
                    }
                    let ok = match request.send().await {
                        Ok(r) => {
                            let status = r.status().is_success();
                            r.bytes().await.is_ok() && status
                        }
                        Err(_) => false,
                    };
                    errors += usize::from(!ok);
                }
                errors
            })
        })
        .collect();
    let mut errors = 0;
    for w in workers {
        errors += w.await.expect("worker");
    }
    errors
}

/// The binary's allocator (src/main.rs), so that the in-process figures are the service's.
#[cfg(not(target_env = "msvc"))]
#[global_allocator]
static ALLOCATOR: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;

fn main() {
    let requests: usize = std::env::args()
        .skip(1)
        .find(|a| !a.starts_with('-'))
        .and_then(|n| n.parse().ok())
        .unwrap_or(20_000);
    let server_rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .thread_name("srv")
        .enable_all()
        .build()
        .expect("server runtime");
    let client_rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .thread_name("cli")
        .enable_all()
        .build()
        .expect("client runtime");
    let dir = tempfile::tempdir().expect("temporary directory");
    let (bare, app_url, _stops) = server_rt.block_on(async {
        let router = axum::Router::new().route("/", get(|| async { Json(json!({"ok": true})) }));
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let bare = format!("http://{}/", listener.local_addr().expect("address"));
        tokio::spawn(async move { axum::serve(listener, router).await });
        let vars = BTreeMap::from([
            ("BIND_ADDR".to_string(), "127.0.0.1:0".to_string()),
            ("APP_ENV".to_string(), "development".to_string()),
            ("ENCRYPTION_KEY".to_string(), ENCRYPTION_KEY.to_string()),
            (
                "DATABASE_URL".to_string(),
                format!("sqlite://{}/agentd.db", dir.path().display()),
            ),
        ]);
        let app = App::build(Config::from_vars(vars).expect("config")).await.expect("app");
        let url = format!("http://{}", app.local_addr());
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        tokio::spawn(app.run_until_stopped(async move {
            let _ = stopped.await;
        }));
        (bare, url, stop)
    });
    client_rt.block_on(async {
        let client = reqwest::Client::builder()
            .pool_max_idle_per_host(WORKERS)
            .build()
            .expect("client");
        let created: Value = client
            .post(format!("{app_url}/api/agents"))
            .json(&json!({"name": "cost reader"}))
            .send()
            .await
            .expect("create")
            .json()
            .await
            .expect("json");
        let id = created["id"].as_str().expect("id");
        let token = created["access_token"].as_str().expect("token");
        let rows = [
            ("bare axum", bare.clone(), None),
            ("GET /api/chains", format!("{app_url}/api/chains"), None),
            ("GET /health", format!("{app_url}/health"), None),
            (
                "GET /api/agents/{id}",
                format!("{app_url}/api/agents/{id}"),
                Some(token),
            ),
        ];
        println!("{requests} requests per row, {WORKERS} keep-alive workers; CPU microseconds per request");
        println!(
            "  {:<22} {:>8} {:>8} {:>8} {:>7}",
            "endpoint", "server", "client", "req/s", "errors"
        );
        for (name, url, token) in rows {
            load(&client, &url, token, requests / 10).await;
            let (s0, c0) = cpu();
            let started = Instant::now();
            let errors = load(&client, &url, token, requests).await;
            let wall = started.elapsed().as_secs_f64();
            let (s1, c1) = cpu();
            let per = |a: u64, b: u64| (b - a) as f64 / 1e3 / requests as f64;
            println!(
                "  {name:<22} {:>8.1} {:>8.1} {:>8.0} {errors:>7}",
                per(s0, s1),
                per(c0, c1),
                requests as f64 / wall
            );
        }
    });
}
