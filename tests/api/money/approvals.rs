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
use crate::money::policy::{admin_app, call, set_policy};

/// A transfer of 0.01 ETH asked by chat and held for approval, on an agent whose transfers above 0.005 ETH wait
/// (for 900 s), with the node and service it runs on.
struct Held {
    anvil: Anvil,
    app: TestApp,
    agent: CreatedAgent,
    id: String,
    /// The chat answer that asked for it.
    chat: Value,
}

impl Held {
    /// Asserts it waits, with nothing on chain and its reservation held.
    async fn start() -> Self {
        let anvil = Anvil::start(BASE_CHAIN_ID);
        let app = admin_app(&anvil).await;
        let agent = funded_agent(&app, &anvil, Some(0.5)).await;
        let policy = json!({"limits": {"base:ETH": {"approval_above": "0.005"}}, "approval_ttl_secs": 900});
        set_policy(&app, &agent, policy).await;
        let (chat, call) = send_via_chat(&app, &agent, "0.01", fresh_address()).await;
        let result = &call["result"];
        assert_eq!(result["status"], "awaiting_approval", "{call}");
        assert!(result["expires_at"].is_string(), "{call}");
        assert_eq!(anvil.nonce(wallet(&agent)).await, 0, "no nonce is used while it waits");
        assert!(
            spent_on_base(&app, &agent).await > wei(CENT_ETH),
            "it holds its reservation"
        );
        let id = result["transfer_id"].as_str().expect("transfer_id").to_string();
        Self {
            anvil,
            app,
            agent,
            id,
            chat,
        }
    }

    /// `approve` or `reject`, as the owner or as the agent.
    async fn decide(&self, owner: bool, decision: &str) -> (StatusCode, Value) {
        let path = format!("/api/agents/{}/transfers/{}/{decision}", self.agent.id, self.id);
        call(&self.app, &self.agent, owner, Method::POST, &path, None).await
    }

    /// `GET …/approvals`, read with the agent's token.
    async fn waiting(&self) -> Value {
        let path = format!("/api/agents/{}/approvals", self.agent.id);
        let (status, waiting) = call(&self.app, &self.agent, false, Method::GET, &path, None).await;
        assert_eq!(status, StatusCode::OK, "{waiting}");
        waiting
    }

    /// The agent's audit entries with `action`, read as the owner.
    async fn audited(&self, action: &str) -> Vec<Value> {
        let path = format!("/api/agents/{}/audit", self.agent.id);
        let (status, log) = call(&self.app, &self.agent, true, Method::GET, &path, None).await;
        assert_eq!(status, StatusCode::OK, "{log}");
        let entries = log.as_array().expect("audit entries").iter();
        entries.filter(|e| e["action"] == action).cloned().collect()
    }

    /// The wallet's nonce on the node: how many transactions it has sent.
    async fn nonce(&self) -> u64 {
        self.anvil.nonce(wallet(&self.agent)).await
    }
}

#[tokio::test]
async fn an_approved_transfer_is_signed_and_lands_on_chain() {
    let held = Held::start().await;
    let waiting = held.waiting().await;
    assert_eq!(waiting[0]["transfer_id"], held.id.as_str(), "{waiting}");
    assert_eq!(waiting[0]["amount"], "0.01", "{waiting}");
    assert_eq!(waiting[0]["held_by"], json!(["approval_above"]), "{waiting}");
    // The fee figure is the request's: what the reservation holds is the amount and twice that fee.
    let max_fee = waiting[0]["max_fee"].as_str().expect("max_fee");
    let max_fee = alloy::primitives::utils::parse_units(max_fee, 18)
        .expect("a decimal")
        .get_absolute();
    assert!(max_fee > U256::ZERO, "{waiting}");
    assert_eq!(
        spent_on_base(&held.app, &held.agent).await,
        wei(CENT_ETH) + max_fee * U256::from(2),
        "{waiting}"
    );

    let by_agent = held.decide(false, "approve").await;
    assert_error(&by_agent, StatusCode::FORBIDDEN, "owner_required");
    let (status, approved) = held.decide(true, "approve").await;
    assert_eq!(status, StatusCode::OK, "{approved}");
    assert_eq!(approved["id"], held.id.as_str());
    assert!(approved["tx_hash"].is_string(), "{approved}");
    let txs = wait_for_transactions(&held.app, &held.agent, 1, "confirmed").await;
    assert_eq!(txs[0]["id"], held.id.as_str(), "the transfer keeps its id");
    assert_eq!(held.nonce().await, 1, "it landed on chain");
    let again = held.decide(true, "approve").await;
    assert_error(&again, StatusCode::CONFLICT, "transfer_not_pending");
    assert_eq!(held.waiting().await, json!([]));
}

#[tokio::test]
async fn a_rejected_transfer_releases_its_reservation_and_the_stream_tells_both_steps() {
    let held = Held::start().await;
    let (app, agent, id) = (&held.app, &held.agent, held.id.as_str());
    let conversation = held.chat["conversation_id"].as_str().expect("conversation_id");
    let path = format!("/api/conversations/{conversation}/stream?last_event_id=0");
    let mut stream = SseStream::open(app.build(Method::GET, &path, Some(&agent.token), None)).await;
    let required = stream
        .next_named("approval_required", Duration::from_secs(10))
        .await
        .expect("approval_required")
        .json();
    assert_eq!(required["transfer_id"], id, "{required}");
    assert_eq!(required["agent_id"], agent.id.as_str(), "{required}");
    assert_eq!(required["chain"], "base");
    assert_eq!(required["asset"], "ETH");
    assert_eq!(required["amount"], "0.01");

    let (status, rejected) = held.decide(true, "reject").await;
    assert_eq!(status, StatusCode::OK, "{rejected}");
    assert_eq!(rejected["status"], "rejected");
    assert_eq!(
        spent_on_base(app, agent).await,
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
    let approve = held.decide(true, "approve").await;
    assert_error(&approve, StatusCode::CONFLICT, "transfer_not_pending");
    assert_eq!(held.nonce().await, 0);
}

#[tokio::test]
async fn a_rejection_keeps_the_owners_reason_in_its_audit_entry() {
    let held = Held::start().await;
    let path = format!("/api/agents/{}/transfers/{}/reject", held.agent.id, held.id);
    let reject = |body: Value| call(&held.app, &held.agent, true, Method::POST, &path, Some(body));

    for bad in [
        json!({"reason": "x".repeat(501)}),
        json!({"reason": "line\nbreak"}),
        json!({"why": "no"}),
    ] {
        assert_error(
            &reject(bad).await,
            StatusCode::UNPROCESSABLE_ENTITY,
            "validation_failed",
        );
    }
    let (status, rejected) = reject(json!({"reason": "  unknown recipient  "})).await;
    assert_eq!(status, StatusCode::OK, "{rejected}");
    assert_eq!(rejected["status"], "rejected");

    let rejections = held.audited("transfer_rejected").await;
    let [rejection] = rejections.as_slice() else {
        panic!("one transfer_rejected entry: {rejections:?}");
    };
    assert_eq!(rejection["detail"]["transfer_id"], held.id.as_str(), "{rejection}");
    assert_eq!(rejection["detail"]["reason"], "unknown recipient", "{rejection}");
    assert_eq!(rejection["actor"], "admin", "{rejection}");
}

#[tokio::test]
async fn an_expired_transfer_releases_its_reservation_and_cannot_be_approved() {
    let held = Held::start().await;
    // A quarter of an hour passes on the app's clock: the watcher's round expires it once `expires_at` has passed.
    held.app.clock.advance(std::time::Duration::from_secs(901));
    held.app
        .settle_until(
            async || match spent_on_base(&held.app, &held.agent).await != U256::ZERO {
                true => Err("the expiry released the reservation".to_string()),
                false => Ok(()),
            },
        )
        .await;
    let approve = held.decide(true, "approve").await;
    assert_error(&approve, StatusCode::CONFLICT, "transfer_expired");
    let reject = held.decide(true, "reject").await;
    assert_error(&reject, StatusCode::CONFLICT, "transfer_expired");
    assert_eq!(held.nonce().await, 0);
}

#[tokio::test]
async fn an_approval_that_no_longer_fits_the_cap_stays_waiting() {
    let held = Held::start().await;
    // The cap is lowered below what the transfer needs (lowering needs no owner).
    let (status, body) = held
        .app
        .put_agent(&held.agent.id, &held.agent.token, json!({"spending_cap": 0.005}))
        .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    let refused = held.decide(true, "approve").await;
    assert_error(&refused, StatusCode::FORBIDDEN, "spending_cap_exceeded");
    let waiting = held.waiting().await;
    assert_eq!(waiting[0]["transfer_id"], held.id.as_str(), "it still waits: {waiting}");
    assert_eq!(held.nonce().await, 0);
}

/// A decision and its audit entry commit together (issue 22, point 6): while the log takes no entry, an approval
/// answers 500 and signs nothing (the chain shows nonce 0) and a rejection answers 500 with the transfer still
/// waiting; once the log works again the approval lands, audited as the owner's.
#[tokio::test]
async fn a_decision_whose_audit_entry_fails_is_not_taken() {
    let held = Held::start().await;
    crate::auth::audit::refuse_audit_entries(&held.app).await;

    let (status, body) = held.decide(true, "approve").await;
    assert_eq!(status, StatusCode::INTERNAL_SERVER_ERROR, "{body}");
    let (status, body) = held.decide(true, "reject").await;
    assert_eq!(status, StatusCode::INTERNAL_SERVER_ERROR, "{body}");
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert_eq!(held.nonce().await, 0, "nothing was signed and sent");
    let waiting = held.waiting().await;
    assert_eq!(waiting[0]["transfer_id"], held.id.as_str(), "it still waits: {waiting}");

    crate::auth::audit::allow_audit_entries(&held.app).await;
    let (status, approved) = held.decide(true, "approve").await;
    assert_eq!(status, StatusCode::OK, "{approved}");
    wait_for_transactions(&held.app, &held.agent, 1, "confirmed").await;
    assert_eq!(held.nonce().await, 1);
    let approvals = held.audited("transfer_approved").await;
    assert_eq!(approvals.len(), 1, "{approvals:?}");
    assert_eq!(approvals[0]["detail"]["tx_hash"], approved["tx_hash"], "{approvals:?}");
}

/// The rule that held a transfer is the one of the moment it was asked: a policy changed since (here to one that
/// would let it pass) does not rename it.
#[tokio::test]
async fn a_held_transfer_keeps_the_rule_that_held_it_when_the_policy_changes() {
    let held = Held::start().await;
    let new_recipients = json!({"approve_new_recipients": true});
    set_policy(&held.app, &held.agent, new_recipients).await;
    let waiting = held.waiting().await;
    assert_eq!(waiting[0]["held_by"], json!(["approval_above"]), "{waiting}");
    let (status, approved) = held.decide(true, "approve").await;
    assert_eq!(status, StatusCode::OK, "{approved}");
    assert!(
        approved.get("held_by").is_none(),
        "a sent transfer no longer waits: {approved}"
    );
}
