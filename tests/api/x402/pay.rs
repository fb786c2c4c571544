//! Paying x402 paywalls through `POST /api/agents/{id}/x402/fetch` (docs/api.md §16) against the test paywall
//! (`helpers::paywall`) and a real EIP-3009 token at USDC's base address on anvil: a payment is decided in the same
//! reservation step as a transfer before anything is signed, paid once, settled by the watcher from the chain
//! (`authorizationState` and `AuthorizationUsed`), or expired once its `validBefore` passes unused.

use alloy::primitives::{Address, U256};
use futures::future::join_all;
use reqwest::{Method, StatusCode};
use serde_json::{Value, json};

use crate::anvil::Anvil;
use crate::helpers::chain::{BASE_CHAIN_ID, chat, funded_agent, transfer_app, wallet};
use crate::helpers::llm_server::{LlmServer, Reply};
use crate::helpers::paywall::{Paywall, PaywallSetup, entry_v1, entry_v2};
use crate::helpers::solidity::{authorization_state, mint, token_balance, usdc_on_base};
use crate::helpers::{CreatedAgent, TestApp, assert_error};
use crate::money::policy::{ADMIN, call, set_policy};

/// 0.01 USDC, the test paywall's price, in base units.
const PRICE: u64 = 10_000;

struct Paying {
    anvil: Anvil,
    app: TestApp,
    agent: CreatedAgent,
    usdc: Address,
    pay_to: Address,
    paywall: Paywall,
}

/// An app with `X402_ALLOW_PRIVATE` (the paywall is local) and `ADMIN_TOKEN` (agents are guarded), an agent on
/// base holding `balance` USDC units, and a paywall asking `PRICE` (`setup` may change it before it starts).
async fn paying(balance: u64, setup: impl FnOnce(&mut PaywallSetup)) -> Paying {
    paying_with(&[], balance, setup).await
}

/// `paying` with more app variables (a scripted model's).
async fn paying_with(extra: &[(&str, &str)], balance: u64, setup: impl FnOnce(&mut PaywallSetup)) -> Paying {
    let anvil = Anvil::start(BASE_CHAIN_ID);
    let mut vars = vec![("X402_ALLOW_PRIVATE", "true"), ("ADMIN_TOKEN", ADMIN)];
    vars.extend_from_slice(extra);
    let app = transfer_app(&anvil, &vars).await;
    let agent = funded_agent(&app, &anvil, Some(0.5)).await;
    let usdc = usdc_on_base(&anvil).await;
    mint(&anvil, usdc, wallet(&agent), U256::from(balance)).await;
    let pay_to = Address::repeat_byte(0x42);
    let mut paywall_setup = PaywallSetup::new(
        2,
        vec![entry_v2(BASE_CHAIN_ID, usdc, PRICE, pay_to, "USD Coin", "2")],
        anvil.url(),
        BASE_CHAIN_ID,
    );
    setup(&mut paywall_setup);
    let paywall = Paywall::start(paywall_setup).await;
    Paying {
        anvil,
        app,
        agent,
        usdc,
        pay_to,
        paywall,
    }
}

async fn fetch(app: &TestApp, agent: &CreatedAgent, body: Value) -> (StatusCode, Value) {
    let path = format!("/api/agents/{}/x402/fetch", agent.id);
    app.request(Method::POST, &path, Some(&agent.token), Some(body)).await
}

fn paid_body(p: &Paying, max_amount: &str) -> Value {
    json!({"url": p.paywall.url("/paid?api_key=secret-query-value"), "max_amount": max_amount})
}

async fn transfer(p: &Paying, id: &str) -> Value {
    let path = format!("/api/agents/{}/transfers/{id}", p.agent.id);
    let (status, body) = p.app.request(Method::GET, &path, Some(&p.agent.token), None).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    body
}

/// Drives the watcher until the transfer has `status`.
async fn wait_for_status(p: &Paying, id: &str, status: &str) -> Value {
    p.app
        .settle_until(async || {
            let body = transfer(p, id).await;
            match body["status"] == status {
                true => Ok(body),
                false => Err(format!("transfer {id} never became {status}: {body}")),
            }
        })
        .await
}

async fn usdc_of(p: &Paying, owner: Address) -> U256 {
    token_balance(&p.anvil, p.usdc, owner).await
}

async fn audit(p: &Paying) -> Value {
    let path = format!("/api/agents/{}/audit", p.agent.id);
    let (status, body) = call(&p.app, &p.agent, true, Method::GET, &path, None).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    body
}

#[tokio::test]
async fn a_paid_resource_is_paid_once_and_the_watcher_settles_it() {
    let p = paying(1_000_000, |_| {}).await;
    let (status, body) = fetch(&p.app, &p.agent, paid_body(&p, "0.05")).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(body["status"], 200, "{body}");
    assert_eq!(body["truncated"], false);
    let payment = &body["payment"];
    assert_eq!(payment["kind"], "x402", "{body}");
    assert_eq!(payment["asset"], "USDC");
    assert_eq!(payment["amount"], "0.01");
    assert_eq!(payment["to"], p.pay_to.to_checksum(None));
    assert_eq!(payment["status"], "pending");
    let url = payment["x402"]["url"].as_str().unwrap();
    assert!(url.ends_with("/paid") && !url.contains("secret"), "{url}");
    assert_eq!(payment["x402"]["network"], "eip155:8453");
    assert_eq!(p.paywall.paid_requests(), 1, "one paid request");
    let verified = p.paywall.verified();
    assert_eq!(verified.len(), 1);
    let settlement = verified[0].settlement.expect("the paywall settled it").to_string();
    assert_eq!(payment["tx_hash"], settlement.as_str(), "{body}");
    assert_eq!(payment["x402"]["nonce"], verified[0].nonce.to_string());
    assert_eq!(usdc_of(&p, p.pay_to).await, U256::from(PRICE));
    assert_eq!(usdc_of(&p, wallet(&p.agent)).await, U256::from(1_000_000 - PRICE));

    let id = payment["id"].as_str().unwrap();
    let settled = wait_for_status(&p, id, "confirmed").await;
    assert_eq!(settled["tx_hash"], settlement.as_str());
    assert_eq!(settled["x402"]["response"]["status"], 200, "{settled}");
    assert!(authorization_state(&p.anvil, p.usdc, wallet(&p.agent), verified[0].nonce).await);
    // Paid once: nothing more moved while it settled.
    assert_eq!(usdc_of(&p, p.pay_to).await, U256::from(PRICE));

    // The audit log names host and path, amount, asset, payTo and the transfer; never the query.
    let log = audit(&p).await.to_string();
    assert!(!log.contains("secret-query-value"), "{log}");
    assert!(log.contains("x402_payment_outcome") && log.contains(id), "{log}");
    assert!(log.contains("x402_payment_accepted"), "{log}");
    // The history lists it as an x402 payment; it cannot be cancelled.
    let path = format!("/api/agents/{}/transfers/{id}/cancel", p.agent.id);
    let cancel = p.app.request(Method::POST, &path, Some(&p.agent.token), None).await;
    assert_error(&cancel, StatusCode::CONFLICT, "transfer_not_pending");
}

#[tokio::test]
async fn a_free_resource_pays_nothing() {
    let p = paying(1_000_000, |_| {}).await;
    let body = json!({"url": p.paywall.url("/free"), "max_amount": "0.05"});
    let (status, body) = fetch(&p.app, &p.agent, body).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(body["status"], 200);
    assert_eq!(body["body"], "free content");
    assert_eq!(body["payment"], Value::Null);
    assert_eq!(p.paywall.paid_requests(), 0);
}

#[tokio::test]
async fn a_price_above_max_amount_is_refused_unsigned() {
    let p = paying(1_000_000, |_| {}).await;
    let refused = fetch(&p.app, &p.agent, paid_body(&p, "0.009999")).await;
    assert_error(&refused, StatusCode::UNPROCESSABLE_ENTITY, "price_above_max");
    assert_eq!(p.paywall.paid_requests(), 0, "nothing was signed or sent");
    // Exactly the price passes.
    let (status, body) = fetch(&p.app, &p.agent, paid_body(&p, "0.01")).await;
    assert_eq!(status, StatusCode::OK, "{body}");
}

#[tokio::test]
async fn each_policy_rule_refuses_a_payment_unsigned() {
    let p = paying(1_000_000, |_| {}).await;
    let pay_to = p.pay_to.to_checksum(None);
    let cases = [
        (
            json!({"limits": {"base:USDC": {"per_transfer": "0.005"}}}),
            "per_transfer",
        ),
        (json!({"limits": {"base:USDC": {"per_day": "0.009"}}}), "per_day"),
        (json!({"blocked_recipients": [pay_to]}), "recipient_blocked"),
        (
            json!({"allowed_recipients": [Address::repeat_byte(7).to_checksum(None)]}),
            "recipient_not_allowed",
        ),
        // A payee asking for an asset the policy does not name.
        (
            json!({"limits": {"base:ETH": {"per_transfer": "1"}}}),
            "asset_not_allowed",
        ),
    ];
    for (policy, rule) in cases {
        set_policy(&p.app, &p.agent, policy).await;
        let refused = fetch(&p.app, &p.agent, paid_body(&p, "0.05")).await;
        assert_error(&refused, StatusCode::FORBIDDEN, "policy_denied");
        assert_eq!(refused.1["error"]["details"]["rule"], rule, "{}", refused.1);
    }
    assert_eq!(p.paywall.paid_requests(), 0, "nothing was signed or sent");
    assert_eq!(usdc_of(&p, p.pay_to).await, U256::ZERO);
}

#[tokio::test]
async fn allowed_hosts_refuses_before_any_request() {
    let p = paying(1_000_000, |_| {}).await;
    set_policy(&p.app, &p.agent, json!({"allowed_hosts": ["api.example.com"]})).await;
    for path in ["/paid", "/free"] {
        let body = json!({"url": p.paywall.url(path), "max_amount": "0.05"});
        let refused = fetch(&p.app, &p.agent, body).await;
        assert_error(&refused, StatusCode::FORBIDDEN, "policy_denied");
        assert_eq!(refused.1["error"]["details"]["rule"], "host_not_allowed");
    }
    assert!(
        p.paywall.seen().is_empty(),
        "no request was made: {:?}",
        p.paywall.seen()
    );
    // The host with its port is allowed.
    let host = p.paywall.base.trim_start_matches("http://").to_owned();
    set_policy(&p.app, &p.agent, json!({"allowed_hosts": [host.to_uppercase()]})).await;
    let (status, body) = fetch(&p.app, &p.agent, paid_body(&p, "0.05")).await;
    assert_eq!(status, StatusCode::OK, "{body}");
}

#[tokio::test]
async fn a_chain_with_cap_zero_pays_nothing() {
    let p = paying(1_000_000, |_| {}).await;
    let path = format!("/api/agents/{}", p.agent.id);
    let (status, body) = call(
        &p.app,
        &p.agent,
        true,
        Method::PUT,
        &path,
        Some(json!({"spending_cap": 0})),
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    let refused = fetch(&p.app, &p.agent, paid_body(&p, "0.05")).await;
    assert_error(&refused, StatusCode::FORBIDDEN, "spending_cap_exceeded");
    assert_eq!(p.paywall.paid_requests(), 0);
}

#[tokio::test]
async fn eight_concurrent_payments_against_a_daily_limit_sign_exactly_what_fits() {
    let p = paying(1_000_000, |_| {}).await;
    // Three payments of 0.01 fit in 0.03.
    set_policy(&p.app, &p.agent, json!({"limits": {"base:USDC": {"per_day": "0.03"}}})).await;
    let answers = join_all((0..8).map(|_| fetch(&p.app, &p.agent, paid_body(&p, "0.05")))).await;
    let paid = answers.iter().filter(|(s, _)| *s == StatusCode::OK).count();
    for (status, body) in answers.iter().filter(|(s, _)| *s != StatusCode::OK) {
        assert_eq!(*status, StatusCode::FORBIDDEN, "{body}");
        assert_eq!(body["error"]["details"]["rule"], "per_day", "{body}");
    }
    assert_eq!(paid, 3, "{answers:?}");
    assert_eq!(p.paywall.paid_requests(), 3, "exactly what fits was signed");
    assert_eq!(usdc_of(&p, p.pay_to).await, U256::from(3 * PRICE));
}

#[tokio::test]
async fn a_refused_payment_holds_its_reservation_until_valid_before_then_expires() {
    // The agent holds one price's worth; the paywall verifies and then fails to settle; authorizations live 3 s.
    let p = paying(PRICE, |s| {
        s.settles = false;
        s.accepts[0]["maxTimeoutSeconds"] = json!(3);
    })
    .await;
    let failed = fetch(&p.app, &p.agent, paid_body(&p, "0.05")).await;
    assert_error(&failed, StatusCode::BAD_GATEWAY, "x402_payment_failed");
    let details = &failed.1["error"]["details"];
    assert!(
        details["reason"].as_str().unwrap().contains("settlement failed"),
        "{details}"
    );
    let id = details["transfer_id"].as_str().unwrap().to_owned();
    assert_eq!(transfer(&p, &id).await["status"], "pending");
    // The unused authorization still holds the balance: a second payment is refused before signing.
    let second = fetch(&p.app, &p.agent, paid_body(&p, "0.05")).await;
    assert_error(&second, StatusCode::UNPROCESSABLE_ENTITY, "insufficient_funds");
    assert_eq!(p.paywall.paid_requests(), 1);
    // Past validBefore, unused: expired and freed.
    wait_for_status(&p, &id, "expired").await;
    let log = audit(&p).await.to_string();
    assert!(
        log.contains("x402_payment_expired") && !log.contains("secret-query-value"),
        "{log}"
    );
    let (status, body) = fetch(&p.app, &p.agent, paid_body(&p, "0.05")).await;
    assert_error(&(status, body), StatusCode::BAD_GATEWAY, "x402_payment_failed");
    assert_eq!(p.paywall.paid_requests(), 2, "the freed balance could be signed again");
    assert_eq!(usdc_of(&p, wallet(&p.agent)).await, U256::from(PRICE), "nothing moved");
}

#[tokio::test]
async fn an_idempotent_repeat_pays_once() {
    let p = paying(1_000_000, |_| {}).await;
    let path = format!("/api/agents/{}/x402/fetch", p.agent.id);
    let send = || async {
        let builder = p
            .app
            .build(Method::POST, &path, Some(&p.agent.token), Some(paid_body(&p, "0.05")))
            .header("Idempotency-Key", "pay-once-1");
        let r = p.app.send(builder).await;
        (r.status, r.body)
    };
    let first = send().await;
    let again = send().await;
    assert_eq!(first.0, StatusCode::OK, "{}", first.1);
    assert_eq!(first, again);
    assert_eq!(p.paywall.paid_requests(), 1);
    assert_eq!(usdc_of(&p, p.pay_to).await, U256::from(PRICE));
}

#[tokio::test]
async fn urls_the_guard_refuses_are_422_through_the_endpoint() {
    let anvil = Anvil::start(BASE_CHAIN_ID);
    let app = transfer_app(&anvil, &[]).await;
    let agent = funded_agent(&app, &anvil, Some(0.5)).await;
    for url in [
        "http://127.0.0.1:9/paid",
        "http://localhost/x",
        "http://169.254.169.254/latest/meta-data/",
        "http://[::ffff:10.0.0.1]/",
        "https://user:pw@example.com/",
        "ftp://example.com/file",
    ] {
        let refused = fetch(&app, &agent, json!({"url": url, "max_amount": "0.05"})).await;
        assert_error(&refused, StatusCode::UNPROCESSABLE_ENTITY, "url_not_allowed");
    }
    let reserved = json!({"url": "https://example.com/", "max_amount": "0.05", "headers": {"PAYMENT-SIGNATURE": "x"}});
    assert_error(
        &fetch(&app, &agent, reserved).await,
        StatusCode::UNPROCESSABLE_ENTITY,
        "validation_failed",
    );
}

#[tokio::test]
async fn a_redirect_is_passed_back_unfollowed() {
    let p = paying(1_000_000, |_| {}).await;
    let body = json!({"url": p.paywall.url("/redirect"), "max_amount": "0.05"});
    let (status, body) = fetch(&p.app, &p.agent, body).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(body["status"], 302);
    assert_eq!(body["headers"]["location"], "/paid");
    assert_eq!(body["payment"], Value::Null);
    assert_eq!(p.paywall.seen().len(), 1, "the redirect was not followed");
}

#[tokio::test]
async fn a_v1_resource_is_paid_through_x_payment() {
    let p = paying(1_000_000, |s| {
        s.version = 1;
        s.accepts = vec![entry_v1(
            "base",
            s.accepts[0]["asset"].as_str().unwrap().parse().unwrap(),
            PRICE,
            Address::repeat_byte(0x42),
            "USD Coin",
            "2",
        )];
    })
    .await;
    let (status, body) = fetch(&p.app, &p.agent, paid_body(&p, "0.05")).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(body["payment"]["x402"]["network"], "base");
    let seen = p.paywall.seen();
    assert!(seen.last().unwrap().header("x-payment").is_some(), "{seen:?}");
    assert_eq!(usdc_of(&p, p.pay_to).await, U256::from(PRICE));
}

#[tokio::test]
async fn an_approved_payment_is_made_by_the_service_and_a_rejected_one_signs_nothing() {
    let p = paying(1_000_000, |_| {}).await;
    set_policy(
        &p.app,
        &p.agent,
        json!({"limits": {"base:USDC": {"approval_above": "0.005"}}}),
    )
    .await;
    let (status, waiting) = fetch(&p.app, &p.agent, paid_body(&p, "0.05")).await;
    assert_eq!(status, StatusCode::ACCEPTED, "{waiting}");
    assert_eq!(waiting["status"], 402);
    assert_eq!(waiting["payment"]["status"], "awaiting_approval");
    assert_eq!(p.paywall.paid_requests(), 0, "nothing signed while it waits");
    let id = waiting["payment"]["transfer_id"].as_str().unwrap().to_owned();

    let path = format!("/api/agents/{}/transfers/{id}/approve", p.agent.id);
    let (status, approved) = call(&p.app, &p.agent, true, Method::POST, &path, None).await;
    assert_eq!(status, StatusCode::OK, "{approved}");
    assert_eq!(approved["x402"]["response"]["status"], 200, "{approved}");
    assert_eq!(approved["x402"]["response"]["body"], "paid content", "{approved}");
    assert_eq!(p.paywall.paid_requests(), 1);
    assert_eq!(usdc_of(&p, p.pay_to).await, U256::from(PRICE));
    wait_for_status(&p, &id, "confirmed").await;

    let (status, waiting) = fetch(&p.app, &p.agent, paid_body(&p, "0.05")).await;
    assert_eq!(status, StatusCode::ACCEPTED, "{waiting}");
    let id = waiting["payment"]["transfer_id"].as_str().unwrap().to_owned();
    let path = format!("/api/agents/{}/transfers/{id}/reject", p.agent.id);
    let (status, rejected) = call(&p.app, &p.agent, true, Method::POST, &path, None).await;
    assert_eq!(status, StatusCode::OK, "{rejected}");
    assert_eq!(rejected["status"], "rejected");
    assert_eq!(p.paywall.paid_requests(), 1, "a rejection signs nothing");
    assert_eq!(usdc_of(&p, p.pay_to).await, U256::from(PRICE));
}

#[tokio::test]
async fn the_builtin_engine_pays_on_the_phrase_and_not_on_its_negation() {
    let p = paying(1_000_000, |_| {}).await;
    let url = p.paywall.url("/paid");
    let body = chat(&p.app, &p.agent, &format!("pay up to 0.05 USDC for {url}")).await;
    let calls = body["chain_calls"].as_array().expect("chain_calls");
    assert_eq!(calls.len(), 1, "{body}");
    assert_eq!(calls[0]["tool"], "pay_http", "{body}");
    assert_eq!(calls[0]["result"]["payment"]["status"], "pending", "{body}");
    assert_eq!(calls[0]["result"]["status"], 200, "{body}");
    assert_eq!(p.paywall.paid_requests(), 1);

    for text in [
        format!("don't pay 0.05 USDC for {url}"),
        format!("can you pay 0.05 USDC for {url}?"),
        format!("pay up to 0.05 for {url}"),
        format!("pay 0.05 USDC for {url} and {}", p.paywall.url("/free")),
    ] {
        let body = chat(&p.app, &p.agent, &text).await;
        assert_eq!(body["chain_calls"], json!([]), "{text}: {body}");
    }
    assert_eq!(p.paywall.paid_requests(), 1, "nothing more was paid");
    assert_eq!(usdc_of(&p, p.pay_to).await, U256::from(PRICE));
}

#[tokio::test]
async fn a_scripted_model_pays_through_pay_http() {
    let llm = LlmServer::start(vec![]).await;
    let key = format!("sk-test-{}", uuid::Uuid::new_v4().simple());
    let p = paying_with(&llm.app_vars(&key), 1_000_000, |_| {}).await;
    let args = json!({"url": p.paywall.url("/paid"), "max_amount": "0.02", "asset": "USDC"}).to_string();
    llm.push([
        Reply::tool_call("call_pay_1", "pay_http", &[&args], 10, 5),
        Reply::text(&["Paid, and here is the content."], 12, 6),
    ]);
    let body = chat(&p.app, &p.agent, "get me the paid content").await;
    let calls = body["chain_calls"].as_array().expect("chain_calls");
    assert_eq!(calls.len(), 1, "{body}");
    assert_eq!(calls[0]["tool"], "pay_http");
    assert_eq!(calls[0]["result"]["body"], "paid content", "{body}");
    assert_eq!(calls[0]["result"]["payment"]["amount"], "0.01", "{body}");
    let offered = llm.requests()[0].tool_names();
    assert!(offered.contains(&"pay_http".to_string()), "{offered:?}");
    assert_eq!(p.paywall.paid_requests(), 1);
    assert_eq!(usdc_of(&p, p.pay_to).await, U256::from(PRICE));
}

#[tokio::test]
async fn send_token_counts_unused_authorizations_against_the_balance() {
    // The agent holds one price's worth, all of it held by an authorization the resource verified and did not
    // settle: it can move until validBefore, so a token transfer of it is refused before anything is signed.
    let p = paying(PRICE, |s| s.settles = false).await;
    let failed = fetch(&p.app, &p.agent, paid_body(&p, "0.05")).await;
    assert_error(&failed, StatusCode::BAD_GATEWAY, "x402_payment_failed");
    let path = format!("/api/agents/{}/transfers", p.agent.id);
    let order = json!({"chain": "base", "to": Address::repeat_byte(9).to_string(), "amount": "0.01", "asset": "USDC"});
    let refused = p
        .app
        .request(Method::POST, &path, Some(&p.agent.token), Some(order))
        .await;
    assert_error(&refused, StatusCode::UNPROCESSABLE_ENTITY, "insufficient_funds");
    assert_eq!(p.anvil.nonce(wallet(&p.agent)).await, 0, "nothing was sent");
}

/// The `x402` texts of the agent's approvals, as the database holds them.
async fn stored_requests(app: &TestApp) -> Vec<String> {
    let sql = "SELECT x402 FROM approvals WHERE x402 IS NOT NULL";
    if app.db_url.starts_with("sqlite") {
        let pool = sqlx::SqlitePool::connect(&app.db_url)
            .await
            .expect("open the SQLite file");
        sqlx::query_scalar(sql).fetch_all(&pool).await.unwrap()
    } else {
        let pool = sqlx::PgPool::connect(&app.db_url).await.expect("connect to PostgreSQL");
        sqlx::query_scalar(sql).fetch_all(&pool).await.unwrap()
    }
}

/// A waiting payment keeps the caller's query and headers encrypted, and not at all once decided (issue 22,
/// point 7): the database never holds the API key in plain text; the approved payment's request still carries both
/// to the resource; after the approval and after a rejection no request is kept.
#[tokio::test]
async fn a_waiting_payment_keeps_the_callers_keys_encrypted_and_drops_them_once_decided() {
    let p = paying(1_000_000, |_| {}).await;
    set_policy(
        &p.app,
        &p.agent,
        json!({"limits": {"base:USDC": {"approval_above": "0.005"}}}),
    )
    .await;
    let mut body = paid_body(&p, "0.05");
    body["headers"] = json!({"X-Api-Key": "secret-header-value"});
    let plain_in = |texts: &[String]| {
        texts
            .iter()
            .any(|t| t.contains("secret-query-value") || t.contains("secret-header-value"))
    };

    let (status, waiting) = fetch(&p.app, &p.agent, body.clone()).await;
    assert_eq!(status, StatusCode::ACCEPTED, "{waiting}");
    let stored = stored_requests(&p.app).await;
    assert!(
        stored.iter().any(|t| t.contains("pending_request")),
        "the request is kept: {stored:?}"
    );
    assert!(!plain_in(&stored), "in plain text: {stored:?}");

    let paid_id = waiting["payment"]["transfer_id"].as_str().unwrap().to_owned();
    let path = format!("/api/agents/{}/transfers/{paid_id}/approve", p.agent.id);
    let (status, approved) = call(&p.app, &p.agent, true, Method::POST, &path, None).await;
    assert_eq!(status, StatusCode::OK, "{approved}");
    let paid = p
        .paywall
        .seen()
        .into_iter()
        .rfind(|s| s.header("x-payment").is_some() || s.header("payment-signature").is_some());
    let paid = paid.expect("the paid request reached the resource");
    assert_eq!(paid.query.as_deref(), Some("api_key=secret-query-value"), "{paid:?}");
    assert_eq!(paid.header("x-api-key"), Some("secret-header-value"), "{paid:?}");

    let (status, waiting) = fetch(&p.app, &p.agent, body).await;
    assert_eq!(status, StatusCode::ACCEPTED, "{waiting}");
    let id = waiting["payment"]["transfer_id"].as_str().unwrap().to_owned();
    let path = format!("/api/agents/{}/transfers/{id}/reject", p.agent.id);
    let (status, rejected) = call(&p.app, &p.agent, true, Method::POST, &path, None).await;
    assert_eq!(status, StatusCode::OK, "{rejected}");
    let stored = stored_requests(&p.app).await;
    assert_eq!(stored.len(), 2, "{stored:?}");
    assert!(
        !stored.iter().any(|t| t.contains("pending_request")),
        "kept after the decision: {stored:?}"
    );

    // The paid answer is kept 30 days after the payment is resolved, then purged (§15).
    wait_for_status(&p, &paid_id, "confirmed").await;
    assert_eq!(transfer(&p, &paid_id).await["x402"]["response"]["status"], 200);
    crate::auth::owners::execute(&p.app, "UPDATE transactions SET updated_at = '2020-01-01T00:00:00Z'").await;
    let _purging = crate::helpers::spawn_app_with(&[("DATABASE_URL", &p.app.db_url)]).await;
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    while !transfer(&p, &paid_id).await["x402"]["response"].is_null() {
        assert!(std::time::Instant::now() < deadline, "the paid answer was not purged");
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    assert_eq!(
        transfer(&p, &paid_id).await["status"],
        "confirmed",
        "the payment itself stays"
    );
}
