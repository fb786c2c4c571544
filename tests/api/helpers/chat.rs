//! Chat turns for the tests: an app on two local nodes (`base` and `ethereum`), agents with chosen capabilities,
//! `POST /api/chat` turns, and the contract's shape of a turn and of a chain call.
#![allow(dead_code)] // Each test file uses a different part of this helper.

use alloy::primitives::Address;
use reqwest::{Method, StatusCode};
use serde_json::{Value, json};

use crate::anvil::Anvil;
use crate::helpers::{CreatedAgent, TestApp, TestResponse, spawn_app_with};

pub(crate) const ALL_CAPABILITIES: &[&str] = &["read", "compare", "transact", "analytics"];
pub(crate) const BASE_ID: u64 = 8453;
pub(crate) const ETHEREUM_ID: u64 = 1;

/// An app whose `base` and `ethereum` chains are two local nodes.
pub(crate) struct TwoChains {
    pub app: TestApp,
    pub base: Anvil,
    pub ethereum: Anvil,
}

pub(crate) async fn two_chains(base_args: &[&str], ethereum_args: &[&str]) -> TwoChains {
    let base = Anvil::start_with(BASE_ID, base_args);
    let ethereum = Anvil::start_with(ETHEREUM_ID, ethereum_args);
    let app = spawn_app_with(&[("RPC_URL_BASE", base.url()), ("RPC_URL_ETHEREUM", ethereum.url())]).await;
    TwoChains { app, base, ethereum }
}

/// An agent on ethereum and base with the given capabilities (and a spending cap of 1).
pub(crate) async fn agent_with(app: &TestApp, name: &str, capabilities: &[&str]) -> CreatedAgent {
    app.create_agent_ok(json!({
        "name": name,
        "chains": ["ethereum", "base"],
        "capabilities": capabilities,
        "spending_cap": 1,
    }))
    .await
}

pub(crate) fn address(agent: &CreatedAgent, chain: &str) -> Address {
    agent.address(chain).parse().expect("a wallet address")
}

pub(crate) async fn post_chat(app: &TestApp, path: &str, token: Option<&str>, body: Value) -> TestResponse {
    app.send(app.build(Method::POST, path, token, Some(body))).await
}

/// `POST /api/chat` of `message` as the agent, whatever the answer.
pub(crate) async fn post_turn(app: &TestApp, agent: &CreatedAgent, message: &str) -> TestResponse {
    post_chat(
        app,
        "/api/chat",
        Some(&agent.token),
        json!({"agent_id": agent.id, "message": message}),
    )
    .await
}

/// One turn on `/api/chat`, insisting on a 200 with the contract's shape.
pub(crate) async fn chat_in(app: &TestApp, agent: &CreatedAgent, message: &str, conversation: Option<&str>) -> Value {
    let response = post_chat(
        app,
        "/api/chat",
        Some(&agent.token),
        json!({"agent_id": agent.id, "message": message, "conversation_id": conversation}),
    )
    .await;
    assert_eq!(
        response.status,
        StatusCode::OK,
        "chat {message:?} failed: {}",
        response.text
    );
    assert_turn_shape(&response.body);
    response.body
}

pub(crate) async fn chat(app: &TestApp, agent: &CreatedAgent, message: &str) -> Value {
    chat_in(app, agent, message, None).await
}

/// `{response, conversation_id, chain_calls, tokens_used, message_id}` with the right types.
#[track_caller]
pub(crate) fn assert_turn_shape(turn: &Value) {
    assert!(turn["response"].is_string(), "response is a string: {turn}");
    for key in ["conversation_id", "message_id"] {
        let id = turn[key]
            .as_str()
            .unwrap_or_else(|| panic!("{key} is a string: {turn}"));
        uuid::Uuid::parse_str(id).unwrap_or_else(|_| panic!("{key} is a uuid: {turn}"));
    }
    assert!(turn["tokens_used"].is_u64(), "tokens_used is an integer >= 0: {turn}");
    let calls = turn["chain_calls"]
        .as_array()
        .unwrap_or_else(|| panic!("chain_calls is an array: {turn}"));
    calls.iter().for_each(assert_chain_call_shape);
}

/// `{id, tool, args, result, error?, duration_ms}`.
#[track_caller]
pub(crate) fn assert_chain_call_shape(call: &Value) {
    let object = call
        .as_object()
        .unwrap_or_else(|| panic!("a chain call is an object: {call}"));
    assert!(call["id"].as_str().is_some_and(|s| !s.is_empty()), "id: {call}");
    assert!(call["tool"].as_str().is_some_and(|s| !s.is_empty()), "tool: {call}");
    assert!(call["args"].is_object(), "args is an object: {call}");
    assert!(object.contains_key("result"), "result is present: {call}");
    assert!(call["duration_ms"].is_u64(), "duration_ms is an integer: {call}");
    for key in object.keys() {
        assert!(
            ["id", "tool", "args", "result", "error", "duration_ms"].contains(&key.as_str()),
            "unexpected key {key} in a chain call: {call}"
        );
    }
}

/// The tools called in a turn, in order.
pub(crate) fn tools_of(turn: &Value) -> Vec<String> {
    turn["chain_calls"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|c| c["tool"].as_str().unwrap_or_default().to_string())
        .collect()
}

#[track_caller]
pub(crate) fn assert_contains(text: &Value, needle: &str) {
    let text = text.as_str().unwrap_or_else(|| panic!("a string: {text}"));
    assert!(text.contains(needle), "{needle:?} is missing from {text:?}");
}
