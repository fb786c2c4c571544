//! Offers held for the owner's approval (docs/api.md §23 Tools, §11): the `create_offer` tool of a guarded agent,
//! asked by a scripted OpenAI-compatible model in chat, is checked and held; its URL answers 404 until the owner
//! approves it where held transfers are approved; the approval events reach the conversation's stream and the
//! webhooks; approved, it sells to the official x402 Python SDK's buyer (the chain shows the price paid to the agent);
//! rejected or expired, it never sells. An approval of an offer signs nothing.

use std::path::Path;
use std::process::Command;
use std::time::Duration;

use agentd::domain::clock::Clock;
use alloy::primitives::{Address, U256};
use alloy::signers::local::PrivateKeySigner;
use reqwest::{Method, StatusCode};
use serde_json::{Value, json};

use crate::anvil::Anvil;
use crate::helpers::chain::{BASE_CHAIN_ID, funded_agent, transfer_app, wallet};
use crate::helpers::llm_server::{LlmServer, Reply};
use crate::helpers::sdk_paywall::python;
use crate::helpers::solidity::{mint, token_balance, usdc_on_base};
use crate::helpers::sse::SseStream;
use crate::helpers::webhook_receiver::{Receiver, verified};
use crate::helpers::{CreatedAgent, TestApp, assert_error};
use crate::money::policy::{ADMIN, call, set_policy};

/// The tool's arguments: a stored body for 0.05 USDC on base.
fn haiku(description: &str) -> String {
    json!({"chain": "base", "asset": "USDC", "price": "0.05", "description": description,
        "content": "old pond, a frog jumps", "content_type": "text/plain", "gas_per_day": "0.001"})
    .to_string()
}

/// A guarded agent (the operator's `ADMIN_TOKEN`) on anvil's base with USDC as an EIP-3009 token, whose model is
/// the scripted server.
struct Guarded {
    anvil: Anvil,
    app: TestApp,
    agent: CreatedAgent,
    usdc: Address,
    _llm: LlmServer,
}

impl Guarded {
    async fn start(script: Vec<Reply>) -> Guarded {
        let anvil = Anvil::start(BASE_CHAIN_ID);
        let llm = LlmServer::start(script).await;
        let mut vars = llm.app_vars("sk-test-held-offers");
        vars.extend([
            ("OFFER_ALLOW_PRIVATE", "true"),
            ("ADMIN_TOKEN", ADMIN),
            ("WEBHOOK_ALLOW_PRIVATE", "true"),
        ]);
        let app = transfer_app(&anvil, &vars).await;
        let agent = funded_agent(&app, &anvil, Some(0.5)).await;
        let usdc = usdc_on_base(&anvil).await;
        Guarded {
            anvil,
            app,
            agent,
            usdc,
            _llm: llm,
        }
    }

    /// A chat turn with the agent's token; the answer.
    async fn chat(&self, message: &str) -> Value {
        let body = json!({"agent_id": self.agent.id, "message": message});
        let (status, answer) = self
            .app
            .request(Method::POST, "/api/chat", Some(&self.agent.token), Some(body))
            .await;
        assert_eq!(status, StatusCode::OK, "{answer}");
        answer
    }

    /// `approve` or `reject` of `id`, with owner authority (the admin bearer) or the agent's token alone.
    async fn decide(&self, owner: bool, id: &str, decision: &str) -> (StatusCode, Value) {
        let path = format!("/api/agents/{}/transfers/{id}/{decision}", self.agent.id);
        call(&self.app, &self.agent, owner, Method::POST, &path, None).await
    }

    async fn waiting(&self) -> Vec<Value> {
        let path = format!("/api/agents/{}/approvals", self.agent.id);
        let (status, body) = call(&self.app, &self.agent, false, Method::GET, &path, None).await;
        assert_eq!(status, StatusCode::OK, "{body}");
        body.as_array().expect("a list").clone()
    }

    /// `GET /x402/{id}` without a payment.
    async fn buy(&self, id: &str) -> (StatusCode, Value, reqwest::header::HeaderMap) {
        let response = self
            .app
            .send(self.app.client.get(self.app.url(&format!("/x402/{id}"))))
            .await;
        (response.status, response.body, response.headers)
    }

    /// The audit entries with `action`, newest first, read as the owner.
    async fn audited(&self, action: &str) -> Vec<Value> {
        let path = format!("/api/agents/{}/audit", self.agent.id);
        let (status, log) = call(&self.app, &self.agent, true, Method::GET, &path, None).await;
        assert_eq!(status, StatusCode::OK, "{log}");
        let entries = log.as_array().expect("audit entries").iter();
        entries.filter(|e| e["action"] == action).cloned().collect()
    }
}

/// The one `create_offer` call of a chat turn with a held result; returns the offer's id.
#[track_caller]
fn held_offer(call: &Value) -> String {
    assert_eq!(call["tool"], "create_offer", "{call}");
    let result = &call["result"];
    assert_eq!(result["status"], "awaiting_approval", "{call}");
    assert_eq!(result["kind"], "offer", "{call}");
    assert!(result["expires_at"].is_string(), "{call}");
    assert!(
        result.get("transfer_id").is_none(),
        "not a transfer for MCP's approval flows: {call}"
    );
    assert_eq!(result["offer"]["status"], "awaiting_approval", "{call}");
    let id = result["offer_id"].as_str().expect("offer_id").to_string();
    assert_eq!(result["offer"]["id"], id.as_str(), "{call}");
    id
}

#[tokio::test]
async fn a_guarded_agents_offer_waits_for_the_owner_and_once_approved_sells_to_the_official_sdk() {
    let g = Guarded::start(vec![
        Reply::tool_call("call_1", "create_offer", &[&haiku("a haiku")], 10, 5),
        Reply::text(&["It waits for your approval."], 10, 5),
    ])
    .await;
    let receiver = Receiver::start().await;
    let path = format!("/api/agents/{}/webhooks", g.agent.id);
    let events = json!(["approval.required", "approval.resolved"]);
    let (status, hook) = call(
        &g.app,
        &g.agent,
        true,
        Method::POST,
        &path,
        Some(json!({"url": receiver.url, "events": events})),
    )
    .await;
    assert_eq!(status, StatusCode::CREATED, "{hook}");
    set_policy(&g.app, &g.agent, json!({"approval_ttl_secs": 600})).await;

    let answer = g.chat("sell my haiku for 0.05 USDC").await;
    let id = held_offer(&answer["chain_calls"][0]);
    let expires: chrono::DateTime<chrono::Utc> = answer["chain_calls"][0]["result"]["expires_at"]
        .as_str()
        .unwrap()
        .parse()
        .unwrap();
    let ttl = expires - g.app.clock.now();
    assert!(
        ttl > chrono::Duration::seconds(590) && ttl <= chrono::Duration::seconds(600),
        "the policy's approval_ttl_secs: {ttl}"
    );

    // Nothing sells while it waits.
    let (status, body, _) = g.buy(&id).await;
    assert_eq!(status, StatusCode::NOT_FOUND, "{body}");
    assert_eq!(body["error"]["code"], "offer_not_found", "{body}");

    // The conversation's stream tells the owner.
    let conversation = answer["conversation_id"].as_str().expect("conversation_id");
    let stream_path = format!("/api/conversations/{conversation}/stream?last_event_id=0");
    let mut stream = SseStream::open(g.app.build(Method::GET, &stream_path, Some(&g.agent.token), None)).await;
    let required = stream
        .next_named("approval_required", Duration::from_secs(10))
        .await
        .expect("approval_required")
        .json();
    assert_eq!(required["transfer_id"], id.as_str(), "{required}");
    assert_eq!(required["kind"], "offer", "{required}");
    assert_eq!(required["conversation_id"], conversation, "{required}");
    assert_eq!(required["amount"], "0.05", "{required}");
    assert_eq!(required["asset"], "USDC", "{required}");
    assert_eq!(required["offer"]["description"], "a haiku", "{required}");

    // The approvals list it with what the owner decides on.
    let waiting = g.waiting().await;
    let [entry] = waiting.as_slice() else {
        panic!("one waiting: {waiting:?}");
    };
    assert_eq!(entry["id"], id.as_str(), "{entry}");
    assert_eq!(entry["kind"], "offer", "{entry}");
    assert_eq!(entry["status"], "awaiting_approval", "{entry}");
    assert_eq!(entry["amount"], "0.05", "{entry}");
    assert_eq!(entry["to"], wallet(&g.agent).to_checksum(None), "{entry}");
    let offer = &entry["offer"];
    assert_eq!(offer["chain"], "base", "{entry}");
    assert_eq!(offer["asset"], "USDC", "{entry}");
    assert_eq!(offer["price"], "0.05", "{entry}");
    assert_eq!(offer["description"], "a haiku", "{entry}");
    assert_eq!(offer["resource"]["kind"], "content", "{entry}");
    assert_eq!(offer["settle"], "on_success", "{entry}");
    assert_eq!(offer["gas_per_day"], "0.001", "{entry}");

    // The agent cannot approve its own offer; the owner can, once.
    let (status, body) = g.decide(false, &id, "approve").await;
    assert_error(&(status, body), StatusCode::FORBIDDEN, "owner_required");
    let (status, approved) = g.decide(true, &id, "approve").await;
    assert_eq!(status, StatusCode::OK, "{approved}");
    assert_eq!(approved["kind"], "offer", "{approved}");
    assert_eq!(approved["status"], "approved", "{approved}");
    assert_eq!(approved["offer"]["status"], "active", "{approved}");
    assert!(approved["tx_hash"].is_null(), "nothing is signed: {approved}");
    let again = g.decide(true, &id, "approve").await;
    assert_error(&again, StatusCode::CONFLICT, "transfer_not_pending");
    assert_eq!(g.waiting().await, Vec::<Value>::new());
    let resolved = stream
        .next_named("approval_resolved", Duration::from_secs(10))
        .await
        .expect("approval_resolved")
        .json();
    assert_eq!(resolved["transfer_id"], id.as_str(), "{resolved}");
    assert_eq!(resolved["decision"], "approved", "{resolved}");

    // It sells now: a 402 with its terms, then the official SDK pays it and the chain shows the price arrived.
    let (status, _, headers) = g.buy(&id).await;
    assert_eq!(status, StatusCode::PAYMENT_REQUIRED);
    assert!(headers.contains_key("payment-required"));
    let payer = PrivateKeySigner::random();
    mint(&g.anvil, g.usdc, payer.address(), U256::from(1_000_000u64)).await;
    let paid = python_buyer(&g.app.url(&format!("/x402/{id}")), &payer).await;
    assert_eq!(paid["status"], 200, "{paid}");
    assert_eq!(paid["body"], "old pond, a frog jumps", "{paid}");
    assert_eq!(paid["payment_response"]["success"], true, "{paid}");
    assert_eq!(
        token_balance(&g.anvil, g.usdc, wallet(&g.agent)).await,
        U256::from(50_000u64),
        "the agent was paid the price"
    );
    assert_eq!(
        g.anvil.nonce(wallet(&g.agent)).await,
        1,
        "the agent sent one transaction: the settlement, nothing for the approval"
    );

    // Audited as a held transfer's approval, then the offer's creation, both the owner's.
    let approvals = g.audited("transfer_approved").await;
    let [approval] = approvals.as_slice() else {
        panic!("one transfer_approved: {approvals:?}");
    };
    assert_eq!(approval["detail"]["transfer_id"], id.as_str(), "{approval}");
    assert_eq!(approval["detail"]["kind"], "offer", "{approval}");
    assert_eq!(approval["actor"], "admin", "{approval}");
    let created = g.audited("offer_created").await;
    assert_eq!(created.len(), 1, "{created:?}");
    assert_eq!(created[0]["detail"]["offer_id"], id.as_str());
    assert_eq!(created[0]["actor"], "admin");

    // And pushed to the webhooks as a held transfer's are.
    let deliveries = receiver.wait_for(2).await;
    let payloads = verified(hook["secret"].as_str().unwrap(), &deliveries);
    let of = |ty: &str| {
        payloads
            .iter()
            .find(|p| p["type"] == ty)
            .unwrap_or_else(|| panic!("no {ty}: {payloads:?}"))
            .clone()
    };
    let required = of("approval.required");
    assert_eq!(required["data"]["transfer_id"], id.as_str(), "{required}");
    assert_eq!(required["data"]["kind"], "offer", "{required}");
    assert_eq!(required["data"]["amount"], "0.05", "{required}");
    let resolved = of("approval.resolved");
    assert_eq!(resolved["data"]["decision"], "approved", "{resolved}");
    assert_eq!(resolved["data"]["kind"], "offer", "{resolved}");
}

#[tokio::test]
async fn a_rejected_or_expired_held_offer_never_sells() {
    let g = Guarded::start(vec![
        Reply::tool_calls(
            &[
                ("call_1", "create_offer", &[&haiku("first")]),
                ("call_2", "create_offer", &[&haiku("second")]),
            ],
            10,
            5,
        ),
        Reply::text(&["Both wait."], 10, 5),
    ])
    .await;
    let answer = g.chat("sell two haikus").await;
    let rejected = held_offer(&answer["chain_calls"][0]);
    let expiring = held_offer(&answer["chain_calls"][1]);
    assert_eq!(g.waiting().await.len(), 2);

    // Rejected with a reason: it never sells, and cannot be approved after.
    let path = format!("/api/agents/{}/transfers/{rejected}/reject", g.agent.id);
    let body = json!({"reason": "not this one"});
    let (status, answer) = call(&g.app, &g.agent, true, Method::POST, &path, Some(body)).await;
    assert_eq!(status, StatusCode::OK, "{answer}");
    assert_eq!(answer["status"], "rejected", "{answer}");
    assert_eq!(answer["offer"]["status"], "rejected", "{answer}");
    let again = g.decide(true, &rejected, "approve").await;
    assert_error(&again, StatusCode::CONFLICT, "transfer_not_pending");
    assert_eq!(g.buy(&rejected).await.0, StatusCode::NOT_FOUND);
    let rejections = g.audited("transfer_rejected").await;
    assert_eq!(rejections.len(), 1, "{rejections:?}");
    assert_eq!(rejections[0]["detail"]["reason"], "not this one");

    // Past its expiry the watcher expires the other: it never sells either.
    g.app.clock.advance(Duration::from_secs(901));
    g.app
        .settle_until(async || match g.waiting().await.is_empty() {
            true => Ok(()),
            false => Err("the held offer is still waiting".to_string()),
        })
        .await;
    let late = g.decide(true, &expiring, "approve").await;
    assert_error(&late, StatusCode::CONFLICT, "transfer_expired");
    assert_eq!(g.buy(&expiring).await.0, StatusCode::NOT_FOUND);
    let expiries = g.audited("transfer_expired").await;
    assert_eq!(expiries.len(), 1, "{expiries:?}");
    assert_eq!(expiries[0]["actor"], "system");
    assert_eq!(expiries[0]["detail"]["transfer_id"], expiring.as_str());
    assert!(g.audited("offer_created").await.is_empty(), "neither was ever created");

    // The offers list shows both as they ended; an unknown id, and an offer that never waited, are no approval.
    let path = format!("/api/agents/{}/offers", g.agent.id);
    let (status, listed) = call(&g.app, &g.agent, true, Method::GET, &path, None).await;
    assert_eq!(status, StatusCode::OK, "{listed}");
    let status_of = |id: &str| {
        listed["offers"]
            .as_array()
            .unwrap()
            .iter()
            .find(|o| o["id"] == id)
            .map(|o| o["status"].clone())
    };
    assert_eq!(status_of(&rejected), Some(json!("rejected")), "{listed}");
    assert_eq!(status_of(&expiring), Some(json!("expired")), "{listed}");
    let body = json!({"chain": "base", "asset": "USDC", "price": "0.01", "description": "direct",
        "resource": {"content": "x", "content_type": "text/plain"}, "gas_per_day": "0.001"});
    let (status, direct) = call(&g.app, &g.agent, true, Method::POST, &path, Some(body)).await;
    assert_eq!(status, StatusCode::CREATED, "{direct}");
    for id in [direct["id"].as_str().unwrap(), &uuid::Uuid::new_v4().to_string()] {
        let unknown = g.decide(true, id, "approve").await;
        assert_error(&unknown, StatusCode::NOT_FOUND, "transfer_not_found");
    }
}

/// The official Python SDK's buyer paying `url` (`tests/x402/sdk_buyer.py pay`): its one JSON line.
async fn python_buyer(url: &str, payer: &PrivateKeySigner) -> Value {
    let python = python();
    assert!(
        python.exists(),
        "the x402 Python SDK is not installed at {} (scripts/install.sh x402 installs it)",
        python.display()
    );
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/x402/sdk_buyer.py");
    let key = alloy::hex::encode_prefixed(payer.to_bytes());
    let args = [
        script.display().to_string(),
        "pay".into(),
        url.to_owned(),
        key,
        "eip155:8453".into(),
    ];
    // The buyer talks to the app running on this test's runtime: it must not block that runtime.
    let output = tokio::task::spawn_blocking(move || Command::new(python).args(args).output())
        .await
        .expect("the buyer's thread")
        .expect("the buyer ran");
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(
        output.status.success(),
        "the buyer failed: {stdout}\n{}",
        String::from_utf8_lossy(&output.stderr)
    );
    serde_json::from_str(stdout.lines().last().unwrap_or_default()).expect("the buyer printed JSON")
}
