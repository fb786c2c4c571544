//! Concurrent sends from one agent: the spending cap is never passed, nonces are neither reused nor skipped, and
//! `spent` settles to the node's actual costs; on one instance, and on two instances sharing one PostgreSQL database.

use std::time::Instant;

use alloy::primitives::{Address, TxHash, U256};
use futures::future::join_all;
use serde_json::Value;

use crate::anvil::Anvil;
use crate::helpers::chain::{
    BASE_CHAIN_ID, CENT_ETH, ONE_ETH, chat, confirmation_messages, fresh_address, funded_agent, node_cost, send_call,
    spent_on_base, transactions, transfer_app, wait_for_transactions, wallet, wei,
};
use crate::helpers::{CreatedAgent, TestApp};

/// A second app instance on the database of `first` (same variables otherwise). Dropping it leaves the database
/// to `first`, which drops it at the end of the test.
pub async fn second_instance(first: &TestApp, anvil: &Anvil) -> TestApp {
    transfer_app(anvil, &[("DATABASE_URL", &first.db_url)]).await
}

/// One send's outcome as the chat turn reported it.
struct Outcome {
    conversation_id: String,
    call: Value,
}

/// Fires `count` simultaneous "send 0.01 ETH" chat turns at each of `apps`.
async fn send_concurrently(apps: &[&TestApp], agent: &CreatedAgent, count: usize, to: Address) -> Vec<Outcome> {
    let message = format!("send 0.01 ETH to {to} on base");
    let turns = apps.iter().flat_map(|app| std::iter::repeat_n(*app, count)).map(|app| {
        let message = message.clone();
        async move {
            let body = chat(app, agent, &message).await;
            Outcome {
                conversation_id: body["conversation_id"].as_str().expect("conversation_id").to_string(),
                call: send_call(&body),
            }
        }
    });
    join_all(turns).await
}

/// Checks every invariant of a burst of concurrent sends against the cap `cap_wei`, once all have settled.
async fn check_burst(
    apps: &[&TestApp],
    anvil: &Anvil,
    agent: &CreatedAgent,
    to: Address,
    outcomes: &[Outcome],
    cap_wei: U256,
) {
    let (sent, refused): (Vec<&Outcome>, Vec<&Outcome>) = outcomes
        .iter()
        .partition(|o| o.call.get("error").is_none_or(Value::is_null));
    for outcome in &refused {
        assert_eq!(
            outcome.call["error"]["code"], "spending_cap_exceeded",
            "a refused send is refused for the cap: {}",
            outcome.call
        );
    }
    let n = sent.len();
    println!("{n} of {} concurrent sends fit in the cap", outcomes.len());
    assert!(n >= 1, "at least one send fits in the cap");
    assert!(!refused.is_empty(), "the cap refuses some of the sends");

    // Nonces: exactly 0..n, each once.
    let mut nonces: Vec<u64> = sent
        .iter()
        .map(|o| {
            o.call["result"]["nonce"]
                .as_u64()
                .unwrap_or_else(|| panic!("nonce: {}", o.call))
        })
        .collect();
    nonces.sort_unstable();
    assert_eq!(nonces, (0..n as u64).collect::<Vec<_>>(), "no nonce reused or skipped");
    let reserved: U256 = sent
        .iter()
        .map(|o| {
            let reserved = o.call["result"]["reserved"].as_str().expect("reserved");
            agentd::domain::amount::parse_units(reserved, 18).expect("a decimal amount")
        })
        .sum();
    assert!(
        reserved <= cap_wei,
        "the reservations ({reserved}) never pass the cap ({cap_wei})"
    );

    // Every instance sees the same stored transfers, all confirmed, with the same nonces.
    let txs = wait_for_transactions(apps[0], agent, n, "confirmed").await;
    let mut stored_nonces: Vec<u64> = txs.iter().map(|tx| tx["nonce"].as_u64().expect("nonce")).collect();
    stored_nonces.sort_unstable();
    assert_eq!(stored_nonces, nonces, "the stored nonces are the reported ones");
    for app in &apps[1..] {
        assert_eq!(
            transactions(app, agent).await.len(),
            n,
            "every instance sees every transfer"
        );
    }

    // The node agrees: n transactions from the agent, n * 0.01 ETH at the recipient.
    assert_eq!(
        anvil.nonce(wallet(agent)).await,
        n as u64,
        "the node saw exactly n transactions"
    );
    assert_eq!(anvil.balance(to).await, wei(CENT_ETH) * U256::from(n));

    // `spent` is the sum of the node's actual costs, and within the cap.
    let mut actual = U256::ZERO;
    for tx in &txs {
        let hash: TxHash = tx["tx_hash"].as_str().expect("tx_hash").parse().expect("a hash");
        let (cost, success) = node_cost(anvil, hash).await;
        assert!(success, "{hash} succeeded");
        actual += cost;
    }
    assert!(
        actual <= cap_wei,
        "the actual costs ({actual}) stay within the cap ({cap_wei})"
    );
    for app in apps {
        assert_eq!(
            spent_on_base(app, agent).await,
            actual,
            "spent is the sum of the actual costs"
        );
    }
    assert_eq!(anvil.balance(wallet(agent)).await, wei(ONE_ETH) - actual);

    // Each confirmation was processed once: one confirmation message in each sending conversation.
    for outcome in &sent {
        let messages = apps[0].messages(agent, &outcome.conversation_id).await;
        assert_eq!(
            confirmation_messages(&messages),
            1,
            "one confirmation message: {messages:#?}"
        );
    }
}

#[tokio::test]
async fn concurrent_sends_never_pass_the_cap_nor_reuse_a_nonce() {
    let anvil = Anvil::start(BASE_CHAIN_ID);
    let app = transfer_app(&anvil, &[]).await;
    let agent = funded_agent(&app, &anvil, Some(0.1)).await;
    let to = fresh_address();

    let started = Instant::now();
    let outcomes = send_concurrently(&[&app], &agent, 20, to).await;
    println!("20 concurrent sends answered in {:?}", started.elapsed());
    check_burst(&[&app], &anvil, &agent, to, &outcomes, wei(ONE_ETH / 10)).await;
}

#[tokio::test]
async fn concurrent_sends_through_two_instances_on_one_postgres_database() {
    if std::env::var("TEST_POSTGRES_URL").is_ok_and(|url| !url.trim().is_empty()) {
        let anvil = Anvil::start(BASE_CHAIN_ID);
        let first = transfer_app(&anvil, &[]).await;
        let second = second_instance(&first, &anvil).await;
        let agent = funded_agent(&first, &anvil, Some(0.1)).await;
        let to = fresh_address();

        let started = Instant::now();
        let outcomes = send_concurrently(&[&first, &second], &agent, 10, to).await;
        println!("2 x 10 concurrent sends answered in {:?}", started.elapsed());
        check_burst(&[&first, &second], &anvil, &agent, to, &outcomes, wei(ONE_ETH / 10)).await;
    } else {
        println!("skipped: two instances share a database only on PostgreSQL (set TEST_POSTGRES_URL)");
    }
}

/// A broadcast whose answer was lost and that is sent again meets "nonce too low" for its own, already mined
/// transaction: that is no refusal, and the transfer must neither be sent a second time nor be forgotten.
#[tokio::test]
async fn a_repeated_broadcast_of_a_landed_transfer_never_sends_it_twice() {
    let anvil = Anvil::start(BASE_CHAIN_ID);
    let app = transfer_app(&anvil, &[("FAULT_LOST_BROADCAST_ANSWER", "true")]).await;
    let agent = funded_agent(&app, &anvil, Some(1.0)).await;
    let to = fresh_address();
    for round in 1..=3u128 {
        let body = chat(&app, &agent, &format!("send 0.01 ETH to {to} on base")).await;
        let call = send_call(&body);
        assert!(call.get("error").is_none_or(Value::is_null), "{call}");
        assert_eq!(
            anvil.balance(to).await,
            wei(round * CENT_ETH),
            "transfer {round} landed exactly once"
        );
    }
    let settled = wait_for_transactions(&app, &agent, 3, "confirmed").await;
    assert_eq!(settled.len(), 3);
    assert_eq!(anvil.nonce(wallet(&agent)).await, 3);
    let (status, detail) = app.get_agent(&agent.id, &agent.token).await;
    assert_eq!(status, reqwest::StatusCode::OK);
    let mut cost = U256::ZERO;
    for tx in &settled {
        cost += node_cost(&anvil, tx["tx_hash"].as_str().unwrap().parse().unwrap())
            .await
            .0;
    }
    assert_eq!(detail["spent"]["base"], agentd::domain::amount::format_units(cost, 18));
}
