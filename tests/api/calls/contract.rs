//! Contract calls (docs/api.md §18) against the real, unmodified Uniswap V2 contracts from npm on anvil: a call is
//! simulated before it is signed, judged by the `calls` rules, the unlimited-approval guard and the assets' limits,
//! and what the chain shows afterwards is what the simulation said.

use alloy::primitives::{Address, U256};
use alloy::sol_types::SolCall;
use reqwest::{Method, StatusCode};
use serde_json::{Value, json};

use crate::anvil::Anvil;
use crate::helpers::chain::{BASE_CHAIN_ID, ONE_ETH, funded_agent, transfer_app, wait_for_transactions, wallet, wei};
use crate::helpers::solidity::{mint, read, token_balance};
use crate::helpers::uniswap::{Uniswap, deploy_uniswap};
use crate::helpers::{CreatedAgent, TestApp, assert_error};

alloy::sol! {
    function allowance(address owner, address spender) external view returns (uint256);
}

/// USDC's base units per whole USDC.
pub(crate) const USDC: u64 = 1_000_000;

pub(crate) struct Setup {
    pub anvil: Anvil,
    pub app: TestApp,
    pub agent: CreatedAgent,
    pub uni: Uniswap,
}

/// A pool of 1,000,000 USDC against 500 ETH, and an agent on base holding 1,000 USDC and 1 ETH (cap 0.5 ETH).
async fn setup() -> Setup {
    setup_with(&[]).await
}

pub(crate) async fn setup_with(vars: &[(&str, &str)]) -> Setup {
    let anvil = Anvil::start(BASE_CHAIN_ID);
    let uni = deploy_uniswap(&anvil, U256::from(1_000_000 * USDC), wei(500 * ONE_ETH)).await;
    let app = transfer_app(&anvil, vars).await;
    let agent = funded_agent(&app, &anvil, Some(0.5)).await;
    mint(&anvil, uni.usdc, wallet(&agent), U256::from(1_000 * USDC)).await;
    Setup { anvil, app, agent, uni }
}

pub(crate) async fn post(s: &Setup, path: &str, body: Value) -> (StatusCode, Value) {
    let path = format!("/api/agents/{}/{path}", s.agent.id);
    s.app
        .request(Method::POST, &path, Some(&s.agent.token), Some(body))
        .await
}

async fn set_calls(s: &Setup, policy: Value) {
    let path = format!("/api/agents/{}/policy", s.agent.id);
    let (status, body) = s
        .app
        .request(Method::PUT, &path, Some(&s.agent.token), Some(policy))
        .await;
    assert_eq!(status, StatusCode::OK, "{body}");
}

/// The agent's `base:USDC` day window as `GET /api/agents/{id}/budget` states it.
async fn usdc_day(s: &Setup) -> Value {
    let path = format!("/api/agents/{}/budget", s.agent.id);
    let (status, body) = s.app.request(Method::GET, &path, Some(&s.agent.token), None).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    body["limits"]["base:USDC"]["per_day"].clone()
}

fn approve(s: &Setup, spender: Address, amount: U256) -> Value {
    json!({"chain": "base", "to": s.uni.usdc.to_string(), "function": "approve(address,uint256)",
        "args": [spender.to_string(), amount.to_string()]})
}

fn swap(s: &Setup, amount_in: U256, min_out: U256, to: Address) -> Value {
    json!({"chain": "base", "to": s.uni.router.to_string(),
        "function": "swapExactTokensForETH(uint256,uint256,address[],address,uint256)",
        "args": [amount_in.to_string(), min_out.to_string(), [s.uni.usdc.to_string(), s.uni.weth.to_string()],
            to.to_string(), "99999999999"]})
}

pub(crate) async fn allowance_on_chain(s: &Setup, spender: Address) -> U256 {
    let data = allowanceCall {
        owner: wallet(&s.agent),
        spender,
    }
    .abi_encode();
    let out = read(&s.anvil, s.uni.usdc, data.into()).await;
    U256::from_be_slice(&out[..32])
}

#[tokio::test]
async fn an_agent_approves_the_router_and_swaps_usdc_for_eth_as_simulated() {
    let s = setup().await;
    let router = s.uni.router;

    // The simulation of the approval shows the allowance it grants, and nothing is signed.
    let (status, simulated) = post(&s, "calls/simulate", approve(&s, router, U256::from(100 * USDC))).await;
    assert_eq!(status, StatusCode::OK, "{simulated}");
    assert_eq!(simulated["call"]["function"], "approve(address,uint256)", "{simulated}");
    assert_eq!(simulated["call"]["selector"], "0x095ea7b3");
    assert_eq!(
        simulated["simulation"]["approvals"][0]["spender"],
        router.to_checksum(None)
    );
    assert_eq!(simulated["simulation"]["approvals"][0]["amount"], "100", "{simulated}");
    assert_eq!(simulated["decision"]["result"], "allow", "{simulated}");
    assert_eq!(s.anvil.nonce(wallet(&s.agent)).await, 0, "a simulation signs nothing");

    let (status, approved) = post(&s, "calls", approve(&s, router, U256::from(100 * USDC))).await;
    assert_eq!(status, StatusCode::CREATED, "{approved}");
    assert_eq!(approved["kind"], "call", "{approved}");
    assert_eq!(approved["call"]["args"][0], router.to_checksum(None));
    wait_for_transactions(&s.app, &s.agent, 1, "confirmed").await;
    assert_eq!(
        allowance_on_chain(&s, router).await,
        U256::from(100 * USDC),
        "the chain shows the allowance"
    );

    // The swap's simulation says what leaves and what arrives; the chain shows exactly that much USDC gone.
    let before = token_balance(&s.anvil, s.uni.usdc, wallet(&s.agent)).await;
    let order = swap(&s, U256::from(50 * USDC), U256::ZERO, wallet(&s.agent));
    let (status, swapped) = post(&s, "calls", order).await;
    assert_eq!(status, StatusCode::CREATED, "{swapped}");
    let changes = swapped["simulation"]["changes"].as_array().expect("changes").clone();
    let usdc_out = changes
        .iter()
        .find(|c| c["asset"] == "base:USDC" && c["direction"] == "out");
    assert_eq!(usdc_out.expect("USDC out")["amount"], "50", "{swapped}");
    let eth_in = changes
        .iter()
        .find(|c| c["asset"] == "base:ETH" && c["direction"] == "in");
    assert!(eth_in.is_some(), "ETH comes back: {swapped}");
    wait_for_transactions(&s.app, &s.agent, 2, "confirmed").await;
    let after = token_balance(&s.anvil, s.uni.usdc, wallet(&s.agent)).await;
    assert_eq!(
        before - after,
        U256::from(50 * USDC),
        "the chain shows what the simulation said"
    );
    assert_eq!(allowance_on_chain(&s, router).await, U256::from(50 * USDC));
    assert_eq!(s.anvil.nonce(wallet(&s.agent)).await, 2);
}

#[tokio::test]
async fn rules_the_unlimited_guard_and_reverts_refuse_before_anything_is_signed() {
    let s = setup().await;
    let router = s.uni.router.to_string();
    set_calls(
        &s,
        json!({"calls": {"default": "deny", "rules": [
            {"chain": "base", "to": s.uni.usdc.to_string(), "function": "approve(address,uint256)",
             "args": {"0": {"eq": router}}, "action": "allow"},
            {"chain": "base", "to": router, "function": "swapExactTokensForETH(uint256,uint256,address[],address,uint256)",
             "args": {"3": {"eq": "$agent"}}, "action": "allow"}
        ]}}),
    )
    .await;

    // An unlimited approval is refused whatever the rules allow.
    let unlimited = post(&s, "calls", approve(&s, s.uni.router, U256::MAX)).await;
    assert_error(&unlimited, StatusCode::FORBIDDEN, "policy_denied");
    assert_eq!(
        unlimited.1["error"]["details"]["rule"], "unlimited_approval",
        "{}",
        unlimited.1
    );
    // An approval to anyone else matches no rule: the default denies it.
    let stranger = Address::repeat_byte(0x77);
    let other = post(&s, "calls", approve(&s, stranger, U256::from(USDC))).await;
    assert_error(&other, StatusCode::FORBIDDEN, "policy_denied");
    assert_eq!(other.1["error"]["details"]["rule"], "call_denied");
    // The refusal names the rule that matched the call and the condition it did not meet, with the value it had.
    let named = format!(
        "rule 1 (approve(address,uint256) on {}) did not allow it: argument 0 must be {}; it was {}",
        s.uni.usdc.to_checksum(None),
        s.uni.router.to_checksum(None),
        stranger.to_checksum(None)
    );
    let message = other.1["error"]["message"].as_str().unwrap_or_default().to_owned();
    assert!(message.ends_with(&named), "{}", other.1);
    // The simulation gives the same verdict in the same words.
    let (status, simulated) = post(&s, "calls/simulate", approve(&s, stranger, U256::from(USDC))).await;
    assert_eq!(status, StatusCode::OK, "{simulated}");
    assert_eq!(simulated["decision"]["result"], "deny", "{simulated}");
    assert_eq!(simulated["decision"]["rule"], "call_denied", "{simulated}");
    assert_eq!(simulated["message"], message.as_str(), "{simulated}");
    // The audit keeps the same words with the refusal.
    let path = format!("/api/agents/{}/audit", s.agent.id);
    let (status, entries) = s.app.request(Method::GET, &path, Some(&s.agent.token), None).await;
    assert_eq!(status, StatusCode::OK, "{entries}");
    let denied = entries
        .as_array()
        .expect("a list")
        .iter()
        .find(|e| e["action"] == "transfer_refused" && e["detail"]["rule"] == "call_denied")
        .expect("the refusal is audited")
        .clone();
    assert_eq!(denied["detail"]["denial"].as_str(), Some(&named[..]), "{denied}");

    let (status, body) = post(&s, "calls", approve(&s, s.uni.router, U256::from(100 * USDC))).await;
    assert_eq!(status, StatusCode::CREATED, "{body}");
    wait_for_transactions(&s.app, &s.agent, 1, "confirmed").await;

    // A swap whose output goes to someone else is refused by the argument rule.
    let elsewhere = post(&s, "calls", swap(&s, U256::from(10 * USDC), U256::ZERO, stranger)).await;
    assert_error(&elsewhere, StatusCode::FORBIDDEN, "policy_denied");
    assert_eq!(elsewhere.1["error"]["details"]["rule"], "call_denied");
    let message = elsewhere.1["error"]["message"].as_str().unwrap_or_default();
    let named = format!(
        "rule 2 (swapExactTokensForETH(uint256,uint256,address[],address,uint256) on {}) did not allow it: \
         argument 3 must be $agent ({}); it was {}",
        s.uni.router.to_checksum(None),
        wallet(&s.agent).to_checksum(None),
        stranger.to_checksum(None)
    );
    assert!(message.ends_with(&named), "{}", elsewhere.1);
    // A swap that cannot get its minimum reverts in the simulation, with the router's reason.
    let greedy = post(
        &s,
        "calls",
        swap(&s, U256::from(10 * USDC), wei(1_000 * ONE_ETH), wallet(&s.agent)),
    )
    .await;
    assert_error(&greedy, StatusCode::UNPROCESSABLE_ENTITY, "call_reverted");
    let reason = greedy.1["error"]["details"]["reason"]
        .as_str()
        .unwrap_or_default()
        .to_owned();
    assert!(reason.contains("INSUFFICIENT_OUTPUT_AMOUNT"), "{}", greedy.1);

    assert_eq!(
        s.anvil.nonce(wallet(&s.agent)).await,
        1,
        "only the allowed approval was signed"
    );
    assert_eq!(allowance_on_chain(&s, stranger).await, U256::ZERO);
}

#[tokio::test]
async fn an_approval_counts_once_and_the_swap_that_pulls_it_not_again() {
    let s = setup().await;
    set_calls(
        &s,
        json!({"calls": {"default": "allow"}, "limits": {"base:USDC": {"per_day": "120"}}}),
    )
    .await;
    // 100 allowed to the router counts at once: a plain transfer of 30 USDC would pass the day, 20 fits.
    let (status, body) = post(&s, "calls", approve(&s, s.uni.router, U256::from(100 * USDC))).await;
    assert_eq!(status, StatusCode::CREATED, "{body}");
    // The service states the allowance it counted: 20 left, which is what the next decision allows.
    assert_eq!(
        usdc_day(&s).await,
        json!({"limit": "120", "counted": "100", "left": "20"})
    );
    let to = Address::repeat_byte(0x55).to_string();
    let one_more = json!({"chain": "base", "to": to, "amount": "20.000001", "asset": "USDC"});
    let refused = post(&s, "transfers", one_more).await;
    assert_error(&refused, StatusCode::FORBIDDEN, "policy_denied");
    let message = refused.1["error"]["message"].as_str().unwrap_or_default();
    assert!(
        message.contains("100 was already counted in the last 24 h, 20 was left, and it asked 20.000001"),
        "{message}"
    );
    let refused = post(
        &s,
        "transfers",
        json!({"chain": "base", "to": to, "amount": "30", "asset": "USDC"}),
    )
    .await;
    assert_error(&refused, StatusCode::FORBIDDEN, "policy_denied");
    assert_eq!(refused.1["error"]["details"]["rule"], "per_day");
    let (status, body) = post(
        &s,
        "transfers",
        json!({"chain": "base", "to": to, "amount": "20", "asset": "USDC"}),
    )
    .await;
    assert_eq!(status, StatusCode::CREATED, "{body}");
    assert_eq!(
        usdc_day(&s).await,
        json!({"limit": "120", "counted": "120", "left": "0"})
    );
    wait_for_transactions(&s.app, &s.agent, 2, "confirmed").await;
    // The swap pulls 50 within the counted allowance: the day is full, and it still goes through.
    let (status, body) = post(
        &s,
        "calls",
        swap(&s, U256::from(50 * USDC), U256::ZERO, wallet(&s.agent)),
    )
    .await;
    assert_eq!(status, StatusCode::CREATED, "{body}");
    wait_for_transactions(&s.app, &s.agent, 3, "confirmed").await;
    // A grant to 0 counts nothing; any other grant that sets an allowance counts whole, also below the standing
    // one (§18: the spender may take the standing one first): the day has nothing left for 10.
    let lowered = post(&s, "calls", approve(&s, s.uni.router, U256::from(10 * USDC))).await;
    assert_error(&lowered, StatusCode::FORBIDDEN, "policy_denied");
    assert_eq!(lowered.1["error"]["details"]["rule"], "per_day");
    let (status, body) = post(&s, "calls", approve(&s, s.uni.router, U256::ZERO)).await;
    assert_eq!(status, StatusCode::CREATED, "{body}");
    wait_for_transactions(&s.app, &s.agent, 4, "confirmed").await;
    assert_eq!(s.anvil.nonce(wallet(&s.agent)).await, 4);
    assert_eq!(allowance_on_chain(&s, s.uni.router).await, U256::ZERO);
}

#[tokio::test]
async fn a_spender_approved_again_and_again_takes_no_more_than_the_day_allows() {
    use crate::helpers::solidity::send_as;
    alloy::sol! {
        function transferFrom(address from, address to, uint256 amount) external returns (bool);
    }
    let s = setup().await;
    set_calls(
        &s,
        json!({"calls": {"default": "allow"}, "limits": {"base:USDC": {"per_day": "100"}}}),
    )
    .await;
    // The spender is an account of its own: it takes what it is allowed in transactions the agent never signs.
    let drainer: Address = Anvil::DEV_ADDRESS.parse().unwrap();
    let before = token_balance(&s.anvil, s.uni.usdc, drainer).await;
    let mut granted = 0;
    for _ in 0..3 {
        let (status, body) = post(&s, "calls", approve(&s, drainer, U256::from(40 * USDC))).await;
        if status != StatusCode::CREATED {
            assert_error(&(status, body), StatusCode::FORBIDDEN, "policy_denied");
            break;
        }
        granted += 1;
        wait_for_transactions(&s.app, &s.agent, granted, "confirmed").await;
        let pull = transferFromCall {
            from: wallet(&s.agent),
            to: drainer,
            amount: U256::from(40 * USDC),
        };
        let (_, ok) = send_as(&s.anvil, drainer, s.uni.usdc, pull.abi_encode().into()).await;
        assert!(ok, "the spender pulls what it was allowed");
    }
    assert_eq!(granted, 2, "the third approval would pass the day");
    let taken = token_balance(&s.anvil, s.uni.usdc, drainer).await - before;
    assert_eq!(
        taken,
        U256::from(80 * USDC),
        "the chain shows 80 USDC taken, under the 100 of the day"
    );
}

#[tokio::test]
async fn a_payable_call_counts_its_value_against_the_cap() {
    let s = setup().await;
    // WETH9's deposit() takes the value sent; the cap is 0.5 ETH.
    let deposit = |value: &str| json!({"chain": "base", "to": s.uni.weth.to_string(), "function": "deposit()", "args": [], "value": value});
    let over = post(&s, "calls", deposit("0.6")).await;
    assert_error(&over, StatusCode::FORBIDDEN, "spending_cap_exceeded");
    let (status, body) = post(&s, "calls", deposit("0.1")).await;
    assert_eq!(status, StatusCode::CREATED, "{body}");
    assert_eq!(body["amount"], "0.1");
    let changes = body["simulation"]["changes"].as_array().expect("changes").clone();
    assert!(
        changes
            .iter()
            .any(|c| c["asset"] == "base:ETH" && c["direction"] == "out"),
        "{body}"
    );
    wait_for_transactions(&s.app, &s.agent, 1, "confirmed").await;
    assert_eq!(
        token_balance(&s.anvil, s.uni.weth, wallet(&s.agent)).await,
        wei(ONE_ETH / 10)
    );
}

#[tokio::test]
async fn twenty_concurrent_calls_against_a_daily_limit_move_exactly_what_fits() {
    let s = setup().await;
    twenty_calls_against_a_day_of_100_usdc(&s, &[&s.app]).await;
}

#[tokio::test]
async fn twenty_concurrent_calls_on_two_instances_move_exactly_what_the_day_allows() {
    let s = setup().await;
    // A second instance on the same database (PostgreSQL with TEST_POSTGRES_URL, else the same SQLite file).
    let second = transfer_app(&s.anvil, &[("DATABASE_URL", &s.app.db_url)]).await;
    twenty_calls_against_a_day_of_100_usdc(&s, &[&s.app, &second]).await;
}

/// Twenty concurrent calls moving 10 USDC each, sent to `apps` in turn, against a daily limit of 100 USDC: exactly
/// ten are signed, the others refused `per_day`, and the chain shows 100 USDC moved with no nonce used twice or
/// skipped.
async fn twenty_calls_against_a_day_of_100_usdc(s: &Setup, apps: &[&TestApp]) {
    set_calls(
        s,
        json!({"calls": {"default": "allow"}, "limits": {"base:USDC": {"per_day": "100"}}}),
    )
    .await;
    let to = Address::repeat_byte(0x66);
    let order = json!({"chain": "base", "to": s.uni.usdc.to_string(), "function": "transfer(address,uint256)",
        "args": [to.to_string(), (10 * USDC).to_string()]});
    let path = format!("/api/agents/{}/calls", s.agent.id);
    let answers = futures::future::join_all(
        (0..20).map(|i| apps[i % apps.len()].request(Method::POST, &path, Some(&s.agent.token), Some(order.clone()))),
    )
    .await;
    let made = answers
        .iter()
        .filter(|(status, _)| *status == StatusCode::CREATED)
        .count();
    let refused: Vec<_> = answers
        .iter()
        .filter(|(status, _)| *status != StatusCode::CREATED)
        .map(|(_, body)| body["error"]["details"]["rule"].clone())
        .collect();
    assert_eq!(made, 10, "{answers:?}");
    assert!(refused.iter().all(|rule| rule == "per_day"), "{refused:?} {answers:?}");
    wait_for_transactions(&s.app, &s.agent, 10, "confirmed").await;
    assert_eq!(
        token_balance(&s.anvil, s.uni.usdc, to).await,
        U256::from(100 * USDC),
        "the chain shows 100 USDC moved"
    );
    assert_eq!(
        s.anvil.nonce(wallet(&s.agent)).await,
        10,
        "no nonce used twice or skipped"
    );
}

#[tokio::test]
async fn a_scripted_model_approves_and_swaps_through_call_contract() {
    use crate::helpers::llm_server::{LlmServer, Reply};
    let llm = LlmServer::start(vec![]).await;
    let key = format!("sk-test-{}", uuid::Uuid::new_v4().simple());
    let s = setup_with(&llm.app_vars(&key)).await;
    let approve_args = json!({"chain": "base", "to": s.uni.usdc.to_string(), "function": "approve(address,uint256)",
        "args": [s.uni.router.to_string(), (20 * USDC).to_string()]})
    .to_string();
    let swap_args = swap(&s, U256::from(20 * USDC), U256::ZERO, wallet(&s.agent)).to_string();
    llm.push([
        Reply::tool_call("call_1", "simulate_call", &[&approve_args], 10, 5),
        Reply::tool_call("call_2", "call_contract", &[&approve_args], 10, 5),
        Reply::tool_call("call_3", "call_contract", &[&swap_args], 10, 5),
        Reply::text(&["Swapped 20 USDC for ETH."], 12, 6),
    ]);
    let body = crate::helpers::chain::chat(&s.app, &s.agent, "swap 20 USDC for ETH on uniswap").await;
    let calls = body["chain_calls"].as_array().expect("chain_calls").clone();
    assert_eq!(calls.len(), 3, "{body}");
    assert_eq!(calls[0]["result"]["decision"]["result"], "allow", "{body}");
    assert_eq!(calls[1]["result"]["kind"], "call", "{body}");
    assert_eq!(
        calls[2]["result"]["call"]["function"], "swapExactTokensForETH(uint256,uint256,address[],address,uint256)",
        "{body}"
    );
    wait_for_transactions(&s.app, &s.agent, 2, "confirmed").await;
    assert_eq!(
        token_balance(&s.anvil, s.uni.usdc, wallet(&s.agent)).await,
        U256::from(980 * USDC),
        "the chain shows the 20 USDC swapped"
    );
}

#[tokio::test]
async fn a_held_call_is_simulated_again_on_approval_and_refused_when_it_would_take_more() {
    use crate::helpers::solidity::{call_as_dev, call_as_dev_with_value};
    use crate::money::policy::ADMIN;
    alloy::sol! {
        function swapExactTokensForETH(uint256 amountIn, uint256 amountOutMin, address[] path, address to, uint256 deadline) external returns (uint256[] memory);
    }
    let s = setup_with(&[("ADMIN_TOKEN", ADMIN)]).await;
    let router = s.uni.router.to_string();
    let exact_out = "swapTokensForExactETH(uint256,uint256,address[],address,uint256)";
    let policy = json!({"calls": {"default": "allow", "rules": [
        {"chain": "base", "to": router, "function": exact_out, "action": "approve"}]}});
    let path = format!("/api/agents/{}/policy", s.agent.id);
    let (status, body) = crate::money::policy::call(&s.app, &s.agent, true, Method::PUT, &path, Some(policy)).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    let (status, body) = post(&s, "calls", approve(&s, s.uni.router, U256::from(500 * USDC))).await;
    assert_eq!(status, StatusCode::CREATED, "{body}");
    wait_for_transactions(&s.app, &s.agent, 1, "confirmed").await;

    // 0.01 ETH for at most 500 USDC: held, with what it would take shown.
    let order = |max_in: u64| {
        json!({"chain": "base", "to": router, "function": exact_out,
            "args": [(ONE_ETH / 100).to_string(), (max_in * USDC).to_string(),
                [s.uni.usdc.to_string(), s.uni.weth.to_string()], wallet(&s.agent).to_string(), "99999999999"]})
    };
    let (status, held) = post(&s, "calls", order(500)).await;
    assert_eq!(status, StatusCode::CREATED, "{held}");
    assert_eq!(held["status"], "awaiting_approval", "{held}");
    assert_eq!(held["held_by"], json!(["calls.rules[0]"]), "{held}");
    assert!(held["max_fee"].as_str().is_some_and(|fee| fee != "0"), "{held}");
    assert!(
        held["simulation"]["changes"].as_array().is_some_and(|c| !c.is_empty()),
        "{held}"
    );
    let id = held["id"].as_str().unwrap().to_owned();

    // Someone buys ETH with a lot of USDC: the same 0.01 ETH now costs the agent more USDC.
    let dev: Address = Anvil::DEV_ADDRESS.parse().unwrap();
    mint(&s.anvil, s.uni.usdc, dev, U256::from(500_000 * USDC)).await;
    call_as_dev(
        &s.anvil,
        s.uni.usdc,
        crate::helpers::uniswap::approveCall {
            spender: s.uni.router,
            amount: U256::from(500_000 * USDC),
        }
        .abi_encode()
        .into(),
    )
    .await;
    let buy = swapExactTokensForETHCall {
        amountIn: U256::from(500_000 * USDC),
        amountOutMin: U256::ZERO,
        path: vec![s.uni.usdc, s.uni.weth],
        to: dev,
        deadline: U256::from(99_999_999_999u64),
    };
    call_as_dev_with_value(&s.anvil, s.uni.router, buy.abi_encode().into(), U256::ZERO).await;

    let approve_path = format!("/api/agents/{}/transfers/{id}/approve", s.agent.id);
    let changed = crate::money::policy::call(&s.app, &s.agent, true, Method::POST, &approve_path, None).await;
    assert_error(&changed, StatusCode::CONFLICT, "simulation_changed");
    assert_eq!(s.anvil.nonce(wallet(&s.agent)).await, 1, "nothing was signed");
    let list = format!("/api/agents/{}/approvals", s.agent.id);
    let (_, waiting) = crate::money::policy::call(&s.app, &s.agent, true, Method::GET, &list, None).await;
    assert_eq!(waiting[0]["transfer_id"], id.as_str(), "it still waits: {waiting}");
    // The owner sees what it would do: the decoded call and its changes.
    assert_eq!(waiting[0]["call"]["function"], exact_out, "{waiting}");
    assert_eq!(waiting[0]["simulation"], held["simulation"], "{waiting}");

    // Asked again at today's price, held and approved unchanged: it lands.
    let reject = format!("/api/agents/{}/transfers/{id}/reject", s.agent.id);
    let (status, _) = crate::money::policy::call(&s.app, &s.agent, true, Method::POST, &reject, None).await;
    assert_eq!(status, StatusCode::OK);
    let (status, held) = post(&s, "calls", order(500)).await;
    assert_eq!(status, StatusCode::CREATED, "{held}");
    let again = format!(
        "/api/agents/{}/transfers/{}/approve",
        s.agent.id,
        held["id"].as_str().unwrap()
    );
    let (status, approved) = crate::money::policy::call(&s.app, &s.agent, true, Method::POST, &again, None).await;
    assert_eq!(status, StatusCode::OK, "{approved}");
    wait_for_transactions(&s.app, &s.agent, 2, "confirmed").await;
    assert_eq!(s.anvil.nonce(wallet(&s.agent)).await, 2);
}

#[tokio::test]
async fn a_call_the_wallet_cannot_pay_is_judged_by_its_rules_and_the_cap_first() {
    let s = setup().await;
    // 2 ETH into WETH from a wallet of 1 ETH with a cap of 0.5: the cap refuses it, not the funds (§18's order).
    let deposit =
        json!({"chain": "base", "to": s.uni.weth.to_string(), "function": "deposit()", "args": [], "value": "2"});
    let over = post(&s, "calls", deposit).await;
    assert_error(&over, StatusCode::FORBIDDEN, "spending_cap_exceeded");
    // Within the cap but beyond the wallet: now the funds.
    s.anvil.set_balance(wallet(&s.agent), wei(ONE_ETH / 10)).await;
    let small =
        json!({"chain": "base", "to": s.uni.weth.to_string(), "function": "deposit()", "args": [], "value": "0.2"});
    let short = post(&s, "calls", small).await;
    assert_error(&short, StatusCode::UNPROCESSABLE_ENTITY, "insufficient_funds");
    assert_eq!(s.anvil.nonce(wallet(&s.agent)).await, 0, "nothing was signed");
}

#[tokio::test]
async fn a_call_is_simulated_after_the_agents_own_pending_transactions() {
    let s = setup().await;
    let dev: Address = Anvil::DEV_ADDRESS.parse().unwrap();
    // A token transfer of 900 of the agent's 1,000 USDC waits in the mempool, unmined.
    s.anvil.set_automine(false).await;
    let transfer = json!({"chain": "base", "to": dev.to_string(), "amount": "900", "asset": "USDC"});
    let (status, sent) = post(&s, "transfers", transfer).await;
    assert!(status.is_success(), "{sent}");
    // A call moving 200 more would pass on the latest block, but not after the pending transfer: refused unsigned.
    let more = json!({"chain": "base", "to": s.uni.usdc.to_string(), "function": "transfer(address,uint256)",
        "args": [dev.to_string(), (200 * USDC).to_string()]});
    let refused = post(&s, "calls", more.clone()).await;
    assert_error(&refused, StatusCode::UNPROCESSABLE_ENTITY, "call_reverted");
    let simulated = post(&s, "calls/simulate", more).await;
    assert_error(&simulated, StatusCode::UNPROCESSABLE_ENTITY, "call_reverted");
    s.anvil.set_automine(true).await;
    s.anvil.mine(1).await;
    wait_for_transactions(&s.app, &s.agent, 1, "confirmed").await;
    assert_eq!(s.anvil.nonce(wallet(&s.agent)).await, 1, "only the transfer was signed");
    assert_eq!(
        token_balance(&s.anvil, s.uni.usdc, wallet(&s.agent)).await,
        U256::from(100 * USDC)
    );
    // Once it landed, a call within what is left goes through.
    let rest = json!({"chain": "base", "to": s.uni.usdc.to_string(), "function": "transfer(address,uint256)",
        "args": [dev.to_string(), (100 * USDC).to_string()]});
    let (status, body) = post(&s, "calls", rest).await;
    assert_eq!(status, StatusCode::CREATED, "{body}");
}

#[tokio::test]
async fn once_mined_a_call_counts_what_its_receipt_shows_not_what_was_simulated() {
    use alloy::providers::Provider;
    alloy::sol! {
        function swapTokensForExactETH(uint256 amountOut, uint256 amountInMax, address[] path, address to, uint256 deadline) external returns (uint256[] memory);
        function swapExactTokensForETH(uint256 amountIn, uint256 amountOutMin, address[] path, address to, uint256 deadline) external returns (uint256[] memory);
    }
    let s = setup().await;
    let agent = wallet(&s.agent);
    let dev: Address = Anvil::DEV_ADDRESS.parse().unwrap();
    let send_as = |from: Address, to: Address, data: Vec<u8>, tip: Option<u128>| {
        let mut tx = json!({"from": from, "to": to, "data": alloy::hex::encode_prefixed(data), "gas": "0x7a1200"});
        if let Some(tip) = tip {
            tx["maxPriorityFeePerGas"] = json!(format!("{tip:#x}"));
            tx["maxFeePerGas"] = json!(format!("{:#x}", tip * 4));
        }
        let provider = s.anvil.provider().clone();
        async move {
            let hash: alloy::primitives::TxHash = provider
                .raw_request("eth_sendTransaction".into(), (tx,))
                .await
                .expect("eth_sendTransaction");
            hash
        }
    };
    // An allowance the service never counted: granted with the agent's key outside it.
    let approve_router = crate::helpers::uniswap::approveCall {
        spender: s.uni.router,
        amount: U256::from(1_000 * USDC),
    }
    .abi_encode();
    let provider = s.anvil.provider();
    let _: () = provider
        .raw_request("anvil_impersonateAccount".into(), (agent,))
        .await
        .unwrap();
    send_as(agent, s.uni.usdc, approve_router, None).await;
    s.anvil.mine(1).await;
    let _: () = provider
        .raw_request("anvil_stopImpersonatingAccount".into(), (agent,))
        .await
        .unwrap();
    assert_eq!(allowance_on_chain(&s, s.uni.router).await, U256::from(1_000 * USDC));
    set_calls(&s, json!({"limits": {"base:USDC": {"per_day": "100"}}})).await;
    mint(&s.anvil, s.uni.usdc, dev, U256::from(500_000 * USDC)).await;
    crate::helpers::solidity::call_as_dev(
        &s.anvil,
        s.uni.usdc,
        crate::helpers::uniswap::approveCall {
            spender: s.uni.router,
            amount: U256::from(500_000 * USDC),
        }
        .abi_encode()
        .into(),
    )
    .await;

    // 0.01 ETH for at most 500 USDC: simulated at about 20 USDC, a pull the service never counted (so it counts).
    s.anvil.set_automine(false).await;
    let path = [s.uni.usdc.to_string(), s.uni.weth.to_string()];
    let exact_out = json!({"chain": "base", "to": s.uni.router.to_string(),
        "function": "swapTokensForExactETH(uint256,uint256,address[],address,uint256)",
        "args": [(ONE_ETH / 100).to_string(), (500 * USDC).to_string(), path, agent.to_string(), "99999999999"]});
    let (status, sent) = post(&s, "calls", exact_out).await;
    assert_eq!(status, StatusCode::CREATED, "{sent}");
    let simulated = &sent["simulation"]["changes"][0];
    assert_eq!(simulated["asset"], "base:USDC", "{sent}");
    let simulated_in = agentd::domain::amount::parse_units(simulated["amount"].as_str().unwrap(), 6).unwrap();
    // Someone buys ETH with a lot of USDC first (a higher tip): the agent's swap lands at a worse price.
    let buy = swapExactTokensForETHCall {
        amountIn: U256::from(500_000 * USDC),
        amountOutMin: U256::ZERO,
        path: vec![s.uni.usdc, s.uni.weth],
        to: dev,
        deadline: U256::from(99_999_999_999u64),
    };
    send_as(dev, s.uni.router, buy.abi_encode(), Some(100_000_000_000)).await;
    s.anvil.mine(1).await;
    s.anvil.set_automine(true).await;
    wait_for_transactions(&s.app, &s.agent, 1, "confirmed").await;
    let paid = U256::from(1_000 * USDC) - token_balance(&s.anvil, s.uni.usdc, agent).await;
    assert!(
        paid > simulated_in,
        "the swap cost more than simulated: {paid} vs {simulated_in}"
    );

    // The day counts what the receipt shows: one unit more than what is left of 100 USDC after it is refused,
    // exactly what is left goes through.
    let left = U256::from(100 * USDC) - paid;
    let transfer = |amount: U256| {
        json!({"chain": "base", "to": dev.to_string(), "asset": "USDC",
            "amount": agentd::domain::amount::format_units(amount, 6)})
    };
    let over = post(&s, "transfers", transfer(left + U256::from(1))).await;
    assert_error(&over, StatusCode::FORBIDDEN, "policy_denied");
    assert_eq!(over.1["error"]["details"]["rule"], "per_day", "{}", over.1);
    let (status, body) = post(&s, "transfers", transfer(left)).await;
    assert!(status.is_success(), "{body}");
}

#[tokio::test]
async fn a_call_is_simulated_as_it_will_be_signed_with_its_fees() {
    let s = setup().await;
    // A contract that refuses any transaction priced above 1 wei: a run without fees passes, the signed one would not.
    let mut creation = crate::helpers::solidity::bytecode("GasPriceLimit.sol", "GasPriceLimit").to_vec();
    creation.extend(U256::from(1).to_be_bytes::<32>());
    let gate = crate::helpers::solidity::deploy(&s.anvil, creation.into()).await;
    let hit = json!({"chain": "base", "to": gate.to_string(), "function": "hit()", "args": []});
    let refused = post(&s, "calls", hit.clone()).await;
    assert_error(&refused, StatusCode::UNPROCESSABLE_ENTITY, "call_reverted");
    assert_eq!(
        refused.1["error"]["details"]["reason"], "gas price above the limit",
        "{}",
        refused.1
    );
    let simulated = post(&s, "calls/simulate", hit).await;
    assert_error(&simulated, StatusCode::UNPROCESSABLE_ENTITY, "call_reverted");
    assert_eq!(
        s.anvil.nonce(wallet(&s.agent)).await,
        0,
        "nothing was signed, no fee was paid"
    );
}

#[tokio::test]
async fn a_transfer_through_a_contract_to_a_blocked_recipient_is_refused() {
    let s = setup().await;
    let blocked = Address::repeat_byte(0xbb);
    set_calls(
        &s,
        json!({"calls": {"default": "allow"}, "blocked_recipients": [blocked.to_string(), s.uni.weth.to_string()]}),
    )
    .await;
    let rule_of = |answer: &(StatusCode, Value)| answer.1["error"]["details"]["rule"].clone();
    // A token transfer the agent makes: judged by the token's recipient, not the token contract called.
    let transfer = json!({"chain": "base", "to": s.uni.usdc.to_string(), "function": "transfer(address,uint256)",
        "args": [blocked.to_string(), (10 * USDC).to_string()]});
    let refused = post(&s, "calls", transfer).await;
    assert_error(&refused, StatusCode::FORBIDDEN, "policy_denied");
    assert_eq!(rule_of(&refused), "recipient_blocked", "{}", refused.1);
    // An allowance to it: judged by the spender.
    let allowed = post(&s, "calls", approve(&s, blocked, U256::from(10 * USDC))).await;
    assert_eq!(rule_of(&allowed), "recipient_blocked", "{}", allowed.1);
    // Native value to a blocked contract (a WETH deposit).
    let deposit =
        json!({"chain": "base", "to": s.uni.weth.to_string(), "function": "deposit()", "args": [], "value": "0.01"});
    let paid = post(&s, "calls", deposit).await;
    assert_eq!(rule_of(&paid), "recipient_blocked", "{}", paid.1);
    // Anyone else is fine, and nothing above was signed.
    let fine = json!({"chain": "base", "to": s.uni.usdc.to_string(), "function": "transfer(address,uint256)",
        "args": [Address::repeat_byte(0xcc).to_string(), (10 * USDC).to_string()]});
    let (status, body) = post(&s, "calls", fine).await;
    assert_eq!(status, StatusCode::CREATED, "{body}");
    wait_for_transactions(&s.app, &s.agent, 1, "confirmed").await;
    assert_eq!(
        s.anvil.nonce(wallet(&s.agent)).await,
        1,
        "only the allowed call was signed"
    );
    assert_eq!(token_balance(&s.anvil, s.uni.usdc, blocked).await, U256::ZERO);
}
