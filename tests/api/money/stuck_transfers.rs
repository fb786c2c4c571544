//! Transfers that don't land (§14, issue 11 item 4), on an anvil that mines only when told (`--no-mining`): a
//! transfer pending past `STUCK_AFTER_SECS` is sent again at its nonce with fees raised by at least 12.5%, whichever
//! attempt lands settles it (`tx_hash` names it, `replaced_hashes` the others); a cancel replaces it with a zero-value
//! self-send and the transfer ends `cancelled` with only its fee counted; a transfer whose nonce a stranger used is
//! `dropped`, and the next one lands.

use std::time::{Duration, Instant};

use alloy::consensus::Transaction as _;
use alloy::primitives::{Address, Bytes, TxHash, U256};
use alloy::providers::Provider;
use reqwest::{Method, StatusCode};
use serde_json::{Value, json};

use crate::anvil::Anvil;
use crate::helpers::chain::{
    BASE_CHAIN_ID, CENT_ETH, ONE_ETH, SETTLE_TIMEOUT, chat, fresh_address, funded_agent, send_call, spent_on_base,
    transactions, transfer_app, wallet, wei,
};
use crate::helpers::sse::SseStream;
use crate::helpers::{CreatedAgent, TOKEN_HEADER, TestApp, assert_error};
use crate::money::policy::{admin_app, set_policy};
use crate::money::transfers_api::post_transfer;

/// `GET …/transfers/{id}`.
async fn transfer(app: &TestApp, agent: &CreatedAgent, id: &str) -> Value {
    let path = format!("/api/agents/{}/transfers/{id}", agent.id);
    let (status, body) = app.request(Method::GET, &path, Some(&agent.token), None).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    body
}

/// `POST …/transfers/{id}/cancel` with the agent's token.
async fn cancel(app: &TestApp, agent: &CreatedAgent, id: &str) -> (StatusCode, Value) {
    let path = format!("/api/agents/{}/transfers/{id}/cancel", agent.id);
    app.request(Method::POST, &path, Some(&agent.token), None).await
}

/// Sends 0.01 ETH to `to` through the transfers API; insists on a 201.
async fn send(app: &TestApp, agent: &CreatedAgent, to: Address) -> Value {
    let body = json!({"chain": "base", "to": to.to_string(), "amount": "0.01"});
    let (status, body) = post_transfer(app, agent, body).await;
    assert_eq!(status, StatusCode::CREATED, "{body}");
    // The answer does not wait for the round that marks it `pending` (with its audit entry); a read of the log
    // does. The tests move the clock after this: the transfer's age counts from that mark.
    let path = format!("/api/agents/{}/audit?limit=1", agent.id);
    let (status, newest) = app.request(Method::GET, &path, Some(&agent.token), None).await;
    assert_eq!(status, StatusCode::OK, "{newest}");
    assert_eq!(newest[0]["detail"]["transfer_id"], body["id"], "{newest}");
    body
}

/// Drives the watcher until the transfer satisfies `done`; returns it.
async fn wait_until(app: &TestApp, agent: &CreatedAgent, id: &str, what: &str, done: impl Fn(&Value) -> bool) -> Value {
    app.settle_until(async || {
        let body = transfer(app, agent, id).await;
        match done(&body) {
            true => Ok(body),
            false => Err(format!("{what}: {body:#}")),
        }
    })
    .await
}

fn hash_of(value: &Value) -> TxHash {
    value.as_str().expect("a hash").parse().expect("a 32-byte hash")
}

fn replaced(body: &Value) -> Vec<String> {
    body["replaced_hashes"]
        .as_array()
        .unwrap_or_else(|| panic!("replaced_hashes is an array: {body}"))
        .iter()
        .map(|h| h.as_str().expect("a hash").to_string())
        .collect()
}

/// `(max fee, priority fee)` of a transaction the node knows.
async fn fees_of(anvil: &Anvil, hash: TxHash) -> (u128, u128) {
    let tx = anvil
        .provider()
        .get_transaction_by_hash(hash)
        .await
        .expect("eth_getTransactionByHash")
        .unwrap_or_else(|| panic!("{hash} is known"));
    (tx.max_fee_per_gas(), tx.max_priority_fee_per_gas().expect("EIP-1559"))
}

/// Settled transfers count what the wallet paid: the balance change on the node.
async fn assert_spent_is_what_was_paid(app: &TestApp, anvil: &Anvil, agent: &CreatedAgent) {
    let paid = wei(ONE_ETH) - anvil.balance(wallet(agent)).await;
    assert_eq!(
        spent_on_base(app, agent).await,
        paid,
        "spent is the balance change on the node"
    );
}

#[tokio::test]
async fn a_stuck_transfer_is_sent_again_with_higher_fees_and_the_bump_lands() {
    let anvil = Anvil::start_with(BASE_CHAIN_ID, &["--no-mining"]);
    // Stuck after 10 minutes, which pass on the app's clock when the test says so.
    let app = transfer_app(&anvil, &[("STUCK_AFTER_SECS", "600")]).await;
    let agent = funded_agent(&app, &anvil, Some(0.5)).await;
    let to = fresh_address();

    let sent = send(&app, &agent, to).await;
    let id = sent["id"].as_str().expect("id").to_string();
    let first = hash_of(&sent["tx_hash"]);
    assert_eq!(replaced(&sent), Vec::<String>::new());
    let (first_max, first_tip) = fees_of(&anvil, first).await;

    // Past STUCK_AFTER_SECS the watcher signs it again at the same nonce, and the node takes the bump in its place.
    app.clock.advance(Duration::from_secs(601));
    let bumped = wait_until(&app, &agent, &id, "the transfer was never bumped", |t| {
        !replaced(t).is_empty()
    })
    .await;
    assert_eq!(replaced(&bumped)[0], first.to_string(), "{bumped}");
    assert_eq!(bumped["status"], "pending", "{bumped}");
    assert_eq!(bumped["nonce"], 0, "{bumped}");
    // The attempt the node holds now: on a loaded machine the watcher may have bumped again since, which replaces
    // the bump in the pool; each bump raises the fees again, so any of them is checked against the first.
    let node_tx = app
        .settle_until(async || {
            let current = transfer(&app, &agent, &id).await;
            anvil
                .provider()
                .get_transaction_by_hash(hash_of(&current["tx_hash"]))
                .await
                .expect("eth_getTransactionByHash")
                // Stored, not yet broadcast.
                .ok_or_else(|| format!("the latest attempt never reached the node: {current:#}"))
        })
        .await;
    let (max, tip) = (
        node_tx.max_fee_per_gas(),
        node_tx.max_priority_fee_per_gas().expect("EIP-1559"),
    );
    assert!(
        max * 8 >= first_max * 9,
        "the fee cap rose by 12.5% at least: {first_max} -> {max}"
    );
    assert!(
        tip * 8 >= first_tip * 9,
        "the tip rose by 12.5% at least: {first_tip} -> {tip}"
    );
    assert_eq!(node_tx.to(), Some(to), "the bump sends the same transfer");
    assert_eq!(node_tx.value(), wei(CENT_ETH));
    assert_eq!(node_tx.nonce(), 0);

    anvil.mine(1).await;
    let done = wait_until(&app, &agent, &id, "never confirmed", |t| t["status"] != "pending").await;
    assert_eq!(done["status"], "confirmed", "{done}");
    let landed = hash_of(&done["tx_hash"]);
    assert!(
        anvil.receipt(landed).await.status(),
        "tx_hash names the attempt that landed"
    );
    assert!(replaced(&done).contains(&first.to_string()), "{done}");
    assert!(!replaced(&done).contains(&landed.to_string()), "{done}");
    let listed = transactions(&app, &agent).await;
    assert_eq!(listed.len(), 1, "one transfer, however many attempts: {listed:#?}");
    assert_eq!(listed[0]["tx_hash"], done["tx_hash"]);
    assert_eq!(listed[0]["replaced_hashes"], done["replaced_hashes"]);
    assert_eq!(anvil.balance(to).await, wei(CENT_ETH), "the value moved once");
    assert_eq!(anvil.nonce(wallet(&agent)).await, 1);
    assert_spent_is_what_was_paid(&app, &anvil, &agent).await;
}

#[tokio::test]
async fn whichever_attempt_lands_settles_the_transfer() {
    let anvil = Anvil::start_with(BASE_CHAIN_ID, &["--no-mining"]);
    // Stuck after 10 minutes, which pass on the app's clock when the test says so.
    let app = transfer_app(&anvil, &[("STUCK_AFTER_SECS", "600")]).await;
    let agent = funded_agent(&app, &anvil, Some(0.5)).await;
    let to = fresh_address();

    let sent = send(&app, &agent, to).await;
    let id = sent["id"].as_str().expect("id").to_string();
    let first = hash_of(&sent["tx_hash"]);
    let first_raw: Bytes = anvil
        .provider()
        .get_raw_transaction_by_hash(first)
        .await
        .expect("eth_getRawTransactionByHash")
        .expect("the first attempt is in the pool");

    app.clock.advance(Duration::from_secs(601));
    let bumped = wait_until(&app, &agent, &id, "the transfer was never bumped", |t| {
        !replaced(t).is_empty()
    })
    .await;
    // The first attempt lands after all (another node still had it): the bumps leave the pool, the first comes back.
    // The watcher may bump again meanwhile (a loaded machine): then the newer attempt is dropped too, and again.
    let bump = hash_of(&bumped["tx_hash"]);
    // The bump is stored before it is broadcast: act once the node holds it, or the first attempt could land
    // before the bump reaches the node, which then refuses it (nonce too low) and the bump is withdrawn.
    app.settle_until(async || {
        anvil
            .provider()
            .get_raw_transaction_by_hash(bump)
            .await
            .expect("eth_getRawTransactionByHash")
            .map(drop)
            .ok_or_else(|| "the bump never reached the node".to_string())
    })
    .await;
    let deadline = Instant::now() + SETTLE_TIMEOUT;
    loop {
        let current = transfer(&app, &agent, &id).await;
        for hash in
            std::iter::once(hash_of(&current["tx_hash"])).chain(replaced(&current).iter().map(|h| h.parse().unwrap()))
        {
            if hash != first {
                anvil.drop_transaction(hash).await;
            }
        }
        match anvil.provider().send_raw_transaction(&first_raw).await {
            Ok(_) => break,
            Err(e) => {
                assert!(Instant::now() < deadline, "the first attempt is never taken again: {e}");
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
        }
    }
    anvil.mine(1).await;
    assert!(anvil.receipt(first).await.status());

    let done = wait_until(&app, &agent, &id, "never settled", |t| t["status"] != "pending").await;
    assert_eq!(
        done["status"], "confirmed",
        "an earlier attempt landing is not a drop: {done}"
    );
    assert_eq!(
        done["tx_hash"],
        first.to_string(),
        "tx_hash names the attempt that landed: {done}"
    );
    let replaced_hashes = replaced(&done);
    assert!(
        replaced_hashes.contains(&bump.to_string()) && !replaced_hashes.contains(&first.to_string()),
        "the bumps are the replaced attempts: {done}"
    );
    assert_eq!(anvil.balance(to).await, wei(CENT_ETH));
    assert_spent_is_what_was_paid(&app, &anvil, &agent).await;
}

#[tokio::test]
async fn a_pending_transfer_can_be_cancelled_and_only_its_fee_counts() {
    let anvil = Anvil::start_with(BASE_CHAIN_ID, &["--no-mining"]);
    let app = transfer_app(&anvil, &[]).await;
    let agent = funded_agent(&app, &anvil, Some(0.5)).await;
    let from = wallet(&agent);
    let to = fresh_address();

    // Sent from a chat turn, so that the confirmation reaches its conversation's stream.
    let turn = chat(&app, &agent, &format!("send 0.01 ETH to {to} on base")).await;
    let call = send_call(&turn);
    let conversation_id = turn["conversation_id"].as_str().expect("conversation_id").to_string();
    let id = transactions(&app, &agent).await[0]["id"]
        .as_str()
        .expect("id")
        .to_string();
    let original = hash_of(&call["result"]["tx_hash"]);
    let (original_max, _) = fees_of(&anvil, original).await;

    let (status, cancelling) = cancel(&app, &agent, &id).await;
    assert_eq!(status, StatusCode::OK, "{cancelling}");
    assert_eq!(
        cancelling["status"], "pending",
        "pending until one attempt lands: {cancelling}"
    );
    assert_eq!(replaced(&cancelling), vec![original.to_string()], "{cancelling}");
    let replacement = hash_of(&cancelling["tx_hash"]);
    let node_tx = anvil
        .provider()
        .get_transaction_by_hash(replacement)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(node_tx.to(), Some(from), "a send to the agent itself");
    assert_eq!(node_tx.value(), U256::ZERO);
    assert_eq!(node_tx.nonce(), 0, "at the transfer's nonce");
    assert!(
        node_tx.max_fee_per_gas() * 8 >= original_max * 9,
        "fees bumped by 12.5% at least"
    );

    // Asked again while it is on its way: the same answer, nothing new signed.
    let (status, again) = cancel(&app, &agent, &id).await;
    assert_eq!(status, StatusCode::OK, "{again}");
    assert_eq!(again["tx_hash"], cancelling["tx_hash"], "{again}");

    anvil.mine(1).await;
    let done = wait_until(&app, &agent, &id, "never settled", |t| t["status"] != "pending").await;
    assert_eq!(done["status"], "cancelled", "{done}");
    assert_eq!(done["tx_hash"], replacement.to_string(), "{done}");
    assert_eq!(anvil.balance(to).await, U256::ZERO, "the recipient got nothing");
    assert_spent_is_what_was_paid(&app, &anvil, &agent).await;
    assert!(spent_on_base(&app, &agent).await < wei(CENT_ETH), "only the fee counts");

    // The conversation hears of it with the final hash.
    let stream = app
        .client
        .get(app.url(&format!("/api/conversations/{conversation_id}/stream")))
        .header(TOKEN_HEADER, &agent.token)
        .header("Last-Event-ID", "0");
    let mut stream = SseStream::open(stream).await;
    let event = stream
        .next_named("tx_confirmation", Duration::from_secs(10))
        .await
        .expect("a tx_confirmation");
    let event = event.json();
    assert_eq!(event["status"], "cancelled", "{event}");
    assert_eq!(event["tx_hash"], replacement.to_string(), "{event}");

    // Once settled there is nothing to cancel.
    let late = cancel(&app, &agent, &id).await;
    assert_error(&late, StatusCode::CONFLICT, "transfer_not_pending");
}

#[tokio::test]
async fn only_a_pending_transfer_can_be_cancelled() {
    let anvil = Anvil::start(BASE_CHAIN_ID);
    let app = admin_app(&anvil).await;
    let agent = funded_agent(&app, &anvil, Some(0.5)).await;

    // Mined at once (automine): 409, and nothing is sent.
    let mined = send(&app, &agent, fresh_address()).await;
    let mined_id = mined["id"].as_str().expect("id");
    let refused = app
        .settle_until(async || {
            let refused = cancel(&app, &agent, mined_id).await;
            match refused.0 == StatusCode::CONFLICT {
                true => Ok(refused),
                false => Err(format!("a mined transfer cannot be cancelled: {refused:?}")),
            }
        })
        .await;
    assert_error(&refused, StatusCode::CONFLICT, "transfer_not_pending");
    assert_eq!(anvil.nonce(wallet(&agent)).await, 1, "no replacement was sent");

    // Awaiting approval: 409 too (it is rejected instead).
    set_policy(
        &app,
        &agent,
        json!({"limits": {"base:ETH": {"approval_above": "0.005"}}}),
    )
    .await;
    let held = send(&app, &agent, fresh_address()).await;
    assert_eq!(held["status"], "awaiting_approval", "{held}");
    let refused = cancel(&app, &agent, held["id"].as_str().expect("id")).await;
    assert_error(&refused, StatusCode::CONFLICT, "transfer_not_pending");

    // Unknown: 404.
    let unknown = cancel(&app, &agent, &uuid::Uuid::new_v4().to_string()).await;
    assert_error(&unknown, StatusCode::NOT_FOUND, "transfer_not_found");
}

#[tokio::test]
async fn a_dropped_transfer_is_followed_by_one_that_lands() {
    let anvil = Anvil::start_with(BASE_CHAIN_ID, &["--no-mining"]);
    let app = transfer_app(&anvil, &[("STUCK_AFTER_SECS", "1")]).await;
    let agent = funded_agent(&app, &anvil, Some(0.5)).await;
    let from = wallet(&agent);
    let (first_to, next_to) = (fresh_address(), fresh_address());

    // The first transfer leaves the pool, and the wallet's key (exported) uses its nonce for something else.
    let first = send(&app, &agent, first_to).await;
    let first_id = first["id"].as_str().expect("id").to_string();
    anvil.drop_transaction(hash_of(&first["tx_hash"])).await;
    let _: Value = anvil
        .provider()
        .raw_request("anvil_impersonateAccount".into(), (from,))
        .await
        .expect("anvil_impersonateAccount");
    let stranger: TxHash = anvil
        .provider()
        .raw_request(
            "eth_sendTransaction".into(),
            (json!({"from": from, "to": fresh_address(), "value": "0x1", "nonce": "0x0", "gas": "0x5208"}),),
        )
        .await
        .expect("the stranger is sent");
    anvil.mine(1).await;
    assert!(anvil.receipt(stranger).await.status());
    let paid_elsewhere = wei(ONE_ETH) - anvil.balance(from).await;

    let dropped = wait_until(&app, &agent, &first_id, "never dropped", |t| t["status"] != "pending").await;
    assert_eq!(dropped["status"], "dropped", "{dropped}");
    assert_eq!(
        spent_on_base(&app, &agent).await,
        U256::ZERO,
        "a dropped transfer counts nothing"
    );

    // The next transfer takes the next nonce and lands.
    let next = send(&app, &agent, next_to).await;
    assert_eq!(next["nonce"], 1, "{next}");
    anvil.mine(1).await;
    let next_id = next["id"].as_str().expect("id");
    let done = wait_until(&app, &agent, next_id, "never confirmed", |t| t["status"] != "pending").await;
    assert_eq!(done["status"], "confirmed", "{done}");
    assert_eq!(anvil.balance(first_to).await, U256::ZERO);
    assert_eq!(anvil.balance(next_to).await, wei(CENT_ETH));
    let paid = wei(ONE_ETH) - anvil.balance(from).await - paid_elsewhere;
    assert_eq!(
        spent_on_base(&app, &agent).await,
        paid,
        "spent is what agentd's transfers paid"
    );
}
