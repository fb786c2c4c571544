//! A transfer that can no longer land leaves no nonce gap behind it (§14, issue 10 item 3): the node forgets it and
//! refuses it again (the wallet can no longer pay it), while a later transfer of the wallet waits at the next nonce.
//! The watcher fills the gap with a zero-value self-send; the later transfers land, the forgotten one is `dropped`
//! with its reservation given back, and what counts against the cap is what the wallet really paid.

use std::time::{Duration, Instant};

use alloy::primitives::{Address, TxHash, U256};
use reqwest::StatusCode;
use serde_json::{Value, json};

use crate::anvil::Anvil;
use crate::helpers::CreatedAgent;
use crate::helpers::chain::{
    BASE_CHAIN_ID, CENT_ETH, ONE_ETH, SETTLE_TIMEOUT, fresh_address, funded_agent, sending_agent, spent_on_base,
    transactions, transfer_app, wallet, wei,
};
use crate::helpers::gated_rpc::GatedRpc;
use crate::helpers::{TestApp, spawn_app_with};
use crate::money::transfers_api::post_transfer;

/// Sends `amount` ETH to `to`; insists on a 201 and returns the transfer.
async fn send(app: &TestApp, agent: &CreatedAgent, to: Address, amount: &str) -> Value {
    let (status, body) = post_transfer(
        app,
        agent,
        json!({"chain": "base", "to": to.to_string(), "amount": amount}),
    )
    .await;
    assert_eq!(status, StatusCode::CREATED, "the transfer is accepted: {body}");
    body
}

/// A sending agent (cap 10 ETH) whose wallet (`from`) holds `balance` on a node behind a gate that can hold
/// broadcasts: (node, gate, app, agent, from).
async fn gated(balance: U256, env: &[(&str, &str)]) -> (Anvil, GatedRpc, TestApp, CreatedAgent, Address) {
    let anvil = Anvil::start(BASE_CHAIN_ID);
    let gate = GatedRpc::start(anvil.url()).await;
    let mut vars = vec![("RPC_URL_BASE", gate.url())];
    vars.extend_from_slice(env);
    let app = spawn_app_with(&vars).await;
    let agent = sending_agent(&app, Some(10.0)).await;
    let from = wallet(&agent);
    anvil.set_balance(from, balance).await;
    (anvil, gate, app, agent, from)
}

/// The stored transfer with `id` among `txs`.
#[track_caller]
fn by_id<'a>(txs: &'a [Value], id: &Value) -> &'a Value {
    txs.iter()
        .find(|tx| tx["id"] == *id)
        .unwrap_or_else(|| panic!("transfer {id} in {txs:#?}"))
}

#[tokio::test]
async fn a_transfer_that_can_no_longer_land_leaves_no_nonce_gap() {
    let anvil = Anvil::start(BASE_CHAIN_ID);
    anvil.set_automine(false).await;
    let app = transfer_app(&anvil, &[("TX_DROP_AFTER_SECS", "1")]).await;
    let agent = funded_agent(&app, &anvil, Some(1.0)).await;
    let from = wallet(&agent);
    let (stuck_to, later_to, last_to) = (fresh_address(), fresh_address(), fresh_address());

    // 1. A large transfer waits in the pool at nonce 0, and the node forgets it.
    let stuck = send(&app, &agent, stuck_to, "0.5").await;
    assert_eq!(stuck["nonce"], 0, "{stuck}");
    let stuck_hash: TxHash = stuck["tx_hash"].as_str().expect("tx_hash").parse().expect("a hash");
    anvil.drop_transaction(stuck_hash).await;

    // 2. A later transfer, signed while the wallet could pay both, at nonce 1: it can only land once nonce 0 is used.
    let later = send(&app, &agent, later_to, "0.01").await;
    assert_eq!(later["nonce"], 1, "{later}");

    // Then the wallet can no longer pay the large one (its balance fell, e.g. spent with an exported key), so
    // sending it again is refused.
    let funds = wei(ONE_ETH / 10);
    anvil.set_balance(from, funds).await;

    // 3. Blocks come; the node's nonce must pass both.
    let deadline = Instant::now() + SETTLE_TIMEOUT;
    while anvil.mined_nonce(from).await < 2 {
        assert!(
            Instant::now() < deadline,
            "the later transfer never landed: nonce 0 is a gap; stored: {:#?}",
            transactions(&app, &agent).await
        );
        anvil.mine(1).await;
        tokio::time::sleep(Duration::from_millis(100)).await;
    }

    // 4. The next transfer lands right away, at the next nonce.
    anvil.set_automine(true).await;
    let last = send(&app, &agent, last_to, "0.01").await;
    assert_eq!(last["nonce"], 2, "{last}");
    assert_eq!(anvil.nonce(from).await, 3, "no gap: nonces 0, 1 and 2 are used");
    assert_eq!(
        anvil.balance(stuck_to).await,
        U256::ZERO,
        "the forgotten transfer moved nothing"
    );
    assert_eq!(anvil.balance(later_to).await, wei(CENT_ETH));
    assert_eq!(anvil.balance(last_to).await, wei(CENT_ETH));

    // 5. The store agrees once the watcher settles everything: the forgotten transfer is dropped, its nonce was
    //    used by a zero-value send to the wallet itself, and the others are confirmed.
    let txs = app
        .settle_until(async || {
            let txs = transactions(&app, &agent).await;
            match txs.len() == 4 && txs.iter().all(|tx| tx["status"] != "pending") {
                true => Ok(txs),
                false => Err(format!("not all settled: {txs:#?}")),
            }
        })
        .await;
    assert_eq!(by_id(&txs, &stuck["id"])["status"], "dropped", "{txs:#?}");
    assert_eq!(by_id(&txs, &later["id"])["status"], "confirmed", "{txs:#?}");
    assert_eq!(by_id(&txs, &last["id"])["status"], "confirmed", "{txs:#?}");
    let fill = txs
        .iter()
        .find(|tx| ![&stuck["id"], &later["id"], &last["id"]].contains(&&tx["id"]))
        .expect("the fill is stored");
    assert_eq!(fill["nonce"], 0, "{fill}");
    assert_eq!(fill["value_wei"], "0", "{fill}");
    assert_eq!(
        fill["to"].as_str().map(str::to_lowercase),
        Some(from.to_string().to_lowercase()),
        "{fill}"
    );
    assert_eq!(fill["status"], "confirmed", "{fill}");

    // Only what landed counts: the wallet paid exactly what `spent` says (two values and three fees).
    let paid = funds - anvil.balance(from).await;
    assert_eq!(spent_on_base(&app, &agent).await, paid, "spent is what the wallet paid");
}

/// Broadcasts happen once the send lock is released (issue 13), so a later transfer of the wallet can be signed while
/// an earlier one is still on its way to the node. When the node then refuses the earlier one (the wallet could pay it
/// when it was signed, but its balance was spent elsewhere meanwhile, e.g. with an exported key), the refusal is the
/// answer and nothing of it is stored, and its
/// nonce is filled at once with a zero-value self-send: the later transfer lands, and so does the next one.
#[tokio::test]
async fn a_broadcast_refused_after_a_later_transfer_was_signed_leaves_no_gap() {
    let (anvil, gate, app, agent, from) = gated(wei(2 * ONE_ETH), &[("WATCHER_INTERVAL_MS", "50")]).await;
    let (big_to, small_to, next_to) = (fresh_address(), fresh_address(), fresh_address());
    let order = |to: Address, amount: &str| json!({"chain": "base", "to": to.to_string(), "amount": amount});

    // 1. A transfer the wallet can pay when it is checked: signed at nonce 0, its broadcast held back by the proxy.
    // 2. A transfer the wallet can pay beside it is signed at nonce 1, its broadcast held back too.
    // 3. The wallet's balance falls to 0.1 ETH; both broadcasts go through: the node refuses the first, takes the
    //    second (waiting for nonce 0).
    gate.hold();
    let big = post_transfer(&app, &agent, order(big_to, "1"));
    let small = async {
        gate.wait_held(1, Duration::from_secs(10)).await;
        post_transfer(&app, &agent, order(small_to, "0.01")).await
    };
    let release = async {
        gate.wait_held(2, Duration::from_secs(10)).await;
        anvil.set_balance(from, wei(ONE_ETH / 10)).await;
        gate.release();
    };
    let ((big_status, big_body), (small_status, small_body), ()) = tokio::join!(big, small, release);
    assert_eq!(big_status, StatusCode::UNPROCESSABLE_ENTITY, "{big_body}");
    assert_eq!(big_body["error"]["code"], "insufficient_funds", "{big_body}");
    assert_eq!(small_status, StatusCode::CREATED, "{small_body}");
    assert_eq!(small_body["nonce"], 1, "{small_body}");

    // Nonce 0 is used by the fill, then nonce 1 lands: the node counts 2, the refused amount never moved.
    wait_for_nonce(&anvil, from, 2).await;
    assert_eq!(anvil.balance(big_to).await, U256::ZERO);
    assert_eq!(anvil.balance(small_to).await, wei(CENT_ETH));
    let txs = transactions(&app, &agent).await;
    let is_to = |tx: &Value, to: Address| {
        tx["to"]
            .as_str()
            .is_some_and(|t| t.eq_ignore_ascii_case(&to.to_string()))
    };
    assert!(
        !txs.iter().any(|tx| is_to(tx, big_to)),
        "the refused transfer is not stored: {txs:#?}"
    );
    assert!(
        txs.iter().any(|tx| is_to(tx, from) && tx["value_wei"] == "0"),
        "the fill is stored: {txs:#?}"
    );

    // The next transfer takes nonce 2 and lands.
    let next = send(&app, &agent, next_to, "0.01").await;
    assert_eq!(next["nonce"], 2, "{next}");
    wait_for_nonce(&anvil, from, 3).await;
    assert_eq!(anvil.balance(next_to).await, wei(CENT_ETH));
}

/// A transfer above the wallet's balance is refused before anything is signed (§ transfers: 422 `insufficient_funds`
/// "before anything is signed"): no broadcast reaches the node, nothing is stored, no nonce is taken.
#[tokio::test]
async fn a_transfer_above_the_balance_is_refused_before_it_is_signed() {
    let (anvil, gate, app, agent, from) = gated(wei(ONE_ETH / 10), &[]).await;
    gate.hold();
    let order = json!({"chain": "base", "to": fresh_address().to_string(), "amount": "1"});
    let answer = tokio::time::timeout(Duration::from_secs(5), post_transfer(&app, &agent, order)).await;
    gate.release();
    let (status, body) = answer.expect("refused at once, with no broadcast to wait for");
    assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY, "{body}");
    assert_eq!(body["error"]["code"], "insufficient_funds", "{body}");
    assert_eq!(gate.held(), 0, "nothing was broadcast");
    assert!(transactions(&app, &agent).await.is_empty(), "nothing is stored");
    assert_eq!(anvil.nonce(from).await, 0, "no transaction on the node");
}

#[tokio::test]
async fn transfers_still_on_their_way_count_against_the_balance_before_the_next_is_signed() {
    let (anvil, gate, app, agent, from) = gated(wei(ONE_ETH / 10), &[]).await;
    let to = fresh_address();
    let order = json!({"chain": "base", "to": to.to_string(), "amount": "0.04"});

    // Two transfers of 0.04 ETH are signed and on their way (their broadcasts held): the node's balance still
    // reads 0.1 ETH, yet only about 0.02 of it is not already promised to them.
    gate.hold();
    let third = async {
        gate.wait_held(2, SETTLE_TIMEOUT).await;
        let third = tokio::time::timeout(Duration::from_secs(5), post_transfer(&app, &agent, order.clone())).await;
        let held = gate.held();
        gate.release();
        (third, held)
    };
    let (first, second, (third, held)) = tokio::join!(
        post_transfer(&app, &agent, order.clone()),
        post_transfer(&app, &agent, order.clone()),
        third
    );
    let (status, body) = third.expect("refused at once, before anything is signed or broadcast");
    assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY, "{body}");
    assert_eq!(body["error"]["code"], "insufficient_funds", "{body}");
    assert_eq!(held, 2, "the third was never broadcast");
    for (status, body) in [first, second] {
        assert_eq!(status, StatusCode::CREATED, "{body}");
    }
    wait_for_nonce(&anvil, from, 2).await;
    assert_eq!(anvil.balance(to).await, wei(ONE_ETH / 100 * 8), "two transfers moved");
    assert_eq!(
        anvil.nonce(from).await,
        2,
        "the third took no nonce, nothing filled one"
    );
    assert_eq!(
        transactions(&app, &agent).await.len(),
        2,
        "the refused transfer is not stored"
    );
}

/// A transfer the node has mined is in the balance it reports: until the watcher settles it, it must not also be held
/// against that balance. Here the watcher runs once a minute, so the first transfer (0.6 of 1 ETH) is still stored
/// as pending when the second (0.3) is asked for; counted twice, the wallet would seem to hold nothing.
#[tokio::test]
async fn a_mined_transfer_is_not_held_against_the_balance_that_shows_it() {
    let anvil = Anvil::start(BASE_CHAIN_ID);
    let app = spawn_app_with(&[("RPC_URL_BASE", anvil.url()), ("WATCHER_INTERVAL_MS", "60000")]).await;
    let agent = sending_agent(&app, Some(10.0)).await;
    let from = wallet(&agent);
    anvil.set_balance(from, wei(ONE_ETH)).await;
    let to = fresh_address();

    let first = send(&app, &agent, to, "0.6").await;
    assert_eq!(first["nonce"], 0, "{first}");
    wait_for_nonce(&anvil, from, 1).await;
    let stored = transactions(&app, &agent).await;
    assert_eq!(stored[0]["status"], "pending", "not settled yet: {stored:#?}");

    let second = send(&app, &agent, to, "0.3").await;
    assert_eq!(second["nonce"], 1, "{second}");
    wait_for_nonce(&anvil, from, 2).await;
    assert_eq!(anvil.balance(to).await, wei(ONE_ETH / 10 * 9), "both transfers moved");
    assert_eq!(anvil.nonce(from).await, 2);
}

/// Waits until the node counts `nonce` mined transactions of `address`.
async fn wait_for_nonce(anvil: &Anvil, address: Address, nonce: u64) {
    let deadline = Instant::now() + SETTLE_TIMEOUT;
    while anvil.mined_nonce(address).await < nonce {
        assert!(Instant::now() < deadline, "nonce {nonce} of {address} on the node");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}
