//! The HTTP server itself: stopping it ends the open event streams and lets it return; requests on a kept-alive
//! connection and the client's address (`ConnectInfo`) keep working.

use std::time::Duration;

use agentd::app::App;
use agentd::config::Config;
use reqwest::StatusCode;
use serde_json::{Value, json};
use tokio::sync::oneshot;

use crate::helpers::sse::SseStream;
use crate::helpers::{TOKEN_HEADER, base_vars};

/// Generous: the server stops within a fraction of this; the bound only keeps a hang from stalling the suite.
const STOPS_WITHIN: Duration = Duration::from_secs(15);

#[tokio::test]
async fn stopping_the_server_ends_an_open_event_stream_and_the_server_returns() {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let config = Config::from_vars(base_vars(&dir)).expect("the test configuration is valid");
    let app = App::build(config).await.expect("the app builds");
    let base = format!("http://{}", app.local_addr());
    let (stop, stopped) = oneshot::channel::<()>();
    let server = tokio::spawn(app.run_until_stopped(async move {
        let _ = stopped.await;
    }));
    // One client: its requests share a kept-alive connection.
    let client = reqwest::Client::new();
    let agent: Value = client
        .post(format!("{base}/api/agents"))
        .json(&json!({"name": "served"}))
        .send()
        .await
        .expect("POST /api/agents")
        .json()
        .await
        .expect("an agent");
    let token = agent["access_token"].as_str().expect("access_token");
    let turn = client
        .post(format!("{base}/api/chat"))
        .header(TOKEN_HEADER, token)
        .json(&json!({"agent_id": agent["id"], "message": "how much have I spent"}))
        .send()
        .await
        .expect("POST /api/chat");
    assert_eq!(turn.status(), StatusCode::OK);
    let turn: Value = turn.json().await.expect("a chat turn");
    let conversation = turn["conversation_id"].as_str().expect("conversation_id");
    let mut stream = SseStream::open(
        client
            .get(format!("{base}/api/conversations/{conversation}/stream"))
            .header(TOKEN_HEADER, token),
    )
    .await;
    let ping = stream
        .next_event(Duration::from_secs(5))
        .await
        .expect("a ping on connect");
    assert_eq!(ping.event, "ping");

    let _ = stop.send(());

    let events = stream.collect_for(STOPS_WITHIN).await;
    assert!(stream.ended(), "the stream is still open after the stop: {events:?}");
    let result = tokio::time::timeout(STOPS_WITHIN, server)
        .await
        .expect("the server returns after the stop")
        .expect("the server task does not panic");
    assert!(result.is_ok(), "{result:?}");
    assert!(
        reqwest::Client::new()
            .get(format!("{base}/health"))
            .send()
            .await
            .is_err(),
        "a stopped server accepts no new connection"
    );
}
