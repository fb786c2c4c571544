//! Key export (docs/api.md §4): the key derives the wallet address, needs confirmation and the token, and can be
//! switched off with `ALLOW_KEY_EXPORT=false`.

use reqwest::{Method, StatusCode};
use serde_json::json;

use crate::helpers::{
    assert_checksummed, assert_error, assert_error_status, parse_private_key, spawn_app, spawn_app_with,
};

#[tokio::test]
async fn an_exported_key_derives_the_agents_wallet_address() {
    let app = spawn_app().await;
    let agent = app.create_default_agent().await;

    let (status, body) = app
        .export_key(&agent.id, &agent.token, json!({"chain": "ethereum", "confirm": true}))
        .await;

    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(body["chain"], "ethereum");
    assert_eq!(body["address"], agent.address("ethereum").as_str());
    assert_checksummed(body["address"].as_str().unwrap());
    let key = body["private_key"].as_str().expect("private_key");
    let hex = key.trim_start_matches("0x");
    assert_eq!(hex.len(), 64, "32 bytes of hex: {key}");
    let signer = parse_private_key(key);
    assert_eq!(signer.address().to_checksum(None), agent.address("ethereum"));
}

#[tokio::test]
async fn every_evm_chain_of_an_agent_exports_the_same_key() {
    let app = spawn_app().await;
    let agent = app.create_default_agent().await;
    let (_, on_ethereum) = app.exported_signer(&agent, "ethereum").await;
    let (_, on_base) = app.exported_signer(&agent, "base").await;
    assert_eq!(on_ethereum, on_base);

    let (status, body) = app
        .put_agent(
            &agent.id,
            &agent.token,
            json!({"chains": ["ethereum", "base", "arbitrum"]}),
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    let (signer, on_arbitrum) = app.exported_signer(&agent, "arbitrum").await;

    assert_eq!(on_arbitrum, on_ethereum, "a chain added later uses the agent's EVM key");
    assert_eq!(signer.address().to_checksum(None), agent.address("ethereum"));
}

#[tokio::test]
async fn export_without_confirmation_is_refused() {
    let app = spawn_app().await;
    let agent = app.create_default_agent().await;

    for body in [
        json!({"chain": "ethereum"}),
        json!({"chain": "ethereum", "confirm": false}),
    ] {
        let response = app.export_key(&agent.id, &agent.token, body.clone()).await;
        assert_error_status(&response, StatusCode::UNPROCESSABLE_ENTITY);
        assert!(response.1["error"]["message"].as_str().is_some());
    }
}

#[tokio::test]
async fn export_for_a_chain_the_agent_does_not_use_is_refused() {
    let app = spawn_app().await;
    let agent = app.create_default_agent().await;

    for chain in ["optimism", "dogecoin"] {
        let response = app
            .export_key(&agent.id, &agent.token, json!({"chain": chain, "confirm": true}))
            .await;
        assert_error_status(&response, StatusCode::UNPROCESSABLE_ENTITY);
    }
}

#[tokio::test]
async fn export_is_refused_with_403_when_disabled() {
    let app = spawn_app_with(&[("ALLOW_KEY_EXPORT", "false")]).await;
    let agent = app.create_default_agent().await;

    let response = app
        .export_key(&agent.id, &agent.token, json!({"chain": "ethereum", "confirm": true}))
        .await;

    assert_error(&response, StatusCode::FORBIDDEN, "export_disabled");
    assert!(!response.1.to_string().contains("private_key\":\"0x"));
}

#[tokio::test]
async fn export_needs_the_agents_token() {
    let app = spawn_app().await;
    let agent = app.create_default_agent().await;
    let other = app.create_default_agent().await;
    let path = format!("/api/agents/{}/export-key", agent.id);
    let body = json!({"chain": "ethereum", "confirm": true});

    let missing = app.request(Method::POST, &path, None, Some(body.clone())).await;
    assert_error(&missing, StatusCode::UNAUTHORIZED, "missing_token");
    let foreign = app.request(Method::POST, &path, Some(&other.token), Some(body)).await;
    assert_error(&foreign, StatusCode::FORBIDDEN, "forbidden");
}
