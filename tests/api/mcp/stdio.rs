//! `agentd mcp` over stdio: the official SDK client against the real binary, and raw JSON-RPC lines.

use std::io::Write;
use std::process::{Command, Stdio};

use alloy::primitives::U256;
use reqwest::StatusCode;
use serde_json::{Value, json};

use super::*;
use crate::anvil::Anvil;
use crate::helpers::chain::{
    BASE_CHAIN_ID, ONE_ETH, fresh_address, funded_agent, transactions, transfer_app, wait_for_transactions, wallet, wei,
};
use crate::helpers::spawn_app;

#[tokio::test]
async fn a_read_only_agent_sees_read_tools_and_reads_exact_balances() {
    let anvil = Anvil::start(BASE_CHAIN_ID);
    let app = transfer_app(&anvil, &[]).await;
    let agent = app
        .create_agent_ok(json!({"name": "reader", "chains": ["base"], "capabilities": ["read"]}))
        .await;
    let balance = U256::from(1_234_567_890_123_456_789u128);
    anvil.set_balance(wallet(&agent), balance).await;

    let calls = json!([
        {"name": "get_balance", "arguments": {"chain": "base"}},
        {"name": "send_native", "arguments": {"chain": "base", "to": fresh_address().to_string(), "amount": "0.001"}},
        {"name": "compare_gas", "arguments": {}},
        {"name": "no_such_tool", "arguments": {}},
    ]);
    let (ok, out) = mcp_client(&app, binary_args(calls), server_env(&app, Some(&anvil), &agent.token)).await;
    assert!(ok, "the client ran: {out:#}");
    assert_eq!(
        out["transportErrors"],
        json!([]),
        "stdout held only protocol messages: {out:#}"
    );
    assert_eq!(out["protocolVersion"], PROTOCOL_VERSION);
    assert_eq!(out["serverInfo"]["name"], "agentd");
    assert_eq!(out["serverInfo"]["version"], env!("CARGO_PKG_VERSION"));
    assert_eq!(out["capabilities"]["tools"], json!({}), "{out:#}");
    assert_eq!(out["ping"], json!({}));

    assert_eq!(tool_names(&out), READ_TOOLS);
    for tool in out["tools"].as_array().unwrap() {
        assert_eq!(tool["annotations"]["readOnlyHint"], true, "{tool}");
        assert_ne!(tool["annotations"]["destructiveHint"], true, "{tool}");
        assert_eq!(tool["inputSchema"]["type"], "object", "{tool}");
        assert!(tool["description"].as_str().is_some_and(|d| !d.is_empty()), "{tool}");
    }
    assert_eq!(
        tool(&out, "get_balance").unwrap()["inputSchema"]["properties"]["chain"]["enum"],
        json!(["base"])
    );

    let read = tool_ok(&out, 0);
    assert_eq!(read["wei"], balance.to_string(), "the exact wei: {read}");
    assert_eq!(read["address"], agent.address("base"));
    assert_eq!(tool_error_code(&out, 1), "capability_denied");
    assert_eq!(tool_error_code(&out, 2), "capability_denied");
    assert_eq!(
        call(&out, 3)["error"]["code"],
        -32602,
        "an unknown tool is invalid params: {out:#}"
    );
    assert_eq!(anvil.nonce(wallet(&agent)).await, 0, "nothing was sent");
    assert!(
        !out["stderr"].as_str().unwrap().contains(&agent.token),
        "the token is never logged"
    );

    let audit = mcp_audit(&app, &agent).await;
    let summary: Vec<(Value, Value, Value)> = audit
        .iter()
        .map(|d| (d["tool"].clone(), d["ok"].clone(), d["error_code"].clone()))
        .collect();
    assert_eq!(
        summary,
        vec![
            (json!("get_balance"), json!(true), Value::Null),
            (json!("send_native"), json!(false), json!("capability_denied")),
            (json!("compare_gas"), json!(false), json!("capability_denied")),
        ]
    );
    assert_eq!(audit[0]["arguments"], json!({"chain": "base"}));
    assert_eq!(audit[0]["transport"], "stdio");
}

#[tokio::test]
async fn a_transacting_agent_sends_within_its_cap_and_is_refused_above_it() {
    let anvil = Anvil::start(BASE_CHAIN_ID);
    let app = transfer_app(&anvil, &[]).await;
    let agent = funded_agent(&app, &anvil, Some(0.01)).await;
    let from = wallet(&agent);
    let to = fresh_address();
    let milli = ONE_ETH / 1000;

    let calls = json!([
        {"name": "send_native", "arguments": {"chain": "base", "to": to.to_string(), "amount": "0.001"}},
        {"name": "send_native", "arguments": {"chain": "base", "to": to.to_string(), "amount": "0.5"}},
        {"name": "get_balance", "arguments": {"chain": "base", "address": to.to_string()}},
    ]);
    let (ok, out) = mcp_client(&app, binary_args(calls), server_env(&app, Some(&anvil), &agent.token)).await;
    assert!(ok, "the client ran: {out:#}");
    assert_eq!(out["transportErrors"], json!([]), "{out:#}");

    assert_eq!(
        tool_names(&out),
        [
            &READ_TOOLS[..],
            &[
                "send_native",
                "send_token",
                "pay_http",
                "call_contract",
                "simulate_call",
                "sign_typed_data",
                "create_offer"
            ]
        ]
        .concat()
    );
    let send = &tool(&out, "send_native").unwrap()["annotations"];
    assert_eq!(send["destructiveHint"], true, "{send}");
    assert_eq!(send["readOnlyHint"], false, "{send}");
    assert_eq!(send["idempotentHint"], false, "{send}");
    // The tools that sign are destructive; the simulation only reads.
    for (name, signs) in [
        ("call_contract", true),
        ("sign_typed_data", true),
        ("simulate_call", false),
    ] {
        let hints = &tool(&out, name).unwrap()["annotations"];
        assert_eq!(hints["readOnlyHint"], !signs, "{name}: {hints}");
        assert_eq!(hints["destructiveHint"] == true, signs, "{name}: {hints}");
    }

    let sent = tool_ok(&out, 0);
    assert_eq!(sent["amount_wei"], milli.to_string(), "{sent}");
    let hash = sent["tx_hash"].as_str().expect("tx_hash").to_string();
    assert_eq!(tool_error_code(&out, 1), "spending_cap_exceeded");
    assert_eq!(
        tool_ok(&out, 2)["wei"],
        milli.to_string(),
        "the recipient got exactly 0.001 ETH"
    );
    assert_eq!(anvil.balance(to).await, wei(milli));
    assert_eq!(
        anvil.nonce(from).await,
        1,
        "only the transfer within the cap reached the chain"
    );

    // The serve instance sharing the database (here the in-process app) sees it, and its watcher settles it.
    let listed = transactions(&app, &agent).await;
    assert_eq!(listed.len(), 1, "{listed:#?}");
    assert_eq!(listed[0]["tx_hash"], hash);
    let settled = wait_for_transactions(&app, &agent, 1, "confirmed").await;
    assert_eq!(settled[0]["tx_hash"], hash);

    let audit = mcp_audit(&app, &agent).await;
    assert_eq!(audit.len(), 3, "{audit:#?}");
    assert_eq!(audit[0]["tool"], "send_native");
    assert_eq!(audit[0]["ok"], true);
    assert_eq!(audit[0]["tx_hash"], hash);
    assert_eq!(audit[0]["arguments"]["amount"], "0.001");
    assert_eq!(audit[1]["error_code"], "spending_cap_exceeded");
    assert_eq!(audit[2]["tool"], "get_balance");

    // The transfers themselves are audited as the MCP client's: the accepted one and the refused one with its code.
    let transfers: Vec<(String, String, Value)> = audit_rows(&app, &agent.id)
        .await
        .into_iter()
        .filter(|(action, _, _)| action.starts_with("transfer_"))
        .collect();
    assert_eq!(transfers.len(), 2, "{transfers:#?}");
    let (accepted, refused) = (&transfers[0], &transfers[1]);
    assert_eq!((accepted.0.as_str(), accepted.1.as_str()), ("transfer_accepted", "mcp"));
    assert_eq!(accepted.2["tx_hash"], hash);
    assert_eq!((refused.0.as_str(), refused.1.as_str()), ("transfer_refused", "mcp"));
    assert_eq!(refused.2["code"], "spending_cap_exceeded");
}

#[tokio::test]
async fn a_bad_missing_or_inactive_token_keeps_the_server_from_starting() {
    let app = spawn_app().await;
    let unknown = format!("agt_{}", "A".repeat(43));
    let (ok, out) = mcp_client(&app, binary_args(json!([])), server_env(&app, None, &unknown)).await;
    assert!(!ok, "the client reports failure: {out:#}");
    assert_eq!(out["ok"], false);
    let stderr = out["stderr"].as_str().unwrap_or_default();
    assert!(stderr.contains("AGENTD_ACCESS_TOKEN is refused"), "{stderr}");
    assert!(!stderr.contains(&unknown), "the token is not printed: {stderr}");

    // The binary itself: a non-zero exit, a clear message on stderr, nothing on stdout.
    let agent = app.create_default_agent().await;
    app.delete_agent(&agent.id, &agent.token).await;
    for (token, message) in [
        (None, "AGENTD_ACCESS_TOKEN is not set"),
        (Some("not-a-token"), "AGENTD_ACCESS_TOKEN is refused"),
        (Some(unknown.as_str()), "invalid_token"),
        (Some(agent.token.as_str()), "agent_inactive"),
    ] {
        let mut env = server_env(&app, None, token.unwrap_or_default());
        env.retain(|(k, _)| token.is_some() || k != "AGENTD_ACCESS_TOKEN");
        let output = Command::new(env!("CARGO_BIN_EXE_agentd"))
            .arg("mcp")
            .env_clear()
            .envs(env)
            .current_dir(app.dir.path())
            .stdin(Stdio::null())
            .output()
            .expect("run agentd mcp");
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert!(!output.status.success(), "{token:?} is refused");
        assert!(stderr.contains(message), "{token:?}: {stderr}");
        assert!(output.stdout.is_empty(), "nothing on stdout: {:?}", output.stdout);
        if let Some(token) = token {
            assert!(!stderr.contains(token), "the token is not printed: {stderr}");
        }
    }
}

#[tokio::test]
async fn raw_json_rpc_edges_and_a_reload_of_the_agent_on_every_call() {
    let app = spawn_app().await;
    let agent = app
        .create_agent_ok(json!({"name": "raw", "chains": ["base"], "capabilities": ["read"]}))
        .await;
    let mut mcp = RawSession::start(server_env(&app, None, &agent.token), app.dir.path());

    // rmcp skips a line that is not JSON at all (answering it could start an error storm): the next reply is
    // the initialize's.
    mcp.send("{not json");
    let newer = mcp.request(
        1,
        "initialize",
        json!({"protocolVersion": "2031-01-01", "capabilities": {}, "clientInfo": {"name": "raw", "version": "0"}}),
    );
    assert_eq!(
        newer["result"]["protocolVersion"], PROTOCOL_VERSION,
        "an unknown version gets the latest"
    );
    assert_eq!(newer["result"]["capabilities"]["tools"], json!({}), "{newer}");
    assert_eq!(newer["result"]["serverInfo"]["name"], "agentd");
    assert!(
        newer["result"]["instructions"].as_str().unwrap().contains("\"raw\""),
        "{newer}"
    );
    // A notification gets no reply: the next line is the ping's.
    mcp.send(r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#);
    let ping = mcp.exchange(r#"{"jsonrpc":"2.0","id":"p","method":"ping"}"#);
    assert_eq!(ping, json!({"jsonrpc": "2.0", "id": "p", "result": {}}));

    for (id, method, params, code) in [
        (3, "resources/list", json!({}), -32601),
        (4, "agentd/probe", json!({}), -32601),
        (5, "tools/call", json!({"name": "get_balance", "arguments": 5}), -32602),
        (6, "tools/call", json!({"name": "steal_funds"}), -32602),
        (7, "tools/call", json!({}), -32602),
    ] {
        let reply = mcp.request(id, method, params);
        assert_eq!(reply["error"]["code"], code, "{method}: {reply}");
    }
    let invalid = mcp.exchange(r#"{"jsonrpc":"1.0","id":9,"method":"ping"}"#);
    assert_eq!(invalid["error"]["code"], -32600, "{invalid}");
    let batch = mcp.exchange(r#"[{"jsonrpc":"2.0","id":10,"method":"ping"},{"jsonrpc":"2.0","method":"x"}]"#);
    assert_eq!(batch["error"]["code"], -32600, "no batches since 2025-06-18: {batch}");

    let list = mcp.request(11, "tools/list", json!({}));
    let names: Vec<&str> = list["result"]["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, READ_TOOLS);

    // A capability change applies to the running session.
    let (status, body) = app
        .put_agent(&agent.id, &agent.token, json!({"capabilities": ["read", "analytics"]}))
        .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    let list = mcp.request(12, "tools/list", json!({}));
    assert!(
        list["result"]["tools"]
            .as_array()
            .unwrap()
            .iter()
            .any(|t| t["name"] == "spending_summary"),
        "{list}"
    );
    let summary = mcp.request(13, "tools/call", json!({"name": "spending_summary", "arguments": {}}));
    assert_eq!(summary["result"]["isError"], false, "{summary}");

    // A deleted agent is refused on the next call.
    app.delete_agent(&agent.id, &agent.token).await;
    let refused = mcp.request(14, "tools/call", json!({"name": "spending_summary", "arguments": {}}));
    assert_eq!(refused["error"]["code"], -32001, "{refused}");
    assert_eq!(refused["error"]["data"]["code"], "agent_inactive", "{refused}");
    let refused = mcp.request(15, "tools/list", json!({}));
    assert_eq!(refused["error"]["data"]["code"], "agent_inactive", "{refused}");

    drop(mcp.stdin.take());
    let status = mcp.child.wait().expect("agentd mcp exits");
    assert!(status.success(), "end of input stops the server cleanly: {status}");

    let audit = mcp_audit(&app, &agent).await;
    let codes: Vec<(Value, Value)> = audit
        .iter()
        .map(|d| (d["tool"].clone(), d["error_code"].clone()))
        .collect();
    assert_eq!(
        codes,
        vec![
            (json!("spending_summary"), Value::Null),
            (json!("spending_summary"), json!("agent_inactive")),
        ]
    );
}

#[tokio::test]
async fn agentd_mcp_at_debug_level_keeps_the_rpc_url_key_out_of_its_logs() {
    let anvil = Anvil::start(BASE_CHAIN_ID);
    let app = spawn_app().await;
    let agent = app
        .create_agent_ok(json!({"name": "logged", "chains": ["base"], "capabilities": ["read"]}))
        .await;
    let key = "rpckey9f3c2a7d41b8e6";
    let mut env = server_env(&app, None, &agent.token);
    env.push(("RPC_URL_BASE".into(), format!("{}/?apikey={key}", anvil.url())));
    env.push(("RUST_LOG".into(), "debug".into()));
    let input = [
        json!({"jsonrpc": "2.0", "id": 1, "method": "initialize",
            "params": {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "raw", "version": "0"}}}),
        json!({"jsonrpc": "2.0", "method": "notifications/initialized"}),
        json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call",
            "params": {"name": "get_balance", "arguments": {"chain": "base"}}}),
    ]
    .iter()
    .map(|m| format!("{m}\n"))
    .collect::<String>();
    let cwd = app.dir.path().to_path_buf();
    let output = tokio::task::spawn_blocking(move || {
        let mut child = Command::new(env!("CARGO_BIN_EXE_agentd"))
            .arg("mcp")
            .env_clear()
            .envs(env)
            .current_dir(cwd)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("spawn agentd mcp");
        // Closing stdin after the two requests ends the session once they are answered.
        child.stdin.take().unwrap().write_all(input.as_bytes()).unwrap();
        child.wait_with_output().expect("agentd mcp exits")
    })
    .await
    .unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "{stderr}");
    let balance = stdout
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .find(|r| r["id"] == 2)
        .unwrap_or_else(|| panic!("no reply to the call: {stdout}\n{stderr}"));
    assert_eq!(balance["result"]["isError"], false, "the node was reached: {balance}");
    assert!(stderr.contains("DEBUG"), "the logs are at debug level: {stderr}");
    assert!(!stderr.contains(key), "the RPC URL's key is in the logs:\n{stderr}");
}
