//! The limits of the reissue and owner-session endpoints (docs/api.md §4, §10, §15): requests per client address on
//! each endpoint, failed proofs per canonical agent id, a valid proof always accepted, bounded limiter tables.

use alloy::signers::local::PrivateKeySigner;
use reqwest::{Method, StatusCode};
use serde_json::json;

use crate::auth::owners::{guarded_agent, owner_challenge, owner_session};
use crate::helpers::{TestApp, assert_error, checksummed, spawn_app, spawn_app_with, token_proof};

async fn assert_rate_limited(app: &TestApp, path: &str, body: Option<serde_json::Value>) {
    let method = if body.is_some() { Method::POST } else { Method::GET };
    let response = app.send(app.build(method, path, None, body)).await;
    assert_error(
        &(response.status, response.body.clone()),
        StatusCode::TOO_MANY_REQUESTS,
        "rate_limited",
    );
    let retry_after = response
        .headers
        .get("retry-after")
        .expect("a Retry-After header")
        .to_str()
        .unwrap();
    let seconds: u64 = retry_after.parse().expect("Retry-After in seconds");
    assert!((1..=60).contains(&seconds), "Retry-After {seconds}");
}

fn forged_token() -> String {
    format!("agt_{}", "Q".repeat(43))
}

/// The ways of writing one uuid that a uuid parser accepts.
fn spellings(id: &str) -> Vec<String> {
    let simple = id.replace('-', "");
    vec![
        id.to_string(),
        id.to_uppercase(),
        simple.clone(),
        simple.to_uppercase(),
        format!("{{{id}}}"),
        format!("urn:uuid:{id}"),
    ]
}

#[tokio::test]
async fn a_strangers_challenges_never_lock_the_owner_out() {
    let app = spawn_app_with(&[("REISSUE_LIMIT_PER_AGENT", "2")]).await;
    let owner = PrivateKeySigner::random();
    let agent = guarded_agent(&app, &owner).await;
    for _ in 0..12 {
        app.challenge(&agent.id).await;
        let stranger = checksummed(&PrivateKeySigner::random());
        let (status, body) = owner_challenge(&app, &agent.id, "base", &stranger).await;
        assert_eq!(status, StatusCode::OK, "{body}");
    }

    // The owner still gets a challenge and a session.
    let (status, body) = app.reissue_challenge(&agent.id).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    owner_session(&app, &agent.id, &owner).await;
}

#[tokio::test]
async fn challenges_are_limited_per_client_address_across_agents() {
    let app = spawn_app_with(&[("REISSUE_LIMIT_PER_IP", "3")]).await;
    let mut agents = Vec::new();
    for _ in 0..4 {
        agents.push(app.create_default_agent().await);
    }
    for agent in &agents[..3] {
        app.challenge(&agent.id).await;
    }

    assert_rate_limited(&app, &format!("/api/agents/{}/reissue-challenge", agents[3].id), None).await;
    // Each endpoint has its own count.
    let (status, body) = owner_challenge(&app, &agents[3].id, "base", &checksummed(&PrivateKeySigner::random())).await;
    assert_eq!(status, StatusCode::OK, "{body}");
}

#[tokio::test]
async fn past_the_per_agent_limit_a_failing_proof_answers_429_and_a_valid_proof_is_accepted() {
    let app = spawn_app().await;
    let agent = app.create_default_agent().await;
    let other = app.create_default_agent().await;
    for _ in 0..10 {
        let response = app.reissue_token(&agent.id, token_proof(&forged_token())).await;
        assert_error(&response, StatusCode::UNAUTHORIZED, "invalid_proof");
    }

    let path = format!("/api/agents/{}/reissue-token", agent.id);
    assert_rate_limited(&app, &path, Some(token_proof(&forged_token()))).await;
    // Another agent's count is its own.
    let response = app.reissue_token(&other.id, token_proof(&forged_token())).await;
    assert_error(&response, StatusCode::UNAUTHORIZED, "invalid_proof");
    // The owner of the token is not locked out.
    let (status, body) = app.reissue_token(&agent.id, token_proof(&agent.token)).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    let token = body["access_token"].as_str().unwrap();
    let (status, _) = app.get_agent(&agent.id, token).await;
    assert_eq!(status, StatusCode::OK);
}

#[tokio::test]
async fn the_per_agent_limit_is_configurable() {
    let app = spawn_app_with(&[("REISSUE_LIMIT_PER_AGENT", "2")]).await;
    let agent = app.create_default_agent().await;
    for _ in 0..2 {
        let response = app.reissue_token(&agent.id, token_proof(&forged_token())).await;
        assert_error(&response, StatusCode::UNAUTHORIZED, "invalid_proof");
    }

    let path = format!("/api/agents/{}/reissue-token", agent.id);
    assert_rate_limited(&app, &path, Some(token_proof(&forged_token()))).await;
}

#[tokio::test]
async fn every_spelling_of_an_agent_id_names_the_same_agent() {
    let app = spawn_app().await;
    let agent = app.create_default_agent().await;
    for spelling in spellings(&agent.id) {
        let (status, body) = app.reissue_challenge(&spelling).await;
        assert_eq!(status, StatusCode::OK, "{spelling}: {body}");
        let message = body["message"].as_str().unwrap();
        assert!(message.contains(&format!(":{}:", agent.id)), "{spelling}: {message}");
    }
}

#[tokio::test]
async fn failed_proofs_count_per_agent_whatever_the_spelling_of_its_id() {
    let app = spawn_app().await;
    let agent = app.create_default_agent().await;
    let spelled = spellings(&agent.id);
    for attempt in 0..10 {
        let spelling = &spelled[attempt % spelled.len()];
        let response = app.reissue_token(spelling, token_proof(&forged_token())).await;
        assert_error(&response, StatusCode::UNAUTHORIZED, "invalid_proof");
    }

    for spelling in &spelled {
        let path = format!("/api/agents/{spelling}/reissue-token");
        assert_rate_limited(&app, &path, Some(token_proof(&forged_token()))).await;
    }
    let upper = agent.id.to_uppercase();
    let (status, body) = app.reissue_token(&upper, token_proof(&agent.token)).await;
    assert_eq!(
        status,
        StatusCode::OK,
        "a valid proof in any spelling is accepted: {body}"
    );
}

#[tokio::test]
async fn malformed_ids_answer_404_and_leave_no_entry_in_the_limiters() {
    let app = spawn_app().await;
    let agent = app.create_default_agent().await;
    for n in 0..300 {
        let junk = format!("{n}-{}", "x".repeat(4_000));
        for (method, path, body) in [
            (Method::GET, format!("/api/agents/{junk}/reissue-challenge"), None),
            (
                Method::POST,
                format!("/api/agents/{junk}/reissue-token"),
                Some(token_proof(&agent.token)),
            ),
            (
                Method::GET,
                format!("/api/agents/{junk}/owner-challenge?chain=base&address=0x0"),
                None,
            ),
            (
                Method::POST,
                format!("/api/agents/{junk}/owner-session"),
                Some(json!({"chain": "base", "message": "m", "signature": "0x"})),
            ),
        ] {
            let response = app.send(app.build(method, &path, None, body)).await;
            assert_error(
                &(response.status, response.body),
                StatusCode::NOT_FOUND,
                "agent_not_found",
            );
        }
    }
    assert_eq!(app.state.reissue_limits.sizes(), (0, 0), "junk ids are not keys");

    // Well-formed ids of no agent count per client and endpoint only: one key each, never one per id.
    for _ in 0..50 {
        let unknown = uuid::Uuid::new_v4();
        let response = app.reissue_token(&unknown.to_string(), token_proof(&agent.token)).await;
        assert_error(&response, StatusCode::NOT_FOUND, "agent_not_found");
        let (status, _) = app.reissue_challenge(&unknown.to_string()).await;
        assert_eq!(status, StatusCode::NOT_FOUND);
    }
    assert_eq!(app.state.reissue_limits.sizes(), (2, 0));
}

/// `GET …/reissue-challenge` from the client named in `X-Forwarded-For` (none: no header).
async fn challenge_from(app: &TestApp, id: &str, forwarded_for: Option<&str>) -> (StatusCode, serde_json::Value) {
    let mut builder = app.build(Method::GET, &format!("/api/agents/{id}/reissue-challenge"), None, None);
    if let Some(client) = forwarded_for {
        builder = builder.header("x-forwarded-for", client);
    }
    let response = app.send(builder).await;
    (response.status, response.body)
}

#[tokio::test]
async fn behind_a_trusted_proxy_each_forwarded_client_has_its_own_bucket() {
    // The test client is the proxy: it connects from 127.0.0.1.
    let app = spawn_app_with(&[
        ("REISSUE_LIMIT_PER_IP", "2"),
        ("TRUSTED_PROXIES", "127.0.0.1, 10.0.0.0/8"),
    ])
    .await;
    let agent = app.create_default_agent().await;
    for _ in 0..2 {
        let (status, body) = challenge_from(&app, &agent.id, Some("203.0.113.7")).await;
        assert_eq!(status, StatusCode::OK, "{body}");
    }
    // The stranger has used its limit ...
    let refused = challenge_from(&app, &agent.id, Some("203.0.113.7")).await;
    assert_error(&refused, StatusCode::TOO_MANY_REQUESTS, "rate_limited");
    // ... and also when it prepends addresses of its own: the right-most untrusted entry is the one counted.
    let refused = challenge_from(&app, &agent.id, Some("198.51.100.1, 203.0.113.7, 10.1.2.3")).await;
    assert_error(&refused, StatusCode::TOO_MANY_REQUESTS, "rate_limited");
    // The owner, another client behind the same proxy, is not locked out.
    let (status, body) = challenge_from(&app, &agent.id, Some("192.0.2.44")).await;
    assert_eq!(status, StatusCode::OK, "{body}");
}

#[tokio::test]
async fn from_a_peer_that_is_not_a_trusted_proxy_the_forwarded_header_is_ignored() {
    for trusted in [None, Some("10.0.0.1")] {
        let mut vars = vec![("REISSUE_LIMIT_PER_IP", "2")];
        if let Some(proxies) = trusted {
            vars.push(("TRUSTED_PROXIES", proxies));
        }
        let app = spawn_app_with(&vars).await;
        let agent = app.create_default_agent().await;
        for client in ["203.0.113.1", "203.0.113.2"] {
            let (status, body) = challenge_from(&app, &agent.id, Some(client)).await;
            assert_eq!(status, StatusCode::OK, "{body}");
        }
        // A new address in the header buys nothing: the peer's bucket is used up.
        let refused = challenge_from(&app, &agent.id, Some("203.0.113.3")).await;
        assert_error(&refused, StatusCode::TOO_MANY_REQUESTS, "rate_limited");
        let refused = challenge_from(&app, &agent.id, None).await;
        assert_error(&refused, StatusCode::TOO_MANY_REQUESTS, "rate_limited");
    }
}
