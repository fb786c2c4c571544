//! ERC-20 tokens (docs/api.md §13) against a real node: the registry in `GET /api/chains`, token balances (one
//! failing token failing alone), token transfers through the API and the chat landing with exact base units (read
//! back with `balanceOf` on the node), unknown assets and missing funds refused before anything is signed, per-asset
//! policy limits, the native cap paying for the gas, a registry entry whose decimals the contract contradicts, and
//! the EIP-681 token funding URI. The test token (`tests/contracts/TestToken.sol`) stands in for USDC at Circle's
//! base address through `anvil_setCode`.

use alloy::primitives::{Address, U256, address};
use reqwest::{Method, StatusCode};
use serde_json::{Value, json};

use crate::anvil::Anvil;
use crate::helpers::chain::{
    BASE_CHAIN_ID, assert_nothing_sent, chat, fresh_address, funded_agent, node_cost, spent_on_base, transfer_app,
    wait_for_transactions, wallet,
};
use crate::helpers::solidity::{copy_code, deploy_test_token, mint, token_balance};
use crate::helpers::{CreatedAgent, TestApp, assert_error, spawn_app_with};
use crate::money::transfers_api::post_transfer;

/// USDC on base, as Circle publishes it (and as the registry holds it).
const BASE_USDC: Address = address!("833589fCD6eDb6E08f4c7C32D4f71b54bdA02913");

/// 1 USDC in base units.
const ONE_USDC: u64 = 1_000_000;

/// Working token code (6 decimals) at USDC's canonical base address on `anvil`, holding `units` for `owner`.
async fn usdc_on(anvil: &Anvil, owner: Address, units: u64) {
    let template = deploy_test_token(anvil, "USD Coin", "USDC", 6).await;
    copy_code(anvil, template, BASE_USDC).await;
    mint(anvil, BASE_USDC, owner, U256::from(units)).await;
}

fn token_order(to: Address, amount: &str, asset: &str) -> Value {
    json!({"chain": "base", "to": to.to_string(), "amount": amount, "asset": asset})
}

async fn balances(app: &TestApp, agent: &CreatedAgent) -> Value {
    let path = format!("/api/agents/{}/balances", agent.id);
    let (status, body) = app.request(Method::GET, &path, Some(&agent.token), None).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    body
}

#[tokio::test]
async fn the_chain_registry_lists_usdc_everywhere_and_the_named_tokens() {
    let extra = "TST:0x00000000000000000000000000000000000000a1:18";
    let app = spawn_app_with(&[("TOKENS_BASE", extra)]).await;
    let (status, chains) = app.request(Method::GET, "/api/chains", None, None).await;
    assert_eq!(status, StatusCode::OK);
    let chains = chains.as_array().expect("an array");
    let tokens = |name: &str| -> Vec<Value> {
        let chain = chains.iter().find(|c| c["name"] == name).expect("the chain is listed");
        chain["tokens"].as_array().expect("tokens is an array").clone()
    };
    let symbols = |name: &str| -> Vec<String> {
        tokens(name)
            .iter()
            .map(|t| t["symbol"].as_str().unwrap().to_string())
            .collect()
    };
    for chain in chains {
        let name = chain["name"].as_str().unwrap();
        assert!(symbols(name).contains(&"USDC".to_string()), "{name} has USDC: {chain}");
    }
    let usdc = tokens("base").into_iter().find(|t| t["symbol"] == "USDC").unwrap();
    assert_eq!(
        usdc,
        json!({"symbol": "USDC", "address": "0x833589fCD6eDb6E08f4c7C32D4f71b54bdA02913", "decimals": 6})
    );
    assert_eq!(symbols("ethereum"), ["USDC", "USDT", "DAI"]);
    assert_eq!(symbols("base"), ["USDC", "WETH", "TST"]);
    assert_eq!(symbols("optimism"), ["USDC", "WETH"]);
}

#[tokio::test]
async fn balances_carry_each_token_and_a_failing_token_fails_alone() {
    let anvil = Anvil::start(BASE_CHAIN_ID);
    let tst = deploy_test_token(&anvil, "Test", "TST", 18).await;
    let extra = format!("TST:{tst}:18");
    let app = transfer_app(&anvil, &[("TOKENS_BASE", &extra)]).await;
    let agent = funded_agent(&app, &anvil, Some(0.5)).await;
    usdc_on(&anvil, wallet(&agent), 5 * ONE_USDC + 1).await;
    mint(
        &anvil,
        tst,
        wallet(&agent),
        U256::from(25u64) * U256::from(10u64).pow(U256::from(17u64)),
    )
    .await;

    let body = balances(&app, &agent).await;
    let base = &body["balances"]["base"];
    assert_eq!(base["formatted"], "1", "{body}");
    assert_eq!(
        base["tokens"]["USDC"],
        json!({"address": BASE_USDC.to_checksum(None), "units": "5000001", "formatted": "5.000001", "decimals": 6})
    );
    assert_eq!(base["tokens"]["TST"]["formatted"], "2.5", "{body}");
    assert_eq!(base["tokens"]["TST"]["units"], "2500000000000000000", "{body}");
    // WETH's predeploy is not on a plain anvil node: that token alone answers an error.
    let weth = &base["tokens"]["WETH"];
    assert!(weth["error"]["code"].is_string(), "{body}");
    assert_eq!(weth["address"], "0x4200000000000000000000000000000000000006");
}

#[tokio::test]
async fn an_api_transfer_of_usdc_lands_with_exact_base_units_and_only_gas_counts_against_the_cap() {
    let anvil = Anvil::start(BASE_CHAIN_ID);
    let app = transfer_app(&anvil, &[]).await;
    let agent = funded_agent(&app, &anvil, Some(0.5)).await;
    usdc_on(&anvil, wallet(&agent), 10 * ONE_USDC).await;
    let to = fresh_address();
    let eth_before = anvil.balance(wallet(&agent)).await;

    let (status, transfer) = post_transfer(&app, &agent, token_order(to, "1.234567", "usdc")).await;
    assert_eq!(status, StatusCode::CREATED, "{transfer}");
    assert_eq!(transfer["asset"], "USDC", "{transfer}");
    assert_eq!(transfer["amount"], "1.234567", "{transfer}");
    assert_eq!(transfer["amount_wei"], "1234567", "{transfer}");
    assert_eq!(transfer["to"], to.to_checksum(None));
    assert_eq!(transfer["token_address"], BASE_USDC.to_checksum(None));

    let txs = wait_for_transactions(&app, &agent, 1, "confirmed").await;
    assert_eq!(txs[0]["asset"], "USDC");
    assert_eq!(txs[0]["amount"], "1.234567");
    assert_eq!(txs[0]["value_wei"], "0", "a token transfer moves no native coin");
    assert_eq!(token_balance(&anvil, BASE_USDC, to).await, U256::from(1_234_567u64));
    assert_eq!(
        token_balance(&anvil, BASE_USDC, wallet(&agent)).await,
        U256::from(10 * ONE_USDC - 1_234_567)
    );
    // The transaction went to the token contract with no value; the cap counts its fee only.
    let hash = txs[0]["tx_hash"].as_str().unwrap().parse().unwrap();
    let (cost, success) = node_cost(&anvil, hash).await;
    assert!(success);
    assert_eq!(spent_on_base(&app, &agent).await, cost);
    assert_eq!(eth_before - anvil.balance(wallet(&agent)).await, cost);
    let path = format!(
        "/api/agents/{}/transfers/{}",
        agent.id,
        transfer["id"].as_str().unwrap()
    );
    let (_, read) = app.request(Method::GET, &path, Some(&agent.token), None).await;
    assert_eq!(
        (read["status"].as_str(), read["amount"].as_str()),
        (Some("confirmed"), Some("1.234567"))
    );
}

#[tokio::test]
async fn a_chat_transfer_of_an_18_decimal_token_lands_with_exact_base_units() {
    let anvil = Anvil::start(BASE_CHAIN_ID);
    let tst = deploy_test_token(&anvil, "Test", "TST", 18).await;
    let extra = format!("TST:{tst}:18");
    let app = transfer_app(&anvil, &[("TOKENS_BASE", &extra)]).await;
    let agent = funded_agent(&app, &anvil, Some(0.5)).await;
    let ten = U256::from(10u64).pow(U256::from(19u64));
    mint(&anvil, tst, wallet(&agent), ten).await;
    let to = fresh_address();

    let body = chat(&app, &agent, &format!("send 2.000000000000000001 TST to {to} on base")).await;
    let calls = body["chain_calls"].as_array().expect("chain calls");
    assert_eq!(calls.len(), 1, "{body}");
    assert_eq!(calls[0]["tool"], "send_token", "{body}");
    assert!(calls[0].get("error").is_none_or(Value::is_null), "{body}");
    wait_for_transactions(&app, &agent, 1, "confirmed").await;
    let sent = U256::from(2u64) * U256::from(10u64).pow(U256::from(18u64)) + U256::from(1u64);
    assert_eq!(token_balance(&anvil, tst, to).await, sent);
    assert_eq!(token_balance(&anvil, tst, wallet(&agent)).await, ten - sent);
    // And the same token's balance question reads it back.
    let answer = chat(&app, &agent, "what is my TST balance on base").await;
    assert!(
        answer["response"]
            .as_str()
            .unwrap_or_default()
            .contains("7.999999999999999999 TST"),
        "{answer}"
    );
}

#[tokio::test]
async fn an_unknown_asset_or_a_token_amount_above_the_balance_is_refused_and_nothing_moves() {
    let anvil = Anvil::start(BASE_CHAIN_ID);
    let app = transfer_app(&anvil, &[]).await;
    let agent = funded_agent(&app, &anvil, Some(0.5)).await;
    usdc_on(&anvil, wallet(&agent), ONE_USDC).await;
    let to = fresh_address();

    for asset in ["FOO", "USDT", "0x0000000000000000000000000000000000000001"] {
        let refused = post_transfer(&app, &agent, token_order(to, "1", asset)).await;
        assert_error(&refused, StatusCode::UNPROCESSABLE_ENTITY, "validation_failed");
    }
    let too_precise = post_transfer(&app, &agent, token_order(to, "0.0000001", "USDC")).await;
    assert_error(&too_precise, StatusCode::UNPROCESSABLE_ENTITY, "validation_failed");
    let above = post_transfer(&app, &agent, token_order(to, "1.000001", "USDC")).await;
    assert_error(&above, StatusCode::UNPROCESSABLE_ENTITY, "insufficient_funds");
    assert_nothing_sent(&anvil, &app, &agent).await;
    assert_eq!(
        token_balance(&anvil, BASE_USDC, wallet(&agent)).await,
        U256::from(ONE_USDC)
    );

    let body = chat(&app, &agent, &format!("send 5 FOO to {to} on base")).await;
    assert_eq!(body["chain_calls"], json!([]), "{body}");
    assert_nothing_sent(&anvil, &app, &agent).await;
}

#[tokio::test]
async fn token_policy_limits_apply_per_asset_and_count_token_values() {
    let anvil = Anvil::start(BASE_CHAIN_ID);
    let app = transfer_app(&anvil, &[]).await;
    let agent = funded_agent(&app, &anvil, Some(0.5)).await;
    usdc_on(&anvil, wallet(&agent), 10 * ONE_USDC).await;
    let path = format!("/api/agents/{}/policy", agent.id);
    let policy = json!({"limits": {"base:USDC": {"per_transfer": "1", "per_day": "1.5"}}});
    let (status, body) = app.request(Method::PUT, &path, Some(&agent.token), Some(policy)).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(body["limits"]["base:USDC"]["per_day"], "1.5", "{body}");
    let to = fresh_address();

    let over = post_transfer(&app, &agent, token_order(to, "1.000001", "USDC")).await;
    assert_error(&over, StatusCode::FORBIDDEN, "policy_denied");
    assert_eq!(over.1["error"]["details"]["rule"], "per_transfer", "{}", over.1);
    let (status, first) = post_transfer(&app, &agent, token_order(to, "1", "USDC")).await;
    assert_eq!(status, StatusCode::CREATED, "{first}");
    let day = post_transfer(&app, &agent, token_order(to, "0.500001", "USDC")).await;
    assert_error(&day, StatusCode::FORBIDDEN, "policy_denied");
    assert_eq!(day.1["error"]["details"]["rule"], "per_day", "{}", day.1);
    let (status, fill) = post_transfer(&app, &agent, token_order(to, "0.5", "USDC")).await;
    assert_eq!(status, StatusCode::CREATED, "the day window is inclusive: {fill}");
    // ETH is not named once the policy names an asset.
    let eth = post_transfer(
        &app,
        &agent,
        json!({"chain": "base", "to": to.to_string(), "amount": "0.001"}),
    )
    .await;
    assert_error(&eth, StatusCode::FORBIDDEN, "policy_denied");
    assert_eq!(eth.1["error"]["details"]["rule"], "asset_not_allowed", "{}", eth.1);
    wait_for_transactions(&app, &agent, 2, "confirmed").await;
    assert_eq!(token_balance(&anvil, BASE_USDC, to).await, U256::from(1_500_000u64));
}

#[tokio::test]
async fn a_token_transfer_is_refused_by_the_native_cap_for_its_gas() {
    let anvil = Anvil::start(BASE_CHAIN_ID);
    let app = transfer_app(&anvil, &[]).await;
    // A cap far below any token transfer's gas (tens of thousands of gas at a gwei or more).
    let agent = funded_agent(&app, &anvil, Some(0.000001)).await;
    usdc_on(&anvil, wallet(&agent), 10 * ONE_USDC).await;
    let refused = post_transfer(&app, &agent, token_order(fresh_address(), "1", "USDC")).await;
    assert_error(&refused, StatusCode::FORBIDDEN, "spending_cap_exceeded");
    assert_nothing_sent(&anvil, &app, &agent).await;
    assert_eq!(
        token_balance(&anvil, BASE_USDC, wallet(&agent)).await,
        U256::from(10 * ONE_USDC)
    );
}

#[tokio::test]
async fn a_registry_token_whose_contract_reports_other_decimals_is_refused_alone() {
    let anvil = Anvil::start(BASE_CHAIN_ID);
    // The operator claims 18 decimals for USDC; the contract at that address says 6.
    let wrong = format!("USDC:{BASE_USDC}:18");
    let app = transfer_app(&anvil, &[("TOKENS_BASE", &wrong)]).await;
    let agent = funded_agent(&app, &anvil, Some(0.5)).await;
    usdc_on(&anvil, wallet(&agent), 10 * ONE_USDC).await;

    let body = balances(&app, &agent).await;
    let base = &body["balances"]["base"];
    assert_eq!(base["formatted"], "1", "the chain still answers: {body}");
    assert_eq!(
        base["tokens"]["USDC"]["error"]["code"], "token_decimals_mismatch",
        "{body}"
    );
    let message = base["tokens"]["USDC"]["error"]["message"].as_str().unwrap_or_default();
    assert!(message.contains("6") && message.contains("18"), "{message}");

    let to = fresh_address();
    let refused = post_transfer(&app, &agent, token_order(to, "1", "USDC")).await;
    assert_error(&refused, StatusCode::SERVICE_UNAVAILABLE, "token_decimals_mismatch");
    assert_nothing_sent(&anvil, &app, &agent).await;
    let (status, eth) = post_transfer(
        &app,
        &agent,
        json!({"chain": "base", "to": to.to_string(), "amount": "0.001"}),
    )
    .await;
    assert_eq!(
        status,
        StatusCode::CREATED,
        "the chain's native coin still moves: {eth}"
    );
}

#[tokio::test]
async fn fund_with_a_token_gives_the_erc681_transfer_uri() {
    let app = spawn_app_with(&[]).await;
    let agent = app
        .create_agent_ok(json!({"name": "funded", "chains": ["base", "ethereum"], "capabilities": ["read"]}))
        .await;
    let path = format!("/api/agents/{}/fund", agent.id);
    let address = agent.address("base");
    let body = json!({"chain": "base", "asset": "usdc", "amount": "5.5"});
    let (status, funding) = app.request(Method::POST, &path, Some(&agent.token), Some(body)).await;
    assert_eq!(status, StatusCode::OK, "{funding}");
    let deposit = &funding["deposits"][0];
    assert_eq!(
        deposit["payment_uri"],
        format!("ethereum:0x833589fCD6eDb6E08f4c7C32D4f71b54bdA02913@8453/transfer?address={address}&uint256=5500000")
    );
    assert_eq!(deposit["symbol"], "USDC");
    assert_eq!(deposit["amount_wei"], "5500000");
    let (status, all) = app
        .request(Method::POST, &path, Some(&agent.token), Some(json!({"asset": "DAI"})))
        .await;
    assert_eq!(status, StatusCode::OK, "{all}");
    assert_eq!(
        all["deposits"].as_array().map(Vec::len),
        Some(1),
        "only ethereum has DAI: {all}"
    );
    let unknown = app
        .request(
            Method::POST,
            &path,
            Some(&agent.token),
            Some(json!({"chain": "base", "asset": "DAI"})),
        )
        .await;
    assert_error(&unknown, StatusCode::UNPROCESSABLE_ENTITY, "validation_failed");
}

#[tokio::test]
async fn a_token_refused_for_its_decimals_is_asked_again_after_a_minute_and_then_moves() {
    let anvil = Anvil::start(BASE_CHAIN_ID);
    let app = transfer_app(&anvil, &[]).await;
    let agent = funded_agent(&app, &anvil, Some(0.5)).await;
    // The node first answers wrong (code reporting 18 decimals at USDC's address, whose registry entry says 6).
    let wrong = deploy_test_token(&anvil, "USD Coin", "USDC", 18).await;
    copy_code(&anvil, wrong, BASE_USDC).await;
    mint(&anvil, BASE_USDC, wallet(&agent), U256::from(10 * ONE_USDC)).await;
    let body = balances(&app, &agent).await;
    assert_eq!(
        body["balances"]["base"]["tokens"]["USDC"]["error"]["code"], "token_decimals_mismatch",
        "{body}"
    );

    // Then right (same storage, code reporting 6): refused still within the minute, accepted after it.
    let right = deploy_test_token(&anvil, "USD Coin", "USDC", 6).await;
    copy_code(&anvil, right, BASE_USDC).await;
    let to = fresh_address();
    let refused = post_transfer(&app, &agent, token_order(to, "1", "USDC")).await;
    assert_error(&refused, StatusCode::SERVICE_UNAVAILABLE, "token_decimals_mismatch");
    // `chain::client::tokens::DECIMALS_RECHECK`: a minute, on the app's clock.
    app.clock.advance(agentd::chain::client::tokens::DECIMALS_RECHECK);

    let (status, sent) = post_transfer(&app, &agent, token_order(to, "1", "USDC")).await;
    assert_eq!(status, StatusCode::CREATED, "{sent}");
    wait_for_transactions(&app, &agent, 1, "confirmed").await;
    assert_eq!(token_balance(&anvil, BASE_USDC, to).await, U256::from(ONE_USDC));
}

/// An agent holding 10 USDC on a node that mines nothing until `three_sends_landed`: every balance read says 10 USDC
/// meanwhile, so only what the service holds for transfers on their way keeps a fourth 3 USDC from being signed.
async fn ten_usdc_unmined() -> (Anvil, TestApp, CreatedAgent, Address) {
    let anvil = Anvil::start(BASE_CHAIN_ID);
    let app = transfer_app(&anvil, &[]).await;
    let agent = funded_agent(&app, &anvil, Some(0.5)).await;
    usdc_on(&anvil, wallet(&agent), 10 * ONE_USDC).await;
    anvil.set_automine(false).await;
    (anvil, app, agent, fresh_address())
}

/// Mines what waits and checks that exactly three sends of 3 USDC reached the chain.
async fn three_sends_landed(anvil: &Anvil, agent: &CreatedAgent, to: Address) {
    anvil.set_automine(true).await;
    anvil.mine(1).await;
    assert_eq!(
        anvil.nonce(wallet(agent)).await,
        3,
        "no signed send beyond the balance reached the chain"
    );
    assert_eq!(token_balance(anvil, BASE_USDC, to).await, U256::from(9 * ONE_USDC));
    assert_eq!(
        token_balance(anvil, BASE_USDC, wallet(agent)).await,
        U256::from(ONE_USDC)
    );
}

#[tokio::test]
async fn parallel_token_sends_above_the_balance_sign_only_what_the_balance_covers() {
    let (anvil, app, agent, to) = ten_usdc_unmined().await;
    let sends = (0..8).map(|_| post_transfer(&app, &agent, token_order(to, "3", "USDC")));
    let answers = futures::future::join_all(sends).await;
    let accepted = answers
        .iter()
        .filter(|(status, _)| *status == StatusCode::CREATED)
        .count();
    for (status, body) in &answers {
        if *status != StatusCode::CREATED {
            assert_error(
                &(*status, body.clone()),
                StatusCode::UNPROCESSABLE_ENTITY,
                "insufficient_funds",
            );
        }
    }
    assert_eq!(accepted, 3, "{answers:?}");
    three_sends_landed(&anvil, &agent, to).await;
}

/// The node's pending state (where a node may estimate gas by default) already holds only 1 USDC; the latest block
/// still holds 10, and the service's own holds refuse the fourth send, as `insufficient_funds`.
#[tokio::test]
async fn a_token_send_behind_unmined_ones_is_refused_as_insufficient_funds() {
    let (anvil, app, agent, to) = ten_usdc_unmined().await;
    for _ in 0..3 {
        let (status, sent) = post_transfer(&app, &agent, token_order(to, "3", "USDC")).await;
        assert_eq!(status, StatusCode::CREATED, "{sent}");
    }
    let fourth = post_transfer(&app, &agent, token_order(to, "3", "USDC")).await;
    assert_error(&fourth, StatusCode::UNPROCESSABLE_ENTITY, "insufficient_funds");
    three_sends_landed(&anvil, &agent, to).await;
}

#[tokio::test]
async fn token_transfers_that_landed_are_not_held_again_before_the_watcher_settles_them() {
    let anvil = Anvil::start(BASE_CHAIN_ID);
    // A watcher that never comes round in this test: every transfer stays `pending` in the store after it lands.
    let app = transfer_app(&anvil, &[("WATCHER_INTERVAL_MS", "600000")]).await;
    let agent = funded_agent(&app, &anvil, Some(0.5)).await;
    // Exactly what ten sends of 1.5 USDC need.
    usdc_on(&anvil, wallet(&agent), 15 * ONE_USDC).await;
    let to = fresh_address();
    for i in 0..10 {
        let (status, body) = post_transfer(&app, &agent, token_order(to, "1.5", "USDC")).await;
        assert_eq!(status, StatusCode::CREATED, "send {i}: {body}");
    }
    // What the chain shows: all ten landed, the wallet is empty, nothing was refused for funds it had.
    assert_eq!(anvil.nonce(wallet(&agent)).await, 10);
    assert_eq!(token_balance(&anvil, BASE_USDC, to).await, U256::from(15 * ONE_USDC));
    assert_eq!(token_balance(&anvil, BASE_USDC, wallet(&agent)).await, U256::ZERO);
    // One more is refused: the wallet holds nothing, and nothing else is on its way.
    let over = post_transfer(&app, &agent, token_order(to, "1.5", "USDC")).await;
    assert_error(&over, StatusCode::UNPROCESSABLE_ENTITY, "insufficient_funds");
}
