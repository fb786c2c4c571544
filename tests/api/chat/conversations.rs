//! Conversations (docs/api.md §7): listing per agent, messages oldest first (the newest 500 at most), deletion, and
//! who may see them.

use std::time::Instant;

use alloy::primitives::U256;
use reqwest::{Method, StatusCode};
use serde_json::{Value, json};

use crate::helpers::chat::{address, agent_with, chat, chat_in, two_chains};
use crate::helpers::{assert_error, spawn_app};

fn ids(list: &[Value]) -> Vec<String> {
    list.iter().map(|c| c["id"].as_str().unwrap().to_string()).collect()
}

fn timestamp(value: &Value) -> chrono::DateTime<chrono::FixedOffset> {
    chrono::DateTime::parse_from_rfc3339(value.as_str().unwrap_or_else(|| panic!("a timestamp: {value}")))
        .unwrap_or_else(|e| panic!("{value} is RFC 3339: {e}"))
}

#[tokio::test]
async fn conversations_are_listed_newest_first_with_title_and_message_count() {
    let app = spawn_app().await;
    let agent = agent_with(&app, "Chatty", &["read"]).await;
    let other = agent_with(&app, "Quiet", &["read"]).await;

    // 100 characters, multi-byte ones among them: the title keeps the first 80 characters.
    let long = format!("{}{}", "ü".repeat(50), "x".repeat(50));
    let first = chat(&app, &agent, &long).await;
    let first_id = first["conversation_id"].as_str().unwrap().to_string();
    let second = chat(&app, &agent, "hello there").await;
    let second_id = second["conversation_id"].as_str().unwrap().to_string();
    chat_in(&app, &agent, "and a follow-up", Some(&second_id)).await;
    let third = chat(&app, &agent, "  third one  ").await;
    let third_id = third["conversation_id"].as_str().unwrap().to_string();

    let listed = app.list_conversations(&agent).await;

    assert_eq!(
        ids(&listed),
        [third_id.clone(), second_id.clone(), first_id.clone()],
        "{listed:?}"
    );
    let by_id = |id: &str| listed.iter().find(|c| c["id"] == id).unwrap().clone();
    let c1 = by_id(&first_id);
    assert_eq!(c1["title"], format!("{}{}", "ü".repeat(50), "x".repeat(30)), "{c1}");
    assert_eq!(c1["title"].as_str().unwrap().chars().count(), 80);
    assert_eq!(c1["message_count"], 2, "{c1}");
    let c2 = by_id(&second_id);
    assert_eq!(
        c2["title"], "hello there",
        "the first user message, not the follow-up: {c2}"
    );
    assert_eq!(c2["message_count"], 4, "{c2}");
    let c3 = by_id(&third_id);
    assert!(c3["title"] == "third one" || c3["title"] == "  third one  ", "{c3}");
    for conversation in &listed {
        assert_eq!(conversation["agent_id"], agent.id.as_str(), "{conversation}");
        let keys: Vec<&str> = conversation.as_object().unwrap().keys().map(String::as_str).collect();
        for key in ["id", "agent_id", "title", "created_at", "updated_at", "message_count"] {
            assert!(keys.contains(&key), "{key} in {conversation}");
        }
        assert!(timestamp(&conversation["updated_at"]) >= timestamp(&conversation["created_at"]));
    }
    assert!(
        timestamp(&c2["updated_at"]) > timestamp(&c2["created_at"]),
        "a later turn moves updated_at: {c2}"
    );

    // Another agent sees only its own (none).
    assert_eq!(app.list_conversations(&other).await, Vec::<Value>::new());
}

/// `GET /api/conversations?agent_id=…&<query>` as the agent.
async fn list_page(
    app: &crate::helpers::TestApp,
    agent: &crate::helpers::CreatedAgent,
    query: &str,
) -> (StatusCode, Value) {
    let path = format!("/api/conversations?agent_id={}&{query}", agent.id);
    app.request(Method::GET, &path, Some(&agent.token), None).await
}

#[tokio::test]
async fn conversations_are_paged_with_limit_and_before() {
    let app = spawn_app().await;
    let agent = agent_with(&app, "Paged", &["read"]).await;
    let other = agent_with(&app, "Elsewhere", &["read"]).await;
    let mut made = Vec::new();
    for i in 0..5 {
        let turn = chat(&app, &agent, &format!("conversation {i}")).await;
        made.push(turn["conversation_id"].as_str().unwrap().to_string());
    }
    chat_in(&app, &agent, "one more", Some(&made[3])).await;
    made.reverse();
    let foreign = chat(&app, &other, "not yours").await["conversation_id"]
        .as_str()
        .unwrap()
        .to_string();

    let (status, page) = list_page(&app, &agent, "limit=2").await;
    assert_eq!(status, StatusCode::OK, "{page}");
    let page = page.as_array().unwrap().clone();
    assert_eq!(ids(&page), made[..2], "{page:?}");
    let mut seen = ids(&page);
    let mut counts: Vec<Value> = page.iter().map(|c| c["message_count"].clone()).collect();
    while seen.len() < made.len() {
        let last = seen.last().unwrap().clone();
        let (status, next) = list_page(&app, &agent, &format!("limit=2&before={last}")).await;
        assert_eq!(status, StatusCode::OK, "{next}");
        let next = next.as_array().unwrap().clone();
        assert!(!next.is_empty() && next.len() <= 2, "{next:?}");
        counts.extend(next.iter().map(|c| c["message_count"].clone()));
        seen.extend(ids(&next));
    }
    assert_eq!(seen, made, "every conversation once, newest first");
    assert_eq!(
        counts,
        [json!(2), json!(4), json!(2), json!(2), json!(2)],
        "counted per conversation"
    );
    let (_, after_last) = list_page(&app, &agent, &format!("before={}", made[4])).await;
    assert_eq!(after_last, json!([]));

    for (query, field) in [
        ("limit=0", "limit"),
        ("limit=many", "limit"),
        ("before=nope", "before"),
        ("before=", "before"),
        (&*format!("before={foreign}"), "before"),
    ] {
        let (status, body) = list_page(&app, &agent, query).await;
        assert_error(
            &(status, body.clone()),
            StatusCode::UNPROCESSABLE_ENTITY,
            "validation_failed",
        );
        assert!(body.to_string().contains(field), "{query}: {body}");
    }
}

#[tokio::test]
async fn listing_needs_an_agent_id_and_that_agents_token() {
    let app = spawn_app().await;
    let agent = agent_with(&app, "Owner", &["read"]).await;
    let other = agent_with(&app, "Other", &["read"]).await;
    chat(&app, &agent, "hello").await;

    for path in ["/api/conversations", "/api/conversations?agent_id="] {
        let response = app.request(Method::GET, path, Some(&agent.token), None).await;
        assert_error(&response, StatusCode::UNPROCESSABLE_ENTITY, "validation_failed");
    }
    let path = format!("/api/conversations?agent_id={}", agent.id);
    let response = app.request(Method::GET, &path, None, None).await;
    assert_error(&response, StatusCode::UNAUTHORIZED, "missing_token");
    let response = app.request(Method::GET, &path, Some(&other.token), None).await;
    assert_error(&response, StatusCode::FORBIDDEN, "forbidden");
    let path = format!("/api/conversations?agent_id={}", uuid::Uuid::new_v4());
    let response = app.request(Method::GET, &path, Some(&agent.token), None).await;
    assert_error(&response, StatusCode::NOT_FOUND, "agent_not_found");
}

#[tokio::test]
async fn messages_come_oldest_first_with_their_chain_calls() {
    let env = two_chains(&[], &[]).await;
    let agent = agent_with(&env.app, "Recorder", &["read"]).await;
    env.base.set_balance(address(&agent, "base"), U256::from(99u64)).await;

    let first = chat(&env.app, &agent, "what is my balance on base").await;
    let conversation = first["conversation_id"].as_str().unwrap().to_string();
    env.base.mine(3).await;
    let second = chat_in(&env.app, &agent, "latest block on base", Some(&conversation)).await;
    let third = chat_in(&env.app, &agent, "thanks!", Some(&conversation)).await;

    let messages = env.app.messages(&agent, &conversation).await;
    assert_eq!(messages.len(), 6, "{messages:?}");
    let expected = [
        ("user", "what is my balance on base", json!([])),
        (
            "assistant",
            first["response"].as_str().unwrap(),
            first["chain_calls"].clone(),
        ),
        ("user", "latest block on base", json!([])),
        (
            "assistant",
            second["response"].as_str().unwrap(),
            second["chain_calls"].clone(),
        ),
        ("user", "thanks!", json!([])),
        (
            "assistant",
            third["response"].as_str().unwrap(),
            third["chain_calls"].clone(),
        ),
    ];
    for (message, (role, content, calls)) in messages.iter().zip(expected) {
        assert_eq!(message["role"], role, "{message}");
        assert_eq!(message["content"], content, "{message}");
        assert_eq!(message["chain_calls"], calls, "{message}");
        let keys: Vec<&str> = message.as_object().unwrap().keys().map(String::as_str).collect();
        for key in ["id", "role", "content", "chain_calls", "created_at"] {
            assert!(keys.contains(&key), "{key} in {message}");
        }
    }
    assert_eq!(messages[1]["chain_calls"][0]["result"]["wei"], "99");
    assert_eq!(messages[3]["chain_calls"][0]["result"]["block_number"], 3);
    assert_eq!(messages[1]["id"], first["message_id"]);
    assert_eq!(messages[3]["id"], second["message_id"]);
    assert_eq!(messages[5]["id"], third["message_id"]);
    for pair in messages.windows(2) {
        assert!(
            timestamp(&pair[0]["created_at"]) <= timestamp(&pair[1]["created_at"]),
            "oldest first: {pair:?}"
        );
    }
    let mut unique: Vec<&str> = messages.iter().map(|m| m["id"].as_str().unwrap()).collect();
    unique.sort();
    unique.dedup();
    assert_eq!(unique.len(), 6);
}

/// Turns in one conversation; 251 turns make 502 messages.
const TURNS: usize = 251;

#[tokio::test]
async fn only_the_newest_500_messages_are_returned() {
    let app = spawn_app().await;
    let agent = agent_with(&app, "Verbose", &["read"]).await;
    let started = Instant::now();
    let first = chat(&app, &agent, "message 1").await;
    let conversation = first["conversation_id"].as_str().unwrap().to_string();
    for n in 2..=TURNS {
        chat_in(&app, &agent, &format!("message {n}"), Some(&conversation)).await;
    }
    let took = started.elapsed();
    eprintln!("{TURNS} chat turns took {took:?}");

    let messages = app.messages(&agent, &conversation).await;
    assert_eq!(messages.len(), 500, "at most 500 messages");
    // 502 messages: the two oldest (turn 1) are left out, the rest come oldest first.
    let users: Vec<&str> = messages
        .iter()
        .filter(|m| m["role"] == "user")
        .map(|m| m["content"].as_str().unwrap())
        .collect();
    let expected: Vec<String> = (2..=TURNS).map(|n| format!("message {n}")).collect();
    assert_eq!(users, expected);
    for (i, message) in messages.iter().enumerate() {
        let role = if i % 2 == 0 { "user" } else { "assistant" };
        assert_eq!(message["role"], role, "message {i}: {message}");
    }
    let listed = app.list_conversations(&agent).await;
    assert_eq!(listed[0]["message_count"], 2 * TURNS, "{listed:?}");
}

#[tokio::test]
async fn a_deleted_conversation_and_its_messages_are_gone() {
    let app = spawn_app().await;
    let agent = agent_with(&app, "Tidy", &["read"]).await;
    let kept = chat(&app, &agent, "keep me").await;
    let doomed = chat(&app, &agent, "delete me").await;
    let doomed_id = doomed["conversation_id"].as_str().unwrap().to_string();
    chat_in(&app, &agent, "more", Some(&doomed_id)).await;

    let path = format!("/api/conversations/{doomed_id}");
    let response = app
        .send(app.build(Method::DELETE, &path, Some(&agent.token), None))
        .await;
    assert_eq!(response.status, StatusCode::NO_CONTENT, "{}", response.text);
    assert!(response.text.is_empty(), "204 has no body: {:?}", response.text);

    let messages_path = format!("{path}/messages");
    let response = app.request(Method::GET, &messages_path, Some(&agent.token), None).await;
    assert_error(&response, StatusCode::NOT_FOUND, "conversation_not_found");
    let response = app.request(Method::DELETE, &path, Some(&agent.token), None).await;
    assert_error(&response, StatusCode::NOT_FOUND, "conversation_not_found");
    assert_eq!(
        ids(&app.list_conversations(&agent).await),
        [kept["conversation_id"].as_str().unwrap()]
    );
    // A chat turn cannot continue it.
    let response = app
        .send(app.build(
            Method::POST,
            "/api/chat",
            Some(&agent.token),
            Some(json!({"agent_id": agent.id, "message": "still there?", "conversation_id": doomed_id})),
        ))
        .await;
    assert_error(
        &(response.status, response.body),
        StatusCode::NOT_FOUND,
        "conversation_not_found",
    );
    // The other conversation is untouched.
    let messages = app.messages(&agent, kept["conversation_id"].as_str().unwrap()).await;
    assert_eq!(messages.len(), 2);
}

#[tokio::test]
async fn a_conversation_is_only_visible_to_its_agent() {
    let app = spawn_app().await;
    let owner = agent_with(&app, "Owner", &["read"]).await;
    let intruder = agent_with(&app, "Intruder", &["read"]).await;
    let turn = chat(&app, &owner, "private matters").await;
    let id = turn["conversation_id"].as_str().unwrap().to_string();
    let messages_path = format!("/api/conversations/{id}/messages");
    let path = format!("/api/conversations/{id}");

    let response = app
        .request(Method::GET, &messages_path, Some(&intruder.token), None)
        .await;
    assert_error(&response, StatusCode::FORBIDDEN, "forbidden");
    let response = app.request(Method::DELETE, &path, Some(&intruder.token), None).await;
    assert_error(&response, StatusCode::FORBIDDEN, "forbidden");
    let response = app.request(Method::GET, &messages_path, None, None).await;
    assert_error(&response, StatusCode::UNAUTHORIZED, "missing_token");
    let response = app.request(Method::DELETE, &path, None, None).await;
    assert_error(&response, StatusCode::UNAUTHORIZED, "missing_token");
    // Still there for its owner.
    let messages = app.messages(&owner, &id).await;
    assert_eq!(messages.len(), 2);

    for bad in [
        uuid::Uuid::new_v4().to_string(),
        "not-a-uuid".to_string(),
        "123".to_string(),
    ] {
        for (method, path) in [
            (Method::GET, format!("/api/conversations/{bad}/messages")),
            (Method::DELETE, format!("/api/conversations/{bad}")),
        ] {
            let response = app.request(method, &path, Some(&owner.token), None).await;
            assert_error(&response, StatusCode::NOT_FOUND, "conversation_not_found");
        }
    }

    // A deleted agent's conversations answer 410.
    let (status, _) = app.delete_agent(&owner.id, &owner.token).await;
    assert_eq!(status, StatusCode::NO_CONTENT);
    let response = app.request(Method::GET, &messages_path, Some(&owner.token), None).await;
    assert_error(&response, StatusCode::GONE, "agent_inactive");
}
