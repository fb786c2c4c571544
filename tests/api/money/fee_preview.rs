//! `POST /api/agents/{id}/transfers/preview` (§12, an addition): the network fee a send would pay at most is the gas
//! limit × `maxFeePerGas` of the transaction the service then signs for the same send, read back from the node;
//! its verdict is the send's (a policy refusal, a hold); nothing is signed or reserved by a preview.

use alloy::primitives::{TxHash, U256};
use reqwest::{Method, StatusCode};
use serde_json::{Value, json};

use crate::anvil::Anvil;
use crate::helpers::chain::{BASE_CHAIN_ID, fresh_address, funded_agent, spent_on_base, transfer_app, wallet};
use crate::helpers::solidity::{mint, usdc_on_base};
use crate::helpers::{CreatedAgent, TestApp};
use crate::money::transfers_api::post_transfer;

/// `POST …/transfers/preview` as the agent.
pub async fn preview(app: &TestApp, agent: &CreatedAgent, body: Value) -> (StatusCode, Value) {
    let path = format!("/api/agents/{}/transfers/preview", agent.id);
    app.request(Method::POST, &path, Some(&agent.token), Some(body)).await
}

/// The gas limit and `maxFeePerGas` of a transaction as the node holds it.
pub async fn signed_gas(anvil: &Anvil, hash: &Value) -> (u64, u128) {
    use alloy::consensus::Transaction;
    use alloy::providers::Provider;
    let hash: TxHash = hash.as_str().expect("a tx_hash").parse().expect("a hash");
    let tx = anvil
        .provider()
        .get_transaction_by_hash(hash)
        .await
        .expect("eth_getTransactionByHash")
        .expect("the node knows the transaction");
    (tx.gas_limit(), tx.max_fee_per_gas())
}

/// A preview's fee figures agree with each other and with the transaction `sent` names, as the node holds it.
pub async fn assert_fee_signed(anvil: &Anvil, previewed: &Value, sent: &Value) {
    assert_eq!(previewed["gas"], "wallet", "{previewed}");
    let (gas_limit, max_fee_per_gas) = signed_gas(anvil, &sent["tx_hash"]).await;
    assert_eq!(previewed["gas_limit"], json!(gas_limit), "{previewed}");
    assert_eq!(
        previewed["max_fee_per_gas_wei"],
        json!(max_fee_per_gas.to_string()),
        "{previewed}"
    );
    let max_fee = U256::from(gas_limit) * U256::from(max_fee_per_gas);
    assert_eq!(
        previewed["max_fee"],
        json!(agentd::domain::amount::format_units(max_fee, 18)),
        "{previewed}"
    );
}

#[tokio::test]
async fn the_previewed_fee_is_the_gas_limit_times_the_max_fee_of_the_transaction_then_signed() {
    let anvil = Anvil::start(BASE_CHAIN_ID);
    let app = transfer_app(&anvil, &[]).await;
    let agent = funded_agent(&app, &anvil, Some(0.5)).await;
    let to = fresh_address();

    // The native coin.
    let order = json!({"chain": "base", "to": to.to_checksum(None), "amount": "0.01"});
    let (status, previewed) = preview(&app, &agent, order.clone()).await;
    assert_eq!(status, StatusCode::OK, "{previewed}");
    assert_eq!(previewed["decision"], json!({"result": "allow"}), "{previewed}");
    // Nothing signed, nothing reserved.
    assert_eq!(anvil.nonce(wallet(&agent)).await, 0);
    assert_eq!(spent_on_base(&app, &agent).await, U256::ZERO);
    let (status, sent) = post_transfer(&app, &agent, order).await;
    assert_eq!(status, StatusCode::CREATED, "{sent}");
    assert_fee_signed(&anvil, &previewed, &sent).await;
    assert_eq!(previewed["gas_limit"], 21_000, "{previewed}");

    // A registry token: its transfer call's gas.
    let usdc = usdc_on_base(&anvil).await;
    mint(&anvil, usdc, wallet(&agent), U256::from(5_000_000u64)).await;
    let order = json!({"chain": "base", "to": to.to_checksum(None), "amount": "2", "asset": "USDC"});
    let (status, previewed) = preview(&app, &agent, order.clone()).await;
    assert_eq!(status, StatusCode::OK, "{previewed}");
    assert_eq!(previewed["decision"]["result"], "allow", "{previewed}");
    assert!(previewed["gas_limit"].as_u64().unwrap() > 21_000, "{previewed}");
    let (status, sent) = post_transfer(&app, &agent, order).await;
    assert_eq!(status, StatusCode::CREATED, "{sent}");
    assert_fee_signed(&anvil, &previewed, &sent).await;
}

#[tokio::test]
async fn a_preview_gives_the_sends_verdict_and_refuses_what_the_send_refuses_first() {
    let anvil = Anvil::start(BASE_CHAIN_ID);
    let app = crate::money::policy::admin_app(&anvil).await;
    let agent = funded_agent(&app, &anvil, Some(0.5)).await;
    let policy = json!({"limits": {"base:ETH": {"per_transfer": "0.2", "approval_above": "0.05"}}});
    crate::money::policy::set_policy(&app, &agent, policy).await;
    let to = fresh_address().to_checksum(None);
    let (status, over) = preview(&app, &agent, json!({"chain": "base", "to": to, "amount": "0.3"})).await;
    assert_eq!(status, StatusCode::OK, "{over}");
    assert_eq!(
        over["decision"],
        json!({"result": "deny", "code": "policy_denied", "rule": "per_transfer"})
    );
    assert!(
        over["message"].as_str().unwrap().contains("per-transfer limit"),
        "{over}"
    );
    assert!(over["max_fee"].is_string(), "the fee is quoted all the same: {over}");
    let (status, held) = preview(&app, &agent, json!({"chain": "base", "to": to, "amount": "0.1"})).await;
    assert_eq!(status, StatusCode::OK, "{held}");
    assert_eq!(held["decision"], json!({"result": "approve"}), "{held}");
    // A recipient the send refuses before its quote: the same refusal.
    let own = json!({"chain": "base", "to": wallet(&agent).to_checksum(None), "amount": "0.1"});
    let (status, refused) = preview(&app, &agent, own).await;
    assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY, "{refused}");
    assert_eq!(refused["error"]["code"], "invalid_recipient", "{refused}");
    // A wallet that cannot pay: the verdict says so and no fee is given.
    let empty = crate::helpers::chain::sending_agent(&app, Some(0.5)).await;
    let (status, poor) = preview(&app, &empty, json!({"chain": "base", "to": to, "amount": "0.1"})).await;
    assert_eq!(status, StatusCode::OK, "{poor}");
    assert_eq!(poor["decision"]["code"], "insufficient_funds", "{poor}");
    assert_eq!(poor["max_fee"], Value::Null, "{poor}");
    assert_eq!(anvil.nonce(wallet(&agent)).await, 0, "nothing was signed");
    let (status, approvals) = app
        .request(
            Method::GET,
            &format!("/api/agents/{}/approvals", agent.id),
            Some(&agent.token),
            None,
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{approvals}");
    assert_eq!(
        approvals.as_array().map(Vec::len),
        Some(0),
        "nothing was held: {approvals}"
    );
}
