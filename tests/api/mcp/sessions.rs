//! The life of Streamable HTTP sessions under the configuration: the per-agent cap (`MCP_MAX_SESSIONS_PER_AGENT`
//! closes the least recently used), the idle timeout (`MCP_SESSION_IDLE_SECS`) and sessions turned off
//! (`MCP_HTTP_SESSIONS=false`: every request answered on its own in JSON).

use std::time::{Duration, Instant};

use reqwest::{Method, StatusCode};
use serde_json::{Value, json};

use super::*;
use crate::helpers::{TestResponse, spawn_app_with};

const BOTH: &str = "application/json, text/event-stream";

/// The `data:` payloads of an event-stream body, parsed.
fn sse_messages(text: &str) -> Vec<Value> {
    text.lines()
        .filter_map(|line| line.strip_prefix("data:"))
        .filter_map(|data| serde_json::from_str(data.trim()).ok())
        .collect()
}

fn initialize() -> Value {
    json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"protocolVersion": "2025-06-18",
        "capabilities": {}, "clientInfo": {"name": "raw", "version": "0"}}})
}

async fn post(app: &TestApp, token: &str, session: Option<&str>, body: Value) -> TestResponse {
    let mut builder = app
        .build(Method::POST, "/mcp", Some(token), Some(body))
        .header("accept", BOTH);
    if let Some(id) = session {
        builder = builder.header("mcp-session-id", id);
    }
    app.send(builder).await
}

/// Opens a session (initialize, then the `initialized` notification) and returns its id.
async fn open(app: &TestApp, token: &str) -> String {
    let opened = post(app, token, None, initialize()).await;
    assert_eq!(opened.status, StatusCode::OK, "{}", opened.text);
    let id = opened
        .headers
        .get("mcp-session-id")
        .expect("a session id")
        .to_str()
        .unwrap()
        .to_string();
    let initialized = json!({"jsonrpc": "2.0", "method": "notifications/initialized"});
    let accepted = post(app, token, Some(&id), initialized).await;
    assert_eq!(accepted.status, StatusCode::ACCEPTED, "{}", accepted.text);
    id
}

async fn list(app: &TestApp, token: &str, session: &str) -> TestResponse {
    post(
        app,
        token,
        Some(session),
        json!({"jsonrpc": "2.0", "id": 2, "method": "tools/list"}),
    )
    .await
}

/// The session answers `tools/list`.
async fn assert_open(app: &TestApp, token: &str, session: &str) {
    let listed = list(app, token, session).await;
    assert_eq!(listed.status, StatusCode::OK, "session {session}: {}", listed.text);
    let reply = sse_messages(&listed.text)
        .into_iter()
        .find(|m| m["id"] == 2)
        .unwrap_or_else(|| panic!("no reply on session {session}: {}", listed.text));
    assert!(reply["result"]["tools"].is_array(), "{reply}");
}

/// The session is refused as the MCP spec asks for an unknown or expired one: 404, here with a JSON-RPC error body.
async fn assert_closed(app: &TestApp, token: &str, session: &str) {
    let refused = list(app, token, session).await;
    assert_rpc_error(&refused, StatusCode::NOT_FOUND, -32600, "session_not_found");
}

#[tokio::test]
async fn beyond_the_cap_the_least_recently_used_session_of_the_agent_is_closed() {
    let app = spawn_app_with(&[("MCP_MAX_SESSIONS_PER_AGENT", "2")]).await;
    let agent = app
        .create_agent_ok(json!({"name": "capped", "chains": ["base"], "capabilities": ["read"]}))
        .await;
    let neighbour = app
        .create_agent_ok(json!({"name": "neighbour", "chains": ["base"], "capabilities": ["read"]}))
        .await;
    // The other agent holds as many as it may.
    let theirs = [open(&app, &neighbour.token).await, open(&app, &neighbour.token).await];

    let first = open(&app, &agent.token).await;
    let second = open(&app, &agent.token).await;
    // The first is used after the second was opened: the second is now the least recently used.
    assert_open(&app, &agent.token, &first).await;
    let third = open(&app, &agent.token).await;

    assert_closed(&app, &agent.token, &second).await;
    assert_open(&app, &agent.token, &first).await;
    assert_open(&app, &agent.token, &third).await;
    for session in &theirs {
        assert_open(&app, &neighbour.token, session).await;
    }
    // A fourth closes the least recently used again (the first, used before the third was).
    let fourth = open(&app, &agent.token).await;
    assert_closed(&app, &agent.token, &first).await;
    assert_open(&app, &agent.token, &third).await;
    assert_open(&app, &agent.token, &fourth).await;
}

#[tokio::test]
async fn a_session_left_idle_longer_than_the_timeout_is_closed() {
    let app = spawn_app_with(&[("MCP_SESSION_IDLE_SECS", "1")]).await;
    let agent = app
        .create_agent_ok(json!({"name": "idle", "chains": ["base"], "capabilities": ["read"]}))
        .await;
    let session = open(&app, &agent.token).await;
    assert_open(&app, &agent.token, &session).await;

    // Every request on the session counts as use, so it is not polled: its server stream (GET) stays open while
    // the session lives and ends when the session is closed.
    let started = Instant::now();
    let mut stream = app
        .build(Method::GET, "/mcp", Some(&agent.token), None)
        .header("accept", "text/event-stream")
        .header("mcp-session-id", &session)
        .send()
        .await
        .expect("the server stream opens");
    assert_eq!(stream.status(), StatusCode::OK);
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    loop {
        match tokio::time::timeout_at(deadline, stream.chunk()).await {
            Ok(Ok(Some(_))) => continue,
            Ok(Ok(None) | Err(_)) => break,
            Err(_) => panic!("the idle session was still open after 10 s"),
        }
    }
    assert!(
        started.elapsed() >= Duration::from_millis(900),
        "closed for idleness, not at once: {:?}",
        started.elapsed()
    );
    assert_closed(&app, &agent.token, &session).await;
    // The agent opens a new one.
    let again = open(&app, &agent.token).await;
    assert_open(&app, &agent.token, &again).await;
}

#[tokio::test]
async fn with_sessions_off_every_request_is_answered_on_its_own_in_json() {
    let app = spawn_app_with(&[("MCP_HTTP_SESSIONS", "false")]).await;
    let agent = app
        .create_agent_ok(json!({"name": "stateless", "chains": ["base"], "capabilities": ["read", "analytics"]}))
        .await;
    let is_json = |response: &TestResponse| {
        response
            .headers
            .get("content-type")
            .and_then(|v| v.to_str().ok())
            .is_some_and(|v| v.starts_with("application/json"))
    };

    // A client that accepts event streams too (as the SDKs do) still gets JSON and no session.
    let initialized = post(&app, &agent.token, None, initialize()).await;
    assert_eq!(initialized.status, StatusCode::OK, "{}", initialized.text);
    assert!(initialized.headers.get("mcp-session-id").is_none(), "no session");
    assert!(is_json(&initialized), "{:?}", initialized.headers);
    assert_eq!(
        initialized.body["result"]["serverInfo"]["name"], "agentd",
        "{}",
        initialized.text
    );

    let note = json!({"jsonrpc": "2.0", "method": "notifications/initialized"});
    let accepted = post(&app, &agent.token, None, note).await;
    assert_eq!(accepted.status, StatusCode::ACCEPTED, "{}", accepted.text);

    let listed = post(
        &app,
        &agent.token,
        None,
        json!({"jsonrpc": "2.0", "id": 2, "method": "tools/list"}),
    )
    .await;
    assert_eq!(listed.status, StatusCode::OK, "{}", listed.text);
    assert!(is_json(&listed), "{:?}", listed.headers);
    assert!(listed.headers.get("mcp-session-id").is_none());
    let names: Vec<&str> = listed.body["result"]["tools"]
        .as_array()
        .unwrap_or_else(|| panic!("tools: {}", listed.text))
        .iter()
        .filter_map(|t| t["name"].as_str())
        .collect();
    assert!(names.contains(&"spending_summary"), "{names:?}");

    let call = json!({"jsonrpc": "2.0", "id": 3, "method": "tools/call",
        "params": {"name": "spending_summary", "arguments": {}}});
    let called = post(&app, &agent.token, None, call).await;
    assert_eq!(called.status, StatusCode::OK, "{}", called.text);
    assert!(is_json(&called), "{:?}", called.headers);
    assert_eq!(called.body["id"], 3, "{}", called.text);
    assert_eq!(called.body["result"]["isError"], false, "{}", called.text);
    let audit = mcp_audit(&app, &agent).await;
    assert_eq!(audit.len(), 1, "{audit:#?}");
    assert_eq!(audit[0]["transport"], "http");

    // No server stream and nothing to end without a session: 405 with a JSON-RPC body.
    for method in [Method::GET, Method::DELETE] {
        let refused = app
            .send(
                app.build(method.clone(), "/mcp", Some(&agent.token), None)
                    .header("accept", "text/event-stream"),
            )
            .await;
        assert_rpc_error(&refused, StatusCode::METHOD_NOT_ALLOWED, -32600, "method_not_allowed");
    }
    // A session id (from another instance, or from before sessions were turned off) is one this instance does
    // not hold: 404, and the client starts over without one.
    assert_closed(&app, &agent.token, "a-session-from-elsewhere").await;
}
