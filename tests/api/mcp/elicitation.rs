//! Elicitation for transfers awaiting approval (docs/api.md §11, §17), with the official SDK client declaring the
//! capability: owner authority beside the agent token approves through the answer and the transfer lands on chain;
//! the agent token alone is only told where to get it approved, whatever it answers; without the capability the
//! tool result says it waits, as before.

use serde_json::{Value, json};

use super::*;
use crate::anvil::Anvil;
use crate::helpers::chain::{BASE_CHAIN_ID, CENT_ETH, fresh_address, funded_agent, wallet, wei};
use crate::helpers::{CreatedAgent, TestApp};
use crate::money::policy::{ADMIN, admin_app, set_policy};

/// A guarded agent (the app has an admin token) whose transfers above 0.005 ETH wait for approval.
async fn approving_agent(app: &TestApp, anvil: &Anvil) -> CreatedAgent {
    let agent = funded_agent(app, anvil, Some(0.5)).await;
    let policy = json!({"limits": {"base:ETH": {"approval_above": "0.005"}}, "approval_ttl_secs": 900});
    set_policy(app, &agent, policy).await;
    agent
}

/// Sends 0.01 ETH to `to` over Streamable HTTP, the client answering elicitations with `answer` (if any).
async fn send_over_http(app: &TestApp, agent: &CreatedAgent, to: &str, answer: Option<&str>, owner: bool) -> Value {
    let calls = json!([{"name": "send_native", "arguments": {"chain": "base", "to": to, "amount": "0.01"}}]);
    let mut args = vec![
        "--url".to_string(),
        app.url("/mcp"),
        "--calls".to_string(),
        calls.to_string(),
    ];
    if let Some(answer) = answer {
        args.extend(["--elicit".to_string(), answer.to_string()]);
    }
    if owner {
        args.extend(["--header".to_string(), format!("Authorization=Bearer {ADMIN}")]);
    }
    let env = vec![("AGENTD_ACCESS_TOKEN".to_string(), agent.token.clone())];
    let (ok, out) = mcp_client(app, args, env).await;
    assert!(ok, "the client ran: {out:#}");
    assert!(
        out["sessionId"].is_string(),
        "an SSE-capable client gets a session: {out:#}"
    );
    out
}

async fn actions(app: &TestApp, agent: &CreatedAgent) -> Vec<(String, String)> {
    audit_rows(app, &agent.id)
        .await
        .into_iter()
        .map(|(action, actor, _)| (action, actor))
        .filter(|(action, _)| action.starts_with("transfer_"))
        .collect()
}

#[tokio::test]
async fn an_owner_approves_a_held_transfer_through_elicitation_and_it_lands() {
    let anvil = Anvil::start(BASE_CHAIN_ID);
    let app = admin_app(&anvil).await;
    let agent = approving_agent(&app, &anvil).await;
    let to = fresh_address();

    let out = send_over_http(&app, &agent, &to.to_string(), Some("approve"), true).await;
    let asked = &out["elicitations"][0];
    assert!(
        asked["message"].as_str().unwrap().contains("awaits your approval"),
        "{out:#}"
    );
    assert_eq!(
        asked["requestedSchema"]["properties"]["decision"]["enum"],
        json!(["approve", "reject"])
    );
    let sent = tool_ok(&out, 0);
    assert_ne!(sent["status"], "awaiting_approval", "{sent}");
    assert!(sent["tx_hash"].is_string(), "{sent}");
    assert_eq!(anvil.balance(to).await, wei(CENT_ETH), "the approved transfer landed");
    let decided: Vec<(String, String)> = vec![
        ("transfer_accepted".into(), "mcp".into()),
        ("transfer_approved".into(), "admin".into()),
    ];
    assert_eq!(
        actions(&app, &agent).await,
        decided,
        "held by the MCP call, approved by the admin"
    );
}

#[tokio::test]
async fn the_agent_token_alone_is_only_told_where_an_owner_approves() {
    let anvil = Anvil::start(BASE_CHAIN_ID);
    let app = admin_app(&anvil).await;
    let agent = approving_agent(&app, &anvil).await;
    let to = fresh_address();

    // The client answers "approve": without owner authority that changes nothing.
    let out = send_over_http(&app, &agent, &to.to_string(), Some("approve"), false).await;
    let asked = &out["elicitations"][0];
    let message = asked["message"].as_str().unwrap();
    assert!(message.contains("cannot approve"), "{out:#}");
    assert_eq!(
        asked["requestedSchema"]["properties"],
        json!({}),
        "nothing to decide: {out:#}"
    );
    let held = tool_ok(&out, 0);
    assert_eq!(held["status"], "awaiting_approval", "{held}");
    let id = held["transfer_id"].as_str().unwrap();
    assert!(message.contains(id), "{message}");
    assert!(
        held["approve_url"]
            .as_str()
            .unwrap()
            .ends_with(&format!("/transfers/{id}/approve")),
        "{held}"
    );
    assert_eq!(anvil.nonce(wallet(&agent)).await, 0, "nothing was signed");
    assert!(
        !actions(&app, &agent)
            .await
            .iter()
            .any(|(a, _)| a == "transfer_approved")
    );

    // Without the capability: no question, the result says it waits.
    let out = send_over_http(&app, &agent, &to.to_string(), None, true).await;
    assert_eq!(out["elicitations"], json!([]), "{out:#}");
    assert_eq!(tool_ok(&out, 0)["status"], "awaiting_approval", "{out:#}");
    assert_eq!(anvil.nonce(wallet(&agent)).await, 0);
}
