//! The x402 protocol core against a real paid resource (`helpers::paywall`) and a real EIP-3009 token on anvil:
//! a 402 read, an entry chosen, its price checked, the authorization signed by the agent's key and sent through the
//! guarded fetch, verified by the resource and settled on chain with the exact amount. The endpoint that wires the
//! policy and the reservation in between comes next; these tests call the module directly.

use std::collections::BTreeMap;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use agentd::config::X402Config;
use agentd::net::egress::{FetchRequest, Fetched, Fetcher};
use agentd::x402::wire::{self, PAYMENT_REQUIRED};
use agentd::x402::{Authorization, KnownToken, Protocol, X402Error, check_price, choose, sign_payment};
use alloy::primitives::{Address, B256, Bytes, U256};
use alloy::providers::Provider;
use alloy::signers::local::PrivateKeySigner;
use alloy::sol_types::SolCall;
use serde_json::json;

use crate::anvil::Anvil;
use crate::helpers::paywall::{Paywall, PaywallSetup, entry_v1, entry_v2};
use crate::helpers::solidity::{self, Eip3009Token, USDC_BASE, authorization_state, mint, token_balance, usdc_on_base};

/// An anvil node as base (8453) with USDC's code and domain at USDC's address, and an agent key holding 1 USDC.
struct Chain {
    anvil: Anvil,
    usdc: Address,
    agent: PrivateKeySigner,
    pay_to: Address,
}

async fn chain() -> Chain {
    let anvil = Anvil::start(8453);
    let usdc = usdc_on_base(&anvil).await;
    let agent = PrivateKeySigner::random();
    mint(&anvil, usdc, agent.address(), U256::from(1_000_000u64)).await;
    Chain {
        anvil,
        usdc,
        agent,
        pay_to: Address::repeat_byte(0x42),
    }
}

/// The agent's payable tokens: USDC on base, as the registry will give it.
fn tokens() -> Vec<KnownToken> {
    vec![KnownToken {
        chain: "base".into(),
        chain_id: 8453,
        symbol: "USDC".into(),
        address: USDC_BASE.parse().unwrap(),
        decimals: 6,
        eip712: Some(("USD Coin".into(), "2".into())),
    }]
}

fn fetcher() -> Fetcher {
    Fetcher::new(X402Config {
        allow_private: true,
        offer_allow_private: false,
        max_response_bytes: 1 << 20,
        timeout: Duration::from_secs(20),
    })
}

fn now() -> u64 {
    SystemTime::now().duration_since(UNIX_EPOCH).unwrap().as_secs()
}

/// What one paid exchange gave: the 402, the answer to the paid retry, and what was signed.
struct Exchange {
    first: Fetched,
    paid: Fetched,
    authorization: Authorization,
    protocol: Protocol,
}

/// The whole client side: request, read the 402, choose, check the price, sign, retry with the payment.
async fn pay(agent: &PrivateKeySigner, url: &str, max_amount: &str) -> Result<Exchange, X402Error> {
    let fetcher = fetcher();
    let deadline = fetcher.deadline();
    let request = FetchRequest::new(None, url, &BTreeMap::new(), None).unwrap();
    let first = fetcher.send(&request, deadline).await.expect("the first request");
    assert_eq!(first.status, 402, "{}", first.text());
    let required = wire::payment_required(first.header(PAYMENT_REQUIRED), &first.body)?;
    let choice = choose(&required, &tokens(), None)?;
    check_price(&choice, max_amount)?;
    let authorization = Authorization::new(agent.address(), &choice, now());
    let payment = sign_payment(agent, &required, &choice, &authorization).expect("signed");
    let paid_request = request
        .with_payment(payment.header_name, &payment.header_value)
        .unwrap();
    let paid = fetcher.send(&paid_request, deadline).await.expect("the paid request");
    Ok(Exchange {
        first,
        paid,
        authorization,
        protocol: required.protocol,
    })
}

#[tokio::test]
async fn a_v2_paywall_is_paid_once_and_the_exact_amount_moves_on_chain() {
    let c = chain().await;
    let usdc = c.usdc;
    // Several entries: another chain, an unknown token, then USDC on base (with a field this client does not know).
    let mut wanted = entry_v2(8453, usdc, 10_000, c.pay_to, "USD Coin", "2");
    wanted["extra"]["futureField"] = json!("kept");
    let accepts = vec![
        entry_v2(1, usdc, 1, c.pay_to, "USD Coin", "2"),
        entry_v2(8453, Address::repeat_byte(9), 1, c.pay_to, "X", "1"),
        wanted.clone(),
    ];
    let paywall = Paywall::start(PaywallSetup::new(2, accepts, c.anvil.url(), 8453)).await;
    let exchange = pay(&c.agent, &paywall.url("/paid"), "0.05").await.unwrap();
    assert_eq!(exchange.protocol, Protocol::V2);
    assert_eq!(
        (exchange.paid.status, exchange.paid.text().as_str()),
        (200, "paid content")
    );
    let settled = wire::settle_response(exchange.paid.header(wire::PAYMENT_RESPONSE)).expect("PAYMENT-RESPONSE");
    assert!(settled.success);
    assert_eq!(settled.network, "eip155:8453");
    assert_eq!(
        settled.payer.as_deref(),
        Some(c.agent.address().to_checksum(None).as_str())
    );
    // Paid once, the chosen entry echoed exactly, the settlement the one the resource names.
    assert_eq!(paywall.paid_requests(), 1);
    let verified = paywall.verified();
    assert_eq!(verified.len(), 1);
    assert_eq!(verified[0].document["accepted"], wanted);
    assert_eq!(verified[0].from, c.agent.address());
    assert_eq!(verified[0].nonce, exchange.authorization.nonce);
    assert_eq!(settled.transaction, verified[0].settlement.unwrap().to_string());
    assert_eq!(
        token_balance(&c.anvil, usdc, c.agent.address()).await,
        U256::from(990_000u64)
    );
    assert_eq!(token_balance(&c.anvil, usdc, c.pay_to).await, U256::from(10_000u64));
    assert!(authorization_state(&c.anvil, usdc, c.agent.address(), exchange.authorization.nonce).await);
}

#[tokio::test]
async fn a_v1_paywall_is_paid_through_x_payment_and_settled() {
    let c = chain().await;
    let accepts = vec![entry_v1("base", c.usdc, 2_500, c.pay_to, "USD Coin", "2")];
    let paywall = Paywall::start(PaywallSetup::new(1, accepts, c.anvil.url(), 8453)).await;
    let exchange = pay(&c.agent, &paywall.url("/paid"), "0.0025").await.unwrap();
    assert_eq!(exchange.protocol, Protocol::V1);
    assert!(
        exchange.first.header(PAYMENT_REQUIRED).is_none(),
        "v1 prices in the body"
    );
    assert_eq!(exchange.paid.status, 200);
    let seen = paywall.seen();
    assert!(seen.last().unwrap().header("x-payment").is_some());
    assert!(seen.last().unwrap().header("payment-signature").is_none());
    let settled = wire::settle_response(exchange.paid.header(wire::X_PAYMENT_RESPONSE)).expect("X-PAYMENT-RESPONSE");
    assert!(settled.success);
    assert_eq!(token_balance(&c.anvil, c.usdc, c.pay_to).await, U256::from(2_500u64));
}

#[tokio::test]
async fn a_resource_that_verifies_then_fails_to_settle_answers_402_again_and_nothing_moves() {
    let c = chain().await;
    let accepts = vec![entry_v2(8453, c.usdc, 10_000, c.pay_to, "USD Coin", "2")];
    let mut setup = PaywallSetup::new(2, accepts, c.anvil.url(), 8453);
    setup.settles = false;
    let paywall = Paywall::start(setup).await;
    let exchange = pay(&c.agent, &paywall.url("/paid"), "1").await.unwrap();
    assert_eq!(exchange.paid.status, 402);
    let again = wire::payment_required(exchange.paid.header(PAYMENT_REQUIRED), &exchange.paid.body).unwrap();
    assert!(again.error.unwrap().contains("settlement failed"));
    assert_eq!(paywall.verified().len(), 1, "the signature was good");
    assert_eq!(
        token_balance(&c.anvil, c.usdc, c.agent.address()).await,
        U256::from(1_000_000u64)
    );
    // Unused, the authorization could still be used until validBefore: exactly what the reservation must cover.
    assert!(!authorization_state(&c.anvil, c.usdc, c.agent.address(), exchange.authorization.nonce).await);
    assert!(exchange.authorization.valid_before > now());
}

#[tokio::test]
async fn a_price_above_max_or_an_unpayable_offer_is_refused_before_anything_is_signed() {
    let c = chain().await;
    let accepts = vec![entry_v2(8453, c.usdc, 50_001, c.pay_to, "USD Coin", "2")];
    let paywall = Paywall::start(PaywallSetup::new(2, accepts, c.anvil.url(), 8453)).await;
    let err = pay(&c.agent, &paywall.url("/paid"), "0.05").await.err().unwrap();
    assert_eq!(
        err,
        X402Error::PriceAboveMax {
            price: "0.050001".into(),
            max: "0.05".into(),
            symbol: "USDC".into()
        }
    );
    // Only on another chain: nothing fits, and what was offered is said.
    let other = vec![entry_v2(10, c.usdc, 1, c.pay_to, "USD Coin", "2")];
    let elsewhere = Paywall::start(PaywallSetup::new(2, other, c.anvil.url(), 8453)).await;
    let err = pay(&c.agent, &elsewhere.url("/paid"), "1").await.err().unwrap();
    assert!(
        matches!(&err, X402Error::Unsupported { offered, .. } if offered[0].network.as_deref() == Some("eip155:10"))
    );
    assert_eq!(
        paywall.paid_requests() + elsewhere.paid_requests(),
        0,
        "no payment was sent"
    );
}

#[tokio::test]
async fn a_free_resource_is_fetched_without_a_payment() {
    let c = chain().await;
    let paywall = Paywall::start(PaywallSetup::new(2, vec![], c.anvil.url(), 8453)).await;
    let fetcher = fetcher();
    let request = FetchRequest::new(None, &paywall.url("/free"), &BTreeMap::new(), None).unwrap();
    let answer = fetcher.send(&request, fetcher.deadline()).await.unwrap();
    assert_eq!((answer.status, answer.text().as_str()), (200, "free content"));
    assert!(answer.header(PAYMENT_REQUIRED).is_none());
    assert_eq!(paywall.paid_requests(), 0);
}

/// Calls `transferWithAuthorization` as `eth_call` and returns the revert reason, if it reverts.
async fn revert_reason(
    anvil: &Anvil,
    token: Address,
    call: &Eip3009Token::transferWithAuthorizationCall,
) -> Option<String> {
    let data: Bytes = call.abi_encode().into();
    let result: Result<Bytes, _> = anvil
        .provider()
        .raw_request("eth_call".into(), (json!({"to": token, "data": data}), "latest"))
        .await;
    result.err().map(|e| e.to_string())
}

#[tokio::test]
async fn the_eip3009_token_accepts_the_agents_signature_once_and_refuses_as_usdc_does() {
    let c = chain().await;
    let accepts = vec![entry_v2(8453, c.usdc, 1_234, c.pay_to, "USD Coin", "2")];
    let required = wire::payment_required(
        Some(&wire::encode_header(
            &json!({"x402Version": 2, "resource": {"url": "x"}, "accepts": accepts}),
        )),
        b"",
    )
    .unwrap();
    let choice = choose(&required, &tokens(), None).unwrap();
    let call_for = |a: &Authorization, signer: &PrivateKeySigner| {
        let payment = sign_payment(signer, &required, &choice, a).unwrap();
        Eip3009Token::transferWithAuthorizationCall {
            from: a.from,
            to: a.to,
            value: a.value,
            validAfter: U256::from(a.valid_after),
            validBefore: U256::from(a.valid_before),
            nonce: a.nonce,
            signature: payment.signature.parse().unwrap(),
        }
    };
    let good = Authorization::new(c.agent.address(), &choice, now());
    let call = call_for(&good, &c.agent);
    assert_eq!(revert_reason(&c.anvil, c.usdc, &call).await, None);
    let facilitator: Address = "0x70997970C51812dc3A010C7d01b50e0d17dc79C8".parse().unwrap();
    let (_, ok) = solidity::send_as(&c.anvil, facilitator, c.usdc, call.abi_encode().into()).await;
    assert!(ok);
    assert_eq!(token_balance(&c.anvil, c.usdc, c.pay_to).await, U256::from(1_234u64));
    // The same authorization again, an expired one, one not yet valid, and one signed by another key.
    let reused = revert_reason(&c.anvil, c.usdc, &call).await.unwrap();
    assert!(
        reused.contains("FiatTokenV2: authorization is used or canceled"),
        "{reused}"
    );
    let expired = Authorization {
        valid_before: now() - 10,
        nonce: B256::repeat_byte(1),
        ..good.clone()
    };
    let reason = revert_reason(&c.anvil, c.usdc, &call_for(&expired, &c.agent))
        .await
        .unwrap();
    assert!(reason.contains("FiatTokenV2: authorization is expired"), "{reason}");
    let early = Authorization {
        valid_after: now() + 3600,
        nonce: B256::repeat_byte(2),
        ..good.clone()
    };
    let reason = revert_reason(&c.anvil, c.usdc, &call_for(&early, &c.agent))
        .await
        .unwrap();
    assert!(
        reason.contains("FiatTokenV2: authorization is not yet valid"),
        "{reason}"
    );
    let stranger = PrivateKeySigner::random();
    let forged = {
        let mut call = call_for(
            &Authorization {
                from: stranger.address(),
                nonce: B256::repeat_byte(3),
                ..good.clone()
            },
            &stranger,
        );
        call.from = c.agent.address();
        call
    };
    let reason = revert_reason(&c.anvil, c.usdc, &forged).await.unwrap();
    assert!(reason.contains("FiatTokenV2: invalid signature"), "{reason}");
    // The copy at USDC's address keeps USDC's name and its own domain separator there.
    let name: Bytes = c
        .anvil
        .provider()
        .raw_request(
            "eth_call".into(),
            (
                json!({"to": c.usdc, "data": Bytes::from(Eip3009Token::nameCall {}.abi_encode())}),
                "latest",
            ),
        )
        .await
        .unwrap();
    assert_eq!(Eip3009Token::nameCall::abi_decode_returns(&name).unwrap(), "USD Coin");
}

#[tokio::test]
async fn the_official_python_sdks_paywall_accepts_the_signed_payment_and_settles_it() {
    use crate::helpers::sdk_paywall::SdkPaywall;
    let c = chain().await;
    // anvil's third development account (funded, a public test key) is the SDK facilitator's own.
    let facilitator_key = "0x5de4111afa1a4b94908f83103eb1f1706367c2e68ca870fc3fb9a804cdab365a";
    let pay_to = c.pay_to.to_checksum(None);
    let sdk = SdkPaywall::start(c.anvil.url(), facilitator_key, &pay_to, "$0.01");
    let exchange = pay(&c.agent, &sdk.url("/weather"), "0.01").await.unwrap();
    assert_eq!(exchange.protocol, Protocol::V2);
    assert_eq!(exchange.paid.status, 200, "{}", exchange.paid.text());
    let weather: serde_json::Value = serde_json::from_slice(&exchange.paid.body).unwrap();
    assert_eq!(weather, json!({"weather": "sunny"}));
    let settled = wire::settle_response(exchange.paid.header(wire::PAYMENT_RESPONSE)).expect("PAYMENT-RESPONSE");
    assert!(settled.success, "{settled:?}");
    assert_eq!(
        token_balance(&c.anvil, c.usdc, c.agent.address()).await,
        U256::from(990_000u64)
    );
    assert_eq!(token_balance(&c.anvil, c.usdc, c.pay_to).await, U256::from(10_000u64));
    assert!(authorization_state(&c.anvil, c.usdc, c.agent.address(), exchange.authorization.nonce).await);
    let receipt = c
        .anvil
        .provider()
        .get_transaction_receipt(settled.transaction.parse().unwrap())
        .await
        .unwrap()
        .expect("the settlement the SDK names is on the node");
    assert!(receipt.status());
}
