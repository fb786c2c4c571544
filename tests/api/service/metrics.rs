//! `GET /metrics`: Prometheus text with requests by route and status, latency histograms, chat turns and tool calls.

use reqwest::{Method, StatusCode};
use serde_json::json;

use crate::helpers::{assert_error, spawn_app, spawn_app_with};

#[tokio::test]
async fn metrics_count_requests_by_route_turns_and_tool_calls() {
    let app = spawn_app().await;
    let agent = app.create_default_agent().await;
    let (status, _) = app.get_agent(&agent.id, &agent.token).await;
    assert_eq!(status, StatusCode::OK);
    let (status, _) = app
        .get_agent(&agent.id, "agt_unknownunknownunknownunknownunknownunknown1")
        .await;
    assert_eq!(status, StatusCode::UNAUTHORIZED);
    let body = json!({ "agent_id": agent.id, "message": "what is my balance on base" });
    let (status, turn) = app
        .request(Method::POST, "/api/chat", Some(&agent.token), Some(body))
        .await;
    assert_eq!(status, StatusCode::OK, "{turn}");

    let response = app.send(app.build(Method::GET, "/metrics", None, None)).await;
    assert_eq!(response.status, StatusCode::OK);
    let content_type = response.headers.get("content-type").unwrap().to_str().unwrap();
    assert!(content_type.starts_with("text/plain"), "{content_type}");
    let text = response.text;
    for line in [
        "agentd_http_requests_total{method=\"POST\",route=\"/api/agents\",status=\"201\"} 1",
        "agentd_http_requests_total{method=\"GET\",route=\"/api/agents/{id}\",status=\"200\"} 1",
        "agentd_http_requests_total{method=\"GET\",route=\"/api/agents/{id}\",status=\"401\"} 1",
        "agentd_http_request_duration_seconds_count{route=\"/api/chat\"} 1",
        "agentd_chat_turns_total{outcome=\"ok\"} 1",
        // No RPC URL is configured for base: the tool runs and reports that.
        "agentd_tool_calls_total{tool=\"get_balance\",outcome=\"chain_not_configured\"} 1",
        "agentd_sse_subscribers{stream=\"chat\"} 0",
        "agentd_sse_subscribers{stream=\"confirmations\"} 0",
        "# TYPE agentd_transactions gauge",
        "# TYPE agentd_rpc_calls_total counter",
    ] {
        assert!(text.lines().any(|l| l == line), "missing `{line}` in:\n{text}");
    }
    // Concrete ids never become label values.
    assert!(!text.contains(&agent.id));
}

#[tokio::test]
async fn with_metrics_token_set_a_scrape_needs_it_as_a_bearer_token() {
    let token = "scrape-secret-0123456789";
    let app = spawn_app_with(&[("METRICS_TOKEN", token)]).await;
    let scrape = |bearer: Option<&str>| {
        let builder = app.build(Method::GET, "/metrics", None, None);
        match bearer {
            Some(bearer) => builder.bearer_auth(bearer),
            None => builder,
        }
    };
    for bearer in [None, Some("wrong"), Some("scrape-secret-012345678")] {
        let response = app.send(scrape(bearer)).await;
        assert_error(
            &(response.status, response.body),
            StatusCode::UNAUTHORIZED,
            "unauthorized",
        );
        assert!(!response.text.contains(token));
    }
    let response = app.send(scrape(Some(token))).await;
    assert_eq!(response.status, StatusCode::OK, "{}", response.text);
    assert!(response.text.contains("# TYPE agentd_http_requests_total counter"));
}
