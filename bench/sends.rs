//! `sends`: transfers per second of one agent through the transfer service against anvil (automine): native ones,
//! and ERC-20 ones of a test token (`tests/contracts/TestToken.sol`, compiled with npm solc, registered with
//! `TOKENS_BASE`) from a second agent, next to anvil's own intake of pre-signed raw EIP-1559 transactions sent one
//! after the other, same node and same run. Each agent's final nonce on the node is checked, and the recipient's
//! token balance.

use std::time::{Duration, Instant};

use agentd::domain::asset::Asset;
use agentd::domain::chain as registry;
use agentd::domain::chain::ChainInfo;
use agentd::transfers::{BroadcastStatus, TransferOrder, TransferOutcome, Transfers};
use alloy::consensus::{SignableTransaction, TxEip1559, TxEnvelope};
use alloy::eips::eip2718::Encodable2718;
use alloy::network::TxSignerSync;
use alloy::primitives::{Address, TxKind, U256};
use alloy::signers::local::PrivateKeySigner;
use serde_json::{Value, json};

use crate::anvil::Anvil;
use crate::common::{self, LocalApp, RECIPIENT, Samples, f, start_anvil, table, transacting_agent, verdict};
use crate::solidity;

const N: usize = 200;
const AMOUNT: &str = "0.001";
/// Of the test token (6 decimals, like USDC): 1.5 TUSD = 1 500 000 base units.
const TOKEN_AMOUNT: &str = "1.5";
const TOKEN_UNITS: u64 = 1_500_000;
const TOKEN_DECIMALS: u8 = 6;
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
    let raw = raw_intake(&anvil, to, dev_nonce).await;
    // Anvil answers a raw transaction before it has mined it: wait for the last block before reading nonces.
    let raw_nonce = mined_nonce(&anvil, dev, dev_nonce + N as u64).await - dev_nonce;

    let state = &app.state;
    let transfers = Transfers::new(
        state.store.clone(),
        state.chains.clone(),
        state.vault.clone(),
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
        "N = {N} transfers each: {AMOUNT} ETH (native), {TOKEN_AMOUNT} TUSD (ERC-20, {TOKEN_DECIMALS} decimals, second agent); anvil automine (one block per transaction)"
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
            agent,
            chain,
            to,
            token: token.clone(),
            amount,
            conversation_id: None,
            actor: agentd::auth::Actor::Agent,
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
