//! Streams and the token they were opened with (docs/api.md §15): a chat or conversation stream ends within a few
//! seconds of its token's reissue or its agent's deletion, also when that happens on another instance sharing the
//! database; and one agent holds at most `MAX_STREAMS_PER_AGENT` open streams per instance.

use std::time::{Duration, Instant};

use reqwest::{Method, StatusCode};
use serde_json::json;

use crate::helpers::llm_server::{LlmServer, Reply};
use crate::helpers::sse::SseStream;
use crate::helpers::{CreatedAgent, TOKEN_HEADER, TestApp, assert_error, spawn_app, spawn_app_with, token_proof};

/// How long a stream may outlive its token: the re-check interval (2 s by default) and some slack.
const ENDS_WITHIN: Duration = Duration::from_secs(8);

/// A conversation of the agent, made by one builtin chat turn.
async fn conversation(app: &TestApp, agent: &CreatedAgent) -> String {
    let body = json!({"agent_id": agent.id, "message": "how much have I spent"});
    let (status, turn) = app
        .request(Method::POST, "/api/chat", Some(&agent.token), Some(body))
        .await;
    assert_eq!(status, StatusCode::OK, "{turn}");
    turn["conversation_id"].as_str().unwrap().to_string()
}

fn stream_request(app: &TestApp, token: &str, conversation_id: &str) -> reqwest::RequestBuilder {
    app.client
        .get(app.url(&format!("/api/conversations/{conversation_id}/stream")))
        .header(TOKEN_HEADER, token)
}

/// Opens the conversation stream and reads its greeting ping.
async fn open_conversation_stream(app: &TestApp, token: &str, conversation_id: &str) -> SseStream {
    let mut stream = SseStream::open(stream_request(app, token, conversation_id)).await;
    let ping = stream
        .next_event(Duration::from_secs(5))
        .await
        .expect("a ping on connect");
    assert_eq!(ping.event, "ping");
    stream
}

/// Reads the stream for at most `ENDS_WITHIN`; insists that the server closed it by then.
async fn assert_ends_soon(stream: &mut SseStream, what: &str) -> Vec<String> {
    let started = Instant::now();
    let events = stream.collect_for(ENDS_WITHIN).await;
    assert!(
        stream.ended(),
        "{what}: the stream is still open {:?} later",
        started.elapsed()
    );
    events.into_iter().map(|e| e.event).collect()
}

async fn reissue_with_token(app: &TestApp, agent: &CreatedAgent) -> String {
    let (status, body) = app.reissue_token(&agent.id, token_proof(&agent.token)).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    body["access_token"].as_str().unwrap().to_string()
}

#[tokio::test]
async fn a_conversation_stream_ends_after_a_reissue_on_another_instance() {
    let first = spawn_app().await;
    let second = spawn_app_with(&[("DATABASE_URL", &first.db_url)]).await;
    let agent = first.create_default_agent().await;
    let conversation_id = conversation(&first, &agent).await;
    let mut stream = open_conversation_stream(&first, &agent.token, &conversation_id).await;

    let new_token = reissue_with_token(&second, &agent).await;

    assert_ends_soon(&mut stream, "after the reissue").await;
    // The old token opens nothing any more; the new one does.
    let refused = first.send(stream_request(&first, &agent.token, &conversation_id)).await;
    assert_eq!(refused.status, StatusCode::UNAUTHORIZED, "{}", refused.text);
    let mut renewed = open_conversation_stream(&first, &new_token, &conversation_id).await;
    let events = renewed.collect_for(Duration::from_secs(3)).await;
    assert!(!renewed.ended(), "a stream of the live token stays open: {events:?}");
}

#[tokio::test]
async fn a_conversation_stream_ends_after_its_agent_is_deleted() {
    let app = spawn_app().await;
    let agent = app.create_default_agent().await;
    let conversation_id = conversation(&app, &agent).await;
    let mut stream = open_conversation_stream(&app, &agent.token, &conversation_id).await;

    let (status, body) = app.delete_agent(&agent.id, &agent.token).await;
    assert_eq!(status, StatusCode::NO_CONTENT, "{body}");

    assert_ends_soon(&mut stream, "after the deletion").await;
}

#[tokio::test]
async fn a_chat_stream_waiting_on_the_model_ends_after_a_reissue() {
    let llm = LlmServer::start(vec![Reply::text(&["much later"], 1, 1).after(Duration::from_secs(30))]).await;
    let app = spawn_app_with(&llm.app_vars("sk-test-leases")).await;
    let agent = app.create_default_agent().await;
    let body = json!({"agent_id": agent.id, "message": "hello"});
    let mut stream = SseStream::open(app.build(Method::POST, "/api/chat/stream", Some(&agent.token), Some(body))).await;
    let start = stream.next_event(Duration::from_secs(5)).await.expect("start");
    assert_eq!(start.event, "start");

    reissue_with_token(&app, &agent).await;

    let events = assert_ends_soon(&mut stream, "after the reissue").await;
    assert!(!events.iter().any(|e| e == "final"), "{events:?}");
}

/// Sends a request expected to be refused; a stream opened instead fails the test without being read to its end.
async fn refused(builder: reqwest::RequestBuilder) -> (StatusCode, reqwest::header::HeaderMap, serde_json::Value) {
    let response = builder.send().await.expect("the request reaches the app");
    let (status, headers) = (response.status(), response.headers().clone());
    assert_ne!(status, StatusCode::OK, "a stream was opened past the limit");
    let body = response.json().await.unwrap_or_default();
    (status, headers, body)
}

#[tokio::test]
async fn an_agent_holds_at_most_max_streams_per_agent_streams_and_a_closed_one_frees_its_slot() {
    let app = spawn_app_with(&[("MAX_STREAMS_PER_AGENT", "3")]).await;
    let agent = app.create_default_agent().await;
    let other = app.create_default_agent().await;
    let conversation_id = conversation(&app, &agent).await;
    let mut open = Vec::new();
    for _ in 0..3 {
        open.push(open_conversation_stream(&app, &agent.token, &conversation_id).await);
    }

    let (status, headers, body) = refused(stream_request(&app, &agent.token, &conversation_id)).await;
    assert_error(&(status, body), StatusCode::TOO_MANY_REQUESTS, "rate_limited");
    assert!(headers.contains_key("retry-after"), "{headers:?}");
    // Chat streams count against the same limit.
    let body = json!({"agent_id": agent.id, "message": "how much have I spent"});
    let (status, _, body) = refused(app.build(Method::POST, "/api/chat/stream", Some(&agent.token), Some(body))).await;
    assert_error(&(status, body), StatusCode::TOO_MANY_REQUESTS, "rate_limited");
    // Another agent is not affected.
    let others = conversation(&app, &other).await;
    let _other_stream = open_conversation_stream(&app, &other.token, &others).await;

    // Closing one stream gives its slot back (as soon as the server sees the connection go).
    drop(open.pop());
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let response = stream_request(&app, &agent.token, &conversation_id)
            .send()
            .await
            .expect("the request reaches the app");
        if response.status() == StatusCode::OK {
            break;
        }
        assert_eq!(response.status(), StatusCode::TOO_MANY_REQUESTS);
        assert!(Instant::now() < deadline, "the closed stream's slot was never freed");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}
