//! Native transfers through the builtin chat engine against a real node (anvil): funds move exactly, the
//! confirmation settles the spending cap to the actual cost, and every refusal leaves nothing stored or on chain.
//! The helpers these tests share with the other transfer tests are in `helpers::chain`.

use alloy::primitives::U256;
use reqwest::StatusCode;
use serde_json::json;

use crate::anvil::Anvil;
use crate::helpers::chain::{
    BASE_CHAIN_ID, CENT_ETH, ONE_ETH, assert_nothing_sent, chat, fresh_address, funded_agent, node_cost, refusal_code,
    send_via_chat, sending_agent, sent_hash, spent_on_base, transfer_app, wait_for_transactions, wallet, wei,
};

#[tokio::test]
async fn a_send_moves_real_funds_and_counts_the_actual_cost() {
    let anvil = Anvil::start(BASE_CHAIN_ID);
    let app = transfer_app(&anvil, &[]).await;
    let agent = funded_agent(&app, &anvil, Some(0.5)).await;
    let from = wallet(&agent);
    let to = fresh_address();

    let (body, call) = send_via_chat(&app, &agent, "0.01", to).await;
    let hash = sent_hash(&call);
    let result = &call["result"];
    assert_eq!(result["nonce"], 0, "{call}");
    assert_eq!(result["amount_wei"], CENT_ETH.to_string(), "{call}");
    assert!(
        ["pending", "submitted"].contains(&result["status"].as_str().unwrap_or_default()),
        "{call}"
    );
    assert!(
        body["response"]
            .as_str()
            .unwrap_or_default()
            .contains(&hash.to_string()),
        "the answer quotes the hash: {body}"
    );

    assert_eq!(
        anvil.balance(to).await,
        wei(CENT_ETH),
        "the recipient got exactly 0.01 ETH"
    );
    assert_eq!(anvil.nonce(from).await, 1);

    let txs = wait_for_transactions(&app, &agent, 1, "confirmed").await;
    let tx = &txs[0];
    assert_eq!(tx["tx_hash"], hash.to_string(), "{tx}");
    assert_eq!(tx["chain"], "base", "{tx}");
    assert_eq!(tx["value_wei"], CENT_ETH.to_string(), "{tx}");
    assert_eq!(tx["conversation_id"], body["conversation_id"], "{tx}");
    assert_eq!(
        tx["to"].as_str().unwrap_or_default().to_ascii_lowercase(),
        to.to_string().to_ascii_lowercase(),
        "{tx}"
    );
    let receipt = anvil.receipt(hash).await;
    assert_eq!(tx["block_number"], json!(receipt.block_number.unwrap()), "{tx}");

    let (cost, success) = node_cost(&anvil, hash).await;
    assert!(success);
    assert_eq!(
        spent_on_base(&app, &agent).await,
        cost,
        "spent is the value plus the fee the node charged"
    );
    assert_eq!(
        anvil.balance(from).await,
        wei(ONE_ETH) - cost,
        "the wallet paid exactly that"
    );
}

#[tokio::test]
async fn without_transact_nothing_is_sent() {
    let anvil = Anvil::start(BASE_CHAIN_ID);
    let app = transfer_app(&anvil, &[]).await;
    let agent = app
        .create_agent_ok(json!({
            "name": "reader",
            "chains": ["base"],
            "capabilities": ["read"],
            "spending_cap": 1,
        }))
        .await;
    anvil.set_balance(wallet(&agent), wei(ONE_ETH)).await;
    let to = fresh_address();

    let body = chat(&app, &agent, &format!("send 0.01 ETH to {to} on base")).await;
    let response = body["response"].as_str().unwrap_or_default();
    assert!(response.contains("transact"), "the answer names the capability: {body}");
    for call in body["chain_calls"].as_array().expect("chain_calls") {
        assert_eq!(call["error"]["code"], "capability_denied", "no call runs: {body}");
    }
    assert_nothing_sent(&anvil, &app, &agent).await;
    assert_eq!(anvil.balance(to).await, U256::ZERO);
}

#[tokio::test]
async fn a_send_over_the_cap_is_refused_until_the_cap_is_raised() {
    let anvil = Anvil::start(BASE_CHAIN_ID);
    let app = transfer_app(&anvil, &[]).await;
    // 0.01 ETH plus the fee does not fit in 0.01.
    let agent = funded_agent(&app, &anvil, Some(0.01)).await;
    let to = fresh_address();

    let (_, call) = send_via_chat(&app, &agent, "0.01", to).await;
    assert_eq!(refusal_code(&call), "spending_cap_exceeded", "{call}");
    assert_nothing_sent(&anvil, &app, &agent).await;

    let (status, detail) = app
        .put_agent(&agent.id, &agent.token, json!({"spending_cap": 0.5}))
        .await;
    assert_eq!(status, StatusCode::OK, "{detail}");
    let (_, call) = send_via_chat(&app, &agent, "0.01", to).await;
    let hash = sent_hash(&call);
    assert_eq!(call["result"]["nonce"], 0, "the refusal used no nonce: {call}");
    wait_for_transactions(&app, &agent, 1, "confirmed").await;
    assert_eq!(anvil.balance(to).await, wei(CENT_ETH));
    assert_eq!(spent_on_base(&app, &agent).await, node_cost(&anvil, hash).await.0);
}

#[tokio::test]
async fn the_default_cap_of_zero_refuses_every_send() {
    let anvil = Anvil::start(BASE_CHAIN_ID);
    let app = transfer_app(&anvil, &[]).await;
    let agent = funded_agent(&app, &anvil, None).await;
    assert_eq!(agent.body["spending_cap"], json!(0), "{}", agent.body);

    let (_, call) = send_via_chat(&app, &agent, "0.01", fresh_address()).await;
    assert_eq!(refusal_code(&call), "spending_cap_exceeded", "{call}");
    assert_nothing_sent(&anvil, &app, &agent).await;
}

#[tokio::test]
async fn an_unfunded_wallet_is_refused_with_insufficient_funds() {
    let anvil = Anvil::start(BASE_CHAIN_ID);
    let app = transfer_app(&anvil, &[]).await;
    let agent = sending_agent(&app, Some(10.0)).await;

    let (_, call) = send_via_chat(&app, &agent, "0.01", fresh_address()).await;
    assert_eq!(refusal_code(&call), "insufficient_funds", "{call}");
    assert_nothing_sent(&anvil, &app, &agent).await;

    // Funds for the value but not for the fee on top of it: still refused, still nothing stored.
    anvil.set_balance(wallet(&agent), wei(CENT_ETH)).await;
    let (_, call) = send_via_chat(&app, &agent, "0.01", fresh_address()).await;
    assert_eq!(refusal_code(&call), "insufficient_funds", "{call}");
    assert_nothing_sent(&anvil, &app, &agent).await;
}
