//! Access-token checks on agent-scoped calls (docs/api.md §2 order: token present → agent exists → token belongs to it →
//! agent active → body), `DISABLE_AGENT_AUTH`, and the configurations the service must refuse to start with.

use std::time::Duration;

use agentd::app::App;
use agentd::config::Config;
use reqwest::{Method, StatusCode};
use serde_json::{Value, json};

use crate::helpers::{
    ENCRYPTION_KEY, TestApp, assert_error, assert_error_status, run_to_exit, spawn_app, spawn_app_with, sqlite_url,
};

/// Every agent-scoped endpoint of this issue, with a body that would succeed.
fn agent_scoped_calls(id: &str) -> Vec<(Method, String, Option<Value>)> {
    vec![
        (Method::GET, format!("/api/agents/{id}"), None),
        (
            Method::PUT,
            format!("/api/agents/{id}"),
            Some(json!({"name": "renamed"})),
        ),
        (
            Method::POST,
            format!("/api/agents/{id}/export-key"),
            Some(json!({"chain": "ethereum", "confirm": true})),
        ),
        (Method::DELETE, format!("/api/agents/{id}"), None),
    ]
}

async fn assert_every_call(app: &TestApp, id: &str, token: Option<&str>, status: StatusCode, code: Option<&str>) {
    for (method, path, body) in agent_scoped_calls(id) {
        let response = app.request(method.clone(), &path, token, body).await;
        assert_eq!(
            response.0, status,
            "{method} {path} answered {} {}",
            response.0, response.1
        );
        match code {
            Some(code) => assert_error(&response, status, code),
            None => assert_error_status(&response, status),
        }
    }
}

#[tokio::test]
async fn agent_scoped_calls_without_a_token_answer_401_missing_token() {
    let app = spawn_app().await;
    let agent = app.create_default_agent().await;

    assert_every_call(&app, &agent.id, None, StatusCode::UNAUTHORIZED, Some("missing_token")).await;
    let (status, detail) = app.get_agent(&agent.id, &agent.token).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(detail["is_active"], true, "nothing happened");
}

#[tokio::test]
async fn agent_scoped_calls_with_an_empty_token_answer_401() {
    let app = spawn_app().await;
    let agent = app.create_default_agent().await;

    assert_every_call(&app, &agent.id, Some(""), StatusCode::UNAUTHORIZED, None).await;
}

#[tokio::test]
async fn agent_scoped_calls_with_an_unknown_token_answer_401_invalid_token() {
    let app = spawn_app().await;
    let agent = app.create_default_agent().await;
    let forged = format!("agt_{}", "A".repeat(43));
    let mangled = format!("{}x", agent.token);

    for token in [forged.as_str(), mangled.as_str(), "garbage"] {
        assert_every_call(
            &app,
            &agent.id,
            Some(token),
            StatusCode::UNAUTHORIZED,
            Some("invalid_token"),
        )
        .await;
    }
}

#[tokio::test]
async fn agent_scoped_calls_with_another_agents_token_answer_403_forbidden() {
    let app = spawn_app().await;
    let victim = app.create_default_agent().await;
    let intruder = app.create_default_agent().await;

    assert_every_call(
        &app,
        &victim.id,
        Some(&intruder.token),
        StatusCode::FORBIDDEN,
        Some("forbidden"),
    )
    .await;
    let (status, detail) = app.get_agent(&victim.id, &victim.token).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(detail["name"], "test agent");
    assert_eq!(detail["is_active"], true);
}

#[tokio::test]
async fn agent_scoped_calls_on_an_unknown_agent_answer_404() {
    let app = spawn_app().await;
    let agent = app.create_default_agent().await;
    let unknown = uuid::Uuid::new_v4().to_string();

    assert_every_call(
        &app,
        &unknown,
        Some(&agent.token),
        StatusCode::NOT_FOUND,
        Some("agent_not_found"),
    )
    .await;
}

#[tokio::test]
async fn an_unknown_token_on_an_unknown_agent_answers_404() {
    let app = spawn_app().await;
    let unknown = uuid::Uuid::new_v4().to_string();
    let forged = format!("agt_{}", "B".repeat(43));

    assert_every_call(
        &app,
        &unknown,
        Some(&forged),
        StatusCode::NOT_FOUND,
        Some("agent_not_found"),
    )
    .await;
}

#[tokio::test]
async fn agent_scoped_calls_with_a_malformed_uuid_answer_404() {
    let app = spawn_app().await;
    let agent = app.create_default_agent().await;

    for id in ["not-a-uuid", "1234", "00000000-0000-0000-0000-00000000000g"] {
        assert_every_call(&app, id, Some(&agent.token), StatusCode::NOT_FOUND, None).await;
    }
}

#[tokio::test]
async fn a_missing_token_is_reported_before_an_unknown_agent() {
    let app = spawn_app().await;
    let unknown = uuid::Uuid::new_v4().to_string();

    assert_every_call(&app, &unknown, None, StatusCode::UNAUTHORIZED, Some("missing_token")).await;
}

#[tokio::test]
async fn a_deleted_agent_answers_410_on_every_call_but_detail() {
    let app = spawn_app().await;
    let agent = app.create_default_agent().await;
    let (status, _) = app.delete_agent(&agent.id, &agent.token).await;
    assert_eq!(status, StatusCode::NO_CONTENT);

    for (method, path, body) in agent_scoped_calls(&agent.id) {
        let response = app.request(method.clone(), &path, Some(&agent.token), body).await;
        if method == Method::GET {
            assert_eq!(response.0, StatusCode::OK, "detail of a deleted agent: {}", response.1);
            assert_eq!(response.1["is_active"], false);
        } else {
            assert_error(&response, StatusCode::GONE, "agent_inactive");
        }
    }
}

#[tokio::test]
async fn a_deleted_agent_still_checks_whose_token_it_is() {
    let app = spawn_app().await;
    let agent = app.create_default_agent().await;
    let other = app.create_default_agent().await;
    app.delete_agent(&agent.id, &agent.token).await;

    assert_every_call(
        &app,
        &agent.id,
        Some(&other.token),
        StatusCode::FORBIDDEN,
        Some("forbidden"),
    )
    .await;
    let forged = format!("agt_{}", "C".repeat(43));
    assert_every_call(
        &app,
        &agent.id,
        Some(&forged),
        StatusCode::UNAUTHORIZED,
        Some("invalid_token"),
    )
    .await;
}

#[tokio::test]
async fn access_checks_come_before_the_body_is_validated() {
    let app = spawn_app().await;
    let agent = app.create_default_agent().await;
    let other = app.create_default_agent().await;
    let put = format!("/api/agents/{}", agent.id);
    let export = format!("/api/agents/{}/export-key", agent.id);
    let invalid_put = json!({"name": "", "chains": ["dogecoin"]});
    let invalid_export = json!({"chain": "dogecoin"});

    for (path, body) in [(&put, &invalid_put), (&export, &invalid_export)] {
        let method = if path == &put { Method::PUT } else { Method::POST };
        let response = app.request(method.clone(), path, None, Some(body.clone())).await;
        assert_error(&response, StatusCode::UNAUTHORIZED, "missing_token");
        let response = app
            .request(method.clone(), path, Some(&other.token), Some(body.clone()))
            .await;
        assert_error(&response, StatusCode::FORBIDDEN, "forbidden");
    }

    app.delete_agent(&agent.id, &agent.token).await;
    let response = app
        .request(Method::PUT, &put, Some(&agent.token), Some(invalid_put.clone()))
        .await;
    assert_error(&response, StatusCode::GONE, "agent_inactive");
    let response = app
        .request(Method::POST, &export, Some(&agent.token), Some(invalid_export))
        .await;
    assert_error(&response, StatusCode::GONE, "agent_inactive");
}

#[tokio::test]
async fn a_malformed_body_without_a_token_is_refused_for_the_missing_token() {
    let app = spawn_app().await;
    let agent = app.create_default_agent().await;

    let response = app
        .send(
            app.client
                .put(app.url(&format!("/api/agents/{}", agent.id)))
                .header("content-type", "application/json")
                .body("{not json"),
        )
        .await;

    assert_error(
        &(response.status, response.body),
        StatusCode::UNAUTHORIZED,
        "missing_token",
    );
}

#[tokio::test]
async fn disabling_agent_auth_lets_calls_without_a_token_through() {
    let app = spawn_app_with(&[("DISABLE_AGENT_AUTH", "true")]).await;
    let agent = app.create_default_agent().await;
    let detail = format!("/api/agents/{}", agent.id);

    let (status, body) = app.request(Method::GET, &detail, None, None).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    let (status, body) = app
        .request(Method::PUT, &detail, None, Some(json!({"name": "open"})))
        .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(body["name"], "open");
    let (status, body) = app
        .request(
            Method::POST,
            &format!("{detail}/export-key"),
            None,
            Some(json!({"chain": "base", "confirm": true})),
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    let (status, body) = app.request(Method::DELETE, &detail, None, None).await;
    assert_eq!(status, StatusCode::NO_CONTENT, "{body}");
    // Unknown agents are still unknown.
    let unknown = format!("/api/agents/{}", uuid::Uuid::new_v4());
    let response = app.request(Method::GET, &unknown, None, None).await;
    assert_error(&response, StatusCode::NOT_FOUND, "agent_not_found");
}

fn production_vars(extra: &[(&str, &str)]) -> Vec<(String, String)> {
    let dir = std::env::temp_dir().join(format!("agentd-config-{}", uuid::Uuid::new_v4().simple()));
    let mut vars = vec![
        ("BIND_ADDR".to_string(), "127.0.0.1:0".to_string()),
        ("APP_ENV".to_string(), "production".to_string()),
        ("DATABASE_URL".to_string(), sqlite_url(&dir)),
        ("ADMIN_TOKEN".to_string(), "operator-token".to_string()),
        ("PUBLIC_URL".to_string(), "https://wallet.example.com".to_string()),
    ];
    vars.extend(extra.iter().map(|(k, v)| (k.to_string(), v.to_string())));
    vars
}

#[test]
fn a_production_config_with_agent_auth_disabled_is_refused() {
    let accepted = Config::from_vars(production_vars(&[("ENCRYPTION_KEY", ENCRYPTION_KEY)]));
    assert!(
        accepted.is_ok(),
        "a plain production config loads: {:?}",
        accepted.err()
    );

    let refused = Config::from_vars(production_vars(&[
        ("ENCRYPTION_KEY", ENCRYPTION_KEY),
        ("DISABLE_AGENT_AUTH", "true"),
    ]));

    assert!(
        refused.is_err(),
        "DISABLE_AGENT_AUTH=true in production must be refused"
    );
}

#[tokio::test]
async fn a_production_config_without_an_encryption_key_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let vars = vec![
        ("BIND_ADDR".to_string(), "127.0.0.1:0".to_string()),
        ("APP_ENV".to_string(), "production".to_string()),
        ("DATABASE_URL".to_string(), sqlite_url(dir.path())),
    ];

    // Refused when the configuration loads, or at the latest when the app is built.
    if let Ok(config) = Config::from_vars(vars) {
        let built = App::build(config).await;
        assert!(built.is_err(), "production without ENCRYPTION_KEY must not start");
    }
    assert!(
        !dir.path().join("encryption.key").exists(),
        "production never generates a key file"
    );
}

#[test]
fn the_binary_refuses_to_start_in_production_with_agent_auth_disabled() {
    let dir = tempfile::tempdir().unwrap();
    let db = sqlite_url(dir.path());

    let outcome = run_to_exit(
        &[
            ("APP_ENV", "production"),
            ("DISABLE_AGENT_AUTH", "true"),
            ("ENCRYPTION_KEY", ENCRYPTION_KEY),
            ("DATABASE_URL", &db),
            ("BIND_ADDR", "127.0.0.1:0"),
        ],
        dir.path(),
        Duration::from_secs(10),
    );

    let status = outcome.status.expect("agentd exits by itself");
    assert!(!status.success(), "non-zero exit; output:\n{}", outcome.logs);
    assert!(
        outcome.logs.contains("DISABLE_AGENT_AUTH"),
        "the message names the setting:\n{}",
        outcome.logs
    );
    assert!(!outcome.logs.contains("listening on"), "{}", outcome.logs);
}

#[test]
fn the_binary_refuses_to_start_in_production_without_an_encryption_key() {
    let dir = tempfile::tempdir().unwrap();
    let db = sqlite_url(dir.path());

    let outcome = run_to_exit(
        &[
            ("APP_ENV", "production"),
            ("DATABASE_URL", &db),
            ("BIND_ADDR", "127.0.0.1:0"),
        ],
        dir.path(),
        Duration::from_secs(10),
    );

    let status = outcome.status.expect("agentd exits by itself");
    assert!(!status.success(), "non-zero exit; output:\n{}", outcome.logs);
    assert!(
        outcome.logs.contains("ENCRYPTION_KEY"),
        "the message names the setting:\n{}",
        outcome.logs
    );
    assert!(!dir.path().join("encryption.key").exists());
}
