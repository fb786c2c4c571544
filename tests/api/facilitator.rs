//! The agent's own x402 facilitator (§23 "The agent's own facilitator"): facilitator tokens created by the owner
//! (shown once, kept as a hash), listed and deleted; `…/x402/verify`, `…/x402/settle` and `…/x402/supported` open
//! to a live facilitator token of that agent only (not the agent token, not owner authority, not another agent's
//! token); what `supported` answers; and a payment to another address refused as `pay_to_not_agent`.

use alloy::signers::local::PrivateKeySigner;
use reqwest::{Method, StatusCode};
use serde_json::{Value, json};

use crate::auth::owners::{As, call, guarded_agent, owner_session};
use crate::helpers::openapi::Oracle;
use crate::helpers::{CreatedAgent, TestApp, TestResponse, assert_error, spawn_app, spawn_app_with};

const ADMIN: &str = "admin-token-for-facilitator-tests-0123456789";
/// USDC on base, as the registry knows it.
const USDC_BASE: &str = "0x833589fCD6eDb6E08f4c7C32D4f71b54bdA02913";

fn tokens_path(agent: &CreatedAgent) -> String {
    format!("/api/agents/{}/facilitator-tokens", agent.id)
}

fn admin() -> As<'static> {
    As {
        admin: Some(ADMIN),
        ..As::default()
    }
}

/// An app with `ADMIN_TOKEN` set and an agent on base.
async fn app_with_agent() -> (TestApp, CreatedAgent) {
    let app = spawn_app_with(&[("ADMIN_TOKEN", ADMIN)]).await;
    let agent = app
        .create_agent_ok(json!({"name": "seller", "chains": ["base"], "capabilities": ["read", "transact"]}))
        .await;
    (app, agent)
}

/// Creates a facilitator token as the operator; answers the creation's body.
async fn create_token(app: &TestApp, agent: &CreatedAgent) -> Value {
    let (status, body) = call(app, Method::POST, &tokens_path(agent), admin(), None).await;
    assert_eq!(status, StatusCode::CREATED, "{body}");
    body
}

/// A facilitator endpoint (`verify`, `settle`, `supported`) of `agent_id` called with `bearer` (if any).
async fn facilitator(
    app: &TestApp,
    agent_id: &str,
    endpoint: &str,
    bearer: Option<&str>,
    body: Option<Value>,
) -> TestResponse {
    let method = if endpoint == "supported" {
        Method::GET
    } else {
        Method::POST
    };
    let mut builder = app.build(method, &format!("/api/agents/{agent_id}/x402/{endpoint}"), None, body);
    if let Some(bearer) = bearer {
        builder = builder.bearer_auth(bearer);
    }
    app.send(builder).await
}

/// An x402 v2 facilitator body paying 0.01 USDC on base to `pay_to`.
fn payment_to(pay_to: &str) -> Value {
    let payer = PrivateKeySigner::random().address().to_checksum(None);
    let requirements = json!({
        "scheme": "exact", "network": "eip155:8453", "amount": "10000", "asset": USDC_BASE, "payTo": pay_to,
        "maxTimeoutSeconds": 300, "extra": {"name": "USD Coin", "version": "2"},
    });
    let now = chrono::Utc::now().timestamp();
    json!({
        "x402Version": 2,
        "paymentPayload": {
            "x402Version": 2,
            "resource": {"url": "https://api.example.com/weather", "description": "weather", "mimeType": "application/json"},
            "accepted": requirements,
            "payload": {
                "signature": format!("0x{}", "ab".repeat(65)),
                "authorization": {
                    "from": payer, "to": pay_to, "value": "10000", "validAfter": "0",
                    "validBefore": (now + 300).to_string(), "nonce": format!("0x{}", "11".repeat(32)),
                },
            },
        },
        "paymentRequirements": requirements,
    })
}

/// `(action, detail)` of the agent's audit entries, newest first.
async fn audit(app: &TestApp, agent: &CreatedAgent) -> Vec<(String, Value)> {
    let path = format!("/api/agents/{}/audit", agent.id);
    let (status, entries) = call(app, Method::GET, &path, admin(), None).await;
    assert_eq!(status, StatusCode::OK, "{entries}");
    let entries = entries.as_array().expect("a list").clone();
    entries
        .into_iter()
        .map(|e| (e["action"].as_str().unwrap().to_string(), e["detail"].clone()))
        .collect()
}

/// Every file the app wrote (the SQLite database, its WAL) as bytes, to look for a secret at rest.
fn files_at_rest(app: &TestApp) -> Vec<Vec<u8>> {
    std::fs::read_dir(app.dir.path())
        .expect("the app's directory")
        .filter_map(|e| std::fs::read(e.ok()?.path()).ok())
        .collect()
}

/// `(token_hash, prefix, deleted)` of the stored facilitator tokens.
async fn stored_tokens(app: &TestApp) -> Vec<(String, String, bool)> {
    let sql = "SELECT token_hash, prefix, deleted_at IS NOT NULL FROM facilitator_tokens ORDER BY created_at";
    if app.db_url.starts_with("sqlite") {
        let pool = sqlx::SqlitePool::connect(&app.db_url)
            .await
            .expect("open the SQLite file");
        sqlx::query_as(sql).fetch_all(&pool).await.expect("the tokens")
    } else {
        let pool = sqlx::PgPool::connect(&app.db_url).await.expect("connect to PostgreSQL");
        sqlx::query_as(sql).fetch_all(&pool).await.expect("the tokens")
    }
}

#[tokio::test]
async fn a_facilitator_token_is_shown_once_and_kept_only_as_its_hash() {
    let (app, agent) = app_with_agent().await;
    let created = create_token(&app, &agent).await;
    let token = created["token"].as_str().expect("the token").to_string();
    assert!(token.starts_with("fac_") && token.len() == 4 + 43, "{token}");
    assert!(
        created["id"].is_string() && created["created_at"].is_string(),
        "{created}"
    );
    assert_eq!(created.as_object().unwrap().len(), 3, "{created}");

    let (status, listed) = call(&app, Method::GET, &tokens_path(&agent), admin(), None).await;
    assert_eq!(status, StatusCode::OK, "{listed}");
    assert_eq!(
        listed,
        json!({"facilitator_tokens": [{
            "id": created["id"], "prefix": &token[..12], "created_at": created["created_at"], "last_used_at": null,
        }]})
    );
    assert!(!listed.to_string().contains(&token));

    let stored = stored_tokens(&app).await;
    assert_eq!(
        stored,
        vec![(agentd::domain::token::hash(&token), token[..12].to_string(), false)]
    );
    if app.db_url.starts_with("sqlite") {
        for bytes in files_at_rest(&app) {
            assert!(
                !bytes.windows(token.len()).any(|w| w == token.as_bytes()),
                "the token is stored in clear"
            );
        }
    }
    let entries = audit(&app, &agent).await;
    let (action, detail) = &entries[0];
    assert_eq!(action, "facilitator_token_created");
    assert_eq!(detail, &json!({"token_id": created["id"], "prefix": &token[..12]}));

    // A second token is a second row; the list is oldest first.
    let second = create_token(&app, &agent).await;
    assert_ne!(second["token"], created["token"]);
    let (_, listed) = call(&app, Method::GET, &tokens_path(&agent), admin(), None).await;
    let ids: Vec<&Value> = listed["facilitator_tokens"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| &t["id"])
        .collect();
    assert_eq!(ids, vec![&created["id"], &second["id"]]);
}

#[tokio::test]
async fn facilitator_tokens_take_owner_authority_on_a_guarded_agent() {
    let app = spawn_app().await;
    let owner = PrivateKeySigner::random();
    let guarded = guarded_agent(&app, &owner).await;
    let path = tokens_path(&guarded);
    let agent_alone = As {
        agent: Some(&guarded.token),
        ..As::default()
    };
    for method in [Method::POST, Method::GET] {
        let refused = call(&app, method, &path, agent_alone, None).await;
        assert_error(&refused, StatusCode::FORBIDDEN, "owner_required");
    }
    assert!(stored_tokens(&app).await.is_empty());

    let session = owner_session(&app, &guarded.id, &owner).await;
    let as_owner = As {
        owner: Some(&session),
        ..As::default()
    };
    let (status, created) = call(&app, Method::POST, &path, as_owner, None).await;
    assert_eq!(status, StatusCode::CREATED, "{created}");
    let tid = created["id"].as_str().unwrap();
    let one = format!("{path}/{tid}");
    let refused = call(&app, Method::DELETE, &one, agent_alone, None).await;
    assert_error(&refused, StatusCode::FORBIDDEN, "owner_required");
    let entries = audit_as(&app, &guarded, as_owner).await;
    assert!(
        entries
            .iter()
            .any(|(action, actor)| action == "facilitator_token_created" && actor == "owner")
    );

    // An unguarded agent's token may do it, as the seed's agents do everything with theirs.
    let unguarded = app.create_default_agent().await;
    let (status, body) = call(
        &app,
        Method::POST,
        &tokens_path(&unguarded),
        As {
            agent: Some(&unguarded.token),
            ..As::default()
        },
        None,
    )
    .await;
    assert_eq!(status, StatusCode::CREATED, "{body}");
    // Another agent's token reaches none of it.
    let foreign = As {
        agent: Some(&unguarded.token),
        ..As::default()
    };
    let refused = call(&app, Method::GET, &path, foreign, None).await;
    assert_error(&refused, StatusCode::FORBIDDEN, "forbidden");
}

/// `(action, actor)` of the agent's audit entries, newest first, read as `who`.
async fn audit_as(app: &TestApp, agent: &CreatedAgent, who: As<'_>) -> Vec<(String, String)> {
    let path = format!("/api/agents/{}/audit", agent.id);
    let (status, entries) = call(app, Method::GET, &path, who, None).await;
    assert_eq!(status, StatusCode::OK, "{entries}");
    let entries = entries.as_array().expect("a list").clone();
    entries
        .into_iter()
        .map(|e| {
            (
                e["action"].as_str().unwrap().to_string(),
                e["actor"].as_str().unwrap().to_string(),
            )
        })
        .collect()
}

#[tokio::test]
async fn a_deleted_facilitator_token_is_refused_and_gone_from_the_list() {
    let (app, agent) = app_with_agent().await;
    let created = create_token(&app, &agent).await;
    let token = created["token"].as_str().unwrap();
    let one = format!("{}/{}", tokens_path(&agent), created["id"].as_str().unwrap());

    let used = facilitator(&app, &agent.id, "supported", Some(token), None).await;
    assert_eq!(used.status, StatusCode::OK, "{}", used.text);
    let (_, listed) = call(&app, Method::GET, &tokens_path(&agent), admin(), None).await;
    assert!(listed["facilitator_tokens"][0]["last_used_at"].is_string(), "{listed}");

    let (status, body) = call(&app, Method::DELETE, &one, admin(), None).await;
    assert_eq!(status, StatusCode::NO_CONTENT, "{body}");
    assert_eq!(body, Value::Null);
    let (_, listed) = call(&app, Method::GET, &tokens_path(&agent), admin(), None).await;
    assert_eq!(listed, json!({"facilitator_tokens": []}));
    let refused = facilitator(&app, &agent.id, "supported", Some(token), None).await;
    assert_error(
        &(refused.status, refused.body),
        StatusCode::UNAUTHORIZED,
        "invalid_token",
    );

    let again = call(&app, Method::DELETE, &one, admin(), None).await;
    assert_error(&again, StatusCode::NOT_FOUND, "facilitator_token_not_found");
    let malformed = call(
        &app,
        Method::DELETE,
        &format!("{}/not-a-uuid", tokens_path(&agent)),
        admin(),
        None,
    )
    .await;
    assert_error(&malformed, StatusCode::NOT_FOUND, "facilitator_token_not_found");
    let entries = audit(&app, &agent).await;
    assert_eq!(entries[0].0, "facilitator_token_deleted");
    assert_eq!(entries[0].1, json!({"token_id": created["id"], "prefix": &token[..12]}));
    assert!(stored_tokens(&app).await[0].2, "kept, marked deleted");
}

#[tokio::test]
async fn the_facilitator_endpoints_take_a_facilitator_token_of_their_agent_only() {
    let (app, agent) = app_with_agent().await;
    let other = app.create_default_agent().await;
    let mine = create_token(&app, &agent).await["token"].as_str().unwrap().to_string();
    let theirs = create_token(&app, &other).await["token"].as_str().unwrap().to_string();
    let unknown = format!("fac_{}", "A".repeat(43));
    for endpoint in ["verify", "settle", "supported"] {
        let body = (endpoint != "supported").then(|| payment_to(&agent.address("base")));
        let refuse = |response: TestResponse, status: StatusCode, code: &str| {
            assert_error(&(response.status, response.body), status, code);
        };
        refuse(
            facilitator(&app, &agent.id, endpoint, None, body.clone()).await,
            StatusCode::UNAUTHORIZED,
            "missing_token",
        );
        // The agent token, in its header or as the bearer, and owner authority open nothing here.
        let method = if endpoint == "supported" {
            Method::GET
        } else {
            Method::POST
        };
        let path = format!("/api/agents/{}/x402/{endpoint}", agent.id);
        let with_agent_token = app
            .send(app.build(method, &path, Some(&agent.token), body.clone()))
            .await;
        refuse(with_agent_token, StatusCode::UNAUTHORIZED, "missing_token");
        for bearer in [agent.token.as_str(), ADMIN, unknown.as_str()] {
            refuse(
                facilitator(&app, &agent.id, endpoint, Some(bearer), body.clone()).await,
                StatusCode::UNAUTHORIZED,
                "invalid_token",
            );
        }
        refuse(
            facilitator(&app, &agent.id, endpoint, Some(&theirs), body.clone()).await,
            StatusCode::FORBIDDEN,
            "forbidden",
        );
        let unknown_agent = uuid::Uuid::new_v4().to_string();
        refuse(
            facilitator(&app, &unknown_agent, endpoint, Some(&mine), body.clone()).await,
            StatusCode::NOT_FOUND,
            "agent_not_found",
        );
        let ok = facilitator(&app, &agent.id, endpoint, Some(&mine), body).await;
        assert_eq!(ok.status, StatusCode::OK, "{endpoint}: {}", ok.text);
    }
    // A facilitator token opens nothing else of the agent.
    for path in [
        format!("/api/agents/{}", agent.id),
        tokens_path(&agent),
        format!("/api/agents/{}/income", agent.id),
    ] {
        let response = app
            .send(app.build(Method::GET, &path, None, None).bearer_auth(&mine))
            .await;
        assert_eq!(response.status, StatusCode::UNAUTHORIZED, "{path}: {}", response.text);
    }
    // A token presented on another agent's endpoints was not used there.
    let (_, listed) = call(&app, Method::GET, &tokens_path(&other), admin(), None).await;
    assert_eq!(listed["facilitator_tokens"][0]["last_used_at"], Value::Null, "{listed}");
    // A deleted agent's facilitator answers 410.
    let (status, _) = call(
        &app,
        Method::DELETE,
        &format!("/api/agents/{}", agent.id),
        admin(),
        None,
    )
    .await;
    assert_eq!(status, StatusCode::NO_CONTENT);
    let gone = facilitator(&app, &agent.id, "supported", Some(&mine), None).await;
    assert_error(&(gone.status, gone.body), StatusCode::GONE, "agent_inactive");
}

#[tokio::test]
async fn supported_names_the_agents_network_and_wallet() {
    let (app, agent) = app_with_agent().await;
    let token = create_token(&app, &agent).await["token"].as_str().unwrap().to_string();
    let supported = facilitator(&app, &agent.id, "supported", Some(&token), None).await;
    assert_eq!(supported.status, StatusCode::OK, "{}", supported.text);
    assert_eq!(
        supported.body,
        json!({
            "kinds": [{"x402Version": 2, "scheme": "exact", "network": "eip155:8453"}],
            "extensions": [],
            "signers": {"eip155:*": [agent.address("base")]},
        })
    );
}

#[tokio::test]
async fn a_payment_to_another_address_is_not_this_facilitators_to_take() {
    let (app, agent) = app_with_agent().await;
    let token = create_token(&app, &agent).await["token"].as_str().unwrap().to_string();
    let elsewhere = PrivateKeySigner::random().address().to_checksum(None);
    let verified = facilitator(&app, &agent.id, "verify", Some(&token), Some(payment_to(&elsewhere))).await;
    assert_eq!(verified.status, StatusCode::OK, "{}", verified.text);
    assert_eq!(verified.body["isValid"], false, "{}", verified.text);
    assert_eq!(verified.body["invalidReason"], "pay_to_not_agent", "{}", verified.text);
    let settled = facilitator(&app, &agent.id, "settle", Some(&token), Some(payment_to(&elsewhere))).await;
    assert_eq!(settled.status, StatusCode::OK, "{}", settled.text);
    assert_eq!(settled.body["success"], false, "{}", settled.text);
    assert_eq!(settled.body["errorReason"], "pay_to_not_agent", "{}", settled.text);
    assert_eq!(settled.body["transaction"], "", "{}", settled.text);
    let (status, income) = call(
        &app,
        Method::GET,
        &format!("/api/agents/{}/income", agent.id),
        admin(),
        None,
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{income}");
    assert_eq!(income["income"], json!([]), "nothing taken");
}

#[tokio::test]
async fn a_facilitator_body_must_be_a_json_object() {
    let (app, agent) = app_with_agent().await;
    let token = create_token(&app, &agent).await["token"].as_str().unwrap().to_string();
    let path = format!("/api/agents/{}/x402/verify", agent.id);
    let not_json = app
        .client
        .post(app.url(&path))
        .bearer_auth(&token)
        .header("content-type", "application/json")
        .body("{nope");
    let response = app.send(not_json).await;
    assert_error(
        &(response.status, response.body),
        StatusCode::BAD_REQUEST,
        "invalid_json",
    );
    let array = facilitator(&app, &agent.id, "verify", Some(&token), Some(json!([1, 2]))).await;
    assert_error(
        &(array.status, array.body),
        StatusCode::UNPROCESSABLE_ENTITY,
        "validation_failed",
    );
    let empty = facilitator(&app, &agent.id, "verify", Some(&token), Some(json!({}))).await;
    assert_eq!(empty.status, StatusCode::OK, "any object parses: {}", empty.text);
}

/// The facilitator's routes, for the document's check of real responses (`service::openapi`).
pub async fn drive_facilitator(oracle: &mut Oracle) {
    let (app, agent) = app_with_agent().await;
    let tokens = tokens_path(&agent);
    let template = "/api/agents/{id}/facilitator-tokens";
    let created = app
        .send(app.build(Method::POST, &tokens, None, None).bearer_auth(ADMIN))
        .await;
    oracle.check("POST", template, &created);
    let token = created.body["token"].as_str().expect("a token").to_string();
    oracle.check(
        "GET",
        template,
        &app.send(app.build(Method::GET, &tokens, None, None).bearer_auth(ADMIN))
            .await,
    );
    oracle.check(
        "GET",
        template,
        &app.send(app.build(Method::GET, &tokens, Some(&agent.token), None))
            .await,
    );
    let elsewhere = PrivateKeySigner::random().address().to_checksum(None);
    for endpoint in ["verify", "settle", "supported"] {
        let body = (endpoint != "supported").then(|| payment_to(&elsewhere));
        let method = if endpoint == "supported" { "GET" } else { "POST" };
        let template = format!("/api/agents/{{id}}/x402/{endpoint}");
        oracle.check(
            method,
            &template,
            &facilitator(&app, &agent.id, endpoint, Some(&token), body.clone()).await,
        );
        oracle.check(
            method,
            &template,
            &facilitator(&app, &agent.id, endpoint, None, body).await,
        );
    }
    let one = format!("{tokens}/{}", created.body["id"].as_str().unwrap());
    let template = "/api/agents/{id}/facilitator-tokens/{tid}";
    for _ in 0..2 {
        oracle.check(
            "DELETE",
            template,
            &app.send(app.build(Method::DELETE, &one, None, None).bearer_auth(ADMIN))
                .await,
        );
    }
}
