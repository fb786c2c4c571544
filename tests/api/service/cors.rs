//! Cross-origin requests (docs/api.md §15): same-origin by default, `CORS_ORIGINS` lists the others. A page of any
//! other origin gets no `Access-Control-*` header, on a preflight or on the request itself.

use reqwest::{Method, StatusCode};

use crate::helpers::{TestApp, TestResponse, spawn_app, spawn_app_with};

const LISTED: &str = "https://console.example.com";
const HOSTILE: &str = "https://evil.example.net";

fn cors_headers(response: &TestResponse) -> Vec<String> {
    response
        .headers
        .keys()
        .map(|k| k.as_str().to_string())
        .filter(|k| k.starts_with("access-control-"))
        .collect()
}

/// A browser's preflight for a token-carrying POST to the key export endpoint.
async fn preflight(app: &TestApp, agent_id: &str, origin: &str) -> TestResponse {
    let builder = app
        .client
        .request(Method::OPTIONS, app.url(&format!("/api/agents/{agent_id}/export-key")))
        .header("Origin", origin)
        .header("Access-Control-Request-Method", "POST")
        .header("Access-Control-Request-Headers", "content-type, x-agent-access-token");
    app.send(builder).await
}

/// A simple cross-origin read of the agent, with its token (as a page holding it would send).
async fn simple(app: &TestApp, agent_id: &str, token: &str, origin: &str) -> TestResponse {
    let builder = app
        .build(Method::GET, &format!("/api/agents/{agent_id}"), Some(token), None)
        .header("Origin", origin);
    app.send(builder).await
}

#[tokio::test]
async fn without_cors_origins_no_origin_gets_cors_headers() {
    let app = spawn_app_with(&[("DISABLE_AGENT_AUTH", "true")]).await;
    let agent = app.create_default_agent().await;

    let answer = preflight(&app, &agent.id, HOSTILE).await;
    assert!(cors_headers(&answer).is_empty(), "{:?}", answer.headers);
    assert_ne!(answer.status, StatusCode::OK, "no preflight is granted");
    let answer = simple(&app, &agent.id, &agent.token, HOSTILE).await;
    assert_eq!(
        answer.status,
        StatusCode::OK,
        "the server still answers; the browser withholds it"
    );
    assert!(cors_headers(&answer).is_empty(), "{:?}", answer.headers);
}

#[tokio::test]
async fn only_a_listed_origin_gets_cors_headers() {
    let app = spawn_app_with(&[("CORS_ORIGINS", &format!("{LISTED}, http://localhost:5173"))]).await;
    let agent = app.create_default_agent().await;

    let answer = preflight(&app, &agent.id, LISTED).await;
    assert!(answer.status.is_success(), "{}", answer.status);
    let header = |r: &TestResponse, name: &str| {
        r.headers
            .get(name)
            .map(|v| v.to_str().unwrap().to_string())
            .unwrap_or_default()
    };
    assert_eq!(header(&answer, "access-control-allow-origin"), LISTED);
    assert!(header(&answer, "access-control-allow-methods").contains("POST"));
    assert!(
        header(&answer, "access-control-allow-headers").contains("x-agent-access-token"),
        "{:?}",
        answer.headers
    );
    let answer = simple(&app, &agent.id, &agent.token, LISTED).await;
    assert_eq!(answer.status, StatusCode::OK);
    assert_eq!(header(&answer, "access-control-allow-origin"), LISTED);
    assert!(header(&answer, "access-control-expose-headers").contains("x-request-id"));

    for origin in [HOSTILE, "https://console.example.com.evil.example.net", "null"] {
        let answer = preflight(&app, &agent.id, origin).await;
        assert!(cors_headers(&answer).is_empty(), "{origin}: {:?}", answer.headers);
        let answer = simple(&app, &agent.id, &agent.token, origin).await;
        assert_eq!(answer.status, StatusCode::OK);
        assert!(cors_headers(&answer).is_empty(), "{origin}: {:?}", answer.headers);
    }
}

#[tokio::test]
async fn a_same_origin_request_needs_no_cors_headers() {
    let app = spawn_app().await;
    let agent = app.create_default_agent().await;
    let answer = simple(&app, &agent.id, &agent.token, &app.address).await;
    assert_eq!(answer.status, StatusCode::OK);
    assert!(cors_headers(&answer).is_empty(), "{:?}", answer.headers);
}
