//! Native transfers through the builtin chat engine against a real node (anvil): funds move exactly, the
//! confirmation settles the spending cap to the actual cost, and every refusal leaves nothing stored or on chain.
//! The helpers these tests share with the other transfer tests are in `helpers::chain`.

use alloy::primitives::U256;
use alloy::providers::Provider;
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

#[tokio::test]
async fn a_pending_transfer_holds_its_value_and_twice_its_maximum_fee_then_its_actual_cost() {
    let anvil = Anvil::start(BASE_CHAIN_ID);
    let app = transfer_app(&anvil, &[]).await;
    let agent = funded_agent(&app, &anvil, Some(0.5)).await;
    anvil.set_automine(false).await;

    let (_, call) = send_via_chat(&app, &agent, "0.01", fresh_address()).await;
    let hash = sent_hash(&call);
    // What the node holds: the signed gas limit and maximum fee per gas of the pending transaction.
    let tx = anvil
        .provider()
        .get_transaction_by_hash(hash)
        .await
        .expect("eth_getTransactionByHash")
        .expect("the node has the pending transaction");
    let gas = U256::from(alloy::consensus::Transaction::gas_limit(&tx));
    let max_fee = U256::from(alloy::consensus::Transaction::max_fee_per_gas(&tx));
    assert_eq!(
        spent_on_base(&app, &agent).await,
        wei(CENT_ETH) + U256::from(2) * gas * max_fee,
        "the reservation leaves room for a fee bump (§8)"
    );

    anvil.set_automine(true).await;
    anvil.mine(1).await;
    wait_for_transactions(&app, &agent, 1, "confirmed").await;
    assert_eq!(spent_on_base(&app, &agent).await, node_cost(&anvil, hash).await.0);
}

#[tokio::test]
async fn transfers_are_audited_with_their_actor_accepted_and_refused_with_the_code() {
    let anvil = Anvil::start(BASE_CHAIN_ID);
    let app = transfer_app(&anvil, &[]).await;
    let agent = funded_agent(&app, &anvil, Some(0.02)).await;
    let to = fresh_address();

    let (_, call) = send_via_chat(&app, &agent, "0.01", to).await;
    let hash = sent_hash(&call);
    let (_, call) = send_via_chat(&app, &agent, "0.015", to).await;
    assert_eq!(refusal_code(&call), "spending_cap_exceeded", "{call}");

    let path = format!("/api/agents/{}/audit", agent.id);
    let (status, entries) = app.request(reqwest::Method::GET, &path, Some(&agent.token), None).await;
    assert_eq!(status, StatusCode::OK, "{entries}");
    let transfers: Vec<&serde_json::Value> = entries
        .as_array()
        .expect("a list")
        .iter()
        .filter(|e| e["action"].as_str().is_some_and(|a| a.starts_with("transfer_")))
        .collect();
    assert_eq!(transfers.len(), 2, "{entries:#}");
    let (refused, accepted) = (transfers[0], transfers[1]);
    assert_eq!(refused["action"], "transfer_refused");
    assert_eq!(refused["actor"], "agent");
    assert_eq!(refused["detail"]["code"], "spending_cap_exceeded");
    assert_eq!(refused["detail"]["amount"], "0.015");
    assert_eq!(accepted["action"], "transfer_accepted");
    assert_eq!(accepted["actor"], "agent");
    assert_eq!(accepted["detail"]["tx_hash"], hash.to_string());
    assert_eq!(accepted["detail"]["to"], to.to_checksum(None));
}
