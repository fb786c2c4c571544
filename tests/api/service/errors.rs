//! The error envelope (docs/api.md §2): malformed bodies, content types, the body limit, unknown routes, and the
//! `{"error": {"code", "message"}}` shape of every error.

use reqwest::{Method, StatusCode};
use serde_json::json;

use crate::helpers::{TestApp, TestResponse, assert_error, assert_error_shape, assert_error_status, spawn_app};

fn pair(response: &TestResponse) -> (StatusCode, serde_json::Value) {
    (response.status, response.body.clone())
}

async fn post_raw(
    app: &TestApp,
    path: &str,
    token: Option<&str>,
    content_type: Option<&str>,
    body: String,
) -> TestResponse {
    let mut builder = app.client.post(app.url(path)).body(body);
    if let Some(content_type) = content_type {
        builder = builder.header("content-type", content_type);
    }
    if let Some(token) = token {
        builder = builder.header(crate::helpers::TOKEN_HEADER, token);
    }
    app.send(builder).await
}

#[tokio::test]
async fn malformed_json_is_refused_with_400_invalid_json() {
    let app = spawn_app().await;
    let agent = app.create_default_agent().await;

    for body in ["{not json", "", "{\"name\": \"a\",}", "{\"name\": \"a\""] {
        let response = post_raw(&app, "/api/agents", None, Some("application/json"), body.to_string()).await;
        assert_error(&pair(&response), StatusCode::BAD_REQUEST, "invalid_json");
    }
    let response = app
        .send(
            app.client
                .put(app.url(&format!("/api/agents/{}", agent.id)))
                .header(crate::helpers::TOKEN_HEADER, &agent.token)
                .header("content-type", "application/json")
                .body("{\"name\": "),
        )
        .await;
    assert_error(&pair(&response), StatusCode::BAD_REQUEST, "invalid_json");
    let path = format!("/api/agents/{}/reissue-token", agent.id);
    let response = post_raw(&app, &path, None, Some("application/json"), "{\"proof\": ".into()).await;
    assert_error(&pair(&response), StatusCode::BAD_REQUEST, "invalid_json");
}

#[tokio::test]
async fn a_truncated_json_document_is_invalid_json_even_when_its_start_has_the_wrong_type() {
    let app = spawn_app().await;

    // Syntax errors win over type errors: "[1, 2" is not JSON at all, whatever its first element.
    let response = post_raw(&app, "/api/agents", None, Some("application/json"), "[1, 2".to_string()).await;

    assert_error(&pair(&response), StatusCode::BAD_REQUEST, "invalid_json");
}

#[tokio::test]
async fn a_body_with_the_wrong_content_type_is_refused_with_400() {
    let app = spawn_app().await;
    let body = json!({"name": "a"}).to_string();

    let text = post_raw(&app, "/api/agents", None, Some("text/plain"), body.clone()).await;
    assert_error_status(&pair(&text), StatusCode::BAD_REQUEST);
    let form = post_raw(
        &app,
        "/api/agents",
        None,
        Some("application/x-www-form-urlencoded"),
        body.clone(),
    )
    .await;
    assert_error_status(&pair(&form), StatusCode::BAD_REQUEST);
    let none = post_raw(&app, "/api/agents", None, None, body).await;
    assert_error_status(&pair(&none), StatusCode::BAD_REQUEST);
    let (_, list) = app.list_agents("").await;
    assert_eq!(list, json!([]), "nothing was created");
}

#[tokio::test]
async fn a_json_content_type_with_a_charset_is_accepted() {
    let app = spawn_app().await;

    let response = post_raw(
        &app,
        "/api/agents",
        None,
        Some("application/json; charset=utf-8"),
        json!({"name": "a"}).to_string(),
    )
    .await;

    assert_eq!(response.status, StatusCode::CREATED, "{}", response.text);
}

#[tokio::test]
async fn a_body_over_64_kib_is_refused_with_413() {
    let app = spawn_app().await;
    let big = json!({"name": "a", "description": "x".repeat(70 * 1024)}).to_string();

    let response = post_raw(&app, "/api/agents", None, Some("application/json"), big).await;

    assert_error(&pair(&response), StatusCode::PAYLOAD_TOO_LARGE, "payload_too_large");
    let (_, list) = app.list_agents("").await;
    assert_eq!(list, json!([]));
}

#[tokio::test]
async fn a_body_under_64_kib_is_read_and_validated() {
    let app = spawn_app().await;
    let body = json!({"name": "a", "description": "x".repeat(60 * 1024)}).to_string();

    let response = post_raw(&app, "/api/agents", None, Some("application/json"), body).await;

    assert_error(&pair(&response), StatusCode::UNPROCESSABLE_ENTITY, "validation_failed");
}

#[tokio::test]
async fn an_unknown_route_answers_404_with_a_json_error() {
    let app = spawn_app().await;

    for path in ["/api/nothing-here", "/nothing-here", "/api/agents/x/y/z"] {
        let response = app.send(app.client.get(app.url(path))).await;
        assert_error_status(&pair(&response), StatusCode::NOT_FOUND);
    }
}

#[tokio::test]
async fn a_wrong_method_answers_with_a_json_error() {
    let app = spawn_app().await;

    let response = app.send(app.client.patch(app.url("/api/agents"))).await;

    assert_eq!(response.status, StatusCode::METHOD_NOT_ALLOWED, "{}", response.text);
    assert_error_shape(&response.body);
}

#[tokio::test]
async fn every_error_body_is_json_with_only_a_string_code_and_message() {
    let app = spawn_app().await;
    let agent = app.create_default_agent().await;
    let forged = format!("agt_{}", "F".repeat(43));
    let detail = format!("/api/agents/{}", agent.id);
    let mut responses = vec![
        app.send(app.build(Method::GET, &detail, None, None)).await,
        app.send(app.build(Method::GET, &detail, Some(&forged), None)).await,
        app.send(app.build(
            Method::GET,
            &format!("/api/agents/{}", uuid::Uuid::new_v4()),
            Some(&agent.token),
            None,
        ))
        .await,
        app.send(app.build(Method::POST, "/api/agents", None, Some(json!({"name": ""}))))
            .await,
        app.send(app.build(
            Method::POST,
            "/api/agents",
            None,
            Some(json!({"name": "a", "chains": ["x"]})),
        ))
        .await,
        app.send(app.build(
            Method::POST,
            &format!("{detail}/reissue-token"),
            None,
            Some(json!({"proof": {"type": "current_token", "token": forged}})),
        ))
        .await,
        post_raw(&app, "/api/agents", None, Some("application/json"), "{".into()).await,
        app.send(app.client.get(app.url("/api/nothing-here"))).await,
    ];
    app.delete_agent(&agent.id, &agent.token).await;
    responses.push(
        app.send(app.build(Method::DELETE, &detail, Some(&agent.token), None))
            .await,
    );

    for response in &responses {
        assert!(
            response.status.is_client_error(),
            "{} {}",
            response.status,
            response.text
        );
        assert_error_shape(&response.body);
        let content_type = response
            .headers
            .get("content-type")
            .and_then(|v| v.to_str().ok())
            .unwrap_or_default();
        assert!(
            content_type.starts_with("application/json"),
            "content type {content_type:?}"
        );
        assert!(
            !response.text.contains(&forged),
            "an error echoes a token: {}",
            response.text
        );
        assert!(
            !response.text.contains(&agent.token),
            "an error echoes a token: {}",
            response.text
        );
        let lower = response.text.to_lowercase();
        for leak in ["select ", "insert ", "sqlx", "panicked", "backtrace", "src/"] {
            assert!(!lower.contains(leak), "internal detail {leak:?} in {}", response.text);
        }
    }
}
