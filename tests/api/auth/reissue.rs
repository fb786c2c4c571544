//! Token reissue (docs/api.md §4): challenges, the two proof types, every way a proof is refused, and the rate limits.

use alloy::signers::local::PrivateKeySigner;
use reqwest::StatusCode;
use serde_json::json;

use crate::helpers::{
    CreatedAgent, TestApp, assert_error, assert_error_status, assert_no_secret_fields, checksummed, now_unix, sign,
    spawn_app, spawn_app_with, token_proof, wallet_proof,
};

/// An agent whose human owner holds `owner` on ethereum.
async fn owned_agent(app: &TestApp, owner: &PrivateKeySigner) -> CreatedAgent {
    app.create_agent_ok(json!({"name": "owned", "owner_addresses": {"ethereum": checksummed(owner)}}))
        .await
}

/// Asserts a successful reissue and returns the new token; checks the old one died and the new one works.
async fn assert_reissued(app: &TestApp, agent: &CreatedAgent, response: (StatusCode, serde_json::Value)) -> String {
    let (status, body) = response;
    assert_eq!(status, StatusCode::OK, "reissue failed: {body}");
    let token = body["access_token"].as_str().expect("access_token").to_string();
    assert!(token.starts_with("agt_") && token.len() >= 47, "{token}");
    assert_ne!(token, agent.token);
    assert_eq!(body["agent"]["id"], agent.id.as_str(), "{body}");
    assert!(body["agent"].get("access_token").is_none(), "{body}");
    assert_no_secret_fields(&body["agent"]);

    let old = app.get_agent(&agent.id, &agent.token).await;
    assert_error(&old, StatusCode::UNAUTHORIZED, "invalid_token");
    let (status, detail) = app.get_agent(&agent.id, &token).await;
    assert_eq!(status, StatusCode::OK, "the new token works: {detail}");
    token
}

#[tokio::test]
async fn a_reissue_challenge_needs_no_token_and_names_the_agent() {
    let app = spawn_app().await;
    let agent = app.create_default_agent().await;

    let (status, body) = app.reissue_challenge(&agent.id).await;

    assert_eq!(status, StatusCode::OK, "{body}");
    let message = body["message"].as_str().expect("message");
    let nonce = body["nonce"].as_str().expect("nonce");
    let parts: Vec<_> = message.split(':').collect();
    assert_eq!(parts.len(), 5, "prefix:reissue:id:nonce:unix, got {message}");
    assert_eq!(parts[..3], ["agentd", "reissue", agent.id.as_str()]);
    assert_eq!(parts[3], nonce);
    assert!(nonce.len() >= 16, "a nonce with some entropy: {nonce}");
    let expires: i64 = parts[4].parse().expect("unix seconds");
    let lifetime = expires - now_unix();
    assert!(
        (240..=330).contains(&lifetime),
        "a challenge lives 5 minutes, not {lifetime} s"
    );
    match &body["expires_at"] {
        serde_json::Value::Number(n) => assert_eq!(n.as_i64(), Some(expires)),
        serde_json::Value::String(s) => {
            let at = chrono::DateTime::parse_from_rfc3339(s).expect("expires_at is RFC 3339");
            assert_eq!(at.timestamp(), expires, "expires_at matches the message");
        }
        other => panic!("expires_at is a time: {other}"),
    }

    let again = app.challenge(&agent.id).await;
    assert_ne!(again.nonce, nonce, "every challenge has a fresh nonce");
}

#[tokio::test]
async fn the_challenge_prefix_is_configurable() {
    let app = spawn_app_with(&[("CHALLENGE_PREFIX", "acme-wallets")]).await;
    let owner = PrivateKeySigner::random();
    let agent = owned_agent(&app, &owner).await;

    let challenge = app.challenge(&agent.id).await;

    let expected = format!("acme-wallets:reissue:{}:{}:", agent.id, challenge.nonce);
    assert!(challenge.message.starts_with(&expected), "{}", challenge.message);
    let response = app
        .reissue_token(
            &agent.id,
            wallet_proof("ethereum", &challenge.message, &sign(&owner, &challenge.message)),
        )
        .await;
    assert_reissued(&app, &agent, response).await;
}

#[tokio::test]
async fn a_reissue_challenge_for_an_unknown_agent_answers_404() {
    let app = spawn_app().await;

    let response = app.reissue_challenge(&uuid::Uuid::new_v4().to_string()).await;

    assert_error(&response, StatusCode::NOT_FOUND, "agent_not_found");
    assert_error_status(&app.reissue_challenge("not-a-uuid").await, StatusCode::NOT_FOUND);
}

#[tokio::test]
async fn reissue_for_a_deleted_agent_answers_410() {
    let app = spawn_app().await;
    let agent = app.create_default_agent().await;
    app.delete_agent(&agent.id, &agent.token).await;

    assert_error(
        &app.reissue_challenge(&agent.id).await,
        StatusCode::GONE,
        "agent_inactive",
    );
    let response = app.reissue_token(&agent.id, token_proof(&agent.token)).await;
    assert_error(&response, StatusCode::GONE, "agent_inactive");
}

#[tokio::test]
async fn reissue_with_the_current_token_replaces_it_at_once() {
    let app = spawn_app().await;
    let agent = app.create_default_agent().await;

    let response = app.reissue_token(&agent.id, token_proof(&agent.token)).await;

    let new_token = assert_reissued(&app, &agent, response).await;
    // The old token is no proof any more either.
    let replay = app.reissue_token(&agent.id, token_proof(&agent.token)).await;
    assert_error(&replay, StatusCode::UNAUTHORIZED, "invalid_proof");
    // The new token can itself be rotated.
    let rotated = app.reissue_token(&agent.id, token_proof(&new_token)).await;
    assert_eq!(rotated.0, StatusCode::OK, "{}", rotated.1);
}

#[tokio::test]
async fn reissue_with_another_agents_token_is_refused() {
    let app = spawn_app().await;
    let agent = app.create_default_agent().await;
    let other = app.create_default_agent().await;

    let response = app.reissue_token(&agent.id, token_proof(&other.token)).await;

    assert_error(&response, StatusCode::UNAUTHORIZED, "invalid_proof");
    for created in [&agent, &other] {
        let (status, _) = app.get_agent(&created.id, &created.token).await;
        assert_eq!(status, StatusCode::OK, "both tokens still work");
    }
}

#[tokio::test]
async fn reissue_with_an_unknown_token_is_refused() {
    let app = spawn_app().await;
    let agent = app.create_default_agent().await;

    let forged = format!("agt_{}", "Z".repeat(43));
    let response = app.reissue_token(&agent.id, token_proof(&forged)).await;

    assert_error(&response, StatusCode::UNAUTHORIZED, "invalid_proof");
}

#[tokio::test]
async fn reissue_with_an_owner_wallet_signature_works() {
    let app = spawn_app().await;
    let owner = PrivateKeySigner::random();
    let agent = owned_agent(&app, &owner).await;
    let challenge = app.challenge(&agent.id).await;

    let signature = sign(&owner, &challenge.message);
    let response = app
        .reissue_token(&agent.id, wallet_proof("ethereum", &challenge.message, &signature))
        .await;

    assert_reissued(&app, &agent, response).await;
}

#[tokio::test]
async fn reissue_with_an_owner_set_by_an_update_works() {
    let app = spawn_app().await;
    let owner = PrivateKeySigner::random();
    let agent = app.create_default_agent().await;
    let (status, body) = app
        .put_agent(
            &agent.id,
            &agent.token,
            json!({"owner_addresses": {"ethereum": checksummed(&owner)}}),
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    let challenge = app.challenge(&agent.id).await;

    let signature = sign(&owner, &challenge.message);
    let response = app
        .reissue_token(&agent.id, wallet_proof("ethereum", &challenge.message, &signature))
        .await;

    assert_reissued(&app, &agent, response).await;
}

#[tokio::test]
async fn reissue_with_a_signature_of_the_agents_exported_key_works() {
    let app = spawn_app().await;
    let agent = app.create_default_agent().await;
    let (signer, _) = app.exported_signer(&agent, "base").await;
    let challenge = app.challenge(&agent.id).await;

    let signature = sign(&signer, &challenge.message);
    let response = app
        .reissue_token(&agent.id, wallet_proof("base", &challenge.message, &signature))
        .await;

    assert_reissued(&app, &agent, response).await;
}

#[tokio::test]
async fn reissue_with_a_used_challenge_is_refused() {
    let app = spawn_app().await;
    let owner = PrivateKeySigner::random();
    let agent = owned_agent(&app, &owner).await;
    let challenge = app.challenge(&agent.id).await;
    let proof = wallet_proof("ethereum", &challenge.message, &sign(&owner, &challenge.message));
    let first = app.reissue_token(&agent.id, proof.clone()).await;
    let token = assert_reissued(&app, &agent, first).await;

    let second = app.reissue_token(&agent.id, proof).await;

    assert_error(&second, StatusCode::UNAUTHORIZED, "invalid_proof");
    let (status, _) = app.get_agent(&agent.id, &token).await;
    assert_eq!(status, StatusCode::OK, "the token of the first reissue still works");
}

#[tokio::test]
async fn a_strangers_signature_is_refused_and_does_not_use_up_the_challenge() {
    let app = spawn_app().await;
    let owner = PrivateKeySigner::random();
    let stranger = PrivateKeySigner::random();
    let agent = owned_agent(&app, &owner).await;
    let challenge = app.challenge(&agent.id).await;

    let refused = app
        .reissue_token(
            &agent.id,
            wallet_proof("ethereum", &challenge.message, &sign(&stranger, &challenge.message)),
        )
        .await;

    assert_error(&refused, StatusCode::UNAUTHORIZED, "invalid_proof");
    let (status, _) = app.get_agent(&agent.id, &agent.token).await;
    assert_eq!(status, StatusCode::OK, "a failed proof leaves the token alone");
    let accepted = app
        .reissue_token(
            &agent.id,
            wallet_proof("ethereum", &challenge.message, &sign(&owner, &challenge.message)),
        )
        .await;
    assert_reissued(&app, &agent, accepted).await;
}

#[tokio::test]
async fn an_owner_address_counts_only_on_its_own_chain() {
    let app = spawn_app().await;
    let owner = PrivateKeySigner::random();
    let agent = owned_agent(&app, &owner).await;
    let challenge = app.challenge(&agent.id).await;

    let response = app
        .reissue_token(
            &agent.id,
            wallet_proof("base", &challenge.message, &sign(&owner, &challenge.message)),
        )
        .await;

    assert_error(&response, StatusCode::UNAUTHORIZED, "invalid_proof");
}

#[tokio::test]
async fn a_challenge_of_another_agent_is_refused() {
    let app = spawn_app().await;
    let owner = PrivateKeySigner::random();
    // One human owns both agents, so only the challenge's agent makes the difference.
    let agent = owned_agent(&app, &owner).await;
    let other = owned_agent(&app, &owner).await;
    let foreign = app.challenge(&other.id).await;

    let response = app
        .reissue_token(
            &agent.id,
            wallet_proof("ethereum", &foreign.message, &sign(&owner, &foreign.message)),
        )
        .await;

    assert_error(&response, StatusCode::UNAUTHORIZED, "invalid_proof");
    let (status, _) = app.get_agent(&agent.id, &agent.token).await;
    assert_eq!(status, StatusCode::OK);
    let own = app
        .reissue_token(
            &other.id,
            wallet_proof("ethereum", &foreign.message, &sign(&owner, &foreign.message)),
        )
        .await;
    assert_reissued(&app, &other, own).await;
}

#[tokio::test]
async fn an_altered_challenge_is_refused() {
    let app = spawn_app().await;
    let owner = PrivateKeySigner::random();
    let agent = owned_agent(&app, &owner).await;
    let challenge = app.challenge(&agent.id).await;
    let prefix = format!("agentd:reissue:{}:", agent.id);

    let mut nonce: Vec<char> = challenge.nonce.chars().collect();
    let last = nonce.len() - 1;
    nonce[last] = if nonce[last] == 'a' { 'b' } else { 'a' };
    let nonce: String = nonce.into_iter().collect();
    let altered_nonce = format!("{prefix}{nonce}:{}", challenge.expires_unix);
    let altered_expiry = format!("{prefix}{}:{}", challenge.nonce, challenge.expires_unix + 60);

    for altered in [altered_nonce, altered_expiry] {
        let response = app
            .reissue_token(&agent.id, wallet_proof("ethereum", &altered, &sign(&owner, &altered)))
            .await;
        assert_error(&response, StatusCode::UNAUTHORIZED, "invalid_proof");
    }
    let genuine = app
        .reissue_token(
            &agent.id,
            wallet_proof("ethereum", &challenge.message, &sign(&owner, &challenge.message)),
        )
        .await;
    assert_reissued(&app, &agent, genuine).await;
}

#[tokio::test]
async fn a_signature_over_a_different_message_is_refused() {
    let app = spawn_app().await;
    let owner = PrivateKeySigner::random();
    let agent = owned_agent(&app, &owner).await;
    let first = app.challenge(&agent.id).await;
    let second = app.challenge(&agent.id).await;

    let response = app
        .reissue_token(
            &agent.id,
            wallet_proof("ethereum", &first.message, &sign(&owner, &second.message)),
        )
        .await;

    assert_error(&response, StatusCode::UNAUTHORIZED, "invalid_proof");
}

#[tokio::test]
async fn a_message_that_is_not_a_challenge_is_refused_with_400() {
    let app = spawn_app().await;
    let owner = PrivateKeySigner::random();
    let agent = owned_agent(&app, &owner).await;
    let challenge = app.challenge(&agent.id).await;

    for message in [
        "hello world".to_string(),
        format!("agentd:reissue:{}", agent.id),
        format!(
            "other:reissue:{}:{}:{}",
            agent.id, challenge.nonce, challenge.expires_unix
        ),
        format!(
            "agentd:login:{}:{}:{}",
            agent.id, challenge.nonce, challenge.expires_unix
        ),
        format!("agentd:reissue:{}:{}:soon", agent.id, challenge.nonce),
    ] {
        let response = app
            .reissue_token(&agent.id, wallet_proof("ethereum", &message, &sign(&owner, &message)))
            .await;
        assert_eq!(response.0, StatusCode::BAD_REQUEST, "{message} gave {}", response.1);
        assert_error(&response, StatusCode::BAD_REQUEST, "malformed_challenge");
    }
}

#[tokio::test]
async fn an_expired_challenge_is_refused_with_422() {
    let app = spawn_app().await;
    let owner = PrivateKeySigner::random();
    let agent = owned_agent(&app, &owner).await;
    let challenge = app.challenge(&agent.id).await;

    let expired = format!("agentd:reissue:{}:{}:{}", agent.id, challenge.nonce, now_unix() - 60);
    let response = app
        .reissue_token(&agent.id, wallet_proof("ethereum", &expired, &sign(&owner, &expired)))
        .await;

    assert_error(&response, StatusCode::UNPROCESSABLE_ENTITY, "challenge_expired");
    let (status, _) = app.get_agent(&agent.id, &agent.token).await;
    assert_eq!(status, StatusCode::OK);
}

#[tokio::test]
async fn a_proof_of_an_unknown_type_is_refused_with_422() {
    let app = spawn_app().await;
    let agent = app.create_default_agent().await;

    let response = app
        .reissue_token(&agent.id, json!({"proof": {"type": "magic", "token": agent.token}}))
        .await;

    assert_error_status(&response, StatusCode::UNPROCESSABLE_ENTITY);
}

#[tokio::test]
async fn a_missing_proof_is_refused_with_422() {
    let app = spawn_app().await;
    let agent = app.create_default_agent().await;

    assert_error_status(
        &app.reissue_token(&agent.id, json!({})).await,
        StatusCode::UNPROCESSABLE_ENTITY,
    );
    let incomplete = app
        .reissue_token(
            &agent.id,
            json!({"proof": {"type": "wallet_signature", "chain": "ethereum"}}),
        )
        .await;
    assert_error_status(&incomplete, StatusCode::UNPROCESSABLE_ENTITY);
    let (status, _) = app.get_agent(&agent.id, &agent.token).await;
    assert_eq!(status, StatusCode::OK);
}

#[tokio::test]
async fn reissue_for_an_unknown_agent_answers_404() {
    let app = spawn_app().await;
    let agent = app.create_default_agent().await;

    let response = app
        .reissue_token(&uuid::Uuid::new_v4().to_string(), token_proof(&agent.token))
        .await;

    assert_error(&response, StatusCode::NOT_FOUND, "agent_not_found");
}
