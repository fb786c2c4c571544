//! `pay_http` over MCP (docs/api.md §16, §17): the official SDK client, speaking Streamable HTTP to `/mcp`, pays the
//! test paywall (protocol v2, settling on anvil through the EIP-3009 token at USDC's base address).

use alloy::primitives::{Address, U256};
use serde_json::json;

use super::*;
use crate::anvil::Anvil;
use crate::helpers::chain::{BASE_CHAIN_ID, funded_agent, transfer_app, wallet};
use crate::helpers::paywall::{Paywall, PaywallSetup, entry_v2};
use crate::helpers::solidity::{mint, token_balance, usdc_on_base};

/// 0.01 USDC in base units.
const PRICE: u64 = 10_000;

#[tokio::test]
async fn pay_http_over_http_pays_the_paywall_once() {
    let anvil = Anvil::start(BASE_CHAIN_ID);
    let app = transfer_app(&anvil, &[("X402_ALLOW_PRIVATE", "true")]).await;
    let agent = funded_agent(&app, &anvil, Some(0.5)).await;
    let usdc = usdc_on_base(&anvil).await;
    mint(&anvil, usdc, wallet(&agent), U256::from(1_000_000u64)).await;
    let pay_to = Address::repeat_byte(0x42);
    let paywall = Paywall::start(PaywallSetup::new(
        2,
        vec![entry_v2(BASE_CHAIN_ID, usdc, PRICE, pay_to, "USD Coin", "2")],
        anvil.url(),
        BASE_CHAIN_ID,
    ))
    .await;

    let calls = json!([{"name": "pay_http",
                        "arguments": {"url": paywall.url("/paid?api_key=secret-query-value"), "max_amount": "0.05"}}]);
    let args = vec![
        "--url".to_string(),
        app.url("/mcp"),
        "--calls".to_string(),
        calls.to_string(),
    ];
    let env = vec![("AGENTD_ACCESS_TOKEN".to_string(), agent.token.clone())];
    let (ok, out) = mcp_client(&app, args, env).await;
    assert!(ok, "the client ran over HTTP: {out:#}");
    let listed = tool(&out, "pay_http").unwrap_or_else(|| panic!("pay_http is listed: {out:#}"));
    assert!(
        listed["inputSchema"]["properties"]["max_amount"].is_object(),
        "{listed:#}"
    );

    let result = tool_ok(&out, 0);
    assert_eq!(result["status"], 200, "{result:#}");
    assert_eq!(result["body"], "paid content", "{result:#}");
    let payment = &result["payment"];
    assert_eq!(payment["kind"], "x402", "{result:#}");
    assert_eq!(payment["asset"], "USDC");
    assert_eq!(payment["amount"], "0.01");
    assert_eq!(payment["to"], pay_to.to_checksum(None));
    let settlement = paywall.verified();
    assert_eq!(settlement.len(), 1, "paid once");
    assert_eq!(paywall.paid_requests(), 1);
    let hash = settlement[0].settlement.expect("settled on chain");
    assert_eq!(payment["tx_hash"], hash.to_string(), "{result:#}");
    assert_eq!(settlement[0].from, wallet(&agent));
    assert!(
        !payment["x402"]["url"].as_str().unwrap().contains("secret-query-value"),
        "{result:#}"
    );
    assert_eq!(token_balance(&anvil, usdc, pay_to).await, U256::from(PRICE));

    let audit = mcp_audit(&app, &agent).await;
    assert_eq!(audit.len(), 1, "{audit:#?}");
    assert_eq!(audit[0]["transport"], "http");
    let rows = audit_rows(&app, &agent.id).await;
    assert!(
        rows.iter().any(|(action, _, _)| action == "x402_payment_accepted"),
        "{rows:#?}"
    );
    assert!(
        !format!("{rows:?}").contains("secret-query-value"),
        "no query in the audit log: {rows:#?}"
    );
}
