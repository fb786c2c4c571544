//! Which chat messages move money with the builtin engine (docs/api.md §15), judged by what the node shows: a table
//! of phrasings sent through `POST /api/chat` to one app on one anvil node. A phrasing that must not send leaves
//! the agent's nonce at 0 and every address it names empty; one that must send pays exactly its amount to exactly
//! its recipient. Recipients the transfer service refuses (the zero address, the agent's own) are here too.

use alloy::primitives::{Address, U256};
use reqwest::{Method, StatusCode};
use serde_json::{Value, json};

use crate::anvil::Anvil;
use crate::helpers::chain::{BASE_CHAIN_ID, ONE_ETH, fresh_address, transfer_app, wallet, wei};
use crate::helpers::{CreatedAgent, TestApp};

/// Who a sending phrasing pays.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Who {
    A,
    B,
    /// The `connected_wallet_address` of the request.
    Connected,
}

#[derive(Debug, Clone, Copy, PartialEq)]
enum Expect {
    Nothing,
    Pays(Who, &'static str),
}

use Expect::{Nothing, Pays};
use Who::{A, B, Connected};

/// One phrasing: its template (`{A}`, `{B}` fresh addresses, `{a}` A in lower case, `{SELF}` the agent's own
/// address, `{ZERO}` the zero address), whether the request carries a connected wallet, and what must happen.
struct Case {
    text: &'static str,
    connected: bool,
    expect: Expect,
}

const fn case(text: &'static str, expect: Expect) -> Case {
    Case {
        text,
        connected: false,
        expect,
    }
}

const fn connected(text: &'static str, expect: Expect) -> Case {
    Case {
        text,
        connected: true,
        expect,
    }
}

const ZERO: &str = "0x0000000000000000000000000000000000000000";

const CASES: &[Case] = &[
    // Negations.
    case("Do NOT send 0.01 ETH to {A} on base", Nothing),
    case("don't send 0.01 ETH to {A}", Nothing),
    case("do not send 0.01 ETH to {A} on base", Nothing),
    case("never send 0.01 ETH to {A}", Nothing),
    case("Please don't send 0.01 ETH to {A}", Nothing),
    case("Do not transfer 0.01 ETH to {A}", Nothing),
    case("send 0.01 ETH to {A}. No wait, don't!", Nothing),
    // Typographic apostrophes and dashes, as phones and models write them (issue 22, point 12).
    case("send 0.01 ETH to {A}. Actually, don\u{2018}t.", Nothing),
    case("Please don\u{2bc}t send 0.01 ETH to {A}", Nothing),
    case("Send 0.01 ETH to {A} \u{2014} no, wait", Nothing),
    case("send 0.01 ETH to {A}, or maybe not", Nothing),
    case("the agent should never pay 0.01 ETH to {A}", Nothing),
    // Questions and hypotheticals.
    case("how would I send 0.01 ETH to {A} on base?", Nothing),
    case("can I send 0.01 ETH to {A}?", Nothing),
    case("Can I send 0.01 ETH to {A} on base", Nothing),
    case("what if I sent 0.01 ETH to {A}", Nothing),
    case("send 0.01 ETH to {A}?", Nothing),
    case("should I send 0.01 ETH to {A}", Nothing),
    case("how much would it cost to send 0.01 ETH to {A} on base", Nothing),
    case("could you send 0.01 ETH to {A}", Nothing),
    // Not an imperative request.
    case("I want to send 0.01 ETH to {A}", Nothing),
    case("we could send 0.01 ETH to {A} later", Nothing),
    case("if you can, send 0.01 ETH to {A}", Nothing),
    // Unknown assets and units.
    case("send 0.02 USDC to {A}", Nothing),
    case("send 2.5 TST to {A} on base", Nothing),
    case("transfer 10 DAI to {A}", Nothing),
    case("send $5 to {A}", Nothing),
    case("send 0.01 POL to {A} on base", Nothing),
    case("send 1000 wei to {A}", Nothing),
    case("send -0.01 ETH to {A}", Nothing),
    // Several amounts, recipients, requests or chains.
    case(
        "I received 0.005 ETH from {A} yesterday; now send 0.002 ETH to {B}",
        Nothing,
    ),
    case("send 0.01 ETH to {A} and 0.02 ETH to {B}", Nothing),
    case("send 0.01 ETH to {A} or {B}", Nothing),
    case("send 0.01 ETH from {A} to {B}", Nothing),
    case("send 0.01 ETH to {A} in 2 hours", Nothing),
    case("send 0.01 ETH to {A} then pay 0.01 ETH to {A}", Nothing),
    case("send 0.01 ETH to {A} on base and ethereum", Nothing),
    // A recipient that is not an address after "to".
    connected("send 0.01 ETH to bob", Nothing),
    case("send {A} 0.01 ETH", Nothing),
    case("send 0.01 ETH", Nothing),
    // Chains the agent is not on.
    case("send 0.01 eth to {A} on polygon", Nothing),
    // Recipients the transfer service refuses.
    case("send 0.01 ETH to {ZERO}", Nothing),
    case("send 0.01 ETH to {SELF} on base", Nothing),
    // Imperative requests: one amount, one known asset, one recipient.
    case("send 0.01 ETH to {A} on base", Pays(A, "0.01")),
    case("Send 0.011 eth to {A}", Pays(A, "0.011")),
    case("please send 0.002 ETH to {A}", Pays(A, "0.002")),
    case("now send 0.002 ETH to {B}", Pays(B, "0.002")),
    case("ok, send 0.003 ETH to {A} on base", Pays(A, "0.003")),
    case("transfer 0.004 ETH to {A}", Pays(A, "0.004")),
    case("pay 0.005 ETH to {B}", Pays(B, "0.005")),
    case("send 0.006 to {A}", Pays(A, "0.006")),
    case("send .007 ether to {A} on base chain", Pays(A, "0.007")),
    case("send 0.008eth to {A}", Pays(A, "0.008")),
    case("please transfer 0.009 ETH to {A}.", Pays(A, "0.009")),
    case("Send 0.013 ETH on base to {A}", Pays(A, "0.013")),
    case("ok please send 0.014 ETH to address {A}", Pays(A, "0.014")),
    case("send 0.015 ETH to {a}", Pays(A, "0.015")),
    case("SEND 0.016 ETH TO {A} ON BASE!", Pays(A, "0.016")),
    connected("send 0.017 ETH to my wallet", Pays(Connected, "0.017")),
    connected("send 0.018 ETH", Pays(Connected, "0.018")),
    connected("please send 0.019 ETH to me on base", Pays(Connected, "0.019")),
];

/// What one phrasing did, described when it is not what it must do.
async fn check(app: &TestApp, anvil: &Anvil, case: &Case) -> Option<String> {
    let agent = agent(app, anvil).await;
    let (a, b, c) = (fresh_address(), fresh_address(), fresh_address());
    let own = agent.address("base");
    let text = case
        .text
        .replace("{A}", &a.to_checksum(None))
        .replace("{a}", &a.to_string().to_lowercase())
        .replace("{B}", &b.to_checksum(None))
        .replace("{SELF}", &own)
        .replace("{ZERO}", ZERO);
    let mut body = json!({"agent_id": agent.id, "message": text});
    if case.connected {
        body["connected_wallet_address"] = json!(c.to_checksum(None));
    }
    let (status, turn) = app
        .request(Method::POST, "/api/chat", Some(&agent.token), Some(body))
        .await;
    if status != StatusCode::OK {
        return Some(format!("{text:?}: chat answered {status}: {turn}"));
    }
    let nonce = anvil.nonce(wallet(&agent)).await;
    let balances = [
        (A, anvil.balance(a).await),
        (B, anvil.balance(b).await),
        (Connected, anvil.balance(c).await),
    ];
    let reply = turn["response"].as_str().unwrap_or_default().to_string();
    let paid: Vec<(Who, U256)> = balances.into_iter().filter(|(_, v)| !v.is_zero()).collect();
    let wrong = match case.expect {
        Nothing => nonce != 0 || !paid.is_empty() || reply.trim().is_empty(),
        Pays(who, amount) => nonce != 1 || paid != [(who, units(amount))],
    };
    wrong.then(|| {
        format!(
            "{text:?} must {:?}: nonce {nonce}, paid {paid:?}, reply {reply:?}, calls {}",
            case.expect,
            calls(&turn)
        )
    })
}

fn units(amount: &str) -> U256 {
    agentd::domain::amount::parse_units(amount, 18).expect("a valid amount")
}

fn calls(turn: &Value) -> String {
    let calls = turn["chain_calls"].as_array().cloned().unwrap_or_default();
    let named: Vec<String> = calls
        .iter()
        .map(|c| format!("{}({}) -> {}", c["tool"], c["args"], c["error"]["code"]))
        .collect();
    named.join(", ")
}

/// A fresh agent on base with every capability, a cap of 20 ETH and 20 ETH in its wallet: enough that a phrasing
/// misread as a large ETH amount (`send 2.5 TST`, `transfer 10 DAI`) would really be paid.
async fn agent(app: &TestApp, anvil: &Anvil) -> CreatedAgent {
    let agent = app
        .create_agent_ok(json!({
            "name": "intent",
            "chains": ["base"],
            "capabilities": ["read", "compare", "transact", "analytics"],
            "spending_cap": 20,
        }))
        .await;
    anvil.set_balance(wallet(&agent), wei(20 * ONE_ETH)).await;
    agent
}

#[tokio::test]
async fn only_one_imperative_request_with_one_amount_asset_and_recipient_moves_money() {
    let refusals = CASES.iter().filter(|c| c.expect == Nothing).count();
    assert!(
        CASES.len() >= 40 && refusals * 2 >= CASES.len(),
        "the table keeps at least 40 phrasings, half of them refusals"
    );
    let anvil = Anvil::start(BASE_CHAIN_ID);
    let app = transfer_app(&anvil, &[]).await;
    let mut failures = Vec::new();
    for case in CASES {
        failures.extend(check(&app, &anvil, case).await);
    }
    assert!(
        failures.is_empty(),
        "{} of {} phrasings did the wrong thing:\n{}",
        failures.len(),
        CASES.len(),
        failures.join("\n")
    );
}

/// The zero address and the agent's own address as a `send_native` recipient through chat: refused with
/// `invalid_recipient`, nothing on the node.
#[tokio::test]
async fn chat_refuses_the_zero_address_and_the_agents_own_as_recipients() {
    let anvil = Anvil::start(BASE_CHAIN_ID);
    let app = transfer_app(&anvil, &[]).await;
    let agent = agent(&app, &anvil).await;
    let own = agent.address("base");
    for to in [ZERO, own.as_str(), &own.to_lowercase()] {
        let body = json!({"agent_id": agent.id, "message": format!("send 0.01 ETH to {to} on base")});
        let (status, turn) = app
            .request(Method::POST, "/api/chat", Some(&agent.token), Some(body))
            .await;
        assert_eq!(status, StatusCode::OK, "{turn}");
        let call = &turn["chain_calls"][0];
        assert_eq!(call["tool"], "send_native", "{turn}");
        assert_eq!(call["error"]["code"], "invalid_recipient", "{turn}");
        assert!(
            turn["response"]
                .as_str()
                .unwrap_or_default()
                .contains("invalid_recipient"),
            "the answer says why: {turn}"
        );
    }
    assert_eq!(anvil.nonce(wallet(&agent)).await, 0, "nothing reached the node");
    assert_eq!(anvil.balance(Address::ZERO).await, U256::ZERO);
}
