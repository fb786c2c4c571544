//! §23 on §22's house: where the operator sponsors the agent's gas and its address already designates agentd's
//! account, a payment to the agent is settled as a sponsored user operation — the agent, holding no ETH, is paid
//! and the paymaster pays the gas; income says `fee: "0"`. An agent whose address has no code is never designated by
//! a settlement: it settles from its wallet (which, holding no ETH, cannot: the offer is paused, nothing moves).

use alloy::primitives::U256;
use reqwest::{Method, StatusCode};
use serde_json::json;

use super::transfers::{ADMIN, USDC, world};
use crate::helpers::chain::{fresh_address, wallet};
use crate::helpers::solidity::{authorization_state, mint, token_balance};
use crate::x402::sale_calls::{pay_terms, required_of};

#[tokio::test]
async fn a_payment_to_an_agent_with_no_eth_is_settled_by_the_sponsorship_once_its_account_is_smart() {
    let world = world().await;
    world.fund_sponsor().await;
    let agent = world.agent().await;
    let from = wallet(&agent);
    mint(&world.anvil, world.usdc, from, U256::from(10 * USDC)).await;
    let (status, body) = world.sponsorship(&agent, "0.05").await;
    assert_eq!(status, StatusCode::OK, "{body}");

    let offer = json!({"chain": "base", "asset": "USDC", "price": "0.01", "description": "a stored answer",
        "resource": {"content": "forty-two", "content_type": "text/plain"}, "gas_per_day": "0.01"});
    let path = format!("/api/agents/{}/offers", agent.id);
    let created = world
        .app
        .send(
            world
                .app
                .build(Method::POST, &path, None, Some(offer))
                .bearer_auth(ADMIN),
        )
        .await;
    assert_eq!(created.status, StatusCode::CREATED, "{}", created.body);
    let url = world
        .app
        .url(&format!("/x402/{}", created.body["id"].as_str().unwrap()));
    let payer = alloy::signers::local::PrivateKeySigner::random();
    mint(&world.anvil, world.usdc, payer.address(), U256::from(USDC)).await;

    // Its address has no code yet: a settlement does not designate it, and the wallet holds no ETH for the gas.
    let unpaid = world.app.send(world.app.client.get(&url)).await;
    let (payment, first_nonce) = pay_terms(&payer, world.usdc, &required_of(&unpaid));
    let refused = world
        .app
        .send(world.app.client.get(&url).header("PAYMENT-SIGNATURE", &payment))
        .await;
    assert_eq!(refused.status, StatusCode::PAYMENT_REQUIRED, "{}", refused.text);
    assert!(world.code(from).await.is_empty(), "a settlement designated nothing");
    assert!(!authorization_state(&world.anvil, world.usdc, payer.address(), first_nonce).await);

    // A sponsored transfer of its own designates the account; from then on its settlements are sponsored.
    let (status, sent) = world
        .send(
            &agent,
            json!({"chain": "base", "to": fresh_address().to_string(), "amount": "1", "asset": "USDC"}),
        )
        .await;
    assert_eq!(status, StatusCode::CREATED, "{sent}");
    let settled = world.settled(&agent, sent["id"].as_str().unwrap()).await;
    assert_eq!(settled["status"], "confirmed", "{settled}");
    assert!(!world.code(from).await.is_empty(), "the account is designated");

    let unpaid = world.app.send(world.app.client.get(&url)).await;
    let (payment, nonce) = pay_terms(&payer, world.usdc, &required_of(&unpaid));
    let paid = world
        .app
        .send(world.app.client.get(&url).header("PAYMENT-SIGNATURE", &payment))
        .await;
    assert_eq!(paid.status, StatusCode::OK, "{}", paid.text);
    assert_eq!(paid.text, "forty-two");
    // From the chain: the agent holds the price (9 USDC left of its 10 after the transfer), never a wei of ETH.
    assert!(authorization_state(&world.anvil, world.usdc, payer.address(), nonce).await);
    assert_eq!(
        token_balance(&world.anvil, world.usdc, from).await,
        U256::from(9 * USDC + 10_000)
    );
    assert_eq!(world.anvil.balance(from).await, U256::ZERO, "the agent paid no gas");
    let income = world
        .app
        .send(world.app.build(
            Method::GET,
            &format!("/api/agents/{}/income", agent.id),
            Some(&agent.token),
            None,
        ))
        .await;
    let settled: Vec<_> = income.body["income"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|i| i["status"] == "settled")
        .cloned()
        .collect();
    assert_eq!(settled.len(), 1, "{}", income.body);
    assert_eq!(settled[0]["fee"], "0", "{}", income.body);
}

/// A sponsored settlement counts in its offer's `gas_per_day` at what the sponsorship paid for it (§23: the offer's
/// settlements may cost "the agent's gas, or its sponsorship"), not at the agent's fee of 0. An offer whose
/// `gas_per_day` is 1.3 times one settlement's cost is paused after one: before, the second was settled and served
/// too (its first settlement counted 0 once mined).
#[tokio::test]
async fn a_sponsored_settlement_counts_what_the_sponsorship_paid_in_the_offers_gas_per_day() {
    let world = world().await;
    world.fund_sponsor().await;
    let agent = world.agent().await;
    let from = wallet(&agent);
    mint(&world.anvil, world.usdc, from, U256::from(10 * USDC)).await;
    let (status, body) = world.sponsorship(&agent, "0.05").await;
    assert_eq!(status, StatusCode::OK, "{body}");
    // The account designated by a sponsored transfer of its own.
    let (status, sent) = world
        .send(
            &agent,
            json!({"chain": "base", "to": fresh_address().to_string(), "amount": "1", "asset": "USDC"}),
        )
        .await;
    assert_eq!(status, StatusCode::CREATED, "{sent}");
    assert_eq!(
        world.settled(&agent, sent["id"].as_str().unwrap()).await["status"],
        "confirmed"
    );

    let payer = alloy::signers::local::PrivateKeySigner::random();
    mint(&world.anvil, world.usdc, payer.address(), U256::from(USDC)).await;
    let offer = |gas_per_day: String| {
        let world = &world;
        let agent = &agent;
        async move {
            let body = json!({"chain": "base", "asset": "USDC", "price": "0.01", "description": "a stored answer",
                "resource": {"content": "forty-two", "content_type": "text/plain"}, "gas_per_day": gas_per_day});
            let path = format!("/api/agents/{}/offers", agent.id);
            let created = world
                .app
                .send(
                    world
                        .app
                        .build(Method::POST, &path, None, Some(body))
                        .bearer_auth(ADMIN),
                )
                .await;
            assert_eq!(created.status, StatusCode::CREATED, "{}", created.body);
            world
                .app
                .url(&format!("/x402/{}", created.body["id"].as_str().unwrap()))
        }
    };
    let buy = |url: String| {
        let (world, payer) = (&world, &payer);
        async move {
            let unpaid = world.app.send(world.app.client.get(&url)).await;
            let (payment, _) = pay_terms(payer, world.usdc, &required_of(&unpaid));
            world
                .app
                .send(world.app.client.get(&url).header("PAYMENT-SIGNATURE", &payment))
                .await
        }
    };
    // What one sponsored settlement costs the sponsorship, from its record.
    let paid = buy(offer("0.01".into()).await).await;
    assert_eq!(paid.status, StatusCode::OK, "{}", paid.text);
    let one = settlement_costs(&world, &agent).await;
    assert_eq!(one.len(), 1, "{one:?}");
    let cost = one[0];
    assert!(cost > U256::ZERO);

    let url = offer(alloy::primitives::utils::format_ether(
        cost * U256::from(13u8) / U256::from(10u8),
    ))
    .await;
    let first = buy(url.clone()).await;
    assert_eq!(first.status, StatusCode::OK, "{}", first.text);
    let second = buy(url).await;
    assert_eq!(second.status, StatusCode::PAYMENT_REQUIRED, "{}", second.text);
    assert_eq!(second.body["error"]["code"], "offer_paused", "{}", second.body);
    // From the chain: two settlements, each paid by the paymaster; the agent still holds no ETH.
    assert_eq!(
        token_balance(&world.anvil, world.usdc, payer.address()).await,
        U256::from(USDC - 2 * 10_000)
    );
    assert_eq!(world.anvil.balance(from).await, U256::ZERO);
}

/// The sponsorship's `gas_cost` of each of the agent's settlements (its calls: the designating send is a transfer).
async fn settlement_costs(world: &super::transfers::World, agent: &crate::helpers::CreatedAgent) -> Vec<U256> {
    let mut costs = Vec::new();
    for listed in crate::helpers::chain::transactions(&world.app, agent).await {
        if listed["kind"] != "call" {
            continue;
        }
        let settlement = world.settled(agent, listed["id"].as_str().unwrap()).await;
        let cost = settlement["sponsorship"]["gas_cost"].as_str();
        costs.push(super::transfers::wei_of(
            cost.unwrap_or_else(|| panic!("{settlement}")),
            18,
        ));
    }
    costs
}
