//! Readiness (docs/api.md §1): `/health` answers at once, even when a chain node is unreachable.

use std::time::Duration;

use reqwest::{Method, StatusCode};

use crate::helpers::{spawn_app, spawn_app_with};

#[tokio::test]
async fn health_answers_200_with_status_ok() {
    let app = spawn_app().await;

    let (status, body) = app.request(Method::GET, "/health", None, None).await;

    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(body["status"], "ok");
}

#[tokio::test]
async fn health_answers_quickly_when_a_chain_node_is_down() {
    let started = std::time::Instant::now();
    let app = spawn_app_with(&[
        ("RPC_URL_ETHEREUM", "http://127.0.0.1:1"),
        ("RPC_URL_BASE", "http://10.255.255.1:8545"),
    ])
    .await;

    let (status, body) = tokio::time::timeout(Duration::from_secs(2), app.request(Method::GET, "/health", None, None))
        .await
        .expect("/health answers within 2 s");

    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(body["status"], "ok");
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "an unreachable node delayed the start by {:?}",
        started.elapsed()
    );
}
