//! Batches (§22 "Batches") through the public API against the real parts on anvil (EntryPoint v0.7,
//! `EIP7702StatelessDeleGator`, Pimlico's `SingletonPaymaster`) and the published Uniswap V2: an approve-and-swap
//! runs as one user operation; a batch whose call reverts, or whose sum breaks a limit, sends nothing. What is
//! asserted is what the chain shows.

use alloy::primitives::{Address, B256, U256, keccak256};
use alloy::providers::Provider;
use alloy::sol_types::SolCall;
use reqwest::{Method, StatusCode};
use serde_json::{Value, json};

use super::transfers::{ADMIN, USDC, World, world};
use crate::helpers::chain::{ONE_ETH, fresh_address, transfer_app, wallet};
use crate::helpers::solidity::{mint, read, token_balance};
use crate::helpers::uniswap::{Uniswap, deploy_uniswap};
use crate::helpers::{CreatedAgent, TestApp};

alloy::sol! {
    function allowance(address owner, address spender) external view returns (uint256);
}

/// A world with a sponsored agent holding 100 USDC and no ETH, its `calls` allowing everything (plus `limits`), and
/// a USDC/WETH pool (1,000,000 USDC and 1,000 ETH).
pub(super) async fn setup(limits: Value) -> (World, Uniswap, CreatedAgent) {
    let world = world().await;
    world.fund_sponsor().await;
    let uni = deploy_uniswap(&world.anvil, U256::from(1_000_000 * USDC), U256::from(1_000 * ONE_ETH)).await;
    let agent = world.agent().await;
    mint(&world.anvil, world.usdc, wallet(&agent), U256::from(100 * USDC)).await;
    let (status, body) = world.sponsorship(&agent, "0.05").await;
    assert_eq!(status, StatusCode::OK, "{body}");
    let policy = json!({"limits": limits, "calls": {"default": "allow"}});
    let path = format!("/api/agents/{}/policy", agent.id);
    let response = world
        .app
        .send(
            world
                .app
                .build(Method::PUT, &path, None, Some(policy))
                .bearer_auth(ADMIN),
        )
        .await;
    assert_eq!(response.status, StatusCode::OK, "{}", response.body);
    (world, uni, agent)
}

pub(super) async fn post(app: &TestApp, agent: &CreatedAgent, path: &str, body: Value) -> (StatusCode, Value) {
    let path = format!("/api/agents/{}/{path}", agent.id);
    let response = app
        .send(app.build(Method::POST, &path, Some(&agent.token), Some(body)))
        .await;
    (response.status, response.body)
}

pub(super) fn approve(uni: &Uniswap, usdc: u64) -> Value {
    json!({"to": uni.usdc.to_string(), "function": "approve(address,uint256)",
        "args": [uni.router.to_string(), (usdc * USDC).to_string()]})
}

/// `swapExactTokensForETH` of `usdc` USDC to the agent, with `min_out` wei at least.
pub(super) fn swap(uni: &Uniswap, agent: Address, usdc: u64, min_out: &str) -> Value {
    json!({"to": uni.router.to_string(),
        "function": "swapExactTokensForETH(uint256,uint256,address[],address,uint256)",
        "args": [(usdc * USDC).to_string(), min_out, [uni.usdc.to_string(), uni.weth.to_string()],
            agent.to_string(), u64::MAX.to_string()]})
}

pub(super) async fn router_allowance(world: &World, uni: &Uniswap, owner: Address) -> U256 {
    let data = allowanceCall {
        owner,
        spender: uni.router,
    }
    .abi_encode();
    U256::from_be_slice(&read(&world.anvil, uni.usdc, data.into()).await[..32])
}

/// How many `UserOperationEvent`s of the EntryPoint the transaction `hash` logged.
pub(super) async fn user_operation_events(world: &World, hash: &str) -> usize {
    let topic = keccak256("UserOperationEvent(bytes32,address,address,uint256,bool,uint256,uint256)");
    let hash: B256 = hash.parse().unwrap();
    let receipt = world
        .anvil
        .provider()
        .get_transaction_receipt(hash)
        .await
        .unwrap()
        .expect("the bundle was mined");
    receipt
        .inner
        .logs()
        .iter()
        .filter(|l| l.address() == world.framework.entry_point && l.topics().first() == Some(&topic))
        .count()
}

#[tokio::test]
async fn an_approve_and_swap_batch_lands_as_one_user_operation() {
    let (world, uni, agent) = setup(json!({})).await;
    let from = wallet(&agent);
    let batch = json!({"chain": "base", "calls": [approve(&uni, 40), swap(&uni, from, 40, "1")]});
    let (status, simulated) = post(&world.app, &agent, "calls/simulate", batch.clone()).await;
    assert_eq!(status, StatusCode::OK, "{simulated}");
    assert_eq!(simulated["decision"]["result"], "allow", "{simulated}");
    assert!(simulated["call"].is_null(), "{simulated}");
    assert_eq!(simulated["calls"][1]["to"], uni.router.to_checksum(None), "{simulated}");
    let out = simulated["simulation"]["changes"].as_array().unwrap();
    assert!(
        out.iter()
            .any(|c| c["asset"] == "base:USDC" && c["direction"] == "out" && c["amount"] == "40"),
        "{simulated}"
    );

    let (status, sent) = post(&world.app, &agent, "calls", batch).await;
    assert_eq!(status, StatusCode::CREATED, "{sent}");
    assert_eq!(sent["gas"], "sponsored", "{sent}");
    assert_eq!(sent["amount"], "0", "{sent}");
    assert!(sent["call"].is_null(), "{sent}");
    assert_eq!(sent["calls"].as_array().map(Vec::len), Some(2), "{sent}");
    assert_eq!(sent["calls"][0]["function"], "approve(address,uint256)", "{sent}");
    let settled = world.settled(&agent, sent["id"].as_str().unwrap()).await;
    assert_eq!(settled["status"], "confirmed", "{settled}");
    // From the chain: one operation in its bundle, the USDC swapped, the allowance used up, ETH received by an
    // agent that never held any before, its address designating the implementation, and no transaction of its own.
    let hash = settled["tx_hash"].as_str().expect("the bundle's hash");
    assert_eq!(user_operation_events(&world, hash).await, 1);
    assert_eq!(
        token_balance(&world.anvil, world.usdc, from).await,
        U256::from(60 * USDC)
    );
    assert_eq!(router_allowance(&world, &uni, from).await, U256::ZERO);
    assert!(world.anvil.balance(from).await > U256::ZERO);
    assert_eq!(
        world.code(from).await,
        [&[0xef, 0x01, 0x00][..], world.framework.delegator.as_slice()].concat()
    );
    assert_eq!(
        world.anvil.nonce(from).await,
        1,
        "only the EIP-7702 authorization used a nonce"
    );

    // Now a smart account holding the swap's ETH: paid by the wallet, one transaction to its own address.
    let eth_before = world.anvil.balance(from).await;
    let batch = json!({"chain": "base", "gas": "wallet", "calls": [approve(&uni, 10), swap(&uni, from, 10, "1")]});
    let (status, sent) = post(&world.app, &agent, "calls", batch).await;
    assert_eq!(status, StatusCode::CREATED, "{sent}");
    assert_eq!(sent["gas"], "wallet", "{sent}");
    let settled = world.settled(&agent, sent["id"].as_str().unwrap()).await;
    assert_eq!(settled["status"], "confirmed", "{settled}");
    let hash: B256 = settled["tx_hash"].as_str().unwrap().parse().unwrap();
    let tx = world
        .anvil
        .provider()
        .get_transaction_by_hash(hash)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(tx.inner.signer(), from);
    assert_eq!(alloy::consensus::Transaction::to(&tx), Some(from));
    assert_eq!(
        token_balance(&world.anvil, world.usdc, from).await,
        U256::from(50 * USDC)
    );
    assert_eq!(router_allowance(&world, &uni, from).await, U256::ZERO);
    assert_eq!(world.anvil.nonce(from).await, 2);
    assert_ne!(world.anvil.balance(from).await, eth_before);
}

#[tokio::test]
async fn a_batch_whose_second_call_reverts_sends_nothing() {
    let (world, uni, agent) = setup(json!({})).await;
    let from = wallet(&agent);
    // More ETH out than the pool can give: the router reverts.
    let batch =
        json!({"chain": "base", "calls": [approve(&uni, 10), swap(&uni, from, 10, &(10 * ONE_ETH).to_string())]});
    for path in ["calls/simulate", "calls"] {
        let (status, body) = post(&world.app, &agent, path, batch.clone()).await;
        assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY, "{body}");
        assert_eq!(body["error"]["code"], "simulation_reverted", "{body}");
        assert_eq!(body["error"]["details"]["index"], 1, "{body}");
        let reason = body["error"]["details"]["reason"].as_str().unwrap_or_default();
        assert!(reason.contains("INSUFFICIENT_OUTPUT_AMOUNT"), "{body}");
    }
    tokio::time::sleep(std::time::Duration::from_millis(500)).await;
    assert_eq!(
        token_balance(&world.anvil, world.usdc, from).await,
        U256::from(100 * USDC)
    );
    assert_eq!(router_allowance(&world, &uni, from).await, U256::ZERO);
    assert_eq!(world.anvil.nonce(from).await, 0);
    assert!(world.code(from).await.is_empty(), "nothing was designated");
}

#[tokio::test]
async fn a_batch_whose_sum_breaks_a_limit_sends_nothing() {
    let (world, uni, agent) = setup(json!({"base:USDC": {"per_transfer": "30"}})).await;
    let from = wallet(&agent);
    let to = fresh_address();
    let transfer = json!({"to": uni.usdc.to_string(), "function": "transfer(address,uint256)",
        "args": [to.to_string(), (15 * USDC).to_string()]});
    // Each call alone is within 30 USDC; the approve-and-swap counts 20 once, and the transfer 15 more.
    let within = json!({"chain": "base", "calls": [approve(&uni, 20), swap(&uni, from, 20, "1")]});
    let (status, body) = post(&world.app, &agent, "calls/simulate", within).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(body["decision"]["result"], "allow", "{body}");
    let over = json!({"chain": "base", "calls": [approve(&uni, 20), swap(&uni, from, 20, "1"), transfer]});
    let (status, body) = post(&world.app, &agent, "calls", over).await;
    assert_eq!(status, StatusCode::FORBIDDEN, "{body}");
    assert_eq!(body["error"]["code"], "policy_denied", "{body}");
    assert_eq!(body["error"]["details"]["rule"], "per_transfer", "{body}");
    tokio::time::sleep(std::time::Duration::from_millis(500)).await;
    assert_eq!(
        token_balance(&world.anvil, world.usdc, from).await,
        U256::from(100 * USDC)
    );
    assert_eq!(token_balance(&world.anvil, world.usdc, to).await, U256::ZERO);
    assert_eq!(world.anvil.nonce(from).await, 0);
    assert!(world.code(from).await.is_empty(), "nothing was designated");
}

#[tokio::test]
async fn batch_requests_are_checked_before_anything_is_simulated() {
    let (world, uni, agent) = setup(json!({})).await;
    let from = wallet(&agent);
    let two = [approve(&uni, 1), swap(&uni, from, 1, "1")];
    let cases = [
        json!({"chain": "base", "to": uni.usdc.to_string(), "calls": two.clone()}),
        json!({"chain": "base", "calls": [approve(&uni, 1)]}),
        json!({"chain": "base", "calls": vec![approve(&uni, 1); 17]}),
        json!({"chain": "base", "calls": two.clone(), "delegation": uuid::Uuid::new_v4().to_string()}),
        json!({"chain": "base", "calls": [approve(&uni, 1), {"to": uni.router.to_string()}]}),
    ];
    for body in cases {
        let (status, answer) = post(&world.app, &agent, "calls", body.clone()).await;
        assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY, "{body}: {answer}");
        assert_eq!(answer["error"]["code"], "validation_failed", "{body}: {answer}");
    }
    // A call to the agent's own address is refused whatever the rules, naming it.
    let own = json!({"chain": "base", "calls": [approve(&uni, 1), {"to": from.to_string(), "data": "0x12345678"}]});
    let (status, answer) = post(&world.app, &agent, "calls", own).await;
    assert_eq!(status, StatusCode::FORBIDDEN, "{answer}");
    assert_eq!(answer["error"]["details"]["rule"], "call_denied", "{answer}");
    assert_eq!(answer["error"]["details"]["index"], 1, "{answer}");
    assert_eq!(world.anvil.nonce(from).await, 0);
}

#[tokio::test]
async fn a_chain_without_an_account_implementation_has_no_batches() {
    let anvil = crate::anvil::Anvil::start(crate::helpers::chain::BASE_CHAIN_ID);
    let app = transfer_app(&anvil, &[("ACCOUNT_IMPLEMENTATION_BASE", "none")]).await;
    let agent = crate::helpers::chain::funded_agent(&app, &anvil, None).await;
    let token = fresh_address().to_string();
    let call = json!({"to": token, "data": "0x12345678"});
    let batch = json!({"chain": "base", "calls": [call.clone(), call]});
    for path in ["calls", "calls/simulate"] {
        let (status, answer) = post(&app, &agent, path, batch.clone()).await;
        assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY, "{answer}");
        assert_eq!(answer["error"]["code"], "batch_unavailable", "{answer}");
    }
}

/// `tools/call` of `name` with `arguments` over `POST /mcp`: the tool's result, as JSON, and whether it is an error.
pub(super) async fn tool(world: &World, agent: &CreatedAgent, name: &str, arguments: Value) -> (Value, bool) {
    let rpc = json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call",
                     "params": {"name": name, "arguments": arguments}});
    let (status, body) = world
        .app
        .request(Method::POST, "/mcp", Some(&agent.token), Some(rpc))
        .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    let text = body["result"]["content"][0]["text"].as_str().expect("a text result");
    let result = serde_json::from_str(text).unwrap_or_else(|_| json!(text));
    (result, body["result"]["isError"] == true)
}

#[tokio::test]
async fn the_call_tools_take_calls_over_mcp() {
    let (world, uni, agent) = setup(json!({})).await;
    let from = wallet(&agent);
    let calls = json!([approve(&uni, 30), swap(&uni, from, 30, "1")]);
    let (simulated, error) = tool(
        &world,
        &agent,
        "simulate_call",
        json!({"chain": "base", "calls": calls}),
    )
    .await;
    assert!(!error, "{simulated}");
    assert!(simulated["call"].is_null(), "{simulated}");
    assert_eq!(simulated["calls"].as_array().map(Vec::len), Some(2), "{simulated}");
    assert_eq!(simulated["decision"]["result"], "allow", "{simulated}");
    let (one, error) = tool(
        &world,
        &agent,
        "call_contract",
        json!({"chain": "base", "calls": [approve(&uni, 1)]}),
    )
    .await;
    assert!(error, "a batch of one is refused: {one}");
    let arguments = json!({"chain": "base", "calls": calls, "gas": "sponsored"});
    let (sent, error) = tool(&world, &agent, "call_contract", arguments).await;
    assert!(!error, "{sent}");
    let settled = world.settled(&agent, sent["transfer_id"].as_str().unwrap()).await;
    assert_eq!(settled["status"], "confirmed", "{settled}");
    assert_eq!(settled["gas"], "sponsored", "{settled}");
    assert_eq!(
        token_balance(&world.anvil, world.usdc, from).await,
        U256::from(70 * USDC)
    );
}

/// Replaces the agent's policy with the admin token.
pub(super) async fn put_policy(world: &World, agent: &CreatedAgent, policy: Value) {
    let path = format!("/api/agents/{}/policy", agent.id);
    let response = world
        .app
        .send(
            world
                .app
                .build(Method::PUT, &path, None, Some(policy))
                .bearer_auth(ADMIN),
        )
        .await;
    assert_eq!(response.status, StatusCode::OK, "{}", response.body);
}

#[tokio::test]
async fn each_call_of_a_batch_is_judged_by_the_rules_and_a_held_batch_lands_once_approved() {
    let (world, uni, agent) = setup(json!({})).await;
    let from = wallet(&agent);
    let batch = json!({"chain": "base", "calls": [approve(&uni, 25), swap(&uni, from, 25, "1")]});
    let router_rule = |action: &str| {
        json!({"calls": {"default": "allow", "rules": [
            {"chain": "*", "to": uni.router.to_string(), "function": "*", "action": action}]}})
    };
    // A rule denying the router refuses the second call, named by its index.
    put_policy(&world, &agent, router_rule("deny")).await;
    let (status, simulated) = post(&world.app, &agent, "calls/simulate", batch.clone()).await;
    assert_eq!(status, StatusCode::OK, "{simulated}");
    assert_eq!(simulated["decision"]["result"], "deny", "{simulated}");
    assert_eq!(simulated["decision"]["rule"], "call_denied", "{simulated}");
    let (status, refused) = post(&world.app, &agent, "calls", batch.clone()).await;
    assert_eq!(status, StatusCode::FORBIDDEN, "{refused}");
    assert_eq!(refused["error"]["details"]["rule"], "call_denied", "{refused}");
    assert_eq!(refused["error"]["details"]["index"], 1, "{refused}");
    // A rule holding it: nothing signed until the owner approves, then one user operation.
    put_policy(&world, &agent, router_rule("approve")).await;
    let (status, held) = post(&world.app, &agent, "calls", batch).await;
    assert_eq!(status, StatusCode::CREATED, "{held}");
    assert_eq!(held["status"], "awaiting_approval", "{held}");
    assert_eq!(held["calls"].as_array().map(Vec::len), Some(2), "{held}");
    assert!(world.code(from).await.is_empty(), "nothing was signed");
    let id = held["id"].as_str().unwrap();
    let path = format!("/api/agents/{}/transfers/{id}/approve", agent.id);
    let response = world
        .app
        .send(world.app.build(Method::POST, &path, None, None).bearer_auth(ADMIN))
        .await;
    assert!(response.status.is_success(), "{}", response.body);
    let settled = world.settled(&agent, id).await;
    assert_eq!(settled["status"], "confirmed", "{settled}");
    assert_eq!(settled["gas"], "sponsored", "{settled}");
    assert_eq!(
        token_balance(&world.anvil, world.usdc, from).await,
        U256::from(75 * USDC)
    );
    assert_eq!(router_allowance(&world, &uni, from).await, U256::ZERO);
}

alloy::sol! {
    function depositTo(address account) external payable;
}

#[tokio::test]
async fn a_batch_that_moves_the_agents_entry_point_deposit_is_refused_naming_the_call() {
    let (world, uni, agent) = setup(json!({})).await;
    let from = wallet(&agent);
    // A contract that forwards its calldata and value to the EntryPoint (which no call may reach directly).
    let forwarder = fresh_address();
    let code = [
        &[0x36, 0x5f, 0x5f, 0x37, 0x5f, 0x5f, 0x36, 0x5f, 0x34, 0x73][..],
        world.framework.entry_point.as_slice(),
        &[0x5a, 0xf1, 0x50, 0x00],
    ]
    .concat();
    world.anvil.set_code(forwarder, code.into()).await;
    world.anvil.set_balance(from, U256::from(ONE_ETH)).await;
    let deposit = depositToCall { account: from }.abi_encode();
    let forward = json!({"to": forwarder.to_string(), "value": "0.001", "data": crate::helpers::uniswap::hex(deposit)});
    let batch = json!({"chain": "base", "calls": [approve(&uni, 1), forward]});
    let (status, refused) = post(&world.app, &agent, "calls", batch).await;
    assert_eq!(status, StatusCode::FORBIDDEN, "{refused}");
    assert_eq!(refused["error"]["details"]["rule"], "call_denied", "{refused}");
    assert_eq!(refused["error"]["details"]["index"], 1, "{refused}");
    let message = refused["error"]["message"].as_str().unwrap_or_default();
    assert!(message.contains("deposit at the EntryPoint"), "{refused}");
    assert_eq!(world.anvil.balance(from).await, U256::from(ONE_ETH));
    assert_eq!(world.anvil.nonce(from).await, 0);
}
