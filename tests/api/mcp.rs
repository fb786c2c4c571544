//! `agentd mcp` (stdio) and `/mcp` (Streamable HTTP) driven by the official MCP client SDK:
//! `test-tools/mcp-client.mjs` spawns the real binary over stdio (or speaks Streamable HTTP), lists the tools and
//! calls them; the results are checked against a real node (anvil), the API and the audit table. The protocol's
//! edges are checked with raw JSON-RPC lines written to the binary and raw HTTP requests. Shared helpers here.

mod elicitation;
mod http;
mod modern;
mod modern_swap;
mod sessions;
mod stdio;
mod x402;

use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::mpsc;
use std::time::Duration;

use serde_json::{Value, json};

use crate::anvil::Anvil;
use crate::helpers::{CreatedAgent, ENCRYPTION_KEY, TestApp};

/// The newest protocol revision with an `initialize` handshake that rmcp speaks (2025-06-18 at least, per §17).
pub const PROTOCOL_VERSION: &str = "2025-11-25";

pub const READ_TOOLS: [&str; 6] = [
    "get_balance",
    "get_gas_price",
    "get_block_number",
    "get_transaction",
    "list_delegations",
    "list_income",
];

pub fn repo_path(relative: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join(relative)
}

/// The variables `agentd mcp` gets: the app's database and key, its chain, the agent's token.
pub fn server_env(app: &TestApp, anvil: Option<&Anvil>, token: &str) -> Vec<(String, String)> {
    let mut env = vec![
        ("DATABASE_URL".to_string(), app.db_url.clone()),
        ("ENCRYPTION_KEY".to_string(), ENCRYPTION_KEY.to_string()),
        ("APP_ENV".to_string(), "development".to_string()),
        ("AGENTD_ACCESS_TOKEN".to_string(), token.to_string()),
    ];
    if let Some(anvil) = anvil {
        env.push(("RPC_URL_BASE".to_string(), anvil.url().to_string()));
    }
    env
}

/// Runs `node test-tools/mcp-client.mjs` with `args` and exactly `env` (plus PATH/HOME); returns whether it
/// succeeded and the JSON it printed.
pub async fn mcp_client(app: &TestApp, args: Vec<String>, env: Vec<(String, String)>) -> (bool, Value) {
    let sdk = repo_path("test-tools/node_modules/@modelcontextprotocol/sdk/package.json");
    assert!(
        sdk.exists(),
        "the MCP client SDK is not installed: run `npm ci --prefix test-tools` in the repository root first"
    );
    let cwd = app.dir.path().to_path_buf();
    let output = tokio::task::spawn_blocking(move || {
        let mut command = Command::new("node");
        command
            .arg(repo_path("test-tools/mcp-client.mjs"))
            .args(&args)
            .env_clear()
            .current_dir(cwd);
        for key in ["PATH", "HOME"] {
            if let Ok(value) = std::env::var(key) {
                command.env(key, value);
            }
        }
        command.envs(env).output().expect("run node (Node.js is required)")
    })
    .await
    .expect("the client thread");
    let stdout = String::from_utf8_lossy(&output.stdout);
    let last = stdout.lines().last().unwrap_or_default();
    let body = serde_json::from_str(last).unwrap_or_else(|e| {
        panic!(
            "mcp-client.mjs printed no JSON ({e}); stdout:\n{stdout}\nstderr:\n{}",
            String::from_utf8_lossy(&output.stderr)
        )
    });
    (output.status.success(), body)
}

pub fn binary_args(calls: Value) -> Vec<String> {
    vec![
        "--binary".into(),
        env!("CARGO_BIN_EXE_agentd").into(),
        "--calls".into(),
        calls.to_string(),
    ]
}

/// The `tools/call` result (or JSON-RPC error) of call `i`.
pub fn call(out: &Value, i: usize) -> &Value {
    &out["calls"][i]
}

/// The `tools/call` result of call `i`, checked to be a tool error (or not) whose text content is its structured
/// content.
#[track_caller]
pub fn tool_result(out: &Value, i: usize, is_error: bool) -> &Value {
    let result = &call(out, i)["result"];
    let expected = if is_error { "is a tool error" } else { "succeeded" };
    assert_eq!(result["isError"], is_error, "call {i} {expected}: {out:#}");
    let text: Value = serde_json::from_str(result["content"][0]["text"].as_str().expect("text content")).unwrap();
    assert_eq!(text, result["structuredContent"], "text and structured content agree");
    result
}

#[track_caller]
pub fn tool_error_code(out: &Value, i: usize) -> String {
    let result = tool_result(out, i, true);
    result["structuredContent"]["error"]["code"]
        .as_str()
        .unwrap_or_else(|| panic!("an error code: {result}"))
        .to_string()
}

#[track_caller]
pub fn tool_ok(out: &Value, i: usize) -> Value {
    tool_result(out, i, false)["structuredContent"].clone()
}

pub fn tool<'a>(out: &'a Value, name: &str) -> Option<&'a Value> {
    out["tools"].as_array()?.iter().find(|t| t["name"] == name)
}

pub fn tool_names(out: &Value) -> Vec<String> {
    out["tools"]
        .as_array()
        .expect("tools")
        .iter()
        .map(|t| t["name"].as_str().unwrap().to_string())
        .collect()
}

/// `(action, actor, detail)` of the agent's audit events, oldest first, read straight from the database.
pub async fn audit_rows(app: &TestApp, agent_id: &str) -> Vec<(String, String, Value)> {
    let id = uuid::Uuid::parse_str(agent_id).unwrap();
    let sql = "SELECT action, actor, detail FROM audit_events WHERE agent_id = $1 ORDER BY id";
    let rows: Vec<(String, String, String)> = if app.db_url.starts_with("sqlite") {
        let pool = sqlx::SqlitePool::connect(&app.db_url)
            .await
            .expect("open the SQLite file");
        sqlx::query_as(sql).bind(id).fetch_all(&pool).await.expect("audit rows")
    } else {
        let pool = sqlx::PgPool::connect(&app.db_url).await.expect("connect to PostgreSQL");
        sqlx::query_as(sql).bind(id).fetch_all(&pool).await.expect("audit rows")
    };
    rows.into_iter()
        .map(|(action, actor, detail)| (action, actor, serde_json::from_str(&detail).expect("JSON detail")))
        .collect()
}

/// The MCP audit details of the agent, checked for the action, the actor and the absence of its token.
pub async fn mcp_audit(app: &TestApp, agent: &CreatedAgent) -> Vec<Value> {
    let rows = audit_rows(app, &agent.id).await;
    rows.into_iter()
        .filter(|(action, _, _)| action == "mcp_tool_call")
        .map(|(_, actor, detail)| {
            assert_eq!(actor, "mcp");
            assert!(!detail.to_string().contains(&agent.token), "no token in {detail}");
            detail
        })
        .collect()
}

/// `agentd mcp` driven line by line.
pub struct RawSession {
    pub child: Child,
    pub stdin: Option<ChildStdin>,
    lines: mpsc::Receiver<String>,
}

impl RawSession {
    pub fn start(env: Vec<(String, String)>, cwd: &Path) -> RawSession {
        let mut child = Command::new(env!("CARGO_BIN_EXE_agentd"))
            .arg("mcp")
            .env_clear()
            .envs(env)
            .current_dir(cwd)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("spawn agentd mcp");
        let stdout = child.stdout.take().unwrap();
        let (tx, lines) = mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { break };
                let _ = tx.send(line);
            }
        });
        RawSession {
            stdin: child.stdin.take(),
            child,
            lines,
        }
    }

    pub fn send(&mut self, line: &str) {
        let stdin = self.stdin.as_mut().unwrap();
        writeln!(stdin, "{line}")
            .and_then(|_| stdin.flush())
            .expect("write to agentd mcp");
    }

    /// Sends one line and returns the next line the server wrote, parsed.
    pub fn exchange(&mut self, line: &str) -> Value {
        self.send(line);
        let reply = self
            .lines
            .recv_timeout(Duration::from_secs(20))
            .unwrap_or_else(|_| panic!("no reply to {line}"));
        serde_json::from_str(&reply).unwrap_or_else(|e| panic!("stdout carries only JSON ({e}): {reply}"))
    }

    pub fn request(&mut self, id: u64, method: &str, params: Value) -> Value {
        let reply = self.exchange(&json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}).to_string());
        assert_eq!(reply["jsonrpc"], "2.0", "{reply}");
        assert_eq!(reply["id"], id, "{reply}");
        reply
    }
}

/// Asserts a JSON-RPC error answer of `POST /mcp`: its HTTP status, the JSON-RPC error code, and the API's code in
/// the error's `data`.
#[track_caller]
pub fn assert_rpc_error(answer: &crate::helpers::TestResponse, status: reqwest::StatusCode, rpc_code: i64, code: &str) {
    let text = &answer.text;
    assert_eq!(answer.status, status, "{text}");
    assert_eq!(answer.body["jsonrpc"], "2.0", "a JSON-RPC error body: {text}");
    assert_eq!(answer.body["error"]["code"], rpc_code, "{text}");
    assert_eq!(answer.body["error"]["data"]["code"], code, "{text}");
}
