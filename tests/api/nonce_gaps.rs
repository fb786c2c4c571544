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
use crate::helpers::TestApp;
use crate::helpers::chain::{
    BASE_CHAIN_ID, CENT_ETH, ONE_ETH, SETTLE_TIMEOUT, fresh_address, funded_agent, spent_on_base, transactions,
    transfer_app, wallet, wei,
};
use crate::transfers_api::post_transfer;

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

    // 1. A large transfer waits in the pool at nonce 0; the node forgets it, and the wallet can no longer pay it
    //    (its balance fell, e.g. spent with an exported key), so sending it again is refused.
    let stuck = send(&app, &agent, stuck_to, "0.5").await;
    assert_eq!(stuck["nonce"], 0, "{stuck}");
    let stuck_hash: TxHash = stuck["tx_hash"].as_str().expect("tx_hash").parse().expect("a hash");
    anvil.drop_transaction(stuck_hash).await;
    let funds = wei(ONE_ETH / 10);
    anvil.set_balance(from, funds).await;

    // 2. A later transfer the wallet can pay, at nonce 1: it can only land once nonce 0 is used.
    let later = send(&app, &agent, later_to, "0.01").await;
    assert_eq!(later["nonce"], 1, "{later}");

    // 3. Blocks come; the node's nonce must pass both.
    let deadline = Instant::now() + SETTLE_TIMEOUT;
    while anvil.nonce(from).await < 2 {
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
    assert_eq!(anvil.settled_nonce(from).await, 3, "no gap: nonces 0, 1 and 2 are used");
    assert_eq!(
        anvil.balance(stuck_to).await,
        U256::ZERO,
        "the forgotten transfer moved nothing"
    );
    assert_eq!(anvil.balance(later_to).await, wei(CENT_ETH));
    assert_eq!(anvil.balance(last_to).await, wei(CENT_ETH));

    // 5. The store agrees once the watcher settles everything: the forgotten transfer is dropped, its nonce was
    //    used by a zero-value send to the wallet itself, and the others are confirmed.
    let deadline = Instant::now() + SETTLE_TIMEOUT;
    let txs = loop {
        let txs = transactions(&app, &agent).await;
        if txs.len() == 4 && txs.iter().all(|tx| tx["status"] != "pending") {
            break txs;
        }
        assert!(Instant::now() < deadline, "not all settled: {txs:#?}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
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
