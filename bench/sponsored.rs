//! `sponsored`: gas the operator pays (§22) against gas the agent's wallet pays, on anvil with the real, unmodified
//! parts (EntryPoint v0.7 and `EIP7702StatelessDeleGator` from npm `@metamask/delegation-abis`, Pimlico's
//! `SingletonPaymaster` v0.7 from npm `@pimlico/mock-paymaster`, deployed as the test suite does) and the in-process
//! app (SQLite). Every agent sends 0.01 USDC transfers through `POST …/transfers`; sponsored agents hold no ETH.
//!
//! 1. `load`: 32 agents sending wallet-paid transfers, then 32 others sending sponsored ones, each agent one request
//!    at a time: answers a second and transfers landed a second (until the recipient's balance holds them all),
//!    and, read from the chain, the operations per bundle (`UserOperationEvent` logs per transaction) and the
//!    sponsor's transactions.
//! 2. `gas`: one operation alone in a bundle and 16 in one bundle (the bundler is held off while they are signed),
//!    against a plain ERC-20 `transfer` from an EOA; where an operation's gas goes, from the bundle's call trace.
//! 3. `latency`: one sponsored and one wallet-paid transfer alternating, one request at a time: answer p50 / p99.
//!
//! They run in the order 3, 1, 2: the one-at-a-time row first, on a chain that has seen nothing else.
//!
//! `BENCH_SPONSORED_PER_AGENT` (default 20) sets the transfers per agent of the load rows, `BENCH_SPONSORED_N`
//! (default 200) the transfers each way of the latency row; `BENCH_SPONSORED_RPC=1` counts the app's node calls by
//! method through a proxy (`rpc`), for a run of its own; `BENCH_SPONSORED_DB=postgres` runs the app on a fresh
//! PostgreSQL database (`BENCH_POSTGRES_URL`, default the local server) instead of SQLite.

mod gas;
mod load;
mod rpc;

use std::sync::Arc;
use std::time::{Duration, Instant};

use alloy::primitives::{Address, U256};
use serde_json::{Value, json};

use crate::anvil::Anvil;
use crate::common::{CreatedAgent, LocalApp, Samples, TOKEN_HEADER, f, start_anvil, table, transacting_agent};
use crate::delegation_framework::Framework;
use crate::paymaster::Paymaster;
use crate::solidity;

const BASE_CHAIN_ID: u64 = 8453;
const ETHER: u128 = 1_000_000_000_000_000_000;
/// Every transfer: 0.01 USDC (6 decimals).
const AMOUNT: &str = "0.01";
const AMOUNT_UNITS: u64 = 10_000;
/// What each agent holds to send: 1,000 USDC.
const HOLDING: u64 = 1_000_000_000;

/// The node, the parts, and the app configured with them; the sponsor trusted, allowlisted and funded.
pub struct World {
    pub anvil: Anvil,
    pub app: LocalApp,
    pub usdc: Address,
    pub entry_point: Address,
    pub paymaster: Address,
    /// The sponsor key's address (`GET /api/chains` `sponsorship.sponsor`): the bundles' sender.
    pub sponsor: Address,
    /// The counting proxy in front of anvil, when asked for.
    pub rpc: Option<Arc<rpc::Counter>>,
}

/// Who pays an agent's gas.
#[derive(Clone, Copy, PartialEq, Eq)]
pub enum Gas {
    Wallet,
    Sponsored,
}

impl Gas {
    fn name(self) -> &'static str {
        match self {
            Gas::Wallet => "wallet",
            Gas::Sponsored => "sponsored",
        }
    }
}

pub async fn run() {
    let world = World::start().await;
    println!(
        "anvil automine; in-process app (SQLite){}; EntryPoint {}, paymaster {}, sponsor {}",
        match world.rpc {
            Some(_) => " behind a counting proxy",
            None => "",
        },
        world.entry_point,
        world.paymaster,
        world.sponsor
    );
    latency(&world).await;
    load::run(&world).await;
    gas::run(&world).await;
}

impl World {
    async fn start() -> World {
        let anvil = start_anvil(BASE_CHAIN_ID, &[]).await;
        let framework = Framework::deploy(&anvil, BASE_CHAIN_ID).await;
        let paymaster = Paymaster::deploy(&anvil, framework.entry_point).await;
        let usdc = solidity::usdc_on_base(&anvil).await;
        let mut vars = framework.vars();
        vars.push(("ENTRY_POINT_BASE".into(), framework.entry_point.to_string()));
        vars.push(("ACCOUNT_IMPLEMENTATION_BASE".into(), framework.delegator.to_string()));
        vars.push(("PAYMASTER_BASE".into(), paymaster.address.to_string()));
        let proxy = rpc::Counter::start(anvil.url()).await;
        let node = proxy.as_ref().map_or(anvil.url().to_string(), |(url, _)| url.clone());
        vars.push(("RPC_URL_BASE".into(), node));
        // `BENCH_SPONSORED_DB=postgres`: the app on a fresh database of `BENCH_POSTGRES_URL`'s server, not SQLite.
        if std::env::var("BENCH_SPONSORED_DB").as_deref() == Ok("postgres") {
            let url = crate::common::fresh_postgres()
                .await
                .unwrap_or_else(|e| panic!("BENCH_SPONSORED_DB=postgres: no database: {e}"));
            vars.push(("DATABASE_URL".into(), url));
        }
        let extra: Vec<(&str, &str)> = vars.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
        let app = LocalApp::start(&extra).await;
        let chains: Value = app
            .client
            .get(format!("{}/api/chains", app.address))
            .send()
            .await
            .expect("GET /api/chains")
            .json()
            .await
            .expect("a JSON answer");
        let base = chains
            .as_array()
            .and_then(|all| all.iter().find(|c| c["name"] == "base"))
            .expect("base is configured");
        let sponsor: Address = base["sponsorship"]["sponsor"]
            .as_str()
            .unwrap_or_else(|| panic!("base is not sponsorable: {base}"))
            .parse()
            .expect("an address");
        paymaster.sponsor(&anvil, sponsor, U256::from(100 * ETHER)).await;
        anvil.set_balance(sponsor, U256::from(1_000 * ETHER)).await;
        World {
            anvil,
            app,
            usdc,
            entry_point: framework.entry_point,
            paymaster: paymaster.address,
            sponsor,
            rpc: proxy.map(|(_, counter)| counter),
        }
    }

    /// `n` agents holding USDC: a sponsored one with no ETH and a daily sponsorship no run reaches, a wallet-paid
    /// one with 10 ETH. Each sends one transfer first (a sponsored account designates the implementation in it),
    /// and is returned once that transfer landed.
    pub async fn agents(&self, gas: Gas, n: usize, label: &str) -> Vec<CreatedAgent> {
        let mut agents = Vec::with_capacity(n);
        for i in 0..n {
            let agent = self.app.create_agent(transacting_agent(&format!("{label} {i}"))).await;
            let address = agent.address("base");
            solidity::mint(&self.anvil, self.usdc, address, U256::from(HOLDING)).await;
            match gas {
                Gas::Wallet => self.anvil.set_balance(address, U256::from(10 * ETHER)).await,
                Gas::Sponsored => self.sponsor_agent(&agent).await,
            }
            agents.push(agent);
        }
        let warm_up = Address::repeat_byte(0xaa);
        let before = solidity::token_balance(&self.anvil, self.usdc, warm_up).await;
        let sends = agents.iter().map(|a| self.transfer(a, gas, warm_up));
        for (status, body, _) in futures::future::join_all(sends).await {
            assert_eq!(status, 201, "a warm-up transfer was refused: {body}");
        }
        let expected = before + U256::from(AMOUNT_UNITS) * U256::from(n);
        assert!(
            self.landed(warm_up, expected, Duration::from_secs(60)).await,
            "the warm-up transfers did not land"
        );
        agents
    }

    /// `PUT …/sponsorship` (open: the benchmark app has no `ADMIN_TOKEN`) with a budget no run reaches.
    async fn sponsor_agent(&self, agent: &CreatedAgent) {
        let response = self
            .app
            .client
            .put(format!("{}/api/agents/{}/sponsorship", self.app.address, agent.id))
            .json(&json!({"chain": "base", "per_day": "100"}))
            .send()
            .await
            .expect("PUT …/sponsorship");
        let status = response.status().as_u16();
        assert_eq!(status, 200, "{}", response.text().await.unwrap_or_default());
    }

    /// One 0.01 USDC `POST …/transfers` to `to`: the answer's status, its body and how long it took.
    pub async fn transfer(&self, agent: &CreatedAgent, gas: Gas, to: Address) -> (u16, Value, Duration) {
        let body = json!({"chain": "base", "to": to.to_string(), "amount": AMOUNT, "asset": "USDC",
            "gas": gas.name()});
        let started = Instant::now();
        let response = self
            .app
            .client
            .post(format!("{}/api/agents/{}/transfers", self.app.address, agent.id))
            .header(TOKEN_HEADER, &agent.token)
            .json(&body)
            .send()
            .await;
        match response {
            Ok(response) => {
                let status = response.status().as_u16();
                let answer = response.json().await.unwrap_or(Value::Null);
                (status, answer, started.elapsed())
            }
            Err(e) => (0, json!(e.to_string()), started.elapsed()),
        }
    }

    /// Waits until `owner` holds at least `expected` USDC base units on the chain; whether it did within `wait`.
    pub async fn landed(&self, owner: Address, expected: U256, wait: Duration) -> bool {
        let deadline = Instant::now() + wait;
        while Instant::now() < deadline {
            if solidity::token_balance(&self.anvil, self.usdc, owner).await >= expected {
                return true;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        false
    }
}

/// How many of something: `var`'s value, else `default`.
fn count(var: &str, default: usize) -> usize {
    std::env::var(var)
        .ok()
        .and_then(|v| v.trim().parse().ok())
        .filter(|n| *n > 0)
        .unwrap_or(default)
}

/// Part 3: one sponsored and one wallet-paid transfer alternating, one request at a time.
async fn latency(world: &World) {
    let n = count("BENCH_SPONSORED_N", 200);
    let sponsored = world.agents(Gas::Sponsored, 1, "bench latency sponsored").await;
    let wallet = world.agents(Gas::Wallet, 1, "bench latency wallet").await;
    let to = Address::repeat_byte(0xbb);
    let (mut by_sponsor, mut by_wallet, mut errors) = (Vec::with_capacity(n), Vec::with_capacity(n), 0);
    for _ in 0..n {
        for (agent, gas, into) in [
            (&sponsored[0], Gas::Sponsored, &mut by_sponsor),
            (&wallet[0], Gas::Wallet, &mut by_wallet),
        ] {
            match world.transfer(agent, gas, to).await {
                (201, _, took) => into.push(took),
                (status, body, _) => {
                    errors += 1;
                    println!("  refused ({status}): {body}");
                }
            }
        }
    }
    let (s, w) = (
        Samples::from_durations(&by_sponsor),
        Samples::from_durations(&by_wallet),
    );
    println!("\nlatency: N = {n} transfers of {AMOUNT} USDC each way, alternating, one request at a time");
    let row = |name: &str, s: &Samples| {
        vec![
            name.to_string(),
            s.len().to_string(),
            f(s.pct(50.0), 2),
            f(s.pct(99.0), 2),
        ]
    };
    table(
        &["answer of POST …/transfers", "n", "p50 ms", "p99 ms"],
        &[row("wallet-paid", &w), row("sponsored", &s)],
    );
    let added = s.pct(50.0) - w.pct(50.0);
    println!(
        "  sponsored - wallet-paid: {} ms at p50 ({} ms at p99); errors = {errors}; target p50 within 5 ms: {}",
        f(added, 2),
        f(s.pct(99.0) - w.pct(99.0), 2),
        crate::common::verdict(added.abs() <= 5.0)
    );
    let expected = U256::from(AMOUNT_UNITS) * U256::from(by_sponsor.len() + by_wallet.len());
    if !world.landed(to, expected, Duration::from_secs(60)).await {
        println!("  NOT every transfer of the latency row landed within 60 s");
    }
}
