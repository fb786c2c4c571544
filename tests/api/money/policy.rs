//! Policies (docs/api.md §11): validated replacement with owner authority, and every rule refusing a transfer
//! with its name before anything reaches the node, also under concurrent sends on one or two instances.

use alloy::primitives::{Address, U256};
use futures::future::join_all;
use reqwest::{Method, StatusCode};
use serde_json::{Value, json};

use crate::anvil::Anvil;
use crate::helpers::chain::{
    BASE_CHAIN_ID, CENT_ETH, ONE_ETH, chat, fresh_address, funded_agent, refusal_code, send_call, send_via_chat,
    sent_hash, transfer_app, wallet, wei,
};
use crate::helpers::{CreatedAgent, TestApp, assert_error};

pub const ADMIN: &str = "admin-token-for-policy-tests-0123456789";

/// A transfer app on `anvil` whose operator holds `ADMIN`, so every agent is guarded.
pub async fn admin_app(anvil: &Anvil) -> TestApp {
    transfer_app(anvil, &[("ADMIN_TOKEN", ADMIN)]).await
}

/// A request with the agent token and, when `owner`, the admin bearer (owner authority).
pub async fn call(
    app: &TestApp,
    agent: &CreatedAgent,
    owner: bool,
    method: Method,
    path: &str,
    body: Option<Value>,
) -> (StatusCode, Value) {
    let mut builder = app.build(method, path, Some(&agent.token), body);
    if owner {
        builder = builder.bearer_auth(ADMIN);
    }
    let response = app.send(builder).await;
    (response.status, response.body)
}

/// Replaces the policy with owner authority; insists on a 200.
pub async fn set_policy(app: &TestApp, agent: &CreatedAgent, policy: Value) {
    let path = format!("/api/agents/{}/policy", agent.id);
    let (status, body) = call(app, agent, true, Method::PUT, &path, Some(policy)).await;
    assert_eq!(status, StatusCode::OK, "{body}");
}

#[tokio::test]
async fn a_policy_is_replaced_whole_by_an_owner_and_read_back() {
    let anvil = Anvil::start(BASE_CHAIN_ID);
    let app = admin_app(&anvil).await;
    let agent = funded_agent(&app, &anvil, Some(0.5)).await;
    let path = format!("/api/agents/{}/policy", agent.id);
    let (status, default) = call(&app, &agent, false, Method::GET, &path, None).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(
        default,
        json!({"limits": {}, "allowed_recipients": null, "blocked_recipients": [], "approve_new_recipients": false,
            "approval_ttl_secs": 900, "allowed_hosts": null})
    );
    let blocked = fresh_address();
    let policy = json!({"limits": {"base:ETH": {"per_transfer": "0.05", "per_day": "0.2", "approval_above": "0.01"}},
        "blocked_recipients": [blocked.to_string().to_lowercase()], "allowed_hosts": ["api.example.com:8443"]});
    let refused = call(&app, &agent, false, Method::PUT, &path, Some(policy.clone())).await;
    assert_error(&refused, StatusCode::FORBIDDEN, "owner_required");
    set_policy(&app, &agent, policy).await;
    let (_, stored) = call(&app, &agent, false, Method::GET, &path, None).await;
    assert_eq!(
        stored["limits"]["base:ETH"],
        json!({"per_transfer": "0.05", "per_day": "0.2", "approval_above": "0.01"})
    );
    assert_eq!(stored["blocked_recipients"], json!([blocked.to_checksum(None)]));
    assert_eq!(stored["approval_ttl_secs"], 900);
    assert_eq!(stored["allowed_hosts"], json!(["api.example.com:8443"]));
}

#[tokio::test]
async fn invalid_policies_are_refused_field_by_field() {
    let anvil = Anvil::start(BASE_CHAIN_ID);
    let app = admin_app(&anvil).await;
    let agent = funded_agent(&app, &anvil, Some(0.5)).await;
    let path = format!("/api/agents/{}/policy", agent.id);
    for bad in [
        json!({"limits": {"base:DOGE": {}}}),
        json!({"limits": {"mars:ETH": {}}}),
        json!({"limits": {"base:ETH": {"per_day": "-1"}}}),
        json!({"limits": {"base:ETH": {"per_day": "0.0000000000000000001"}}}),
        json!({"blocked_recipients": ["0x1234"]}),
        json!({"approval_ttl_secs": 0}),
        json!({"allowed_hosts": ["not a host"]}),
        json!({"surprise": true}),
    ] {
        let response = call(&app, &agent, true, Method::PUT, &path, Some(bad.clone())).await;
        assert_eq!(response.0, StatusCode::UNPROCESSABLE_ENTITY, "{bad} -> {}", response.1);
    }
}

#[tokio::test]
async fn approval_rules_on_an_unguarded_agent_are_refused() {
    let anvil = Anvil::start(BASE_CHAIN_ID);
    let app = transfer_app(&anvil, &[]).await;
    let agent = funded_agent(&app, &anvil, Some(0.5)).await;
    let path = format!("/api/agents/{}/policy", agent.id);
    for rules in [
        json!({"approve_new_recipients": true}),
        json!({"limits": {"base:ETH": {"approval_above": "0.01"}}}),
    ] {
        let response = call(&app, &agent, false, Method::PUT, &path, Some(rules)).await;
        assert_error(&response, StatusCode::UNPROCESSABLE_ENTITY, "validation_failed");
    }
    // Limits alone need nobody: the unguarded agent's token may set them.
    let limits = json!({"limits": {"base:ETH": {"per_day": "1"}}});
    let response = call(&app, &agent, false, Method::PUT, &path, Some(limits)).await;
    assert_eq!(response.0, StatusCode::OK, "{}", response.1);
}

/// Sends 0.01 ETH to `to` by chat and asserts it was refused for `rule`, with nothing sent on chain.
async fn assert_refused_for(app: &TestApp, anvil: &Anvil, agent: &CreatedAgent, to: Address, rule: &str) {
    // Settled: anvil answers a broadcast before it seals the block, so a plain read can miss the last transfer.
    let nonce_before = anvil.nonce(wallet(agent)).await;
    let (_, call) = send_via_chat(app, agent, "0.01", to).await;
    assert_eq!(refusal_code(&call), "policy_denied", "{call}");
    assert_eq!(call["error"]["details"]["rule"], rule, "{call}");
    assert_eq!(
        anvil.nonce(wallet(agent)).await,
        nonce_before,
        "nothing reached the node"
    );
}

#[tokio::test]
async fn each_rule_refuses_with_its_name_and_nothing_reaches_the_node() {
    let anvil = Anvil::start(BASE_CHAIN_ID);
    let app = admin_app(&anvil).await;
    let agent = funded_agent(&app, &anvil, Some(0.5)).await;
    let to = fresh_address();
    let limits = |l: Value| json!({"limits": {"base:ETH": l}});

    set_policy(&app, &agent, limits(json!({"per_transfer": "0.009"}))).await;
    assert_refused_for(&app, &anvil, &agent, to, "per_transfer").await;

    set_policy(&app, &agent, json!({"limits": {"ethereum:ETH": {}}})).await;
    assert_refused_for(&app, &anvil, &agent, to, "asset_not_allowed").await;

    set_policy(
        &app,
        &agent,
        json!({"allowed_recipients": [fresh_address().to_string()]}),
    )
    .await;
    assert_refused_for(&app, &anvil, &agent, to, "recipient_not_allowed").await;

    let upper = format!("0x{}", to.to_string()[2..].to_uppercase());
    set_policy(&app, &agent, json!({"blocked_recipients": [upper]})).await;
    assert_refused_for(&app, &anvil, &agent, to, "recipient_blocked").await;

    // One transfer fits the day exactly (limits are inclusive); the next one does not.
    set_policy(&app, &agent, limits(json!({"per_day": "0.01", "per_week": "0.015"}))).await;
    let (_, first) = send_via_chat(&app, &agent, "0.01", to).await;
    sent_hash(&first);
    assert_refused_for(&app, &anvil, &agent, to, "per_day").await;
    set_policy(&app, &agent, limits(json!({"per_day": "1", "per_week": "0.015"}))).await;
    assert_refused_for(&app, &anvil, &agent, to, "per_week").await;
    assert_eq!(
        anvil.nonce(wallet(&agent)).await,
        1,
        "only the transfer that fitted was sent"
    );
}

/// Fires `count` simultaneous 0.01 ETH sends at each app and returns how many were accepted; the others must
/// be refused for `per_day`.
async fn burst(apps: &[&TestApp], agent: &CreatedAgent, count: usize) -> usize {
    let to = fresh_address();
    let message = format!("send 0.01 ETH to {to} on base");
    let turns = apps
        .iter()
        .flat_map(|app| std::iter::repeat_n(*app, count))
        .map(|app| chat(app, agent, &message));
    let calls: Vec<Value> = join_all(turns).await.iter().map(send_call).collect();
    let mut accepted = 0;
    for call in &calls {
        if call.get("error").is_none_or(Value::is_null) {
            accepted += 1;
        } else {
            assert_eq!(call["error"]["details"]["rule"], "per_day", "{call}");
        }
    }
    accepted
}

#[tokio::test]
async fn twenty_concurrent_sends_against_a_daily_limit_accept_exactly_what_fits() {
    let anvil = Anvil::start(BASE_CHAIN_ID);
    let app = admin_app(&anvil).await;
    let agent = funded_agent(&app, &anvil, Some(0.9)).await;
    set_policy(&app, &agent, json!({"limits": {"base:ETH": {"per_day": "0.07"}}})).await;
    assert_eq!(burst(&[&app], &agent, 20).await, 7);
    assert_eq!(anvil.nonce(wallet(&agent)).await, 7);
    assert!(anvil.balance(wallet(&agent)).await <= wei(ONE_ETH) - U256::from(7 * CENT_ETH));
}

#[tokio::test]
async fn a_daily_limit_holds_across_two_instances_on_one_postgresql() {
    if std::env::var("TEST_POSTGRES_URL").is_err() {
        return; // two instances share a database only on PostgreSQL
    }
    let anvil = Anvil::start(BASE_CHAIN_ID);
    let first = admin_app(&anvil).await;
    let second = transfer_app(&anvil, &[("ADMIN_TOKEN", ADMIN), ("DATABASE_URL", &first.db_url)]).await;
    let agent = funded_agent(&first, &anvil, Some(0.9)).await;
    set_policy(&first, &agent, json!({"limits": {"base:ETH": {"per_day": "0.05"}}})).await;
    assert_eq!(burst(&[&first, &second], &agent, 10).await, 5);
    assert_eq!(anvil.nonce(wallet(&agent)).await, 5);
}

/// `POST /api/agents/{id}/transfers` of `amount` ETH on base to `to` as the agent.
async fn transfer(app: &TestApp, agent: &CreatedAgent, amount: &str, to: Address) -> (StatusCode, Value) {
    let path = format!("/api/agents/{}/transfers", agent.id);
    let body = json!({"chain": "base", "to": to.to_string(), "amount": amount});
    call(app, agent, false, Method::POST, &path, Some(body)).await
}

/// `GET /api/agents/{id}/budget` as the agent (`owner`: with owner authority too); insists on a 200.
async fn budget(app: &TestApp, agent: &CreatedAgent, owner: bool) -> Value {
    let path = format!("/api/agents/{}/budget", agent.id);
    let (status, body) = call(app, agent, owner, Method::GET, &path, None).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    body
}

#[tokio::test]
async fn the_budget_counts_pending_and_held_transfers_and_its_left_is_what_the_next_decision_allows() {
    let anvil = Anvil::start(BASE_CHAIN_ID);
    let app = admin_app(&anvil).await;
    let agent = funded_agent(&app, &anvil, Some(0.5)).await;
    let to = fresh_address();
    let fresh = budget(&app, &agent, false).await;
    assert_eq!(fresh["limits"], json!({}), "{fresh}");
    assert_eq!(
        fresh["caps"]["base"],
        json!({"limit": "0.5", "counted": "0", "left": "0.5"}),
        "{fresh}"
    );
    set_policy(
        &app,
        &agent,
        json!({"limits": {"base:ETH": {"per_transfer": "0.06", "per_day": "0.1", "per_week": "0.2",
            "approval_above": "0.03"}}}),
    )
    .await;
    let untouched = budget(&app, &agent, true).await;
    assert_eq!(
        untouched["limits"]["base:ETH"],
        json!({"per_day": {"limit": "0.1", "counted": "0", "left": "0.1"},
               "per_week": {"limit": "0.2", "counted": "0", "left": "0.2"}})
    );

    // One sent (pending or mined), one held for approval: both count in the windows.
    let (status, sent) = transfer(&app, &agent, "0.02", to).await;
    assert_eq!(status, StatusCode::CREATED, "{sent}");
    let (status, held) = transfer(&app, &agent, "0.05", to).await;
    assert_eq!(status, StatusCode::CREATED, "{held}");
    assert_eq!(held["status"], "awaiting_approval", "{held}");
    // The rule that held it and its threshold, as they were when it was held.
    assert_eq!(held["held_by"], json!(["approval_above"]), "{held}");
    assert_eq!(held["held_above"], "0.03", "{held}");
    let approvals = format!("/api/agents/{}/approvals", agent.id);
    set_policy(
        &app,
        &agent,
        json!({"limits": {"base:ETH": {"per_transfer": "0.06", "per_day": "0.1", "per_week": "0.2",
            "approval_above": "0.04"}}}),
    )
    .await;
    let (_, waiting) = call(&app, &agent, true, Method::GET, &approvals, None).await;
    assert_eq!(waiting[0]["held_above"], "0.03", "{waiting}");
    let counted = budget(&app, &agent, false).await;
    assert_eq!(
        counted["limits"]["base:ETH"],
        json!({"per_day": {"limit": "0.1", "counted": "0.07", "left": "0.03"},
               "per_week": {"limit": "0.2", "counted": "0.07", "left": "0.13"}}),
        "{counted}"
    );
    let cap = &counted["caps"]["base"];
    assert_eq!(cap["limit"], "0.5");
    assert_ne!(cap["counted"], "0", "the reservations count against the cap: {counted}");

    // The refusals say it in words, with the figures the decision used.
    let (status, over) = transfer(&app, &agent, "0.07", to).await;
    assert_eq!(status, StatusCode::FORBIDDEN, "{over}");
    assert_eq!(over["error"]["details"]["rule"], "per_transfer");
    let message = over["error"]["message"].as_str().unwrap_or_default();
    assert!(
        message.contains("over the per-transfer limit of 0.06 ETH: it asked 0.07"),
        "{message}"
    );

    // One unit more than `left` is refused; exactly `left` passes.
    let (status, over) = transfer(&app, &agent, "0.030000000000000001", to).await;
    assert_eq!(status, StatusCode::FORBIDDEN, "{over}");
    assert_eq!(over["error"]["code"], "policy_denied");
    assert_eq!(over["error"]["details"]["rule"], "per_day");
    let message = over["error"]["message"].as_str().unwrap_or_default();
    assert!(
        message.contains(
            "over the daily limit of 0.1 ETH: 0.07 was already counted in the last 24 h, 0.03 was left, and it \
             asked 0.030000000000000001"
        ),
        "{message}"
    );
    let (status, exact) = transfer(&app, &agent, "0.03", to).await;
    assert_eq!(status, StatusCode::CREATED, "{exact}");
    let spent = budget(&app, &agent, false).await;
    assert_eq!(
        spent["limits"]["base:ETH"]["per_day"],
        json!({"limit": "0.1", "counted": "0.1", "left": "0"}),
        "{spent}"
    );
    assert_eq!(spent["limits"]["base:ETH"]["per_week"]["left"], "0.1", "{spent}");

    // A rejected transfer leaves the windows.
    let id = held["id"].as_str().expect("an id");
    let path = format!("/api/agents/{}/transfers/{id}/reject", agent.id);
    let (status, body) = call(&app, &agent, true, Method::POST, &path, None).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    let after = budget(&app, &agent, false).await;
    assert_eq!(after["limits"]["base:ETH"]["per_day"]["left"], "0.05", "{after}");
}
