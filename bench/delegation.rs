//! `delegation`: the time a delegated transfer adds over a direct one (§21). The same 0.01 USDC `POST …/transfers`
//! on the in-process app (SQLite), alternating: from the agent's own wallet, and through a daily
//! `erc20_period_transfer` delegation from an owner account upgraded by EIP-7702 to the unmodified MetaMask
//! Delegation Framework (deployed from npm `@metamask/delegation-abis`, as the test suite does). The delegated one
//! also reads the delegation's state and what its period has left on the chain, simulates the redemption as signed
//! and counts it against the period in the reservation. One request at a time; overhead = p50(delegated) -
//! p50(direct).

use std::time::{Duration, Instant};

use agentd::domain::delegation::Kind;
use alloy::primitives::U256;
use alloy::signers::local::PrivateKeySigner;
use serde_json::{Value, json};

use crate::common::{CreatedAgent, LocalApp, Samples, TOKEN_HEADER, f, start_anvil, table, transacting_agent};
use crate::delegation_framework::{Framework, chain_now, delegation_json, erc20_period_terms, upgrade_to_delegator};
use crate::solidity;

const N: usize = 200;
const BASE_CHAIN_ID: u64 = 8453;
const DAY: u64 = 86_400;
/// 0.01 USDC in base units (6 decimals).
const CENT: u64 = 10_000;
const RECIPIENT: &str = "0x000000000000000000000000000000000000dEaD";

pub async fn run() {
    let anvil = start_anvil(BASE_CHAIN_ID, &[]).await;
    let framework = Framework::deploy(&anvil, BASE_CHAIN_ID).await;
    let owner = PrivateKeySigner::random();
    let ether = U256::from(10u128.pow(18));
    anvil.set_balance(owner.address(), U256::from(10) * ether).await;
    upgrade_to_delegator(&anvil, &owner, framework.delegator, BASE_CHAIN_ID).await;
    let usdc = solidity::usdc_on_base(&anvil).await;
    let vars = framework.vars();
    let mut extra: Vec<(&str, &str)> = vars.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
    extra.push(("RPC_URL_BASE", anvil.url()));
    let app = LocalApp::start(&extra).await;
    let agent = app.create_agent(transacting_agent("bench delegate")).await;
    let wallet = agent.address("base");
    anvil.set_balance(wallet, U256::from(100) * ether).await;
    let total = U256::from(CENT) * U256::from(2 * N);
    solidity::mint(&anvil, usdc, wallet, total).await;
    solidity::mint(&anvil, usdc, owner.address(), total).await;
    let start = chain_now(&anvil).await - 3600;
    let delegation = framework.grant(
        &owner,
        wallet,
        &[(Kind::Erc20PeriodTransfer, erc20_period_terms(usdc, total, DAY, start))],
        1,
    );
    let registered: Value = app
        .client
        .post(format!("{}/api/agents/{}/delegations", app.address, agent.id))
        .header(TOKEN_HEADER, &agent.token)
        .json(&json!({"chain": "base", "delegation": delegation_json(&delegation)}))
        .send()
        .await
        .expect("the registration answers")
        .json()
        .await
        .expect("a JSON answer");
    let id = registered["id"]
        .as_str()
        .unwrap_or_else(|| panic!("not registered: {registered}"))
        .to_string();

    let (mut direct, mut delegated, mut errors) = (Vec::with_capacity(N), Vec::with_capacity(N), 0);
    for _ in 0..N {
        match send(&app, &agent, None).await {
            Some(took) => direct.push(took),
            None => errors += 1,
        }
        match send(&app, &agent, Some(&id)).await {
            Some(took) => delegated.push(took),
            None => errors += 1,
        }
    }
    let (direct, delegated) = (Samples::from_durations(&direct), Samples::from_durations(&delegated));
    println!("N = {N} transfers of 0.01 USDC each way, alternating, one at a time; anvil automine");
    let row = |name: &str, s: &Samples| {
        vec![
            name.to_string(),
            s.len().to_string(),
            f(s.pct(50.0), 2),
            f(s.pct(99.0), 2),
        ]
    };
    table(
        &["transfer", "n", "p50 ms", "p99 ms"],
        &[
            row("from the agent's wallet", &direct),
            row("through the owner's delegation", &delegated),
        ],
    );
    println!(
        "  a delegated transfer adds {} ms at p50 ({} ms at p99); errors = {errors}",
        f(delegated.pct(50.0) - direct.pct(50.0), 2),
        f(delegated.pct(99.0) - direct.pct(99.0), 2)
    );
}

/// One transfer; how long it took, or `None` (printed) if it was not sent.
async fn send(app: &LocalApp, agent: &CreatedAgent, delegation: Option<&str>) -> Option<Duration> {
    let mut body = json!({"chain": "base", "to": RECIPIENT, "amount": "0.01", "asset": "USDC"});
    if let Some(id) = delegation {
        body["delegation"] = json!(id);
    }
    let started = Instant::now();
    let response = app
        .client
        .post(format!("{}/api/agents/{}/transfers", app.address, agent.id))
        .header(TOKEN_HEADER, &agent.token)
        .json(&body)
        .send()
        .await
        .ok()?;
    let status = response.status();
    let answer: Value = response.json().await.unwrap_or(Value::Null);
    let took = started.elapsed();
    if status.as_u16() != 201 {
        println!("  refused ({status}): {answer}");
        return None;
    }
    Some(took)
}
