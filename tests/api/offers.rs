//! Agents that earn (docs/api.md §23): offers created, listed, read and closed through the API and the tools, with
//! their refusals and authority, and the agent's income list.

pub mod endpoints;
pub mod held;
pub mod income;
pub mod tools;

use reqwest::{Method, StatusCode};
use serde_json::{Value, json};

use crate::anvil::Anvil;
use crate::helpers::chain::{BASE_CHAIN_ID, funded_agent, transfer_app};
use crate::helpers::solidity::usdc_on_base;
use crate::helpers::{CreatedAgent, TestApp};

/// An app on anvil's `base` whose USDC is an EIP-3009 token ("USD Coin", version "2"), offers allowed to front
/// local upstreams, plus `extra` variables; and an agent with `transact` on base.
pub struct Selling {
    pub anvil: Anvil,
    pub app: TestApp,
    pub agent: CreatedAgent,
}

pub async fn selling(extra: &[(&str, &str)]) -> Selling {
    let anvil = Anvil::start(BASE_CHAIN_ID);
    let mut vars = vec![("OFFER_ALLOW_PRIVATE", "true")];
    vars.extend_from_slice(extra);
    let app = transfer_app(&anvil, &vars).await;
    let agent = funded_agent(&app, &anvil, Some(0.5)).await;
    usdc_on_base(&anvil).await;
    Selling { anvil, app, agent }
}

/// An offer of a local upstream for 0.01 USDC, with the upstream's API key in its headers and in its query.
pub fn upstream_offer() -> Value {
    json!({
        "chain": "base",
        "asset": "USDC",
        "price": "0.01",
        "description": "today's weather",
        "resource": {
            "url": "http://127.0.0.1:9/weather?api_key=query-secret",
            "headers": {"X-Api-Key": "upstream-secret"}
        },
        "gas_per_day": "0.001"
    })
}

pub fn offers_path(agent: &CreatedAgent) -> String {
    format!("/api/agents/{}/offers", agent.id)
}

/// `POST …/offers` with the agent token.
pub async fn create(app: &TestApp, agent: &CreatedAgent, body: Value) -> (StatusCode, Value) {
    app.request(Method::POST, &offers_path(agent), Some(&agent.token), Some(body))
        .await
}
