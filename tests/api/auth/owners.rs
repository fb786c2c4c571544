//! Owner authority (docs/api.md §10): Sign-In with Ethereum owner sessions, guarded agents refusing loosenings made
//! with the agent token alone, reactivation, and key export of an inactive agent by its owner.

use alloy::signers::local::PrivateKeySigner;
use reqwest::{Method, StatusCode};
use serde_json::{Value, json};

use crate::helpers::{CreatedAgent, TestApp, assert_error, checksummed, sign, spawn_app, spawn_app_with, token_proof};

pub const OWNER_HEADER: &str = "X-Owner-Token";

/// Credentials of a request: the agent token, an owner session, the admin bearer, in any combination.
#[derive(Default, Clone, Copy)]
pub struct As<'a> {
    pub agent: Option<&'a str>,
    pub owner: Option<&'a str>,
    pub admin: Option<&'a str>,
}

pub async fn call(app: &TestApp, method: Method, path: &str, who: As<'_>, body: Option<Value>) -> (StatusCode, Value) {
    let mut builder = app.build(method, path, who.agent, body);
    if let Some(owner) = who.owner {
        builder = builder.header(OWNER_HEADER, owner);
    }
    if let Some(admin) = who.admin {
        builder = builder.bearer_auth(admin);
    }
    let response = app.send(builder).await;
    (response.status, response.body)
}

pub async fn owner_challenge(app: &TestApp, agent_id: &str, chain: &str, address: &str) -> (StatusCode, Value) {
    let path = format!("/api/agents/{agent_id}/owner-challenge?chain={chain}&address={address}");
    call(app, Method::GET, &path, As::default(), None).await
}

pub async fn post_session(
    app: &TestApp,
    agent_id: &str,
    chain: &str,
    message: &str,
    signature: &str,
) -> (StatusCode, Value) {
    let body = json!({"chain": chain, "message": message, "signature": signature});
    let path = format!("/api/agents/{agent_id}/owner-session");
    call(app, Method::POST, &path, As::default(), Some(body)).await
}

/// Signs a fresh challenge with `owner` and returns the owner token.
pub async fn owner_session(app: &TestApp, agent_id: &str, owner: &PrivateKeySigner) -> String {
    let (status, challenge) = owner_challenge(app, agent_id, "base", &checksummed(owner)).await;
    assert_eq!(status, StatusCode::OK, "{challenge}");
    let message = challenge["message"].as_str().unwrap();
    let (status, body) = post_session(app, agent_id, "base", message, &sign(owner, message)).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    body["owner_token"].as_str().unwrap().to_string()
}

/// An agent on base with `read`, a cap of 1, and `owner` as its owner.
pub async fn guarded_agent(app: &TestApp, owner: &PrivateKeySigner) -> CreatedAgent {
    app.create_agent_ok(
        json!({"name": "guarded", "chains": ["base"], "capabilities": ["read"], "spending_cap": 1,
        "owner_addresses": {"base": checksummed(owner)}}),
    )
    .await
}

/// Runs SQL on the test's database (to age challenges and sessions).
pub async fn execute(app: &TestApp, sql: &str) {
    if app.db_url.starts_with("sqlite") {
        let pool = sqlx::SqlitePool::connect(&app.db_url)
            .await
            .expect("open the SQLite file");
        sqlx::query(sqlx::AssertSqlSafe(sql.to_string()))
            .execute(&pool)
            .await
            .expect("the SQL runs");
    } else {
        let pool = sqlx::PgPool::connect(&app.db_url).await.expect("connect to PostgreSQL");
        sqlx::query(sqlx::AssertSqlSafe(sql.to_string()))
            .execute(&pool)
            .await
            .expect("the SQL runs");
    }
}

fn loosenings(stranger: &PrivateKeySigner) -> Vec<(&'static str, Value)> {
    vec![
        ("raising the cap", json!({"spending_cap": 2})),
        ("adding a capability", json!({"capabilities": ["read", "transact"]})),
        ("adding a chain", json!({"chains": ["base", "ethereum"]})),
        (
            "changing the owners",
            json!({"owner_addresses": {"base": checksummed(stranger)}}),
        ),
        ("removing the owners", json!({"owner_addresses": {}})),
    ]
}

fn export_body() -> Option<Value> {
    Some(json!({"chain": "base", "confirm": true}))
}

#[tokio::test]
async fn the_agent_detail_says_whether_the_agent_is_guarded() {
    let app = spawn_app().await;
    let plain = app.create_default_agent().await;
    let owner = PrivateKeySigner::random();
    let owned = guarded_agent(&app, &owner).await;
    assert_eq!(app.get_agent(&plain.id, &plain.token).await.1["guarded"], false);
    assert_eq!(app.get_agent(&owned.id, &owned.token).await.1["guarded"], true);

    let admin_app = spawn_app_with(&[("ADMIN_TOKEN", "operator-secret")]).await;
    let agent = admin_app.create_default_agent().await;
    assert_eq!(admin_app.get_agent(&agent.id, &agent.token).await.1["guarded"], true);
}

#[tokio::test]
async fn each_loosening_of_a_guarded_agent_is_refused_with_the_agent_token_alone() {
    let app = spawn_app().await;
    let owner = PrivateKeySigner::random();
    let agent = guarded_agent(&app, &owner).await;
    let (_, before) = app.get_agent(&agent.id, &agent.token).await;

    for (what, body) in loosenings(&PrivateKeySigner::random()) {
        let response = app.put_agent(&agent.id, &agent.token, body).await;
        assert_error(&response, StatusCode::FORBIDDEN, "owner_required");
        let (_, after) = app.get_agent(&agent.id, &agent.token).await;
        assert_eq!(after, before, "{what} changed nothing");
    }
    let response = app.export_key(&agent.id, &agent.token, export_body().unwrap()).await;
    assert_error(&response, StatusCode::FORBIDDEN, "owner_required");
}

#[tokio::test]
async fn tightening_a_guarded_agent_stays_possible_with_the_agent_token() {
    let app = spawn_app().await;
    let owner = PrivateKeySigner::random();
    let agent = app
        .create_agent_ok(
            json!({"name": "a", "chains": ["base", "ethereum"], "capabilities": ["read", "transact"],
            "spending_cap": 1, "owner_addresses": {"base": checksummed(&owner)}}),
        )
        .await;
    let body = json!({"spending_cap": 0.5, "capabilities": ["read"], "chains": ["base"], "name": "renamed",
        "description": "tighter", "owner_addresses": {"base": checksummed(&owner)}});
    let (status, detail) = app.put_agent(&agent.id, &agent.token, body).await;
    assert_eq!(status, StatusCode::OK, "{detail}");
    assert_eq!(detail["spending_cap"], json!(0.5));
    assert_eq!(detail["capabilities"], json!(["read"]));
    assert_eq!(detail["chains"], json!(["base"]));
    assert_eq!(detail["name"], "renamed");
    let (status, _) = app.delete_agent(&agent.id, &agent.token).await;
    assert_eq!(status, StatusCode::NO_CONTENT);
}

#[tokio::test]
async fn loosenings_are_accepted_with_the_admin_token() {
    let app = spawn_app_with(&[("ADMIN_TOKEN", "operator-secret")]).await;
    let agent = app.create_default_agent().await;
    let admin = As {
        admin: Some("operator-secret"),
        ..As::default()
    };
    let response = app.put_agent(&agent.id, &agent.token, json!({"spending_cap": 3})).await;
    assert_error(&response, StatusCode::FORBIDDEN, "owner_required");

    let path = format!("/api/agents/{}", agent.id);
    let (status, detail) = call(&app, Method::PUT, &path, admin, Some(json!({"spending_cap": 3}))).await;
    assert_eq!(
        (status, &detail["spending_cap"]),
        (StatusCode::OK, &json!(3)),
        "{detail}"
    );
    let with_both = As {
        agent: Some(&agent.token),
        ..admin
    };
    let body = Some(json!({"capabilities": ["read", "transact"]}));
    let (status, detail) = call(&app, Method::PUT, &path, with_both, body).await;
    assert_eq!(status, StatusCode::OK, "{detail}");
    let export = format!("/api/agents/{}/export-key", agent.id);
    let body = Some(json!({"chain": "ethereum", "confirm": true}));
    let (status, key) = call(&app, Method::POST, &export, admin, body).await;
    assert_eq!(status, StatusCode::OK, "{key}");

    let wrong = As {
        admin: Some("not-the-token"),
        ..As::default()
    };
    let (status, _) = call(&app, Method::PUT, &path, wrong, Some(json!({"spending_cap": 9}))).await;
    assert_eq!(status, StatusCode::UNAUTHORIZED);
}

#[tokio::test]
async fn loosenings_are_accepted_with_an_owner_session() {
    let app = spawn_app().await;
    let owner = PrivateKeySigner::random();
    let agent = guarded_agent(&app, &owner).await;
    let session = owner_session(&app, &agent.id, &owner).await;
    assert!(session.starts_with("own_"), "{session}");
    let owner_only = As {
        owner: Some(&session),
        ..As::default()
    };
    let path = format!("/api/agents/{}", agent.id);

    for (what, body) in loosenings(&owner) {
        if what == "removing the owners" || what == "changing the owners" {
            continue;
        }
        let (status, detail) = call(&app, Method::PUT, &path, owner_only, Some(body)).await;
        assert_eq!(status, StatusCode::OK, "{what}: {detail}");
    }
    let (_, detail) = call(&app, Method::GET, &path, owner_only, None).await;
    assert_eq!(detail["spending_cap"], json!(2));
    assert_eq!(detail["chains"], json!(["base", "ethereum"]));
    let export = format!("/api/agents/{}/export-key", agent.id);
    let (status, key) = call(&app, Method::POST, &export, owner_only, export_body()).await;
    assert_eq!(status, StatusCode::OK, "{key}");
}

#[tokio::test]
async fn a_strangers_signature_is_refused_and_leaves_the_challenge_usable() {
    let app = spawn_app().await;
    let owner = PrivateKeySigner::random();
    let stranger = PrivateKeySigner::random();
    let agent = guarded_agent(&app, &owner).await;

    // A challenge is issued for any address, but a stranger's own signature proves nothing.
    let (status, own) = owner_challenge(&app, &agent.id, "base", &checksummed(&stranger)).await;
    assert_eq!(status, StatusCode::OK);
    let message = own["message"].as_str().unwrap();
    let response = post_session(&app, &agent.id, "base", message, &sign(&stranger, message)).await;
    assert_error(&response, StatusCode::UNAUTHORIZED, "invalid_proof");

    // The owner's challenge signed by the stranger fails, and the owner can still use it.
    let (_, challenge) = owner_challenge(&app, &agent.id, "base", &checksummed(&owner)).await;
    let message = challenge["message"].as_str().unwrap();
    let response = post_session(&app, &agent.id, "base", message, &sign(&stranger, message)).await;
    assert_error(&response, StatusCode::UNAUTHORIZED, "invalid_proof");
    let (status, body) = post_session(&app, &agent.id, "base", message, &sign(&owner, message)).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert!(body["expires_at"].is_string());
}

#[tokio::test]
async fn a_replayed_altered_or_malformed_challenge_is_refused() {
    let app = spawn_app().await;
    let owner = PrivateKeySigner::random();
    let agent = guarded_agent(&app, &owner).await;
    let (_, challenge) = owner_challenge(&app, &agent.id, "base", &checksummed(&owner)).await;
    let message = challenge["message"].as_str().unwrap();
    assert!(message.contains(&agent.id), "{message}");
    assert!(message.contains("Chain ID: 8453"), "{message}");

    let altered = message.replace("Sign in as", "Log in as");
    let response = post_session(&app, &agent.id, "base", &altered, &sign(&owner, &altered)).await;
    assert_error(&response, StatusCode::UNAUTHORIZED, "invalid_proof");
    let response = post_session(&app, &agent.id, "base", "hello", &sign(&owner, "hello")).await;
    assert_error(&response, StatusCode::BAD_REQUEST, "malformed_challenge");

    let signature = sign(&owner, message);
    let (status, _) = post_session(&app, &agent.id, "base", message, &signature).await;
    assert_eq!(status, StatusCode::OK);
    let response = post_session(&app, &agent.id, "base", message, &signature).await;
    assert_error(&response, StatusCode::UNAUTHORIZED, "invalid_proof");
}

/// A challenge is expired when its stored expiry has passed, and so is a message whose own expiration time has
/// passed, whether or not its challenge is still stored (the purge removes expired ones after a while), as for a
/// reissue (§4).
#[tokio::test]
async fn an_expired_challenge_is_refused_even_once_it_is_purged() {
    let app = spawn_app().await;
    let owner = PrivateKeySigner::random();
    let agent = guarded_agent(&app, &owner).await;
    let (_, challenge) = owner_challenge(&app, &agent.id, "base", &checksummed(&owner)).await;
    let message = challenge["message"].as_str().unwrap();
    // A minute ago: younger than what the purge keeps of expired challenges. (The purge runs at start; a challenge
    // dated 2020 could be gone before the proof arrives, and then names no challenge at all.)
    let just_expired = (chrono::Utc::now() - chrono::TimeDelta::minutes(1)).to_rfc3339();
    execute(
        &app,
        &format!("UPDATE owner_challenges SET expires_at = '{just_expired}'"),
    )
    .await;
    let response = post_session(&app, &agent.id, "base", message, &sign(&owner, message)).await;
    assert_error(&response, StatusCode::UNPROCESSABLE_ENTITY, "challenge_expired");

    execute(&app, "DELETE FROM owner_challenges").await;
    let line = message
        .lines()
        .find(|l| l.starts_with("Expiration Time: "))
        .expect("the challenge has an expiration time");
    let expired = message.replace(line, "Expiration Time: 2026-01-01T00:00:00.000Z");
    let response = post_session(&app, &agent.id, "base", &expired, &sign(&owner, &expired)).await;
    assert_error(&response, StatusCode::UNPROCESSABLE_ENTITY, "challenge_expired");
    // Still in its time, the same purged challenge is unknown.
    let response = post_session(&app, &agent.id, "base", message, &sign(&owner, message)).await;
    assert_error(&response, StatusCode::UNAUTHORIZED, "invalid_proof");
}

#[tokio::test]
async fn unknown_and_expired_owner_tokens_are_refused_and_a_foreign_one_is_forbidden() {
    let app = spawn_app().await;
    let owner = PrivateKeySigner::random();
    let agent = guarded_agent(&app, &owner).await;
    let other = guarded_agent(&app, &owner).await;
    let session = owner_session(&app, &agent.id, &owner).await;
    let path = |id: &str| format!("/api/agents/{id}");
    let with = |token| As {
        owner: Some(token),
        ..As::default()
    };

    let foreign = call(&app, Method::GET, &path(&other.id), with(&session), None).await;
    assert_error(&foreign, StatusCode::FORBIDDEN, "forbidden");
    let unknown = format!("own_{}", "A".repeat(43));
    let response = call(&app, Method::GET, &path(&agent.id), with(&unknown), None).await;
    assert_error(&response, StatusCode::UNAUTHORIZED, "invalid_owner_token");

    // A session lasts a quarter of an hour (`siwe::SESSION_LIFETIME_SECS`), which passes on the app's clock.
    app.clock.advance(std::time::Duration::from_secs(901));
    let response = call(&app, Method::GET, &path(&agent.id), with(&session), None).await;
    assert_error(&response, StatusCode::UNAUTHORIZED, "invalid_owner_token");
}

#[tokio::test]
async fn reactivation_of_a_guarded_agent_needs_its_owner() {
    let app = spawn_app().await;
    let owner = PrivateKeySigner::random();
    let agent = guarded_agent(&app, &owner).await;
    app.delete_agent(&agent.id, &agent.token).await;
    let path = format!("/api/agents/{}/reactivate", agent.id);
    let as_agent = As {
        agent: Some(&agent.token),
        ..As::default()
    };
    let response = call(&app, Method::POST, &path, as_agent, None).await;
    assert_error(&response, StatusCode::FORBIDDEN, "owner_required");

    let session = owner_session(&app, &agent.id, &owner).await;
    let as_owner = As {
        owner: Some(&session),
        ..As::default()
    };
    let (status, detail) = call(&app, Method::POST, &path, as_owner, None).await;
    assert_eq!(
        (status, &detail["is_active"]),
        (StatusCode::OK, &json!(true)),
        "{detail}"
    );
    assert_eq!(app.get_agent(&agent.id, &agent.token).await.1["is_active"], true);
}

#[tokio::test]
async fn an_unguarded_agent_is_reactivated_with_its_own_token() {
    let app = spawn_app().await;
    let agent = app.create_default_agent().await;
    app.delete_agent(&agent.id, &agent.token).await;
    let path = format!("/api/agents/{}/reactivate", agent.id);
    let as_agent = As {
        agent: Some(&agent.token),
        ..As::default()
    };
    let (status, detail) = call(&app, Method::POST, &path, as_agent, None).await;
    assert_eq!(
        (status, &detail["is_active"]),
        (StatusCode::OK, &json!(true)),
        "{detail}"
    );
}

#[tokio::test]
async fn the_owner_exports_the_key_of_an_inactive_agent() {
    let app = spawn_app().await;
    let owner = PrivateKeySigner::random();
    let agent = guarded_agent(&app, &owner).await;
    let session = owner_session(&app, &agent.id, &owner).await;
    app.delete_agent(&agent.id, &agent.token).await;

    let response = app.export_key(&agent.id, &agent.token, export_body().unwrap()).await;
    assert_error(&response, StatusCode::GONE, "agent_inactive");
    let path = format!("/api/agents/{}/export-key", agent.id);
    let as_owner = As {
        owner: Some(&session),
        ..As::default()
    };
    let (status, key) = call(&app, Method::POST, &path, as_owner, export_body()).await;
    assert_eq!(status, StatusCode::OK, "{key}");
    assert_eq!(key["address"], agent.address("base"));
}

#[tokio::test]
async fn the_sign_in_domain_is_the_public_url_host_or_the_request_host() {
    let app = spawn_app_with(&[("PUBLIC_URL", "https://wallet.example.com")]).await;
    let agent = app.create_default_agent().await;
    let (_, challenge) = owner_challenge(&app, &agent.id, "ethereum", &checksummed(&PrivateKeySigner::random())).await;
    let message = challenge["message"].as_str().unwrap();
    assert!(
        message.starts_with("wallet.example.com wants you to sign in"),
        "{message}"
    );
    assert!(
        message.contains("\nURI: https://wallet.example.com/api/agents/"),
        "{message}"
    );

    let app = spawn_app().await;
    let agent = app.create_default_agent().await;
    let (_, challenge) = owner_challenge(&app, &agent.id, "ethereum", &checksummed(&PrivateKeySigner::random())).await;
    let host = app.address.trim_start_matches("http://");
    assert!(
        challenge["message"]
            .as_str()
            .unwrap()
            .starts_with(&format!("{host} wants you")),
        "{challenge}"
    );

    let response = owner_challenge(&app, &agent.id, "nowhere", "0x0").await;
    assert_error(&response, StatusCode::UNPROCESSABLE_ENTITY, "validation_failed");
}

#[tokio::test]
async fn failed_reissue_and_owner_session_proofs_share_one_count() {
    let app = spawn_app_with(&[("REISSUE_LIMIT_PER_AGENT", "2")]).await;
    let owner = PrivateKeySigner::random();
    let agent = guarded_agent(&app, &owner).await;
    let forged = format!("agt_{}", "Q".repeat(43));
    for _ in 0..2 {
        let response = app.reissue_token(&agent.id, token_proof(&forged)).await;
        assert_error(&response, StatusCode::UNAUTHORIZED, "invalid_proof");
    }
    let (_, challenge) = owner_challenge(&app, &agent.id, "base", &checksummed(&owner)).await;
    let message = challenge["message"].as_str().unwrap();
    let stranger = PrivateKeySigner::random();
    let response = post_session(&app, &agent.id, "base", message, &sign(&stranger, message)).await;
    assert_error(&response, StatusCode::TOO_MANY_REQUESTS, "rate_limited");
    // A valid proof is still accepted: strangers' failures never lock the owner out.
    let (status, body) = post_session(&app, &agent.id, "base", message, &sign(&owner, message)).await;
    assert_eq!(status, StatusCode::OK, "{body}");
}

#[tokio::test]
async fn owner_authority_alone_reads_the_agents_transactions() {
    let app = spawn_app().await;
    let owner = PrivateKeySigner::random();
    let agent = guarded_agent(&app, &owner).await;
    let session = owner_session(&app, &agent.id, &owner).await;
    let as_owner = As {
        owner: Some(&session),
        ..As::default()
    };
    let path = format!("/api/agents/{}/transactions", agent.id);
    let (status, body) = call(&app, Method::GET, &path, as_owner, None).await;
    assert_eq!((status, body), (StatusCode::OK, json!([])));
}

#[tokio::test]
async fn a_session_ends_when_its_address_stops_being_an_owner_and_cannot_put_itself_back() {
    let app = spawn_app_with(&[("ADMIN_TOKEN", "operator-secret")]).await;
    let (x, y) = (PrivateKeySigner::random(), PrivateKeySigner::random());
    let agent = guarded_agent(&app, &x).await;
    let session = owner_session(&app, &agent.id, &x).await;
    let path = format!("/api/agents/{}", agent.id);
    let as_x = As {
        owner: Some(&session),
        ..As::default()
    };
    let (status, body) = call(&app, Method::GET, &path, as_x, None).await;
    assert_eq!(status, StatusCode::OK, "{body}");

    // Another owner on another chain beside X leaves X's session alone.
    let admin = As {
        admin: Some("operator-secret"),
        ..As::default()
    };
    let both = json!({"owner_addresses": {"base": checksummed(&x), "ethereum": checksummed(&y)}});
    let (status, body) = call(&app, Method::PUT, &path, admin, Some(both)).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    let (status, body) = call(&app, Method::GET, &path, as_x, None).await;
    assert_eq!(status, StatusCode::OK, "{body}");

    // The operator replaces X by Y: X's session ends at its next use, and cannot make X an owner again.
    let replaced = json!({"owner_addresses": {"base": checksummed(&y)}});
    let (status, body) = call(&app, Method::PUT, &path, admin, Some(replaced)).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_error(
        &call(&app, Method::GET, &path, as_x, None).await,
        StatusCode::UNAUTHORIZED,
        "invalid_owner_token",
    );
    let back = json!({"owner_addresses": {"base": checksummed(&x)}});
    assert_error(
        &call(&app, Method::PUT, &path, as_x, Some(back)).await,
        StatusCode::UNAUTHORIZED,
        "invalid_owner_token",
    );
    let (_, detail) = call(&app, Method::GET, &path, admin, None).await;
    assert_eq!(detail["owner_addresses"]["base"], checksummed(&y), "{detail}");
}

#[tokio::test]
async fn signing_out_ends_the_session_at_once() {
    let app = spawn_app().await;
    let owner = PrivateKeySigner::random();
    let agent = guarded_agent(&app, &owner).await;
    let other = guarded_agent(&app, &owner).await;
    let session = owner_session(&app, &agent.id, &owner).await;
    let as_owner = As {
        owner: Some(&session),
        ..As::default()
    };
    let sign_out = format!("/api/agents/{}/owner-session", agent.id);

    // Another agent's path, no token, or an unknown one: nothing is ended.
    let foreign = format!("/api/agents/{}/owner-session", other.id);
    assert_error(
        &call(&app, Method::DELETE, &foreign, as_owner, None).await,
        StatusCode::FORBIDDEN,
        "forbidden",
    );
    let (status, _) = call(&app, Method::DELETE, &sign_out, As::default(), None).await;
    assert_eq!(status, StatusCode::UNAUTHORIZED);
    let unknown = As {
        owner: Some("own_QQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQQ"),
        ..As::default()
    };
    assert_error(
        &call(&app, Method::DELETE, &sign_out, unknown, None).await,
        StatusCode::UNAUTHORIZED,
        "invalid_owner_token",
    );
    let path = format!("/api/agents/{}", agent.id);
    assert_eq!(call(&app, Method::GET, &path, as_owner, None).await.0, StatusCode::OK);

    let (status, body) = call(&app, Method::DELETE, &sign_out, as_owner, None).await;
    assert_eq!(status, StatusCode::NO_CONTENT, "{body}");
    assert_error(
        &call(&app, Method::GET, &path, as_owner, None).await,
        StatusCode::UNAUTHORIZED,
        "invalid_owner_token",
    );
    let (status, _) = call(&app, Method::DELETE, &sign_out, as_owner, None).await;
    assert_eq!(
        status,
        StatusCode::UNAUTHORIZED,
        "a second sign-out finds nothing to end"
    );
}

#[tokio::test]
async fn an_owner_address_that_is_not_one_is_refused_naming_the_value_given() {
    let app = spawn_app().await;
    let bad = "0xYourOwnWallet...";
    let response = app
        .create_agent(json!({"name": "owned", "chains": ["base"], "owner_addresses": {"base": bad}}))
        .await;
    assert_error(&response, StatusCode::UNPROCESSABLE_ENTITY, "validation_failed");
    let message = response.1["error"]["message"].as_str().unwrap();
    assert!(message.contains(bad), "the message names the value given: {message}");
    assert!(
        !message.contains("'base' is not"),
        "the chain is not the bad value: {message}"
    );
}

#[tokio::test]
async fn a_key_export_without_credential_is_told_which_credentials_it_takes() {
    let app = spawn_app().await;
    let owner = PrivateKeySigner::random();
    let agent = guarded_agent(&app, &owner).await;
    let path = format!("/api/agents/{}/export-key", agent.id);
    let body = json!({"chain": "base", "confirm": true});

    let (status, none) = call(&app, Method::POST, &path, As::default(), Some(body.clone())).await;
    assert_eq!(status, StatusCode::UNAUTHORIZED, "{none}");
    assert_eq!(none["error"]["code"], "missing_token", "{none}");
    let message = none["error"]["message"].as_str().unwrap();
    assert!(
        message.contains("X-Owner-Token") && message.contains("ADMIN_TOKEN"),
        "{message}"
    );

    // This server has no admin token: a bearer is no credential, and the answer says so.
    let as_bearer = As {
        admin: Some("adm_not_configured_here"),
        ..As::default()
    };
    let (status, bearer) = call(&app, Method::POST, &path, as_bearer, Some(body)).await;
    assert_eq!(status, StatusCode::UNAUTHORIZED, "{bearer}");
    assert!(
        bearer["error"]["message"]
            .as_str()
            .unwrap()
            .contains("sets no ADMIN_TOKEN"),
        "{bearer}"
    );
}
