//! `calls`: the time a contract call spends in simulation and decision (docs/api.md §18) against the node's own
//! `eth_simulateV1` time. The call is an ERC-20 `approve` of a test token (deployed from the test suite's Solidity
//! helper): `POST …/calls/simulate` on the in-process app (SQLite) runs what a call runs before it is signed — the
//! simulation with transfer tracing, the allowance reads before and after it, the policy's rules, the ledger and the
//! windows, the cap — and signs nothing. The direct figure is one `eth_simulateV1` of the same call, sent by a
//! client straight to anvil. The two alternate, one request at a time. overhead = p50(agentd) - p50(direct).
//! Then the call itself, `POST …/calls` (simulation, the one decision, the signature, the broadcast) one at a time:
//! the whole of what a call costs in agentd, whose counting (allowances read before and after, the ledger, the sums
//! per asset) is a part.

use std::time::{Duration, Instant};

use alloy::primitives::Address;
use alloy::sol_types::SolCall;
use serde_json::{Value, json};

use crate::common::{LocalApp, Samples, TOKEN_HEADER, f, start_anvil, table, transacting_agent};
use crate::solidity;

const N: usize = 300;
const BASE_CHAIN_ID: u64 = 8453;

alloy::sol! {
    function approve(address spender, uint256 amount) external returns (bool);
}

pub async fn run() {
    let anvil = start_anvil(BASE_CHAIN_ID, &[]).await;
    let app = LocalApp::start(&[("RPC_URL_BASE", anvil.url())]).await;
    let created = app.create_agent(transacting_agent("bench caller")).await;
    let agent = created.address("base");
    anvil
        .set_balance(agent, alloy::primitives::U256::from(10u128.pow(18)))
        .await;
    let token = solidity::deploy_test_token(&anvil, "Bench Dollar", "BUSD", 6).await;
    let spender = Address::repeat_byte(0x5e);
    let body = json!({"chain": "base", "to": token.to_string(), "function": "approve(address,uint256)",
        "args": [spender.to_string(), "1000000"]});
    let calldata = approveCall {
        spender,
        amount: alloy::primitives::U256::from(1_000_000u64),
    }
    .abi_encode();
    let direct_body = json!({"jsonrpc": "2.0", "id": 1, "method": "eth_simulateV1", "params": [{
        "blockStateCalls": [{"calls": [{"from": agent.to_string(), "to": token.to_string(),
            "data": alloy::hex::encode_prefixed(&calldata)}]}],
        "traceTransfers": true, "validation": false}, "latest"]});
    let url = format!("{}/api/agents/{}/calls/simulate", app.address, created.id);
    let client = &app.client;

    let through = || async {
        let started = Instant::now();
        let response = client
            .post(&url)
            .header(TOKEN_HEADER, &created.token)
            .json(&body)
            .send()
            .await
            .expect("POST …/calls/simulate");
        let status = response.status();
        let answer: Value = response.json().await.unwrap_or_default();
        let elapsed = started.elapsed();
        (status.is_success() && answer["decision"]["result"] == "allow")
            .then_some(elapsed)
            .ok_or(answer)
    };
    let direct = || async {
        let started = Instant::now();
        let answer: Value = client
            .post(anvil.url())
            .json(&direct_body)
            .send()
            .await
            .expect("eth_simulateV1")
            .json()
            .await
            .unwrap_or_default();
        let elapsed = started.elapsed();
        answer.get("result").is_some().then_some(elapsed).ok_or(answer)
    };
    through().await.expect("a warm-up simulation through agentd");
    direct().await.expect("a warm-up eth_simulateV1");

    let mut agentd: Vec<Duration> = Vec::with_capacity(N);
    let mut node: Vec<Duration> = Vec::with_capacity(N);
    let mut errors = 0usize;
    for _ in 0..N {
        match through().await {
            Ok(elapsed) => agentd.push(elapsed),
            Err(_) => errors += 1,
        }
        match direct().await {
            Ok(elapsed) => node.push(elapsed),
            Err(_) => errors += 1,
        }
    }
    let a = Samples::from_durations(&agentd);
    let d = Samples::from_durations(&node);
    println!("N = {N} each way, alternating; an ERC-20 approve; times in ms");
    let row = |name: &str, s: &Samples| {
        vec![
            name.to_string(),
            s.len().to_string(),
            f(s.pct(50.0), 2),
            f(s.pct(99.0), 2),
            f(s.max(), 2),
        ]
    };
    table(
        &["simulation", "n", "p50", "p99", "max"],
        &[
            row("the node's own eth_simulateV1 (direct)", &d),
            row("agentd: POST …/calls/simulate (simulation + decision)", &a),
            vec![
                "overhead (agentd - direct)".into(),
                String::new(),
                f(a.pct(50.0) - d.pct(50.0), 2),
                f(a.pct(99.0) - d.pct(99.0), 2),
                String::new(),
            ],
        ],
    );
    println!("errors {errors}");

    // The call as sent: signed and broadcast (anvil mines each at once), one at a time.
    let send_url = format!("{}/api/agents/{}/calls", app.address, created.id);
    let mut sent: Vec<Duration> = Vec::with_capacity(N);
    let mut send_errors = 0usize;
    for _ in 0..N {
        let started = Instant::now();
        let response = client
            .post(&send_url)
            .header(TOKEN_HEADER, &created.token)
            .json(&body)
            .send()
            .await
            .expect("POST …/calls");
        let ok = response.status().is_success();
        let _ = response.bytes().await;
        match ok {
            true => sent.push(started.elapsed()),
            false => send_errors += 1,
        }
    }
    let s = Samples::from_durations(&sent);
    table(
        &["call", "n", "p50", "p99", "max"],
        &[row(
            "agentd: POST …/calls (simulation, decision, signature, broadcast)",
            &s,
        )],
    );
    println!("errors {send_errors}");
}
