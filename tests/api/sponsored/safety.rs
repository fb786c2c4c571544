//! What §22's safety rules come to on chain: a delegated spend needs no ETH; an address that designates code agentd
//! did not choose gets nothing sponsored; two instances on one database never hold more than a sponsorship's
//! `per_day`. Every assertion reads the chain (balances, code, the paymaster's deposit).

use std::time::Duration;

use agentd::domain::delegation::Kind;
use alloy::primitives::{Address, U256};
use alloy::signers::local::PrivateKeySigner;
use reqwest::{Method, StatusCode};
use serde_json::json;

use super::transfers::{ADMIN, USDC, wei_of, world};
use crate::helpers::chain::{BASE_CHAIN_ID, ONE_ETH, fresh_address, wallet, wei};
use crate::helpers::delegation_framework::{chain_now, delegation_json, erc20_period_terms, upgrade_to_delegator};
use crate::helpers::solidity::{mint, token_balance};

#[tokio::test]
async fn a_delegated_spend_moves_the_owners_usdc_and_the_agent_never_holds_a_wei() {
    let world = world().await;
    world.fund_sponsor().await;
    let owner = PrivateKeySigner::random();
    world.anvil.set_balance(owner.address(), wei(ONE_ETH)).await;
    upgrade_to_delegator(&world.anvil, &owner, world.framework.delegator, BASE_CHAIN_ID).await;
    mint(&world.anvil, world.usdc, owner.address(), U256::from(100 * USDC)).await;
    let agent = world.agent().await;
    let from = wallet(&agent);
    let start = chain_now(&world.anvil).await - 3600;
    let terms = erc20_period_terms(world.usdc, U256::from(5 * USDC), 86_400, start);
    let delegation = world
        .framework
        .grant(&owner, from, &[(Kind::Erc20PeriodTransfer, terms)], 7);
    let path = format!("/api/agents/{}/delegations", agent.id);
    let body = json!({"chain": "base", "delegation": delegation_json(&delegation)});
    let registered = world
        .app
        .send(world.app.build(Method::POST, &path, Some(&agent.token), Some(body)))
        .await;
    assert_eq!(registered.status, StatusCode::CREATED, "{}", registered.body);
    let id = registered.body["id"].as_str().unwrap().to_string();
    let (status, _) = world.sponsorship(&agent, "0.05").await;
    assert_eq!(status, StatusCode::OK);

    let to = fresh_address();
    let (status, sent) = world
        .send(
            &agent,
            json!({"chain": "base", "to": to.to_string(), "amount": "2", "asset": "USDC", "delegation": id}),
        )
        .await;
    assert_eq!(status, StatusCode::CREATED, "{sent}");
    assert_eq!(sent["gas"], "sponsored", "{sent}");
    let settled = world.settled(&agent, sent["id"].as_str().unwrap()).await;
    assert_eq!(settled["status"], "confirmed", "{settled}");
    // From the chain: the owner's USDC moved, the agent never held a wei.
    assert_eq!(token_balance(&world.anvil, world.usdc, to).await, U256::from(2 * USDC));
    assert_eq!(
        token_balance(&world.anvil, world.usdc, owner.address()).await,
        U256::from(98 * USDC)
    );
    assert_eq!(world.anvil.balance(from).await, U256::ZERO);
}

#[tokio::test]
async fn an_address_that_designates_foreign_code_gets_nothing_sponsored_and_is_not_funded() {
    let world = world().await;
    world.fund_sponsor().await;
    let agent = world.agent().await;
    let from = wallet(&agent);
    mint(&world.anvil, world.usdc, from, U256::from(10 * USDC)).await;
    let (status, _) = world.sponsorship(&agent, "0.05").await;
    assert_eq!(status, StatusCode::OK);
    // The address designates code agentd did not choose (a sweeper, say).
    let sweeper = fresh_address();
    let designation = [&[0xef, 0x01, 0x00][..], sweeper.as_slice()].concat();
    world.anvil.set_code(from, designation.clone().into()).await;
    let deposit = world.paymaster.deposit_balance(&world.anvil).await;

    let to = fresh_address();
    let (status, body) = world
        .send(
            &agent,
            json!({"chain": "base", "to": to.to_string(), "amount": "1", "asset": "USDC"}),
        )
        .await;
    assert_eq!(status, StatusCode::CONFLICT, "{body}");
    assert_eq!(body["error"]["code"], "account_foreign", "{body}");
    let fund = world
        .app
        .send(world.app.build(
            Method::POST,
            &format!("/api/agents/{}/fund", agent.id),
            Some(&agent.token),
            Some(json!({"chain": "base"})),
        ))
        .await;
    assert_eq!(fund.status, StatusCode::CONFLICT, "{}", fund.body);
    assert_eq!(fund.body["error"]["code"], "account_foreign");
    let balances = world
        .app
        .send(world.app.build(
            Method::GET,
            &format!("/api/agents/{}/balances", agent.id),
            Some(&agent.token),
            None,
        ))
        .await;
    assert_eq!(
        balances.body["balances"]["base"]["account"], "foreign",
        "{}",
        balances.body
    );
    tokio::time::sleep(Duration::from_millis(700)).await;
    // From the chain: nothing moved, the designation is the stranger's still, the deposit untouched.
    assert_eq!(token_balance(&world.anvil, world.usdc, to).await, U256::ZERO);
    assert_eq!(world.code(from).await, designation);
    assert_eq!(world.paymaster.deposit_balance(&world.anvil).await, deposit);
}

#[tokio::test]
async fn two_instances_on_one_database_never_hold_more_than_per_day() {
    let world = world().await;
    world.fund_sponsor().await;
    let mut vars = world.framework.vars();
    vars.push(("ENTRY_POINT_BASE".into(), world.framework.entry_point.to_string()));
    vars.push((
        "ACCOUNT_IMPLEMENTATION_BASE".into(),
        world.framework.delegator.to_string(),
    ));
    vars.push(("PAYMASTER_BASE".into(), world.paymaster.address.to_string()));
    vars.push(("ADMIN_TOKEN".into(), ADMIN.into()));
    vars.push(("DATABASE_URL".into(), world.app.db_url.clone()));
    vars.push(("RPC_URL_BASE".into(), world.anvil.url().to_string()));
    vars.push(("WATCHER_INTERVAL_MS".into(), "50".into()));
    let extra: Vec<(&str, &str)> = vars.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
    let second = crate::helpers::spawn_app_with(&extra).await;
    let agent = world.agent().await;
    let from = wallet(&agent);
    mint(&world.anvil, world.usdc, from, U256::from(100 * USDC)).await;
    // Room for a few operations' maximum cost, not for twelve.
    let per_day = "0.004";
    let (status, body) = world.sponsorship(&agent, per_day).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    let deposit = world.paymaster.deposit_balance(&world.anvil).await;
    let to = fresh_address();
    // Nothing is mined while they arrive: each operation holds its maximum cost, as it does until its event is
    // mined (a mined one counts its actual cost, far less, and a slow run would let all twelve through in turn).
    world.anvil.set_automine(false).await;
    let sends = (0..12).map(|n| {
        let app = if n % 2 == 0 { &world.app } else { &second };
        let path = format!("/api/agents/{}/transfers", agent.id);
        let body = json!({"chain": "base", "to": to.to_string(), "amount": "1", "asset": "USDC"});
        let request = app.build(Method::POST, &path, Some(&agent.token), Some(body));
        async move { app.send(request).await }
    });
    let answers = futures::future::join_all(sends).await;
    let sent: Vec<_> = answers.iter().filter(|a| a.status == StatusCode::CREATED).collect();
    for refused in answers.iter().filter(|a| a.status != StatusCode::CREATED) {
        assert_eq!(refused.status, StatusCode::FORBIDDEN, "{}", refused.body);
        assert_eq!(
            refused.body["error"]["details"]["rule"], "sponsorship_limit",
            "{}",
            refused.body
        );
    }
    assert!(!sent.is_empty() && sent.len() < 12, "{} sent", sent.len());
    world.anvil.set_automine(true).await;
    world.anvil.mine(1).await;
    for answer in &sent {
        let settled = world.settled(&agent, answer.body["id"].as_str().unwrap()).await;
        assert_eq!(settled["status"], "confirmed", "{settled}");
    }
    // From the chain: what the paymaster paid is within the day's budget, and one USDC moved per answer.
    let paid = deposit - world.paymaster.deposit_balance(&world.anvil).await;
    assert!(paid <= wei_of(per_day, 18), "paid {paid}");
    assert_eq!(
        token_balance(&world.anvil, world.usdc, to).await,
        U256::from(sent.len() as u64 * USDC)
    );
    let _unused: Address = from;
}

/// What the EntryPoint answers to `handleOps(ops, from)` from `from` (`eth_call`): `Err` with its `FailedOp` reason.
async fn handle_ops_as(
    anvil: &crate::anvil::Anvil,
    entry_point: Address,
    from: Address,
    ops: &[agentd::chain::userop::PackedUserOperation],
) -> Result<(), String> {
    use alloy::providers::Provider;
    use alloy::rpc::types::TransactionRequest;
    let request = TransactionRequest::default()
        .from(from)
        .to(entry_point)
        .gas_limit(2_000_000)
        .input(agentd::chain::userop::handle_ops_call(ops, from).into());
    match anvil.provider().call(request).await {
        Ok(_) => Ok(()),
        Err(e) => {
            let revert = e.as_error_resp().and_then(|p| p.as_revert_data()).unwrap_or_default();
            Err(agentd::chain::userop::failed_op(&revert).map_or_else(|| e.to_string(), |(_, reason, _)| reason))
        }
    }
}

#[tokio::test]
async fn a_thief_with_the_exported_key_gets_nothing_sponsored() {
    use agentd::chain::userop::{self, PackedUserOperation, PaymasterApproval};
    use alloy::primitives::Bytes;
    use alloy::signers::SignerSync;
    let world = world().await;
    world.fund_sponsor().await;
    let agent = world.agent().await;
    let from = wallet(&agent);
    mint(&world.anvil, world.usdc, from, U256::from(50 * USDC)).await;
    let (status, _) = world.sponsorship(&agent, "0.05").await;
    assert_eq!(status, StatusCode::OK);
    // One operation agentd decided: the account is designated from then on.
    let (status, sent) = world
        .send(
            &agent,
            json!({"chain": "base", "to": fresh_address().to_string(), "amount": "1", "asset": "USDC"}),
        )
        .await;
    assert_eq!(status, StatusCode::CREATED, "{sent}");
    assert_eq!(
        world.settled(&agent, sent["id"].as_str().unwrap()).await["status"],
        "confirmed"
    );
    let exported = world
        .app
        .send(
            world
                .app
                .build(
                    Method::POST,
                    &format!("/api/agents/{}/export-key", agent.id),
                    Some(&agent.token),
                    Some(json!({"chain": "base", "confirm": true})),
                )
                .bearer_auth(ADMIN),
        )
        .await;
    assert_eq!(exported.status, StatusCode::OK, "{}", exported.body);
    let key = crate::helpers::parse_private_key(exported.body["private_key"].as_str().unwrap());
    let thief = PrivateKeySigner::random();
    world.anvil.set_balance(thief.address(), wei(ONE_ETH)).await;
    let deposit = world.paymaster.deposit_balance(&world.anvil).await;

    // The thief's own operation, signed by the agent's key, naming the operator's paymaster with an approval the
    // sponsor never gave (signed by the thief), sent in a bundle of the thief's own.
    let sweep = agentd::domain::erc20::transfer_calldata(thief.address(), U256::from(49 * USDC));
    let approval = PaymasterApproval {
        paymaster: world.paymaster.address,
        verification_gas_limit: 100_000,
        valid_until: crate::helpers::delegation_framework::chain_now(&world.anvil).await + 600,
        valid_after: 0,
    };
    let nonce = {
        let out = crate::helpers::solidity::read(
            &world.anvil,
            world.framework.entry_point,
            userop::get_nonce_call(from, Default::default()),
        )
        .await;
        userop::uint_answer(&out).unwrap()
    };
    let mut op = PackedUserOperation {
        sender: from,
        nonce,
        initCode: Bytes::new(),
        callData: userop::execute_single(world.usdc, U256::ZERO, &sweep),
        accountGasLimits: userop::account_gas_limits(150_000, 150_000),
        preVerificationGas: U256::from(50_000),
        gasFees: userop::gas_fees(1_000_000_000, 3_000_000_000),
        paymasterAndData: userop::unsigned_paymaster_and_data(&approval).unwrap(),
        signature: Bytes::new(),
    };
    let forged = thief
        .sign_hash_sync(&userop::paymaster_digest(&op, BASE_CHAIN_ID).unwrap())
        .unwrap();
    userop::attach_paymaster_signature(&mut op, &forged).unwrap();
    let digest = userop::account_digest(&op, world.framework.entry_point, BASE_CHAIN_ID);
    userop::attach_account_signature(&mut op, &key.sign_hash_sync(&digest).unwrap());
    let refused = handle_ops_as(
        &world.anvil,
        world.framework.entry_point,
        thief.address(),
        std::slice::from_ref(&op),
    )
    .await;
    assert!(refused.is_err(), "the EntryPoint refuses the thief's bundle");
    // Without the paymaster, the account itself must pay: it holds no ETH.
    op.paymasterAndData = Bytes::new();
    let digest = userop::account_digest(&op, world.framework.entry_point, BASE_CHAIN_ID);
    userop::attach_account_signature(&mut op, &key.sign_hash_sync(&digest).unwrap());
    let unpaid = handle_ops_as(
        &world.anvil,
        world.framework.entry_point,
        thief.address(),
        std::slice::from_ref(&op),
    )
    .await;
    assert!(unpaid.is_err(), "an operation nobody pays for is refused");
    // From the chain: the paymaster's deposit and the agent's USDC are untouched by the thief.
    assert_eq!(world.paymaster.deposit_balance(&world.anvil).await, deposit);
    assert_eq!(
        token_balance(&world.anvil, world.usdc, from).await,
        U256::from(49 * USDC)
    );
    assert_eq!(
        token_balance(&world.anvil, world.usdc, thief.address()).await,
        U256::ZERO
    );
}

#[tokio::test]
async fn sponsor_unfunded_is_retryable_under_the_same_idempotency_key_once_the_operator_funds_it() {
    let world = world().await;
    let agent = world.agent().await;
    let from = wallet(&agent);
    mint(&world.anvil, world.usdc, from, U256::from(10 * USDC)).await;
    let (status, _) = world.sponsorship(&agent, "0.05").await;
    assert_eq!(status, StatusCode::OK);
    let to = fresh_address();
    let path = format!("/api/agents/{}/transfers", agent.id);
    let body = json!({"chain": "base", "to": to.to_string(), "amount": "1", "asset": "USDC"});
    let send = || {
        world
            .app
            .build(Method::POST, &path, Some(&agent.token), Some(body.clone()))
            .header("Idempotency-Key", "sponsor-unfunded-1")
    };
    // The paymaster neither trusts the sponsor nor holds a deposit yet: nothing is signed, and it may be retried.
    let refused = world.app.send(send()).await;
    assert_eq!(refused.status, StatusCode::SERVICE_UNAVAILABLE, "{}", refused.body);
    assert_eq!(refused.body["error"]["code"], "sponsor_unfunded", "{}", refused.body);
    assert!(world.code(from).await.is_empty(), "nothing was designated");
    world.fund_sponsor().await;
    let sent = world.app.send(send()).await;
    assert_eq!(sent.status, StatusCode::CREATED, "{}", sent.body);
    let settled = world.settled(&agent, sent.body["id"].as_str().unwrap()).await;
    assert_eq!(settled["status"], "confirmed", "{settled}");
    assert_eq!(token_balance(&world.anvil, world.usdc, to).await, U256::from(USDC));
}
