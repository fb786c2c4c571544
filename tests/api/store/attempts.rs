//! The attempts of a transfer in the store, on SQLite and PostgreSQL (§14): a replacement is stored only over the
//! latest attempt of an open transfer and within its reservation (a cancel may grow it within the cap); a refused
//! one is withdrawn; the attempt that lands becomes `tx_hash` again at settlement.

use agentd::domain::transaction::{Attempt, AttemptKind, TxState};
use agentd::store::{Replacement, Reservation, Settlement, Store};
use alloy::primitives::U256;
use serde_json::json;
use uuid::Uuid;

use crate::store::contract::{CHAIN, confirmed, open, reserve, stored_agent, transfer};

fn attempt(kind: AttemptKind) -> Attempt {
    Attempt {
        tx_hash: format!("0x{}", Uuid::new_v4().simple()),
        raw_tx: vec![2, 1],
        max_fee_per_gas: 2,
        kind,
    }
}

async fn replace(store: &dyn Store, id: Uuid, over: &str, next: &Attempt, needed: u64, grow: bool) -> Replacement {
    store
        .replace_attempt(id, over, next, U256::from(needed), grow)
        .await
        .expect("the replacement runs")
}

fn hashes(attempts: &[Attempt]) -> Vec<&str> {
    attempts.iter().map(|a| a.tx_hash.as_str()).collect()
}

#[tokio::test]
async fn attempts_are_replaced_withdrawn_and_the_one_that_lands_names_the_transfer() {
    let (_db, store) = open().await;
    let (agent, _) = stored_agent(store.as_ref(), 100_000).await;
    let request = transfer(&agent, 1_000, None);
    let Reservation::Reserved(tx) = reserve(store.as_ref(), &request).await else {
        panic!("reserved")
    };
    let first = tx.tx_hash().unwrap().to_string();

    let bump = attempt(AttemptKind::Send);
    let Replacement::Stored(stored) = replace(store.as_ref(), tx.id, &first, &bump, 22_000, false).await else {
        panic!("a bump within the reservation is stored")
    };
    assert_eq!(stored.tx_hash(), Some(bump.tx_hash.as_str()));
    assert_eq!(stored.status, TxState::Signed, "signed until the node takes it");
    let stale = attempt(AttemptKind::Send);
    assert!(matches!(
        replace(store.as_ref(), tx.id, &first, &stale, 22_000, false).await,
        Replacement::Changed
    ));
    assert!(matches!(
        replace(store.as_ref(), tx.id, &bump.tx_hash, &stale, 22_001, false).await,
        Replacement::NotCovered
    ));

    // A cancel may grow the reservation within the cap.
    let cancel = attempt(AttemptKind::Cancel);
    let Replacement::Stored(stored) = replace(store.as_ref(), tx.id, &bump.tx_hash, &cancel, 50_000, true).await else {
        panic!("a cancel within the cap is stored")
    };
    assert_eq!(stored.reserved_wei, U256::from(50_000u64));
    assert_eq!(
        store.spent_by_chain(agent.id).await.unwrap()[CHAIN],
        U256::from(50_000u64)
    );
    let all = store.attempts(tx.id).await.unwrap();
    assert_eq!(hashes(&all), [&cancel.tx_hash, &bump.tx_hash, &first]);
    assert_eq!(all[0].kind, AttemptKind::Cancel);

    // The node refused the cancel: the bump is the latest again.
    assert!(store.withdraw_attempt(tx.id, &cancel.tx_hash).await.unwrap());
    assert!(!store.withdraw_attempt(tx.id, &cancel.tx_hash).await.unwrap(), "once");
    assert_eq!(hashes(&store.attempts(tx.id).await.unwrap()), [&bump.tx_hash, &first]);
    let replaced = store.replaced_hashes(agent.id).await.unwrap();
    assert_eq!(replaced[&tx.id], vec![first.clone()]);

    // The first attempt lands: it names the transfer, the bump is the replaced one, the cost is what it paid.
    let landed = Settlement {
        landed: Some(first.clone()),
        ..confirmed(10_000)
    };
    store.settle_transaction(tx.id, &landed, json!({}), None).await.unwrap();
    let settled = store.get_transaction(agent.id, tx.id).await.unwrap().unwrap();
    assert_eq!(settled.tx_hash(), Some(first.as_str()));
    assert_eq!(settled.status, TxState::Confirmed);
    assert_eq!(
        store.replaced_hashes(agent.id).await.unwrap()[&tx.id],
        vec![bump.tx_hash.clone()]
    );
    assert_eq!(
        store.spent_by_chain(agent.id).await.unwrap()[CHAIN],
        U256::from(10_000u64)
    );
    let late = attempt(AttemptKind::Cancel);
    assert!(
        matches!(
            replace(store.as_ref(), tx.id, &first, &late, 1, true).await,
            Replacement::Changed
        ),
        "a settled transfer is not replaced"
    );
}

#[tokio::test]
async fn a_cancel_that_needs_more_than_the_cap_is_refused() {
    let (_db, store) = open().await;
    let (agent, _) = stored_agent(store.as_ref(), 30_000).await;
    let Reservation::Reserved(tx) = reserve(store.as_ref(), &transfer(&agent, 1_000, None)).await else {
        panic!("reserved")
    };
    let cancel = attempt(AttemptKind::Cancel);
    match replace(store.as_ref(), tx.id, tx.tx_hash().unwrap(), &cancel, 30_001, true).await {
        Replacement::CapExceeded { cap, spent } => {
            assert_eq!((cap, spent), (U256::from(30_000u64), U256::from(22_000u64)));
        }
        other => panic!("refused by the cap: {other:?}"),
    }
    assert_eq!(hashes(&store.attempts(tx.id).await.unwrap()), [tx.tx_hash().unwrap()]);
}
