//! The chain-access layer against a real local node (anvil): reads, fees, broadcasts, chain-id and outage handling.

use std::net::TcpListener;
use std::time::{Duration, Instant};

use agentd::chain::{ChainError, Chains, Fees, Node, TxStatus, raw_tx_hash};
use alloy::consensus::{SignableTransaction, TxEip1559, TxEnvelope};
use alloy::eips::eip2718::Encodable2718;
use alloy::primitives::{Address, Bytes, TxKind, U256};
use alloy::signers::SignerSync;
use alloy::signers::local::PrivateKeySigner;

use crate::anvil::Anvil;

const BASE_CHAIN_ID: u64 = 8453;
const ONE_ETH: u128 = 1_000_000_000_000_000_000;

fn chains_at(name: &str, url: &str, timeout: Duration) -> Chains {
    Chains::new(vec![(name.to_owned(), url.to_owned())], timeout).expect("valid chain config")
}

fn base_on(anvil: &Anvil) -> Chains {
    chains_at("base", anvil.url(), Duration::from_secs(5))
}

/// Signs a plain EIP-1559 transfer and returns its EIP-2718 encoding.
fn signed_transfer(signer: &PrivateKeySigner, nonce: u64, to: Address, value: U256, fees: &Fees, gas: u64) -> Vec<u8> {
    let tx = TxEip1559 {
        chain_id: BASE_CHAIN_ID,
        nonce,
        gas_limit: gas,
        max_fee_per_gas: fees.max_fee_per_gas,
        max_priority_fee_per_gas: fees.max_priority_fee_per_gas,
        to: TxKind::Call(to),
        value,
        access_list: Default::default(),
        input: Bytes::new(),
    };
    let signature = signer.sign_hash_sync(&tx.signature_hash()).expect("signing");
    TxEnvelope::from(tx.into_signed(signature)).encoded_2718()
}

/// A proxy in front of `anvil` that can hold calls (`gated_rpc`), and the base client that goes through it.
async fn gated_client(anvil: &Anvil) -> (crate::helpers::gated_rpc::GatedRpc, agentd::chain::ChainClient) {
    let gate = crate::helpers::gated_rpc::GatedRpc::start(anvil.url()).await;
    let chains = chains_at("base", gate.url(), Duration::from_secs(30));
    let client = chains.get("base").unwrap().clone();
    (gate, client)
}

/// A port on which nothing listens (bound once to find it free, then released).
fn closed_port() -> u16 {
    TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port()
}

#[tokio::test]
async fn balance_is_exactly_what_the_node_holds() {
    let anvil = Anvil::start(BASE_CHAIN_ID);
    let chains = base_on(&anvil);
    let client = chains.get("base").unwrap();
    let address = Address::repeat_byte(0x42);
    assert_eq!(client.balance(address).await.unwrap(), U256::ZERO);

    // More than 2^64 wei with every digit significant: nothing may be rounded.
    let wei = U256::from_str_radix("123456789012345678901234567", 10).unwrap();
    anvil.set_balance(address, wei).await;
    assert_eq!(client.balance(address).await.unwrap(), wei);
    assert_eq!(client.chain_id_checked().await.unwrap(), BASE_CHAIN_ID);
}

#[tokio::test]
async fn block_number_follows_mined_blocks() {
    let anvil = Anvil::start(BASE_CHAIN_ID);
    let chains = base_on(&anvil);
    let client = chains.get("base").unwrap();
    let before = client.block_number().await.unwrap();
    anvil.mine(5).await;
    assert_eq!(client.block_number().await.unwrap(), before + 5);
}

#[tokio::test]
async fn fees_are_positive_and_consistent() {
    let anvil = Anvil::start_with(BASE_CHAIN_ID, &["--base-fee", "7000000000"]);
    let chains = base_on(&anvil);
    let fees = chains.get("base").unwrap().fees().await.unwrap();
    // The latest block is the genesis block, whose base fee is the configured one.
    assert_eq!(fees.base_fee_per_gas, 7_000_000_000);
    assert!(fees.max_priority_fee_per_gas > 0, "{fees:?}");
    assert!(fees.gas_price > 0, "{fees:?}");
    assert_eq!(
        fees.max_fee_per_gas,
        2 * fees.base_fee_per_gas + fees.max_priority_fee_per_gas
    );
    assert_eq!(agentd::chain::format_gwei(fees.base_fee_per_gas), "7");
}

#[tokio::test]
async fn a_node_of_another_chain_is_refused() {
    let anvil = Anvil::start(1);
    let chains = base_on(&anvil);
    let client = chains.get("base").unwrap();
    let expected = ChainError::WrongChainId {
        chain: "base".into(),
        expected: BASE_CHAIN_ID,
        actual: 1,
    };
    assert_eq!(client.chain_id_checked().await.unwrap_err(), expected);
    // Every call is refused, reads included, and the verdict is cached.
    assert_eq!(client.balance(Address::ZERO).await.unwrap_err(), expected);
    assert_eq!(client.send_raw(&[0x02, 0xc0]).await.unwrap_err(), expected);
    assert_eq!(expected.code(), "wrong_chain_id");
}

#[tokio::test]
async fn a_closed_port_fails_fast_without_naming_the_url() {
    let port = closed_port();
    let timeout = Duration::from_secs(2);
    let chains = chains_at("base", &format!("http://127.0.0.1:{port}/secret-key"), timeout);
    let client = chains.get("base").unwrap();

    let started = Instant::now();
    chains.verify_at_start();
    assert!(
        started.elapsed() < Duration::from_millis(50),
        "verify_at_start must not block"
    );

    let started = Instant::now();
    let err = client.balance(Address::ZERO).await.unwrap_err();
    assert!(started.elapsed() < timeout, "took {:?}", started.elapsed());
    assert!(
        matches!(err, ChainError::Unavailable { .. } | ChainError::Timeout { .. }),
        "{err:?}"
    );
    let shown = format!("{err} {err:?} {chains:?}");
    assert!(
        !shown.contains("secret-key") && !shown.contains(&port.to_string()),
        "{shown}"
    );
}

#[tokio::test]
async fn a_node_that_never_answers_times_out_after_one_retry() {
    // The kernel accepts connections into the backlog, but nobody ever reads or answers.
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    let timeout = Duration::from_millis(300);
    let chains = chains_at("base", &url, timeout);

    let started = Instant::now();
    let err = chains.get("base").unwrap().block_number().await.unwrap_err();
    let elapsed = started.elapsed();
    assert_eq!(err, ChainError::Timeout { chain: "base".into() });
    assert_eq!(err.code(), "upstream_timeout");
    // Two attempts of 300 ms plus the pause between them, far below a hang.
    assert!(
        elapsed >= 2 * timeout && elapsed < Duration::from_secs(2),
        "took {elapsed:?}"
    );
}

#[tokio::test]
async fn a_node_that_comes_back_is_used_again() {
    let anvil = Anvil::start(BASE_CHAIN_ID);
    let url = anvil.url().to_owned();
    let port = anvil.port();
    let chains = chains_at("base", &url, Duration::from_secs(2));
    let client = chains.get("base").unwrap();
    assert!(client.block_number().await.is_ok());

    drop(anvil);
    assert!(client.block_number().await.unwrap_err().is_transport());

    // Another chain's node now answers on the same port: it must be checked again and refused.
    let _other = Anvil::start_with(1, &["--port", &port.to_string()]);
    let err = client.block_number().await.unwrap_err();
    assert_eq!(err.code(), "wrong_chain_id", "{err:?}");
}

#[tokio::test]
async fn a_signed_transfer_is_broadcast_and_confirmed() {
    let anvil = Anvil::start(BASE_CHAIN_ID);
    let chains = base_on(&anvil);
    let client = chains.get("base").unwrap();
    let signer = PrivateKeySigner::random();
    let recipient = Address::repeat_byte(0x07);
    anvil.set_balance(signer.address(), U256::from(ONE_ETH)).await;

    let value = U256::from(ONE_ETH / 100);
    let fees = client.fees().await.unwrap();
    let gas = client
        .estimate_transfer_gas(signer.address(), recipient, value)
        .await
        .unwrap();
    assert_eq!(gas, 21_000);
    let nonce = client.pending_nonce(signer.address()).await.unwrap();
    assert_eq!(nonce, 0);
    let raw = signed_transfer(&signer, nonce, recipient, value, &fees, gas);

    let hash = client.send_raw(&raw).await.unwrap();
    assert_eq!(hash, raw_tx_hash(&raw));
    // Automine includes it at once, but a loaded machine may answer the receipt a moment later.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    let info = loop {
        let info = client
            .transaction(hash)
            .await
            .unwrap()
            .expect("the node knows the transaction");
        if info.status != TxStatus::Pending || std::time::Instant::now() > deadline {
            break info;
        }
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    };
    assert_eq!(info.status, TxStatus::Confirmed);
    assert_eq!(
        (info.from, info.to, info.value, info.nonce),
        (signer.address(), Some(recipient), value, 0)
    );
    assert_eq!(info.gas_used, Some(21_000));
    assert!(info.block_number.is_some() && info.confirmations == 1);
    let receipt = client.receipt(hash).await.unwrap().expect("mined at once");
    assert!(receipt.success);
    assert_eq!(info.fee_paid(), Some(receipt.fee_paid()));
    assert_eq!(anvil.balance(recipient).await, value);
    assert_eq!(
        anvil.balance(signer.address()).await,
        U256::from(ONE_ETH) - value - receipt.fee_paid()
    );
    assert_eq!(anvil.nonce(signer.address()).await, 1);

    // The node's refusal comes back with its own words.
    let stale = signed_transfer(&signer, 0, recipient, U256::from(1u8), &fees, gas);
    match client.send_raw(&stale).await.unwrap_err() {
        ChainError::Refused { chain, message, .. } => {
            assert_eq!(chain, "base");
            assert!(message.to_lowercase().contains("nonce"), "{message}");
        }
        other => panic!("expected an RPC error, got {other:?}"),
    }
    assert_eq!(
        client
            .transaction(alloy::primitives::B256::repeat_byte(9))
            .await
            .unwrap(),
        None
    );
}

#[tokio::test]
async fn confirmations_hold_a_transaction_pending_until_deep_enough() {
    let anvil = Anvil::start(BASE_CHAIN_ID);
    let mut chains = base_on(&anvil);
    chains.set_confirmations("base", 3).unwrap();
    let client = chains.get("base").unwrap();
    let signer = PrivateKeySigner::random();
    anvil.set_balance(signer.address(), U256::from(ONE_ETH)).await;
    let fees = client.fees().await.unwrap();
    let raw = signed_transfer(&signer, 0, Address::repeat_byte(1), U256::from(5u8), &fees, 21_000);

    // Without automine the transaction waits in the mempool.
    anvil.set_automine(false).await;
    let hash = client.send_raw(&raw).await.unwrap();
    let info = client.transaction(hash).await.unwrap().unwrap();
    assert_eq!(
        (info.status, info.block_number, info.confirmations),
        (TxStatus::Pending, None, 0)
    );
    assert_eq!(client.pending_nonce(signer.address()).await.unwrap(), 1);

    anvil.mine(1).await;
    let info = client.transaction(hash).await.unwrap().unwrap();
    assert_eq!((info.status, info.confirmations), (TxStatus::Pending, 1));

    anvil.mine(2).await;
    let info = client.transaction(hash).await.unwrap().unwrap();
    assert_eq!((info.status, info.confirmations), (TxStatus::Confirmed, 3));
}

/// Broadcasts that come while one is in flight go together next, in one JSON-RPC batch (issue 36): each caller
/// gets its own answer (a hash, or the node's refusal of its transaction alone).
#[tokio::test]
async fn broadcasts_queued_behind_one_in_flight_go_in_one_batch_each_with_its_own_answer() {
    let anvil = Anvil::start(BASE_CHAIN_ID);
    let (gate, client) = gated_client(&anvil).await;
    let signer = PrivateKeySigner::random();
    let recipient = Address::repeat_byte(0x07);
    anvil.set_balance(signer.address(), U256::from(ONE_ETH)).await;
    let fees = client.fees().await.unwrap();
    let value = U256::from(ONE_ETH / 1000);
    let raw: Vec<Vec<u8>> = (0..4)
        .map(|nonce| signed_transfer(&signer, nonce, recipient, value, &fees, 21_000))
        .collect();
    // Nonce 0 again with another amount at the same fees: the node refuses it.
    let stale = signed_transfer(&signer, 0, recipient, U256::from(1u8), &fees, 21_000);

    gate.hold();
    let first = tokio::spawn({
        let (client, raw) = (client.clone(), raw[0].clone());
        async move { client.send_raw(&raw).await }
    });
    gate.wait_held(1, Duration::from_secs(10)).await;
    // Queued behind the held one, in this order: nonces 1 and 2, the stale one, nonce 3.
    let mut queued = Vec::new();
    for raw in [&raw[1], &raw[2], &stale, &raw[3]] {
        let (client, raw) = (client.clone(), raw.clone());
        queued.push(tokio::spawn(async move { client.send_raw(&raw).await }));
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    gate.wait_held(1, Duration::from_secs(1)).await;
    assert_eq!(gate.held(), 1, "the queued broadcasts wait for the one in flight");
    gate.release();

    assert_eq!(first.await.unwrap().unwrap(), raw_tx_hash(&raw[0]));
    let mut answers = Vec::new();
    for task in queued {
        answers.push(task.await.unwrap());
    }
    assert_eq!(answers[0].as_ref().unwrap(), &raw_tx_hash(&raw[1]));
    assert_eq!(answers[1].as_ref().unwrap(), &raw_tx_hash(&raw[2]));
    // "nonce too low" once nonce 0 is mined, "replacement transaction underpriced" while it waits to be.
    assert!(
        matches!(&answers[2], Err(ChainError::Refused { .. })),
        "the stale transaction is refused alone, got {:?}",
        answers[2]
    );
    assert_eq!(answers[3].as_ref().unwrap(), &raw_tx_hash(&raw[3]));

    // What the chain shows: the four transfers, and the stale one nowhere.
    assert_eq!(anvil.nonce(signer.address()).await, 4);
    assert_eq!(anvil.balance(recipient).await, value * U256::from(4u8));
    for raw in &raw {
        let receipt = client.receipt(raw_tx_hash(raw)).await.unwrap().expect("mined");
        assert!(receipt.success);
    }
    assert!(client.receipt(raw_tx_hash(&stale)).await.unwrap().is_none());
}

/// Quotes of one wallet while its read is in flight share that read (issue 36): one `eth_getTransactionCount` and
/// one `eth_getBalance` for them all, each caller with the pair; a read asked after it answered is a new one.
#[tokio::test]
async fn reads_of_one_wallet_while_one_is_in_flight_share_it() {
    let anvil = Anvil::start(BASE_CHAIN_ID);
    let (gate, client) = gated_client(&anvil).await;
    let (wallet, other) = (Address::repeat_byte(0x21), Address::repeat_byte(0x22));
    anvil.set_balance(wallet, U256::from(ONE_ETH)).await;
    anvil.set_balance(other, U256::from(ONE_ETH / 2)).await;
    client.chain_id_checked().await.unwrap();

    gate.hold_method("eth_getTransactionCount");
    let read = |address| {
        let client = client.clone();
        tokio::spawn(async move { client.mined_nonce_then_balance(address).await })
    };
    let first = read(wallet);
    gate.wait_held(1, Duration::from_secs(10)).await;
    let joined: Vec<_> = (0..3).map(|_| read(wallet)).collect();
    // Another wallet's read is its own.
    let apart = read(other);
    gate.wait_held(2, Duration::from_secs(10)).await;
    tokio::time::sleep(Duration::from_millis(100)).await;
    assert_eq!(gate.held(), 2, "the wallet's later reads wait for its read in flight");
    gate.release();

    let expected = (0, U256::from(ONE_ETH));
    assert_eq!(first.await.unwrap().unwrap(), expected);
    for read in joined {
        assert_eq!(read.await.unwrap().unwrap(), expected);
    }
    assert_eq!(apart.await.unwrap().unwrap(), (0, U256::from(ONE_ETH / 2)));

    // Once answered, the next read asks the node again and sees what changed.
    anvil.set_balance(wallet, U256::from(ONE_ETH / 4)).await;
    gate.hold_method("eth_getTransactionCount");
    let again = read(wallet);
    gate.wait_held(3, Duration::from_secs(10)).await;
    gate.release();
    assert_eq!(again.await.unwrap().unwrap(), (0, U256::from(ONE_ETH / 4)));
}

/// Runs `lead` (a call of `client`'s that starts a task of its own) on a runtime of its own, waits until the gate
/// holds its request at the node (the gate's `held`-th), then stops that runtime, so the task goes with it
/// mid-request; then lets the gate go.
async fn led_from_a_runtime_that_stops<F>(gate: &crate::helpers::gated_rpc::GatedRpc, held: usize, lead: F)
where
    F: std::future::Future + Send + 'static,
    F::Output: Send + 'static,
{
    let (stop, stopped) = std::sync::mpsc::channel::<()>();
    let leader = std::thread::spawn(move || {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        runtime.spawn(lead);
        runtime.block_on(async {
            while stopped.try_recv().is_err() {
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
        });
    });
    gate.wait_held(held, Duration::from_secs(10)).await;
    stop.send(()).unwrap();
    tokio::task::spawn_blocking(move || leader.join().unwrap())
        .await
        .unwrap();
    gate.release();
}

/// `call`'s answer, which must come within 10 s.
async fn within<F: std::future::Future>(call: F) -> F::Output {
    tokio::time::timeout(Duration::from_secs(10), call)
        .await
        .expect("answered")
}

/// A shared read or a grouped broadcast whose task ended without answering (a panic, or its runtime stopped) leaves
/// no state behind that later callers would wait on for ever: the next one asks the node itself.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_shared_read_or_broadcast_whose_task_ended_unanswered_leaves_the_next_its_own() {
    let anvil = Anvil::start(BASE_CHAIN_ID);
    let (gate, client) = gated_client(&anvil).await;
    let signer = PrivateKeySigner::random();
    let wallet = signer.address();
    anvil.set_balance(wallet, U256::from(ONE_ETH)).await;
    client.chain_id_checked().await.unwrap();

    gate.hold_method("eth_getTransactionCount");
    let lead = client.clone();
    led_from_a_runtime_that_stops(&gate, 1, async move { lead.mined_nonce_then_balance(wallet).await }).await;
    assert_eq!(
        within(client.mined_nonce_then_balance(wallet)).await.unwrap(),
        (0, U256::from(ONE_ETH))
    );

    let fees = client.fees().await.unwrap();
    let recipient = Address::repeat_byte(0x08);
    let value = U256::from(ONE_ETH / 1000);
    let gone = signed_transfer(&signer, 0, recipient, value, &fees, 21_000);
    gate.hold_method("eth_sendRawTransaction");
    let lead = client.clone();
    let resent = gone.clone();
    led_from_a_runtime_that_stops(&gate, 2, async move { lead.send_raw(&gone).await }).await;
    // Whether the node took the one that was held is not known: it is sent again, as the watcher would (the same
    // bytes: once at most on chain), and the next one after it; the chain shows both. The held one, released, may
    // reach the node and be mined first: then its resend is answered "nonce too low", which the watcher reads
    // from the chain as it does every such answer.
    match within(client.send_raw(&resent)).await {
        Ok(_) => {}
        Err(ChainError::Refused {
            reason: agentd::chain::RefusalKind::NonceTooLow,
            ..
        }) => assert_eq!(anvil.nonce(wallet).await, 1, "the held broadcast was mined"),
        Err(e) => panic!("the resend: {e}"),
    }
    let next = signed_transfer(&signer, 1, recipient, value, &fees, 21_000);
    within(client.send_raw(&next)).await.unwrap();
    assert_eq!(anvil.nonce(wallet).await, 2);
    assert_eq!(anvil.balance(recipient).await, value * U256::from(2u8));
}
