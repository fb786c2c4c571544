//! `GET …/budget`'s `delegations` (§21, an addition of issue 54) through the public API against the real framework:
//! each active delegation's `available` (what the chain leaves), `spendable` (what a send through it may take now)
//! and `bound_by` (which figure sets it), agreeing with what the next delegated send meets — the case of a
//! delegation with 6 of 10 USDC left while the agent's own `per_day` has 1 left is `spendable` 1, bound by
//! `per_day`, and a 2 USDC delegated send is refused by that rule. And the fee a delegated send's preview gives is
//! the gas limit × `maxFeePerGas` of the redemption the service then signs.

use agentd::domain::delegation::Kind;
use alloy::primitives::{Address, U256};
use alloy::signers::local::PrivateKeySigner;
use reqwest::{Method, StatusCode};
use serde_json::{Value, json};

use crate::anvil::Anvil;
use crate::helpers::chain::{BASE_CHAIN_ID, ONE_ETH, fresh_address, transfer_app, wallet, wei};
use crate::helpers::delegation_framework::{
    Framework, chain_now, delegation_json, erc20_period_terms, upgrade_to_delegator,
};
use crate::helpers::solidity::{mint, token_balance, usdc_on_base};
use crate::helpers::{CreatedAgent, TestApp};

const ADMIN: &str = "admin-token-for-delegation-budget-tests-0123";
const USDC: u64 = 1_000_000;

/// A request with the agent's token, and the operator's (owner authority) when `owner`.
async fn call(
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

async fn budget(app: &TestApp, agent: &CreatedAgent) -> Value {
    let path = format!("/api/agents/{}/budget", agent.id);
    let (status, body) = call(app, agent, false, Method::GET, &path, None).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    body
}

async fn set_policy(app: &TestApp, agent: &CreatedAgent, policy: Value) {
    let path = format!("/api/agents/{}/policy", agent.id);
    let (status, body) = call(app, agent, true, Method::PUT, &path, Some(policy)).await;
    assert_eq!(status, StatusCode::OK, "{body}");
}

/// The node with the framework, an owner upgraded to the 7702 delegator holding 100 USDC, an agent on base with
/// 1 ETH for its gas, and a delegation of 10 USDC a day from the owner to the agent, registered.
struct World {
    anvil: Anvil,
    app: TestApp,
    agent: CreatedAgent,
    owner: PrivateKeySigner,
    usdc: Address,
    id: String,
}

async fn world() -> World {
    let anvil = Anvil::start(BASE_CHAIN_ID);
    let framework = Framework::deploy(&anvil, BASE_CHAIN_ID).await;
    let owner = PrivateKeySigner::random();
    anvil.set_balance(owner.address(), wei(ONE_ETH)).await;
    upgrade_to_delegator(&anvil, &owner, framework.delegator, BASE_CHAIN_ID).await;
    let usdc = usdc_on_base(&anvil).await;
    mint(&anvil, usdc, owner.address(), U256::from(100 * USDC)).await;
    let vars = framework.vars();
    let mut extra: Vec<(&str, &str)> = vars.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
    extra.push(("ADMIN_TOKEN", ADMIN));
    let app = transfer_app(&anvil, &extra).await;
    let body = json!({"name": "delegate", "chains": ["base"], "capabilities": ["read", "transact"], "spending_cap": 1});
    let created = app
        .send(
            app.build(Method::POST, "/api/agents", None, Some(body))
                .bearer_auth(ADMIN),
        )
        .await;
    assert_eq!(created.status, StatusCode::CREATED, "{}", created.body);
    let agent = CreatedAgent {
        id: created.body["id"].as_str().unwrap().to_string(),
        token: created.body["access_token"].as_str().unwrap().to_string(),
        body: created.body,
    };
    anvil.set_balance(wallet(&agent), wei(ONE_ETH)).await;
    let start = chain_now(&anvil).await - 3600;
    let terms = erc20_period_terms(usdc, U256::from(10 * USDC), 86_400, start);
    let delegation = framework.grant(&owner, wallet(&agent), &[(Kind::Erc20PeriodTransfer, terms)], 54);
    let path = format!("/api/agents/{}/delegations", agent.id);
    let body = json!({"chain": "base", "delegation": delegation_json(&delegation)});
    let (status, registered) = call(&app, &agent, false, Method::POST, &path, Some(body)).await;
    assert_eq!(status, StatusCode::CREATED, "{registered}");
    let id = registered["id"].as_str().unwrap().to_string();
    World {
        anvil,
        app,
        agent,
        owner,
        usdc,
        id,
    }
}

impl World {
    fn order(&self, to: Address, amount: &str) -> Value {
        json!({"chain": "base", "to": to.to_checksum(None), "amount": amount, "asset": "USDC", "delegation": self.id})
    }

    async fn send(&self, to: Address, amount: &str) -> (StatusCode, Value) {
        let path = format!("/api/agents/{}/transfers", self.agent.id);
        call(
            &self.app,
            &self.agent,
            false,
            Method::POST,
            &path,
            Some(self.order(to, amount)),
        )
        .await
    }

    /// The budget's one entry for the delegation.
    async fn entry(&self) -> Value {
        let body = budget(&self.app, &self.agent).await;
        let entries = body["delegations"]
            .as_array()
            .unwrap_or_else(|| panic!("delegations: {body}"));
        assert_eq!(entries.len(), 1, "{body}");
        entries[0].clone()
    }

    /// `to`'s USDC once it is `expected` (the node may still be mining), or what it is after 5 s.
    async fn usdc_when(&self, to: Address, expected: u64) -> U256 {
        for _ in 0..100 {
            let balance = token_balance(&self.anvil, self.usdc, to).await;
            if balance == U256::from(expected) {
                return balance;
            }
            tokio::time::sleep(std::time::Duration::from_millis(50)).await;
        }
        token_balance(&self.anvil, self.usdc, to).await
    }
}

#[tokio::test]
async fn the_budget_states_what_each_delegation_leaves_and_what_a_send_through_it_may_take_now() {
    let w = world().await;
    let to = fresh_address();
    // No limit of the policy's on USDC: the delegation alone sets it.
    let entry = w.entry().await;
    assert_eq!(entry["delegation_id"], w.id.as_str(), "{entry}");
    assert_eq!(entry["chain"], "base");
    assert_eq!(entry["delegator"], w.owner.address().to_checksum(None));
    assert_eq!(entry["asset"], "base:USDC");
    assert_eq!(entry["amount"], "10");
    assert_eq!(entry["period_seconds"], 86_400);
    assert_eq!(
        (&entry["available"], &entry["spendable"], &entry["bound_by"]),
        (&json!("10"), &json!("10"), &json!("delegation"))
    );

    // The agent's own daily limit of 5 USDC, which counts delegated spending (§21).
    set_policy(&w.app, &w.agent, json!({"limits": {"base:USDC": {"per_day": "5"}}})).await;
    let entry = w.entry().await;
    assert_eq!(
        (&entry["available"], &entry["spendable"], &entry["bound_by"]),
        (&json!("10"), &json!("5"), &json!("per_day"))
    );

    // 4 USDC through the delegation: the chain leaves 6 of its 10, the daily limit 1 of its 5.
    let (status, sent) = w.send(to, "4").await;
    assert_eq!(status, StatusCode::CREATED, "{sent}");
    assert_eq!(w.usdc_when(to, 4 * USDC).await, U256::from(4 * USDC));
    assert_eq!(
        token_balance(&w.anvil, w.usdc, w.owner.address()).await,
        U256::from(96 * USDC)
    );
    let body = budget(&w.app, &w.agent).await;
    assert_eq!(
        body["limits"]["base:USDC"]["per_day"],
        json!({"limit": "5", "counted": "4", "left": "1"}),
        "{body}"
    );
    let entry = &body["delegations"][0];
    assert_eq!(
        (&entry["available"], &entry["spendable"], &entry["bound_by"]),
        (&json!("6"), &json!("1"), &json!("per_day")),
        "{body}"
    );

    // What the next send meets agrees: 2 USDC is refused by the daily limit, nothing signed; 1 USDC goes.
    let nonce = w.anvil.nonce(wallet(&w.agent)).await;
    let (status, refused) = w.send(to, "2").await;
    assert_eq!(status, StatusCode::FORBIDDEN, "{refused}");
    assert_eq!(refused["error"]["details"]["rule"], "per_day", "{refused}");
    assert_eq!(w.anvil.nonce(wallet(&w.agent)).await, nonce, "nothing was signed");
    let (status, sent) = w.send(to, "1").await;
    assert_eq!(status, StatusCode::CREATED, "{sent}");
    assert_eq!(w.usdc_when(to, 5 * USDC).await, U256::from(5 * USDC));
    let entry = w.entry().await;
    assert_eq!(
        (&entry["available"], &entry["spendable"], &entry["bound_by"]),
        (&json!("5"), &json!("0"), &json!("per_day"))
    );

    // A wider daily limit: the delegation binds again; a per-transfer limit below it binds in its turn.
    set_policy(&w.app, &w.agent, json!({"limits": {"base:USDC": {"per_day": "100"}}})).await;
    let entry = w.entry().await;
    assert_eq!(
        (&entry["available"], &entry["spendable"], &entry["bound_by"]),
        (&json!("5"), &json!("5"), &json!("delegation"))
    );
    set_policy(
        &w.app,
        &w.agent,
        json!({"limits": {"base:USDC": {"per_day": "100", "per_transfer": "3"}}}),
    )
    .await;
    let entry = w.entry().await;
    assert_eq!(
        (&entry["available"], &entry["spendable"], &entry["bound_by"]),
        (&json!("5"), &json!("3"), &json!("per_transfer"))
    );
    let (status, refused) = w.send(to, "4").await;
    assert_eq!(status, StatusCode::FORBIDDEN, "{refused}");
    assert_eq!(refused["error"]["details"]["rule"], "per_transfer", "{refused}");
    assert_eq!(
        token_balance(&w.anvil, w.usdc, w.owner.address()).await,
        U256::from(95 * USDC)
    );
}

#[tokio::test]
async fn a_delegated_sends_previewed_fee_is_the_gas_of_the_redemption_then_signed() {
    let w = world().await;
    let to = fresh_address();
    let path = format!("/api/agents/{}/transfers/preview", w.agent.id);
    let (status, previewed) = call(&w.app, &w.agent, false, Method::POST, &path, Some(w.order(to, "3"))).await;
    assert_eq!(status, StatusCode::OK, "{previewed}");
    assert_eq!(previewed["decision"], json!({"result": "allow"}), "{previewed}");
    assert_eq!(w.anvil.nonce(wallet(&w.agent)).await, 0, "nothing was signed");
    let (status, sent) = w.send(to, "3").await;
    assert_eq!(status, StatusCode::CREATED, "{sent}");
    crate::money::fee_preview::assert_fee_signed(&w.anvil, &previewed, &sent).await;
    assert_eq!(w.usdc_when(to, 3 * USDC).await, U256::from(3 * USDC));
    // Past what the delegation leaves: the preview says the send's refusal.
    let (status, over) = call(&w.app, &w.agent, false, Method::POST, &path, Some(w.order(to, "8"))).await;
    assert_eq!(status, StatusCode::OK, "{over}");
    assert_eq!(
        over["decision"],
        json!({"result": "deny", "code": "policy_denied", "rule": "delegation_limit"}),
        "{over}"
    );
    assert_eq!(
        over["message"], "the delegation leaves 7 USDC this period; nothing was signed",
        "{over}"
    );
    assert_eq!(
        (&over["gas"], &over["max_fee"]),
        (&json!("wallet"), &Value::Null),
        "refused before its quote: {over}"
    );
}
