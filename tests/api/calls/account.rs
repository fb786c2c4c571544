//! What no rule can allow (docs/api.md §22): typed data the agent's own account would honour (its domain's
//! `verifyingContract` the agent's address, or a `PackedUserOperation` declared) is never signed, and no contract call
//! reaches the agent's own address, the EntryPoint, the paymaster or a `DelegationManager` — refused before anything
//! is simulated. The parts are the real ones on anvil (EntryPoint v0.7 and the `DelegationManager` from npm
//! `@metamask/delegation-abis` 2.0.0, Pimlico's `SingletonPaymaster` v0.7), with base sponsorable; the node sits
//! behind a proxy that counts the simulations it is asked for.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use alloy::primitives::Address;
use axum::body::Bytes;
use axum::extract::State;
use axum::response::IntoResponse;
use reqwest::{Method, StatusCode};
use serde_json::{Value, json};

use crate::anvil::Anvil;
use crate::helpers::chain::{BASE_CHAIN_ID, funded_agent, wallet};
use crate::helpers::delegation_framework::Framework;
use crate::helpers::paymaster::Paymaster;
use crate::helpers::{CreatedAgent, TestApp, assert_error, spawn_app_with};

/// A proxy in front of the node counting the simulations (`eth_simulateV1`, `debug_traceCall`) it relays.
#[derive(Clone)]
struct Counting {
    client: reqwest::Client,
    upstream: String,
    simulations: Arc<AtomicUsize>,
}

async fn forward(State(proxy): State<Counting>, body: Bytes) -> impl IntoResponse {
    let is_simulation = |call: &Value| matches!(call["method"].as_str(), Some("eth_simulateV1" | "debug_traceCall"));
    let count = match serde_json::from_slice::<Value>(&body) {
        Ok(Value::Array(batch)) => batch.iter().filter(|call| is_simulation(call)).count(),
        Ok(call) => usize::from(is_simulation(&call)),
        Err(_) => 0,
    };
    proxy.simulations.fetch_add(count, Ordering::SeqCst);
    crate::helpers::relay::relay(&proxy.client, &proxy.upstream, body).await
}

struct World {
    anvil: Anvil,
    framework: Framework,
    paymaster: Paymaster,
    app: TestApp,
    agent: CreatedAgent,
    simulations: Arc<AtomicUsize>,
}

/// The framework and a paymaster deployed, base sponsorable with them, and an agent holding 1 ETH whose policy
/// allows every call and every `Mail` signature.
async fn world() -> World {
    let anvil = Anvil::start(BASE_CHAIN_ID);
    let framework = Framework::deploy(&anvil, BASE_CHAIN_ID).await;
    let paymaster = Paymaster::deploy(&anvil, framework.entry_point).await;
    let simulations = Arc::new(AtomicUsize::new(0));
    let proxy = Counting {
        client: reqwest::Client::new(),
        upstream: anvil.url().to_string(),
        simulations: simulations.clone(),
    };
    let router = axum::Router::new()
        .route("/", axum::routing::post(forward))
        .with_state(proxy);
    let url = crate::helpers::relay::serve(router).await;
    let mut vars: Vec<(String, String)> = vec![
        ("RPC_URL_BASE".into(), url),
        ("WATCHER_INTERVAL_MS".into(), "50".into()),
        ("ENTRY_POINT_BASE".into(), framework.entry_point.to_string()),
        ("ACCOUNT_IMPLEMENTATION_BASE".into(), framework.delegator.to_string()),
        ("PAYMASTER_BASE".into(), paymaster.address.to_string()),
    ];
    vars.extend(framework.vars());
    let pairs: Vec<(&str, &str)> = vars.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
    let app = spawn_app_with(&pairs).await;
    let (status, chains) = app.request(Method::GET, "/api/chains", None, None).await;
    assert_eq!(status, StatusCode::OK, "{chains}");
    let base = chains.as_array().unwrap().iter().find(|c| c["name"] == "base").unwrap();
    assert!(base["sponsorship"].is_object(), "base is sponsorable: {base}");
    let agent = funded_agent(&app, &anvil, Some(0.5)).await;
    let policy = json!({"calls": {"default": "allow", "rules": [
        {"chain": "*", "to": "*", "function": "*", "action": "allow"},
        {"typed_data": {"primary_type": "Mail"}, "action": "allow"}]}});
    let path = format!("/api/agents/{}/policy", agent.id);
    let (status, body) = app.request(Method::PUT, &path, Some(&agent.token), Some(policy)).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    World {
        anvil,
        framework,
        paymaster,
        app,
        agent,
        simulations,
    }
}

impl World {
    async fn post(&self, path: &str, body: Value) -> (StatusCode, Value) {
        let path = format!("/api/agents/{}/{path}", self.agent.id);
        self.app
            .request(Method::POST, &path, Some(&self.agent.token), Some(body))
            .await
    }

    /// What the agent has stored: signatures and transactions alike.
    async fn stored(&self) -> usize {
        let path = format!("/api/agents/{}/transactions", self.agent.id);
        let (status, body) = self
            .app
            .request(Method::GET, &path, Some(&self.agent.token), None)
            .await;
        assert_eq!(status, StatusCode::OK, "{body}");
        body["transactions"].as_array().or(body.as_array()).map_or(0, Vec::len)
    }
}

/// `Mail(string contents)` under a domain verified by `verifying`, with `extra` types declared beside it.
fn mail(verifying: Address, extra: Value) -> Value {
    let mut types = json!({
        "EIP712Domain": [{"name": "name", "type": "string"}, {"name": "chainId", "type": "uint256"},
            {"name": "verifyingContract", "type": "address"}],
        "Mail": [{"name": "contents", "type": "string"}]});
    for (name, fields) in extra.as_object().into_iter().flatten() {
        types[name] = fields.clone();
    }
    json!({"types": types, "primaryType": "Mail",
        "domain": {"name": "Mail", "chainId": BASE_CHAIN_ID, "verifyingContract": verifying.to_string()},
        "message": {"contents": "hello"}})
}

#[tokio::test]
async fn typed_data_the_agents_own_account_would_honour_is_never_signed() {
    let w = world().await;
    let sign = |typed_data: Value| w.post("sign-typed-data", json!({"chain": "base", "typed_data": typed_data}));
    // The allowing rule signs the same mail verified by another contract: the rule is not what refuses below.
    let (status, body) = sign(mail(w.paymaster.address, json!({}))).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(w.stored().await, 1);

    let own_domain = sign(mail(wallet(&w.agent), json!({}))).await;
    let packed = json!({"PackedUserOperation": [{"name": "sender", "type": "address"},
        {"name": "nonce", "type": "uint256"}, {"name": "callData", "type": "bytes"}]});
    let user_operation = sign(mail(w.paymaster.address, packed)).await;
    for (what, refused) in [("own domain", own_domain), ("PackedUserOperation", user_operation)] {
        assert_error(&refused, StatusCode::FORBIDDEN, "policy_denied");
        assert_eq!(
            refused.1["error"]["details"]["rule"], "delegation_signature",
            "{what}: {}",
            refused.1
        );
    }
    assert_eq!(w.stored().await, 1, "nothing more was signed or stored");
}

#[tokio::test]
async fn no_call_reaches_the_agents_own_address_the_entry_point_the_paymaster_or_a_manager() {
    let w = world().await;
    let own = wallet(&w.agent);
    let targets = [
        (
            "the agent's own address",
            own,
            json!({"function": "ping()", "args": []}),
        ),
        (
            "the EntryPoint",
            w.framework.entry_point,
            json!({"function": "depositTo(address)", "args": [own.to_string()], "value": "0.001"}),
        ),
        (
            "the paymaster",
            w.paymaster.address,
            json!({"function": "deposit()", "args": [], "value": "0.001"}),
        ),
        (
            "the DelegationManager",
            w.framework.manager,
            json!({"function": "getDomainHash()", "args": []}),
        ),
    ];
    let mut wrong = Vec::new();
    for (what, to, call) in targets {
        let mut body = call;
        body["chain"] = json!("base");
        body["to"] = json!(to.to_string());
        for path in ["calls/simulate", "calls"] {
            let before = w.simulations.load(Ordering::SeqCst);
            let (status, answer) = w.post(path, body.clone()).await;
            let simulated = w.simulations.load(Ordering::SeqCst) - before;
            let error = &answer["error"];
            let refused = status == StatusCode::FORBIDDEN
                && error["code"] == "policy_denied"
                && error["details"]["rule"] == "call_denied"
                && error["details"]["index"] == 0;
            if !refused || simulated != 0 {
                wrong.push(format!(
                    "{path} to {what}: {status} {answer} after {simulated} simulations"
                ));
            }
        }
    }
    assert!(wrong.is_empty(), "refused before any simulation:\n{}", wrong.join("\n"));
    assert_eq!(w.stored().await, 0, "nothing was signed or stored");
    assert_eq!(w.anvil.nonce(own).await, 0, "the agent's nonce is unchanged");

    // The same agent's allowed call to anything else is simulated as before.
    let dev: Address = Anvil::DEV_ADDRESS.parse().unwrap();
    let fine = json!({"chain": "base", "to": dev.to_string(), "function": "ping()", "args": []});
    let (status, answer) = w.post("calls/simulate", fine).await;
    assert_eq!(status, StatusCode::OK, "{answer}");
    assert!(w.simulations.load(Ordering::SeqCst) > 0);
}
