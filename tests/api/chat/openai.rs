//! The OpenAI-compatible provider (docs/api.md §6) against a scripted server in the test process: the real HTTP client
//! streams tool-call fragments and text, the tool loop runs against a real node, tokens are counted from the
//! provider's usage, history and capabilities shape the requests, upstream failures map to 502/503/504, and the API
//! key never leaves the service except in the `Authorization` header.

use std::time::{Duration, Instant};

use agentd::domain::agent::Capability;
use alloy::primitives::{Address, U256};
use reqwest::StatusCode;
use serde_json::{Value, json};

use crate::anvil::Anvil;
use crate::chat::stream::{assert_complete_stream, stream_events};
use crate::helpers::chain::transactions;
use crate::helpers::chat::{ALL_CAPABILITIES, BASE_ID, address, agent_with, assert_turn_shape, post_chat, post_turn};
use crate::helpers::llm_server::{LlmServer, Recorded, Reply};
use crate::helpers::{
    CreatedAgent, ENCRYPTION_KEY, ServerProcess, TOKEN_HEADER, TestApp, assert_error_shape, spawn_app_with, sqlite_url,
};

const READ_TOOLS: &[&str] = &[
    "get_balance",
    "get_gas_price",
    "get_block_number",
    "get_transaction",
    "list_delegations",
    "list_income",
];

/// Every tool of the registry whose capability is one of `capabilities`, in the order offered to models.
fn registry_tools(capabilities: &[Capability]) -> Vec<String> {
    agentd::tools::all()
        .filter(|tool| capabilities.contains(&tool.capability))
        .map(|tool| tool.name.to_string())
        .collect()
}

struct Env {
    app: TestApp,
    llm: LlmServer,
    base: Anvil,
    key: String,
}

async fn openai_env(script: Vec<Reply>, extra: &[(&str, &str)]) -> Env {
    let base = Anvil::start(BASE_ID);
    let llm = LlmServer::start(script).await;
    let key = format!("sk-test-{}", uuid::Uuid::new_v4().simple());
    let mut vars = llm.app_vars(&key);
    vars.push(("RPC_URL_BASE", base.url()));
    vars.extend_from_slice(extra);
    let app = spawn_app_with(&vars).await;
    Env { app, llm, base, key }
}

/// An app scripted with `balance_script(answer)` and an agent ("Oracle", `read` and `compare`) holding 0.75 ETH on
/// base.
async fn balance_env(answer: &[&str]) -> (Env, CreatedAgent) {
    let env = openai_env(balance_script(answer), &[]).await;
    let agent = agent_with(&env.app, "Oracle", &["read", "compare"]).await;
    env.base
        .set_balance(address(&agent, "base"), U256::from(750_000_000_000_000_000u128))
        .await;
    (env, agent)
}

/// The script of a balance question: a tool call streamed in fragments, then the answer in pieces.
fn balance_script(answer: &[&str]) -> Vec<Reply> {
    vec![
        Reply::tool_call(
            "call_bal_1",
            "get_balance",
            &["{\"ch", "ain\": \"ba", "se\"", "}"],
            120,
            17,
        ),
        Reply::text(answer, 260, 31),
    ]
}

fn assert_no_key(env: &Env, text: &str) {
    assert!(!text.contains(&env.key), "the API key leaked into a response: {text}");
}

/// The checks shared by the sync and the streaming turn of `balance_script`.
fn check_balance_requests(env: &Env, agent: &CreatedAgent, requests: &[Recorded], connected: &str) {
    assert_eq!(requests.len(), 2, "one call for the tool, one for the answer");
    for request in requests {
        assert_eq!(request.path, "/v1/chat/completions");
        assert_eq!(
            request.header("authorization"),
            Some(format!("Bearer {}", env.key).as_str())
        );
        assert_eq!(request.body["model"], "test-model");
        assert_eq!(request.body["stream"], true, "{}", request.body);
        assert!(request.asks_for_usage(), "{}", request.body);
    }
    let first = &requests[0];
    let messages = first.messages();
    assert_eq!(messages.len(), 2, "system and user: {messages:?}");
    assert_eq!(messages[0]["role"], "system");
    assert_eq!(
        messages[1],
        json!({"role": "user", "content": "how much ETH do I have on base?"})
    );
    let system = first.system_prompt();
    for fact in [
        agent.body["name"].as_str().unwrap(),
        "ethereum",
        "base",
        &agent.address("base"),
        connected,
    ] {
        assert!(system.contains(fact), "the system prompt names {fact}: {system}");
    }

    // The second request replays the tool call and carries its result.
    let messages = requests[1].messages();
    assert_eq!(messages.len(), 4, "{messages:?}");
    assert_eq!(messages[..2], requests[0].messages()[..]);
    let assistant = &messages[2];
    assert_eq!(assistant["role"], "assistant", "{assistant}");
    let calls = assistant["tool_calls"].as_array().unwrap();
    assert_eq!(calls.len(), 1, "{assistant}");
    assert_eq!(calls[0]["id"], "call_bal_1");
    assert_eq!(calls[0]["type"], "function");
    assert_eq!(calls[0]["function"]["name"], "get_balance");
    let arguments: Value = serde_json::from_str(calls[0]["function"]["arguments"].as_str().unwrap()).unwrap();
    assert_eq!(arguments, json!({"chain": "base"}));
    let tool = &messages[3];
    assert_eq!(tool["role"], "tool", "{tool}");
    assert_eq!(tool["tool_call_id"], "call_bal_1");
    let result: Value = serde_json::from_str(tool["content"].as_str().unwrap()).unwrap();
    assert_eq!(result["wei"], "750000000000000000", "{result}");
    assert_eq!(result["formatted"], "0.75", "{result}");
}

#[tokio::test]
async fn the_tool_loop_runs_a_fragmented_tool_call_against_the_node() {
    let (env, agent) = balance_env(&["You have ", "0.75 ETH ", "on base."]).await;
    let connected = Address::repeat_byte(0xab).to_checksum(None);

    let response = post_chat(
        &env.app,
        "/api/chat",
        Some(&agent.token),
        json!({
            "agent_id": agent.id,
            "message": "how much ETH do I have on base?",
            "connected_wallet_address": connected,
        }),
    )
    .await;

    assert_eq!(response.status, StatusCode::OK, "{}", response.text);
    assert_no_key(&env, &response.text);
    let turn = &response.body;
    assert_turn_shape(turn);
    assert_eq!(turn["response"], "You have 0.75 ETH on base.");
    assert_eq!(
        turn["tokens_used"],
        120 + 17 + 260 + 31,
        "the usage of both calls: {turn}"
    );
    let calls = turn["chain_calls"].as_array().unwrap();
    assert_eq!(calls.len(), 1, "{turn}");
    assert_eq!(calls[0]["id"], "call_bal_1");
    assert_eq!(calls[0]["tool"], "get_balance");
    assert_eq!(calls[0]["args"], json!({"chain": "base"}));
    assert_eq!(calls[0]["result"]["wei"], "750000000000000000");
    let requests = env.llm.requests();
    check_balance_requests(&env, &agent, &requests, &connected);
    let offered = requests[0].tool_names();
    assert_eq!(
        offered,
        registry_tools(&[Capability::Read, Capability::Compare]),
        "read and compare tools only"
    );
    // The last round offers tools too (the model may still call one); the answer came as text.
    assert_eq!(env.llm.remaining(), 0);
}

#[tokio::test]
async fn the_stream_endpoint_runs_the_same_loop_and_counts_the_same_tokens() {
    let (env, agent) = balance_env(&["You ", "have 0.75 ", "ETH", " on base."]).await;
    let connected = Address::repeat_byte(0xcd).to_checksum(None);

    let events = stream_events(
        &env.app,
        &agent,
        json!({"agent_id": agent.id, "message": "how much ETH do I have on base?", "connected_wallet_address": connected}),
    )
    .await;

    let final_data = assert_complete_stream(&events);
    assert_no_key(
        &env,
        &serde_json::to_string(&events.iter().map(|(_, d)| d).collect::<Vec<_>>()).unwrap(),
    );
    assert_eq!(final_data["response"], "You have 0.75 ETH on base.");
    assert_eq!(final_data["tokens_used"], 120 + 17 + 260 + 31, "{final_data}");
    let deltas: Vec<&str> = events
        .iter()
        .filter(|(n, _)| n == "text_delta")
        .map(|(_, d)| d["text"].as_str().unwrap())
        .collect();
    assert_eq!(deltas.concat(), "You have 0.75 ETH on base.");
    assert!(
        deltas.len() >= 2,
        "the model's pieces are forwarded as they come: {deltas:?}"
    );
    let (_, tool_call) = &events[1];
    assert_eq!(tool_call["id"], "call_bal_1");
    assert_eq!(tool_call["args"], json!({"chain": "base"}));
    check_balance_requests(&env, &agent, &env.llm.requests(), &connected);
}

#[tokio::test]
async fn history_is_sent_oldest_first_and_only_the_newest_twenty_messages() {
    let env = openai_env(Vec::new(), &[]).await;
    let agent = agent_with(&env.app, "Memory", &["read"]).await;
    let mut conversation: Option<String> = None;
    for turn in 1..=12 {
        env.llm.push([Reply::text(&[&format!("answer {turn}")], 5, 2)]);
        let response = post_chat(
            &env.app,
            "/api/chat",
            Some(&agent.token),
            json!({"agent_id": agent.id, "message": format!("question {turn}"), "conversation_id": conversation}),
        )
        .await;
        assert_eq!(response.status, StatusCode::OK, "{}", response.text);
        assert_eq!(response.body["response"], format!("answer {turn}"));
        conversation = Some(response.body["conversation_id"].as_str().unwrap().to_string());
    }
    let requests = env.llm.requests();
    assert_eq!(requests.len(), 12);
    let dialogue = |request: &Recorded| -> Vec<(String, String)> {
        request
            .messages()
            .iter()
            .skip(1)
            .map(|m| {
                (
                    m["role"].as_str().unwrap().to_string(),
                    m["content"].as_str().unwrap_or_default().to_string(),
                )
            })
            .collect()
    };
    let expected = |turns: std::ops::Range<u32>, current: u32| -> Vec<(String, String)> {
        let mut out = Vec::new();
        for t in turns {
            out.push(("user".to_string(), format!("question {t}")));
            out.push(("assistant".to_string(), format!("answer {t}")));
        }
        out.push(("user".to_string(), format!("question {current}")));
        out
    };
    assert_eq!(requests[0].messages()[0]["role"], "system");
    assert_eq!(dialogue(&requests[0]), expected(1..1, 1));
    assert_eq!(
        dialogue(&requests[2]),
        expected(1..3, 3),
        "the third turn sees the first two, oldest first"
    );
    assert_eq!(
        dialogue(&requests[10]),
        expected(1..11, 11),
        "20 earlier messages are all sent"
    );
    assert_eq!(
        dialogue(&requests[11]),
        expected(2..12, 12),
        "of 22 earlier messages only the newest 20 are sent"
    );
}

#[tokio::test]
async fn tools_are_offered_and_enforced_by_capability() {
    let env = openai_env(
        vec![
            Reply::tool_calls(
                &[
                    ("call_cmp", "compare_gas", &["{}"]),
                    (
                        "call_send",
                        "send_native",
                        &[
                            "{\"chain\":\"base\",",
                            "\"to\":\"",
                            Anvil::DEV_ADDRESS,
                            "\",\"amount\":\"0.5\"}",
                        ],
                    ),
                ],
                40,
                9,
            ),
            Reply::text(&["I may not do that."], 70, 6),
        ],
        &[],
    )
    .await;
    let reader = agent_with(&env.app, "Reader", &["read"]).await;
    let wallet = address(&reader, "base");
    env.base
        .set_balance(wallet, U256::from(2_000_000_000_000_000_000u128))
        .await;
    let dev: Address = Anvil::DEV_ADDRESS.parse().unwrap();
    let dev_before = env.base.balance(dev).await;

    let response = post_turn(&env.app, &reader, "compare gas and send 0.5 ETH to the dev account").await;

    assert_eq!(response.status, StatusCode::OK, "{}", response.text);
    let turn = &response.body;
    assert_eq!(turn["response"], "I may not do that.");
    assert_eq!(turn["tokens_used"], 40 + 9 + 70 + 6);
    let calls = turn["chain_calls"].as_array().unwrap();
    assert_eq!(calls.len(), 2, "{turn}");
    for (call, (id, tool)) in calls
        .iter()
        .zip([("call_cmp", "compare_gas"), ("call_send", "send_native")])
    {
        assert_eq!(call["id"], id, "{call}");
        assert_eq!(call["tool"], tool, "{call}");
        assert_eq!(call["error"]["code"], "capability_denied", "{call}");
        assert!(call["result"].is_null(), "nothing ran: {call}");
    }
    let requests = env.llm.requests();
    assert_eq!(requests[0].tool_names(), READ_TOOLS, "only the read tools are offered");
    // The model is told of the refusals.
    let tool_messages: Vec<Value> = requests[1]
        .messages()
        .into_iter()
        .filter(|m| m["role"] == "tool")
        .collect();
    assert_eq!(tool_messages.len(), 2, "{:?}", requests[1].messages());
    for message in &tool_messages {
        let content: Value = serde_json::from_str(message["content"].as_str().unwrap()).unwrap();
        assert_eq!(content["error"]["code"], "capability_denied", "{content}");
    }
    // Nothing happened on chain and nothing was recorded.
    assert_eq!(env.base.nonce(wallet).await, 0);
    assert_eq!(env.base.balance(dev).await, dev_before);
    assert_eq!(transactions(&env.app, &reader).await, Vec::<Value>::new());

    // An agent with every capability is offered every tool.
    env.llm.push([Reply::text(&["ok"], 1, 1)]);
    let full = agent_with(&env.app, "Full", ALL_CAPABILITIES).await;
    let response = post_turn(&env.app, &full, "hello").await;
    assert_eq!(response.status, StatusCode::OK, "{}", response.text);
    assert_eq!(env.llm.requests()[2].tool_names(), registry_tools(&Capability::ALL));
}

/// The single conversation of `agent` and its messages.
async fn only_conversation(app: &TestApp, agent: &CreatedAgent) -> (Value, Vec<Value>) {
    let list = app.list_conversations(agent).await;
    assert_eq!(list.len(), 1, "{list:?}");
    let messages = app.messages(agent, list[0]["id"].as_str().unwrap()).await;
    (list[0].clone(), messages)
}

#[tokio::test]
async fn an_upstream_error_is_a_502_or_503_with_an_upstream_code() {
    let env = openai_env(
        vec![
            Reply::error(500, "server_error", "internal failure"),
            Reply::error(401, "invalid_api_key", "Incorrect API key provided."),
        ],
        &[],
    )
    .await;
    let agent = agent_with(&env.app, "Unlucky", &["read"]).await;

    let response = post_turn(&env.app, &agent, "hello").await;

    assert!(
        [StatusCode::BAD_GATEWAY, StatusCode::SERVICE_UNAVAILABLE].contains(&response.status),
        "{} {}",
        response.status,
        response.text
    );
    assert_error_shape(&response.body);
    let code = response.body["error"]["code"].as_str().unwrap();
    assert!(code.starts_with("upstream_"), "{}", response.body);
    assert!(
        !response.text.contains("internal failure"),
        "no upstream body: {}",
        response.text
    );
    // The failed turn is recorded whole: the user message and an assistant message with the error.
    let (conversation, messages) = only_conversation(&env.app, &agent).await;
    assert_eq!(conversation["message_count"], 2, "{conversation}");
    assert_eq!(messages[0]["content"], "hello");
    assert_eq!(messages[1]["role"], "assistant");
    assert!(
        messages[1]["content"]
            .as_str()
            .unwrap()
            .to_lowercase()
            .contains("error"),
        "{messages:?}"
    );

    // A refused key (4xx upstream) is an upstream error too, never a client error of the caller.
    let response = post_turn(&env.app, &agent, "hello again").await;
    assert!(
        response.status.is_server_error()
            && response.body["error"]["code"]
                .as_str()
                .unwrap()
                .starts_with("upstream_"),
        "{} {}",
        response.status,
        response.text
    );
    assert_error_shape(&response.body);
}

#[tokio::test]
async fn a_key_echoed_by_the_upstream_never_reaches_a_response() {
    let base = Anvil::start(BASE_ID);
    let key = format!("sk-test-{}", uuid::Uuid::new_v4().simple());
    let llm = LlmServer::start(vec![
        Reply::Status(
            401,
            json!({"error": {"message": format!("Incorrect API key provided: {key}."), "type": "invalid_request_error", "code": "invalid_api_key"}}),
        ),
        Reply::error(500, "server_error", &format!("upstream broke while using {key}")),
    ])
    .await;
    let mut vars = llm.app_vars(&key);
    vars.push(("RPC_URL_BASE", base.url()));
    let app = spawn_app_with(&vars).await;
    let agent = agent_with(&app, "Keyed", &["read"]).await;

    let sync = post_turn(&app, &agent, "hi").await;
    assert!(sync.status.is_server_error(), "{} {}", sync.status, sync.text);
    assert_error_shape(&sync.body);
    assert!(!sync.text.contains(&key), "{}", sync.text);

    let events = stream_events(&app, &agent, json!({"agent_id": agent.id, "message": "hi"})).await;
    assert_eq!(events.last().map(|(n, _)| n.as_str()), Some("error"), "{events:?}");
    for (_, data) in &events {
        assert!(!data.to_string().contains(&key), "{data}");
    }

    let list = app.list_conversations(&agent).await;
    assert!(!json!(list).to_string().contains(&key), "{list:?}");
    for conversation in &list {
        let messages = app.messages(&agent, conversation["id"].as_str().unwrap()).await;
        assert!(!json!(messages).to_string().contains(&key), "{messages:?}");
    }
    // The key was used, though.
    for request in llm.requests() {
        assert_eq!(request.header("authorization"), Some(format!("Bearer {key}").as_str()));
    }
}

#[tokio::test]
async fn an_upstream_that_hangs_is_a_504_after_the_timeout() {
    let env = openai_env(
        vec![Reply::text(&["too late"], 1, 1).after(Duration::from_secs(5))],
        &[("LLM_TIMEOUT_MS", "500")],
    )
    .await;
    let agent = agent_with(&env.app, "Hurried", &["read"]).await;

    let started = Instant::now();
    let response = post_turn(&env.app, &agent, "hello").await;

    assert_eq!(response.status, StatusCode::GATEWAY_TIMEOUT, "{}", response.text);
    assert_error_shape(&response.body);
    assert_eq!(response.body["error"]["code"], "upstream_timeout");
    assert!(
        started.elapsed() < Duration::from_secs(4),
        "the timeout is LLM_TIMEOUT_MS: {:?}",
        started.elapsed()
    );
    let (_, messages) = only_conversation(&env.app, &agent).await;
    assert_eq!(messages.len(), 2, "{messages:?}");
}

/// A small client for the subprocess.
async fn remote(
    client: &reqwest::Client,
    base: &str,
    path: &str,
    token: Option<&str>,
    body: Value,
) -> (StatusCode, Value) {
    let mut builder = client.post(format!("{base}{path}")).json(&body);
    if let Some(token) = token {
        builder = builder.header(TOKEN_HEADER, token);
    }
    let response = builder.send().await.expect("agentd answers");
    let status = response.status();
    let text = response.text().await.unwrap();
    (status, serde_json::from_str(&text).unwrap_or(Value::String(text)))
}

#[tokio::test]
async fn the_api_key_never_reaches_the_logs() {
    let base = Anvil::start(BASE_ID);
    let key = format!("sk-test-{}", uuid::Uuid::new_v4().simple());
    let llm = LlmServer::start(vec![
        Reply::tool_call("call_log", "get_balance", &["{\"chain\":", "\"base\"}"], 11, 3),
        Reply::text(&["Zero ", "wei."], 13, 2),
        Reply::Status(
            401,
            json!({"error": {"message": format!("Incorrect API key provided: {key}."), "code": "invalid_api_key"}}),
        ),
        Reply::error(500, "server_error", &format!("crashed with {key}")),
    ])
    .await;
    let dir = tempfile::tempdir().unwrap();
    let db = sqlite_url(dir.path());
    let mut vars = vec![
        ("DATABASE_URL", db.as_str()),
        ("BIND_ADDR", "127.0.0.1:0"),
        ("ENCRYPTION_KEY", ENCRYPTION_KEY),
        ("RUST_LOG", "trace"),
    ];
    vars.extend(llm.app_vars(&key));
    vars.push(("RPC_URL_BASE", base.url()));
    let server = ServerProcess::start(&vars, dir.path());
    let client = reqwest::Client::new();
    let url = server.base_url();
    let (status, agent) = remote(
        &client,
        &url,
        "/api/agents",
        None,
        json!({"name": "Logged", "chains": ["base"]}),
    )
    .await;
    assert_eq!(status, StatusCode::CREATED, "{agent}");
    let (id, token) = (agent["id"].as_str().unwrap(), agent["access_token"].as_str().unwrap());

    let (status, turn) = remote(
        &client,
        &url,
        "/api/chat",
        Some(token),
        json!({"agent_id": id, "message": "balance on base"}),
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{turn}");
    assert_eq!(turn["response"], "Zero wei.");
    assert_eq!(turn["chain_calls"][0]["result"]["wei"], "0");
    for _ in 0..2 {
        let (status, error) = remote(
            &client,
            &url,
            "/api/chat",
            Some(token),
            json!({"agent_id": id, "message": "again"}),
        )
        .await;
        assert!(status.is_server_error(), "{status} {error}");
    }
    assert_eq!(llm.requests().len(), 4);
    for request in llm.requests() {
        assert_eq!(request.header("authorization"), Some(format!("Bearer {key}").as_str()));
    }

    let outcome = server.terminate(Duration::from_secs(10));
    assert!(
        outcome.logs.contains("listening on"),
        "the logs were captured: {}",
        outcome.logs
    );
    assert!(
        outcome.logs.lines().count() > 20,
        "trace logging was on: {} lines",
        outcome.logs.lines().count()
    );
    let secret_part = key.trim_start_matches("sk-test-");
    assert!(
        !outcome.logs.contains(secret_part),
        "the API key appears in the logs:\n{}",
        outcome
            .logs
            .lines()
            .filter(|l| l.contains(secret_part))
            .collect::<Vec<_>>()
            .join("\n")
    );
}
