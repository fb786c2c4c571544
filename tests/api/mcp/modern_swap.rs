//! A contract call through MCP 2026-07-28 (docs/api.md §17, §18): the official MCP Python SDK 2.x client approves
//! the real Uniswap V2 router and swaps through `call_contract`, and the chain shows both.

use serde_json::json;

use super::modern::{MODERN, modern_client};
use super::*;
use crate::anvil::Anvil;
use crate::helpers::chain::{BASE_CHAIN_ID, funded_agent, transfer_app, wallet, wei};

#[tokio::test]
async fn a_2026_client_approves_the_router_and_swaps_on_uniswap_through_call_contract() {
    use alloy::primitives::U256;
    const USDC: u64 = 1_000_000;
    let anvil = Anvil::start(BASE_CHAIN_ID);
    let uni = crate::helpers::uniswap::deploy_uniswap(
        &anvil,
        U256::from(1_000_000 * USDC),
        wei(500 * crate::helpers::chain::ONE_ETH),
    )
    .await;
    let app = transfer_app(&anvil, &[]).await;
    let agent = funded_agent(&app, &anvil, Some(0.5)).await;
    let me = wallet(&agent);
    crate::helpers::solidity::mint(&anvil, uni.usdc, me, U256::from(1_000 * USDC)).await;
    let eth_before = anvil.balance(me).await;

    let approve = json!({"name": "call_contract", "arguments": {"chain": "base", "to": uni.usdc.to_string(),
        "function": "approve(address,uint256)", "args": [uni.router.to_string(), (100 * USDC).to_string()]}});
    let swap = json!({"name": "call_contract", "arguments": {"chain": "base", "to": uni.router.to_string(),
        "function": "swapExactTokensForETH(uint256,uint256,address[],address,uint256)",
        "args": [(100 * USDC).to_string(), "0", [uni.usdc.to_string(), uni.weth.to_string()], me.to_string(),
            "99999999999"]}});
    let out = modern_client(json!({"urls": [app.url("/mcp")], "token": agent.token, "calls": [approve, swap]})).await;
    assert_eq!(out["protocol_version"], MODERN, "{out:#}");
    let hints = &tool(&out, "call_contract").unwrap()["annotations"];
    assert_eq!(hints["destructiveHint"], true, "{hints}");

    let approved = tool_ok(&out, 0);
    assert_eq!(approved["kind"], "call", "{approved}");
    assert_eq!(approved["call"]["function"], "approve(address,uint256)", "{approved}");
    let swapped = tool_ok(&out, 1);
    assert_eq!(swapped["simulation"]["changes"][0]["asset"], "base:USDC", "{swapped}");
    assert_eq!(swapped["simulation"]["changes"][0]["amount"], "100", "{swapped}");
    // What the chain shows: both signed by the agent, 100 USDC gone, ETH arrived (more than the gas paid).
    crate::helpers::chain::wait_for_transactions(&app, &agent, 2, "confirmed").await;
    assert_eq!(anvil.nonce(me).await, 2);
    assert_eq!(
        crate::helpers::solidity::token_balance(&anvil, uni.usdc, me).await,
        U256::from(900 * USDC)
    );
    assert!(anvil.balance(me).await > eth_before, "the swap paid out ETH");
}
