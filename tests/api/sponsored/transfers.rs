//! Sponsored transfers (§22) through the public API against the real, unmodified parts on anvil: the EntryPoint
//! v0.7 and `EIP7702StatelessDeleGator` from npm `@metamask/delegation-abis` 2.0.0, Pimlico's `SingletonPaymaster`
//! v0.7 from npm `@pimlico/mock-paymaster` 0.0.7. What is asserted is what the chain shows: the token moved, the
//! agent's ETH, its code, the paymaster's deposit and the operation's `actualGasCost`.

use std::time::Duration;

use alloy::primitives::{Address, U256};
use alloy::providers::Provider;
use reqwest::{Method, StatusCode};
use serde_json::{Value, json};

use crate::anvil::Anvil;
use crate::helpers::chain::{BASE_CHAIN_ID, ONE_ETH, fresh_address, transfer_app, wallet, wei};
use crate::helpers::delegation_framework::Framework;
use crate::helpers::paymaster::Paymaster;
use crate::helpers::solidity::{mint, token_balance, usdc_on_base};
use crate::helpers::{CreatedAgent, TestApp};

pub(super) const ADMIN: &str = "admin-token-for-sponsored-tests-0123456789";
/// 1 USDC in base units (6 decimals).
pub(super) const USDC: u64 = 1_000_000;

/// A node with the parts deployed, a paymaster the test owns, and agentd configured with them.
pub(super) struct World {
    pub anvil: Anvil,
    pub framework: Framework,
    pub paymaster: Paymaster,
    pub usdc: Address,
    pub app: TestApp,
    /// The sponsor key's address, as `GET /api/chains` names it.
    pub sponsor: Address,
}

pub(super) async fn world() -> World {
    world_with(&[]).await
}

/// `world` with more configuration for agentd (`env`).
pub(super) async fn world_with(env: &[(&str, &str)]) -> World {
    let anvil = Anvil::start(BASE_CHAIN_ID);
    let framework = Framework::deploy(&anvil, BASE_CHAIN_ID).await;
    let paymaster = Paymaster::deploy(&anvil, framework.entry_point).await;
    let usdc = usdc_on_base(&anvil).await;
    let mut vars = framework.vars();
    vars.push(("ENTRY_POINT_BASE".into(), framework.entry_point.to_string()));
    vars.push(("ACCOUNT_IMPLEMENTATION_BASE".into(), framework.delegator.to_string()));
    vars.push(("PAYMASTER_BASE".into(), paymaster.address.to_string()));
    vars.push(("ADMIN_TOKEN".into(), ADMIN.into()));
    vars.extend(env.iter().map(|(k, v)| (k.to_string(), v.to_string())));
    let extra: Vec<(&str, &str)> = vars.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
    let app = transfer_app(&anvil, &extra).await;
    let chains = app.send(app.build(Method::GET, "/api/chains", None, None)).await;
    let base = chains
        .body
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["name"] == "base")
        .unwrap()
        .clone();
    let sponsor: Address = base["sponsorship"]["sponsor"]
        .as_str()
        .unwrap_or_else(|| panic!("base is sponsorable: {base}"))
        .parse()
        .unwrap();
    World {
        anvil,
        framework,
        paymaster,
        usdc,
        app,
        sponsor,
    }
}

impl World {
    /// The operator's part: the sponsor trusted and allowlisted, 1 ETH deposited, 1 ETH for the bundles' gas.
    pub(super) async fn fund_sponsor(&self) {
        self.paymaster.sponsor(&self.anvil, self.sponsor, wei(ONE_ETH)).await;
        self.anvil.set_balance(self.sponsor, wei(ONE_ETH)).await;
    }

    /// An agent on base with `cap` ETH as its spending cap (the gas is not counted in it, the native coin moved is).
    pub(super) async fn agent_with_cap(&self, cap: f64) -> CreatedAgent {
        let body = json!({"name": "sponsored", "chains": ["base"], "capabilities": ["read", "transact"],
            "spending_cap": cap});
        let response = self
            .app
            .send(
                self.app
                    .build(Method::POST, "/api/agents", None, Some(body))
                    .bearer_auth(ADMIN),
            )
            .await;
        assert_eq!(response.status, StatusCode::CREATED, "{}", response.body);
        CreatedAgent {
            id: response.body["id"].as_str().unwrap().to_string(),
            token: response.body["access_token"].as_str().unwrap().to_string(),
            body: response.body,
        }
    }

    pub(super) async fn agent(&self) -> CreatedAgent {
        self.agent_with_cap(0.1).await
    }

    pub(super) async fn sponsorship(&self, agent: &CreatedAgent, per_day: &str) -> (StatusCode, Value) {
        let path = format!("/api/agents/{}/sponsorship", agent.id);
        let body = json!({"chain": "base", "per_day": per_day});
        let response = self
            .app
            .send(self.app.build(Method::PUT, &path, None, Some(body)).bearer_auth(ADMIN))
            .await;
        (response.status, response.body)
    }

    pub(super) async fn send(&self, agent: &CreatedAgent, body: Value) -> (StatusCode, Value) {
        let path = format!("/api/agents/{}/transfers", agent.id);
        let response = self
            .app
            .send(self.app.build(Method::POST, &path, Some(&agent.token), Some(body)))
            .await;
        (response.status, response.body)
    }

    /// The transfer once it left `signed`/`pending` (or as it stands after a while).
    pub(super) async fn settled(&self, agent: &CreatedAgent, id: &str) -> Value {
        let path = format!("/api/agents/{}/transfers/{id}", agent.id);
        for _ in 0..200 {
            let response = self
                .app
                .send(self.app.build(Method::GET, &path, Some(&agent.token), None))
                .await;
            let status = response.body["status"].as_str().unwrap_or_default().to_string();
            if status != "signed" && status != "pending" {
                return response.body;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        panic!("transfer {id} never settled");
    }

    pub(super) async fn code(&self, address: Address) -> Vec<u8> {
        self.anvil.provider().get_code_at(address).await.unwrap().to_vec()
    }
}

pub(super) fn wei_of(units: &str, decimals: usize) -> U256 {
    let (whole, fraction) = units.split_once('.').unwrap_or((units, ""));
    let padded = format!("{whole}{fraction:0<decimals$}");
    padded.parse().unwrap()
}

#[tokio::test]
async fn an_agent_with_no_eth_sends_usdc_and_the_paymaster_pays_exactly_the_operations_gas() {
    let world = world().await;
    world.fund_sponsor().await;
    let agent = world.agent().await;
    let from = wallet(&agent);
    mint(&world.anvil, world.usdc, from, U256::from(100 * USDC)).await;
    assert_eq!(world.anvil.balance(from).await, U256::ZERO);
    let (status, body) = world.sponsorship(&agent, "0.05").await;
    assert_eq!(status, StatusCode::OK, "{body}");
    let deposit_before = world.paymaster.deposit_balance(&world.anvil).await;

    let mut spent = U256::ZERO;
    let to = fresh_address();
    for (round, amount) in [(1u64, 5u64), (2, 7)] {
        let (status, sent) = world
            .send(
                &agent,
                json!({"chain": "base", "to": to.to_string(), "amount": amount.to_string(), "asset": "USDC"}),
            )
            .await;
        assert_eq!(status, StatusCode::CREATED, "{sent}");
        assert_eq!(sent["gas"], "sponsored", "{sent}");
        let settled = world.settled(&agent, sent["id"].as_str().unwrap()).await;
        assert_eq!(settled["status"], "confirmed", "round {round}: {settled}");
        let cost = settled["sponsorship"]["gas_cost"]
            .as_str()
            .unwrap_or_else(|| panic!("{settled}"));
        spent += wei_of(cost, 18);
        assert!(settled["tx_hash"].is_string(), "{settled}");
    }
    // From the chain: the USDC moved, the agent never held a wei, its address designates the implementation, and
    // the paymaster's deposit fell by exactly what the operations cost.
    assert_eq!(token_balance(&world.anvil, world.usdc, to).await, U256::from(12 * USDC));
    assert_eq!(world.anvil.balance(from).await, U256::ZERO);
    let code = world.code(from).await;
    assert_eq!(
        code,
        [&[0xef, 0x01, 0x00][..], world.framework.delegator.as_slice()].concat()
    );
    let deposit_after = world.paymaster.deposit_balance(&world.anvil).await;
    assert_eq!(deposit_before - deposit_after, spent);
    let listed = world
        .app
        .send(world.app.build(
            Method::GET,
            &format!("/api/agents/{}/sponsorship", agent.id),
            Some(&agent.token),
            None,
        ))
        .await;
    let counted = listed.body["sponsorships"][0]["counted"].as_str().unwrap().to_string();
    assert_eq!(wei_of(&counted, 18), spent, "{}", listed.body);
    // The operator's figures: the deposit as the chain shows it, and the bundles this instance sent.
    let metrics = world
        .app
        .send(world.app.build(Method::GET, "/metrics", None, None))
        .await;
    let text = metrics.text;
    assert!(
        text.contains(&format!("agentd_sponsor_deposit_wei{{chain=\"base\"}} {deposit_after}")),
        "{text}"
    );
    assert!(text.contains("agentd_bundles_total{chain=\"base\"} 2"), "{text}");
    assert!(
        text.contains("agentd_bundled_operations_total{chain=\"base\"} 2"),
        "{text}"
    );
}

#[tokio::test]
async fn a_sponsorship_too_small_or_a_cap_of_zero_signs_nothing_and_no_sponsorship_means_the_wallet() {
    let world = world().await;
    world.fund_sponsor().await;
    let agent = world.agent().await;
    let from = wallet(&agent);
    mint(&world.anvil, world.usdc, from, U256::from(100 * USDC)).await;
    let to = fresh_address();
    let usdc = |amount: &str| json!({"chain": "base", "to": to.to_string(), "amount": amount, "asset": "USDC", "gas": "sponsored"});
    // No sponsorship: sponsored gas asked is unavailable.
    let (status, body) = world.send(&agent, usdc("1")).await;
    assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY, "{body}");
    assert_eq!(body["error"]["code"], "sponsorship_unavailable");
    // A budget below one operation's maximum cost.
    let (status, _) = world.sponsorship(&agent, "0.000000001").await;
    assert_eq!(status, StatusCode::OK);
    let (status, body) = world.send(&agent, usdc("1")).await;
    assert_eq!(status, StatusCode::FORBIDDEN, "{body}");
    assert_eq!(body["error"]["details"]["rule"], "sponsorship_limit", "{body}");
    assert!(body["error"]["details"]["left"].is_string(), "{body}");
    // A cap of 0 moves nothing whoever pays the gas.
    let capless = world.agent_with_cap(0.0).await;
    mint(&world.anvil, world.usdc, wallet(&capless), U256::from(100 * USDC)).await;
    let (status, _) = world.sponsorship(&capless, "0.05").await;
    assert_eq!(status, StatusCode::OK);
    let (status, body) = world.send(&capless, usdc("1")).await;
    assert_eq!(status, StatusCode::FORBIDDEN, "{body}");
    assert_eq!(body["error"]["code"], "spending_cap_exceeded", "{body}");
    tokio::time::sleep(Duration::from_millis(700)).await;
    assert_eq!(token_balance(&world.anvil, world.usdc, to).await, U256::ZERO);
    assert!(world.code(from).await.is_empty(), "nothing was designated");
    assert!(world.code(wallet(&capless)).await.is_empty(), "nothing was designated");
}
