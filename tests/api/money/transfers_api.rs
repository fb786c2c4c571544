//! The transfers API against a real node (anvil): `POST /api/agents/{id}/transfers` moves funds through the same
//! transfer service as the chat tool, refuses with the tool's codes and HTTP statuses, and the transfer reads back;
//! `GET …/transactions` pages newest first.

use reqwest::{Method, StatusCode};
use serde_json::{Value, json};

use crate::anvil::Anvil;
use crate::helpers::chain::{
    BASE_CHAIN_ID, CENT_ETH, ONE_ETH, assert_nothing_sent, fresh_address, funded_agent, sending_agent, transfer_app,
    wait_for_transactions, wallet, wei,
};
use crate::helpers::{CreatedAgent, TestApp, assert_error};

/// `POST /api/agents/{id}/transfers` as the agent.
pub async fn post_transfer(app: &TestApp, agent: &CreatedAgent, body: Value) -> (StatusCode, Value) {
    let path = format!("/api/agents/{}/transfers", agent.id);
    app.request(Method::POST, &path, Some(&agent.token), Some(body)).await
}

fn order(to: impl ToString, amount: &str) -> Value {
    json!({"chain": "base", "to": to.to_string(), "amount": amount})
}

async fn page(app: &TestApp, agent: &CreatedAgent, query: &str) -> (StatusCode, Value) {
    let path = format!("/api/agents/{}/transactions{query}", agent.id);
    app.request(Method::GET, &path, Some(&agent.token), None).await
}

fn ids(page: &Value) -> Vec<String> {
    page.as_array()
        .unwrap_or_else(|| panic!("an array: {page}"))
        .iter()
        .map(|tx| tx["id"].as_str().unwrap_or_default().to_string())
        .collect()
}

/// A send is answered before its entry's round commits (the entry is kept with its reservation): the log read
/// right after each answer shows the send's entry already.
#[tokio::test]
async fn the_audit_log_read_right_after_a_transfers_answer_shows_its_entry() {
    let anvil = Anvil::start(BASE_CHAIN_ID);
    let app = transfer_app(&anvil, &[]).await;
    let agent = funded_agent(&app, &anvil, Some(0.5)).await;
    let to = fresh_address();
    let path = format!("/api/agents/{}/audit?limit=1", agent.id);
    for _ in 0..5 {
        let (status, transfer) = post_transfer(&app, &agent, order(to, "0.001")).await;
        assert_eq!(status, StatusCode::CREATED, "{transfer}");
        let (status, newest) = app.request(Method::GET, &path, Some(&agent.token), None).await;
        assert_eq!(status, StatusCode::OK, "{newest}");
        assert_eq!(newest[0]["action"], "transfer_accepted", "{newest}");
        assert_eq!(newest[0]["detail"]["transfer_id"], transfer["id"], "{newest}");
        assert_eq!(newest[0]["detail"]["tx_hash"], transfer["tx_hash"], "{newest}");
    }
}

#[tokio::test]
async fn an_api_transfer_lands_on_the_node_and_reads_back() {
    let anvil = Anvil::start(BASE_CHAIN_ID);
    let app = transfer_app(&anvil, &[]).await;
    let agent = funded_agent(&app, &anvil, Some(0.5)).await;
    let to = fresh_address();

    let (status, transfer) = post_transfer(&app, &agent, order(to, "0.01")).await;
    assert_eq!(status, StatusCode::CREATED, "{transfer}");
    assert_eq!(transfer["status"], "pending", "{transfer}");
    assert_eq!(transfer["id"], transfer["transfer_id"], "{transfer}");
    assert_eq!(transfer["chain"], "base");
    assert_eq!(transfer["asset"], "ETH");
    assert_eq!(transfer["amount"], "0.01");
    assert_eq!(transfer["nonce"], 0);
    assert_eq!(transfer["to"], to.to_checksum(None));
    assert!(
        transfer["tx_hash"].as_str().is_some_and(|h| h.len() == 66),
        "{transfer}"
    );

    assert_eq!(anvil.nonce(wallet(&agent)).await, 1, "one transaction on the node");
    assert_eq!(
        anvil.balance(to).await,
        wei(CENT_ETH),
        "the recipient got exactly 0.01 ETH"
    );

    let path = format!(
        "/api/agents/{}/transfers/{}",
        agent.id,
        transfer["id"].as_str().unwrap()
    );
    let (status, read) = app.request(Method::GET, &path, Some(&agent.token), None).await;
    assert_eq!(status, StatusCode::OK, "{read}");
    assert_eq!(read["id"], transfer["id"]);
    assert_eq!(read["tx_hash"], transfer["tx_hash"]);
    let txs = wait_for_transactions(&app, &agent, 1, "confirmed").await;
    assert_eq!(txs[0]["id"], transfer["id"], "the transfer is the agent's transaction");
    assert_eq!(anvil.nonce(wallet(&agent)).await, 1, "one transaction on the node");
    assert_eq!(
        anvil.balance(to).await,
        wei(CENT_ETH),
        "the recipient got exactly 0.01 ETH"
    );
    let (_, read) = app.request(Method::GET, &path, Some(&agent.token), None).await;
    assert_eq!(read["status"], "confirmed", "{read}");
}

#[tokio::test]
async fn an_unknown_or_foreign_transfer_is_not_found() {
    let anvil = Anvil::start(BASE_CHAIN_ID);
    let app = transfer_app(&anvil, &[]).await;
    let agent = funded_agent(&app, &anvil, Some(0.5)).await;
    let other = sending_agent(&app, None).await;
    let (status, transfer) = post_transfer(&app, &agent, order(fresh_address(), "0.01")).await;
    assert_eq!(status, StatusCode::CREATED, "{transfer}");
    let id = transfer["id"].as_str().unwrap();

    let foreign = format!("/api/agents/{}/transfers/{id}", other.id);
    let read = app.request(Method::GET, &foreign, Some(&other.token), None).await;
    assert_error(&read, StatusCode::NOT_FOUND, "transfer_not_found");
    for unknown in [uuid::Uuid::new_v4().to_string(), "not-a-uuid".to_string()] {
        let path = format!("/api/agents/{}/transfers/{unknown}", agent.id);
        let read = app.request(Method::GET, &path, Some(&agent.token), None).await;
        assert_error(&read, StatusCode::NOT_FOUND, "transfer_not_found");
    }
}

#[tokio::test]
async fn refused_transfers_answer_the_tool_codes_and_send_nothing() {
    let anvil = Anvil::start(BASE_CHAIN_ID);
    let app = transfer_app(&anvil, &[]).await;
    let to = fresh_address();

    let reader = app
        .create_agent_ok(json!({"name": "reader", "chains": ["base"], "capabilities": ["read"], "spending_cap": 1}))
        .await;
    anvil.set_balance(wallet(&reader), wei(ONE_ETH)).await;
    let refused = post_transfer(&app, &reader, order(to, "0.01")).await;
    assert_error(&refused, StatusCode::FORBIDDEN, "capability_denied");
    assert_nothing_sent(&anvil, &app, &reader).await;

    let capped = funded_agent(&app, &anvil, Some(0.005)).await;
    let refused = post_transfer(&app, &capped, order(to, "0.01")).await;
    assert_error(&refused, StatusCode::FORBIDDEN, "spending_cap_exceeded");
    assert_nothing_sent(&anvil, &app, &capped).await;

    let broke = sending_agent(&app, Some(0.5)).await;
    let refused = post_transfer(&app, &broke, order(to, "0.01")).await;
    assert_error(&refused, StatusCode::UNPROCESSABLE_ENTITY, "insufficient_funds");
    assert_nothing_sent(&anvil, &app, &broke).await;

    let agent = funded_agent(&app, &anvil, Some(0.5)).await;
    let invalid = [
        order("0x1234", "0.01"),
        order(to, "0"),
        order(to, "-1"),
        order(to, "lots"),
        json!({"chain": "ethereum", "to": to.to_string(), "amount": "0.01"}),
        json!({"chain": "base", "to": to.to_string(), "amount": "0.01", "asset": "DOGE"}),
        json!({"chain": "base", "to": to.to_string(), "amount": 0.01}),
        json!({"chain": "base", "to": to.to_string()}),
        json!({"chain": "base", "to": to.to_string(), "amount": "0.01", "memo": "x"}),
    ];
    for body in invalid {
        let refused = post_transfer(&app, &agent, body.clone()).await;
        assert_error(&refused, StatusCode::UNPROCESSABLE_ENTITY, "validation_failed");
    }
    assert_nothing_sent(&anvil, &app, &agent).await;

    let explicit = json!({"chain": "base", "to": to.to_string(), "amount": "0.01", "asset": "eth"});
    let (status, body) = post_transfer(&app, &agent, explicit).await;
    assert_eq!(
        status,
        StatusCode::CREATED,
        "the native symbol is accepted in any case: {body}"
    );
}

#[tokio::test]
async fn only_the_agent_token_sends_and_any_credential_of_the_agent_reads() {
    let anvil = Anvil::start(BASE_CHAIN_ID);
    let app = transfer_app(&anvil, &[("ADMIN_TOKEN", "admin-secret-for-transfers-api")]).await;
    let agent = funded_agent(&app, &anvil, Some(0.5)).await;
    let path = format!("/api/agents/{}/transfers", agent.id);
    let as_admin = app
        .build(Method::POST, &path, None, Some(order(fresh_address(), "0.01")))
        .bearer_auth("admin-secret-for-transfers-api");
    let refused = app.send(as_admin).await;
    assert_eq!(refused.status, StatusCode::UNAUTHORIZED, "{}", refused.body);
    assert_nothing_sent(&anvil, &app, &agent).await;

    let (status, transfer) = post_transfer(&app, &agent, order(fresh_address(), "0.01")).await;
    assert_eq!(status, StatusCode::CREATED, "{transfer}");
    let read = app
        .build(
            Method::GET,
            &format!("{path}/{}", transfer["id"].as_str().unwrap()),
            None,
            None,
        )
        .bearer_auth("admin-secret-for-transfers-api");
    let read = app.send(read).await;
    assert_eq!(
        read.status,
        StatusCode::OK,
        "the operator reads the transfer: {}",
        read.body
    );
}

#[tokio::test]
async fn transactions_page_newest_first_with_limit_and_before() {
    let anvil = Anvil::start(BASE_CHAIN_ID);
    let app = transfer_app(&anvil, &[]).await;
    let agent = funded_agent(&app, &anvil, Some(0.5)).await;
    let mut made = Vec::new();
    for _ in 0..3 {
        let (status, transfer) = post_transfer(&app, &agent, order(fresh_address(), "0.001")).await;
        assert_eq!(status, StatusCode::CREATED, "{transfer}");
        made.push(transfer["id"].as_str().unwrap().to_string());
    }
    made.reverse();

    let (status, all) = page(&app, &agent, "").await;
    assert_eq!(status, StatusCode::OK, "{all}");
    assert_eq!(ids(&all), made, "newest first");
    assert!(
        all[0]["value_wei"].is_string() && all[0]["tx_hash"].is_string(),
        "the existing shape: {all}"
    );

    let (_, first) = page(&app, &agent, "?limit=2").await;
    assert_eq!(ids(&first), made[..2]);
    let (_, rest) = page(&app, &agent, &format!("?limit=2&before={}", made[1])).await;
    assert_eq!(ids(&rest), made[2..]);
    let (_, end) = page(&app, &agent, &format!("?before={}", made[2])).await;
    assert_eq!(ids(&end), Vec::<String>::new());

    for query in ["?limit=0", "?limit=x", "?before=nope", "?before="] {
        let refused = page(&app, &agent, query).await;
        assert_error(&refused, StatusCode::UNPROCESSABLE_ENTITY, "validation_failed");
    }
    let other = sending_agent(&app, None).await;
    let foreign = page(&app, &other, &format!("?before={}", made[0])).await;
    assert_error(&foreign, StatusCode::UNPROCESSABLE_ENTITY, "validation_failed");
}

/// §15: the zero address and the agent's own address (in any spelling) are no recipients; the service refuses them
/// before anything is reserved or signed, and the refusal is audited with its code.
#[tokio::test]
async fn the_zero_address_and_the_agents_own_are_refused_as_recipients() {
    let anvil = Anvil::start(BASE_CHAIN_ID);
    let app = transfer_app(&anvil, &[]).await;
    let agent = funded_agent(&app, &anvil, Some(0.5)).await;
    let own = agent.address("base");
    for to in [
        "0x0000000000000000000000000000000000000000".to_string(),
        own.clone(),
        own.to_lowercase(),
    ] {
        let refused = post_transfer(&app, &agent, order(&to, "0.01")).await;
        assert_error(&refused, StatusCode::UNPROCESSABLE_ENTITY, "invalid_recipient");
    }
    // No nonce taken, nothing stored, nothing reserved against the cap.
    assert_nothing_sent(&anvil, &app, &agent).await;

    let (status, transfer) = post_transfer(&app, &agent, order(fresh_address(), "0.01")).await;
    assert_eq!(status, StatusCode::CREATED, "a real recipient still works: {transfer}");
    assert_eq!(transfer["nonce"], 0, "the refusals used no nonce: {transfer}");
}
