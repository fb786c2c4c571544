//! The bundler's rules (§22 "Bundles") against the real EntryPoint v0.7, `EIP7702StatelessDeleGator` and Pimlico's
//! `SingletonPaymaster` on anvil: a stuck bundle replaced at the sponsor's nonce with higher fees, an operation
//! that fails the bundle's simulation left out while the others land, and an agent whose key was exported carried
//! in bundles of its own. What is asserted is what the chain shows: the bundles' transactions, their calldata,
//! the sponsor's nonce, the tokens moved.

use std::time::Duration;

use agentd::chain::userop::IEntryPoint;
use alloy::consensus::Transaction as _;
use alloy::primitives::{Address, B256, U256};
use alloy::providers::Provider;
use alloy::sol_types::SolCall;
use reqwest::{Method, StatusCode};
use serde_json::{Value, json};

use super::transfers::{ADMIN, USDC, World, wei_of, world};
use crate::helpers::CreatedAgent;
use crate::helpers::chain::{fresh_address, wallet};
use crate::helpers::solidity::{mint, token_balance};

const GWEI: u128 = 1_000_000_000;

/// The record of transfer `id` as it stands.
async fn record(world: &World, agent: &CreatedAgent, id: &str) -> Value {
    let path = format!("/api/agents/{}/transfers/{id}", agent.id);
    world
        .app
        .send(world.app.build(Method::GET, &path, Some(&agent.token), None))
        .await
        .body
}

/// The bundle carrying transfer `id` once one is signed other than `not` (waits up to 10 s).
async fn bundle_hash(world: &World, agent: &CreatedAgent, id: &str, not: Option<&str>) -> String {
    for _ in 0..100 {
        let body = record(world, agent, id).await;
        if let Some(hash) = body["sponsorship"]["bundle_hash"].as_str()
            && Some(hash) != not
        {
            return hash.to_string();
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    panic!("transfer {id} got no bundle other than {not:?}");
}

/// `anvil_setNextBlockBaseFeePerGas`.
async fn next_base_fee(world: &World, wei: u128) {
    let _: Value = world
        .anvil
        .provider()
        .raw_request("anvil_setNextBlockBaseFeePerGas".into(), (U256::from(wei),))
        .await
        .expect("anvil_setNextBlockBaseFeePerGas");
}

/// The transaction `hash` as the node holds it (a bundle is recorded before it is broadcast: waits up to 5 s).
async fn transaction(world: &World, hash: &str) -> alloy::rpc::types::Transaction {
    let hash: B256 = hash.parse().unwrap();
    for _ in 0..100 {
        if let Some(tx) = world.anvil.provider().get_transaction_by_hash(hash).await.unwrap() {
            return tx;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!("the node never knew {hash}");
}

/// The senders of the operations a mined `handleOps` transaction carried, read from its calldata.
async fn carried(world: &World, hash: &str) -> Vec<Address> {
    let tx = transaction(world, hash).await;
    assert_eq!(tx.inner.signer(), world.sponsor, "the sponsor sent it");
    let call = IEntryPoint::handleOpsCall::abi_decode(tx.inner.input()).expect("a handleOps call");
    call.ops.iter().map(|op| op.sender).collect()
}

/// A funded sponsor, and `n` agents holding 100 USDC with a sponsorship, each designated by a first transfer.
async fn smart_agents(world: &World, n: usize) -> Vec<CreatedAgent> {
    designated(world, n).await.into_iter().map(|(agent, _)| agent).collect()
}

/// `smart_agents`, with the id of each one's first transfer.
async fn designated(world: &World, n: usize) -> Vec<(CreatedAgent, String)> {
    world.fund_sponsor().await;
    let mut agents = Vec::new();
    for _ in 0..n {
        let agent = world.agent().await;
        mint(&world.anvil, world.usdc, wallet(&agent), U256::from(100 * USDC)).await;
        let (status, body) = world.sponsorship(&agent, "0.5").await;
        assert_eq!(status, StatusCode::OK, "{body}");
        let id = send_usdc(world, &agent, fresh_address(), "1").await;
        assert_eq!(world.settled(&agent, &id).await["status"], "confirmed");
        agents.push((agent, id));
    }
    agents
}

/// A sponsored USDC transfer, answered 201: its id.
async fn send_usdc(world: &World, agent: &CreatedAgent, to: Address, amount: &str) -> String {
    let body = json!({"chain": "base", "to": to.to_string(), "amount": amount, "asset": "USDC"});
    let (status, sent) = world.send(agent, body).await;
    assert_eq!(status, StatusCode::CREATED, "{sent}");
    assert_eq!(sent["gas"], "sponsored", "{sent}");
    sent["id"].as_str().unwrap().to_string()
}

/// Holds the chain's bundler lock (no round runs) until the guard is dropped.
async fn hold_bundler(world: &World) -> Box<dyn agentd::store::SendGuard> {
    for _ in 0..200 {
        if let Some(guard) = world.app.state.store.try_lock_watcher("bundler:base").await.unwrap() {
            return guard;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    panic!("the bundler lock was never free");
}

#[tokio::test]
async fn a_stuck_bundle_is_replaced_at_the_sponsors_nonce_with_higher_fees_and_its_operation_lands_once() {
    let world = world().await;
    let agent = smart_agents(&world, 1).await.remove(0);
    // The operation is signed at a base fee of 50 gwei (its maxFeePerGas twice that plus the tip); the bundle's
    // first attempt leaves room below it.
    next_base_fee(&world, 50 * GWEI).await;
    world.anvil.mine(1).await;
    world.anvil.set_automine(false).await;
    // The fees agentd read before are cached for 2 s.
    tokio::time::sleep(Duration::from_millis(2_100)).await;
    let to = fresh_address();
    let id = send_usdc(&world, &agent, to, "3").await;
    let first = bundle_hash(&world, &agent, &id, None).await;
    let first_tx = transaction(&world, &first).await;
    let nonce = first_tx.inner.nonce();
    let first_fee = first_tx.inner.max_fee_per_gas();
    // The base fee jumps past what the first attempt pays: the block leaves it out.
    next_base_fee(&world, first_fee + 1).await;
    world.anvil.mine(1).await;
    let receipt = world
        .anvil
        .provider()
        .get_transaction_receipt(first.parse().unwrap())
        .await
        .unwrap();
    assert!(receipt.is_none(), "the first attempt is stuck");
    assert_eq!(record(&world, &agent, &id).await["status"], "pending");

    // Pending past STUCK_AFTER_SECS: replaced at the same nonce with both fees raised.
    world.app.clock.advance(Duration::from_secs(121));
    let second = bundle_hash(&world, &agent, &id, Some(&first)).await;
    let second_tx = transaction(&world, &second).await;
    assert_eq!(second_tx.inner.nonce(), nonce);
    assert!(
        second_tx.inner.max_fee_per_gas() >= first_fee + first_fee / 10,
        "{second_tx:?}"
    );
    assert!(
        second_tx.inner.max_priority_fee_per_gas().unwrap()
            >= first_tx.inner.max_priority_fee_per_gas().unwrap() * 11 / 10
    );
    // Never above the operation's own maxFeePerGas (the EntryPoint pays the sponsor back at that price at most).
    let call = IEntryPoint::handleOpsCall::abi_decode(second_tx.inner.input()).unwrap();
    let (_, op_max_fee) = agentd::chain::userop::unpack_pair(call.ops[0].gasFees);
    assert!(second_tx.inner.max_fee_per_gas() <= op_max_fee);
    // The node forgets the replacement (as after a crash or a restart): the recorded replacement is simulated and
    // sent again as signed, not the first attempt.
    world.anvil.drop_transaction(second.parse().unwrap()).await;
    assert_eq!(transaction(&world, &second).await.inner.nonce(), nonce);

    world.anvil.mine(1).await;
    world.anvil.set_automine(true).await;
    let settled = world.settled(&agent, &id).await;
    assert_eq!(settled["status"], "confirmed", "{settled}");
    assert_eq!(settled["tx_hash"], second.as_str(), "{settled}");
    // From the chain: one bundle mined at the sponsor's nonce, the replacement; the USDC moved once.
    let mined = world.anvil.receipt(second.parse().unwrap()).await;
    assert!(mined.status());
    let receipt = world
        .anvil
        .provider()
        .get_transaction_receipt(first.parse().unwrap())
        .await
        .unwrap();
    assert!(receipt.is_none(), "the first attempt was never mined");
    assert_eq!(world.anvil.nonce(world.sponsor).await, nonce + 1);
    assert_eq!(token_balance(&world.anvil, world.usdc, to).await, U256::from(3 * USDC));
    let metrics = world
        .app
        .send(world.app.build(Method::GET, "/metrics", None, None))
        .await;
    assert!(
        metrics.text.contains("agentd_bundles_replaced_total{chain=\"base\"} 1"),
        "{}",
        metrics.text
    );
}

#[tokio::test]
async fn an_operation_that_fails_the_bundles_simulation_is_left_out_and_the_others_land_in_that_round() {
    let world = world().await;
    let agents = smart_agents(&world, 2).await;
    let (broken, fine) = (&agents[0], &agents[1]);
    let (to_broken, to_fine) = (fresh_address(), fresh_address());
    // Both operations wait together: the bundler's round cannot run while the test holds its lock.
    let guard = hold_bundler(&world).await;
    let broken_id = send_usdc(&world, broken, to_broken, "2").await;
    let fine_id = send_usdc(&world, fine, to_fine, "4").await;
    // Once signed, one account's validation can no longer pass: its address now designates a token contract,
    // whose fallback reverts the EntryPoint's validateUserOp.
    let foreign = [&[0xef, 0x01, 0x00][..], world.usdc.as_slice()].concat();
    world.anvil.set_code(wallet(broken), foreign.into()).await;
    drop(guard);

    let settled = world.settled(fine, &fine_id).await;
    assert_eq!(settled["status"], "confirmed", "{settled}");
    let hash = settled["tx_hash"].as_str().unwrap();
    assert_eq!(
        carried(&world, hash).await,
        vec![wallet(fine)],
        "the failing operation was left out"
    );
    assert!(world.anvil.receipt(hash.parse().unwrap()).await.status());
    assert_eq!(
        token_balance(&world.anvil, world.usdc, to_fine).await,
        U256::from(4 * USDC)
    );
    // The other is answered already: it stays pending (its nonce unused, its approval still valid), nothing moved.
    let left = record(&world, broken, &broken_id).await;
    assert_eq!(left["status"], "pending", "{left}");
    assert!(left["sponsorship"]["bundle_hash"].is_null(), "{left}");
    assert_eq!(token_balance(&world.anvil, world.usdc, to_broken).await, U256::ZERO);
}

#[tokio::test]
async fn an_agent_whose_key_was_exported_has_its_operations_in_bundles_of_their_own() {
    let world = world().await;
    let agents = smart_agents(&world, 3).await;
    let (exported, others) = (&agents[0], &agents[1..]);
    let answer = world
        .app
        .send(
            world
                .app
                .build(
                    Method::POST,
                    &format!("/api/agents/{}/export-key", exported.id),
                    Some(&exported.token),
                    Some(json!({"chain": "base", "confirm": true})),
                )
                .bearer_auth(ADMIN),
        )
        .await;
    assert_eq!(answer.status, StatusCode::OK, "{}", answer.body);
    // Three operations wait together.
    let guard = hold_bundler(&world).await;
    let mut sent = Vec::new();
    for agent in &agents {
        sent.push(send_usdc(&world, agent, fresh_address(), "1").await);
    }
    drop(guard);

    let mut hashes = Vec::new();
    for (agent, id) in agents.iter().zip(&sent) {
        let settled = world.settled(agent, id).await;
        assert_eq!(settled["status"], "confirmed", "{settled}");
        hashes.push(settled["tx_hash"].as_str().unwrap().to_string());
    }
    // From the chain: the exported agent's operation alone in its bundle, the two others together in another.
    assert_eq!(carried(&world, &hashes[0]).await, vec![wallet(exported)]);
    assert_eq!(hashes[1], hashes[2]);
    let mut together = carried(&world, &hashes[1]).await;
    together.sort();
    let mut expected: Vec<Address> = others.iter().map(wallet).collect();
    expected.sort();
    assert_eq!(together, expected);
}

/// What the sponsorship of `agent` on base counts now.
async fn counted(world: &World, agent: &CreatedAgent) -> U256 {
    let path = format!("/api/agents/{}/sponsorship", agent.id);
    let listed = world
        .app
        .send(world.app.build(Method::GET, &path, Some(&agent.token), None))
        .await;
    let counted = listed.body["sponsorships"][0]["counted"].as_str().unwrap().to_string();
    wei_of(&counted, 18)
}

#[tokio::test]
async fn an_agent_whose_operation_failed_validation_on_chain_pays_that_bundle_and_has_bundles_of_its_own() {
    let world = world().await;
    let mut agents = designated(&world, 2).await;
    let (other, _) = agents.pop().unwrap();
    let (failing, designating) = agents.pop().unwrap();
    let account = wallet(&failing);
    let designation = world.code(account).await;
    world.anvil.set_automine(false).await;
    let first = send_usdc(&world, &failing, fresh_address(), "2").await;
    let reverted = bundle_hash(&world, &failing, &first, None).await;
    transaction(&world, &reverted).await;
    // Between the bundle's simulation and its block, the account stops validating: the bundle reverts on chain.
    let foreign = [&[0xef, 0x01, 0x00][..], world.usdc.as_slice()].concat();
    world.anvil.set_code(account, foreign.into()).await;
    world.anvil.mine(1).await;
    let receipt = world.anvil.receipt(reverted.parse().unwrap()).await;
    assert!(!receipt.status(), "the bundle reverted on chain");
    let bundle_cost = U256::from(receipt.gas_used) * U256::from(receipt.effective_gas_price);
    let mut released = false;
    for _ in 0..100 {
        if record(&world, &failing, &first).await["sponsorship"]["bundle_hash"].is_null() {
            released = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(released, "the operation waits for another bundle");
    world.anvil.set_automine(true).await;

    // The account validates again; its operation and another agent's wait together.
    let guard = hold_bundler(&world).await;
    world.anvil.set_code(account, designation.into()).await;
    let second = send_usdc(&world, &other, fresh_address(), "3").await;
    drop(guard);
    let landed = world.settled(&failing, &first).await;
    assert_eq!(landed["status"], "confirmed", "{landed}");
    let beside = world.settled(&other, &second).await;
    assert_eq!(beside["status"], "confirmed", "{beside}");
    let hash = landed["tx_hash"].as_str().unwrap();
    assert_ne!(hash, reverted);
    // From the chain: each in a bundle of its own.
    assert_eq!(carried(&world, hash).await, vec![account]);
    assert_eq!(
        carried(&world, beside["tx_hash"].as_str().unwrap()).await,
        vec![wallet(&other)]
    );
    // Its sponsorship counts the reverted bundle's whole gas on top of its operations' own.
    let mut own = bundle_cost;
    for id in [&designating, &first] {
        let settled = world.settled(&failing, id).await;
        own += wei_of(settled["sponsorship"]["gas_cost"].as_str().unwrap(), 18);
    }
    assert_eq!(counted(&world, &failing).await, own);
}

#[tokio::test]
async fn a_waiting_operation_whose_nonce_another_operation_used_is_dropped() {
    use agentd::chain::userop;
    use alloy::primitives::Bytes;
    use alloy::rpc::types::TransactionRequest;
    use alloy::signers::SignerSync;
    let world = world().await;
    let agent = smart_agents(&world, 1).await.remove(0);
    let account = wallet(&agent);
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
    // agentd signs an operation; before any bundle carries it, the key's holder spends that EntryPoint nonce with an
    // operation of its own the account pays for.
    let guard = hold_bundler(&world).await;
    let to = fresh_address();
    let id = send_usdc(&world, &agent, to, "2").await;
    let entry_point = world.framework.entry_point;
    let out = crate::helpers::solidity::read(
        &world.anvil,
        entry_point,
        userop::get_nonce_call(account, Default::default()),
    )
    .await;
    let nonce = userop::uint_answer(&out).unwrap();
    let taker = fresh_address();
    let transfer = agentd::domain::erc20::transfer_calldata(taker, U256::from(USDC));
    let mut op = agentd::chain::userop::PackedUserOperation {
        sender: account,
        nonce,
        initCode: Bytes::new(),
        callData: userop::execute_single(world.usdc, U256::ZERO, &transfer),
        accountGasLimits: userop::account_gas_limits(150_000, 150_000),
        preVerificationGas: U256::from(50_000),
        gasFees: userop::gas_fees(GWEI, 3 * GWEI),
        paymasterAndData: Bytes::new(),
        signature: Bytes::new(),
    };
    let digest = userop::account_digest(&op, entry_point, crate::helpers::chain::BASE_CHAIN_ID);
    userop::attach_account_signature(&mut op, &key.sign_hash_sync(&digest).unwrap());
    world.anvil.set_balance(account, U256::from(10u128.pow(17))).await;
    let dev: Address = crate::anvil::Anvil::DEV_ADDRESS.parse().unwrap();
    let request = TransactionRequest::default()
        .from(dev)
        .to(entry_point)
        .gas_limit(1_000_000)
        .input(userop::handle_ops_call(std::slice::from_ref(&op), dev).into());
    let pending = world.anvil.provider().send_transaction(request).await.unwrap();
    let receipt = world.anvil.receipt(*pending.tx_hash()).await;
    assert!(receipt.status(), "the key holder's operation landed");
    drop(guard);

    // The latest block shows the nonce used by another operation: agentd's is dropped, nothing of it moved.
    let settled = world.settled(&agent, &id).await;
    assert_eq!(settled["status"], "dropped", "{settled}");
    assert_eq!(token_balance(&world.anvil, world.usdc, to).await, U256::ZERO);
    assert_eq!(token_balance(&world.anvil, world.usdc, taker).await, U256::from(USDC));
}
