//! Elicitation for transfers held for approval (docs/api.md §11, §17). When a transfer tool ends
//! `awaiting_approval` and the client declared the elicitation capability, the server asks the human through
//! `elicitation/create`:
//! - the request carried owner authority beside the agent token (HTTP: `X-Owner-Token` or the admin bearer): the
//!   form asks approve / reject, and the answer is carried out as `POST …/approve|reject` would, audited as the
//!   owner's (or admin's) decision;
//! - it carried the agent token only (always so over stdio): the agent must never approve its own transfer, so
//!   the form only informs (which transfer, where an owner approves it) and changes nothing, whatever the answer.
//!
//! Without the capability, or when the client declines, cancels or does not answer in time, the tool result says
//! it awaits approval, as before.

use std::time::Duration;

use rmcp::RoleServer;
use rmcp::model::{ElicitRequestParams, ElicitationAction, ElicitationSchema};
use rmcp::service::{ElicitationMode, RequestContext};
use serde_json::{Value, json};
use uuid::Uuid;

use crate::auth::{Actor, OwnerAuthority};
use crate::domain::agent::Agent;
use crate::state::AppState;
use crate::tools::{ToolError, ToolResult};
use crate::transfers::TransferOutcome;

/// How long a client may take to answer; past it the transfer simply keeps waiting.
const ANSWER_WITHIN: Duration = Duration::from_secs(300);

/// The tool result after asking, when there is something to ask; else the result as it was. `owner` is the owner
/// authority the request carried beside the agent token, if any.
pub async fn elicit_if_awaiting(
    state: &AppState,
    cx: &RequestContext<RoleServer>,
    owner: Option<&OwnerAuthority>,
    agent: &Agent,
    result: ToolResult,
) -> ToolResult {
    let Some(transfer_id) = awaiting_transfer(&result) else {
        return result;
    };
    // 2026-07-28 requests stand alone: nothing is asked back on them (a held call becomes a task instead).
    if cx.protocol_version().is_some_and(|v| !v.has_initialize()) {
        return result;
    }
    if !cx.peer.supported_elicitation_modes().contains(&ElicitationMode::Form) {
        return result;
    }
    let mut waiting = result?;
    let path = format!("/api/agents/{}/transfers/{transfer_id}/approve", agent.id);
    let approve_url = match &state.config.security.public_url {
        Some(public) => format!("{}{path}", public.origin),
        None => path,
    };
    let summary = summary(state, transfer_id).await;
    let Some(owner) = owner else {
        let message = format!(
            "{summary} awaits an owner's approval (transfer {transfer_id}). This connection holds the agent's \
             token only and cannot approve it: an owner approves it in the console or with POST {approve_url}."
        );
        let answer = ask(cx, message, json!({"type": "object", "properties": {}})).await;
        tracing::info!(agent_id = %agent.id, %transfer_id, answered = answer.is_some(), "MCP approval notice shown");
        waiting["approve_url"] = json!(approve_url);
        return Ok(waiting);
    };
    let schema = json!({"type": "object", "required": ["decision"], "properties": {"decision": {
        "type": "string", "title": "Decision", "enum": ["approve", "reject"],
        "description": "approve: sign and send it now; reject: release it"}}});
    let message = format!("{summary} awaits your approval (transfer {transfer_id}). Approve or reject it?");
    let decision = ask(cx, message, schema)
        .await
        .and_then(|content| content.get("decision").and_then(Value::as_str).map(str::to_string));
    match decision.as_deref() {
        Some("approve") => approve(state, agent, owner, transfer_id).await,
        Some("reject") => reject(state, agent, owner, transfer_id).await,
        _ => Ok(waiting),
    }
}

/// The transfer id of a result `{transfer_id, status: "awaiting_approval", …}`, or of a `pay_http` result whose
/// `payment` waits (§16: its own `status` is the resource's 402).
pub(super) fn awaiting_transfer(result: &ToolResult) -> Option<Uuid> {
    let value = result.as_ref().ok()?;
    let waiting = |v: &Value| v.get("status").and_then(Value::as_str) == Some("awaiting_approval");
    let holder = if waiting(value) {
        value
    } else {
        value.get("payment").filter(|p| waiting(p))?
    };
    holder.get("transfer_id")?.as_str()?.parse().ok()
}

/// "A transfer of 0.02 ETH to 0x… on base", from the stored transfer.
async fn summary(state: &AppState, id: Uuid) -> String {
    match state.store.get_approval(id).await {
        Ok(Some(waiting)) => format!(
            "A transfer of {} {} to {} on {}",
            waiting.amount(),
            waiting.asset,
            waiting.to.to_checksum(None),
            waiting.chain
        ),
        _ => "A transfer".to_string(),
    }
}

/// Asks the client; the content of an accepted answer, or `None` (declined, cancelled, failed, timed out).
async fn ask(cx: &RequestContext<RoleServer>, message: String, schema: Value) -> Option<Value> {
    let schema = schema.as_object().cloned().unwrap_or_default();
    let requested_schema = ElicitationSchema::from_json_schema(schema).ok()?;
    let params = ElicitRequestParams::FormElicitationParams {
        meta: None,
        message,
        requested_schema,
    };
    match cx
        .peer
        .create_elicitation_with_timeout(params, Some(ANSWER_WITHIN))
        .await
    {
        Ok(answer) if answer.action == ElicitationAction::Accept => Some(answer.content.unwrap_or(json!({}))),
        Ok(_) => None,
        Err(e) => {
            tracing::info!(error = %e, "MCP elicitation got no answer");
            None
        }
    }
}

async fn approve(state: &AppState, agent: &Agent, owner: &OwnerAuthority, id: Uuid) -> ToolResult {
    let transfers = &state.transfers;
    let outcome = transfers
        .approve(agent, id, decider(owner))
        .await
        .map_err(ToolError::from)?;
    let result = match &outcome {
        TransferOutcome::Sent { chain, tx, status } => json!({
            "transfer_id": id, "status": status.as_str(), "chain": chain.name, "tx_hash": tx.tx_hash(),
            "to": tx.to.to_checksum(None), "explorer_url": tx.tx_hash().map(|h| chain.tx_url(h)),
        }),
        TransferOutcome::AwaitingApproval { approval, .. } => {
            json!({"transfer_id": id, "status": "awaiting_approval", "expires_at": approval.expires_at})
        }
    };
    Ok(result)
}

async fn reject(state: &AppState, agent: &Agent, owner: &OwnerAuthority, id: Uuid) -> ToolResult {
    let transfers = &state.transfers;
    let rejected = transfers
        .reject(agent, id, decider(owner), None)
        .await
        .map_err(ToolError::from)?;
    let result = json!({"transfer_id": id, "status": "rejected", "chain": rejected.chain,
        "to": rejected.to.to_checksum(None), "amount": rejected.amount()});
    Ok(result)
}

/// Who decided, as the audit log records it (the store writes the entry with the decision).
fn decider(owner: &OwnerAuthority) -> Actor {
    match owner {
        OwnerAuthority::Admin => Actor::Admin,
        OwnerAuthority::Owner { .. } => Actor::Owner,
    }
}
