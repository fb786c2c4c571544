//! What an L2 really costs (§14, issue 11 item 5): on an OP-stack chain the receipt's `l1Fee` is part of a transfer's
//! cost and the reservation includes the GasPriceOracle's estimate of it. The node is anvil behind `L1Proxy`, which
//! adds `l1Fee` to receipts, takes it from the sender's balance, and answers `getL1Fee(bytes)`.

use alloy::primitives::{TxHash, U256};
use reqwest::{Method, StatusCode};
use serde_json::{Value, json};

use crate::anvil::Anvil;
use crate::helpers::chain::{
    BASE_CHAIN_ID, CENT_ETH, ONE_ETH, chat, fresh_address, node_cost, spent_on_base, transfer_app,
    wait_for_transactions, wallet, wei,
};
use crate::helpers::l1_proxy::L1Proxy;
use crate::helpers::{CreatedAgent, TestApp, assert_error};
use crate::money::transfers_api::post_transfer;

async fn agent_with_cap(app: &TestApp, anvil: &Anvil, cap: f64) -> CreatedAgent {
    let agent = app
        .create_agent_ok(
            json!({"name": "l2 payer", "chains": ["base"], "capabilities": ["read", "transact"],
            "spending_cap": cap}),
        )
        .await;
    anvil.set_balance(wallet(&agent), wei(ONE_ETH)).await;
    agent
}

async fn send_cent(app: &TestApp, agent: &CreatedAgent) -> (StatusCode, Value) {
    let body = json!({"chain": "base", "to": fresh_address().to_string(), "amount": "0.01"});
    post_transfer(app, agent, body).await
}

#[tokio::test]
async fn spent_on_an_op_stack_chain_includes_the_l1_fee_the_wallet_paid() {
    let anvil = Anvil::start(BASE_CHAIN_ID);
    let proxy = L1Proxy::start(anvil.url()).await;
    let app = transfer_app(&anvil, &[("RPC_URL_BASE", proxy.url())]).await;
    let agent = agent_with_cap(&app, &anvil, 0.5).await;

    let (status, sent) = send_cent(&app, &agent).await;
    assert_eq!(status, StatusCode::CREATED, "{sent}");
    let txs = wait_for_transactions(&app, &agent, 1, "confirmed").await;
    let hash = txs[0]["tx_hash"].as_str().expect("tx_hash").to_string();

    let l1_fee = proxy.l1_fee(&hash);
    assert!(!l1_fee.is_zero());
    let (l2_cost, success) = node_cost(&anvil, hash.parse::<TxHash>().expect("a hash")).await;
    assert!(success);
    let paid = wei(ONE_ETH) - anvil.balance(wallet(&agent)).await;
    assert_eq!(
        paid,
        l2_cost + l1_fee,
        "the wallet paid the value, the L2 gas and the L1 fee"
    );
    assert_eq!(
        spent_on_base(&app, &agent).await,
        paid,
        "spent is the balance change on the node, L1 fee included"
    );
    assert!(
        l1_fee > l2_cost - wei(CENT_ETH),
        "the L1 fee is not a rounding error here"
    );
}

#[tokio::test]
async fn the_reservation_holds_the_l1_fee_estimate() {
    let anvil = Anvil::start(BASE_CHAIN_ID);
    let proxy = L1Proxy::start(anvil.url()).await;
    let app = transfer_app(&anvil, &[("RPC_URL_BASE", proxy.url())]).await;
    // 0.01 ETH plus twice the L2 maximum fee fit in 0.01015 ETH (21000 gas at a few gwei); twice the L1 estimate
    // (about 180 bytes at 0.000001 ETH each) does not.
    let agent = agent_with_cap(&app, &anvil, 0.01015).await;

    let refused = send_cent(&app, &agent).await;
    assert_error(&refused, StatusCode::FORBIDDEN, "spending_cap_exceeded");
    assert_eq!(anvil.nonce(wallet(&agent)).await, 0, "nothing was sent");
    assert_eq!(spent_on_base(&app, &agent).await, U256::ZERO);

    // With room for the estimate it goes, and the reservation it held becomes the actual cost.
    let path = format!("/api/agents/{}", agent.id);
    let (status, body) = app
        .request(
            Method::PUT,
            &path,
            Some(&agent.token),
            Some(json!({"spending_cap": 0.02})),
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    let (status, sent) = send_cent(&app, &agent).await;
    assert_eq!(status, StatusCode::CREATED, "{sent}");
    wait_for_transactions(&app, &agent, 1, "confirmed").await;
    let paid = wei(ONE_ETH) - anvil.balance(wallet(&agent)).await;
    assert_eq!(spent_on_base(&app, &agent).await, paid);
}

#[tokio::test]
async fn the_estimated_cost_of_a_transfer_includes_the_l1_fee_it_will_pay() {
    let anvil = Anvil::start(BASE_CHAIN_ID);
    let proxy = L1Proxy::start(anvil.url()).await;
    let app = transfer_app(&anvil, &[("RPC_URL_BASE", proxy.url())]).await;
    let agent = app
        .create_agent_ok(json!({"name": "l2 quoter", "chains": ["base"],
            "capabilities": ["read", "compare", "transact"], "spending_cap": 0.5}))
        .await;
    anvil.set_balance(wallet(&agent), wei(ONE_ETH)).await;
    let call = json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call",
        "params": {"name": "estimate_transfer_cost", "arguments": {"chain": "base", "amount": "0.01"}}});
    let (status, body) = app.request(Method::POST, "/mcp", Some(&agent.token), Some(call)).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(body["result"]["isError"], false, "{body}");
    let text = body["result"]["content"][0]["text"].as_str().expect("a text result");
    let estimate: Value = serde_json::from_str(text).expect("the result is JSON");
    let number = |field: &str| -> U256 {
        estimate[field]
            .as_str()
            .and_then(|n| n.parse().ok())
            .unwrap_or_else(|| panic!("{field} in {estimate}"))
    };
    let l1_estimate = number("l1_fee_wei");
    assert!(!l1_estimate.is_zero(), "{estimate}");
    assert_eq!(number("total_wei"), wei(CENT_ETH) + number("fee_wei"), "{estimate}");
    assert!(
        number("fee_wei") > l1_estimate,
        "the fee is the L2 gas plus the L1 fee: {estimate}"
    );
    // The builtin engine's answer says so.
    let turn = chat(&app, &agent, "how much would it cost to send 0.01 ETH on base").await;
    let answer = turn["response"].as_str().unwrap_or_default();
    assert!(answer.contains("wei is the L1 data fee"), "{turn}");

    // The same transfer, made: the L1 fee the wallet paid is the estimate's, or a few bytes' worth less (the
    // estimate assumes the longest nonce and fee fields).
    let (status, sent) = send_cent(&app, &agent).await;
    assert_eq!(status, StatusCode::CREATED, "{sent}");
    let txs = wait_for_transactions(&app, &agent, 1, "confirmed").await;
    let paid = proxy.l1_fee(txs[0]["tx_hash"].as_str().expect("tx_hash"));
    let byte = U256::from(crate::helpers::l1_proxy::WEI_PER_BYTE);
    assert!(
        paid <= l1_estimate && l1_estimate - paid <= byte * U256::from(16),
        "estimated {l1_estimate}, paid {paid}"
    );
}
