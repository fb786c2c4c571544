//! `/mcp` over Streamable HTTP: the official SDK client (sessions, SSE, stateless JSON) and raw requests.

use reqwest::{Method, StatusCode};
use serde_json::{Value, json};

use super::*;
use crate::anvil::Anvil;
use crate::helpers::chain::{BASE_CHAIN_ID, transfer_app, wallet, wei};
use crate::helpers::spawn_app;

#[tokio::test]
async fn post_mcp_serves_the_same_tools_over_http() {
    let anvil = Anvil::start(BASE_CHAIN_ID);
    let app = transfer_app(&anvil, &[]).await;
    let agent = app
        .create_agent_ok(json!({"name": "remote", "chains": ["base"], "capabilities": ["read", "compare"]}))
        .await;
    anvil.set_balance(wallet(&agent), wei(42)).await;
    let url = app.url("/mcp");

    let args = vec![
        "--url".to_string(),
        url.clone(),
        "--calls".to_string(),
        json!([{"name": "get_balance", "arguments": {"chain": "base"}}, {"name": "send_native", "arguments": {}}])
            .to_string(),
    ];
    let env = vec![("AGENTD_ACCESS_TOKEN".to_string(), agent.token.clone())];
    let (ok, out) = mcp_client(&app, args.clone(), env).await;
    assert!(ok, "the client ran over HTTP: {out:#}");
    assert_eq!(out["protocolVersion"], PROTOCOL_VERSION);
    assert!(
        tool(&out, "compare_gas").is_some() && tool(&out, "send_native").is_none(),
        "{out:#}"
    );
    assert_eq!(tool_ok(&out, 0)["wei"], "42");
    assert_eq!(tool_error_code(&out, 1), "capability_denied");
    let audit = mcp_audit(&app, &agent).await;
    assert_eq!(audit.len(), 2, "{audit:#?}");
    assert_eq!(audit[0]["transport"], "http");

    let bad = vec![("AGENTD_ACCESS_TOKEN".to_string(), format!("agt_{}", "B".repeat(43)))];
    let (ok, out) = mcp_client(&app, args, bad).await;
    assert!(!ok, "a bad token fails the client: {out:#}");

    let notification = json!({"jsonrpc": "2.0", "method": "notifications/initialized"});
    let response = app
        .send(app.build(Method::POST, "/mcp", Some(&agent.token), Some(notification.clone())))
        .await;
    assert_eq!(response.status, StatusCode::ACCEPTED);
    let (status, body) = app
        .request(Method::POST, "/mcp", None, Some(notification.clone()))
        .await;
    assert_eq!(status, StatusCode::UNAUTHORIZED, "{body}");
    assert_eq!(body["jsonrpc"], "2.0", "a JSON-RPC error body: {body}");
    assert_eq!(body["error"]["code"], -32001, "{body}");
    assert_eq!(body["error"]["data"]["code"], "missing_token", "{body}");
    let unknown = format!("agt_{}", "C".repeat(43));
    let (status, body) = app
        .request(Method::POST, "/mcp", Some(&unknown), Some(notification.clone()))
        .await;
    assert_eq!(status, StatusCode::UNAUTHORIZED, "{body}");
    assert_eq!(body["error"]["data"]["code"], "invalid_token", "{body}");
    app.request(
        Method::DELETE,
        &format!("/api/agents/{}", agent.id),
        Some(&agent.token),
        None,
    )
    .await;
    let (status, body) = app
        .request(Method::POST, "/mcp", Some(&agent.token), Some(notification))
        .await;
    assert_eq!(status, StatusCode::GONE, "{body}");
    assert_eq!(body["error"]["code"], -32001, "{body}");
    assert_eq!(body["error"]["data"]["code"], "agent_inactive", "{body}");
    let (status, body) = app.request(Method::GET, "/mcp", None, None).await;
    assert_eq!(status, StatusCode::UNAUTHORIZED, "{body}");
    assert_eq!(body["error"]["code"], -32001, "{body}");
}

#[tokio::test]
async fn a_batch_is_refused_whole_with_a_json_rpc_error() {
    let app = spawn_app().await;
    let agent = app
        .create_agent_ok(json!({"name": "batched", "chains": ["base"], "capabilities": ["read", "analytics"]}))
        .await;
    let call = |i: usize| {
        json!({"jsonrpc": "2.0", "id": i, "method": "tools/call",
            "params": {"name": "spending_summary", "arguments": {}}})
    };
    // MCP 2025-06-18 removed batches and rmcp reads none: the whole batch is refused, nothing of it runs.
    let (status, body) = app
        .request(
            Method::POST,
            "/mcp",
            Some(&agent.token),
            Some(json!([call(1), call(2)])),
        )
        .await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{body}");
    assert_eq!(body["error"]["code"], -32600, "{body}");
    assert_eq!(body["error"]["data"]["code"], "batch_not_supported", "{body}");
    assert!(mcp_audit(&app, &agent).await.is_empty(), "no call of the batch ran");

    // One message per request is answered (JSON, no session needed).
    let (status, body) = app
        .request(Method::POST, "/mcp", Some(&agent.token), Some(call(3)))
        .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(body["result"]["isError"], false, "{body}");
    let (status, body) = app
        .request(Method::POST, "/mcp", Some(&agent.token), Some(json!("{not json")))
        .await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{body}");
    assert_eq!(body["error"]["code"], -32600, "{body}");
}

#[tokio::test]
async fn estimating_a_transfer_of_an_amount_near_two_to_the_256_wei_is_refused_cleanly() {
    let anvil = Anvil::start(BASE_CHAIN_ID);
    let app = transfer_app(&anvil, &[]).await;
    let agent = app
        .create_agent_ok(json!({"name": "estimator", "chains": ["base"], "capabilities": ["read", "compare"]}))
        .await;
    let estimate = |amount: &str| {
        json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call",
            "params": {"name": "estimate_transfer_cost", "arguments": {"chain": "base", "amount": amount}}})
    };
    // U256::MAX wei in ETH: the fee on top of it overflows 256 bits.
    let huge = "115792089237316195423570985008687907853269984665640564039457.584007913129639935";
    let (status, body) = app
        .request(Method::POST, "/mcp", Some(&agent.token), Some(estimate(huge)))
        .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(body["result"]["isError"], true, "{body}");
    let text = body["result"]["content"][0]["text"].as_str().unwrap_or_default();
    let refusal: Value = serde_json::from_str(text).unwrap_or_else(|_| panic!("a JSON refusal: {body}"));
    assert_eq!(refusal["error"]["code"], "invalid_arguments", "{refusal}");

    let (status, body) = app
        .request(Method::POST, "/mcp", Some(&agent.token), Some(estimate("0.5")))
        .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(body["result"]["isError"], false, "the service goes on: {body}");
}

/// The `data:` payloads of an event-stream body, parsed.
fn sse_messages(body: &Value) -> Vec<Value> {
    body.as_str()
        .unwrap_or_else(|| panic!("an event stream: {body}"))
        .lines()
        .filter_map(|line| line.strip_prefix("data:"))
        .filter_map(|data| serde_json::from_str(data.trim()).ok())
        .collect()
}

const BOTH: &str = "application/json, text/event-stream";

#[tokio::test]
async fn sessions_answer_in_event_streams_and_belong_to_their_agent() {
    let app = spawn_app().await;
    let agent = app
        .create_agent_ok(json!({"name": "sessions", "chains": ["base"], "capabilities": ["read", "transact"]}))
        .await;
    let other = app.create_default_agent().await;
    let post = |token: &str, session: Option<&str>, body: Value| {
        let mut builder = app
            .build(Method::POST, "/mcp", Some(token), Some(body))
            .header("accept", BOTH);
        if let Some(id) = session {
            builder = builder.header("mcp-session-id", id);
        }
        builder
    };
    let init = json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"protocolVersion": "2025-06-18",
        "capabilities": {}, "clientInfo": {"name": "raw", "version": "0"}}});
    let opened = app.send(post(&agent.token, None, init.clone())).await;
    assert_eq!(opened.status, StatusCode::OK, "{:?}", opened.body);
    assert!(
        opened.headers["content-type"]
            .to_str()
            .unwrap()
            .starts_with("text/event-stream"),
        "a client that accepts event streams gets one"
    );
    let session = opened.headers["mcp-session-id"]
        .to_str()
        .expect("a session id")
        .to_string();
    let reply = sse_messages(&opened.body)
        .into_iter()
        .find(|m| m["id"] == 1)
        .expect("the reply");
    assert_eq!(reply["result"]["protocolVersion"], "2025-06-18", "{reply}");

    let initialized = json!({"jsonrpc": "2.0", "method": "notifications/initialized"});
    let accepted = app.send(post(&agent.token, Some(&session), initialized)).await;
    assert_eq!(accepted.status, StatusCode::ACCEPTED);
    let list = json!({"jsonrpc": "2.0", "id": 2, "method": "tools/list"});
    let listed = app.send(post(&agent.token, Some(&session), list.clone())).await;
    assert_eq!(listed.status, StatusCode::OK);
    let tools = sse_messages(&listed.body)
        .into_iter()
        .find(|m| m["id"] == 2)
        .expect("the list");
    // Whatever the registry offers for these capabilities, each tool says whether it only reads and, when not,
    // whether it destroys (moves funds) or only adds (create_offer puts something up for sale).
    for tool in tools["result"]["tools"].as_array().expect("tools") {
        let hints = &tool["annotations"];
        assert!(
            hints["readOnlyHint"] == true || hints["destructiveHint"].is_boolean(),
            "{tool}"
        );
        assert_eq!(
            hints["destructiveHint"] == false,
            tool["name"] == "create_offer",
            "{tool}"
        );
        assert_eq!(tool["inputSchema"]["type"], "object", "{tool}");
    }
    assert!(
        tools["result"]["tools"]
            .as_array()
            .unwrap()
            .iter()
            .any(|t| t["name"] == "send_native")
    );

    // An unknown session id, or another agent's token on this session: 404, so a client starts a new session.
    for (token, id) in [(&agent.token, "no-such-session"), (&other.token, session.as_str())] {
        let refused = app.send(post(token, Some(id), list.clone())).await;
        assert_eq!(refused.status, StatusCode::NOT_FOUND, "{:?}", refused.body);
        assert_eq!(
            refused.body["error"]["data"]["code"], "session_not_found",
            "{:?}",
            refused.body
        );
    }
    // The client ends its session; the id is then unknown.
    let ended = app
        .send(
            app.build(Method::DELETE, "/mcp", Some(&agent.token), None)
                .header("mcp-session-id", &session),
        )
        .await;
    assert!(ended.status.is_success(), "{:?}", ended.status);
    let gone = app.send(post(&agent.token, Some(&session), list)).await;
    assert_eq!(gone.status, StatusCode::NOT_FOUND);

    // A client that takes JSON only is answered on its own, without a session: any instance can answer it.
    let json_only = app
        .send(
            app.build(Method::POST, "/mcp", Some(&agent.token), Some(init))
                .header("accept", "application/json"),
        )
        .await;
    assert_eq!(json_only.status, StatusCode::OK);
    assert!(json_only.headers.get("mcp-session-id").is_none(), "no session");
    assert_eq!(
        json_only.body["result"]["serverInfo"]["name"], "agentd",
        "{:?}",
        json_only.body
    );
}

#[tokio::test]
async fn a_deleted_agent_ends_an_open_session_with_a_json_rpc_error() {
    let app = spawn_app().await;
    let agent = app
        .create_agent_ok(json!({"name": "reissued", "chains": ["base"], "capabilities": ["read"]}))
        .await;
    let init = json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"protocolVersion": "2025-06-18",
        "capabilities": {}, "clientInfo": {"name": "raw", "version": "0"}}});
    let opened = app
        .send(
            app.build(Method::POST, "/mcp", Some(&agent.token), Some(init))
                .header("accept", BOTH),
        )
        .await;
    let session = opened.headers["mcp-session-id"].to_str().unwrap().to_string();
    app.delete_agent(&agent.id, &agent.token).await;
    let call = json!({"jsonrpc": "2.0", "id": 2, "method": "tools/list"});
    let refused = app
        .send(
            app.build(Method::POST, "/mcp", Some(&agent.token), Some(call))
                .header("accept", BOTH)
                .header("mcp-session-id", &session),
        )
        .await;
    assert_rpc_error(&refused, StatusCode::GONE, -32001, "agent_inactive");
}
