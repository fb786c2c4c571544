//! The watcher against a scripted node (`transfers::tests::Script`, a `chain::Node`) and a real SQLite store: what it
//! settles from the head and the receipts the node reports, without anvil.

use std::sync::Arc;
use std::time::Duration;

use alloy::primitives::{Address, TxHash, U256};

use super::{Watcher, WatcherState};
use crate::chain::{Chains, Node, ReceiptInfo};
use crate::domain::clock::SystemClock;
use crate::domain::transaction::TxState;
use crate::transfers::TransferOutcome;
use crate::transfers::tests::{Bench, ETH, Script, wei};

/// A watcher of `ethereum` over the bench's store and transfer service, with the bench's scripted node as its node.
fn watcher(bench: &Bench) -> Watcher {
    let node: Arc<dyn Node> = bench.node.clone();
    let state = WatcherState {
        store: bench.store.clone(),
        chains: Arc::new(Chains::default().with_node(node)),
        transfers: bench.transfers.clone(),
        interval: Duration::from_secs(1),
        drop_after: Duration::from_secs(60),
        stuck_after: Duration::from_secs(60),
        clock: Arc::new(SystemClock),
    };
    Watcher::new(state, "ethereum")
}

#[tokio::test]
async fn a_transfer_whose_receipt_reverted_settles_as_reverted_and_counts_only_its_fee() {
    let bench = Bench::new(Script::new(wei(10 * ETH)), wei(ETH)).await;
    let outcome = bench.send(Address::repeat_byte(0x88), "0.01").await.expect("sent");
    let TransferOutcome::Sent { tx, .. } = outcome else {
        panic!("not sent")
    };
    let hash: TxHash = tx.tx_hash().expect("a transaction hash").parse().expect("a hash");
    // Mined in block 5 and reverted: 21,000 gas at 2 gwei paid; the head is that block (one confirmation, as the
    // scripted node asks).
    *bench.node.head.lock().unwrap() = 5;
    let receipt = ReceiptInfo {
        tx_hash: hash,
        block_number: Some(5),
        success: false,
        gas_used: 21_000,
        effective_gas_price: 2_000_000_000,
        l1_fee: U256::ZERO,
        logs: Vec::new(),
    };
    bench.node.receipts.lock().unwrap().insert(hash, receipt.clone());

    let settled = watcher(&bench).poll_once().await.expect("a round");

    assert_eq!(settled, 1);
    let stored = bench
        .store
        .get_transaction(bench.agent.id, tx.id)
        .await
        .expect("the store answers")
        .expect("the transfer");
    assert_eq!(stored.status, TxState::Reverted);
    assert_eq!(stored.block_number, Some(5));
    assert_eq!(stored.gas_used, Some(21_000));
    let fee = receipt.fee_paid();
    assert_eq!(fee, U256::from(42_000_000_000_000u64));
    assert_eq!(
        stored.actual_cost_wei,
        Some(fee),
        "no value moved: only the fee is spent"
    );
    let spent = bench.store.spent_by_chain(bench.agent.id).await.expect("the spending");
    assert_eq!(spent.get("ethereum"), Some(&fee), "the cap counts the fee alone");
}
