//! `POST /api/chat/stream` (docs/api.md §6): event order, text deltas adding up to `final.response`, plain HTTP errors
//! before `start`, an `error` event after it, turns completed when the client leaves, and keepalive comments.

use std::time::{Duration, Instant};

use alloy::primitives::U256;
use reqwest::{Method, StatusCode};
use serde_json::{Value, json};

use crate::anvil::Anvil;
use crate::helpers::chat::{ALL_CAPABILITIES, BASE_ID, address, agent_with, assert_chain_call_shape, two_chains};
use crate::helpers::llm_server::{LlmServer, Reply};
use crate::helpers::sse::{SseItem, SseStream};
use crate::helpers::{CreatedAgent, TOKEN_HEADER, TestApp, assert_error, spawn_app_with};

/// Starts a stream, insisting on a 200 `text/event-stream`.
pub(crate) async fn open_stream(app: &TestApp, agent: &CreatedAgent, body: Value) -> SseStream {
    SseStream::open(app.build(Method::POST, "/api/chat/stream", Some(&agent.token), Some(body))).await
}

/// Streams one turn of `body` to its end; every event as `(name, data)`, each within 30 s of the previous one.
pub(crate) async fn stream_events(app: &TestApp, agent: &CreatedAgent, body: Value) -> Vec<(String, Value)> {
    let mut stream = open_stream(app, agent, body).await;
    stream.json_events(Duration::from_secs(30)).await
}

pub(crate) async fn stream_turn(app: &TestApp, agent: &CreatedAgent, message: &str) -> Vec<(String, Value)> {
    stream_events(app, agent, json!({"agent_id": agent.id, "message": message})).await
}

/// Checks `start (tool_call tool_result)* text_delta+ final` and the consistency of the events with `final`;
/// returns `final`'s data.
#[track_caller]
pub(crate) fn assert_complete_stream(events: &[(String, Value)]) -> Value {
    let names: Vec<&str> = events.iter().map(|(n, _)| n.as_str()).collect();
    assert_eq!(names.first(), Some(&"start"), "{names:?}");
    assert_eq!(names.last(), Some(&"final"), "{names:?}");
    let middle = &names[1..names.len() - 1];
    let tools_end = middle.iter().position(|n| *n == "text_delta").unwrap_or(middle.len());
    let (tools, texts) = middle.split_at(tools_end);
    assert!(tools.len() % 2 == 0, "tool calls and results come in pairs: {names:?}");
    for pair in tools.chunks(2) {
        assert_eq!(pair, ["tool_call", "tool_result"], "{names:?}");
    }
    assert!(!texts.is_empty(), "at least one text_delta: {names:?}");
    assert!(texts.iter().all(|n| *n == "text_delta"), "{names:?}");

    let final_data = events.last().unwrap().1.clone();
    crate::helpers::chat::assert_turn_shape(&final_data);
    assert_eq!(
        events[0].1["conversation_id"], final_data["conversation_id"],
        "start and final name the same conversation"
    );
    let text: String = events
        .iter()
        .filter(|(n, _)| n == "text_delta")
        .map(|(_, d)| d["text"].as_str().expect("text_delta carries text"))
        .collect();
    assert_eq!(
        text,
        final_data["response"].as_str().unwrap(),
        "text deltas add up to the response"
    );

    // Each tool_call/tool_result pair is the chain call of `final` at the same position.
    let calls = final_data["chain_calls"].as_array().unwrap();
    assert_eq!(calls.len() * 2, tools.len(), "{final_data}");
    for (i, call) in calls.iter().enumerate() {
        let (_, tool_call) = &events[1 + 2 * i];
        let (_, tool_result) = &events[2 + 2 * i];
        assert_chain_call_shape(call);
        assert_eq!(tool_call["id"], call["id"], "{tool_call} vs {call}");
        assert_eq!(tool_call["tool"], call["tool"]);
        assert_eq!(tool_call["args"], call["args"]);
        assert_eq!(tool_result["id"], call["id"], "{tool_result} vs {call}");
        assert_eq!(tool_result["tool"], call["tool"]);
        match call.get("error").filter(|e| !e.is_null()) {
            Some(error) => assert_eq!(&tool_result["error"], error, "{tool_result}"),
            None => assert_eq!(tool_result["result"], call["result"], "{tool_result}"),
        }
    }
    final_data
}

#[tokio::test]
async fn a_streamed_turn_sends_start_tools_text_and_final_in_order() {
    let env = two_chains(&[], &[]).await;
    let agent = agent_with(&env.app, "Streamer", ALL_CAPABILITIES).await;
    let wallet = address(&agent, "base");
    env.base
        .set_balance(wallet, U256::from(3_141_592_653_589_793_238u128))
        .await;

    let events = stream_turn(&env.app, &agent, "what is my balance on base").await;

    let final_data = assert_complete_stream(&events);
    let calls = final_data["chain_calls"].as_array().unwrap();
    assert_eq!(calls.len(), 1, "{final_data}");
    assert_eq!(calls[0]["tool"], "get_balance");
    assert_eq!(calls[0]["result"]["wei"], "3141592653589793238");
    assert!(
        final_data["response"]
            .as_str()
            .unwrap()
            .contains("3.141592653589793238 ETH")
    );
    assert!(final_data["tokens_used"].as_u64().unwrap() > 0);
    let deltas = events.iter().filter(|(n, _)| n == "text_delta").count();
    assert!(deltas > 1, "the text comes in pieces: {events:?}");

    // The stored turn is the streamed one.
    let conversation = final_data["conversation_id"].as_str().unwrap();
    let messages = env.app.messages(&agent, conversation).await;
    assert_eq!(messages.len(), 2, "{messages:?}");
    assert_eq!(messages[1]["id"], final_data["message_id"]);
    assert_eq!(messages[1]["content"], final_data["response"]);
    assert_eq!(messages[1]["chain_calls"], final_data["chain_calls"]);
}

#[tokio::test]
async fn several_tool_calls_stream_as_pairs_before_the_text() {
    let env = two_chains(&["--base-fee", "3000000000"], &["--base-fee", "9000000000"]).await;
    let agent = agent_with(&env.app, "Reader", &["read"]).await;

    // Without `compare`, the builtin engine reads each chain's gas price with `read` tools.
    let events = stream_turn(&env.app, &agent, "gas price on base and on ethereum").await;

    let final_data = assert_complete_stream(&events);
    let calls = final_data["chain_calls"].as_array().unwrap();
    assert_eq!(calls.len(), 2, "{final_data}");
    let fees: Vec<(&str, &str)> = calls
        .iter()
        .map(|c| {
            (
                c["args"]["chain"].as_str().unwrap(),
                c["result"]["base_fee_gwei"].as_str().unwrap(),
            )
        })
        .collect();
    assert!(fees.contains(&("base", "3")), "{fees:?}");
    assert!(fees.contains(&("ethereum", "9")), "{fees:?}");
    // A second streamed turn in the same conversation.
    let conversation = final_data["conversation_id"].as_str().unwrap();
    let events = stream_events(
        &env.app,
        &agent,
        json!({"agent_id": agent.id, "message": "latest block on base", "conversation_id": conversation}),
    )
    .await;
    let second = assert_complete_stream(&events);
    assert_eq!(second["conversation_id"], conversation);
}

#[tokio::test]
async fn errors_before_start_are_plain_http_errors() {
    let env = two_chains(&[], &[]).await;
    let agent = agent_with(&env.app, "Strict", &["read"]).await;
    let other = agent_with(&env.app, "Other", &["read"]).await;
    let theirs = crate::helpers::chat::chat(&env.app, &other, "hello").await;
    let their_conversation = theirs["conversation_id"].as_str().unwrap();

    let cases: Vec<(Option<&str>, Value, StatusCode, &str)> = vec![
        (
            None,
            json!({"agent_id": agent.id, "message": "hi"}),
            StatusCode::UNAUTHORIZED,
            "missing_token",
        ),
        (
            Some(&other.token),
            json!({"agent_id": agent.id, "message": "hi"}),
            StatusCode::FORBIDDEN,
            "forbidden",
        ),
        (
            Some(&agent.token),
            json!({"agent_id": uuid::Uuid::new_v4(), "message": "hi"}),
            StatusCode::NOT_FOUND,
            "agent_not_found",
        ),
        (
            Some(&agent.token),
            json!({"agent_id": agent.id, "message": "hi", "conversation_id": uuid::Uuid::new_v4()}),
            StatusCode::NOT_FOUND,
            "conversation_not_found",
        ),
        (
            Some(&agent.token),
            json!({"agent_id": agent.id, "message": "hi", "conversation_id": their_conversation}),
            StatusCode::FORBIDDEN,
            "forbidden",
        ),
        (
            Some(&agent.token),
            json!({"agent_id": agent.id, "message": ""}),
            StatusCode::UNPROCESSABLE_ENTITY,
            "validation_failed",
        ),
        (
            Some(&agent.token),
            json!({"agent_id": agent.id, "message": "x".repeat(8001)}),
            StatusCode::UNPROCESSABLE_ENTITY,
            "validation_failed",
        ),
        (
            Some(&agent.token),
            json!({"agent_id": agent.id, "message": "hi", "connected_wallet_address": "0xnope"}),
            StatusCode::UNPROCESSABLE_ENTITY,
            "validation_failed",
        ),
    ];
    for (token, body, status, code) in cases {
        let response = env
            .app
            .send(
                env.app
                    .build(Method::POST, "/api/chat/stream", token, Some(body.clone())),
            )
            .await;
        let content_type = response
            .headers
            .get(reqwest::header::CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .unwrap_or_default();
        assert!(
            content_type.starts_with("application/json"),
            "{body}: a JSON error, not a stream ({content_type}): {}",
            response.text
        );
        assert_error(&(response.status, response.body), status, code);
    }
    // Malformed JSON is a plain 400 too.
    let response = env
        .app
        .client
        .post(env.app.url("/api/chat/stream"))
        .header(TOKEN_HEADER, &agent.token)
        .header(reqwest::header::CONTENT_TYPE, "application/json")
        .body("{\"agent_id\": ")
        .send()
        .await
        .unwrap();
    let status = response.status();
    let body: Value = serde_json::from_str(&response.text().await.unwrap()).expect("a JSON error body");
    assert_error(&(status, body), StatusCode::BAD_REQUEST, "invalid_json");
    // None of these wrote anything: the other agent still has its one conversation of two messages.
    let messages = env.app.messages(&other, their_conversation).await;
    assert_eq!(messages.len(), 2);

    let (_, _) = env.app.delete_agent(&agent.id, &agent.token).await;
    let gone = env
        .app
        .send(env.app.build(
            Method::POST,
            "/api/chat/stream",
            Some(&agent.token),
            Some(json!({"agent_id": agent.id, "message": "hi"})),
        ))
        .await;
    assert_error(&(gone.status, gone.body), StatusCode::GONE, "agent_inactive");
}

/// An app using the scripted OpenAI-compatible server, with a base node.
async fn openai_app(llm: &LlmServer, base: &Anvil, timeout_ms: &str) -> TestApp {
    let mut vars = llm.app_vars("sk-test-stream");
    vars.extend([("LLM_TIMEOUT_MS", timeout_ms), ("RPC_URL_BASE", base.url())]);
    spawn_app_with(&vars).await
}

#[tokio::test]
async fn an_upstream_failure_after_start_is_an_error_event_and_the_turn_is_recorded() {
    let base = Anvil::start(BASE_ID);
    let llm = LlmServer::start(vec![Reply::error(500, "server_error", "the model crashed")]).await;
    let app = openai_app(&llm, &base, "5000").await;
    let agent = agent_with(&app, "Fragile", &["read"]).await;

    let events = stream_turn(&app, &agent, "what is my balance on base").await;

    let names: Vec<&str> = events.iter().map(|(n, _)| n.as_str()).collect();
    assert_eq!(names, ["start", "error"], "{events:?}");
    let error = &events[1].1;
    let code = error["code"].as_str().unwrap();
    assert!(code.starts_with("upstream_"), "{error}");
    assert!(error["message"].as_str().is_some_and(|m| !m.is_empty()), "{error}");
    assert_eq!(llm.requests().len(), 1);

    // The conversation holds the user message and an assistant message recording the error.
    let conversation = events[0].1["conversation_id"].as_str().unwrap();
    let messages = app.messages(&agent, conversation).await;
    assert_eq!(messages.len(), 2, "{messages:?}");
    assert_eq!(messages[0]["role"], "user");
    assert_eq!(messages[0]["content"], "what is my balance on base");
    assert_eq!(messages[1]["role"], "assistant");
    let content = messages[1]["content"].as_str().unwrap().to_lowercase();
    assert!(
        content.contains("error"),
        "the assistant message records the error: {content}"
    );
}

#[tokio::test]
async fn a_client_that_leaves_after_start_still_leaves_a_complete_turn() {
    let base = Anvil::start(BASE_ID);
    // The model takes a moment before each answer, so the client is long gone when the turn ends.
    let llm = LlmServer::start(vec![
        Reply::tool_call("call_1", "get_balance", &["{\"chain\":", "\"base\"}"], 10, 5)
            .after(Duration::from_millis(300)),
        Reply::text(&["You hold ", "5 wei."], 20, 4).after(Duration::from_millis(300)),
    ])
    .await;
    let app = openai_app(&llm, &base, "5000").await;
    let agent = agent_with(&app, "Patient", &["read"]).await;
    base.set_balance(address(&agent, "base"), U256::from(5u64)).await;

    let mut reader = open_stream(
        &app,
        &agent,
        json!({"agent_id": agent.id, "message": "balance on base?"}),
    )
    .await;
    let conversation = match reader.next_item(Duration::from_secs(10)).await {
        Some(SseItem::Event(start)) if start.event == "start" => {
            start.json()["conversation_id"].as_str().unwrap().to_string()
        }
        other => panic!("the stream begins with start: {other:?}"),
    };
    drop(reader);

    let deadline = Instant::now() + Duration::from_secs(15);
    let messages = loop {
        let messages = app.messages(&agent, &conversation).await;
        if messages.len() >= 2 {
            break messages;
        }
        assert!(Instant::now() < deadline, "the turn was not completed: {messages:?}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    assert_eq!(messages.len(), 2, "{messages:?}");
    assert_eq!(messages[1]["role"], "assistant");
    assert_eq!(messages[1]["content"], "You hold 5 wei.");
    let calls = messages[1]["chain_calls"].as_array().unwrap();
    assert_eq!(calls.len(), 1, "{messages:?}");
    assert_eq!(calls[0]["tool"], "get_balance");
    assert_eq!(calls[0]["result"]["wei"], "5");
    assert_eq!(llm.requests().len(), 2, "both model calls happened");
}

#[tokio::test]
async fn keepalive_comments_flow_while_the_model_is_silent() {
    let base = Anvil::start(BASE_ID);
    // Silent for longer than the keepalive interval (10 s in the service; the contract allows up to 15 s).
    let llm = LlmServer::start(vec![
        Reply::text(&["Finally."], 3, 1).after(Duration::from_millis(10_500)),
    ])
    .await;
    let app = openai_app(&llm, &base, "30000").await;
    let agent = agent_with(&app, "Slow", &["read"]).await;

    let started = Instant::now();
    let mut reader = open_stream(&app, &agent, json!({"agent_id": agent.id, "message": "hello"})).await;
    let mut items = Vec::new();
    while let Some(item) = reader.next_item(Duration::from_secs(16)).await {
        items.push(item);
    }
    let kinds: Vec<String> = items
        .iter()
        .map(|i| match i {
            SseItem::Event(event) => {
                event.json(); // every event's data is JSON
                event.event.clone()
            }
            SseItem::Comment(text) => format!(": {text}"),
        })
        .collect();
    let first_comment = kinds.iter().position(|k| k.starts_with(':'));
    let first_text = kinds.iter().position(|k| k == "text_delta");
    assert!(
        matches!((first_comment, first_text), (Some(c), Some(t)) if c < t),
        "a keepalive comment comes while the model is silent: {kinds:?}"
    );
    assert_eq!(kinds.first().map(String::as_str), Some("start"), "{kinds:?}");
    assert_eq!(kinds.last().map(String::as_str), Some("final"), "{kinds:?}");
    assert!(started.elapsed() < Duration::from_secs(15), "{:?}", started.elapsed());
}

#[tokio::test]
async fn a_streamed_turn_whose_model_never_finishes_ends_at_the_turn_deadline() {
    // Each piece arrives well within LLM_TIMEOUT_MS, but the whole answer would take 60 s.
    let llm = LlmServer::start(vec![Reply::Trickle {
        pieces: 240,
        every: Duration::from_millis(250),
    }])
    .await;
    let mut vars = llm.app_vars("sk-test-trickle");
    vars.extend([("LLM_TIMEOUT_MS", "1000"), ("LLM_TURN_TIMEOUT_MS", "2000")]);
    let app = spawn_app_with(&vars).await;
    let agent = agent_with(&app, "Patient", &["read"]).await;

    let started = Instant::now();
    let mut stream = open_stream(
        &app,
        &agent,
        json!({"agent_id": agent.id, "message": "tell me a long story"}),
    )
    .await;
    let events = stream.json_events(Duration::from_secs(20)).await;

    assert!(
        started.elapsed() < Duration::from_secs(15),
        "the stream outlived LLM_TURN_TIMEOUT_MS: {:?}",
        started.elapsed()
    );
    let names: Vec<&str> = events.iter().map(|(n, _)| n.as_str()).collect();
    assert_eq!(names.first(), Some(&"start"), "{names:?}");
    assert_eq!(names.last(), Some(&"error"), "{names:?}");
    assert_eq!(events.last().unwrap().1["code"], "upstream_timeout", "{events:?}");
    let conversation = events[0].1["conversation_id"].as_str().unwrap();
    let messages = app.messages(&agent, conversation).await;
    assert_eq!(messages.len(), 2, "the turn is recorded: {messages:?}");
}
