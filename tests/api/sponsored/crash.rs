//! A process SIGKILLed right after answering sponsored transfers (§22): after the restart, each operation lands
//! exactly once — the bundler carries what was signed, sends again a bundle it recorded but lost, and the
//! EntryPoint's nonce stops any second landing. What is asserted is what the chain shows.

use std::net::TcpListener;
use std::time::Duration;

use alloy::primitives::{Address, U256};
use reqwest::StatusCode;
use serde_json::{Value, json};

use super::transfers::USDC;
use crate::anvil::Anvil;
use crate::helpers::chain::{BASE_CHAIN_ID, ONE_ETH, fresh_address, wei};
use crate::helpers::delegation_framework::Framework;
use crate::helpers::paymaster::Paymaster;
use crate::helpers::solidity::{mint, read, token_balance, usdc_on_base};
use crate::helpers::{ENCRYPTION_KEY, ServerProcess, TOKEN_HEADER, sqlite_url};

fn env(parts: &[(String, String)], db: &str, rpc: &str) -> Vec<(String, String)> {
    let port = TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    let mut env: Vec<(String, String)> = vec![
        ("BIND_ADDR".into(), format!("127.0.0.1:{port}")),
        ("APP_ENV".into(), "development".into()),
        ("ENCRYPTION_KEY".into(), ENCRYPTION_KEY.into()),
        ("DATABASE_URL".into(), db.into()),
        ("RPC_URL_BASE".into(), rpc.into()),
        ("WATCHER_INTERVAL_MS".into(), "50".into()),
        ("RUST_LOG".into(), "info,sqlx=warn".into()),
    ];
    env.extend(parts.iter().cloned());
    env
}

fn start(env: &[(String, String)], dir: &std::path::Path) -> ServerProcess {
    let refs: Vec<(&str, &str)> = env.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
    ServerProcess::start(&refs, dir)
}

async fn call(client: &reqwest::Client, request: reqwest::RequestBuilder) -> (StatusCode, Value) {
    let _ = client;
    let response = request.send().await.expect("the process answers");
    let status = response.status();
    (status, response.json().await.unwrap_or(Value::Null))
}

#[tokio::test]
async fn a_sigkill_after_the_answers_lands_each_sponsored_operation_exactly_once() {
    let anvil = Anvil::start(BASE_CHAIN_ID);
    let framework = Framework::deploy(&anvil, BASE_CHAIN_ID).await;
    let paymaster = Paymaster::deploy(&anvil, framework.entry_point).await;
    let usdc = usdc_on_base(&anvil).await;
    let mut parts = framework.vars();
    parts.push(("ENTRY_POINT_BASE".into(), framework.entry_point.to_string()));
    parts.push(("ACCOUNT_IMPLEMENTATION_BASE".into(), framework.delegator.to_string()));
    parts.push(("PAYMASTER_BASE".into(), paymaster.address.to_string()));
    let dir = tempfile::tempdir().unwrap();
    let db = sqlite_url(dir.path());
    let client = reqwest::Client::new();

    let server = start(&env(&parts, &db, anvil.url()), dir.path());
    let base = server.base_url();
    let (_, chains) = call(&client, client.get(format!("{base}/api/chains"))).await;
    let chain = chains
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["name"] == "base")
        .unwrap()
        .clone();
    let sponsor: Address = chain["sponsorship"]["sponsor"]
        .as_str()
        .expect("sponsorable")
        .parse()
        .unwrap();
    paymaster.sponsor(&anvil, sponsor, wei(ONE_ETH)).await;
    anvil.set_balance(sponsor, wei(ONE_ETH)).await;
    let body = json!({"name": "crash", "chains": ["base"], "capabilities": ["read", "transact"], "spending_cap": 0.1});
    let (status, agent) = call(&client, client.post(format!("{base}/api/agents")).json(&body)).await;
    assert_eq!(status, StatusCode::CREATED, "{agent}");
    let (id, token) = (
        agent["id"].as_str().unwrap().to_string(),
        agent["access_token"].as_str().unwrap().to_string(),
    );
    let from: Address = agent["wallet_addresses"]["base"].as_str().unwrap().parse().unwrap();
    mint(&anvil, usdc, from, U256::from(100 * USDC)).await;
    let sponsorship = json!({"chain": "base", "per_day": "0.05"});
    let (status, body) = call(
        &client,
        client
            .put(format!("{base}/api/agents/{id}/sponsorship"))
            .json(&sponsorship),
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{body}");

    // Three sponsored transfers answered, then SIGKILL at once.
    let to = fresh_address();
    let mut answered = 0u64;
    for _ in 0..3 {
        let order = json!({"chain": "base", "to": to.to_string(), "amount": "1", "asset": "USDC"});
        let request = client
            .post(format!("{base}/api/agents/{id}/transfers"))
            .header(TOKEN_HEADER, &token)
            .json(&order);
        let (status, body) = call(&client, request).await;
        assert_eq!(status, StatusCode::CREATED, "{body}");
        answered += 1;
    }
    drop(server);

    let server = start(&env(&parts, &db, anvil.url()), dir.path());
    let base = server.base_url();
    let list = client
        .get(format!("{base}/api/agents/{id}/transactions"))
        .header(TOKEN_HEADER, &token);
    let mut confirmed = 0;
    for _ in 0..150 {
        let (_, listed) = call(&client, list.try_clone().unwrap()).await;
        confirmed = listed
            .as_array()
            .map_or(0, |l| l.iter().filter(|t| t["status"] == "confirmed").count());
        if confirmed == answered as usize {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert_eq!(
        confirmed, answered as usize,
        "every answered operation settles after the restart"
    );
    tokio::time::sleep(Duration::from_secs(1)).await;
    // From the chain: one USDC per answer, no more; the account's EntryPoint nonce counts each operation once.
    assert_eq!(token_balance(&anvil, usdc, to).await, U256::from(answered * USDC));
    let nonce = read(
        &anvil,
        framework.entry_point,
        agentd::chain::userop::get_nonce_call(from, Default::default()),
    )
    .await;
    assert_eq!(
        agentd::chain::userop::uint_answer(&nonce).unwrap(),
        U256::from(answered)
    );
    assert_eq!(anvil.balance(from).await, U256::ZERO);
    drop(server);
}
