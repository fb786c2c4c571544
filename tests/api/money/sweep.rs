//! The owner's sweep (docs/api.md §20) against a real node (anvil): `POST /api/agents/{id}/sweep` moves the whole
//! balance of an asset to an owner address — the native coin less the fee, a token whole — past a cap and a policy
//! that would refuse the agent, also from an inactive agent; the agent token alone, an address that is not an
//! owner's and an empty wallet are refused and send nothing; the admin token sweeps to any address; the sweep is
//! audited. What is asserted is what the chain shows.

use alloy::primitives::{Address, U256, address};
use alloy::signers::local::PrivateKeySigner;
use reqwest::{Method, StatusCode};
use serde_json::{Value, json};

use crate::anvil::Anvil;
use crate::auth::owners::{As, call, owner_session};
use crate::helpers::chain::{
    BASE_CHAIN_ID, ONE_ETH, assert_nothing_sent, fresh_address, node_cost, wait_for_transactions, wallet, wei,
};
use crate::helpers::solidity::{copy_code, deploy_test_token, mint, set_code, token_balance};
use crate::helpers::{CreatedAgent, TestApp, assert_error, checksummed};
use crate::money::policy::{ADMIN, admin_app, set_policy};
use crate::money::transfers_api::post_transfer;

/// USDC on base, as the registry holds it.
const BASE_USDC: Address = address!("833589fCD6eDb6E08f4c7C32D4f71b54bdA02913");

/// A guarded sending agent on base with `owner` as its owner, a cap far below its 1 ETH and a policy that refuses
/// every recipient but one stranger.
async fn capped_agent(app: &TestApp, anvil: &Anvil, owner: &PrivateKeySigner) -> CreatedAgent {
    let agent = app
        .create_agent_ok(
            json!({"name": "hsm-like", "chains": ["base"], "capabilities": ["read", "transact"],
            "spending_cap": 0.001, "owner_addresses": {"base": checksummed(owner)}}),
        )
        .await;
    anvil.set_balance(wallet(&agent), wei(ONE_ETH)).await;
    let policy = json!({"limits": {"base:ETH": {"per_transfer": "0.0001"}},
        "allowed_recipients": [fresh_address().to_string().to_lowercase()]});
    set_policy(app, &agent, policy).await;
    agent
}

fn sweep_path(agent: &CreatedAgent) -> String {
    format!("/api/agents/{}/sweep", agent.id)
}

async fn sweep_as_owner(app: &TestApp, agent: &CreatedAgent, session: &str, body: Value) -> (StatusCode, Value) {
    let who = As {
        owner: Some(session),
        ..As::default()
    };
    call(app, Method::POST, &sweep_path(agent), who, Some(body)).await
}

async fn audit(app: &TestApp, agent: &CreatedAgent) -> Vec<Value> {
    let path = format!("/api/agents/{}/audit", agent.id);
    let who = As {
        admin: Some(ADMIN),
        ..As::default()
    };
    let (status, body) = call(app, Method::GET, &path, who, None).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    body.as_array().cloned().unwrap_or_default()
}

/// What one sweep's transaction could cost at most in fees: its gas limit × its `maxFeePerGas`, as the node shows.
async fn max_fee(anvil: &Anvil, hash: alloy::primitives::TxHash) -> U256 {
    use alloy::consensus::Transaction;
    use alloy::providers::Provider;
    let tx = anvil
        .provider()
        .get_transaction_by_hash(hash)
        .await
        .expect("eth_getTransactionByHash")
        .expect("the node knows the sweep");
    U256::from(tx.gas_limit()) * U256::from(tx.max_fee_per_gas())
}

#[tokio::test]
async fn an_owner_sweeps_the_whole_native_balance_past_the_cap_and_the_policy() {
    let anvil = Anvil::start(BASE_CHAIN_ID);
    let app = admin_app(&anvil).await;
    let owner = PrivateKeySigner::random();
    let agent = capped_agent(&app, &anvil, &owner).await;

    // The agent itself may not move this much, nor to its owner.
    let order = json!({"chain": "base", "to": owner.address().to_string(), "amount": "0.5"});
    let (status, refused) = post_transfer(&app, &agent, order).await;
    assert_eq!(status, StatusCode::FORBIDDEN, "{refused}");
    assert_nothing_sent(&anvil, &app, &agent).await;

    let session = owner_session(&app, &agent.id, &owner).await;
    let (status, swept) = sweep_as_owner(
        &app,
        &agent,
        &session,
        json!({"chain": "base", "to": checksummed(&owner)}),
    )
    .await;
    assert_eq!(status, StatusCode::CREATED, "{swept}");
    assert_eq!(swept["kind"], "transfer", "{swept}");
    assert_eq!(swept["asset"], "ETH", "{swept}");
    assert_eq!(swept["status"], "pending", "{swept}");
    assert_eq!(swept["to"], checksummed(&owner), "{swept}");
    let amount: U256 = swept["amount_wei"].as_str().unwrap().parse().unwrap();
    let hash = swept["tx_hash"].as_str().unwrap().parse().unwrap();
    wait_for_transactions(&app, &agent, 1, "confirmed").await;

    let (cost, success) = node_cost(&anvil, hash).await;
    assert!(success);
    let left = anvil.balance(wallet(&agent)).await;
    assert_eq!(anvil.balance(owner.address()).await, amount, "the owner got the amount");
    assert_eq!(left + cost, wei(ONE_ETH), "the sweep is all that left the wallet");
    assert!(
        left < max_fee(&anvil, hash).await,
        "less than one fee stays behind: {left}"
    );
    assert!(amount > wei(ONE_ETH / 2), "far above the cap of 0.001 ETH: {amount}");

    let entries = audit(&app, &agent).await;
    let entry = entries
        .iter()
        .find(|e| e["action"] == "funds_swept")
        .unwrap_or_else(|| panic!("a funds_swept entry: {entries:?}"));
    assert_eq!(entry["actor"], "owner", "{entry}");
    assert_eq!(entry["detail"]["chain"], "base", "{entry}");
    assert_eq!(entry["detail"]["asset"], "ETH", "{entry}");
    assert_eq!(entry["detail"]["amount"], swept["amount"], "{entry}");
    assert_eq!(entry["detail"]["to"], checksummed(&owner), "{entry}");
    assert_eq!(entry["detail"]["tx_hash"], swept["tx_hash"], "{entry}");

    // Nothing is left to move: the rest does not pay one more fee.
    let (status, empty) = sweep_as_owner(
        &app,
        &agent,
        &session,
        json!({"chain": "base", "to": checksummed(&owner)}),
    )
    .await;
    assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY, "{empty}");
    assert_eq!(empty["error"]["code"], "nothing_to_sweep", "{empty}");
    assert_eq!(anvil.nonce(wallet(&agent)).await, 1, "one transaction on the node");
}

#[tokio::test]
async fn a_token_sweep_moves_the_whole_token_balance_and_the_admin_sweeps_to_any_address() {
    let anvil = Anvil::start(BASE_CHAIN_ID);
    let app = admin_app(&anvil).await;
    let owner = PrivateKeySigner::random();
    let agent = capped_agent(&app, &anvil, &owner).await;
    let template = deploy_test_token(&anvil, "USD Coin", "USDC", 6).await;
    copy_code(&anvil, template, BASE_USDC).await;
    let units = U256::from(123_456_789u64);
    mint(&anvil, BASE_USDC, wallet(&agent), units).await;

    let anywhere = fresh_address();
    let who = As {
        admin: Some(ADMIN),
        ..As::default()
    };
    let body = json!({"chain": "base", "to": anywhere.to_string(), "asset": "usdc"});
    let (status, swept) = call(&app, Method::POST, &sweep_path(&agent), who, Some(body)).await;
    assert_eq!(status, StatusCode::CREATED, "{swept}");
    assert_eq!(swept["asset"], "USDC", "{swept}");
    assert_eq!(swept["amount"], "123.456789", "{swept}");
    wait_for_transactions(&app, &agent, 1, "confirmed").await;
    assert_eq!(token_balance(&anvil, BASE_USDC, anywhere).await, units);
    assert_eq!(token_balance(&anvil, BASE_USDC, wallet(&agent)).await, U256::ZERO);
    let entries = audit(&app, &agent).await;
    assert!(
        entries
            .iter()
            .any(|e| e["action"] == "funds_swept" && e["actor"] == "admin" && e["detail"]["asset"] == "USDC"),
        "{entries:?}"
    );

    // With no token left, there is nothing to sweep.
    let body = json!({"chain": "base", "to": anywhere.to_string(), "asset": "USDC"});
    let refused = call(&app, Method::POST, &sweep_path(&agent), who, Some(body)).await;
    assert_error(&refused, StatusCode::UNPROCESSABLE_ENTITY, "nothing_to_sweep");
}

#[tokio::test]
async fn an_inactive_agent_is_swept_by_its_owner_but_not_by_its_token() {
    let anvil = Anvil::start(BASE_CHAIN_ID);
    let app = admin_app(&anvil).await;
    let owner = PrivateKeySigner::random();
    let agent = capped_agent(&app, &anvil, &owner).await;
    let deleted = app
        .request(
            Method::DELETE,
            &format!("/api/agents/{}", agent.id),
            Some(&agent.token),
            None,
        )
        .await;
    assert_eq!(deleted.0, StatusCode::NO_CONTENT, "{}", deleted.1);
    let body = json!({"chain": "base", "to": checksummed(&owner)});
    let by_token = app
        .request(
            Method::POST,
            &sweep_path(&agent),
            Some(&agent.token),
            Some(body.clone()),
        )
        .await;
    assert_error(&by_token, StatusCode::GONE, "agent_inactive");

    let session = owner_session(&app, &agent.id, &owner).await;
    let (status, swept) = sweep_as_owner(&app, &agent, &session, body).await;
    assert_eq!(status, StatusCode::CREATED, "{swept}");
    let amount: U256 = swept["amount_wei"].as_str().unwrap().parse().unwrap();
    let hash = swept["tx_hash"].as_str().unwrap().parse().unwrap();
    let receipt = anvil.receipt(hash).await;
    assert!(receipt.status());
    assert_eq!(anvil.balance(owner.address()).await, amount);
    assert!(anvil.balance(wallet(&agent)).await < max_fee(&anvil, hash).await);
}

#[tokio::test]
async fn a_sweep_without_owner_authority_or_to_a_stranger_or_an_unknown_asset_is_refused_and_sends_nothing() {
    let anvil = Anvil::start(BASE_CHAIN_ID);
    let app = admin_app(&anvil).await;
    let owner = PrivateKeySigner::random();
    let agent = capped_agent(&app, &anvil, &owner).await;
    let to_owner = json!({"chain": "base", "to": checksummed(&owner)});

    let by_token = app
        .request(
            Method::POST,
            &sweep_path(&agent),
            Some(&agent.token),
            Some(to_owner.clone()),
        )
        .await;
    assert_error(&by_token, StatusCode::FORBIDDEN, "owner_required");

    let session = owner_session(&app, &agent.id, &owner).await;
    let stranger = json!({"chain": "base", "to": fresh_address().to_string()});
    let refused = sweep_as_owner(&app, &agent, &session, stranger).await;
    assert_error(&refused, StatusCode::FORBIDDEN, "owner_address_required");
    // The refusal is audited as every other refusal of a sweep is, with its code.
    let entries = audit(&app, &agent).await;
    let refusal = entries
        .iter()
        .find(|e| e["action"] == "sweep_refused")
        .unwrap_or_else(|| panic!("no sweep_refused entry: {entries:?}"));
    assert_eq!(refusal["detail"]["code"], "owner_address_required", "{refusal}");
    assert_eq!(refusal["actor"], "owner", "{refusal}");

    for (body, field) in [
        (json!({"chain": "ethereum", "to": checksummed(&owner)}), "chain"),
        (
            json!({"chain": "base", "to": checksummed(&owner), "asset": "DOGE"}),
            "asset",
        ),
        (json!({"chain": "base", "to": "0x1234"}), "to"),
    ] {
        let refused = sweep_as_owner(&app, &agent, &session, body).await;
        assert_error(&refused, StatusCode::UNPROCESSABLE_ENTITY, "validation_failed");
        assert!(
            refused.1["error"]["details"]["fields"][field].is_string(),
            "{}",
            refused.1
        );
    }
    assert_nothing_sent(&anvil, &app, &agent).await;
    assert_eq!(anvil.balance(wallet(&agent)).await, wei(ONE_ETH));
}

/// A sweep is quoted on the balance the latest block shows; a transfer still on its way holds part of it, so the
/// sweep is refused for funds, whatever the recipient: an account, or a contract (whose gas the node estimates).
#[tokio::test]
async fn a_sweep_behind_an_unmined_transfer_is_refused_for_funds_and_sends_nothing() {
    let anvil = Anvil::start(BASE_CHAIN_ID);
    let app = admin_app(&anvil).await;
    let agent = app
        .create_agent_ok(
            json!({"name": "behind", "chains": ["base"], "capabilities": ["read", "transact"], "spending_cap": 1}),
        )
        .await;
    anvil.set_balance(wallet(&agent), wei(ONE_ETH)).await;
    anvil.set_automine(false).await;
    let order = json!({"chain": "base", "to": fresh_address().to_string(), "amount": "0.1"});
    let (status, sent) = post_transfer(&app, &agent, order).await;
    assert_eq!(status, StatusCode::CREATED, "{sent}");

    // A contract that takes any call and keeps the coin (one STOP opcode).
    let vault = fresh_address();
    set_code(&anvil, vault, vec![0x00].into()).await;
    let who = As {
        admin: Some(ADMIN),
        ..As::default()
    };
    for to in [fresh_address(), vault] {
        let body = json!({"chain": "base", "to": to.to_string()});
        let refused = call(&app, Method::POST, &sweep_path(&agent), who, Some(body)).await;
        assert_eq!(refused.0, StatusCode::UNPROCESSABLE_ENTITY, "to {to}: {}", refused.1);
        assert_eq!(
            refused.1["error"]["code"], "insufficient_funds",
            "to {to}: {}",
            refused.1
        );
    }
    anvil.set_automine(true).await;
    anvil.mine(1).await;
    assert_eq!(anvil.nonce(wallet(&agent)).await, 1, "only the transfer was signed");
    assert_eq!(anvil.balance(vault).await, U256::ZERO);
}
