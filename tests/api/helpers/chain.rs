//! Native transfers against a real node (anvil), shared by the transfer tests (`transfers`, `confirmations`,
//! `transfer_concurrency`, `transfer_recovery`, `mcp`): an app on the node, a funded sending agent, a send through
//! the chat, the stored transactions (and waiting for their status), and what the node says a transfer cost.
#![allow(dead_code)] // Each test file uses a different part of this helper.

use std::time::Duration;

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
/// How long a test drives the watcher (`TestApp::settle`) before it gives up on a transfer being settled.
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

/// A sending agent (see `sending_agent`) whose wallet holds 1 ETH on `anvil`.
pub async fn funded_agent(app: &TestApp, anvil: &Anvil, cap: Option<f64>) -> CreatedAgent {
    let agent = sending_agent(app, cap).await;
    anvil.set_balance(wallet(&agent), wei(ONE_ETH)).await;
    agent
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

/// Drives the watcher until the transactions endpoint lists `count` transactions, all with `status`; returns them.
pub async fn wait_for_transactions(app: &TestApp, agent: &CreatedAgent, count: usize, status: &str) -> Vec<Value> {
    app.settle_until(async || {
        let txs = transactions(app, agent).await;
        match txs.len() == count && txs.iter().all(|tx| tx["status"] == status) {
            true => Ok(txs),
            false => Err(format!(
                "expected {count} {status} transactions within {SETTLE_TIMEOUT:?}, have {txs:#?}"
            )),
        }
    })
    .await
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
    let receipt = anvil.receipt(hash).await;
    let tx = anvil
        .provider()
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

/// How many of `messages` are the watcher's confirmation messages (`… is confirmed …`).
pub fn confirmation_messages(messages: &[Value]) -> usize {
    messages
        .iter()
        .filter(|m| m["content"].as_str().unwrap_or_default().contains("is confirmed"))
        .count()
}
