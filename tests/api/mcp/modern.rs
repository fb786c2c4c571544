//! MCP 2026-07-28 beside the earlier revisions on `POST /mcp` (docs/api.md §17), driven by the official MCP Python
//! SDK 2.x (`tests/api/mcp/modern_client.py`, venv of `scripts/install.sh mcp-python`): the client picks the
//! revision through `server/discover`, lists and calls without a session against two instances on one database in
//! turn (as behind a round-robin load balancer), and follows a transfer held for approval as a task of the Tasks
//! extension until the owner approves it through the API. The edges (another agent's task, URL-mode elicitation, a
//! rejected task, a client without tasks, a browser origin) are checked with raw requests.

use std::path::PathBuf;
use std::process::Command;
use std::time::Duration;

use reqwest::{Method, StatusCode};
use serde_json::{Value, json};

use super::*;
use crate::anvil::Anvil;
use crate::helpers::chain::{BASE_CHAIN_ID, CENT_ETH, fresh_address, funded_agent, transfer_app, wallet, wei};
use crate::helpers::{CreatedAgent, TestApp, TestResponse};
use crate::money::policy::{ADMIN, admin_app, call as api_call, set_policy};

pub(super) const MODERN: &str = "2026-07-28";
const TASKS: &str = "io.modelcontextprotocol/tasks";

fn python() -> PathBuf {
    let home = std::env::var("HOME").expect("HOME is set");
    let python = PathBuf::from(home).join(".cache/agentd-mcp-python-venv/bin/python");
    assert!(
        python.exists(),
        "the MCP Python SDK is not installed: run `scripts/install.sh mcp-python` first"
    );
    python
}

/// Runs the Python SDK client with `spec` (its urls, token, calls, tasks) and returns what it printed.
pub(super) async fn modern_client(spec: Value) -> Value {
    let output = tokio::task::spawn_blocking(move || {
        Command::new(python())
            .arg(repo_path("tests/api/mcp/modern_client.py"))
            .arg(spec.to_string())
            .output()
            .expect("run the Python client")
    })
    .await
    .expect("the client thread");
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "the client ran:\n{stdout}\n{stderr}");
    serde_json::from_str(stdout.lines().last().unwrap_or_default())
        .unwrap_or_else(|e| panic!("the client printed no JSON ({e}):\n{stdout}\n{stderr}"))
}

/// A second instance on the first one's database (PostgreSQL with `TEST_POSTGRES_URL`, else the same SQLite file),
/// node and admin token.
async fn second_instance(first: &TestApp, anvil: &Anvil) -> TestApp {
    transfer_app(anvil, &[("DATABASE_URL", &first.db_url), ("ADMIN_TOKEN", ADMIN)]).await
}

/// A raw 2026-07-28 request: `_meta` with the version and `capabilities`, the standard headers.
async fn raw(
    app: &TestApp,
    token: &str,
    method: &str,
    name: Option<&str>,
    params: Value,
    capabilities: Value,
) -> TestResponse {
    let mut params = params;
    params["_meta"] = json!({
        "io.modelcontextprotocol/protocolVersion": MODERN,
        "io.modelcontextprotocol/clientCapabilities": capabilities,
    });
    let body = json!({"jsonrpc": "2.0", "id": 1, "method": method, "params": params});
    let mut builder = app
        .client
        .post(app.url("/mcp"))
        .header("X-Agent-Access-Token", token)
        .header("Accept", "application/json, text/event-stream")
        .header("MCP-Protocol-Version", MODERN)
        .header("Mcp-Method", method)
        .json(&body);
    if let Some(name) = name {
        builder = builder.header("Mcp-Name", name);
    }
    app.send(builder).await
}

/// `tasks/get` sent with a `Host` header of the sender's choosing.
async fn task_get_as_host(app: &TestApp, token: &str, task_id: &str, capabilities: Value, host: &str) -> TestResponse {
    let mut params = json!({"taskId": task_id});
    params["_meta"] = json!({
        "io.modelcontextprotocol/protocolVersion": MODERN,
        "io.modelcontextprotocol/clientCapabilities": capabilities,
    });
    let body = json!({"jsonrpc": "2.0", "id": 1, "method": "tasks/get", "params": params});
    let builder = app
        .client
        .post(app.url("/mcp"))
        .header("Host", host)
        .header("X-Agent-Access-Token", token)
        .header("Accept", "application/json, text/event-stream")
        .header("MCP-Protocol-Version", MODERN)
        .header("Mcp-Method", "tasks/get")
        .header("Mcp-Name", task_id)
        .json(&body);
    app.send(builder).await
}

async fn task_get(app: &TestApp, token: &str, task_id: &str, capabilities: Value) -> TestResponse {
    raw(
        app,
        token,
        "tasks/get",
        Some(task_id),
        json!({"taskId": task_id}),
        capabilities,
    )
    .await
}

/// The one transfer of `agent` waiting for approval, once there is one.
async fn waiting_transfer(app: &TestApp, agent: &CreatedAgent) -> String {
    let list = format!("/api/agents/{}/approvals", agent.id);
    for _ in 0..300 {
        let (status, waiting) = api_call(app, agent, false, Method::GET, &list, None).await;
        assert_eq!(status, StatusCode::OK, "{waiting}");
        if let Some(id) = waiting[0]["transfer_id"].as_str() {
            return id.to_string();
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    panic!("no transfer waits for approval");
}

async fn approving_agent(app: &TestApp, anvil: &Anvil) -> CreatedAgent {
    let agent = funded_agent(app, anvil, Some(0.5)).await;
    let policy = json!({"limits": {"base:ETH": {"approval_above": "0.005"}}, "approval_ttl_secs": 900});
    set_policy(app, &agent, policy).await;
    agent
}

fn send_call(to: &str, amount: &str) -> Value {
    json!({"name": "send_native", "arguments": {"chain": "base", "to": to, "amount": amount}})
}

#[tokio::test]
async fn a_2026_client_discovers_lists_and_calls_without_a_session_on_two_instances_in_turn() {
    let anvil = Anvil::start(BASE_CHAIN_ID);
    let first = admin_app(&anvil).await;
    let second = second_instance(&first, &anvil).await;
    let agent = funded_agent(&first, &anvil, Some(0.5)).await;
    let to = fresh_address();

    let out = modern_client(json!({
        "urls": [first.url("/mcp"), second.url("/mcp")],
        "token": agent.token,
        "calls": [
            {"name": "get_block_number", "arguments": {"chain": "base"}},
            send_call(&to.to_string(), "0.001"),
            {"name": "get_balance", "arguments": {"chain": "base", "address": to.to_string()}},
        ],
    }))
    .await;

    assert_eq!(out["protocol_version"], MODERN, "the SDK chose 2026-07-28: {out:#}");
    let discover = &out["discover"];
    let versions = discover["supportedVersions"].as_array().expect("supportedVersions");
    for version in [MODERN, PROTOCOL_VERSION, "2025-06-18"] {
        assert!(versions.contains(&json!(version)), "{version} offered: {discover}");
    }
    assert!(discover["capabilities"]["tools"].is_object(), "{discover}");
    assert!(discover["capabilities"]["extensions"][TASKS].is_object(), "{discover}");
    assert_eq!(
        discover["_meta"]["io.modelcontextprotocol/serverInfo"]["name"],
        "agentd"
    );

    // The tools and their hints, as 2025-era clients see them.
    for name in READ_TOOLS {
        assert_eq!(tool(&out, name).unwrap()["annotations"]["readOnlyHint"], true, "{name}");
    }
    assert_eq!(
        tool(&out, "send_native").unwrap()["annotations"]["destructiveHint"],
        true
    );

    let block = tool_ok(&out, 0);
    assert!(
        block["block_number"].as_u64().is_some() || block["block_number"].is_string(),
        "{block}"
    );
    let sent = tool_ok(&out, 1);
    assert!(sent["tx_hash"].is_string(), "sent at once (no approval needed): {sent}");
    assert_eq!(anvil.balance(to).await, wei(CENT_ETH / 10), "the transfer landed");
    let balance = tool_ok(&out, 2);
    assert!(balance.to_string().contains("0.001"), "{balance}");

    // Every request stood alone, answered by whichever instance it reached.
    let served = out["served"].as_array().expect("served");
    let methods: Vec<&str> = served.iter().filter_map(|s| s[0].as_str()).collect();
    assert_eq!(
        methods,
        [
            "server/discover",
            "tools/list",
            "tools/call",
            "tools/call",
            "tools/call"
        ],
        "no initialize, no session: {out:#}"
    );
    for instance in [0, 1] {
        assert!(
            served.iter().any(|s| s[1] == instance),
            "instance {instance} answered: {served:?}"
        );
    }
    let audited = mcp_audit(&first, &agent).await;
    assert_eq!(audited.len(), 3, "{audited:?}");
}

#[tokio::test]
async fn a_held_transfer_is_followed_as_a_task_until_the_owner_approves_it() {
    let anvil = Anvil::start(BASE_CHAIN_ID);
    let first = admin_app(&anvil).await;
    let second = second_instance(&first, &anvil).await;
    let agent = approving_agent(&first, &anvil).await;
    let other = funded_agent(&first, &anvil, None).await;
    let to = fresh_address();

    let spec = json!({
        "urls": [first.url("/mcp"), second.url("/mcp")],
        "token": agent.token,
        "tasks": true,
        "calls": [send_call(&to.to_string(), "0.01")],
    });
    let client = tokio::spawn(modern_client(spec));
    let id = waiting_transfer(&second, &agent).await;

    // While it waits: the task is the agent's only; a client with URL-mode elicitation is sent to the console.
    let tasks_only = json!({"extensions": {TASKS: {}}});
    let foreign = task_get(&second, &other.token, &id, tasks_only.clone()).await;
    assert_eq!(foreign.body["error"]["code"], -32602, "{}", foreign.text);
    assert_eq!(
        foreign.body["error"]["data"]["code"], "task_not_found",
        "{}",
        foreign.text
    );
    let with_url = json!({"extensions": {TASKS: {}}, "elicitation": {"url": {}}});
    let waiting = task_get(&first, &agent.token, &id, with_url).await;
    let task = &waiting.body["result"];
    assert_eq!(task["taskId"], id.as_str(), "{}", waiting.text);
    assert_eq!(task["status"], "input_required", "{}", waiting.text);
    let asked = &task["inputRequests"]["owner_approval"];
    assert_eq!(asked["method"], "elicitation/create", "{asked}");
    assert_eq!(asked["params"]["mode"], "url", "{asked}");
    let url = asked["params"]["url"].as_str().expect("a URL");
    assert!(url.ends_with(&format!("/#/agents/{}/approvals", agent.id)), "{url}");
    // Without PUBLIC_URL the link names the address the instance listens on, never the Host a request names.
    assert!(url.starts_with(&first.url("/#/")), "{url}");
    let forged = task_get_as_host(
        &first,
        &agent.token,
        &id,
        json!({"extensions": {TASKS: {}}, "elicitation": {"url": {}}}),
        "evil.example",
    )
    .await;
    let url = forged.body["result"]["inputRequests"]["owner_approval"]["params"]["url"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    assert!(url.starts_with(&first.url("/#/")), "{url}: {}", forged.text);
    assert!(
        !url.contains(&agent.token) && !url.contains(ADMIN),
        "no credential in {url}"
    );
    let plain = task_get(&second, &agent.token, &id, tasks_only).await;
    assert_eq!(plain.body["result"]["status"], "working", "{}", plain.text);
    assert_eq!(
        anvil.nonce(wallet(&agent)).await,
        0,
        "nothing signed before the owner decides"
    );

    // The owner approves through the API; the client's tasks/get sees it completed, with the transfer.
    let approve = format!("/api/agents/{}/transfers/{id}/approve", agent.id);
    let (status, approved) = api_call(&second, &agent, true, Method::POST, &approve, None).await;
    assert_eq!(status, StatusCode::OK, "{approved}");
    let out = client.await.expect("the client task");
    assert_eq!(out["protocol_version"], MODERN, "{out:#}");
    let followed = &out["tasks"][0];
    assert_eq!(followed["handle"]["resultType"], "task", "{out:#}");
    assert_eq!(
        followed["handle"]["taskId"],
        id.as_str(),
        "the task is the held transfer: {out:#}"
    );
    assert_eq!(followed["handle"]["status"], "working", "{out:#}");
    let statuses: Vec<&str> = followed["polls"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|p| p["status"].as_str())
        .collect();
    assert_eq!(statuses.last(), Some(&"completed"), "{statuses:?}");
    assert!(
        statuses[..statuses.len() - 1].iter().all(|s| *s == "working"),
        "{statuses:?}"
    );
    let sent = tool_ok(&out, 0);
    assert_eq!(sent["transfer_id"], id.as_str(), "{sent}");
    assert!(
        ["pending", "confirmed"].contains(&sent["status"].as_str().unwrap()),
        "{sent}"
    );
    assert_eq!(sent["amount"], "0.01", "{sent}");
    assert!(sent["tx_hash"].is_string(), "{sent}");
    assert_eq!(anvil.balance(to).await, wei(CENT_ETH), "the approved transfer landed");
    let served = out["served"].as_array().unwrap();
    let polled_on: std::collections::BTreeSet<i64> = served
        .iter()
        .filter(|s| s[0] == "tasks/get")
        .filter_map(|s| s[1].as_i64())
        .collect();
    assert!(
        served.iter().filter(|s| s[0] == "tasks/get").count() < 2 || polled_on.len() == 2,
        "{served:?}"
    );
}

#[tokio::test]
async fn a_rejected_task_fails_and_a_client_without_tasks_gets_the_held_result() {
    let anvil = Anvil::start(BASE_CHAIN_ID);
    let app = admin_app(&anvil).await;
    let agent = approving_agent(&app, &anvil).await;
    let to = fresh_address();

    // A 2026-07-28 client that does not declare the extension: today's tool result.
    let out = modern_client(json!({
        "urls": [app.url("/mcp")],
        "token": agent.token,
        "calls": [send_call(&to.to_string(), "0.01")],
    }))
    .await;
    assert_eq!(out["protocol_version"], MODERN);
    let held = tool_ok(&out, 0);
    assert_eq!(held["status"], "awaiting_approval", "{held}");
    let id = held["transfer_id"].as_str().unwrap().to_string();

    // Rejected by the owner: its task has failed, with the transfer in the error.
    let reject = format!("/api/agents/{}/transfers/{id}/reject", agent.id);
    let (status, body) = api_call(&app, &agent, true, Method::POST, &reject, None).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    let answer = task_get(&app, &agent.token, &id, json!({"extensions": {TASKS: {}}})).await;
    let task = &answer.body["result"];
    assert_eq!(task["status"], "failed", "{}", answer.text);
    assert_eq!(task["error"]["data"]["code"], "transfer_rejected", "{}", answer.text);
    assert_eq!(task["error"]["data"]["transfer_id"], id.as_str(), "{}", answer.text);

    // tasks/get without the extension declared is refused as rmcp refuses it.
    let undeclared = task_get(&app, &agent.token, &id, json!({})).await;
    assert!(undeclared.body["error"]["code"].is_i64(), "{}", undeclared.text);
}

#[tokio::test]
async fn a_browser_origin_not_allowed_is_refused_on_mcp() {
    let app = crate::helpers::spawn_app_with(&[("CORS_ORIGINS", "https://allowed.example")]).await;
    let agent = app.create_default_agent().await;
    let list = |origin: &'static str| {
        let builder = app
            .client
            .post(app.url("/mcp"))
            .header("X-Agent-Access-Token", &agent.token)
            .header("Accept", "application/json, text/event-stream")
            .header("MCP-Protocol-Version", MODERN)
            .header("Mcp-Method", "server/discover")
            .header("Origin", origin)
            .json(
                &json!({"jsonrpc": "2.0", "id": 1, "method": "server/discover", "params": {"_meta": {
                "io.modelcontextprotocol/protocolVersion": MODERN,
                "io.modelcontextprotocol/clientCapabilities": {}}}}),
            );
        app.send(builder)
    };
    let refused = list("https://evil.example").await;
    assert_rpc_error(&refused, StatusCode::FORBIDDEN, -32600, "forbidden");
    let allowed = list("https://allowed.example").await;
    assert_eq!(allowed.status, StatusCode::OK, "{}", allowed.text);
    assert!(
        allowed.body["result"]["supportedVersions"].is_array(),
        "{}",
        allowed.text
    );
}
