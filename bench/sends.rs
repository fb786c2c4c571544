//! `sends`: transfers per second of one agent through the transfer service against anvil (automine): native ones,
//! and ERC-20 ones of a test token (`tests/contracts/TestToken.sol`, compiled with npm solc, registered with
//! `TOKENS_BASE`) from a second agent, next to anvil's own intake of pre-signed raw EIP-1559 transactions sent one
//! after the other, same node and same run. Each agent's final nonce on the node is checked, and the recipient's
//! token balance.
//!
//! Then the targets of issue 13, over HTTP against the running app: `POST /api/agents/{id}/transfers` (no LLM) and
//! `POST /api/chat` ("send 0.001 ETH to 0x… on base", builtin engine) from one agent, `CONCURRENCY` requests in
//! flight, against anvil's raw intake with the same number in flight; and 32 agents sending 1,000 transfers in all at
//! once (each agent one request at a time), on SQLite and on PostgreSQL (a fresh database on `BENCH_POSTGRES_URL`,
//! default `postgres://postgres@127.0.0.1:5432/postgres`, created like the tests do; skipped when unreachable).

use std::future::Future;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use agentd::chain::Node;
use agentd::domain::amount::Amount;
use agentd::domain::asset::Asset;
use agentd::domain::chain as registry;
use agentd::domain::chain::ChainInfo;
use agentd::transfers::{BroadcastStatus, TransferOrder, TransferOutcome, Transfers};
use alloy::consensus::{SignableTransaction, TxEip1559, TxEnvelope};
use alloy::eips::eip2718::Encodable2718;
use alloy::network::TxSignerSync;
use alloy::primitives::{Address, TxKind, U256};
use alloy::providers::Provider;
use alloy::signers::local::PrivateKeySigner;
use serde_json::{Value, json};

use crate::anvil::Anvil;
use crate::common::{
    self, CpuTicks, CreatedAgent, LocalApp, RECIPIENT, Samples, TOKEN_HEADER, f, start_anvil, table, transacting_agent,
    verdict,
};
use crate::solidity;

const N: usize = 200;
const AMOUNT: &str = "0.001";
/// Of the test token (6 decimals, like USDC): 1.5 TUSD = 1 500 000 base units.
const TOKEN_AMOUNT: &str = "1.5";
const TOKEN_UNITS: u64 = 1_500_000;
const TOKEN_DECIMALS: u8 = 6;
const BASE_CHAIN_ID: u64 = 8453;
const GWEI: u128 = 1_000_000_000;
/// Transfers per HTTP row (one agent), and in all for the 32 agents.
const HTTP_N: usize = 1_000;
/// Requests in flight from the one-agent HTTP clients, and raw transactions in flight in the matching intake row.
const CONCURRENCY: usize = 8;
const AGENTS: usize = 32;

struct Run {
    elapsed: Duration,
    latencies: Vec<Duration>,
    errors: usize,
    first_error: Option<String>,
}

impl Run {
    fn rate(&self) -> f64 {
        self.latencies.len() as f64 / self.elapsed.as_secs_f64()
    }

    fn row(&self, name: &str, nonce: u64) -> Vec<String> {
        let s = Samples::from_durations(&self.latencies);
        vec![
            name.to_string(),
            f(self.rate(), 0),
            f(s.pct(50.0), 2),
            f(s.pct(99.0), 2),
            self.errors.to_string(),
            nonce.to_string(),
        ]
    }
}

/// `BENCH_BLOCK_TIME=<seconds>`: anvil seals a block every so many seconds, as a chain does, instead of one block
/// per transaction (automine, the default); every row waits for its transfers to be mined before it reads nonces.
fn mining() -> (&'static [&'static str], String) {
    match std::env::var("BENCH_BLOCK_TIME") {
        Ok(secs) if !secs.trim().is_empty() => {
            let secs: &'static str = Box::leak(secs.trim().to_string().into_boxed_str());
            let args: &'static [&'static str] = Box::leak(vec!["--block-time", secs].into_boxed_slice());
            (args, format!("anvil sealing a block every {secs} s"))
        }
        _ => (&[], "anvil automine (one block per transaction)".to_string()),
    }
}

pub async fn run() {
    let (mining_args, mining) = mining();
    let anvil = start_anvil(BASE_CHAIN_ID, mining_args).await;
    // The token exists before the app starts: `TOKENS_BASE` registers it (its decimals are checked on first use).
    let token = solidity::deploy_test_token(&anvil, "Bench Dollar", "TUSD", TOKEN_DECIMALS).await;
    let tokens_var = format!("TUSD:{token}:{TOKEN_DECIMALS}");
    let app = LocalApp::start(&[("RPC_URL_BASE", anvil.url()), ("TOKENS_BASE", &tokens_var)]).await;
    let created = app.create_agent(transacting_agent("bench sender")).await;
    let from = created.address("base");
    let token_created = app.create_agent(transacting_agent("bench token sender")).await;
    let token_from = token_created.address("base");
    for address in [from, token_from] {
        anvil
            .set_balance(address, U256::from(1_000u128) * U256::from(10u128.pow(18)))
            .await;
    }
    solidity::mint(&anvil, token, token_from, U256::from(TOKEN_UNITS) * U256::from(N)).await;
    let agent = app.agent(&created).await;
    let token_agent = app.agent(&token_created).await;
    let chain = registry::find("base").expect("base is in the registry");
    let asset = app
        .state
        .chains
        .tokens()
        .find(chain, "TUSD")
        .expect("TOKENS_BASE registers the test token");
    let to: Address = RECIPIENT.parse().expect("recipient address");

    let dev: Address = Anvil::DEV_ADDRESS.parse().expect("dev address");
    let dev_nonce = anvil.nonce(dev).await;
    let raw = raw_intake(&anvil, to, dev_nonce, N, 1).await;
    // Anvil answers a raw transaction before it has mined it: wait for the last block before reading nonces.
    let raw_nonce = mined_nonce(&anvil, dev, dev_nonce + N as u64).await - dev_nonce;

    let state = &app.state;
    let transfers = Transfers::new(
        state.store.clone(),
        state.chains.clone(),
        state.vault.clone(),
        state.keys.clone(),
        state.config.faults,
        state.config.x402.clone(),
    );
    let native = sends(&transfers, &agent, chain, to, None, AMOUNT).await;
    let agent_nonce = mined_nonce(&anvil, from, N as u64).await;
    let tokens = sends(&transfers, &token_agent, chain, to, Some(asset), TOKEN_AMOUNT).await;
    let token_nonce = mined_nonce(&anvil, token_from, N as u64).await;
    let received = received_tokens(&anvil, token, to, U256::from(TOKEN_UNITS) * U256::from(N)).await;
    let floor = rpc_floor(&app, from, to).await;

    println!(
        "N = {N} transfers each: {AMOUNT} ETH (native), {TOKEN_AMOUNT} TUSD (ERC-20, {TOKEN_DECIMALS} decimals, second agent); {mining}"
    );
    table(
        &["sender", "sends/s", "p50 ms", "p99 ms", "errors", "nonce +"],
        &[
            raw.row("eth_sendRawTransaction, pre-signed", raw_nonce),
            native.row("agentd native (send_native)", agent_nonce),
            tokens.row("agentd ERC-20 (send_token)", token_nonce),
        ],
    );
    for (name, run) in [("raw", &raw), ("native", &native), ("token", &tokens)] {
        if let Some(e) = &run.first_error {
            println!("  first {name} error: {e}");
        }
    }
    for (name, nonce, run) in [("native", agent_nonce, &native), ("token", token_nonce, &tokens)] {
        println!(
            "  {name} agent nonce on anvil = {nonce} (expected {N}: {}), errors = {}",
            if nonce == N as u64 { "ok" } else { "MISMATCH" },
            run.errors
        );
    }
    let expected = U256::from(TOKEN_UNITS) * U256::from(N);
    println!(
        "  recipient's TUSD balance = {received} base units (expected {expected}: {})",
        if received == expected { "ok" } else { "MISMATCH" }
    );
    println!(
        "  RPC calls send_native makes besides the broadcast, each alone (p50): estimateGas {} + fees (3 calls in parallel) {} + getBalance {} = {} ms",
        f(floor[0], 2),
        f(floor[1], 2),
        f(floor[2], 2),
        f(floor.iter().sum::<f64>(), 2)
    );
    let ratio = native.rate() / raw.rate();
    println!(
        "  send_native / raw intake = {:.0}% (target >= 50%: {})",
        ratio * 100.0,
        verdict(ratio >= 0.5)
    );
    println!(
        "  send_token / send_native = {:.0}%",
        tokens.rate() / native.rate() * 100.0
    );
    drop(app);
    http_targets(&anvil, &tokens_var).await;
}

/// Targets 2 and 3 of issue 13: the HTTP rows on SQLite, then on PostgreSQL.
async fn http_targets(anvil: &Anvil, tokens_var: &str) {
    let to: Address = RECIPIENT.parse().expect("recipient address");
    let dev: Address = Anvil::DEV_ADDRESS.parse().expect("dev address");
    let sqlite = LocalApp::start(&[("RPC_URL_BASE", anvil.url()), ("TOKENS_BASE", tokens_var)]).await;

    let quiet = HandOver::start().await;
    tokio::time::sleep(Duration::from_secs(1)).await;
    let quiet = quiet.stop().await;
    let dev_nonce = anvil.nonce(dev).await;
    let cpu = CpuTicks::now(anvil.pid());
    let raw = raw_intake(anvil, to, dev_nonce, HTTP_N, CONCURRENCY).await;
    let raw_cpu = CpuTicks::now(anvil.pid()).since(&cpu, HTTP_N, "raw transaction");
    let raw_nonce = mined_nonce(anvil, dev, dev_nonce + HTTP_N as u64).await - dev_nonce;
    let loaded = HandOver::start().await;
    let one = one_agent(&sqlite, anvil, Via::Transfers).await;
    let loaded = loaded.stop().await;
    let chat = one_agent(&sqlite, anvil, Via::Chat).await;
    let many = many_agents(&sqlite, anvil).await;
    let dev_nonce = anvil.nonce(dev).await;
    let raw_many = raw_intake(anvil, to, dev_nonce, HTTP_N, AGENTS).await;
    let raw_many_nonce = mined_nonce(anvil, dev, dev_nonce + HTTP_N as u64).await - dev_nonce;
    drop(sqlite);

    let postgres = match crate::common::fresh_postgres().await {
        Ok(url) => {
            let app = LocalApp::start(&[
                ("RPC_URL_BASE", anvil.url()),
                ("TOKENS_BASE", tokens_var),
                ("DATABASE_URL", &url),
            ])
            .await;
            let one = one_agent(&app, anvil, Via::Transfers).await;
            let many = many_agents(&app, anvil).await;
            Some((one, many))
        }
        Err(e) => {
            println!("  (PostgreSQL rows skipped: {e})");
            None
        }
    };

    println!(
        "\nover HTTP: {HTTP_N} transfers of {AMOUNT} ETH per row; one agent with {CONCURRENCY} requests in flight; \
         {AGENTS} agents with one request each in flight ({HTTP_N} in all); raw intake with as many in flight"
    );
    let mut rows = vec![
        raw.row(&format!("eth_sendRawTransaction, {CONCURRENCY} in flight"), raw_nonce),
        one.row(
            &format!("SQLite: POST transfers, 1 agent, {CONCURRENCY} in flight"),
            one.nonce(),
        ),
        chat.row(
            &format!("SQLite: POST chat, 1 agent, {CONCURRENCY} in flight"),
            chat.nonce(),
        ),
        many.row(&format!("SQLite: POST transfers, {AGENTS} agents"), many.nonce()),
        raw_many.row(&format!("eth_sendRawTransaction, {AGENTS} in flight"), raw_many_nonce),
    ];
    if let Some((one, many)) = &postgres {
        rows.push(one.row(
            &format!("PostgreSQL: POST transfers, 1 agent, {CONCURRENCY} in flight"),
            one.nonce(),
        ));
        rows.push(many.row(&format!("PostgreSQL: POST transfers, {AGENTS} agents"), many.nonce()));
    }
    table(&["sender", "sends/s", "p50 ms", "p99 ms", "errors", "nonce +"], &rows);
    let mut checked = vec![
        ("SQLite transfers", &one),
        ("SQLite chat", &chat),
        ("SQLite 32 agents", &many),
    ];
    if let Some((one, many)) = &postgres {
        checked.push(("PostgreSQL transfers", one));
        checked.push(("PostgreSQL 32 agents", many));
    }
    println!("  raw intake, {CONCURRENCY} in flight: {raw_cpu}");
    println!(
        "  one statement through sqlx's SQLite worker (SELECT 1 on a connection of its own, every 2 ms): quiet, {quiet}; \
         during the SQLite one-agent row, {loaded}"
    );
    for (name, sent) in checked {
        println!("{}", sent.rounds_line(name));
        if let Some(e) = &sent.run.first_error {
            println!("  first {name} error: {e}");
        }
        println!(
            "  {name}: nonces on anvil = {} (expected {HTTP_N}: {})",
            sent.nonce(),
            if sent.nonce() == HTTP_N as u64 && sent.run.errors == 0 {
                "ok"
            } else {
                "MISMATCH"
            }
        );
    }
    let ratio = one.run.rate() / raw.rate();
    println!(
        "  transfers API / raw intake ({CONCURRENCY} in flight) = {:.0}% (target >= 70%: {})",
        ratio * 100.0,
        verdict(ratio >= 0.7)
    );
    let ratio = chat.run.rate() / raw.rate();
    println!(
        "  chat / raw intake ({CONCURRENCY} in flight) = {:.0}% (target >= 50%: {})",
        ratio * 100.0,
        verdict(ratio >= 0.5)
    );
    let ratio = many.run.rate() / one.run.rate();
    println!(
        "  SQLite: {AGENTS} agents / one agent = {:.0}% (target >= 100%: {})",
        ratio * 100.0,
        verdict(ratio >= 1.0)
    );
    if let Some((pg_one, pg_many)) = &postgres {
        let ratio = pg_many.run.rate() / pg_one.run.rate();
        println!(
            "  PostgreSQL: {AGENTS} agents / one agent = {:.0}% (target >= 100%: {})",
            ratio * 100.0,
            verdict(ratio >= 1.0)
        );
        let ratio = pg_many.run.rate() / one.run.rate();
        println!(
            "  PostgreSQL {AGENTS} agents / SQLite one agent = {:.0}%",
            ratio * 100.0
        );
    }
}

/// How a benchmark agent asks for its transfers.
#[derive(Clone, Copy)]
enum Via {
    Transfers,
    Chat,
}

/// An HTTP run and the nonces it left on the node (summed over its agents).
struct Sent {
    run: Run,
    nonces: u64,
    /// Group commit's rounds during the run: (reservation rounds, sends reserved, audit rounds, entries written,
    /// microseconds in rounds).
    rounds: [u64; 5],
    /// Where the processor time went during the run, per transfer.
    cpu: String,
    /// agentd's JSON-RPC calls to the node during the run.
    rpcs: u64,
}

impl Sent {
    fn nonce(&self) -> u64 {
        self.nonces
    }

    fn row(&self, name: &str, nonce: u64) -> Vec<String> {
        self.run.row(name, nonce)
    }

    /// What a round took on average during the run.
    fn rounds_line(&self, name: &str) -> String {
        let [rounds, reserved, records, recorded, busy] = self.rounds;
        let per = |n: u64, of: u64| if of == 0 { 0.0 } else { n as f64 / of as f64 };
        format!(
            "  {name}: {rounds} reservation rounds took {reserved} sends ({:.1} a round); {records} audit rounds wrote {recorded} entries ({:.1} a round); rounds ran {:.0}% of the row, {:.2} ms each\n    {}; {:.2} RPCs to the node per send",
            per(reserved, rounds),
            per(recorded, records),
            busy as f64 / 10_000.0 / self.run.elapsed.as_secs_f64(),
            per(busy, rounds + records) / 1000.0,
            self.cpu,
            per(self.rpcs, HTTP_N as u64)
        )
    }
}

/// A funded agent that may send (fresh wallet: its nonce starts at 0).
async fn funded(app: &LocalApp, anvil: &Anvil, name: &str) -> CreatedAgent {
    let created = app.create_agent(transacting_agent(name)).await;
    anvil
        .set_balance(
            created.address("base"),
            U256::from(1_000u128) * U256::from(10u128.pow(18)),
        )
        .await;
    created
}

/// How long one statement takes through sqlx's SQLite worker thread: `SELECT 1` on a connection of its own, in
/// memory (no file, no lock, nothing shared with the app's store), one every 2 ms while it runs. It is the hand-over
/// every statement of a round pays (to the connection's thread and back), measured apart from the work of any
/// statement, on a quiet machine or beside a row.
struct HandOver {
    stop: Arc<AtomicBool>,
    task: tokio::task::JoinHandle<Vec<Duration>>,
    own: std::thread::JoinHandle<Vec<Duration>>,
}

impl HandOver {
    async fn start() -> HandOver {
        let stop = Arc::new(AtomicBool::new(false));
        let task = tokio::spawn(Self::probe(stop.clone()));
        let stopped = stop.clone();
        let own = std::thread::spawn(move || {
            tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .expect("a runtime")
                .block_on(Self::probe(stopped))
        });
        HandOver { stop, task, own }
    }

    async fn probe(stopped: Arc<AtomicBool>) -> Vec<Duration> {
        let pool = sqlx::sqlite::SqlitePoolOptions::new()
            .max_connections(1)
            .connect("sqlite::memory:")
            .await
            .expect("an in-memory SQLite");
        let mut conn = pool.acquire().await.expect("its connection");
        let mut took = Vec::new();
        while !stopped.load(Ordering::Relaxed) {
            let started = Instant::now();
            sqlx::query("SELECT 1").execute(&mut *conn).await.expect("SELECT 1");
            took.push(started.elapsed());
            tokio::time::sleep(Duration::from_millis(2)).await;
        }
        took
    }

    /// Stops it: how many statements it timed, their mean and quantiles in microseconds.
    async fn stop(self) -> String {
        self.stop.store(true, Ordering::Relaxed);
        let own = Self::figures(self.own.join().expect("the statement probe"));
        format!(
            "{}; on a thread of its own: {own}",
            Self::figures(self.task.await.expect("the statement probe"))
        )
    }

    fn figures(mut took: Vec<Duration>) -> String {
        took.sort();
        let micros = |d: &Duration| d.as_secs_f64() * 1e6;
        let at = |q: f64| micros(&took[((took.len() - 1) as f64 * q) as usize]);
        let mean = took.iter().map(micros).sum::<f64>() / took.len().max(1) as f64;
        format!(
            "{} statements: mean {mean:.0} µs, p50 {:.0}, p90 {:.0}, p99 {:.0}",
            took.len(),
            at(0.5),
            at(0.9),
            at(0.99)
        )
    }
}

/// `HTTP_N` transfers from one new agent, `CONCURRENCY` requests in flight.
/// Group commit's figures so far (`Transfers::round_figures`).
fn round_figures(app: &LocalApp) -> [u64; 5] {
    let f = app.state.transfers.round_figures();
    [
        f.reservation_rounds,
        f.reserved,
        f.record_rounds,
        f.recorded,
        f.busy_micros,
    ]
}

fn since(before: [u64; 5], after: [u64; 5]) -> [u64; 5] {
    std::array::from_fn(|i| after[i] - before[i])
}

/// What a row is judged by besides its rate, read before it runs.
struct Meter {
    rounds: [u64; 5],
    cpu: CpuTicks,
    rpcs: u64,
    first_block: u64,
}

/// A row's meter once its requests are answered: the processor time and the requests to the node they took.
struct Ran {
    meter: Meter,
    cpu: String,
    rpcs: u64,
}

impl Meter {
    async fn start(app: &LocalApp, anvil: &Anvil) -> Meter {
        Meter {
            rounds: round_figures(app),
            cpu: CpuTicks::now(anvil.pid()),
            rpcs: rpc_calls(app),
            first_block: block(anvil).await,
        }
    }

    fn ran(self, app: &LocalApp, anvil: &Anvil) -> Ran {
        Ran {
            cpu: CpuTicks::now(anvil.pid()).since(&self.cpu, HTTP_N, "send"),
            rpcs: rpc_calls(app) - self.rpcs,
            meter: self,
        }
    }
}

impl Ran {
    /// The row, once its `nonces` (over its agents) were read from the node: the rounds it took and the blocks anvil
    /// sealed for it.
    async fn sent(self, app: &LocalApp, anvil: &Anvil, run: Run, nonces: u64) -> Sent {
        let blocks = block(anvil).await - self.meter.first_block;
        Sent {
            run,
            nonces,
            rounds: since(self.meter.rounds, round_figures(app)),
            cpu: format!(
                "{}; anvil sealed {blocks} blocks ({:.1} transfers a block)",
                self.cpu,
                nonces as f64 / blocks.max(1) as f64
            ),
            rpcs: self.rpcs,
        }
    }
}

/// The node's latest block number.
async fn block(anvil: &Anvil) -> u64 {
    anvil.provider().get_block_number().await.expect("block number")
}

/// agentd's JSON-RPC calls to every configured node so far.
fn rpc_calls(app: &LocalApp) -> u64 {
    app.state.chains.iter().map(|c| c.rpc_counts().0).sum()
}

async fn one_agent(app: &LocalApp, anvil: &Anvil, via: Via) -> Sent {
    let agent = Arc::new(funded(app, anvil, "bench http sender").await);
    let agent_for_report = agent.clone();
    let meter = Meter::start(app, anvil).await;
    let (client, base) = (app.client.clone(), app.address.clone());
    let from = agent.address("base");
    let run = drive(HTTP_N, CONCURRENCY, move |_| {
        request(client.clone(), base.clone(), agent.clone(), via)
    })
    .await;
    let ran = meter.ran(app, anvil);
    let nonces = mined_nonce(anvil, from, HTTP_N as u64).await;
    if nonces < HTTP_N as u64 {
        // A gap at the check: say whether the watcher closes it (a stored `signed` transfer whose broadcast was
        // not confirmed is sent again once `SENDER_GRACE`, 5 s, has passed), and when.
        let started = Instant::now();
        let healed = mined_nonce_within(anvil, from, HTTP_N as u64, Duration::from_secs(20)).await;
        println!(
            "  (a gap at the check: {nonces} of {HTTP_N} mined; {healed} after {:.1} s more, the watcher's resends)",
            started.elapsed().as_secs_f64()
        );
        gap_report(app, anvil, &agent_for_report, healed).await;
    }
    ran.sent(app, anvil, run, nonces).await
}

/// What the node's pool holds of `address`: the nonces ready to mine and those queued behind a gap.
async fn pool_report(anvil: &Anvil, address: Address) -> String {
    let pool: Value = anvil
        .provider()
        .raw_request("txpool_inspect".into(), ())
        .await
        .unwrap_or_default();
    let nonces = |part: &str| -> Vec<u64> {
        let mut nonces: Vec<u64> = pool[part]
            .as_object()
            .and_then(|senders| {
                senders
                    .iter()
                    .find(|(k, _)| k.eq_ignore_ascii_case(&address.to_string()))
            })
            .and_then(|(_, v)| v.as_object())
            .map(|by_nonce| by_nonce.keys().filter_map(|n| n.parse().ok()).collect())
            .unwrap_or_default();
        nonces.sort_unstable();
        nonces
    };
    let line = |nonces: Vec<u64>| match (nonces.first(), nonces.last()) {
        (Some(first), Some(last)) => format!("{} (nonces {first}..={last})", nonces.len()),
        _ => "none".to_string(),
    };
    format!(
        "pool pending: {}; queued: {}",
        line(nonces("pending")),
        line(nonces("queued"))
    )
}

/// What the service stored at a nonce the node has not mined, and what the node knows of it.
async fn gap_report(app: &LocalApp, anvil: &Anvil, agent: &CreatedAgent, gap: u64) {
    let mut found = Vec::new();
    let mut before: Option<String> = None;
    loop {
        let cursor = before.as_ref().map(|b| format!("&before={b}")).unwrap_or_default();
        let page: Value = app
            .client
            .get(format!(
                "{}/api/agents/{}/transactions?limit=500{cursor}",
                app.address, agent.id
            ))
            .header(TOKEN_HEADER, &agent.token)
            .send()
            .await
            .expect("transactions page")
            .json()
            .await
            .expect("transactions JSON");
        let Some(rows) = page.as_array().filter(|r| !r.is_empty()) else {
            break;
        };
        for row in rows {
            if row["nonce"].as_u64().is_some_and(|n| n + 1 >= gap && n <= gap + 1) {
                found.push(row.clone());
            }
        }
        before = rows.last().and_then(|r| r["id"].as_str()).map(str::to_string);
    }
    for row in found {
        let hash = row["tx_hash"].as_str().unwrap_or_default().to_string();
        let known: Value = anvil
            .provider()
            .raw_request("eth_getTransactionByHash".into(), (hash.clone(),))
            .await
            .unwrap_or_default();
        println!(
            "    stored nonce {} status {} hash {hash} replaced {}: the node {}",
            row["nonce"],
            row["status"],
            row["replaced_hashes"],
            if known.is_null() {
                "does not know it".to_string()
            } else {
                format!("knows it (block {})", known["blockNumber"])
            }
        );
    }
    println!("    {}", pool_report(anvil, agent.address("base")).await);
}

/// `HTTP_N` transfers in all from `AGENTS` new agents at once, each one request at a time.
async fn many_agents(app: &LocalApp, anvil: &Anvil) -> Sent {
    let mut agents = Vec::with_capacity(AGENTS);
    for i in 0..AGENTS {
        agents.push(Arc::new(funded(app, anvil, &format!("bench sender {i}")).await));
    }
    let addresses: Vec<Address> = agents.iter().map(|a| a.address("base")).collect();
    let agents = Arc::new(agents);
    let meter = Meter::start(app, anvil).await;
    let (client, base) = (app.client.clone(), app.address.clone());
    // Worker `w` of `AGENTS` takes jobs w, w + AGENTS, …: job `i` is agent `i % AGENTS`'s, one at a time per agent.
    let run = drive_by_worker(HTTP_N, AGENTS, move |i| {
        request(client.clone(), base.clone(), agents[i % AGENTS].clone(), Via::Transfers)
    })
    .await;
    let ran = meter.ran(app, anvil);
    let mut nonces = 0;
    for (i, address) in addresses.iter().enumerate() {
        let expected = (HTTP_N / AGENTS + usize::from(i < HTTP_N % AGENTS)) as u64;
        let nonce = mined_nonce(anvil, *address, expected).await;
        if nonce < expected {
            // What the node holds beyond the mined nonce says whether a gap keeps the rest waiting in its pool.
            let pending = anvil
                .provider()
                .get_transaction_count(*address)
                .pending()
                .await
                .unwrap_or_default();
            println!("  agent {i} {address}: mined nonce {nonce}, pending {pending}, expected {expected}");
            println!("    {}", pool_report(anvil, *address).await);
        }
        nonces += nonce;
    }
    ran.sent(app, anvil, run, nonces).await
}

/// One transfer request; what went wrong, if anything.
async fn request(client: reqwest::Client, base: String, agent: Arc<CreatedAgent>, via: Via) -> Option<String> {
    let (url, body) = match via {
        Via::Transfers => (
            format!("{base}/api/agents/{}/transfers", agent.id),
            json!({"chain": "base", "to": RECIPIENT, "amount": AMOUNT}),
        ),
        Via::Chat => (
            format!("{base}/api/chat"),
            json!({"agent_id": agent.id, "message": format!("send {AMOUNT} ETH to {RECIPIENT} on base")}),
        ),
    };
    let response = client
        .post(url)
        .header(TOKEN_HEADER, &agent.token)
        .json(&body)
        .send()
        .await;
    let response = match response {
        Ok(r) => r,
        Err(e) => return Some(e.to_string()),
    };
    let status = response.status().as_u16();
    let body: Value = response.json().await.unwrap_or(Value::Null);
    let sent = match via {
        Via::Transfers => status == 201 && body["status"] == "pending",
        Via::Chat => {
            status == 200
                && body["chain_calls"].as_array().is_some_and(|calls| {
                    calls.len() == 1 && calls[0]["tool"] == "send_native" && calls[0]["error"].is_null()
                })
        }
    };
    (!sent).then(|| format!("{status} {body}"))
}

/// Runs jobs `0..n` with `concurrency` workers taking the next job as they finish one.
async fn drive<F, Fut>(n: usize, concurrency: usize, job: F) -> Run
where
    F: Fn(usize) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = Option<String>> + Send + 'static,
{
    let next = Arc::new(AtomicUsize::new(0));
    workers(concurrency, job, move |_| {
        let i = next.fetch_add(1, Ordering::Relaxed);
        (i < n).then_some(i)
    })
    .await
}

/// Runs jobs `0..n` with `concurrency` workers, worker `w` doing jobs `w, w + concurrency, …` in turn.
async fn drive_by_worker<F, Fut>(n: usize, concurrency: usize, job: F) -> Run
where
    F: Fn(usize) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = Option<String>> + Send + 'static,
{
    let taken: Arc<Vec<AtomicUsize>> = Arc::new((0..concurrency).map(|_| AtomicUsize::new(0)).collect());
    workers(concurrency, job, move |w| {
        let round = taken[w].fetch_add(1, Ordering::Relaxed);
        let i = w + round * concurrency;
        (i < n).then_some(i)
    })
    .await
}

async fn workers<F, Fut, P>(concurrency: usize, job: F, pick: P) -> Run
where
    F: Fn(usize) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = Option<String>> + Send + 'static,
    P: Fn(usize) -> Option<usize> + Send + Sync + 'static,
{
    let (job, pick) = (Arc::new(job), Arc::new(pick));
    let started = Instant::now();
    let mut set = tokio::task::JoinSet::new();
    for w in 0..concurrency {
        let (job, pick) = (job.clone(), pick.clone());
        set.spawn(async move {
            let mut done = Vec::new();
            while let Some(i) = pick(w) {
                let sent = Instant::now();
                let problem = job(i).await;
                done.push((sent.elapsed(), problem));
            }
            done
        });
    }
    let mut run = Run {
        elapsed: Duration::ZERO,
        latencies: Vec::new(),
        errors: 0,
        first_error: None,
    };
    while let Some(done) = set.join_next().await {
        for (latency, problem) in done.expect("a benchmark worker") {
            run.latencies.push(latency);
            if let Some(problem) = problem {
                run.errors += 1;
                run.first_error.get_or_insert(problem);
            }
        }
    }
    run.elapsed = started.elapsed();
    run
}

/// `N` transfers of `amount` (of `token`, or the native coin) from `agent`, one after the other.
async fn sends(
    transfers: &Transfers,
    agent: &agentd::domain::agent::Agent,
    chain: &'static ChainInfo,
    to: Address,
    token: Option<Asset>,
    amount: &str,
) -> Run {
    let mut run = Run {
        elapsed: Duration::ZERO,
        latencies: Vec::with_capacity(N),
        errors: 0,
        first_error: None,
    };
    let started = Instant::now();
    for _ in 0..N {
        let sent = Instant::now();
        let order = TransferOrder {
            by: agentd::transfers::Transacting::check(
                agent,
                // The reservation still reads the agent's standing (one statement) whatever the credential.
                &agentd::store::Mandate::NONE,
                agentd::auth::Actor::Agent,
                "sending",
            )
            .expect("an agent that transacts"),
            chain,
            to,
            token: token.clone(),
            amount: Amount::parse(amount, token.as_ref().map_or(chain.decimals, |t| t.decimals)).expect("an amount"),
            conversation_id: None,
            delegation: None,
            gas: None,
        };
        let outcome = transfers.send(order).await;
        run.latencies.push(sent.elapsed());
        let problem = match outcome {
            Ok(TransferOutcome::Sent {
                status: BroadcastStatus::Pending,
                ..
            }) => None,
            Ok(TransferOutcome::Sent { status, .. }) => Some(format!("status {}", status.as_str())),
            Ok(TransferOutcome::AwaitingApproval { .. }) => Some("awaiting approval".into()),
            Err(e) => Some(format!("{}: {e}", e.code())),
        };
        if let Some(problem) = problem {
            run.errors += 1;
            run.first_error.get_or_insert(problem);
        }
    }
    run.elapsed = started.elapsed();
    run
}

/// The recipient's token balance once it reached `expected`, or what it is after a few seconds.
async fn received_tokens(anvil: &Anvil, token: Address, owner: Address, expected: U256) -> U256 {
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        let balance = solidity::token_balance(anvil, token, owner).await;
        if balance >= expected || Instant::now() > deadline {
            return balance;
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}

/// The nonce of `address` once it reached `expected`, or what it is after a few seconds.
async fn mined_nonce(anvil: &Anvil, address: Address, expected: u64) -> u64 {
    mined_nonce_within(anvil, address, expected, Duration::from_secs(5)).await
}

/// `mined_nonce` waiting up to `wait`.
async fn mined_nonce_within(anvil: &Anvil, address: Address, expected: u64, wait: Duration) -> u64 {
    let deadline = Instant::now() + wait;
    loop {
        let nonce = anvil.nonce(address).await;
        if nonce >= expected {
            return nonce;
        }
        if Instant::now() > deadline {
            // Under many concurrent senders anvil's automine can leave executable transactions in its pool until
            // the next one arrives (seen: nonces 28-31 pending, none queued): one more block takes them.
            anvil.mine(1).await;
            return anvil.nonce(address).await;
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}

/// p50 ms of the chain calls a transfer makes before broadcasting, each measured on its own through agentd's client.
async fn rpc_floor(app: &LocalApp, from: Address, to: Address) -> [f64; 3] {
    let client = app.state.chains.get("base").expect("base is configured");
    let value = U256::from(10u128.pow(15));
    let mut times: [Vec<Duration>; 3] = Default::default();
    for _ in 0..N {
        let t = Instant::now();
        client
            .estimate_transfer_gas(from, to, value)
            .await
            .expect("estimateGas");
        times[0].push(t.elapsed());
        let t = Instant::now();
        client.fees().await.expect("fees");
        times[1].push(t.elapsed());
        let t = Instant::now();
        client.balance(from).await.expect("balance");
        times[2].push(t.elapsed());
    }
    times.map(|t| Samples::from_durations(&t).pct(50.0))
}

/// Signs `n` transfers from anvil's first development key, then sends them, `concurrency` in flight.
async fn raw_intake(anvil: &Anvil, to: Address, first_nonce: u64, n: usize, concurrency: usize) -> Run {
    let signer: PrivateKeySigner = Anvil::DEV_PRIVATE_KEY
        .trim_start_matches("0x")
        .parse()
        .expect("dev key");
    let bodies: Vec<String> = (0..n as u64)
        .map(|i| {
            let mut tx = TxEip1559 {
                chain_id: BASE_CHAIN_ID,
                nonce: first_nonce + i,
                gas_limit: 21_000,
                max_fee_per_gas: 20 * GWEI,
                max_priority_fee_per_gas: GWEI,
                to: TxKind::Call(to),
                value: U256::from(10u128.pow(15)),
                ..Default::default()
            };
            let signature = signer.sign_transaction_sync(&mut tx).expect("sign");
            let raw = TxEnvelope::from(tx.into_signed(signature)).encoded_2718();
            json!({
                "jsonrpc": "2.0",
                "id": i,
                "method": "eth_sendRawTransaction",
                "params": [alloy::hex::encode_prefixed(raw)],
            })
            .to_string()
        })
        .collect();
    let bodies = Arc::new(bodies);
    let client = common::client(concurrency);
    let url = anvil.url().to_string();
    drive(n, concurrency, move |i| {
        let (client, url, bodies) = (client.clone(), url.clone(), bodies.clone());
        async move {
            let response = client
                .post(&url)
                .header("content-type", "application/json")
                .body(bodies[i].clone())
                .send()
                .await;
            let answer: Option<Value> = match response {
                Ok(r) => r.json().await.ok(),
                Err(_) => None,
            };
            answer
                .as_ref()
                .is_none_or(|a| a.get("result").is_none())
                .then(|| format!("{answer:?}"))
        }
    })
    .await
}
