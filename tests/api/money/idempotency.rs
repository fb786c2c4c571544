//! `Idempotency-Key` on `POST /api/agents/{id}/transfers` and `POST /api/chat` (docs/api.md §12), and the chat
//! turn's deadline: a repeat answers the first answer and does nothing else (checked on the node and in the stored
//! conversation), also across two app instances on one database; another body is refused; a repeat while the
//! first runs gets 409; a turn past `LLM_TURN_TIMEOUT_MS` is stored as failed with what it did and answers 504.

use std::time::{Duration, Instant};

use reqwest::header::CONTENT_TYPE;
use reqwest::{Method, StatusCode};
use serde_json::{Value, json};

use crate::anvil::Anvil;
use crate::helpers::chain::{
    BASE_CHAIN_ID, CENT_ETH, fresh_address, funded_agent, sending_agent, transfer_app, wait_for_transactions, wallet,
    wei,
};
use crate::helpers::llm_server::{LlmServer, Reply};
use crate::helpers::{CreatedAgent, TestApp, TestResponse, assert_error, base_vars, spawn_app_with};

const KEY: &str = "idempotency-key";

/// `POST /api/agents/{id}/transfers` with a raw JSON text body and an optional key.
async fn transfer(app: &TestApp, agent: &CreatedAgent, key: Option<&str>, body: &str) -> TestResponse {
    let path = format!("/api/agents/{}/transfers", agent.id);
    let mut builder = app
        .build(Method::POST, &path, Some(&agent.token), None)
        .header(CONTENT_TYPE, "application/json")
        .body(body.to_string());
    if let Some(key) = key {
        builder = builder.header(KEY, key);
    }
    app.send(builder).await
}

/// `POST /api/chat` with a key.
async fn chat(app: &TestApp, agent: &CreatedAgent, key: &str, message: &str) -> TestResponse {
    let body = json!({"agent_id": agent.id, "message": message});
    let builder = app
        .build(Method::POST, "/api/chat", Some(&agent.token), Some(body))
        .header(KEY, key);
    app.send(builder).await
}

fn order(to: impl ToString, amount: &str) -> String {
    format!(
        r#"{{"chain": "base", "to": "{}", "amount": "{amount}"}}"#,
        to.to_string()
    )
}

fn error_of(response: &TestResponse) -> (StatusCode, Value) {
    (response.status, response.body.clone())
}

/// Waits until the scripted model has received `count` requests (the first request is then inside its turn).
async fn wait_for_llm_requests(llm: &LlmServer, count: usize) {
    let deadline = Instant::now() + Duration::from_secs(10);
    while llm.requests().len() < count {
        assert!(
            Instant::now() < deadline,
            "the model got {} requests",
            llm.requests().len()
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

async fn llm_app(llm: &LlmServer, extra: &[(&str, &str)]) -> TestApp {
    let mut vars = llm.app_vars("sk-test-idempotency");
    vars.extend_from_slice(extra);
    spawn_app_with(&vars).await
}

#[tokio::test]
async fn an_idempotent_transfer_is_made_once_and_replayed() {
    let anvil = Anvil::start(BASE_CHAIN_ID);
    let app = transfer_app(&anvil, &[]).await;
    let agent = funded_agent(&app, &anvil, Some(0.5)).await;
    let to = fresh_address();

    let first = transfer(&app, &agent, Some("pay-1"), &order(to, "0.01")).await;
    assert_eq!(first.status, StatusCode::CREATED, "{}", first.body);
    // The same JSON value with its keys in another order and other spacing is the same request.
    let reordered = format!(r#"{{ "amount":"0.01","to":"{to}",  "chain":"base"}}"#);
    let again = transfer(&app, &agent, Some("pay-1"), &reordered).await;
    assert_eq!(again.status, StatusCode::CREATED, "{}", again.body);
    assert_eq!(again.body, first.body, "the first answer again, same id");
    assert_eq!(
        again.headers.get("idempotent-replayed").map(|v| v.as_bytes()),
        Some(&b"true"[..])
    );

    wait_for_transactions(&app, &agent, 1, "confirmed").await;
    assert_eq!(anvil.nonce(wallet(&agent)).await, 1, "one transaction on the node");
    assert_eq!(anvil.balance(to).await, wei(CENT_ETH), "paid once");

    let other = transfer(&app, &agent, Some("pay-1"), &order(to, "0.02")).await;
    assert_error(
        &error_of(&other),
        StatusCode::UNPROCESSABLE_ENTITY,
        "idempotency_key_reused",
    );
    let elsewhere = transfer(&app, &agent, Some("pay-1"), &order(fresh_address(), "0.01")).await;
    assert_error(
        &error_of(&elsewhere),
        StatusCode::UNPROCESSABLE_ENTITY,
        "idempotency_key_reused",
    );
    assert_eq!(anvil.nonce(wallet(&agent)).await, 1, "nothing more was sent");

    let unkeyed = transfer(&app, &agent, None, &order(to, "0.01")).await;
    assert_eq!(unkeyed.status, StatusCode::CREATED, "without a key every request sends");
    let fresh_key = transfer(&app, &agent, Some("pay-2"), &order(to, "0.01")).await;
    assert_eq!(fresh_key.status, StatusCode::CREATED);
    assert_ne!(fresh_key.body["id"], first.body["id"]);
    wait_for_transactions(&app, &agent, 3, "confirmed").await;
    assert_eq!(anvil.nonce(wallet(&agent)).await, 3);
}

#[tokio::test]
async fn keys_are_per_agent() {
    let anvil = Anvil::start(BASE_CHAIN_ID);
    let app = transfer_app(&anvil, &[]).await;
    let one = funded_agent(&app, &anvil, Some(0.5)).await;
    let two = funded_agent(&app, &anvil, Some(0.5)).await;
    let body = order(fresh_address(), "0.01");
    let first = transfer(&app, &one, Some("shared"), &body).await;
    let second = transfer(&app, &two, Some("shared"), &body).await;
    assert_eq!(first.status, StatusCode::CREATED, "{}", first.body);
    assert_eq!(second.status, StatusCode::CREATED, "{}", second.body);
    assert_ne!(first.body["id"], second.body["id"]);
    assert_eq!(anvil.nonce(wallet(&two)).await, 1);
}

#[tokio::test]
async fn malformed_keys_are_refused_and_nothing_is_sent() {
    let anvil = Anvil::start(BASE_CHAIN_ID);
    let app = transfer_app(&anvil, &[]).await;
    let agent = funded_agent(&app, &anvil, Some(0.5)).await;
    let long = "k".repeat(256);
    for key in ["two words", long.as_str(), "caf\u{e9}"] {
        let path = format!("/api/agents/{}/transfers", agent.id);
        let builder = app
            .build(Method::POST, &path, Some(&agent.token), None)
            .header(CONTENT_TYPE, "application/json")
            .header(KEY, reqwest::header::HeaderValue::from_bytes(key.as_bytes()).unwrap())
            .body(order(fresh_address(), "0.01"));
        let refused = app.send(builder).await;
        assert_error(
            &error_of(&refused),
            StatusCode::UNPROCESSABLE_ENTITY,
            "validation_failed",
        );
    }
    let longest = "k".repeat(255);
    let accepted = transfer(&app, &agent, Some(&longest), &order(fresh_address(), "0.01")).await;
    assert_eq!(accepted.status, StatusCode::CREATED, "{}", accepted.body);
    assert_eq!(anvil.nonce(wallet(&agent)).await, 1);
}

#[tokio::test]
async fn validation_errors_release_the_key_and_refusals_are_kept() {
    let anvil = Anvil::start(BASE_CHAIN_ID);
    let app = transfer_app(&anvil, &[]).await;
    let agent = funded_agent(&app, &anvil, Some(0.5)).await;
    let to = fresh_address();

    let invalid = transfer(&app, &agent, Some("fix-me"), &order("0x12", "0.01")).await;
    assert_error(
        &error_of(&invalid),
        StatusCode::UNPROCESSABLE_ENTITY,
        "validation_failed",
    );
    let malformed = transfer(&app, &agent, Some("fix-me"), "{").await;
    assert_eq!(malformed.status, StatusCode::BAD_REQUEST);
    let corrected = transfer(&app, &agent, Some("fix-me"), &order(to, "0.01")).await;
    assert_eq!(
        corrected.status,
        StatusCode::CREATED,
        "the key was not used up: {}",
        corrected.body
    );

    let capped = funded_agent(&app, &anvil, Some(0.005)).await;
    let refused = transfer(&app, &capped, Some("too-much"), &order(to, "0.01")).await;
    assert_error(&error_of(&refused), StatusCode::FORBIDDEN, "spending_cap_exceeded");
    let (status, _) = app
        .put_agent(&capped.id, &capped.token, json!({"spending_cap": 1}))
        .await;
    assert_eq!(status, StatusCode::OK);
    let replayed = transfer(&app, &capped, Some("too-much"), &order(to, "0.01")).await;
    assert_eq!(
        replayed.status,
        StatusCode::FORBIDDEN,
        "the refusal is the answer: {}",
        replayed.body
    );
    assert_eq!(replayed.body, refused.body);
    assert_eq!(anvil.nonce(wallet(&capped)).await, 0, "nothing was sent");

    let reader = sending_agent(&app, None).await;
    let (status, _) = app
        .put_agent(&reader.id, &reader.token, json!({"capabilities": ["read"]}))
        .await;
    assert_eq!(status, StatusCode::OK);
    let denied = transfer(&app, &reader, Some("no-transact"), &order(to, "0.01")).await;
    assert_error(&error_of(&denied), StatusCode::FORBIDDEN, "capability_denied");
    let again = transfer(&app, &reader, Some("no-transact"), &order(to, "0.01")).await;
    assert_eq!(
        again.headers.get("idempotent-replayed").map(|v| v.as_bytes()),
        Some(&b"true"[..])
    );
}

#[tokio::test]
async fn an_idempotent_chat_turn_is_made_once() {
    let llm = LlmServer::start(vec![Reply::text(&["Hello ", "there"], 5, 2)]).await;
    let app = llm_app(&llm, &[]).await;
    let agent = app.create_default_agent().await;

    let first = chat(&app, &agent, "turn-1", "hi").await;
    assert_eq!(first.status, StatusCode::OK, "{}", first.body);
    let again = chat(&app, &agent, "turn-1", "hi").await;
    assert_eq!(again.status, StatusCode::OK, "{}", again.body);
    assert_eq!(again.body, first.body, "the same answer, same message_id");
    assert_eq!(llm.requests().len(), 1, "the model was asked once");
    let conversation = first.body["conversation_id"].as_str().unwrap();
    assert_eq!(
        app.messages(&agent, conversation).await.len(),
        2,
        "one user message, one answer"
    );
    assert_eq!(app.list_conversations(&agent).await.len(), 1);

    let other = chat(&app, &agent, "turn-1", "hello").await;
    assert_error(
        &error_of(&other),
        StatusCode::UNPROCESSABLE_ENTITY,
        "idempotency_key_reused",
    );
    let empty = chat(&app, &agent, "turn-2", "   ").await;
    assert_error(&error_of(&empty), StatusCode::UNPROCESSABLE_ENTITY, "validation_failed");
    assert_eq!(llm.requests().len(), 1);
}

#[tokio::test]
async fn a_repeat_while_the_first_runs_is_refused_then_replayed() {
    let llm = LlmServer::start(vec![
        Reply::text(&["slow answer"], 5, 2).after(Duration::from_millis(1500)),
    ])
    .await;
    let app = llm_app(&llm, &[]).await;
    let agent = app.create_default_agent().await;

    let (first, repeat) = tokio::join!(chat(&app, &agent, "slow", "hi"), async {
        wait_for_llm_requests(&llm, 1).await;
        chat(&app, &agent, "slow", "hi").await
    });
    assert_error(&error_of(&repeat), StatusCode::CONFLICT, "idempotency_in_progress");
    assert_eq!(first.status, StatusCode::OK, "{}", first.body);
    let after = chat(&app, &agent, "slow", "hi").await;
    assert_eq!(after.body, first.body);
    assert_eq!(llm.requests().len(), 1);
}

#[tokio::test]
async fn two_instances_on_one_database_run_a_keyed_turn_once() {
    let llm = LlmServer::start(vec![
        Reply::text(&["shared answer"], 5, 2).after(Duration::from_millis(1500)),
    ])
    .await;
    let first_app = llm_app(&llm, &[]).await;
    let second_app = llm_app(&llm, &[("DATABASE_URL", &first_app.db_url)]).await;
    let agent = first_app.create_default_agent().await;

    let (first, repeat) = tokio::join!(chat(&first_app, &agent, "both", "hi"), async {
        wait_for_llm_requests(&llm, 1).await;
        chat(&second_app, &agent, "both", "hi").await
    });
    assert_error(&error_of(&repeat), StatusCode::CONFLICT, "idempotency_in_progress");
    assert_eq!(first.status, StatusCode::OK, "{}", first.body);
    let replayed = chat(&second_app, &agent, "both", "hi").await;
    assert_eq!(replayed.status, StatusCode::OK, "{}", replayed.body);
    assert_eq!(replayed.body, first.body, "the other instance answers the first answer");
    assert_eq!(llm.requests().len(), 1, "the turn ran once");
    let conversation = first.body["conversation_id"].as_str().unwrap();
    assert_eq!(second_app.messages(&agent, conversation).await.len(), 2);
}

#[tokio::test]
async fn a_turn_past_its_deadline_is_stored_as_failed_with_its_transfer_and_answers_504() {
    let anvil = Anvil::start(BASE_CHAIN_ID);
    let to = fresh_address();
    let args = format!(r#"{{"chain": "base", "to": "{to}", "amount": "0.01"}}"#);
    let llm = LlmServer::start(vec![
        Reply::tool_call("call_1", "send_native", &[&args], 10, 5),
        Reply::text(&["too late"], 10, 5).after(Duration::from_secs(5)),
    ])
    .await;
    let app = llm_app(&llm, &[("RPC_URL_BASE", anvil.url()), ("LLM_TURN_TIMEOUT_MS", "1500")]).await;
    let agent = funded_agent(&app, &anvil, Some(0.5)).await;

    let started = Instant::now();
    let cut = chat(&app, &agent, "deadline", "pay them").await;
    assert_error(&error_of(&cut), StatusCode::GATEWAY_TIMEOUT, "upstream_timeout");
    assert!(
        started.elapsed() < Duration::from_secs(4),
        "cut by the turn deadline, not the model"
    );
    assert_eq!(
        anvil.nonce(wallet(&agent)).await,
        1,
        "the transfer it made went through"
    );

    let conversations = app.list_conversations(&agent).await;
    assert_eq!(conversations.len(), 1);
    // The watcher adds its confirmation to the conversation too (possibly before the turn's failed answer).
    let messages = app.messages(&agent, conversations[0]["id"].as_str().unwrap()).await;
    let users: Vec<&Value> = messages.iter().filter(|m| m["role"] == "user").collect();
    assert_eq!(users.len(), 1, "one user message: {messages:#?}");
    assert_eq!(users[0]["content"], "pay them");
    let turn: Vec<&Value> = messages
        .iter()
        .filter(|m| m["role"] == "assistant" && !m["chain_calls"].as_array().is_none_or(Vec::is_empty))
        .collect();
    assert_eq!(turn.len(), 1, "one answer of the turn: {messages:#?}");
    let answer = turn[0];
    assert!(
        answer["content"].as_str().unwrap_or_default().contains("[error]"),
        "{answer}"
    );
    let calls = answer["chain_calls"].as_array().expect("chain_calls");
    assert_eq!(calls.len(), 1, "what it had done is recorded: {answer}");
    assert!(calls[0]["result"]["tx_hash"].is_string(), "{answer}");

    let retried = chat(&app, &agent, "deadline", "pay them").await;
    assert_eq!(
        retried.status,
        StatusCode::GATEWAY_TIMEOUT,
        "the retry gets the first answer"
    );
    assert_eq!(llm.requests().len(), 2, "and runs nothing");
    assert_eq!(anvil.nonce(wallet(&agent)).await, 1, "the retry paid nothing");
}

#[test]
fn a_turn_deadline_not_below_the_http_timeout_is_refused_at_start() {
    let dir = tempfile::tempdir().expect("a temporary directory");
    for (value, accepted) in [("180000", false), ("0", false), ("179999", true)] {
        let mut vars = base_vars(&dir);
        vars.insert("LLM_TURN_TIMEOUT_MS".into(), value.into());
        let config = agentd::config::Config::from_vars(vars);
        assert_eq!(config.is_ok(), accepted, "LLM_TURN_TIMEOUT_MS={value}");
    }
}

/// The store behind the keys, on the backend the app opened (SQLite file or PostgreSQL): a claim, its answer, a
/// stale claim taken over (and its first holder unable to answer), a stale claim that moved money told as stopped,
/// expiry after 24 h, a release.
#[tokio::test]
async fn the_key_store_claims_answers_takes_over_stale_claims_and_forgets_after_a_day() {
    use agentd::store::{ClaimOutcome, KeyClaim};
    let app = crate::helpers::spawn_app().await;
    let agent_id: uuid::Uuid = app.create_default_agent().await.id.parse().unwrap();
    let dir = tempfile::tempdir().expect("a temporary directory");
    let mut vars = base_vars(&dir);
    vars.insert("DATABASE_URL".into(), app.db_url.clone());
    let config = agentd::config::Config::from_vars(vars).expect("a configuration");
    let store = agentd::store::open(&config).await.expect("the store opens");

    let now = agentd::domain::now();
    let at = |now: chrono::DateTime<chrono::Utc>, key: &'static str, fingerprint: &'static str| KeyClaim {
        agent_id,
        key,
        fingerprint,
        now,
        expired_before: now - chrono::TimeDelta::hours(24),
        held_until: now + chrono::TimeDelta::seconds(60),
    };
    let claim = |c: KeyClaim<'static>| {
        let store = store.clone();
        async move { store.claim_key(&c).await.expect("a claim") }
    };

    let ClaimOutcome::Claimed(first) = claim(at(now, "k", "f1")).await else {
        panic!("a fresh key is claimed")
    };
    assert_eq!(claim(at(now, "k", "f1")).await, ClaimOutcome::InProgress);
    assert_eq!(claim(at(now, "k", "f2")).await, ClaimOutcome::Reused);
    store
        .answer_key(agent_id, "k", first, 201, r#"{"id":1}"#)
        .await
        .unwrap();
    let answered = ClaimOutcome::Answered {
        status: 201,
        body: r#"{"id":1}"#.into(),
    };
    assert_eq!(claim(at(now, "k", "f1")).await, answered);
    assert_eq!(claim(at(now, "k", "f2")).await, ClaimOutcome::Reused);

    let a_minute_ago = now - chrono::TimeDelta::seconds(61);
    let ClaimOutcome::Claimed(renewed) = claim(at(a_minute_ago, "r", "f1")).await else {
        panic!("claimed")
    };
    let until = now + chrono::TimeDelta::seconds(60);
    assert!(store.renew_key(agent_id, "r", renewed, until).await.unwrap());
    assert_eq!(
        claim(at(now, "r", "f1")).await,
        ClaimOutcome::InProgress,
        "a renewed lease is not taken over"
    );

    let ClaimOutcome::Claimed(dead) = claim(at(a_minute_ago, "s", "f1")).await else {
        panic!("claimed")
    };
    let ClaimOutcome::Claimed(taker) = claim(at(now, "s", "f1")).await else {
        panic!("a claim whose lease ran out is taken over")
    };
    assert!(
        !store.renew_key(agent_id, "s", dead, until).await.unwrap(),
        "nor renewed by its first holder"
    );
    store.answer_key(agent_id, "s", dead, 500, "{}").await.unwrap();
    assert_eq!(
        claim(at(now, "s", "f1")).await,
        ClaimOutcome::InProgress,
        "the first holder cannot answer"
    );
    store.answer_key(agent_id, "s", taker, 200, "{}").await.unwrap();
    assert!(matches!(
        claim(at(now, "s", "f1")).await,
        ClaimOutcome::Answered { status: 200, .. }
    ));

    // A claim that moved money (marked by its reservation, here by hand, before the transfer was kept) and whose
    // lease ran out is not taken over: its request stopped, and the key's answer is whatever is recalled for it.
    let ClaimOutcome::Claimed(stopped) = claim(at(a_minute_ago, "m", "f1")).await else {
        panic!("claimed")
    };
    crate::auth::owners::execute(
        &app,
        "UPDATE idempotency_keys SET acted_at = created_at WHERE idem_key = 'm'",
    )
    .await;
    assert_eq!(
        claim(at(now, "m", "f1")).await,
        ClaimOutcome::Stopped {
            claim_id: stopped,
            transfer_id: None
        }
    );
    store.answer_key(agent_id, "m", stopped, 201, "{}").await.unwrap();
    assert!(matches!(
        claim(at(now, "m", "f1")).await,
        ClaimOutcome::Answered { status: 201, .. }
    ));

    let tomorrow = now + chrono::TimeDelta::hours(25);
    assert!(
        matches!(claim(at(tomorrow, "k", "f2")).await, ClaimOutcome::Claimed(_)),
        "forgotten after 24 h"
    );

    let ClaimOutcome::Claimed(released) = claim(at(now, "r", "f1")).await else {
        panic!("claimed")
    };
    store.release_key(agent_id, "r", released).await.unwrap();
    assert!(
        matches!(claim(at(now, "r", "f2")).await, ClaimOutcome::Claimed(_)),
        "a released key is free"
    );

    assert!(
        store
            .get_transaction(agent_id, uuid::Uuid::new_v4())
            .await
            .unwrap()
            .is_none()
    );
    let page = store
        .transaction_page(agent_id, Some(uuid::Uuid::new_v4()), 10)
        .await
        .unwrap();
    assert!(page.is_none(), "an unknown cursor is told apart from an empty page");
    assert_eq!(
        store.transaction_page(agent_id, None, 10).await.unwrap(),
        Some(Vec::new())
    );
}

/// A claim is a lease that only a stopped holder loses, and a holder that lost it moves nothing (issue 22, point 11).
/// The first request is held in front of the node; its lease is made to run out (as if its process had been stopped
/// past it). Before it moved money, a repeat takes the key over and sends; the first, released, is refused 409 and
/// the chain shows one transfer. After it moved money (held at the broadcast), the claim is never taken over: a repeat
/// answers the transfer it stored (201, the same id; issue 50 point 4) and never sends again.
#[tokio::test]
async fn a_request_that_lost_its_claim_moves_nothing_and_a_claim_that_moved_money_is_never_taken_over() {
    for held_at in ["eth_getBalance", "eth_sendRawTransaction"] {
        let anvil = Anvil::start(BASE_CHAIN_ID);
        let gate = crate::helpers::gated_rpc::GatedRpc::start(anvil.url()).await;
        let app = spawn_app_with(&[("RPC_URL_BASE", gate.url())]).await;
        let agent = sending_agent(&app, Some(10.0)).await;
        anvil.set_balance(wallet(&agent), wei(1_000 * CENT_ETH)).await;
        let to = fresh_address();
        let body = order(to, "0.01");

        gate.hold_method(held_at);
        let first = transfer(&app, &agent, Some("lease"), &body);
        let repeat = async {
            gate.wait_held(1, Duration::from_secs(10)).await;
            // The first holder stops renewing: its lease runs out.
            crate::auth::owners::execute(&app, "UPDATE idempotency_keys SET held_until = created_at").await;
            let repeat = transfer(&app, &agent, Some("lease"), &body);
            if held_at == "eth_getBalance" {
                // The repeat took the key over and reaches the gate too; then both go on.
                let release = async {
                    gate.wait_held(2, Duration::from_secs(10)).await;
                    gate.release();
                };
                tokio::join!(repeat, release).0
            } else {
                let repeat = repeat.await;
                gate.release();
                repeat
            }
        };
        let (first, repeat) = tokio::join!(first, repeat);
        match held_at {
            "eth_getBalance" => {
                assert_eq!(
                    repeat.status,
                    StatusCode::CREATED,
                    "{held_at}: taken over: {}",
                    repeat.body
                );
                assert_error(&error_of(&first), StatusCode::CONFLICT, "idempotency_in_progress");
            }
            _ => {
                assert_eq!(first.status, StatusCode::CREATED, "{held_at}: {}", first.body);
                assert_eq!(
                    repeat.status,
                    StatusCode::CREATED,
                    "{held_at}: recalled: {}",
                    repeat.body
                );
                assert_eq!(
                    repeat.body["id"], first.body["id"],
                    "{held_at}: the first one's transfer"
                );
            }
        }
        wait_for_transactions(&app, &agent, 1, "confirmed").await;
        assert_eq!(anvil.nonce(wallet(&agent)).await, 1, "{held_at}: one transfer on chain");
        assert_eq!(anvil.balance(to).await, wei(CENT_ETH), "{held_at}: paid once");
    }
}

/// A keyed chat turn that moved money and whose lease ran out unanswered (its process as good as dead: held at the
/// broadcast) is never run again: its answer is the whole turn, which it has not written, so a repeat is 409 (the
/// decision documented in `src/http/chat.rs`). Once the first holder answers after all, the repeat replays that.
#[tokio::test]
async fn a_keyed_chat_turn_that_stopped_after_moving_money_is_refused_and_never_run_again() {
    let anvil = Anvil::start(BASE_CHAIN_ID);
    let gate = crate::helpers::gated_rpc::GatedRpc::start(anvil.url()).await;
    let to = fresh_address();
    let args = format!(r#"{{"chain": "base", "to": "{to}", "amount": "0.01"}}"#);
    let llm = LlmServer::start(vec![
        Reply::tool_call("call_1", "send_native", &[&args], 10, 5),
        Reply::text(&["sent"], 10, 5),
    ])
    .await;
    let app = llm_app(&llm, &[("RPC_URL_BASE", gate.url())]).await;
    let agent = funded_agent(&app, &anvil, Some(0.5)).await;

    gate.hold();
    let (first, repeat) = tokio::join!(chat(&app, &agent, "paid-turn", "pay them"), async {
        gate.wait_held(1, Duration::from_secs(10)).await;
        crate::auth::owners::execute(&app, "UPDATE idempotency_keys SET held_until = created_at").await;
        let repeat = chat(&app, &agent, "paid-turn", "pay them").await;
        gate.release();
        repeat
    });
    assert_error(&error_of(&repeat), StatusCode::CONFLICT, "idempotency_in_progress");
    let message = repeat.body["error"]["message"].as_str().unwrap_or_default();
    assert!(message.contains("stopped"), "told apart from a running one: {message}");
    assert_eq!(first.status, StatusCode::OK, "{}", first.body);
    let replayed = chat(&app, &agent, "paid-turn", "pay them").await;
    assert_eq!(replayed.body, first.body, "the first holder's answer is the key's");
    assert_eq!(llm.requests().len(), 2, "one turn: a tool round and its answer");
    wait_for_transactions(&app, &agent, 1, "confirmed").await;
    assert_eq!(anvil.nonce(wallet(&agent)).await, 1, "one transfer on chain");
    assert_eq!(anvil.balance(to).await, wei(CENT_ETH));
}
