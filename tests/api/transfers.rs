//! Native transfers through the builtin chat engine against a real node (anvil): funds move exactly, the
//! confirmation settles the spending cap to the actual cost, and every refusal leaves nothing stored or on chain.
//! Also the shared helpers of the other transfer test files (`confirmations`, `transfer_concurrency`,
//! `transfer_recovery`).

use std::time::{Duration, Instant};

use alloy::primitives::{Address, TxHash, U256};
use alloy::providers::Provider;
use alloy::signers::local::PrivateKeySigner;
use reqwest::{Method, StatusCode};
use serde_json::{Value, json};

use crate::anvil::Anvil;
use crate::helpers::{CreatedAgent, TestApp, spawn_app_with};

pub const BASE_CHAIN_ID: u64 = 8453;
pub const ONE_ETH: u128 = 1_000_000_000_000_000_000;
/// 0.01 ETH in wei: the amount every test sends.
pub const CENT_ETH: u128 = ONE_ETH / 100;
/// How long a transfer may take to be confirmed once mined (the watcher polls every 50 ms in these tests).
pub const SETTLE_TIMEOUT: Duration = Duration::from_secs(15);

/// An in-process app whose `base` chain is `anvil`, with a fast watcher, plus `extra` variables.
pub async fn transfer_app(anvil: &Anvil, extra: &[(&str, &str)]) -> TestApp {
    let mut vars = vec![("RPC_URL_BASE", anvil.url()), ("WATCHER_INTERVAL_MS", "50")];
    vars.extend_from_slice(extra);
    spawn_app_with(&vars).await
}

/// An agent on `base` with `read` and `transact` and the given cap (None: the default cap).
pub async fn sending_agent(app: &TestApp, cap: Option<f64>) -> CreatedAgent {
    let mut body = json!({
        "name": "payer",
        "chains": ["base"],
        "capabilities": ["read", "transact"],
    });
    if let Some(cap) = cap {
        body["spending_cap"] = json!(cap);
    }
    app.create_agent_ok(body).await
}

pub fn wallet(agent: &CreatedAgent) -> Address {
    agent.address("base").parse().expect("the wallet address parses")
}

/// A fresh address nobody has used.
pub fn fresh_address() -> Address {
    PrivateKeySigner::random().address()
}

pub fn wei(value: u128) -> U256 {
    U256::from(value)
}

/// `POST /api/chat` as the agent; insists on a 200 and returns the body.
pub async fn chat(app: &TestApp, agent: &CreatedAgent, message: &str) -> Value {
    let body = json!({"agent_id": agent.id, "message": message});
    let (status, body) = app
        .request(Method::POST, "/api/chat", Some(&agent.token), Some(body))
        .await;
    assert_eq!(status, StatusCode::OK, "chat `{message}` failed: {body}");
    body
}

/// Asks for `send <amount> ETH to <to> on base`; returns the chat body and its one `send_native` call.
pub async fn send_via_chat(app: &TestApp, agent: &CreatedAgent, amount: &str, to: Address) -> (Value, Value) {
    let body = chat(app, agent, &format!("send {amount} ETH to {to} on base")).await;
    let call = send_call(&body);
    (body, call)
}

/// The `send_native` chain call of a chat turn (there must be exactly one).
#[track_caller]
pub fn send_call(body: &Value) -> Value {
    let calls = body["chain_calls"]
        .as_array()
        .unwrap_or_else(|| panic!("chain_calls is an array: {body}"));
    assert_eq!(calls.len(), 1, "one tool call per send: {body}");
    assert_eq!(calls[0]["tool"], "send_native", "{body}");
    calls[0].clone()
}

/// The `error.code` of a refused chain call.
#[track_caller]
pub fn refusal_code(call: &Value) -> String {
    call["error"]["code"]
        .as_str()
        .unwrap_or_else(|| panic!("the call was refused with an error code: {call}"))
        .to_string()
}

/// The hash of a successful send.
#[track_caller]
pub fn sent_hash(call: &Value) -> TxHash {
    assert!(
        call.get("error").is_none_or(Value::is_null),
        "the send succeeded: {call}"
    );
    call["result"]["tx_hash"]
        .as_str()
        .unwrap_or_else(|| panic!("tx_hash in the result: {call}"))
        .parse()
        .expect("tx_hash is a 32-byte hash")
}

/// `GET /api/agents/{id}/transactions`.
pub async fn transactions(app: &TestApp, agent: &CreatedAgent) -> Vec<Value> {
    let path = format!("/api/agents/{}/transactions", agent.id);
    let (status, body) = app.request(Method::GET, &path, Some(&agent.token), None).await;
    assert_eq!(status, StatusCode::OK, "transactions: {body}");
    body.as_array().unwrap_or_else(|| panic!("an array: {body}")).clone()
}

/// Polls the transactions endpoint until `count` transactions all have `status`; returns them.
pub async fn wait_for_transactions(app: &TestApp, agent: &CreatedAgent, count: usize, status: &str) -> Vec<Value> {
    let deadline = Instant::now() + SETTLE_TIMEOUT;
    loop {
        let txs = transactions(app, agent).await;
        if txs.len() == count && txs.iter().all(|tx| tx["status"] == status) {
            return txs;
        }
        assert!(
            Instant::now() < deadline,
            "expected {count} {status} transactions within {SETTLE_TIMEOUT:?}, have {txs:#?}"
        );
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
}

/// The agent's `spent` on base in wei (the detail gives it as a decimal string in ETH).
pub async fn spent_on_base(app: &TestApp, agent: &CreatedAgent) -> U256 {
    let (status, detail) = app.get_agent(&agent.id, &agent.token).await;
    assert_eq!(status, StatusCode::OK, "{detail}");
    let spent = detail["spent"]["base"]
        .as_str()
        .unwrap_or_else(|| panic!("spent.base is a decimal string: {detail}"));
    agentd::domain::amount::parse_units(spent, 18).unwrap_or_else(|e| panic!("spent.base {spent}: {e:?}"))
}

/// What a mined transaction cost its sender according to the node: value + gas_used * effective_gas_price,
/// and its receipt status.
pub async fn node_cost(anvil: &Anvil, hash: TxHash) -> (U256, bool) {
    let provider = anvil.provider();
    let receipt = provider
        .get_transaction_receipt(hash)
        .await
        .expect("eth_getTransactionReceipt")
        .unwrap_or_else(|| panic!("{hash} has a receipt"));
    let tx = provider
        .get_transaction_by_hash(hash)
        .await
        .expect("eth_getTransactionByHash")
        .unwrap_or_else(|| panic!("{hash} is known"));
    let fee = U256::from(receipt.gas_used) * U256::from(receipt.effective_gas_price);
    let success = receipt.status();
    let value = if success {
        alloy::consensus::Transaction::value(&tx)
    } else {
        U256::ZERO
    };
    (value + fee, success)
}

/// Asserts that nothing happened for the agent: no transaction on the node, none stored, nothing spent.
pub async fn assert_nothing_sent(anvil: &Anvil, app: &TestApp, agent: &CreatedAgent) {
    assert_eq!(anvil.nonce(wallet(agent)).await, 0, "the agent sent nothing on chain");
    assert_eq!(transactions(app, agent).await, Vec::<Value>::new(), "nothing is stored");
    assert_eq!(
        spent_on_base(app, agent).await,
        U256::ZERO,
        "nothing is counted against the cap"
    );
}

#[tokio::test]
async fn a_send_moves_real_funds_and_counts_the_actual_cost() {
    let anvil = Anvil::start(BASE_CHAIN_ID);
    let app = transfer_app(&anvil, &[]).await;
    let agent = sending_agent(&app, Some(0.5)).await;
    let from = wallet(&agent);
    anvil.set_balance(from, wei(ONE_ETH)).await;
    let to = fresh_address();

    let (body, call) = send_via_chat(&app, &agent, "0.01", to).await;
    let hash = sent_hash(&call);
    let result = &call["result"];
    assert_eq!(result["nonce"], 0, "{call}");
    assert_eq!(result["amount_wei"], CENT_ETH.to_string(), "{call}");
    assert!(
        ["pending", "submitted"].contains(&result["status"].as_str().unwrap_or_default()),
        "{call}"
    );
    assert!(
        body["response"]
            .as_str()
            .unwrap_or_default()
            .contains(&hash.to_string()),
        "the answer quotes the hash: {body}"
    );

    assert_eq!(
        anvil.balance(to).await,
        wei(CENT_ETH),
        "the recipient got exactly 0.01 ETH"
    );
    assert_eq!(anvil.nonce(from).await, 1);

    let txs = wait_for_transactions(&app, &agent, 1, "confirmed").await;
    let tx = &txs[0];
    assert_eq!(tx["tx_hash"], hash.to_string(), "{tx}");
    assert_eq!(tx["chain"], "base", "{tx}");
    assert_eq!(tx["value_wei"], CENT_ETH.to_string(), "{tx}");
    assert_eq!(tx["conversation_id"], body["conversation_id"], "{tx}");
    assert_eq!(
        tx["to"].as_str().unwrap_or_default().to_ascii_lowercase(),
        to.to_string().to_ascii_lowercase(),
        "{tx}"
    );
    let receipt = anvil
        .provider()
        .get_transaction_receipt(hash)
        .await
        .unwrap()
        .expect("a receipt");
    assert_eq!(tx["block_number"], json!(receipt.block_number.unwrap()), "{tx}");

    let (cost, success) = node_cost(&anvil, hash).await;
    assert!(success);
    assert_eq!(
        spent_on_base(&app, &agent).await,
        cost,
        "spent is the value plus the fee the node charged"
    );
    assert_eq!(
        anvil.balance(from).await,
        wei(ONE_ETH) - cost,
        "the wallet paid exactly that"
    );
}

#[tokio::test]
async fn without_transact_nothing_is_sent() {
    let anvil = Anvil::start(BASE_CHAIN_ID);
    let app = transfer_app(&anvil, &[]).await;
    let agent = app
        .create_agent_ok(json!({
            "name": "reader",
            "chains": ["base"],
            "capabilities": ["read"],
            "spending_cap": 1,
        }))
        .await;
    anvil.set_balance(wallet(&agent), wei(ONE_ETH)).await;
    let to = fresh_address();

    let body = chat(&app, &agent, &format!("send 0.01 ETH to {to} on base")).await;
    let response = body["response"].as_str().unwrap_or_default();
    assert!(response.contains("transact"), "the answer names the capability: {body}");
    for call in body["chain_calls"].as_array().expect("chain_calls") {
        assert_eq!(call["error"]["code"], "capability_denied", "no call runs: {body}");
    }
    assert_nothing_sent(&anvil, &app, &agent).await;
    assert_eq!(anvil.balance(to).await, U256::ZERO);
}

#[tokio::test]
async fn a_send_over_the_cap_is_refused_until_the_cap_is_raised() {
    let anvil = Anvil::start(BASE_CHAIN_ID);
    let app = transfer_app(&anvil, &[]).await;
    // 0.01 ETH plus the fee does not fit in 0.01.
    let agent = sending_agent(&app, Some(0.01)).await;
    anvil.set_balance(wallet(&agent), wei(ONE_ETH)).await;
    let to = fresh_address();

    let (_, call) = send_via_chat(&app, &agent, "0.01", to).await;
    assert_eq!(refusal_code(&call), "spending_cap_exceeded", "{call}");
    assert_nothing_sent(&anvil, &app, &agent).await;

    let (status, detail) = app
        .put_agent(&agent.id, &agent.token, json!({"spending_cap": 0.5}))
        .await;
    assert_eq!(status, StatusCode::OK, "{detail}");
    let (_, call) = send_via_chat(&app, &agent, "0.01", to).await;
    let hash = sent_hash(&call);
    assert_eq!(call["result"]["nonce"], 0, "the refusal used no nonce: {call}");
    wait_for_transactions(&app, &agent, 1, "confirmed").await;
    assert_eq!(anvil.balance(to).await, wei(CENT_ETH));
    assert_eq!(spent_on_base(&app, &agent).await, node_cost(&anvil, hash).await.0);
}

#[tokio::test]
async fn the_default_cap_of_zero_refuses_every_send() {
    let anvil = Anvil::start(BASE_CHAIN_ID);
    let app = transfer_app(&anvil, &[]).await;
    let agent = sending_agent(&app, None).await;
    assert_eq!(agent.body["spending_cap"], json!(0), "{}", agent.body);
    anvil.set_balance(wallet(&agent), wei(ONE_ETH)).await;

    let (_, call) = send_via_chat(&app, &agent, "0.01", fresh_address()).await;
    assert_eq!(refusal_code(&call), "spending_cap_exceeded", "{call}");
    assert_nothing_sent(&anvil, &app, &agent).await;
}

#[tokio::test]
async fn an_unfunded_wallet_is_refused_with_insufficient_funds() {
    let anvil = Anvil::start(BASE_CHAIN_ID);
    let app = transfer_app(&anvil, &[]).await;
    let agent = sending_agent(&app, Some(10.0)).await;

    let (_, call) = send_via_chat(&app, &agent, "0.01", fresh_address()).await;
    assert_eq!(refusal_code(&call), "insufficient_funds", "{call}");
    assert_nothing_sent(&anvil, &app, &agent).await;

    // Funds for the value but not for the fee on top of it: still refused, still nothing stored.
    anvil.set_balance(wallet(&agent), wei(CENT_ETH)).await;
    let (_, call) = send_via_chat(&app, &agent, "0.01", fresh_address()).await;
    assert_eq!(refusal_code(&call), "insufficient_funds", "{call}");
    assert_nothing_sent(&anvil, &app, &agent).await;
}
