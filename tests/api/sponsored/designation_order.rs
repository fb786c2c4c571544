//! The agent's own transactions and the sponsored designation of its account (§22 "The account"), through the public
//! API against the real parts on anvil: the designation's EIP-7702 authorization takes the wallet's next nonce, so
//! agentd signs it only while the wallet has no transaction of its own open on the chain, and signs none of the
//! wallet's while it is unmined. What is asserted is what the chain shows once everything is mined: every nonce of
//! the wallet used once, none left unused, the designation in place.

use std::time::Duration;

use alloy::primitives::{Address, B256, U256};
use alloy::providers::Provider;
use reqwest::{Method, StatusCode};
use serde_json::{Value, json};

use super::batches::{approve, post, setup, swap};
use super::transfers::{USDC, World};
use crate::helpers::CreatedAgent;
use crate::helpers::chain::{ONE_ETH, fresh_address, wallet};
use crate::helpers::solidity::token_balance;

async fn record(world: &World, agent: &CreatedAgent, id: &str) -> Value {
    let path = format!("/api/agents/{}/transfers/{id}", agent.id);
    world
        .app
        .send(world.app.build(Method::GET, &path, Some(&agent.token), None))
        .await
        .body
}

/// The bundle carrying sponsored transfer `id`, once one is signed and the node holds it (waits up to 10 s).
async fn bundle_in_pool(world: &World, agent: &CreatedAgent, id: &str) -> alloy::rpc::types::Transaction {
    for _ in 0..100 {
        let body = record(world, agent, id).await;
        if let Some(hash) = body["sponsorship"]["bundle_hash"].as_str() {
            let hash: B256 = hash.parse().unwrap();
            if let Some(tx) = world.anvil.provider().get_transaction_by_hash(hash).await.unwrap() {
                return tx;
            }
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    panic!("transfer {id} got no bundle the node holds");
}

/// The mined transaction `hash` (a settled record's `tx_hash`).
async fn mined(world: &World, hash: &Value) -> alloy::rpc::types::Transaction {
    let hash: B256 = hash.as_str().expect("a transaction hash").parse().unwrap();
    world
        .anvil
        .provider()
        .get_transaction_by_hash(hash)
        .await
        .unwrap()
        .expect("mined")
}

/// The EIP-7702 authorizations a transaction carries (none for any other type).
fn authorizations(tx: &alloy::rpc::types::Transaction) -> Vec<(Address, u64)> {
    alloy::consensus::Transaction::authorization_list(tx)
        .map(|list| list.iter().map(|a| (a.address, a.nonce)).collect())
        .unwrap_or_default()
}

fn designated(world: &World) -> Vec<u8> {
    [&[0xef, 0x01, 0x00][..], world.framework.delegator.as_slice()].concat()
}

/// Every wallet-paid kind of outflow the agent can ask for while its account is being designated: a native and a
/// token transfer, a single call, and a batch (which, from an address still without code, would designate the
/// account itself in a type-4 transaction using two nonces).
fn wallet_paid(uni: &crate::helpers::uniswap::Uniswap, from: Address) -> Vec<(&'static str, Value)> {
    let to = fresh_address();
    vec![
        (
            "calls",
            json!({"chain": "base", "gas": "wallet", "calls": [approve(uni, 40), swap(uni, from, 40, "1")]}),
        ),
        (
            "transfers",
            json!({"chain": "base", "gas": "wallet", "to": to.to_string(), "amount": "0.001"}),
        ),
        (
            "transfers",
            json!({"chain": "base", "gas": "wallet", "to": to.to_string(), "amount": "1", "asset": "USDC"}),
        ),
        (
            "calls",
            json!({"chain": "base", "gas": "wallet", "to": uni.usdc.to_string(),
                "function": "approve(address,uint256)", "args": [uni.router.to_string(), USDC.to_string()]}),
        ),
    ]
}

#[tokio::test]
async fn no_wallet_paid_transaction_is_signed_while_a_sponsored_designation_is_unmined() {
    let (world, uni, agent) = setup(json!({})).await;
    let from = wallet(&agent);
    world.anvil.set_balance(from, U256::from(ONE_ETH)).await;
    assert!(world.code(from).await.is_empty());
    world.anvil.set_automine(false).await;
    // The first sponsored operation: its type-4 bundle carries the agent's authorization at the wallet's nonce 0.
    let payee = fresh_address();
    let (status, sponsored) = world
        .send(
            &agent,
            json!({"chain": "base", "to": payee.to_string(), "amount": "2", "asset": "USDC"}),
        )
        .await;
    assert_eq!(status, StatusCode::CREATED, "{sponsored}");
    assert_eq!(sponsored["gas"], "sponsored", "{sponsored}");
    let id = sponsored["id"].as_str().unwrap();
    let bundle = bundle_in_pool(&world, &agent, id).await;
    assert_eq!(authorizations(&bundle), vec![(world.framework.delegator, 0)]);

    // Meanwhile a wallet-paid transfer waits for the designation a while (§22: none of the wallet's own
    // transactions is signed while it is unmined), and is refused when nothing is mined meanwhile.
    let started = std::time::Instant::now();
    let (status, refused) = world
        .send(
            &agent,
            json!({"chain": "base", "gas": "wallet", "to": fresh_address().to_string(), "amount": "0.0001"}),
        )
        .await;
    assert_eq!(status, StatusCode::CONFLICT, "{refused}");
    assert_eq!(refused["error"]["code"], "idempotency_in_progress", "{refused}");
    assert!(started.elapsed() >= Duration::from_secs(9), "{:?}", started.elapsed());
    assert_eq!(world.anvil.nonce(from).await, 0);

    // Wallet-paid outflows of every kind, asked while the designation is unmined, wait for it, and are signed after
    // it once it is mined.
    let asked = wallet_paid(&uni, from);
    let answers = futures::future::join_all(asked.iter().map(|(path, body)| {
        let (world, agent) = (&world, &agent);
        async move { post(&world.app, agent, path, body.clone()).await }
    }));
    let mine = async {
        tokio::time::sleep(Duration::from_millis(800)).await;
        world.anvil.mine(1).await;
        world.anvil.set_automine(true).await;
    };
    let (answers, ()) = tokio::join!(answers, mine);
    let settled = world.settled(&agent, id).await;
    assert_eq!(settled["status"], "confirmed", "{settled}");
    // From the chain: the designation landed with the authorization at nonce 0; each wallet-paid one landed after it
    // (the batch a plain transaction of the account to itself), every nonce used, none left.
    assert_eq!(world.code(from).await, designated(&world));
    assert_eq!(
        authorizations(&mined(&world, &settled["tx_hash"]).await),
        vec![(world.framework.delegator, 0)]
    );
    assert_eq!(
        token_balance(&world.anvil, world.usdc, payee).await,
        U256::from(2 * USDC)
    );
    let mut nonces = Vec::new();
    for ((_, body), (status, answer)) in asked.iter().zip(&answers) {
        assert_eq!(*status, StatusCode::CREATED, "{body}: {answer}");
        let landed = world.settled(&agent, answer["id"].as_str().unwrap()).await;
        assert_eq!(landed["status"], "confirmed", "{body}: {landed}");
        assert!(
            authorizations(&mined(&world, &landed["tx_hash"]).await).is_empty(),
            "{body}: {landed}"
        );
        nonces.push(landed["nonce"].as_u64().unwrap());
    }
    nonces.sort();
    assert_eq!(nonces, (1..=asked.len() as u64).collect::<Vec<_>>());
    assert_eq!(world.anvil.nonce(from).await, 1 + asked.len() as u64);
}

#[tokio::test]
async fn a_sponsored_designation_waits_for_the_wallets_own_transaction_and_takes_the_nonce_after_it() {
    let (world, _uni, agent) = setup(json!({})).await;
    let from = wallet(&agent);
    world.anvil.set_balance(from, U256::from(ONE_ETH)).await;
    world.anvil.set_automine(false).await;
    // The wallet's own transaction waits in the pool at nonce 0.
    let (status, own) = world
        .send(
            &agent,
            json!({"chain": "base", "gas": "wallet", "to": fresh_address().to_string(), "amount": "0.001"}),
        )
        .await;
    assert_eq!(status, StatusCode::CREATED, "{own}");
    assert_eq!(own["nonce"], 0, "{own}");
    // The first sponsored operation is signed and answered, and waits: no designation is signed while the wallet's
    // transaction is open.
    let payee = fresh_address();
    let (status, sponsored) = world
        .send(
            &agent,
            json!({"chain": "base", "to": payee.to_string(), "amount": "3", "asset": "USDC"}),
        )
        .await;
    assert_eq!(status, StatusCode::CREATED, "{sponsored}");
    assert_eq!(sponsored["gas"], "sponsored", "{sponsored}");
    let id = sponsored["id"].as_str().unwrap();
    tokio::time::sleep(Duration::from_millis(1_500)).await;
    let waiting = record(&world, &agent, id).await;
    assert!(waiting["sponsorship"]["bundle_hash"].is_null(), "{waiting}");
    world.anvil.mine(1).await;
    world.anvil.set_automine(true).await;
    let landed = world.settled(&agent, own["id"].as_str().unwrap()).await;
    assert_eq!(landed["status"], "confirmed", "{landed}");
    let settled = world.settled(&agent, id).await;
    assert_eq!(settled["status"], "confirmed", "{settled}");
    // From the chain: the authorization took nonce 1, after the wallet's transaction; both nonces used, none left.
    assert_eq!(
        authorizations(&mined(&world, &settled["tx_hash"]).await),
        vec![(world.framework.delegator, 1)]
    );
    assert_eq!(world.code(from).await, designated(&world));
    assert_eq!(world.anvil.nonce(from).await, 2);
    assert_eq!(
        token_balance(&world.anvil, world.usdc, payee).await,
        U256::from(3 * USDC)
    );
    // The wallet's next transaction takes nonce 2 and lands.
    let (status, next) = world
        .send(
            &agent,
            json!({"chain": "base", "gas": "wallet", "to": fresh_address().to_string(), "amount": "0.0001"}),
        )
        .await;
    assert_eq!(status, StatusCode::CREATED, "{next}");
    assert_eq!(next["nonce"], 2, "{next}");
    let landed = world.settled(&agent, next["id"].as_str().unwrap()).await;
    assert_eq!(landed["status"], "confirmed", "{landed}");
    assert_eq!(world.anvil.nonce(from).await, 3);
}
