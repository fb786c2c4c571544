//! The agent's wallets (docs/api.md §5): balances read from real nodes, per-chain errors, and funding instructions.

use std::net::TcpListener;

use alloy::primitives::U256;
use reqwest::{Method, StatusCode};
use serde_json::{Value, json};

use crate::anvil::Anvil;
use crate::helpers::chat::{BASE_ID, ETHEREUM_ID, address, two_chains};
use crate::helpers::{CreatedAgent, TestApp, assert_checksummed, assert_error, spawn_app, spawn_app_with};

/// A port on which nothing listens (bound once to find it free, then released).
fn closed_port() -> u16 {
    TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port()
}

async fn balances(app: &TestApp, agent: &CreatedAgent) -> Value {
    let path = format!("/api/agents/{}/balances", agent.id);
    let (status, body) = app.request(Method::GET, &path, Some(&agent.token), None).await;
    assert_eq!(status, StatusCode::OK, "balances: {body}");
    assert_eq!(body["agent_id"], agent.id.as_str(), "{body}");
    body
}

async fn fund(app: &TestApp, agent: &CreatedAgent, body: Option<Value>) -> (StatusCode, Value) {
    let path = format!("/api/agents/{}/fund", agent.id);
    app.request(Method::POST, &path, Some(&agent.token), body).await
}

/// `{address, wei, formatted, symbol}` with the expected figures and nothing of an error.
#[track_caller]
fn assert_balance(entry: &Value, agent: &CreatedAgent, chain: &str, wei: &str, formatted: &str) {
    assert_eq!(entry["address"], agent.address(chain), "{entry}");
    assert_eq!(entry["wei"], wei, "{entry}");
    assert_eq!(entry["formatted"], formatted, "{entry}");
    assert_eq!(entry["symbol"], "ETH", "{entry}");
    assert!(entry.get("error").is_none(), "{entry}");
}

/// `{address, error: {code, message}}` and no figures.
#[track_caller]
fn assert_balance_error(entry: &Value, agent: &CreatedAgent, chain: &str) -> String {
    assert_eq!(entry["address"], agent.address(chain), "{entry}");
    assert!(
        entry.get("wei").is_none() && entry.get("formatted").is_none(),
        "{entry}"
    );
    let code = entry["error"]["code"]
        .as_str()
        .unwrap_or_else(|| panic!("an error code: {entry}"));
    assert!(
        !code.is_empty() && code.chars().all(|c| c.is_ascii_lowercase() || c == '_'),
        "{entry}"
    );
    assert!(
        entry["error"]["message"].as_str().is_some_and(|m| !m.trim().is_empty()),
        "{entry}"
    );
    code.to_string()
}

#[tokio::test]
async fn balances_are_read_exactly_from_each_chains_node() {
    let env = two_chains(&[], &[]).await;
    let agent = env.app.create_agent_ok(json!({"name": "Holder"})).await;
    let wallet = address(&agent, "base");
    assert_checksummed(&agent.address("base"));
    env.base
        .set_balance(wallet, U256::from(1_234_567_000_000_000_000u128))
        .await;
    // Above 2^64 wei with every digit significant: nothing may be rounded.
    let big = U256::from_str_radix("123456789012345678901234567", 10).unwrap();
    env.ethereum.set_balance(wallet, big).await;

    let body = balances(&env.app, &agent).await;

    let entries = body["balances"].as_object().unwrap();
    assert_eq!(entries.len(), 2, "one entry per agent chain: {body}");
    assert_balance(
        &body["balances"]["base"],
        &agent,
        "base",
        "1234567000000000000",
        "1.234567",
    );
    assert_balance(
        &body["balances"]["ethereum"],
        &agent,
        "ethereum",
        "123456789012345678901234567",
        "123456789.012345678901234567",
    );
    assert_eq!(env.ethereum.balance(wallet).await, big);

    // An empty wallet is exactly zero.
    let empty = env
        .app
        .create_agent_ok(json!({"name": "Empty", "chains": ["base"]}))
        .await;
    let body = balances(&env.app, &empty).await;
    assert_balance(&body["balances"]["base"], &empty, "base", "0", "0");
}

#[tokio::test]
async fn a_chain_whose_node_is_down_gives_an_error_for_that_chain_only() {
    let base = Anvil::start(BASE_ID);
    let down = format!("http://127.0.0.1:{}", closed_port());
    let app = spawn_app_with(&[("RPC_URL_BASE", base.url()), ("RPC_URL_ETHEREUM", &down)]).await;
    let agent = app.create_agent_ok(json!({"name": "Split"})).await;
    base.set_balance(address(&agent, "base"), U256::from(42u64)).await;

    let started = std::time::Instant::now();
    let body = balances(&app, &agent).await;

    assert_balance(&body["balances"]["base"], &agent, "base", "42", "0.000000000000000042");
    assert_balance_error(&body["balances"]["ethereum"], &agent, "ethereum");
    assert!(
        started.elapsed() < std::time::Duration::from_secs(10),
        "a refused connection fails fast: {:?}",
        started.elapsed()
    );
}

#[tokio::test]
async fn a_chain_without_an_rpc_url_gives_an_error_entry() {
    let base = Anvil::start(BASE_ID);
    let app = spawn_app_with(&[("RPC_URL_BASE", base.url())]).await;
    let agent = app
        .create_agent_ok(json!({"name": "Partial", "chains": ["base", "optimism"]}))
        .await;

    let body = balances(&app, &agent).await;

    assert_balance(&body["balances"]["base"], &agent, "base", "0", "0");
    assert_balance_error(&body["balances"]["optimism"], &agent, "optimism");
}

#[tokio::test]
async fn a_node_with_the_wrong_chain_id_is_refused_for_that_chain() {
    // One node with chain id 1, configured for both ethereum (right) and base (wrong: base is 8453).
    let node = Anvil::start(ETHEREUM_ID);
    let app = spawn_app_with(&[("RPC_URL_BASE", node.url()), ("RPC_URL_ETHEREUM", node.url())]).await;
    let agent = app.create_agent_ok(json!({"name": "Careful"})).await;
    node.set_balance(address(&agent, "ethereum"), U256::from(7u64)).await;

    let body = balances(&app, &agent).await;

    assert_balance(
        &body["balances"]["ethereum"],
        &agent,
        "ethereum",
        "7",
        "0.000000000000000007",
    );
    let code = assert_balance_error(&body["balances"]["base"], &agent, "base");
    assert_eq!(code, "wrong_chain_id", "{body}");
}

#[tokio::test]
async fn fund_without_a_body_gives_one_deposit_per_chain() {
    let app = spawn_app().await;
    let agent = app
        .create_agent_ok(json!({"name": "Piggy", "chains": ["base", "ethereum", "optimism"]}))
        .await;

    let (status, body) = fund(&app, &agent, None).await;

    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(body["agent_id"], agent.id.as_str());
    assert!(
        body["instructions"].as_str().is_some_and(|s| !s.trim().is_empty()),
        "{body}"
    );
    let deposits = body["deposits"].as_array().unwrap();
    let chains: Vec<&str> = deposits.iter().map(|d| d["chain"].as_str().unwrap()).collect();
    assert_eq!(chains, ["base", "ethereum", "optimism"], "in the agent's order: {body}");
    for (deposit, chain_id) in deposits.iter().zip([8453, 1, 10]) {
        let chain = deposit["chain"].as_str().unwrap();
        let address = agent.address(chain);
        assert_eq!(deposit["chain_id"], chain_id, "{deposit}");
        assert_eq!(deposit["address"], address, "{deposit}");
        assert_eq!(deposit["symbol"], "ETH", "{deposit}");
        assert_eq!(
            deposit["payment_uri"],
            format!("ethereum:{address}@{chain_id}"),
            "{deposit}"
        );
        assert!(
            deposit["explorer_url"]
                .as_str()
                .is_some_and(|u| u.starts_with("https://") && u.contains(&address)),
            "{deposit}"
        );
    }

    // An empty JSON object is the same as no body.
    let (status, again) = fund(&app, &agent, Some(json!({}))).await;
    assert_eq!(status, StatusCode::OK, "{again}");
    assert_eq!(again["deposits"], body["deposits"]);
}

#[tokio::test]
async fn fund_with_a_chain_and_an_amount_gives_an_eip681_uri_in_wei() {
    let app = spawn_app().await;
    let agent = app.create_default_agent().await;
    let address = agent.address("base");

    for (amount, wei) in [
        (json!("0.05"), "50000000000000000"),
        (json!("1"), "1000000000000000000"),
        (json!("0.000000000000000001"), "1"),
        (json!("12.345678901234567891"), "12345678901234567891"),
    ] {
        let (status, body) = fund(&app, &agent, Some(json!({"chain": "base", "amount": amount}))).await;
        assert_eq!(status, StatusCode::OK, "{amount}: {body}");
        let deposits = body["deposits"].as_array().unwrap();
        assert_eq!(deposits.len(), 1, "{body}");
        assert_eq!(deposits[0]["chain"], "base");
        assert_eq!(deposits[0]["chain_id"], 8453);
        assert_eq!(deposits[0]["address"], address.as_str());
        assert_eq!(
            deposits[0]["payment_uri"],
            format!("ethereum:{address}@8453?value={wei}"),
            "{amount}: {body}"
        );
    }

    // A chain without an amount: one deposit, no value.
    let (status, body) = fund(&app, &agent, Some(json!({"chain": "ethereum"}))).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(body["deposits"].as_array().unwrap().len(), 1, "{body}");
    assert_eq!(body["deposits"][0]["payment_uri"], format!("ethereum:{address}@1"));
}

#[tokio::test]
async fn fund_refuses_a_chain_the_agent_is_not_on_and_bad_amounts() {
    let app = spawn_app().await;
    let agent = app
        .create_agent_ok(json!({"name": "Base only", "chains": ["base"]}))
        .await;

    for chain in ["ethereum", "dogecoin", ""] {
        let response = fund(&app, &agent, Some(json!({"chain": chain}))).await;
        assert_error(&response, StatusCode::UNPROCESSABLE_ENTITY, "validation_failed");
    }
    for amount in [
        json!("abc"),
        json!("-1"),
        json!("0.0000000000000000001"),
        json!("1.2.3"),
        json!(""),
        json!(true),
        json!(["1"]),
    ] {
        let response = fund(&app, &agent, Some(json!({"chain": "base", "amount": amount}))).await;
        assert_error(&response, StatusCode::UNPROCESSABLE_ENTITY, "validation_failed");
    }
}

#[tokio::test]
async fn balances_and_fund_check_token_agent_and_activity_in_order() {
    let app = spawn_app().await;
    let agent = app.create_default_agent().await;
    let other = app.create_default_agent().await;
    let unknown = uuid::Uuid::new_v4().to_string();

    for (method, suffix) in [(Method::GET, "balances"), (Method::POST, "fund")] {
        let path = |id: &str| format!("/api/agents/{id}/{suffix}");
        let missing = app.request(method.clone(), &path(&agent.id), None, None).await;
        assert_error(&missing, StatusCode::UNAUTHORIZED, "missing_token");
        let foreign = app
            .request(method.clone(), &path(&agent.id), Some(&other.token), None)
            .await;
        assert_error(&foreign, StatusCode::FORBIDDEN, "forbidden");
        let absent = app
            .request(method.clone(), &path(&unknown), Some(&agent.token), None)
            .await;
        assert_error(&absent, StatusCode::NOT_FOUND, "agent_not_found");
        let malformed = app
            .request(method.clone(), &path("not-a-uuid"), Some(&agent.token), None)
            .await;
        assert_error(&malformed, StatusCode::NOT_FOUND, "agent_not_found");
    }

    let (status, _) = app.delete_agent(&agent.id, &agent.token).await;
    assert_eq!(status, StatusCode::NO_CONTENT);
    let path = format!("/api/agents/{}/balances", agent.id);
    let gone = app.request(Method::GET, &path, Some(&agent.token), None).await;
    assert_error(&gone, StatusCode::GONE, "agent_inactive");
    let path = format!("/api/agents/{}/fund", agent.id);
    let gone = app
        .request(Method::POST, &path, Some(&agent.token), Some(json!({"chain": "base"})))
        .await;
    assert_error(&gone, StatusCode::GONE, "agent_inactive");
    // The body is checked last: a bad body for a deleted agent is still 410.
    let gone = app
        .request(
            Method::POST,
            &path,
            Some(&agent.token),
            Some(json!({"chain": "dogecoin"})),
        )
        .await;
    assert_error(&gone, StatusCode::GONE, "agent_inactive");
    // And the token before activity: another agent's token on the deleted agent is 403.
    let foreign = app.request(Method::POST, &path, Some(&other.token), None).await;
    assert_error(&foreign, StatusCode::FORBIDDEN, "forbidden");
}
