//! Tasks of the `io.modelcontextprotocol/tasks` extension (MCP 2026-07-28) for transfers held for the owner
//! (docs/api.md §11, §17). A money-moving tool call that ends `awaiting_approval`, from a client that declared the
//! extension in the request's `_meta`, answers a task handle at once; `tasks/get` then reports where the transfer
//! stands.
//!
//! Nothing is kept in memory: a task is the held transfer itself (its id is the transfer id), and its state is read
//! from the rows that already exist (the approval, then the transaction it became), so any instance on the same
//! database answers `tasks/get`, across restarts too. A task belongs to the agent whose transfer it is: another
//! agent's token gets "not found", as for an unknown id.
//!
//! - waiting for the owner → `working`; or `input_required` with a URL-mode `elicitation/create` pointing the owner
//!   to the console's approval page when the request declared URL-mode elicitation (the URL carries no credential);
//! - approved and sent (the transfer `pending`, or settled since) → `completed`, with the transfer as the tool result;
//! - rejected or expired → `failed`, with a JSON-RPC error object whose `data` names the transfer and its status.

use chrono::{DateTime, Utc};
use rmcp::model::{
    CallToolResult, ClientCapabilities, CreateTaskResult, DetailedTask, InputRequest, InputRequests, JsonObject, Task,
    TaskPayload,
};
use serde_json::{Value, json};
use uuid::Uuid;

use crate::domain::agent::Agent;
use crate::domain::amount::format_units;
use crate::domain::chain as registry;
use crate::domain::policy::ApprovalStatus;
use crate::domain::transaction::{StoredTx, TxState};
use crate::state::AppState;
use crate::store::{Approval, StoreError};

/// How often a client is asked to poll: an owner decides in seconds at best.
pub const POLL_INTERVAL_MS: u64 = 2_000;

/// JSON-RPC code of a task that failed because the owner did not let the transfer go (a server-defined code).
pub const TRANSFER_NOT_SENT: i64 = -32003;

/// The key of the one input request a waiting task carries.
pub const APPROVAL_INPUT_KEY: &str = "owner_approval";

/// Whether the request declared the Tasks extension in its `_meta` (or, on an older session, at `initialize`).
pub fn declared(capabilities: Option<&ClientCapabilities>) -> bool {
    capabilities.is_some_and(ClientCapabilities::supports_tasks)
}

/// Whether the request declared URL-mode elicitation.
pub fn url_elicitation(capabilities: Option<&ClientCapabilities>) -> bool {
    capabilities
        .and_then(|caps| caps.elicitation.as_ref())
        .is_some_and(|elicitation| elicitation.url.is_some())
}

/// The console's approval page of the agent on `origin` (no credential in it: the owner signs in there).
pub fn approval_page(origin: &str, agent_id: Uuid) -> String {
    format!("{}/#/agents/{agent_id}/approvals", origin.trim_end_matches('/'))
}

/// The handle a held transfer's tool call answers.
pub fn handle(approval: Option<&Approval>, transfer_id: Uuid, now: DateTime<Utc>) -> CreateTaskResult {
    let (created, updated) = approval.map_or((now, now), |a| (a.created_at, a.updated_at));
    let task = base(transfer_id, created, updated)
        .with_status_message("The transfer awaits the owner's approval; poll tasks/get for its outcome.");
    CreateTaskResult::new(task)
}

fn base(transfer_id: Uuid, created: DateTime<Utc>, updated: DateTime<Utc>) -> Task {
    let mut task = Task::new(
        transfer_id.to_string(),
        rmcp::model::TaskStatus::Working,
        created.to_rfc3339(),
        updated.to_rfc3339(),
    )
    .with_poll_interval_ms(POLL_INTERVAL_MS);
    // Kept as long as the transfer's rows are: no expiry of its own.
    task.ttl_ms = None;
    task
}

/// The task `task_id` of `agent` as it stands, or `None` when the agent has no such transfer. `approval_url`, when
/// given, is where a URL-mode elicitation sends the owner while the transfer waits.
pub async fn detailed(
    state: &AppState,
    agent: &Agent,
    task_id: &str,
    approval_url: Option<String>,
) -> Result<Option<DetailedTask>, StoreError> {
    let Ok(id) = Uuid::parse_str(task_id.trim()) else {
        return Ok(None);
    };
    if let Some(tx) = state.store.get_transaction(agent.id, id).await? {
        let task = base(id, tx.created_at, tx.updated_at)
            .with_status_message(format!("Sent: the transfer is {}.", shown_status(tx.status)));
        let result = CallToolResult::structured(sent(&tx));
        return Ok(Some(DetailedTask::new(
            task,
            TaskPayload::Completed {
                result: object(&result),
            },
        )));
    }
    let Some(approval) = state.store.get_approval(id).await?.filter(|a| a.agent_id == agent.id) else {
        return Ok(None);
    };
    let task = base(id, approval.created_at, approval.updated_at);
    let now = state.clock.now();
    let detailed = match approval.status {
        ApprovalStatus::AwaitingApproval if approval.is_expired_at(now) => not_sent(task, &approval, "expired"),
        ApprovalStatus::AwaitingApproval => {
            let message = format!("{} awaits the owner's approval (transfer {id}).", summary(&approval));
            let request = approval_url.and_then(|url| {
                let request = json!({"method": "elicitation/create", "params": {
                    "mode": "url", "message": format!("{message} Approve or reject it in the console."),
                    "url": url, "elicitationId": id.to_string()}});
                serde_json::from_value::<InputRequest>(request).ok()
            });
            match request {
                Some(request) => {
                    let input_requests = InputRequests::from([(APPROVAL_INPUT_KEY.to_string(), request)]);
                    DetailedTask::new(
                        task.with_status_message(message),
                        TaskPayload::InputRequired { input_requests },
                    )
                }
                None => DetailedTask::new(task.with_status_message(message), TaskPayload::Working),
            }
        }
        // Approved moves it to the transactions in the same write; read in between, it is on its way.
        ApprovalStatus::Approved => DetailedTask::new(
            task.with_status_message("Approved: the transfer is being sent."),
            TaskPayload::Working,
        ),
        ApprovalStatus::Rejected => not_sent(task, &approval, "rejected"),
        ApprovalStatus::Expired => not_sent(task, &approval, "expired"),
    };
    Ok(Some(detailed))
}

/// A transfer the owner did not let go: `failed`, with the transfer in the error's data.
fn not_sent(task: Task, approval: &Approval, status: &str) -> DetailedTask {
    let message = match status {
        "rejected" => "the owner rejected the transfer",
        _ => "the transfer expired before the owner approved it",
    };
    let error = json!({"code": TRANSFER_NOT_SENT, "message": message, "data": {
        "code": format!("transfer_{status}"), "transfer_id": approval.id, "status": status,
        "chain": approval.chain, "asset": approval.asset, "amount": approval.amount(),
        "to": approval.to.to_checksum(None)}});
    let error = error.as_object().cloned().unwrap_or_default();
    DetailedTask::new(task.with_status_message(message), TaskPayload::Failed { error })
}

/// "A transfer of 0.02 ETH to 0x… on base".
pub fn summary(approval: &Approval) -> String {
    format!(
        "A transfer of {} {} to {} on {}",
        approval.amount(),
        approval.asset,
        approval.to.to_checksum(None),
        approval.chain
    )
}

/// Signed-but-not-yet-accepted transfers are on their way: to clients they are pending (as in the API).
fn shown_status(state: TxState) -> &'static str {
    match state {
        TxState::Signed | TxState::Pending => "pending",
        other => other.as_str(),
    }
}

/// The sent transfer, as the tool result of the task.
fn sent(tx: &StoredTx) -> Value {
    let chain = registry::find(&tx.chain);
    let decimals = tx
        .token
        .map_or_else(|| chain.map_or(18, |c| c.decimals), |t| t.decimals);
    let mut value = json!({
        "transfer_id": tx.id, "status": shown_status(tx.status), "chain": tx.chain, "asset": tx.asset,
        "amount": format_units(tx.value_wei, decimals), "to": tx.to.to_checksum(None),
    });
    if let Some(tx_hash) = tx.tx_hash() {
        value["tx_hash"] = json!(tx_hash);
        if let Some(chain) = chain {
            value["explorer_url"] = json!(chain.tx_url(tx_hash));
        }
    }
    value
}

fn object(result: &CallToolResult) -> JsonObject {
    match serde_json::to_value(result) {
        Ok(Value::Object(map)) => map,
        _ => JsonObject::new(),
    }
}
