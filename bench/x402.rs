//! `x402`: the overhead agentd adds to a paid request (docs/api.md §16). The test suite's paywall
//! (`tests/api/helpers/paywall.rs`: protocol v2, verifies the EIP-712 signature, settles with
//! `transferWithAuthorization` on anvil through the EIP-3009 test token at USDC's base address) is paid N times
//! through `POST /api/agents/{id}/x402/fetch` on the in-process app (SQLite), and N times directly by a client that
//! sends a payment it signed beforehand (the paywall's own time: verification, settlement, answer). The two kinds
//! alternate, one request at a time, so both see the same node. overhead = p50(fetch) - p50(direct), and the same at
//! p99. The fetch pays for everything the protocol and the guard ask of the service: the unpaid request and its 402,
//! the policy and reservation step, the signature, the paid request, and recording the answer.

use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use alloy::primitives::{Address, B256, U256};
use alloy::signers::SignerSync;
use alloy::signers::local::PrivateKeySigner;
use alloy::sol_types::{SolStruct, eip712_domain};
use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use serde_json::{Value, json};

use crate::common::{LocalApp, Samples, TOKEN_HEADER, f, start_anvil, table, transacting_agent};
use crate::paywall::{Paywall, PaywallSetup, TransferWithAuthorization, entry_v2};
use crate::solidity;

const N: usize = 200;
const BASE_CHAIN_ID: u64 = 8453;
/// 0.01 USDC (6 decimals).
const PRICE: u64 = 10_000;

/// A v2 payment document for `entry`, signed by `payer` now (valid for the entry's timeout).
fn premade_payment(payer: &PrivateKeySigner, entry: &Value, resource: &str, index: usize) -> String {
    let now = SystemTime::now().duration_since(UNIX_EPOCH).unwrap().as_secs();
    let asset: Address = entry["asset"].as_str().unwrap().parse().unwrap();
    let terms = TransferWithAuthorization {
        from: payer.address(),
        to: entry["payTo"].as_str().unwrap().parse().unwrap(),
        value: U256::from(PRICE),
        validAfter: U256::ZERO,
        validBefore: U256::from(now + 300),
        // A fresh payer per run, so a counter is a nonce it never used.
        nonce: B256::from(U256::from(index + 1)),
    };
    let domain = eip712_domain! {
        name: "USD Coin",
        version: "2",
        chain_id: BASE_CHAIN_ID,
        verifying_contract: asset,
    };
    let signature = payer
        .sign_hash_sync(&terms.eip712_signing_hash(&domain))
        .expect("sign the authorization");
    let document = json!({
        "x402Version": 2,
        "accepted": entry,
        "resource": {"url": resource, "description": "a paid test resource", "mimeType": "text/plain"},
        "payload": {
            "signature": signature.to_string(),
            "authorization": {
                "from": terms.from.to_checksum(None),
                "to": terms.to.to_checksum(None),
                "value": terms.value.to_string(),
                "validAfter": terms.validAfter.to_string(),
                "validBefore": terms.validBefore.to_string(),
                "nonce": terms.nonce.to_string(),
            },
        },
    });
    STANDARD.encode(document.to_string())
}

/// One paid request through agentd: its time, or the answer when it did not pay.
async fn fetch_once(
    client: &reqwest::Client,
    fetch_url: &str,
    token: &str,
    paid_url: &str,
) -> (Duration, Result<(), String>) {
    let started = Instant::now();
    let response = client
        .post(fetch_url)
        .header(TOKEN_HEADER, token)
        .json(&json!({"url": paid_url, "max_amount": "0.05"}))
        .send()
        .await
        .expect("POST x402/fetch");
    let status = response.status();
    let body: Value = response.json().await.expect("JSON answer");
    let elapsed = started.elapsed();
    let paid = status.as_u16() == 200 && body["status"] == 200 && body["payment"]["kind"] == "x402";
    (elapsed, if paid { Ok(()) } else { Err(body.to_string()) })
}

/// One paid request straight to the paywall with a pre-signed payment: its time, or the answer when refused.
async fn direct_once(client: &reqwest::Client, paid_url: &str, payment: &str) -> (Duration, Result<(), String>) {
    let started = Instant::now();
    let response = client
        .get(paid_url)
        .header("PAYMENT-SIGNATURE", payment)
        .send()
        .await
        .expect("GET /paid");
    let status = response.status();
    let settled = response.headers().contains_key("payment-response");
    let body = response.text().await.expect("the paid answer");
    let elapsed = started.elapsed();
    (
        elapsed,
        if status.as_u16() == 200 && settled {
            Ok(())
        } else {
            Err(body)
        },
    )
}

pub async fn run() {
    let anvil = start_anvil(BASE_CHAIN_ID, &[]).await;
    let app = LocalApp::start(&[("RPC_URL_BASE", anvil.url()), ("X402_ALLOW_PRIVATE", "true")]).await;
    let created = app.create_agent(transacting_agent("bench payer")).await;
    let agent_address = created.address("base");
    let usdc = solidity::usdc_on_base(&anvil).await;
    let direct_payer = PrivateKeySigner::random();
    let enough = U256::from(PRICE) * U256::from(N + 1);
    // The agent holds ten times what it pays: until the watcher sees an authorization used on chain, the service
    // counts it as still to move, next to the balance the settlement already lowered (§16).
    solidity::mint(&anvil, usdc, agent_address, enough * U256::from(10)).await;
    solidity::mint(&anvil, usdc, direct_payer.address(), enough).await;
    let pay_to = Address::repeat_byte(0x42);
    let entry = entry_v2(BASE_CHAIN_ID, usdc, PRICE, pay_to, "USD Coin", "2");
    let paywall = Paywall::start(PaywallSetup::new(2, vec![entry.clone()], anvil.url(), BASE_CHAIN_ID)).await;
    let paid_url = paywall.url("/paid");
    let fetch_url = format!("{}/api/agents/{}/x402/fetch", app.address, created.id);
    let client = &app.client;

    // The direct client's payments, signed before any timing (one per request: each nonce is used once).
    let premade: Vec<String> = (0..=N)
        .map(|i| premade_payment(&direct_payer, &entry, &paid_url, i))
        .collect();

    // One of each to warm up connections and caches (not counted).
    let token = created.token.as_str();
    let mut premade = premade.into_iter();
    fetch_once(client, &fetch_url, token, &paid_url)
        .await
        .1
        .expect("a warm-up payment through agentd");
    direct_once(client, &paid_url, &premade.next().unwrap())
        .await
        .1
        .expect("a warm-up direct payment");

    let mut through_agentd: Vec<Duration> = Vec::with_capacity(N);
    let mut direct: Vec<Duration> = Vec::with_capacity(N);
    let mut errors = 0usize;
    let mut first_error: Option<String> = None;
    for payment in premade {
        match fetch_once(client, &fetch_url, token, &paid_url).await {
            (elapsed, Ok(())) => through_agentd.push(elapsed),
            (_, Err(body)) => {
                errors += 1;
                first_error.get_or_insert(body);
            }
        }
        match direct_once(client, &paid_url, &payment).await {
            (elapsed, Ok(())) => direct.push(elapsed),
            (_, Err(body)) => {
                errors += 1;
                first_error.get_or_insert(body);
            }
        }
    }

    let settled = paywall.verified().iter().filter(|v| v.settlement.is_some()).count();
    let balance = solidity::token_balance(&anvil, usdc, pay_to).await;
    let a = Samples::from_durations(&through_agentd);
    let d = Samples::from_durations(&direct);
    println!("N = {N} paid requests each way, alternating; anvil automine; times in ms");
    table(
        &["paid request", "n", "p50", "p99", "max"],
        &[
            vec![
                "direct, pre-signed payment (the paywall's own time)".into(),
                d.len().to_string(),
                f(d.pct(50.0), 2),
                f(d.pct(99.0), 2),
                f(d.max(), 2),
            ],
            vec![
                "through agentd: POST …/x402/fetch".into(),
                a.len().to_string(),
                f(a.pct(50.0), 2),
                f(a.pct(99.0), 2),
                f(a.max(), 2),
            ],
            vec![
                "overhead (agentd - direct)".into(),
                String::new(),
                f(a.pct(50.0) - d.pct(50.0), 2),
                f(a.pct(99.0) - d.pct(99.0), 2),
                String::new(),
            ],
        ],
    );
    println!(
        "errors {errors}; settlements on chain {settled} (expected {}); payee balance {balance} units (expected {})",
        2 * (N + 1),
        U256::from(PRICE) * U256::from(2 * (N + 1)),
    );
    if let Some(error) = first_error {
        println!("first error: {error}");
    }
}
