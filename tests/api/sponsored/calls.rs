//! A single call whose gas the sponsorship pays, and a batch the wallet pays from an agent still an EOA (§22),
//! through the public API against the real parts on anvil. What is asserted is what the chain shows: the call's
//! effect, the agent's ETH, its wallet and EntryPoint nonces, its code, the paymaster's deposit.

use alloy::primitives::{Address, B256, U256};
use alloy::providers::Provider;
use alloy::sol_types::SolCall;
use reqwest::StatusCode;
use serde_json::json;

use super::batches::{approve, post, router_allowance, setup, swap, user_operation_events};
use super::transfers::{USDC, World, wei_of};
use crate::helpers::chain::{ONE_ETH, fresh_address, wallet};
use crate::helpers::solidity::{mint, read, token_balance};

alloy::sol! {
    function getNonce(address sender, uint192 key) external view returns (uint256);
}

/// The agent's next operation nonce at the EntryPoint (key 0).
async fn entry_point_nonce(world: &World, account: Address) -> U256 {
    let data = getNonceCall {
        sender: account,
        key: Default::default(),
    }
    .abi_encode();
    U256::from_be_slice(&read(&world.anvil, world.framework.entry_point, data.into()).await[..32])
}

/// Empties the node's pool of `from`'s transactions.
async fn empty_pool(world: &World, from: Address) {
    let _: serde_json::Value = world
        .anvil
        .provider()
        .raw_request("anvil_removePoolTransactions".into(), (from,))
        .await
        .unwrap();
}

/// Empties the node's pool of `from`'s transactions, sends `raw` again alone, mines it and turns automine back on.
/// The watcher may have sent it again first (it re-sends what the node forgot): then the node knows it.
async fn resend_alone(world: &World, from: Address, raw: &[u8]) {
    empty_pool(world, from).await;
    if let Err(e) = world.anvil.provider().send_raw_transaction(raw).await {
        assert!(e.to_string().contains("already"), "{e}");
    }
    world.anvil.mine(1).await;
    world.anvil.set_automine(true).await;
}

#[tokio::test]
async fn a_single_call_is_one_sponsored_user_operation_and_a_cap_of_zero_moves_nothing() {
    let (world, uni, agent) = setup(json!({})).await;
    let from = wallet(&agent);
    let deposit_before = world.paymaster.deposit_balance(&world.anvil).await;
    // Asked sponsored: simulated and judged as any call, then one user operation in single mode.
    let call = json!({"chain": "base", "gas": "sponsored", "to": uni.usdc.to_string(),
        "function": "approve(address,uint256)", "args": [uni.router.to_string(), (40 * USDC).to_string()]});
    let (status, simulated) = post(&world.app, &agent, "calls/simulate", call.clone()).await;
    assert_eq!(status, StatusCode::OK, "{simulated}");
    assert_eq!(simulated["decision"]["result"], "allow", "{simulated}");
    let (status, sent) = post(&world.app, &agent, "calls", call).await;
    assert_eq!(status, StatusCode::CREATED, "{sent}");
    assert_eq!(sent["gas"], "sponsored", "{sent}");
    assert_eq!(sent["call"]["function"], "approve(address,uint256)", "{sent}");
    let settled = world.settled(&agent, sent["id"].as_str().unwrap()).await;
    assert_eq!(settled["status"], "confirmed", "{settled}");
    let first_cost = wei_of(settled["sponsorship"]["gas_cost"].as_str().expect("its gas cost"), 18);
    let hash = settled["tx_hash"].as_str().expect("the bundle's hash");
    assert_eq!(user_operation_events(&world, hash).await, 1);
    // From the chain: the allowance set, no ETH held or spent, the designation the only use of the wallet's nonce,
    // one operation at the EntryPoint.
    assert_eq!(router_allowance(&world, &uni, from).await, U256::from(40 * USDC));
    assert_eq!(world.anvil.balance(from).await, U256::ZERO);
    assert_eq!(
        world.anvil.nonce(from).await,
        1,
        "only the EIP-7702 authorization used a nonce"
    );
    assert_eq!(entry_point_nonce(&world, from).await, U256::from(1));

    // By default (a sponsorship on the chain) a call is sponsored too: a token transfer by function and args.
    let to = fresh_address();
    let transfer = json!({"chain": "base", "to": uni.usdc.to_string(), "function": "transfer(address,uint256)",
        "args": [to.to_string(), (5 * USDC).to_string()]});
    let (status, sent) = post(&world.app, &agent, "calls", transfer).await;
    assert_eq!(status, StatusCode::CREATED, "{sent}");
    assert_eq!(sent["gas"], "sponsored", "{sent}");
    let settled = world.settled(&agent, sent["id"].as_str().unwrap()).await;
    assert_eq!(settled["status"], "confirmed", "{settled}");
    let second_cost = wei_of(settled["sponsorship"]["gas_cost"].as_str().expect("its gas cost"), 18);
    assert_eq!(token_balance(&world.anvil, world.usdc, to).await, U256::from(5 * USDC));
    assert_eq!(
        token_balance(&world.anvil, world.usdc, from).await,
        U256::from(95 * USDC)
    );
    assert_eq!(world.anvil.balance(from).await, U256::ZERO);
    assert_eq!(
        world.anvil.nonce(from).await,
        1,
        "a smart account's operation uses no wallet nonce"
    );
    assert_eq!(entry_point_nonce(&world, from).await, U256::from(2));
    let deposit_after = world.paymaster.deposit_balance(&world.anvil).await;
    assert_eq!(deposit_before - deposit_after, first_cost + second_cost);

    // The addresses no call reaches are refused before anything is simulated, sponsored or not.
    let entry_point = json!({"chain": "base", "gas": "sponsored", "to": world.framework.entry_point.to_string(),
        "data": "0x12345678"});
    let (status, refused) = post(&world.app, &agent, "calls", entry_point).await;
    assert_eq!(status, StatusCode::FORBIDDEN, "{refused}");
    assert_eq!(refused["error"]["details"]["rule"], "call_denied", "{refused}");

    // A cap of 0 moves nothing, whoever pays the gas.
    let capless = world.agent_with_cap(0.0).await;
    mint(&world.anvil, world.usdc, wallet(&capless), U256::from(10 * USDC)).await;
    let (status, _) = world.sponsorship(&capless, "0.05").await;
    assert_eq!(status, StatusCode::OK);
    super::batches::put_policy(&world, &capless, json!({"calls": {"default": "allow"}})).await;
    let transfer = json!({"chain": "base", "gas": "sponsored", "to": uni.usdc.to_string(),
        "function": "transfer(address,uint256)", "args": [to.to_string(), USDC.to_string()]});
    let (status, refused) = post(&world.app, &capless, "calls", transfer).await;
    assert_eq!(status, StatusCode::FORBIDDEN, "{refused}");
    assert_eq!(refused["error"]["code"], "spending_cap_exceeded", "{refused}");
    tokio::time::sleep(std::time::Duration::from_millis(700)).await;
    assert_eq!(token_balance(&world.anvil, world.usdc, to).await, U256::from(5 * USDC));
    assert!(world.code(wallet(&capless)).await.is_empty(), "nothing was designated");
    assert_eq!(entry_point_nonce(&world, wallet(&capless)).await, U256::ZERO);
}

#[tokio::test]
async fn a_wallet_paid_batch_from_an_eoa_designates_the_account_in_its_own_type_4_transaction() {
    let (world, uni, agent) = setup(json!({})).await;
    let from = wallet(&agent);
    world.anvil.set_balance(from, U256::from(ONE_ETH)).await;
    assert!(world.code(from).await.is_empty());
    let batch = json!({"chain": "base", "gas": "wallet", "calls": [approve(&uni, 40), swap(&uni, from, 40, "1")]});
    let (status, simulated) = post(&world.app, &agent, "calls/simulate", batch.clone()).await;
    assert_eq!(status, StatusCode::OK, "{simulated}");
    assert_eq!(simulated["decision"]["result"], "allow", "{simulated}");
    // Nothing mined until both are sent: the next transaction of the wallet is signed while the batch waits.
    world.anvil.set_automine(false).await;
    let (status, sent) = post(&world.app, &agent, "calls", batch).await;
    assert_eq!(status, StatusCode::CREATED, "{sent}");
    assert_eq!(sent["gas"], "wallet", "{sent}");
    assert_eq!(sent["nonce"], 0, "{sent}");
    // It takes the nonce after both the batch's and its authorization's: no gap, no duplicate.
    let to = fresh_address();
    let (status, next) = world
        .send(
            &agent,
            json!({"chain": "base", "to": to.to_string(), "amount": "0.001", "gas": "wallet"}),
        )
        .await;
    assert_eq!(status, StatusCode::CREATED, "{next}");
    assert_eq!(next["nonce"], 2, "{next}");
    world.anvil.mine(1).await;
    assert_eq!(
        world.anvil.nonce(from).await,
        2,
        "the batch's nonce and its authorization's"
    );
    // Anvil's pool orders a sender's transactions by nonce alone and does not see that the authorization used
    // nonce 1: the transfer at nonce 2 waits there for a nonce 1 that never comes (a real node re-reads the
    // account's nonce after each block). The same signed bytes, sent again now that nonce 2 is next, are mined.
    let next_hash: B256 = next["tx_hash"].as_str().unwrap().parse().unwrap();
    let raw = world
        .anvil
        .provider()
        .get_raw_transaction_by_hash(next_hash)
        .await
        .unwrap()
        .expect("the transfer waits in the pool");
    resend_alone(&world, from, &raw).await;
    let settled = world.settled(&agent, sent["id"].as_str().unwrap()).await;
    assert_eq!(settled["status"], "confirmed", "{settled}");
    // From the chain: one type-4 transaction from the agent to itself, carrying its own authorization of the
    // implementation at its nonce + 1; the designation in place, the batch's effects, two nonces used.
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
    assert_eq!(alloy::consensus::Typed2718::ty(&tx), 4);
    let authorizations = alloy::consensus::Transaction::authorization_list(&tx).expect("an authorization list");
    assert_eq!(authorizations.len(), 1);
    assert_eq!(authorizations[0].address, world.framework.delegator);
    assert_eq!(authorizations[0].nonce, 1);
    let signature = authorizations[0].signature().unwrap();
    let digest = authorizations[0].inner().signature_hash();
    assert_eq!(signature.recover_address_from_prehash(&digest).unwrap(), from);
    assert_eq!(
        world.code(from).await,
        [&[0xef, 0x01, 0x00][..], world.framework.delegator.as_slice()].concat()
    );
    assert_eq!(
        token_balance(&world.anvil, world.usdc, from).await,
        U256::from(60 * USDC)
    );
    assert_eq!(router_allowance(&world, &uni, from).await, U256::ZERO);
    let settled = world.settled(&agent, next["id"].as_str().unwrap()).await;
    assert_eq!(settled["status"], "confirmed", "{settled}");
    assert_eq!(world.anvil.balance(to).await, U256::from(ONE_ETH / 1000));
    assert_eq!(
        world.anvil.nonce(from).await,
        3,
        "the batch's nonce, its authorization's and the transfer's"
    );
}

#[tokio::test]
async fn a_cancelled_designating_batch_uses_both_nonces_and_runs_nothing() {
    let (world, uni, agent) = setup(json!({})).await;
    let from = wallet(&agent);
    world.anvil.set_balance(from, U256::from(ONE_ETH)).await;
    world.anvil.set_automine(false).await;
    let batch = json!({"chain": "base", "gas": "wallet", "calls": [approve(&uni, 40), swap(&uni, from, 40, "1")]});
    let (status, sent) = post(&world.app, &agent, "calls", batch).await;
    assert_eq!(status, StatusCode::CREATED, "{sent}");
    let id = sent["id"].as_str().unwrap();
    // Cancelled while it waits: a type-4 zero-value send to itself at its nonce, carrying the same authorization.
    let path = format!("transfers/{id}/cancel");
    let (status, cancelled) = post(&world.app, &agent, &path, json!({})).await;
    assert!(status.is_success(), "{cancelled}");
    world.anvil.mine(1).await;
    world.anvil.set_automine(true).await;
    let settled = world.settled(&agent, id).await;
    assert_eq!(settled["status"], "cancelled", "{settled}");
    let hash: B256 = settled["tx_hash"].as_str().unwrap().parse().unwrap();
    let tx = world
        .anvil
        .provider()
        .get_transaction_by_hash(hash)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(alloy::consensus::Typed2718::ty(&tx), 4);
    assert!(alloy::consensus::Transaction::input(&tx).is_empty());
    // From the chain: the designation landed, the batch did not run, both nonces are used.
    assert_eq!(
        world.code(from).await,
        [&[0xef, 0x01, 0x00][..], world.framework.delegator.as_slice()].concat()
    );
    assert_eq!(
        token_balance(&world.anvil, world.usdc, from).await,
        U256::from(100 * USDC)
    );
    assert_eq!(router_allowance(&world, &uni, from).await, U256::ZERO);
    assert_eq!(world.anvil.nonce(from).await, 2);
    // And the wallet's next transaction lands after them.
    let to = fresh_address();
    let (status, next) = world
        .send(
            &agent,
            json!({"chain": "base", "to": to.to_string(), "amount": "0.001", "gas": "wallet"}),
        )
        .await;
    assert_eq!(status, StatusCode::CREATED, "{next}");
    assert_eq!(next["nonce"], 2, "{next}");
    let settled = world.settled(&agent, next["id"].as_str().unwrap()).await;
    assert_eq!(settled["status"], "confirmed", "{settled}");
    assert_eq!(world.anvil.nonce(from).await, 3);
}

alloy::sol! {
    function depositTo(address account) external payable;
}

#[tokio::test]
async fn a_single_call_that_moves_the_agents_entry_point_deposit_is_refused() {
    let (world, _, agent) = setup(json!({})).await;
    let from = wallet(&agent);
    world.anvil.set_balance(from, U256::from(ONE_ETH)).await;
    // A contract that forwards its calldata and value to the EntryPoint (which no call may reach directly).
    let forwarder = fresh_address();
    let code = [
        &[0x36, 0x5f, 0x5f, 0x37, 0x5f, 0x5f, 0x36, 0x5f, 0x34, 0x73][..],
        world.framework.entry_point.as_slice(),
        &[0x5a, 0xf1, 0x50, 0x00],
    ]
    .concat();
    world.anvil.set_code(forwarder, code.into()).await;
    let deposit = depositToCall { account: from }.abi_encode();
    for gas in ["wallet", "sponsored"] {
        let call = json!({"chain": "base", "gas": gas, "to": forwarder.to_string(), "value": "0.001",
            "data": crate::helpers::uniswap::hex(deposit.clone())});
        let (status, refused) = post(&world.app, &agent, "calls", call).await;
        assert_eq!(status, StatusCode::FORBIDDEN, "{gas}: {refused}");
        assert_eq!(refused["error"]["details"]["rule"], "call_denied", "{gas}: {refused}");
        let message = refused["error"]["message"].as_str().unwrap_or_default();
        assert!(message.contains("deposit at the EntryPoint"), "{gas}: {refused}");
    }
    assert_eq!(world.anvil.balance(from).await, U256::from(ONE_ETH));
    assert_eq!(world.anvil.nonce(from).await, 0);
    assert!(world.code(from).await.is_empty(), "nothing was designated");
}

#[tokio::test]
async fn call_contract_takes_gas_on_a_single_call_over_mcp() {
    let (world, uni, agent) = setup(json!({})).await;
    let from = wallet(&agent);
    let to = fresh_address();
    let arguments = json!({"chain": "base", "gas": "sponsored", "to": uni.usdc.to_string(),
        "function": "transfer(address,uint256)", "args": [to.to_string(), (3 * USDC).to_string()]});
    let (simulated, error) = super::batches::tool(&world, &agent, "simulate_call", arguments.clone()).await;
    assert!(!error, "{simulated}");
    assert_eq!(simulated["decision"]["result"], "allow", "{simulated}");
    let (sent, error) = super::batches::tool(&world, &agent, "call_contract", arguments).await;
    assert!(!error, "{sent}");
    let settled = world.settled(&agent, sent["transfer_id"].as_str().unwrap()).await;
    assert_eq!(settled["status"], "confirmed", "{settled}");
    assert_eq!(settled["gas"], "sponsored", "{settled}");
    assert_eq!(token_balance(&world.anvil, world.usdc, to).await, U256::from(3 * USDC));
    assert_eq!(world.anvil.balance(from).await, U256::ZERO);
    assert_eq!(entry_point_nonce(&world, from).await, U256::from(1));
}

#[tokio::test]
async fn the_fill_of_a_designating_batch_that_can_no_longer_land_uses_both_its_nonces() {
    let world = super::transfers::world_with(&[("TX_DROP_AFTER_SECS", "1")]).await;
    let agent = world.agent_with_cap(10.0).await;
    let from = wallet(&agent);
    mint(&world.anvil, world.usdc, from, U256::from(10 * USDC)).await;
    super::batches::put_policy(&world, &agent, json!({"calls": {"default": "allow"}})).await;
    world.anvil.set_balance(from, U256::from(ONE_ETH)).await;
    world.anvil.set_automine(false).await;
    let (payee, away, later_to) = (fresh_address(), fresh_address(), fresh_address());

    // 1. A designating batch (a USDC transfer and 0.5 ETH) waits in the pool at nonce 0.
    let batch = json!({"chain": "base", "gas": "wallet", "calls": [
        {"to": world.usdc.to_string(), "function": "transfer(address,uint256)", "args": [payee.to_string(), USDC.to_string()]},
        {"to": away.to_string(), "value": "0.5", "data": "0x12345678"}]});
    let (status, stuck) = post(&world.app, &agent, "calls", batch).await;
    assert_eq!(status, StatusCode::CREATED, "{stuck}");
    assert_eq!(stuck["nonce"], 0, "{stuck}");
    // 2. The wallet's next transfer takes nonce 2, after the batch's authorization.
    let (status, later) = world
        .send(
            &agent,
            json!({"chain": "base", "to": later_to.to_string(), "amount": "0.00001", "gas": "wallet"}),
        )
        .await;
    assert_eq!(status, StatusCode::CREATED, "{later}");
    assert_eq!(later["nonce"], 2, "{later}");
    let later_hash: B256 = later["tx_hash"].as_str().unwrap().parse().unwrap();
    let raw = world
        .anvil
        .provider()
        .get_raw_transaction_by_hash(later_hash)
        .await
        .unwrap()
        .expect("the transfer waits in the pool");
    // 3. The node forgets both, and the wallet can no longer pay the batch's gas (its balance fell), though it can
    //    pay a fill of its nonces (61,000 gas) and the transfer: sent again, the batch is refused, and the watcher
    //    fills its nonce with its authorization.
    let stuck_hash: B256 = stuck["tx_hash"].as_str().unwrap().parse().unwrap();
    let batch_needs = pooled_max_fee(&world, stuck_hash).await;
    let later_fee = pooled_max_fee(&world, later_hash).await / U256::from(21_000);
    let enough = U256::from(10_000_000_000_000u64) + later_fee * U256::from(21_000 + 61_000 + 10_000);
    assert!(enough < batch_needs, "{enough} < {batch_needs}");
    world.anvil.set_balance(from, enough).await;
    empty_pool(&world, from).await;
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    while world.anvil.mined_nonce(from).await < 2 {
        assert!(
            std::time::Instant::now() < deadline,
            "the batch's nonces were never filled"
        );
        world.anvil.mine(1).await;
        tokio::time::sleep(std::time::Duration::from_millis(200)).await;
    }
    // The fill carried the batch's authorization: both nonces used, the account designated, nothing moved.
    assert_eq!(world.anvil.mined_nonce(from).await, 2);
    assert_eq!(
        world.code(from).await,
        [&[0xef, 0x01, 0x00][..], world.framework.delegator.as_slice()].concat()
    );
    assert_eq!(token_balance(&world.anvil, world.usdc, payee).await, U256::ZERO);
    assert_eq!(world.anvil.balance(away).await, U256::ZERO);
    // 4. The transfer at nonce 2 lands (anvil's pool waits for a nonce 1 no transaction provides: sent again).
    resend_alone(&world, from, &raw).await;
    let settled = world.settled(&agent, later["id"].as_str().unwrap()).await;
    assert_eq!(settled["status"], "confirmed", "{settled}");
    assert_eq!(world.anvil.nonce(from).await, 3);
    // The store agrees: the batch dropped, its fill (a type-4 self-send at nonce 0) confirmed.
    let txs = world
        .app
        .settle_until(async || {
            let txs = crate::helpers::chain::transactions(&world.app, &agent).await;
            match txs.len() == 3
                && txs
                    .iter()
                    .all(|tx| tx["status"] != "pending" && tx["status"] != "signed")
            {
                true => Ok(txs),
                false => Err(format!("not all settled: {txs:#?}")),
            }
        })
        .await;
    let of = |id: &serde_json::Value| txs.iter().find(|tx| tx["id"] == *id).unwrap().clone();
    assert_eq!(of(&stuck["id"])["status"], "dropped", "{txs:#?}");
    let fill = txs
        .iter()
        .find(|tx| tx["id"] != stuck["id"] && tx["id"] != later["id"])
        .expect("the fill is stored");
    assert_eq!(fill["nonce"], 0, "{fill}");
    assert_eq!(fill["status"], "confirmed", "{fill}");
    let fill_hash: B256 = fill["tx_hash"].as_str().unwrap().parse().unwrap();
    let tx = world
        .anvil
        .provider()
        .get_transaction_by_hash(fill_hash)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(alloy::consensus::Typed2718::ty(&tx), 4);
    assert_eq!(alloy::consensus::Transaction::to(&tx), Some(from));
}

/// What the pooled transaction `hash` may cost in gas: its gas limit times its `maxFeePerGas`.
async fn pooled_max_fee(world: &World, hash: B256) -> U256 {
    let tx = world
        .anvil
        .provider()
        .get_transaction_by_hash(hash)
        .await
        .unwrap()
        .expect("pooled");
    let fee = alloy::consensus::Transaction::max_fee_per_gas(&tx);
    U256::from(alloy::consensus::Transaction::gas_limit(&tx)) * U256::from(fee)
}

#[tokio::test]
async fn a_held_wallet_paid_batch_from_an_eoa_designates_the_account_once_approved() {
    let (world, uni, agent) = setup(json!({})).await;
    let from = wallet(&agent);
    world.anvil.set_balance(from, U256::from(ONE_ETH)).await;
    let rule = json!({"calls": {"default": "allow", "rules": [
        {"chain": "*", "to": uni.router.to_string(), "function": "*", "action": "approve"}]}});
    super::batches::put_policy(&world, &agent, rule).await;
    let batch = json!({"chain": "base", "gas": "wallet", "calls": [approve(&uni, 25), swap(&uni, from, 25, "1")]});
    let (status, held) = post(&world.app, &agent, "calls", batch).await;
    assert_eq!(status, StatusCode::CREATED, "{held}");
    assert_eq!(held["status"], "awaiting_approval", "{held}");
    assert!(world.code(from).await.is_empty(), "nothing was signed");
    assert_eq!(world.anvil.nonce(from).await, 0);
    let id = held["id"].as_str().unwrap();
    let path = format!("/api/agents/{}/transfers/{id}/approve", agent.id);
    let response = world
        .app
        .send(
            world
                .app
                .build(reqwest::Method::POST, &path, None, None)
                .bearer_auth(super::transfers::ADMIN),
        )
        .await;
    assert!(response.status.is_success(), "{}", response.body);
    let settled = world.settled(&agent, id).await;
    assert_eq!(settled["status"], "confirmed", "{settled}");
    assert_eq!(settled["gas"], "wallet", "{settled}");
    assert_eq!(
        world.code(from).await,
        [&[0xef, 0x01, 0x00][..], world.framework.delegator.as_slice()].concat()
    );
    assert_eq!(
        token_balance(&world.anvil, world.usdc, from).await,
        U256::from(75 * USDC)
    );
    assert_eq!(router_allowance(&world, &uni, from).await, U256::ZERO);
    assert_eq!(world.anvil.nonce(from).await, 2);
}
