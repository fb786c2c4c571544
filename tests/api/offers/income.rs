//! `GET /api/agents/{id}/income` (§23): the agent token or owner authority; an agent that sold nothing has no
//! income; the filters and the cursor are checked.

use reqwest::{Method, StatusCode};
use serde_json::json;

use crate::auth::owners::{As, call};
use crate::helpers::{assert_error, spawn_app, spawn_app_with};

#[tokio::test]
async fn an_agent_that_sold_nothing_has_no_income_and_bad_filters_are_refused() {
    let app = spawn_app().await;
    let agent = app.create_default_agent().await;
    let path = format!("/api/agents/{}/income", agent.id);
    let (status, body) = app.request(Method::GET, &path, Some(&agent.token), None).await;
    assert_eq!((status, &body), (StatusCode::OK, &json!({"income": []})));
    let offer = uuid::Uuid::new_v4();
    let filtered = format!("{path}?offer={offer}&status=settled&limit=5");
    let (status, body) = app.request(Method::GET, &filtered, Some(&agent.token), None).await;
    assert_eq!((status, &body), (StatusCode::OK, &json!({"income": []})));
    for query in [
        "status=paid",
        "offer=not-an-id",
        "limit=0",
        "limit=many",
        &format!("before={}", uuid::Uuid::new_v4()),
    ] {
        let answer = app
            .request(Method::GET, &format!("{path}?{query}"), Some(&agent.token), None)
            .await;
        assert_error(&answer, StatusCode::UNPROCESSABLE_ENTITY, "validation_failed");
    }
    let answer = app.request(Method::GET, &path, None, None).await;
    assert_error(&answer, StatusCode::UNAUTHORIZED, "missing_token");
}

#[tokio::test]
async fn owner_authority_reads_a_guarded_agents_income_as_its_token_does() {
    const ADMIN: &str = "admin-token-for-income-tests-0123456789";
    let app = spawn_app_with(&[("ADMIN_TOKEN", ADMIN)]).await;
    let agent = app.create_default_agent().await;
    let path = format!("/api/agents/{}/income", agent.id);
    let admin = As {
        admin: Some(ADMIN),
        ..As::default()
    };
    let (status, body) = call(&app, Method::GET, &path, admin, None).await;
    assert_eq!((status, &body), (StatusCode::OK, &json!({"income": []})));
    let (status, body) = app.request(Method::GET, &path, Some(&agent.token), None).await;
    assert_eq!((status, &body), (StatusCode::OK, &json!({"income": []})));
}
