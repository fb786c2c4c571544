//! Transfers held for an owner's approval (docs/api.md §11): they hold their reservation without a nonce; an
//! approval signs and sends them (landing on chain), a rejection or expiry releases the reservation; the
//! conversation stream carries `approval_required` and `approval_resolved`.

use std::time::Duration;

use alloy::primitives::U256;
use reqwest::{Method, StatusCode};
use serde_json::{Value, json};

use crate::anvil::Anvil;
use crate::helpers::chain::{
    BASE_CHAIN_ID, CENT_ETH, fresh_address, funded_agent, send_via_chat, spent_on_base, wait_for_transactions, wallet,
    wei,
};
use crate::helpers::sse::SseStream;
use crate::helpers::{CreatedAgent, TestApp, assert_error};
use crate::policy::{admin_app, call, set_policy};

/// An agent whose transfers above 0.005 ETH wait for approval (`ttl` seconds).
async fn approving_agent(app: &TestApp, anvil: &Anvil, ttl: u64) -> CreatedAgent {
    let agent = funded_agent(app, anvil, Some(0.5)).await;
    let policy = json!({"limits": {"base:ETH": {"approval_above": "0.005"}}, "approval_ttl_secs": ttl});
    set_policy(app, &agent, policy).await;
    agent
}

/// Asks for 0.01 ETH by chat; asserts it waits, with nothing on chain, and returns `(transfer_id, chat body)`.
async fn held_send(app: &TestApp, anvil: &Anvil, agent: &CreatedAgent) -> (String, Value) {
    let (body, call) = send_via_chat(app, agent, "0.01", fresh_address()).await;
    let result = &call["result"];
    assert_eq!(result["status"], "awaiting_approval", "{call}");
    assert!(result["expires_at"].is_string(), "{call}");
    assert_eq!(anvil.nonce(wallet(agent)).await, 0, "no nonce is used while it waits");
    assert!(
        spent_on_base(app, agent).await > wei(CENT_ETH),
        "it holds its reservation"
    );
    (result["transfer_id"].as_str().expect("transfer_id").to_string(), body)
}

async fn decide(app: &TestApp, agent: &CreatedAgent, owner: bool, id: &str, decision: &str) -> (StatusCode, Value) {
    let path = format!("/api/agents/{}/transfers/{id}/{decision}", agent.id);
    call(app, agent, owner, Method::POST, &path, None).await
}

#[tokio::test]
async fn an_approved_transfer_is_signed_and_lands_on_chain() {
    let anvil = Anvil::start(BASE_CHAIN_ID);
    let app = admin_app(&anvil).await;
    let agent = approving_agent(&app, &anvil, 900).await;
    let (id, _) = held_send(&app, &anvil, &agent).await;

    let list = format!("/api/agents/{}/approvals", agent.id);
    let (status, waiting) = call(&app, &agent, false, Method::GET, &list, None).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(waiting[0]["transfer_id"], id.as_str(), "{waiting}");
    assert_eq!(waiting[0]["amount"], "0.01", "{waiting}");

    let by_agent = decide(&app, &agent, false, &id, "approve").await;
    assert_error(&by_agent, StatusCode::FORBIDDEN, "owner_required");
    let (status, approved) = decide(&app, &agent, true, &id, "approve").await;
    assert_eq!(status, StatusCode::OK, "{approved}");
    assert_eq!(approved["id"], id.as_str());
    assert!(approved["tx_hash"].is_string(), "{approved}");
    let txs = wait_for_transactions(&app, &agent, 1, "confirmed").await;
    assert_eq!(txs[0]["id"], id.as_str(), "the transfer keeps its id");
    assert_eq!(anvil.nonce(wallet(&agent)).await, 1, "it landed on chain");
    let again = decide(&app, &agent, true, &id, "approve").await;
    assert_error(&again, StatusCode::CONFLICT, "transfer_not_pending");
    let (_, waiting) = call(&app, &agent, false, Method::GET, &list, None).await;
    assert_eq!(waiting, json!([]));
}

#[tokio::test]
async fn a_rejected_transfer_releases_its_reservation_and_the_stream_tells_both_steps() {
    let anvil = Anvil::start(BASE_CHAIN_ID);
    let app = admin_app(&anvil).await;
    let agent = approving_agent(&app, &anvil, 900).await;
    let (id, body) = held_send(&app, &anvil, &agent).await;
    let conversation = body["conversation_id"].as_str().expect("conversation_id");
    let path = format!("/api/conversations/{conversation}/stream?last_event_id=0");
    let mut stream = SseStream::open(app.build(Method::GET, &path, Some(&agent.token), None)).await;
    let required = stream
        .next_named("approval_required", Duration::from_secs(10))
        .await
        .expect("approval_required")
        .json();
    assert_eq!(required["transfer_id"], id.as_str(), "{required}");
    assert_eq!(required["agent_id"], agent.id.as_str(), "{required}");
    assert_eq!(required["chain"], "base");
    assert_eq!(required["asset"], "ETH");
    assert_eq!(required["amount"], "0.01");

    let (status, rejected) = decide(&app, &agent, true, &id, "reject").await;
    assert_eq!(status, StatusCode::OK, "{rejected}");
    assert_eq!(rejected["status"], "rejected");
    assert_eq!(
        spent_on_base(&app, &agent).await,
        U256::ZERO,
        "the reservation is released"
    );
    let resolved = stream
        .next_named("approval_resolved", Duration::from_secs(10))
        .await
        .expect("approval_resolved")
        .json();
    assert_eq!(
        resolved,
        json!({"type": "approval_resolved", "transfer_id": id, "decision": "rejected"})
    );
    let approve = decide(&app, &agent, true, &id, "approve").await;
    assert_error(&approve, StatusCode::CONFLICT, "transfer_not_pending");
    assert_eq!(anvil.nonce(wallet(&agent)).await, 0);
}

#[tokio::test]
async fn a_rejection_keeps_the_owners_reason_in_its_audit_entry() {
    let anvil = Anvil::start(BASE_CHAIN_ID);
    let app = admin_app(&anvil).await;
    let agent = approving_agent(&app, &anvil, 900).await;
    let (id, _) = held_send(&app, &anvil, &agent).await;
    let path = format!("/api/agents/{}/transfers/{id}/reject", agent.id);

    for bad in [
        json!({"reason": "x".repeat(501)}),
        json!({"reason": "line\nbreak"}),
        json!({"why": "no"}),
    ] {
        let refused = call(&app, &agent, true, Method::POST, &path, Some(bad.clone())).await;
        assert_error(&refused, StatusCode::UNPROCESSABLE_ENTITY, "validation_failed");
    }
    let (status, rejected) = call(
        &app,
        &agent,
        true,
        Method::POST,
        &path,
        Some(json!({"reason": "  unknown recipient  "})),
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{rejected}");
    assert_eq!(rejected["status"], "rejected");

    let audit_path = format!("/api/agents/{}/audit", agent.id);
    let (status, audit) = call(&app, &agent, true, Method::GET, &audit_path, None).await;
    assert_eq!(status, StatusCode::OK, "{audit}");
    let entries = audit.as_array().expect("audit entries");
    let rejection = entries
        .iter()
        .find(|e| e["action"] == "transfer_rejected")
        .unwrap_or_else(|| panic!("a transfer_rejected entry: {audit}"));
    assert_eq!(rejection["detail"]["transfer_id"], id.as_str(), "{rejection}");
    assert_eq!(rejection["detail"]["reason"], "unknown recipient", "{rejection}");
    assert_eq!(rejection["actor"], "admin", "{rejection}");
}

#[tokio::test]
async fn an_expired_transfer_releases_its_reservation_and_cannot_be_approved() {
    let anvil = Anvil::start(BASE_CHAIN_ID);
    let app = admin_app(&anvil).await;
    let agent = approving_agent(&app, &anvil, 1).await;
    let (id, _) = held_send(&app, &anvil, &agent).await;
    // The watcher's round expires it once `expires_at` has passed.
    app.settle_until(async || match spent_on_base(&app, &agent).await != U256::ZERO {
        true => Err("the expiry released the reservation".to_string()),
        false => Ok(()),
    })
    .await;
    let approve = decide(&app, &agent, true, &id, "approve").await;
    assert_error(&approve, StatusCode::CONFLICT, "transfer_expired");
    let reject = decide(&app, &agent, true, &id, "reject").await;
    assert_error(&reject, StatusCode::CONFLICT, "transfer_expired");
    assert_eq!(anvil.nonce(wallet(&agent)).await, 0);
}

#[tokio::test]
async fn an_approval_that_no_longer_fits_the_cap_stays_waiting() {
    let anvil = Anvil::start(BASE_CHAIN_ID);
    let app = admin_app(&anvil).await;
    let agent = approving_agent(&app, &anvil, 900).await;
    let (id, _) = held_send(&app, &anvil, &agent).await;
    // The cap is lowered below what the transfer needs (lowering needs no owner).
    let (status, body) = app
        .put_agent(&agent.id, &agent.token, json!({"spending_cap": 0.005}))
        .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    let refused = decide(&app, &agent, true, &id, "approve").await;
    assert_error(&refused, StatusCode::FORBIDDEN, "spending_cap_exceeded");
    let list = format!("/api/agents/{}/approvals", agent.id);
    let (_, waiting) = call(&app, &agent, false, Method::GET, &list, None).await;
    assert_eq!(waiting[0]["transfer_id"], id.as_str(), "it still waits: {waiting}");
    assert_eq!(anvil.nonce(wallet(&agent)).await, 0);
}

/// A decision and its audit entry commit together (issue 22, point 6): while the log takes no entry, an approval
/// answers 500 and signs nothing (the chain shows nonce 0) and a rejection answers 500 with the transfer still
/// waiting; once the log works again the approval lands, audited as the owner's.
#[tokio::test]
async fn a_decision_whose_audit_entry_fails_is_not_taken() {
    let anvil = Anvil::start(BASE_CHAIN_ID);
    let app = admin_app(&anvil).await;
    let agent = approving_agent(&app, &anvil, 900).await;
    let (id, _) = held_send(&app, &anvil, &agent).await;
    crate::audit::refuse_audit_entries(&app).await;

    let (status, body) = decide(&app, &agent, true, &id, "approve").await;
    assert_eq!(status, StatusCode::INTERNAL_SERVER_ERROR, "{body}");
    let (status, body) = decide(&app, &agent, true, &id, "reject").await;
    assert_eq!(status, StatusCode::INTERNAL_SERVER_ERROR, "{body}");
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert_eq!(anvil.nonce(wallet(&agent)).await, 0, "nothing was signed and sent");
    let list = format!("/api/agents/{}/approvals", agent.id);
    let (_, waiting) = call(&app, &agent, false, Method::GET, &list, None).await;
    assert_eq!(waiting[0]["transfer_id"], id.as_str(), "it still waits: {waiting}");

    crate::audit::allow_audit_entries(&app).await;
    let (status, approved) = decide(&app, &agent, true, &id, "approve").await;
    assert_eq!(status, StatusCode::OK, "{approved}");
    wait_for_transactions(&app, &agent, 1, "confirmed").await;
    assert_eq!(anvil.nonce(wallet(&agent)).await, 1);
    let path = format!("/api/agents/{}/audit", agent.id);
    let (_, log) = call(&app, &agent, true, Method::GET, &path, None).await;
    let approvals: Vec<&Value> = log
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["action"] == "transfer_approved")
        .collect();
    assert_eq!(approvals.len(), 1, "{log}");
    assert_eq!(approvals[0]["detail"]["tx_hash"], approved["tx_hash"], "{log}");
}
