//! `sends`: native transfers per second of one agent through `transfers::send_native` against anvil (automine),
//! next to anvil's own intake of pre-signed raw EIP-1559 transactions sent one after the other, same node.

use std::time::{Duration, Instant};

use agentd::domain::chain as registry;
use agentd::transfers::{BroadcastStatus, TransferOrder, TransferOutcome, Transfers};
use alloy::consensus::{SignableTransaction, TxEip1559, TxEnvelope};
use alloy::eips::eip2718::Encodable2718;
use alloy::network::TxSignerSync;
use alloy::primitives::{Address, TxKind, U256};
use alloy::signers::local::PrivateKeySigner;
use serde_json::{Value, json};

use crate::anvil::Anvil;
use crate::common::{self, LocalApp, RECIPIENT, Samples, f, start_anvil, table, transacting_agent, verdict};

const N: usize = 200;
const AMOUNT: &str = "0.001";
const BASE_CHAIN_ID: u64 = 8453;
const GWEI: u128 = 1_000_000_000;

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

pub async fn run() {
    let anvil = start_anvil(BASE_CHAIN_ID, &[]).await;
    let app = LocalApp::start(&[("RPC_URL_BASE", anvil.url())]).await;
    let created = app.create_agent(transacting_agent("bench sender")).await;
    let from = created.address("base");
    anvil
        .set_balance(from, U256::from(1_000u128) * U256::from(10u128.pow(18)))
        .await;
    let agent = app.agent(&created).await;
    let chain = registry::find("base").expect("base is in the registry");
    let to: Address = RECIPIENT.parse().expect("recipient address");

    let dev: Address = Anvil::DEV_ADDRESS.parse().expect("dev address");
    let dev_nonce = anvil.nonce(dev).await;
    let raw = raw_intake(&anvil, to, dev_nonce).await;
    // Anvil answers a raw transaction before it has mined it: wait for the last block before reading nonces.
    let raw_nonce = mined_nonce(&anvil, dev, dev_nonce + N as u64).await - dev_nonce;

    let mut agentd = Run {
        elapsed: Duration::ZERO,
        latencies: Vec::with_capacity(N),
        errors: 0,
        first_error: None,
    };
    let state = &app.state;
    let transfers = Transfers::new(
        state.store.clone(),
        state.chains.clone(),
        state.vault.clone(),
        state.config.faults,
        state.config.x402.clone(),
    );
    let started = Instant::now();
    for _ in 0..N {
        let sent = Instant::now();
        let order = TransferOrder {
            agent: &agent,
            chain,
            to,
            token: None,
            amount: AMOUNT,
            conversation_id: None,
            actor: agentd::auth::Actor::Agent,
        };
        let outcome = transfers.send(order).await;
        agentd.latencies.push(sent.elapsed());
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
            agentd.errors += 1;
            agentd.first_error.get_or_insert(problem);
        }
    }
    agentd.elapsed = started.elapsed();
    let agent_nonce = mined_nonce(&anvil, from, N as u64).await;
    let floor = rpc_floor(&app, from, to).await;

    println!("N = {N} transfers of {AMOUNT} ETH each, anvil automine (one block per transaction)");
    table(
        &["sender", "sends/s", "p50 ms", "p99 ms", "errors", "nonce +"],
        &[
            raw.row("eth_sendRawTransaction, pre-signed", raw_nonce),
            agentd.row("agentd send_native", agent_nonce),
        ],
    );
    for (name, run) in [("raw", &raw), ("send_native", &agentd)] {
        if let Some(e) = &run.first_error {
            println!("  first {name} error: {e}");
        }
    }
    println!(
        "  agent nonce on anvil = {agent_nonce} (expected {N}: {}), errors = {}",
        if agent_nonce == N as u64 { "ok" } else { "MISMATCH" },
        agentd.errors
    );
    println!(
        "  RPC calls send_native makes besides the broadcast, each alone (p50): estimateGas {} + fees (3 calls in parallel) {} + getBalance {} = {} ms",
        f(floor[0], 2),
        f(floor[1], 2),
        f(floor[2], 2),
        f(floor.iter().sum::<f64>(), 2)
    );
    let ratio = agentd.rate() / raw.rate();
    println!(
        "  send_native / raw intake = {:.0}% (target >= 50%: {})",
        ratio * 100.0,
        verdict(ratio >= 0.5)
    );
}

/// The nonce of `address` once it reached `expected`, or what it is after a few seconds.
async fn mined_nonce(anvil: &Anvil, address: Address, expected: u64) -> u64 {
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        let nonce = anvil.nonce(address).await;
        if nonce >= expected || Instant::now() > deadline {
            return nonce;
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

/// Signs `N` transfers from anvil's first development key, then sends them one after the other.
async fn raw_intake(anvil: &Anvil, to: Address, first_nonce: u64) -> Run {
    let signer: PrivateKeySigner = Anvil::DEV_PRIVATE_KEY
        .trim_start_matches("0x")
        .parse()
        .expect("dev key");
    let bodies: Vec<String> = (0..N as u64)
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
    let client = common::client(1);
    let mut run = Run {
        elapsed: Duration::ZERO,
        latencies: Vec::with_capacity(N),
        errors: 0,
        first_error: None,
    };
    let started = Instant::now();
    for body in bodies {
        let sent = Instant::now();
        let response = client
            .post(anvil.url())
            .header("content-type", "application/json")
            .body(body)
            .send()
            .await;
        let answer: Option<Value> = match response {
            Ok(r) => r.json().await.ok(),
            Err(_) => None,
        };
        run.latencies.push(sent.elapsed());
        if answer.as_ref().is_none_or(|a| a.get("result").is_none()) {
            run.errors += 1;
            run.first_error.get_or_insert_with(|| format!("{answer:?}"));
        }
    }
    run.elapsed = started.elapsed();
    run
}
