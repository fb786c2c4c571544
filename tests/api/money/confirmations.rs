//! The confirmation watcher and the conversation stream: a mined transfer is reported as a `tx_confirmation`
//! event (live, replayed after `Last-Event-ID`, and as an assistant message), `CONFIRMATIONS_<CHAIN>` is honoured,
//! and a reverted transfer is reported as reverted with only its fee counted.

use std::time::Duration;

use alloy::network::TransactionBuilder;
use alloy::primitives::{Address, Bytes, TxHash, U256};
use alloy::providers::Provider;
use alloy::rpc::types::TransactionRequest;
use serde_json::{Value, json};

use crate::anvil::Anvil;
use crate::helpers::chain::{
    BASE_CHAIN_ID, CENT_ETH, assert_nothing_sent, confirmation_messages, fresh_address, funded_agent, node_cost,
    refusal_code, send_via_chat, sent_hash, spent_on_base, transactions, transfer_app, wait_for_transactions, wallet,
    wei,
};
use crate::helpers::sse::{SseEvent, SseStream};
use crate::helpers::{CreatedAgent, TOKEN_HEADER, TestApp};

/// How long an event that should come may take.
const EVENT_TIMEOUT: Duration = Duration::from_secs(10);

fn stream_path(conversation_id: &str) -> String {
    format!("/api/conversations/{conversation_id}/stream")
}

/// Opens the conversation stream with the token in the header and `extra` headers.
async fn open_stream(app: &TestApp, agent: &CreatedAgent, conversation_id: &str, extra: &[(&str, &str)]) -> SseStream {
    let mut builder = app
        .client
        .get(app.url(&stream_path(conversation_id)))
        .header(TOKEN_HEADER, &agent.token);
    for (name, value) in extra {
        builder = builder.header(*name, *value);
    }
    SseStream::open(builder).await
}

/// The first event of every stream is a `ping`.
#[track_caller]
fn assert_ping(event: Option<SseEvent>) {
    let event = event.expect("a ping on connect");
    assert_eq!(event.event, "ping", "the first event is a ping: {event:?}");
}

/// The next `tx_confirmation` event (`what` names it when it does not come within `EVENT_TIMEOUT`).
async fn next_confirmation(stream: &mut SseStream, what: &str) -> SseEvent {
    stream
        .next_named("tx_confirmation", EVENT_TIMEOUT)
        .await
        .unwrap_or_else(|| panic!("{what}"))
}

/// A replayed event carries the live one's name, id and data.
#[track_caller]
fn assert_same_event(replayed: &SseEvent, live: &SseEvent) {
    assert_eq!(replayed.event, live.event, "{replayed:?}");
    assert_eq!(replayed.id, live.id, "the replay keeps the id: {replayed:?}");
    assert_eq!(replayed.json(), live.json(), "the replay keeps the data");
}

/// Sends 0.01 ETH to `to` through the chat; returns the conversation id and the hash.
async fn send_cent(app: &TestApp, agent: &CreatedAgent, to: Address) -> (String, TxHash) {
    let (body, call) = send_via_chat(app, agent, "0.01", to).await;
    let conversation_id = body["conversation_id"]
        .as_str()
        .unwrap_or_else(|| panic!("conversation_id: {body}"))
        .to_string();
    (conversation_id, sent_hash(&call))
}

#[tokio::test]
async fn the_confirmation_arrives_on_the_stream_after_mining_and_is_replayed() {
    let anvil = Anvil::start(BASE_CHAIN_ID);
    anvil.set_automine(false).await;
    let app = transfer_app(&anvil, &[]).await;
    let agent = funded_agent(&app, &anvil, Some(0.5)).await;
    let to = fresh_address();

    let (conversation_id, hash) = send_cent(&app, &agent, to).await;
    let mut stream = open_stream(&app, &agent, &conversation_id, &[]).await;
    assert_ping(stream.next_event(EVENT_TIMEOUT).await);
    // Not mined yet: no confirmation.
    let early = stream.next_named("tx_confirmation", Duration::from_millis(500)).await;
    assert!(early.is_none(), "nothing is confirmed before a block: {early:?}");
    assert_eq!(transactions(&app, &agent).await[0]["status"], "pending");

    anvil.mine(1).await;
    let event = next_confirmation(&mut stream, "a tx_confirmation after the block").await;
    let id = event.id_number();
    assert!(id > 0, "event ids start after 0: {event:?}");
    let data = event.json();
    let receipt = anvil.receipt(hash).await;
    let block = receipt.block_number.expect("a block number");
    assert_eq!(data["type"], "tx_confirmation", "{data}");
    assert_eq!(data["conversation_id"], conversation_id, "{data}");
    assert_eq!(data["agent_id"], agent.id, "{data}");
    assert_eq!(data["chain"], "base", "{data}");
    assert_eq!(data["tx_hash"], hash.to_string(), "{data}");
    assert_eq!(data["status"], "confirmed", "{data}");
    assert_eq!(data["block_number"], json!(block), "{data}");
    assert_eq!(data["gas_used"], json!(receipt.gas_used), "{data}");
    assert!(data["confirmations"].as_u64().is_some_and(|c| c >= 1), "{data}");
    assert!(
        data["explorer_url"]
            .as_str()
            .is_some_and(|u| u.starts_with("http") && u.contains(&hash.to_string())),
        "{data}"
    );
    assert_eq!(anvil.balance(to).await, wei(CENT_ETH));

    // Late subscribers: `Last-Event-ID: 0` (header) and `?last_event_id=0` (query, token in the query too)
    // get the event replayed, with the same id and data.
    let mut from_header = open_stream(&app, &agent, &conversation_id, &[("Last-Event-ID", "0")]).await;
    assert_ping(from_header.next_event(EVENT_TIMEOUT).await);
    let replayed = from_header.next_event(EVENT_TIMEOUT).await.expect("the replayed event");
    assert_same_event(&replayed, &event);

    let query = format!(
        "{}?last_event_id=0&access_token={}",
        stream_path(&conversation_id),
        agent.token
    );
    let mut from_query = SseStream::open(app.client.get(app.url(&query))).await;
    assert_ping(from_query.next_event(EVENT_TIMEOUT).await);
    let replayed = from_query.next_event(EVENT_TIMEOUT).await.expect("the replayed event");
    assert_same_event(&replayed, &event);

    // A subscriber that already has it gets nothing but the ping.
    let last = id.to_string();
    let mut caught_up = open_stream(&app, &agent, &conversation_id, &[("Last-Event-ID", &last)]).await;
    let events = caught_up.collect_for(Duration::from_millis(700)).await;
    assert_eq!(events.len(), 1, "only a ping: {events:?}");
    assert_eq!(events[0].event, "ping", "{events:?}");

    // The conversation holds the confirmation as an assistant message.
    let messages = app.messages(&agent, &conversation_id).await;
    let last = messages.last().expect("messages");
    assert_eq!(last["role"], "assistant", "{messages:#?}");
    let content = last["content"].as_str().unwrap_or_default();
    assert!(
        content.contains(&hash.to_string()) && content.contains("confirmed"),
        "the confirmation message names the hash and the outcome: {content}"
    );
    assert_eq!(
        confirmation_messages(&messages),
        1,
        "one confirmation message: {messages:#?}"
    );
}

#[tokio::test]
async fn the_confirmation_waits_for_the_configured_depth() {
    let anvil = Anvil::start(BASE_CHAIN_ID);
    anvil.set_automine(false).await;
    let app = transfer_app(&anvil, &[("CONFIRMATIONS_BASE", "3")]).await;
    let agent = funded_agent(&app, &anvil, Some(0.5)).await;

    let (conversation_id, hash) = send_cent(&app, &agent, fresh_address()).await;
    let mut stream = open_stream(&app, &agent, &conversation_id, &[]).await;
    assert_ping(stream.next_event(EVENT_TIMEOUT).await);

    anvil.mine(1).await;
    let included = anvil.block_number().await;
    let early = stream.next_named("tx_confirmation", Duration::from_secs(1)).await;
    assert!(early.is_none(), "one block of three is not enough: {early:?}");
    let txs = transactions(&app, &agent).await;
    assert_eq!(txs[0]["status"], "pending", "still pending after one block: {txs:?}");

    anvil.mine(2).await;
    let event = next_confirmation(&mut stream, "a tx_confirmation after three blocks").await;
    let data = event.json();
    assert_eq!(data["status"], "confirmed", "{data}");
    assert_eq!(data["tx_hash"], hash.to_string(), "{data}");
    assert_eq!(data["block_number"], json!(included), "{data}");
    assert!(data["confirmations"].as_u64().is_some_and(|c| c >= 3), "{data}");
    wait_for_transactions(&app, &agent, 1, "confirmed").await;
}

#[tokio::test]
async fn a_confirmation_reaches_subscribers_on_every_instance_sharing_postgres() {
    if !std::env::var("TEST_POSTGRES_URL").is_ok_and(|url| !url.trim().is_empty()) {
        println!("skipped: instances share events only on PostgreSQL (set TEST_POSTGRES_URL)");
        return;
    }
    let anvil = Anvil::start(BASE_CHAIN_ID);
    anvil.set_automine(false).await;
    let first = transfer_app(&anvil, &[]).await;
    let second = crate::money::transfer_concurrency::second_instance(&first, &anvil).await;
    let agent = funded_agent(&first, &anvil, Some(0.5)).await;

    let (conversation_id, hash) = send_cent(&first, &agent, fresh_address()).await;
    let mut on_first = open_stream(&first, &agent, &conversation_id, &[]).await;
    let mut on_second = open_stream(&second, &agent, &conversation_id, &[]).await;
    assert_ping(on_first.next_event(EVENT_TIMEOUT).await);
    assert_ping(on_second.next_event(EVENT_TIMEOUT).await);

    // Only one instance's watcher settles it; the other hears of it through the database.
    anvil.mine(1).await;
    let from_first = next_confirmation(&mut on_first, "the event on the first instance").await;
    let from_second = next_confirmation(&mut on_second, "the event on the second instance").await;
    assert_same_event(&from_second, &from_first);
    assert_eq!(from_first.json()["tx_hash"], hash.to_string());
    // Settled once: no second event on either stream.
    for stream in [&mut on_first, &mut on_second] {
        let more = stream.next_named("tx_confirmation", Duration::from_millis(500)).await;
        assert!(more.is_none(), "one event per change: {more:?}");
    }
    let messages = second.messages(&agent, &conversation_id).await;
    assert_eq!(confirmation_messages(&messages), 1, "one confirmation message");
}

/// Init code that deploys `runtime`: CODECOPY it to memory and RETURN it.
fn init_code(runtime: &[u8]) -> Bytes {
    let len = u8::try_from(runtime.len()).expect("a short runtime");
    let mut code = vec![
        0x60, len, // PUSH1 len
        0x60, 0x0c, // PUSH1 12 (where the runtime starts in this code)
        0x60, 0x00, // PUSH1 0
        0x39, // CODECOPY
        0x60, len, // PUSH1 len
        0x60, 0x00, // PUSH1 0
        0xf3, // RETURN
    ];
    code.extend_from_slice(runtime);
    Bytes::from(code)
}

/// Deploys `runtime` from anvil's (unlocked) development account; returns the contract address.
async fn deploy(anvil: &Anvil, runtime: &[u8]) -> Address {
    let dev: Address = Anvil::DEV_ADDRESS.parse().unwrap();
    let request = TransactionRequest::default()
        .with_from(dev)
        .with_deploy_code(init_code(runtime));
    let receipt = anvil
        .provider()
        .send_transaction(request)
        .await
        .expect("eth_sendTransaction of the deployment")
        .get_receipt()
        .await
        .expect("the deployment is mined");
    assert!(receipt.status(), "the deployment succeeded: {receipt:?}");
    let address = receipt.contract_address.expect("a contract address");
    let code = anvil.provider().get_code_at(address).await.expect("eth_getCode");
    assert_eq!(code.as_ref(), runtime, "the runtime code is deployed");
    address
}

#[tokio::test]
async fn a_send_to_a_contract_that_always_reverts_is_refused_before_anything_is_stored() {
    let anvil = Anvil::start(BASE_CHAIN_ID);
    // PUSH1 0 PUSH1 0 REVERT: refuses every call, so eth_estimateGas fails.
    let contract = deploy(&anvil, &[0x60, 0x00, 0x60, 0x00, 0xfd]).await;
    let app = transfer_app(&anvil, &[]).await;
    let agent = funded_agent(&app, &anvil, Some(0.5)).await;

    let (body, call) = send_via_chat(&app, &agent, "0.01", contract).await;
    let code = refusal_code(&call);
    println!(
        "send to an always-reverting contract refused with {code}: {}",
        call["error"]
    );
    assert!(
        !["capability_denied", "spending_cap_exceeded", "insufficient_funds"].contains(&code.as_str()),
        "the refusal is the node's, not a cap or funds one: {call}"
    );
    assert!(!body["response"].as_str().unwrap_or_default().is_empty(), "{body}");
    assert_nothing_sent(&anvil, &app, &agent).await;
    assert_eq!(anvil.balance(contract).await, U256::ZERO);
}

#[tokio::test]
async fn a_transfer_that_reverts_on_chain_is_reported_reverted_and_counts_only_its_fee() {
    let anvil = Anvil::start(BASE_CHAIN_ID);
    // Accepts ETH while TIMESTAMP < deadline, reverts from then on; the deadline is far in the future, so the
    // service's gas estimate succeeds, and the test then mines the transfer in a block at the deadline.
    let deadline = u32::try_from(crate::helpers::now_unix() + 100_000).unwrap();
    let d = deadline.to_be_bytes();
    #[rustfmt::skip]
    let runtime = [
        0x42,                               // TIMESTAMP
        0x63, d[0], d[1], d[2], d[3],       // PUSH4 deadline
        0x11,                               // GT: deadline > timestamp
        0x60, 0x0f,                         // PUSH1 ok
        0x57,                               // JUMPI
        0x60, 0x00, 0x60, 0x00, 0xfd,       // PUSH1 0 PUSH1 0 REVERT
        0x5b, 0x00,                         // ok: JUMPDEST STOP
    ];
    let contract = deploy(&anvil, &runtime).await;
    anvil.set_automine(false).await;
    let app = transfer_app(&anvil, &[]).await;
    let agent = funded_agent(&app, &anvil, Some(0.5)).await;

    let (conversation_id, hash) = send_cent(&app, &agent, contract).await;
    let mut stream = open_stream(&app, &agent, &conversation_id, &[]).await;
    assert_ping(stream.next_event(EVENT_TIMEOUT).await);
    let _: Value = anvil
        .provider()
        .raw_request("evm_setNextBlockTimestamp".into(), (u64::from(deadline),))
        .await
        .expect("evm_setNextBlockTimestamp");
    anvil.mine(1).await;

    let (cost, success) = node_cost(&anvil, hash).await;
    assert!(!success, "the transfer reverted on chain");
    let event = next_confirmation(&mut stream, "an event for the reverted transfer").await;
    let data = event.json();
    assert_eq!(data["status"], "reverted", "{data}");
    assert_eq!(data["tx_hash"], hash.to_string(), "{data}");
    assert!(data["block_number"].is_u64() && data["gas_used"].is_u64(), "{data}");

    wait_for_transactions(&app, &agent, 1, "reverted").await;
    assert_eq!(anvil.balance(contract).await, U256::ZERO, "no value moved");
    assert_eq!(anvil.nonce(wallet(&agent)).await, 1, "the nonce is used");
    assert!(cost > U256::ZERO && cost < wei(CENT_ETH), "only a fee: {cost}");
    assert_eq!(
        spent_on_base(&app, &agent).await,
        cost,
        "only the fee counts against the cap"
    );
    let content = app.messages(&agent, &conversation_id).await.last().unwrap()["content"].clone();
    assert!(content.as_str().unwrap_or_default().contains("reverted"), "{content}");
}
