//! The selling tools over MCP (§23): `create_offer` (transact) and `list_income` (read) come from the one registry;
//! an unguarded agent creates an offer and reads its (empty) income; a guarded one's offer is held for its owner's
//! approval (its URL sells nothing meanwhile) and the approvals list it.

use serde_json::json;

use super::selling;
use crate::mcp::{mcp_client, tool, tool_error_code, tool_ok};

#[tokio::test]
async fn create_offer_and_list_income_work_over_mcp() {
    let s = selling(&[]).await;
    let calls = json!([
        {"name": "create_offer", "arguments": {"chain": "base", "asset": "USDC", "price": "0.02",
            "description": "a haiku", "content": "old pond, a frog jumps", "content_type": "text/plain",
            "gas_per_day": "0.001"}},
        {"name": "list_income", "arguments": {}},
        {"name": "create_offer", "arguments": {"chain": "base", "asset": "ETH", "price": "0.02",
            "description": "a haiku", "content": "x", "content_type": "text/plain", "gas_per_day": "0.001"}},
        {"name": "create_offer", "arguments": {"chain": "base", "asset": "USDC", "price": "0.02",
            "description": "both", "gas_per_day": "0.001"}}
    ]);
    let args = vec![
        "--url".to_string(),
        s.app.url("/mcp"),
        "--calls".to_string(),
        calls.to_string(),
    ];
    let env = vec![("AGENTD_ACCESS_TOKEN".to_string(), s.agent.token.clone())];
    let (ok, out) = mcp_client(&s.app, args, env).await;
    assert!(ok, "the client ran: {out:#}");
    let create = tool(&out, "create_offer").expect("create_offer is listed");
    assert_eq!(create["annotations"]["readOnlyHint"], false, "{create}");
    assert!(tool(&out, "list_income").is_some(), "{out:#}");
    let offer = &tool_ok(&out, 0)["offer"];
    let id = offer["id"].as_str().expect("an offer id");
    assert_eq!(offer["url"], format!("{}/x402/{id}", s.app.address));
    assert_eq!(offer["price"], "0.02");
    assert_eq!(tool_ok(&out, 1), json!({"income": []}));
    assert_eq!(tool_error_code(&out, 2), "asset_not_payable");
    assert_eq!(tool_error_code(&out, 3), "invalid_arguments");
}

#[tokio::test]
async fn create_offer_on_a_guarded_agent_is_held_for_its_owners_approval() {
    let s = selling(&[("ADMIN_TOKEN", "admin-token-for-offer-tool-tests-0123456789")]).await;
    let calls = json!([{"name": "create_offer", "arguments": {"chain": "base", "asset": "USDC", "price": "0.02",
        "description": "a haiku", "content": "x", "content_type": "text/plain", "gas_per_day": "0.001"}}]);
    let args = vec![
        "--url".to_string(),
        s.app.url("/mcp"),
        "--calls".to_string(),
        calls.to_string(),
    ];
    let env = vec![("AGENTD_ACCESS_TOKEN".to_string(), s.agent.token.clone())];
    let (ok, out) = mcp_client(&s.app, args, env).await;
    assert!(ok, "the client ran: {out:#}");
    let held = tool_ok(&out, 0);
    assert_eq!(held["status"], "awaiting_approval", "{held}");
    assert_eq!(held["kind"], "offer", "{held}");
    assert!(held["expires_at"].is_string(), "{held}");
    let id = held["offer_id"].as_str().expect("offer_id");
    let bought = s.app.send(s.app.client.get(s.app.url(&format!("/x402/{id}")))).await;
    assert_eq!(bought.status, reqwest::StatusCode::NOT_FOUND, "{}", bought.text);
    let path = format!("/api/agents/{}/approvals", s.agent.id);
    let (status, waiting) = s
        .app
        .request(reqwest::Method::GET, &path, Some(&s.agent.token), None)
        .await;
    assert_eq!(status, reqwest::StatusCode::OK, "{waiting}");
    assert_eq!(waiting[0]["id"], id, "{waiting}");
    assert_eq!(waiting[0]["kind"], "offer", "{waiting}");
}
