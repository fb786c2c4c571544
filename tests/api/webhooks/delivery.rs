//! Webhooks (§19) with a real receiver in the test suite, every delivery verified by the official Standard
//! Webhooks library (PyPI `standardwebhooks`): transfer, approval and policy events arrive signed; a failing
//! receiver gets the same `webhook-id` again; a receiver that was down while the service was killed gets the events
//! after the restart; two instances on one PostgreSQL deliver each event once; a rotated secret signs the next
//! delivery; private addresses, missing authority and bad bodies are refused; the secret is shown once only.

use std::net::TcpListener;
use std::time::Duration;

use reqwest::{Method, StatusCode};
use secrecy::ExposeSecret;
use serde_json::{Value, json};

use crate::anvil::Anvil;
use crate::helpers::chain::{BASE_CHAIN_ID, fresh_address, funded_agent, transfer_app, wait_for_transactions};
use crate::helpers::webhook_receiver::{Receiver, verified, verify};
use crate::helpers::{
    CreatedAgent, ENCRYPTION_KEY, ServerProcess, TOKEN_HEADER, TestApp, assert_error, spawn_app_with, test_database,
};
use crate::money::policy::{ADMIN, call, set_policy};
use crate::money::transfers_api::post_transfer;

/// What every webhook app runs with: an operator, the local receiver allowed, retries after about a second.
const WEBHOOK_VARS: [(&str, &str); 3] = [
    ("ADMIN_TOKEN", ADMIN),
    ("WEBHOOK_ALLOW_PRIVATE", "true"),
    ("WEBHOOK_RETRY_SCHEDULE", "1,1,1"),
];

async fn webhook_app(extra: &[(&str, &str)]) -> TestApp {
    let mut vars = WEBHOOK_VARS.to_vec();
    vars.extend_from_slice(extra);
    spawn_app_with(&vars).await
}

/// A request as the operator (`Authorization: Bearer ADMIN`).
async fn as_admin(app: &TestApp, method: Method, path: &str, body: Option<Value>) -> (StatusCode, Value) {
    let response = app.send(app.build(method, path, None, body).bearer_auth(ADMIN)).await;
    (response.status, response.body)
}

/// Registers an endpoint of `agent` (with owner authority) for `events`; the 201 answer.
async fn register(app: &TestApp, agent: &CreatedAgent, url: &str, events: Value) -> Value {
    let path = format!("/api/agents/{}/webhooks", agent.id);
    let (status, body) = call(
        app,
        agent,
        true,
        Method::POST,
        &path,
        Some(json!({"url": url, "events": events})),
    )
    .await;
    assert_eq!(status, StatusCode::CREATED, "{body}");
    assert!(body["secret"].as_str().unwrap().starts_with("whsec_"), "{body}");
    body
}

async fn plain_agent(app: &TestApp) -> CreatedAgent {
    app.create_agent_ok(json!({"name": "hooked", "chains": ["base"], "capabilities": ["read", "transact"]}))
        .await
}

/// A change that every test can make without a chain: the policy replaced (a `policy.updated` event).
async fn touch_policy(app: &TestApp, agent: &CreatedAgent, n: u32) {
    set_policy(app, agent, json!({"approval_ttl_secs": 600 + n})).await;
}

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port()
}

#[tokio::test]
async fn a_transfer_pushes_signed_pending_and_confirmed_events() {
    let anvil = Anvil::start(BASE_CHAIN_ID);
    let mut vars = WEBHOOK_VARS.to_vec();
    vars.push(("CONFIRMATIONS_BASE", "1"));
    let app = transfer_app(&anvil, &vars).await;
    let agent = funded_agent(&app, &anvil, Some(0.5)).await;
    let receiver = Receiver::start().await;
    let hook = register(
        &app,
        &agent,
        &receiver.url,
        json!(["transfer.pending", "transfer.confirmed"]),
    )
    .await;
    let secret = hook["secret"].as_str().unwrap();

    let to = fresh_address();
    let (status, sent) = post_transfer(
        &app,
        &agent,
        json!({"chain": "base", "to": to.to_string(), "amount": "0.01"}),
    )
    .await;
    assert!(status.is_success(), "{sent}");
    wait_for_transactions(&app, &agent, 1, "confirmed").await;
    let deliveries = receiver
        .wait_until(
            |d| d.iter().any(|d| d.ty() == "transfer.confirmed"),
            "transfer.confirmed",
        )
        .await;
    let payloads = verified(secret, &deliveries);
    let of = |ty: &str| {
        payloads
            .iter()
            .find(|p| p["type"] == ty)
            .unwrap_or_else(|| panic!("no {ty} in {payloads:?}"))
            .clone()
    };
    let pending = of("transfer.pending");
    let confirmed = of("transfer.confirmed");
    for event in [&pending, &confirmed] {
        assert_eq!(event["data"]["transfer_id"], sent["id"], "{event}");
        assert_eq!(event["data"]["agent_id"], agent.id.as_str(), "{event}");
        assert_eq!(event["data"]["kind"], "transfer", "{event}");
        assert_eq!(event["data"]["chain"], "base", "{event}");
        assert_eq!(event["data"]["amount"], "0.01", "{event}");
        assert_eq!(event["data"]["to"], to.to_checksum(None), "{event}");
        assert!(event["timestamp"].is_string(), "{event}");
    }
    assert_eq!(pending["data"]["status"], "pending");
    assert_eq!(confirmed["data"]["status"], "confirmed");
    assert!(confirmed["data"]["block_number"].is_number(), "{confirmed}");
    assert_eq!(deliveries.len(), 2, "one delivery per event");
    assert_ne!(deliveries[0].id(), deliveries[1].id());

    let path = format!(
        "/api/agents/{}/webhooks/{}/deliveries",
        agent.id,
        hook["id"].as_str().unwrap()
    );
    let log = receiver_log(&app, &agent, &path, 2).await;
    assert_eq!(log.len(), 2, "{log:?}");
    for entry in &log {
        assert_eq!(entry["status_code"], 204, "{entry}");
        assert_eq!(entry["attempt"], 1, "{entry}");
        assert!(
            entry["error"].is_null() && entry["next_attempt_at"].is_null(),
            "{entry}"
        );
    }
}

#[tokio::test]
async fn a_receiver_answering_500_twice_gets_the_same_webhook_id_a_third_time() {
    let app = webhook_app(&[]).await;
    let agent = plain_agent(&app).await;
    let receiver = Receiver::start().await;
    receiver.answer_next(2, 500);
    let hook = register(&app, &agent, &receiver.url, json!(["policy.updated"])).await;
    touch_policy(&app, &agent, 1).await;

    let deliveries = receiver.wait_for(3).await;
    assert_eq!(deliveries[0].id(), deliveries[1].id());
    assert_eq!(deliveries[1].id(), deliveries[2].id());
    let payloads = verified(hook["secret"].as_str().unwrap(), &deliveries[2..]);
    assert_eq!(payloads[0]["type"], "policy.updated");
    assert_eq!(payloads[0]["data"]["agent_id"], agent.id.as_str());
    assert_eq!(
        deliveries[0].body, deliveries[2].body,
        "every attempt sends the same body"
    );

    let path = format!(
        "/api/agents/{}/webhooks/{}/deliveries",
        agent.id,
        hook["id"].as_str().unwrap()
    );
    let log = receiver_log(&app, &agent, &path, 3).await;
    let attempts: Vec<_> = log
        .iter()
        .map(|e| (e["attempt"].clone(), e["status_code"].clone()))
        .collect();
    assert_eq!(
        attempts,
        vec![(json!(3), json!(204)), (json!(2), json!(500)), (json!(1), json!(500))]
    );
    assert!(log[1]["next_attempt_at"].is_string(), "{log:?}");
    assert!(log[1]["error"].as_str().unwrap().contains("500"), "{log:?}");
    assert!(log.iter().all(|e| e["event_id"] == deliveries[0].id()), "{log:?}");
    let (_, page) = call(
        &app,
        &agent,
        true,
        Method::GET,
        &format!("{path}?limit=1&before={}", log[0]["id"]),
        None,
    )
    .await;
    assert_eq!(page.as_array().unwrap().len(), 1);
    assert_eq!(page[0]["attempt"], 2, "{page}");
}

/// The deliveries log once it holds `n` entries (the worker records an attempt just after the receiver answers).
async fn receiver_log(app: &TestApp, agent: &CreatedAgent, path: &str, n: usize) -> Vec<Value> {
    for _ in 0..100 {
        let (status, log) = call(app, agent, true, Method::GET, path, None).await;
        assert_eq!(status, StatusCode::OK, "{log}");
        if log.as_array().unwrap().len() >= n {
            return log.as_array().unwrap().clone();
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!("the deliveries log never held {n} entries");
}

#[tokio::test]
async fn a_rotated_secret_signs_the_next_delivery_and_a_test_event_can_be_sent_again() {
    let app = webhook_app(&[]).await;
    let agent = plain_agent(&app).await;
    let receiver = Receiver::start().await;
    let hook = register(&app, &agent, &receiver.url, json!(["agent.updated"])).await;
    let base = format!("/api/agents/{}/webhooks/{}", agent.id, hook["id"].as_str().unwrap());
    let (status, rotated) = call(&app, &agent, true, Method::POST, &format!("{base}/rotate-secret"), None).await;
    assert_eq!(status, StatusCode::OK, "{rotated}");
    let (old, new) = (hook["secret"].as_str().unwrap(), rotated["secret"].as_str().unwrap());
    assert_ne!(old, new);

    // `webhook.test` reaches the endpoint although it subscribed to `agent.updated` only.
    let (status, queued) = call(&app, &agent, true, Method::POST, &format!("{base}/test"), None).await;
    assert_eq!(status, StatusCode::ACCEPTED, "{queued}");
    let deliveries = receiver.wait_for(1).await;
    assert_eq!(deliveries[0].id(), queued["event_id"].as_str().unwrap());
    assert_eq!(verified(new, &deliveries)[0]["type"], "webhook.test");
    assert!(verify(old, &deliveries)[0].is_err(), "the old secret no longer signs");

    let (status, _) = call(
        &app,
        &agent,
        true,
        Method::PUT,
        &format!("/api/agents/{}", agent.id),
        Some(json!({"name": "renamed"})),
    )
    .await;
    assert_eq!(status, StatusCode::OK);
    let deliveries = receiver.wait_for(2).await;
    let updated = &verified(new, &deliveries[1..])[0];
    assert_eq!(updated["type"], "agent.updated", "{updated}");

    let redeliver = format!("{base}/deliveries/{}/redeliver", deliveries[1].id());
    let (status, _) = call(&app, &agent, true, Method::POST, &redeliver, None).await;
    assert_eq!(status, StatusCode::ACCEPTED);
    let again = receiver.wait_for(3).await;
    assert_eq!(again[2].id(), deliveries[1].id(), "a redelivery keeps the event's id");
    let unknown = format!("{base}/deliveries/{}/redeliver", uuid::Uuid::new_v4());
    let refused = call(&app, &agent, true, Method::POST, &unknown, None).await;
    assert_eq!(refused.0, StatusCode::NOT_FOUND, "{}", refused.1);
}

#[tokio::test]
async fn an_approval_and_a_policy_refusal_are_pushed() {
    let anvil = Anvil::start(BASE_CHAIN_ID);
    let app = transfer_app(&anvil, &WEBHOOK_VARS).await;
    let agent = funded_agent(&app, &anvil, Some(0.5)).await;
    let policy = json!({"limits": {"base:ETH": {"approval_above": "0.005", "per_transfer": "0.05"}}});
    set_policy(&app, &agent, policy).await;
    let receiver = Receiver::start().await;
    let events = json!(["approval.required", "approval.resolved", "policy.denied"]);
    let hook = register(&app, &agent, &receiver.url, events).await;

    let to = fresh_address().to_string();
    let (status, held) = post_transfer(&app, &agent, json!({"chain": "base", "to": to, "amount": "0.01"})).await;
    assert!(status.is_success(), "{held}");
    let id = held["id"]
        .as_str()
        .or(held["transfer_id"].as_str())
        .unwrap()
        .to_string();
    let reject = format!("/api/agents/{}/transfers/{id}/reject", agent.id);
    let (status, body) = call(&app, &agent, true, Method::POST, &reject, None).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    let refused = post_transfer(&app, &agent, json!({"chain": "base", "to": to, "amount": "0.1"})).await;
    assert_error(&refused, StatusCode::FORBIDDEN, "policy_denied");

    let deliveries = receiver.wait_for(3).await;
    let payloads = verified(hook["secret"].as_str().unwrap(), &deliveries);
    let of = |ty: &str| {
        payloads
            .iter()
            .find(|p| p["type"] == ty)
            .unwrap_or_else(|| panic!("no {ty}: {payloads:?}"))
    };
    let required = of("approval.required");
    assert_eq!(required["data"]["transfer_id"], id.as_str(), "{required}");
    assert_eq!(required["data"]["kind"], "transfer");
    assert_eq!(required["data"]["amount"], "0.01");
    let resolved = of("approval.resolved");
    assert_eq!(resolved["data"]["transfer_id"], id.as_str(), "{resolved}");
    assert_eq!(resolved["data"]["decision"], "rejected", "{resolved}");
    let denied = of("policy.denied");
    assert_eq!(denied["data"]["rule"], "per_transfer", "{denied}");
    assert_eq!(denied["data"]["agent_id"], agent.id.as_str(), "{denied}");
}

#[tokio::test]
async fn a_held_call_is_pushed_with_its_decoded_call_and_simulated_changes() {
    let anvil = Anvil::start(BASE_CHAIN_ID);
    let app = transfer_app(&anvil, &WEBHOOK_VARS).await;
    let agent = funded_agent(&app, &anvil, Some(0.5)).await;
    let token = crate::helpers::solidity::deploy_test_token(&anvil, "Test Dollar", "TUSD", 6).await;
    let approve = "approve(address,uint256)";
    let policy = json!({"calls": {"default": "deny", "rules": [
        {"chain": "base", "to": token.to_string(), "function": approve, "action": "approve"}]}});
    set_policy(&app, &agent, policy).await;
    let receiver = Receiver::start().await;
    let hook = register(&app, &agent, &receiver.url, json!(["approval.required"])).await;

    let spender = fresh_address();
    let path = format!("/api/agents/{}/calls", agent.id);
    let body = json!({"chain": "base", "to": token.to_string(), "function": approve,
        "args": [spender.to_string(), "2500000"]});
    let (status, held) = app.request(Method::POST, &path, Some(&agent.token), Some(body)).await;
    assert_eq!(status, StatusCode::CREATED, "{held}");
    assert_eq!(held["status"], "awaiting_approval", "{held}");

    let deliveries = receiver.wait_for(1).await;
    let payloads = verified(hook["secret"].as_str().unwrap(), &deliveries);
    let data = &payloads[0]["data"];
    assert_eq!(payloads[0]["type"], "approval.required", "{data}");
    assert_eq!(data["kind"], "call", "{data}");
    assert_eq!(data["call"]["function"], approve, "{data}");
    assert_eq!(data["call"]["args"][1], "2500000", "{data}");
    assert_eq!(data["simulation"], held["simulation"], "{data}");
    assert_eq!(
        data["simulation"]["approvals"][0]["spender"],
        spender.to_checksum(None),
        "{data}"
    );
}

#[tokio::test]
async fn endpoints_on_private_addresses_are_refused_without_webhook_allow_private() {
    let app = spawn_app_with(&[("ADMIN_TOKEN", ADMIN)]).await;
    for url in [
        "http://127.0.0.1:9000/hook",
        "http://localhost/hook",
        "http://10.1.2.3/hook",
        "http://[::ffff:169.254.169.254]/hook",
        "http://[64:ff9b::7f00:1]/hook",
        "http://[2002:c0a8:101::1]/hook",
        "ftp://example.com/hook",
        "https://user:pass@example.com/hook",
    ] {
        let refused = as_admin(
            &app,
            Method::POST,
            "/api/webhooks",
            Some(json!({"url": url, "events": ["*"]})),
        )
        .await;
        assert_error(&refused, StatusCode::UNPROCESSABLE_ENTITY, "validation_failed");
        assert!(
            refused.1["error"]["details"]["fields"]["url"].is_string(),
            "{url}: {}",
            refused.1
        );
    }
    // A name is not resolved at registration: it is checked at every attempt.
    let (status, body) = as_admin(
        &app,
        Method::POST,
        "/api/webhooks",
        Some(json!({"url": "https://hooks.example.com/agentd", "events": ["*"], "description": "all agents"})),
    )
    .await;
    assert_eq!(status, StatusCode::CREATED, "{body}");
    assert_eq!(body["agent_id"], Value::Null);
    assert_eq!(body["enabled"], true);
}

#[tokio::test]
async fn webhook_endpoints_need_owner_authority_and_an_operator_for_every_agent() {
    // Without ADMIN_TOKEN nobody may watch every agent; an unguarded agent's token manages its own.
    let open = spawn_app_with(&[("WEBHOOK_ALLOW_PRIVATE", "true")]).await;
    let refused = open.request(Method::GET, "/api/webhooks", None, None).await;
    assert_error(&refused, StatusCode::UNAUTHORIZED, "unauthorized");
    let refused = as_admin(
        &open,
        Method::POST,
        "/api/webhooks",
        Some(json!({"url": "https://a.example/h", "events": ["*"]})),
    )
    .await;
    assert_error(&refused, StatusCode::UNAUTHORIZED, "unauthorized");
    let agent = plain_agent(&open).await;
    let path = format!("/api/agents/{}/webhooks", agent.id);
    let body = json!({"url": "https://a.example/h", "events": ["transfer.confirmed"]});
    let (status, created) = open
        .request(Method::POST, &path, Some(&agent.token), Some(body.clone()))
        .await;
    assert_eq!(status, StatusCode::CREATED, "{created}");
    assert_eq!(created["agent_id"], agent.id.as_str());

    let app = webhook_app(&[]).await;
    let agent = plain_agent(&app).await;
    let other = plain_agent(&app).await;
    let path = format!("/api/agents/{}/webhooks", agent.id);
    let by_agent = app
        .request(Method::POST, &path, Some(&agent.token), Some(body.clone()))
        .await;
    assert_error(&by_agent, StatusCode::FORBIDDEN, "owner_required");
    let read_by_agent = app.request(Method::GET, &path, Some(&agent.token), None).await;
    assert_error(&read_by_agent, StatusCode::FORBIDDEN, "owner_required");
    let by_other = app.request(Method::GET, &path, Some(&other.token), None).await;
    assert_error(&by_other, StatusCode::FORBIDDEN, "forbidden");
    let nobody = app.request(Method::GET, &path, None, None).await;
    assert_error(&nobody, StatusCode::UNAUTHORIZED, "missing_token");
    let wrong_admin = app
        .send(app.build(Method::GET, "/api/webhooks", None, None).bearer_auth("nope"))
        .await;
    assert_eq!(wrong_admin.status, StatusCode::UNAUTHORIZED);

    for (body, field) in [
        (
            json!({"url": "https://a.example/h", "events": ["transfer.nope"]}),
            "events",
        ),
        (json!({"url": "https://a.example/h", "events": []}), "events"),
        (json!({"url": "not a url", "events": ["*"]}), "url"),
        (
            json!({"url": "https://a.example/h", "events": ["*"], "agent_id": other.id}),
            "agent_id",
        ),
    ] {
        let refused = call(&app, &agent, true, Method::POST, &path, Some(body)).await;
        assert_error(&refused, StatusCode::UNPROCESSABLE_ENTITY, "validation_failed");
        assert!(
            refused.1["error"]["details"]["fields"][field].is_string(),
            "{}",
            refused.1
        );
    }

    let (status, created) = call(&app, &agent, true, Method::POST, &path, Some(body)).await;
    assert_eq!(status, StatusCode::CREATED, "{created}");
    let secret = created["secret"].as_str().unwrap().to_string();
    let wid = created["id"].as_str().unwrap();
    let (status, list) = call(&app, &agent, true, Method::GET, &path, None).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(list.as_array().unwrap().len(), 1);
    let (_, all) = as_admin(&app, Method::GET, "/api/webhooks", None).await;
    let (_, one) = as_admin(&app, Method::GET, &format!("/api/webhooks/{wid}"), None).await;
    for shown in [&list, &all, &one] {
        assert!(!shown.to_string().contains("whsec_"), "{shown}");
        assert!(!shown.to_string().contains(&secret[6..]), "{shown}");
    }
    // Another agent's owner reaches none of them.
    let foreign = format!("/api/agents/{}/webhooks/{wid}", other.id);
    let hidden = call(&app, &other, true, Method::GET, &foreign, None).await;
    assert_error(&hidden, StatusCode::NOT_FOUND, "webhook_not_found");

    let one_path = format!("{path}/{wid}");
    let (status, changed) = call(
        &app,
        &agent,
        true,
        Method::PATCH,
        &one_path,
        Some(json!({"enabled": false, "description": "paused"})),
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{changed}");
    assert_eq!(
        (changed["enabled"].clone(), changed["description"].clone()),
        (json!(false), json!("paused"))
    );
    let bad = call(
        &app,
        &agent,
        true,
        Method::PATCH,
        &one_path,
        Some(json!({"events": ["nope"]})),
    )
    .await;
    assert_error(&bad, StatusCode::UNPROCESSABLE_ENTITY, "validation_failed");
    let by_agent = app.request(Method::DELETE, &one_path, Some(&agent.token), None).await;
    assert_error(&by_agent, StatusCode::FORBIDDEN, "owner_required");
    let (status, _) = call(&app, &agent, true, Method::DELETE, &one_path, None).await;
    assert_eq!(status, StatusCode::NO_CONTENT);
    let gone = call(&app, &agent, true, Method::GET, &one_path, None).await;
    assert_error(&gone, StatusCode::NOT_FOUND, "webhook_not_found");

    let audit = format!("/api/agents/{}/audit", agent.id);
    let (_, entries) = call(&app, &agent, true, Method::GET, &audit, None).await;
    let actions: Vec<&str> = entries
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|e| e["action"].as_str())
        .collect();
    for action in ["webhook_created", "webhook_updated", "webhook_deleted"] {
        assert!(actions.contains(&action), "{action} in {actions:?}");
    }
    assert!(!entries.to_string().contains(&secret[6..]), "{entries}");
}

#[tokio::test]
async fn a_receiver_down_while_the_service_is_killed_gets_the_events_once_up() {
    let db = test_database().await;
    let db_url = db.config.database.url.expose_secret().to_string();
    let dir = tempfile::tempdir().unwrap();
    let port = free_port();
    let env = [
        ("BIND_ADDR", "127.0.0.1:0"),
        ("APP_ENV", "development"),
        ("ENCRYPTION_KEY", ENCRYPTION_KEY),
        ("DATABASE_URL", db_url.as_str()),
        ("ADMIN_TOKEN", ADMIN),
        ("WEBHOOK_ALLOW_PRIVATE", "true"),
        ("WEBHOOK_RETRY_SCHEDULE", "1,1,1,1,1,1,1,1,1,1,1,1,1,1,1"),
        ("RUST_LOG", "debug,sqlx=warn,hyper=info,reqwest=info"),
    ];
    let client = reqwest::Client::new();
    let server = ServerProcess::start(&env, dir.path());
    let base = server.base_url();
    let created: Value = client
        .post(format!("{base}/api/agents"))
        .bearer_auth(ADMIN)
        .json(&json!({"name": "killed", "chains": ["base"]}))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let (id, token) = (
        created["id"].as_str().unwrap(),
        created["access_token"].as_str().unwrap(),
    );
    let url = format!("http://127.0.0.1:{port}/hook");
    let hook: Value = client
        .post(format!("{base}/api/agents/{id}/webhooks"))
        .bearer_auth(ADMIN)
        .json(&json!({"url": url, "events": ["policy.updated", "agent.updated"]}))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let secret = hook["secret"].as_str().expect("a secret").to_string();
    for n in 0..3 {
        let response = client
            .put(format!("{base}/api/agents/{id}/policy"))
            .bearer_auth(ADMIN)
            .header(TOKEN_HEADER, token)
            .json(&json!({"approval_ttl_secs": 600 + n}))
            .send()
            .await
            .unwrap();
        assert_eq!(response.status(), StatusCode::OK);
    }
    // Attempts fail against the closed port; then the process dies without a chance to clean up.
    tokio::time::sleep(Duration::from_millis(700)).await;
    let mut logs = server.logs();
    drop(server); // SIGKILL
    let receiver = Receiver::start_on(port).await;
    let server = ServerProcess::start(&env, dir.path());
    let deliveries = receiver.wait_for(3).await;
    let payloads = verified(&secret, &deliveries);
    assert!(payloads.iter().all(|p| p["type"] == "policy.updated"), "{payloads:?}");
    let mut ids: Vec<&str> = deliveries.iter().map(|d| d.id()).collect();
    ids.sort();
    ids.dedup();
    assert_eq!(ids.len(), 3, "each event once");
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert_eq!(receiver.deliveries().len(), 3, "and no more");
    logs.push_str(&server.logs());

    // The secret is in no log line and not in the database in plain text.
    let key_part = &secret["whsec_".len()..];
    assert!(!logs.contains(key_part), "the secret was logged");
    if let Some(path) = db_url.strip_prefix("sqlite://") {
        drop(server);
        for file in [path.to_string(), format!("{path}-wal")] {
            if let Ok(bytes) = std::fs::read(&file) {
                let text = String::from_utf8_lossy(&bytes);
                assert!(
                    !text.contains(key_part) && !text.contains("whsec_"),
                    "the secret is in {file}"
                );
            }
        }
    } else {
        use sqlx::Connection;
        let mut conn = sqlx::PgConnection::connect(&db_url).await.unwrap();
        let (dump,): (String,) = sqlx::query_as("SELECT string_agg(w::text, ' ') FROM webhooks w")
            .fetch_one(&mut conn)
            .await
            .unwrap();
        assert!(!dump.contains(key_part) && !dump.contains("whsec_"), "{dump}");
    }
}

#[tokio::test]
async fn two_instances_on_postgresql_deliver_each_event_once() {
    if std::env::var("TEST_POSTGRES_URL").map_or(true, |v| v.trim().is_empty()) {
        eprintln!("skipped: TEST_POSTGRES_URL is not set (one SQLite file serves one instance)");
        return;
    }
    let first = webhook_app(&[]).await;
    let mut vars = WEBHOOK_VARS.to_vec();
    vars.push(("DATABASE_URL", first.db_url.as_str()));
    let second = spawn_app_with(&vars).await;
    let agent = plain_agent(&first).await;
    let receiver = Receiver::start().await;
    let hook = register(&first, &agent, &receiver.url, json!(["policy.updated"])).await;
    for n in 0..12 {
        let app = if n % 2 == 0 { &first } else { &second };
        touch_policy(app, &agent, n).await;
    }
    let deliveries = receiver.wait_for(12).await;
    tokio::time::sleep(Duration::from_millis(1500)).await;
    let deliveries_after = receiver.deliveries();
    assert_eq!(deliveries_after.len(), 12, "no event was delivered twice");
    let mut ids: Vec<&str> = deliveries.iter().map(|d| d.id()).collect();
    ids.sort();
    ids.dedup();
    assert_eq!(ids.len(), 12);
    verified(hook["secret"].as_str().unwrap(), &deliveries);
}

#[tokio::test]
async fn a_rotated_master_key_keeps_every_webhook_secret() {
    const NEW_KEY: &str = "5b1c0f6e7d2a4c9b8e3f1a0d6c5b4a39281706f5e4d3c2b1a09f8e7d6c5b4a39";
    let db = test_database().await;
    let db_url = db.config.database.url.expose_secret().to_string();
    let dir = tempfile::tempdir().unwrap();
    let env = |key: &'static str| {
        vec![
            ("BIND_ADDR", "127.0.0.1:0"),
            ("APP_ENV", "development"),
            ("ENCRYPTION_KEY", key),
            ("DATABASE_URL", db_url.as_str()),
            ("ADMIN_TOKEN", ADMIN),
            ("WEBHOOK_ALLOW_PRIVATE", "true"),
        ]
    };
    let receiver = Receiver::start().await;
    let client = reqwest::Client::new();
    let first = ServerProcess::start(&env(ENCRYPTION_KEY), dir.path());
    let base = first.base_url();
    let created: Value = client
        .post(format!("{base}/api/agents"))
        .bearer_auth(ADMIN)
        .json(&json!({"name": "rotated", "chains": ["base"]}))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let id = created["id"].as_str().unwrap().to_string();
    let hook: Value = client
        .post(format!("{base}/api/webhooks"))
        .bearer_auth(ADMIN)
        .json(&json!({"url": receiver.url, "events": ["policy.updated"], "agent_id": id}))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let secret = hook["secret"].as_str().expect("a secret").to_string();
    let stopped = first.terminate(Duration::from_secs(10));
    assert!(stopped.status.is_some_and(|s| s.success()), "{}", stopped.logs);

    let mut rotate_env = env(ENCRYPTION_KEY);
    rotate_env.push(("NEW_ENCRYPTION_KEY", NEW_KEY));
    let rotated = crate::helpers::run_subcommand(&["rotate-key"], &rotate_env, dir.path(), Duration::from_secs(30));
    assert!(rotated.status.is_some_and(|s| s.success()), "{}", rotated.logs);

    let second = ServerProcess::start(&env(NEW_KEY), dir.path());
    let response = client
        .put(format!("{}/api/agents/{id}/policy", second.base_url()))
        .bearer_auth(ADMIN)
        .json(&json!({"approval_ttl_secs": 900}))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), StatusCode::OK);
    let deliveries = receiver.wait_for(1).await;
    assert_eq!(verified(&secret, &deliveries)[0]["type"], "policy.updated");
}

#[tokio::test]
async fn an_endpoint_whose_every_attempt_failed_for_a_day_is_disabled_and_audited() {
    let anvil = Anvil::start(BASE_CHAIN_ID);
    let app = transfer_app(&anvil, &WEBHOOK_VARS).await;
    let agent = funded_agent(&app, &anvil, Some(0.5)).await;
    // Nothing listens there: every attempt fails.
    let url = format!("http://127.0.0.1:{}/hook", free_port());
    let hook = register(&app, &agent, &url, json!(["*"])).await;
    let id = hook["id"].as_str().unwrap().to_owned();
    let one = format!("/api/agents/{}/webhooks/{id}", agent.id);
    let test = format!("{one}/test");
    let deliveries = format!("{one}/deliveries");
    let attempts = || async {
        let (_, list) = call(&app, &agent, true, Method::GET, &deliveries, None).await;
        list.as_array().map_or(0, Vec::len)
    };
    let (status, _) = call(&app, &agent, true, Method::POST, &test, None).await;
    assert_eq!(status, StatusCode::ACCEPTED);
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    while attempts().await == 0 {
        assert!(std::time::Instant::now() < deadline, "no attempt was made");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let (_, still) = call(&app, &agent, true, Method::GET, &one, None).await;
    assert_eq!(still["enabled"], true, "one failure does not disable: {still}");

    // 25 hours pass on the app's clock: its failures began more than a day ago, and the next failed attempt
    // disables it.
    app.clock.advance(Duration::from_secs(25 * 3600));
    let (status, _) = call(&app, &agent, true, Method::POST, &test, None).await;
    assert_eq!(status, StatusCode::ACCEPTED);
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    loop {
        let (_, now) = call(&app, &agent, true, Method::GET, &one, None).await;
        if now["enabled"] == false {
            break;
        }
        assert!(std::time::Instant::now() < deadline, "not disabled: {now}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let audit = format!("/api/agents/{}/audit", agent.id);
    let (_, entries) = call(&app, &agent, true, Method::GET, &audit, None).await;
    let disabled = entries
        .as_array()
        .unwrap()
        .iter()
        .find(|e| e["action"] == "webhook_disabled")
        .unwrap_or_else(|| panic!("no webhook_disabled in {entries}"));
    assert_eq!(disabled["actor"], "system", "{disabled}");
}
