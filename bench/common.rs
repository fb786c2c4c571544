//! Shared pieces: the in-process app, agent creation over HTTP, percentiles and table printing.

use std::collections::BTreeMap;
use std::time::Duration;

use agentd::app::App;
use agentd::config::Config;
use agentd::domain::agent::Agent;
use agentd::state::AppState;
use serde_json::{Value, json};
use tempfile::TempDir;
use tokio::sync::oneshot;

use crate::anvil::Anvil;

/// The fixed key the benchmark apps encrypt wallet keys with (the test suite's, 32 bytes hex).
pub const ENCRYPTION_KEY: &str = "e17cbbe009243e23cd94262fddb8f83fca4de05f2e0d7058a0a203439f8f8910";
pub const TOKEN_HEADER: &str = "X-Agent-Access-Token";
/// Where the benchmark transfers go (any address works on anvil).
pub const RECIPIENT: &str = "0x52908400098527886E0F7030069857D2E4169EE7";

/// The PostgreSQL server the benchmarks create their databases on unless `BENCH_POSTGRES_URL` names another.
pub const DEFAULT_POSTGRES: &str = "postgres://postgres@127.0.0.1:5432/postgres";

/// A new database on the PostgreSQL server of `BENCH_POSTGRES_URL` (as the tests create theirs); its URL.
pub async fn fresh_postgres() -> Result<String, String> {
    use sqlx::{Connection, Executor};

    let admin = std::env::var("BENCH_POSTGRES_URL").unwrap_or_else(|_| DEFAULT_POSTGRES.to_string());
    let name = format!("agentd_bench_{}", uuid::Uuid::new_v4().simple());
    let mut conn = sqlx::PgConnection::connect(&admin).await.map_err(|e| e.to_string())?;
    conn.execute(sqlx::AssertSqlSafe(format!(r#"CREATE DATABASE "{name}""#)))
        .await
        .map_err(|e| e.to_string())?;
    let _ = conn.close().await;
    let mut url = reqwest::Url::parse(&admin).map_err(|e| e.to_string())?;
    url.set_path(&format!("/{name}"));
    Ok(url.to_string())
}

/// The real app, built in-process on a temporary SQLite file and serving on a free port.
pub struct LocalApp {
    pub address: String,
    pub state: AppState,
    pub client: reqwest::Client,
    _dir: TempDir,
    _stop: oneshot::Sender<()>,
}

/// An agent created through the API.
pub struct CreatedAgent {
    pub id: String,
    pub token: String,
    pub body: Value,
}

impl CreatedAgent {
    pub fn address(&self, chain: &str) -> alloy::primitives::Address {
        self.body["wallet_addresses"][chain]
            .as_str()
            .and_then(|a| a.parse().ok())
            .unwrap_or_else(|| panic!("no {chain} wallet in {}", self.body))
    }
}

impl LocalApp {
    /// Builds and serves the app; `extra` adds to (or overrides) the base variables.
    pub async fn start(extra: &[(&str, &str)]) -> LocalApp {
        let dir = tempfile::tempdir().expect("temporary directory");
        let mut vars = BTreeMap::from([
            ("BIND_ADDR".to_string(), "127.0.0.1:0".to_string()),
            ("APP_ENV".to_string(), "development".to_string()),
            ("ENCRYPTION_KEY".to_string(), ENCRYPTION_KEY.to_string()),
            (
                "DATABASE_URL".to_string(),
                format!("sqlite://{}/agentd.db", dir.path().display()),
            ),
        ]);
        // `BENCH_KEY_BACKEND=pkcs11` (with `PKCS11_MODULE`, `PKCS11_TOKEN_LABEL`, `PKCS11_PIN` and the module's own
        // configuration in the environment): every agent's key in that token, to compare with the local backend.
        if std::env::var("BENCH_KEY_BACKEND").as_deref() == Ok("pkcs11") {
            vars.insert("KEY_BACKEND".to_string(), "pkcs11".to_string());
            for name in ["PKCS11_MODULE", "PKCS11_TOKEN_LABEL", "PKCS11_PIN"] {
                let value = std::env::var(name).unwrap_or_else(|_| panic!("BENCH_KEY_BACKEND=pkcs11 needs {name}"));
                vars.insert(name.to_string(), value);
            }
        }
        for (key, value) in extra {
            vars.insert(key.to_string(), value.to_string());
        }
        let config = Config::from_vars(vars).expect("valid benchmark configuration");
        let app = App::build(config).await.expect("the app builds");
        let address = format!("http://{}", app.local_addr());
        let state = app.state().clone();
        let (stop, stopped) = oneshot::channel::<()>();
        tokio::spawn(app.run_until_stopped(async move {
            let _ = stopped.await;
        }));
        LocalApp {
            address,
            state,
            client: client(64),
            _dir: dir,
            _stop: stop,
        }
    }

    pub async fn create_agent(&self, body: Value) -> CreatedAgent {
        create_agent(&self.client, &self.address, body).await
    }

    /// The agent as the store has it (what the chat runner and transfers take).
    pub async fn agent(&self, created: &CreatedAgent) -> Agent {
        let id = created.id.parse().expect("agent id is a UUID");
        self.state.store.get_agent(id).await.expect("the agent is stored")
    }
}

/// Starts anvil off the async workers (its start-up wait blocks).
pub async fn start_anvil(chain_id: u64, args: &'static [&'static str]) -> Anvil {
    tokio::task::spawn_blocking(move || Anvil::start_with(chain_id, args))
        .await
        .expect("anvil start-up task")
}

/// A keep-alive client with room for `idle` pooled connections per host.
pub fn client(idle: usize) -> reqwest::Client {
    reqwest::Client::builder()
        .pool_max_idle_per_host(idle)
        .timeout(Duration::from_secs(30))
        .build()
        .expect("HTTP client")
}

/// `POST /api/agents` and insists on a 201.
pub async fn create_agent(client: &reqwest::Client, base: &str, body: Value) -> CreatedAgent {
    let response = client
        .post(format!("{base}/api/agents"))
        .json(&body)
        .send()
        .await
        .expect("POST /api/agents");
    let status = response.status();
    let body: Value = response.json().await.expect("JSON agent");
    assert_eq!(status.as_u16(), 201, "agent creation failed: {body}");
    CreatedAgent {
        id: body["id"].as_str().expect("id").to_string(),
        token: body["access_token"].as_str().expect("access_token").to_string(),
        body,
    }
}

/// An agent on base that may read and send, with a cap no benchmark reaches.
pub fn transacting_agent(name: &str) -> Value {
    json!({
        "name": name,
        "chains": ["base"],
        "capabilities": ["read", "transact"],
        "spending_cap": 1_000_000,
    })
}

/// Latency samples (any unit) with percentiles.
pub struct Samples(Vec<f64>);

impl Samples {
    pub fn new(mut values: Vec<f64>) -> Samples {
        values.sort_by(f64::total_cmp);
        Samples(values)
    }

    pub fn from_durations(values: &[Duration]) -> Samples {
        Samples::new(values.iter().map(|d| d.as_secs_f64() * 1e3).collect())
    }

    pub fn len(&self) -> usize {
        self.0.len()
    }

    /// The nearest-rank percentile, `p` in 0..=100 (NaN when empty).
    pub fn pct(&self, p: f64) -> f64 {
        if self.0.is_empty() {
            return f64::NAN;
        }
        let rank = ((p / 100.0) * self.0.len() as f64).ceil() as usize;
        self.0[rank.clamp(1, self.0.len()) - 1]
    }

    pub fn max(&self) -> f64 {
        self.0.last().copied().unwrap_or(f64::NAN)
    }

    pub fn min(&self) -> f64 {
        self.0.first().copied().unwrap_or(f64::NAN)
    }
}

/// Prints rows as a left-aligned first column and right-aligned others.
pub fn table(header: &[&str], rows: &[Vec<String>]) {
    let mut widths: Vec<usize> = header.iter().map(|h| h.len()).collect();
    for row in rows {
        for (i, cell) in row.iter().enumerate() {
            widths[i] = widths[i].max(cell.chars().count());
        }
    }
    let line = |cells: Vec<String>| {
        let parts: Vec<String> = cells
            .iter()
            .enumerate()
            .map(|(i, c)| {
                if i == 0 {
                    format!("{c:<w$}", w = widths[i])
                } else {
                    format!("{c:>w$}", w = widths[i])
                }
            })
            .collect();
        println!("  {}", parts.join("  "));
    };
    line(header.iter().map(|h| h.to_string()).collect());
    line(widths.iter().map(|w| "-".repeat(*w)).collect());
    for row in rows {
        line(row.clone());
    }
}

/// `value` with `decimals` decimals.
pub fn f(value: f64, decimals: usize) -> String {
    format!("{value:.decimals$}")
}

/// "met" / "NOT met" for a target.
pub fn verdict(met: bool) -> &'static str {
    if met { "met" } else { "NOT met" }
}

/// Processor time spent by this process (agentd in process with the bench's client), by an anvil, by every
/// PostgreSQL server process and by the machine as a whole, read from `/proc` (Linux; zeros elsewhere). Ticks are
/// `USER_HZ`, which Linux fixes at 100 a second for `/proc`'s figures.
#[derive(Clone, Copy, Default)]
pub struct CpuTicks {
    pub own: u64,
    pub anvil: u64,
    pub postgres: u64,
    /// Ticks of every CPU in all, and of those idle (`/proc/stat`'s first line).
    pub total: u64,
    pub idle: u64,
}

const USER_HZ: f64 = 100.0;

impl CpuTicks {
    pub fn now(anvil_pid: u32) -> CpuTicks {
        let (total, idle) = machine_ticks();
        let mut postgres = 0;
        if let Ok(entries) = std::fs::read_dir("/proc") {
            for entry in entries.flatten() {
                let name = entry.file_name();
                let Some(pid) = name.to_str().and_then(|n| n.parse::<u32>().ok()) else {
                    continue;
                };
                if let Some((comm, ticks)) = process_ticks(pid)
                    && comm.starts_with("postgres")
                {
                    postgres += ticks;
                }
            }
        }
        CpuTicks {
            own: process_ticks(std::process::id()).map_or(0, |(_, t)| t),
            anvil: process_ticks(anvil_pid).map_or(0, |(_, t)| t),
            postgres,
            total,
            idle,
        }
    }

    /// What was spent between `before` and `self`, as milliseconds of one CPU per `n` units of work, and the
    /// machine's idle share: "own 1.20, anvil 0.80, postgres 0.10 ms/send; idle 18%".
    pub fn since(&self, before: &CpuTicks, n: usize, unit: &str) -> String {
        let per = |after: u64, before: u64| after.saturating_sub(before) as f64 * 1000.0 / USER_HZ / n.max(1) as f64;
        let total = self.total.saturating_sub(before.total).max(1) as f64;
        format!(
            "CPU per {unit}: agentd with the bench client {:.2} ms, anvil {:.2} ms, PostgreSQL {:.2} ms; machine idle {:.0}%",
            per(self.own, before.own),
            per(self.anvil, before.anvil),
            per(self.postgres, before.postgres),
            self.idle.saturating_sub(before.idle) as f64 * 100.0 / total
        )
    }
}

/// A process's command name and its user plus system ticks (`/proc/<pid>/stat`, fields 14 and 15).
fn process_ticks(pid: u32) -> Option<(String, u64)> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let (open, close) = (stat.find('(')?, stat.rfind(')')?);
    let comm = stat.get(open + 1..close)?.to_string();
    // After the name: state is field 3, so utime (14) and stime (15) are the 12th and 13th fields after it.
    let mut rest = stat.get(close + 2..)?.split_whitespace().skip(11);
    let user: u64 = rest.next()?.parse().ok()?;
    let system: u64 = rest.next()?.parse().ok()?;
    Some((comm, user + system))
}

/// Every CPU's ticks and the idle ones (idle plus iowait) from `/proc/stat`.
fn machine_ticks() -> (u64, u64) {
    let Ok(stat) = std::fs::read_to_string("/proc/stat") else {
        return (0, 0);
    };
    let Some(line) = stat.lines().next() else {
        return (0, 0);
    };
    let fields: Vec<u64> = line.split_whitespace().skip(1).filter_map(|v| v.parse().ok()).collect();
    // user nice system idle iowait irq softirq steal (guest time is inside user already)
    let total = fields.iter().take(8).sum();
    let idle = fields.get(3).copied().unwrap_or(0) + fields.get(4).copied().unwrap_or(0);
    (total, idle)
}
