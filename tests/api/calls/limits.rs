//! A contract call's outflows against its assets' limits (docs/api.md §11, §18), said the way a transfer's are: the
//! `approval_above` threshold that held a call is recorded with the asset whose count was above it, and a call
//! refused over `per_transfer` or `per_day` names the limit, what was counted, what was left and what it asked, in
//! whole units of that asset. Against the real Uniswap V2 contracts on anvil; the chain shows what moved.

use alloy::primitives::{Address, U256};
use reqwest::{Method, StatusCode};
use serde_json::{Value, json};

use crate::calls::contract::{Setup, USDC, allowance_on_chain, post, setup_with};
use crate::helpers::assert_error;
use crate::helpers::chain::{wait_for_transactions, wallet};
use crate::money::policy::ADMIN;

/// A guarded agent (the operator holds `ADMIN`) on base with 1,000 USDC and 1 ETH, and the Uniswap V2 router.
async fn setup() -> Setup {
    setup_with(&[("ADMIN_TOKEN", ADMIN)]).await
}

async fn owner(s: &Setup, method: Method, path: &str, body: Option<Value>) -> (StatusCode, Value) {
    let path = format!("/api/agents/{}/{path}", s.agent.id);
    crate::money::policy::call(&s.app, &s.agent, true, method, &path, body).await
}

async fn put_policy(s: &Setup, policy: Value) {
    let (status, body) = owner(s, Method::PUT, "policy", Some(policy)).await;
    assert_eq!(status, StatusCode::OK, "{body}");
}

fn approve(s: &Setup, amount: u64) -> Value {
    json!({"chain": "base", "to": s.uni.usdc.to_string(), "function": "approve(address,uint256)",
        "args": [s.uni.router.to_string(), (amount * USDC).to_string()]})
}

async fn router_allowance(s: &Setup) -> U256 {
    allowance_on_chain(s, s.uni.router).await
}

#[tokio::test]
async fn a_call_held_above_a_token_threshold_states_the_threshold_of_that_token() {
    let s = setup().await;
    put_policy(
        &s,
        json!({"calls": {"default": "allow"},
               "limits": {"base:USDC": {"approval_above": "50"}, "base:ETH": {"approval_above": "0.5"}}}),
    )
    .await;

    // An allowance of 100 USDC counts 100 USDC at once (§18): above the USDC threshold, not the ETH one.
    let (status, held) = post(&s, "calls", approve(&s, 100)).await;
    assert_eq!(status, StatusCode::CREATED, "{held}");
    assert_eq!(held["status"], "awaiting_approval", "{held}");
    assert_eq!(held["held_by"], json!(["approval_above"]), "{held}");
    assert_eq!(held["held_above"], "50", "{held}");
    assert_eq!(held["held_above_asset"], "base:USDC", "{held}");

    // The owner's list states the same, also after the policy changed: it is what held it.
    put_policy(
        &s,
        json!({"calls": {"default": "allow"},
               "limits": {"base:USDC": {"approval_above": "70"}, "base:ETH": {"approval_above": "0.005"}}}),
    )
    .await;
    let (status, waiting) = owner(&s, Method::GET, "approvals", None).await;
    assert_eq!(status, StatusCode::OK, "{waiting}");
    assert_eq!(waiting[0]["id"], held["id"], "{waiting}");
    assert_eq!(waiting[0]["held_above"], "50", "{waiting}");
    assert_eq!(waiting[0]["held_above_asset"], "base:USDC", "{waiting}");
    assert_eq!(
        router_allowance(&s).await,
        U256::ZERO,
        "nothing is signed while it waits"
    );

    // Approved, it lands: the chain shows the allowance.
    let approve_path = format!("transfers/{}/approve", held["id"].as_str().unwrap());
    let (status, approved) = owner(&s, Method::POST, &approve_path, None).await;
    assert_eq!(status, StatusCode::OK, "{approved}");
    wait_for_transactions(&s.app, &s.agent, 1, "confirmed").await;
    assert_eq!(router_allowance(&s).await, U256::from(100 * USDC));

    // A transfer held by the ETH threshold names its own asset.
    let to = Address::repeat_byte(0x66).to_string();
    let (status, eth) = post(&s, "transfers", json!({"chain": "base", "to": to, "amount": "0.01"})).await;
    assert_eq!(status, StatusCode::CREATED, "{eth}");
    assert_eq!(eth["status"], "awaiting_approval", "{eth}");
    assert_eq!(eth["held_above"], "0.005", "{eth}");
    assert_eq!(eth["held_above_asset"], "base:ETH", "{eth}");
}

#[tokio::test]
async fn a_call_over_a_token_limit_is_refused_with_the_figures_of_that_token() {
    let s = setup().await;
    put_policy(
        &s,
        json!({"calls": {"default": "allow"},
               "limits": {"base:USDC": {"per_transfer": "60", "per_day": "120"}, "base:ETH": {}}}),
    )
    .await;

    // Over the per-transfer limit: the message says so in USDC, like a transfer's refusal; the preview says the same.
    let over = post(&s, "calls", approve(&s, 100)).await;
    assert_error(&over, StatusCode::FORBIDDEN, "policy_denied");
    assert_eq!(over.1["error"]["details"]["rule"], "per_transfer", "{}", over.1);
    let message = over.1["error"]["message"].as_str().unwrap_or_default().to_owned();
    assert!(
        message.ends_with("(rule per_transfer): over the per-transfer limit of 60 USDC: it asked 100"),
        "{message}"
    );
    let (status, preview) = post(&s, "calls/simulate", approve(&s, 100)).await;
    assert_eq!(status, StatusCode::OK, "{preview}");
    assert_eq!(preview["decision"]["rule"], "per_transfer", "{preview}");
    assert_eq!(preview["message"], message.as_str(), "{preview}");

    // 50 fits and lands; then 80 is over the day: 50 counted, 70 left.
    let (status, body) = post(&s, "calls", approve(&s, 50)).await;
    assert_eq!(status, StatusCode::CREATED, "{body}");
    wait_for_transactions(&s.app, &s.agent, 1, "confirmed").await;
    let (status, body) = post(
        &s,
        "calls",
        json!({"chain": "base", "to": s.uni.usdc.to_string(), "function": "approve(address,uint256)",
            "args": [Address::repeat_byte(0x77).to_string(), (59 * USDC + USDC / 2).to_string()]}),
    )
    .await;
    assert_eq!(status, StatusCode::CREATED, "{body}");
    wait_for_transactions(&s.app, &s.agent, 2, "confirmed").await;
    let over_day = post(
        &s,
        "calls",
        json!({"chain": "base", "to": s.uni.usdc.to_string(), "function": "approve(address,uint256)",
            "args": [Address::repeat_byte(0x77).to_string(), (60 * USDC).to_string()]}),
    )
    .await;
    assert_error(&over_day, StatusCode::FORBIDDEN, "policy_denied");
    assert_eq!(over_day.1["error"]["details"]["rule"], "per_day", "{}", over_day.1);
    let message = over_day.1["error"]["message"].as_str().unwrap_or_default();
    assert!(
        message.ends_with(
            "(rule per_day): over the daily limit of 120 USDC: 109.5 was already counted in the last 24 h, 10.5 was left, and it asked 60"
        ),
        "{message}"
    );
    // The audit entry of the refusal carries the same words.
    let (status, audit) = owner(&s, Method::GET, "audit", None).await;
    assert_eq!(status, StatusCode::OK, "{audit}");
    let refused = audit
        .as_array()
        .expect("a list")
        .iter()
        .find(|e| e["action"] == "transfer_refused" && e["detail"]["rule"] == "per_day")
        .expect("the refusal is audited")
        .clone();
    let limit = refused["detail"]["limit"].as_str().unwrap_or_default();
    assert!(!limit.is_empty() && message.ends_with(limit), "{refused}");
    assert_eq!(
        router_allowance(&s).await,
        U256::from(50 * USDC),
        "only the allowed approves landed"
    );
    assert_eq!(s.anvil.nonce(wallet(&s.agent)).await, 2);
}
