//! Views of the audit log.

use chrono::{DateTime, Utc};
use serde::Serialize;
use utoipa::ToSchema;

use crate::domain::audit::AuditEntry;

/// Who acted: the agent's token, its owner, the operator, an MCP client, or the service itself.
#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "lowercase")]
pub enum ActorView {
    Agent,
    Owner,
    Admin,
    Mcp,
    System,
}

/// One entry of the audit log (one hash chain across all agents).
#[derive(Debug, Serialize, ToSchema)]
pub struct AuditEntryView {
    /// Increasing across all agents; pass it as `before` for the next page.
    pub id: i64,
    pub at: DateTime<Utc>,
    #[schema(value_type = ActorView)]
    pub actor: String,
    /// `agent_created`, `agent_updated`, `agent_deleted`, `agent_reactivated`, `token_reissued`,
    /// `owner_session_opened`, `key_exported`, `policy_updated`, `transfer_accepted`, `transfer_refused`,
    /// `transfer_approved`, `transfer_rejected`, `transfer_expired`, `funds_swept`, `sweep_refused`, `mcp_tool_call`.
    pub action: String,
    /// What changed (never secrets).
    #[schema(value_type = Object)]
    pub detail: serde_json::Value,
    /// SHA-256 (hex) over the entry and the previous entry's hash.
    pub hash: String,
}

impl From<&AuditEntry> for AuditEntryView {
    fn from(entry: &AuditEntry) -> Self {
        AuditEntryView {
            id: entry.id,
            at: entry.at,
            actor: entry.actor.clone(),
            action: entry.action.clone(),
            // The stored text is the canonical JSON the hash covers; it always parses (it was written from a value).
            detail: serde_json::from_str(&entry.detail).unwrap_or(serde_json::Value::Null),
            hash: entry.hash.clone(),
        }
    }
}

/// The newest entry of the audit chain, to anchor elsewhere.
#[derive(Debug, Serialize, ToSchema)]
pub struct AuditHeadView {
    pub id: i64,
    /// The entry's hash (hex): every earlier entry is bound into it.
    pub hash: String,
    pub at: DateTime<Utc>,
}
