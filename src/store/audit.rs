//! What both backends share for the audit chain and owner sessions: rows as read, the SQL text that is the same in
//! both dialects, and the check of the whole log (`agentd audit verify`), which reads through the `AuditStore`.

use chrono::{DateTime, Utc};
use uuid::Uuid;

use super::shared::address_from_text;
use super::{OwnerChallenge, OwnerSessionRecord, Store, StoreResult};
use crate::domain::audit::{AuditBreak, AuditEntry, AuditKey, ChainCheck};

pub const AUDIT_COLUMNS: &str = "id, created_at, agent_id, actor, action, detail, prev_hash, hash";

pub const OWNER_CHALLENGE_COLUMNS: &str = "nonce, agent_id, chain, address, message, expires_at, used_at";

pub const OWNER_SESSION_COLUMNS: &str = "token_hash, agent_id, address, expires_at, chain";

/// An `audit_events` row; rows from before the chain began have no hashes.
#[derive(sqlx::FromRow)]
pub struct AuditRow {
    id: i64,
    created_at: DateTime<Utc>,
    agent_id: Uuid,
    actor: String,
    action: String,
    detail: String,
    prev_hash: Option<String>,
    hash: Option<String>,
}

impl From<AuditRow> for AuditEntry {
    fn from(row: AuditRow) -> Self {
        AuditEntry {
            id: row.id,
            at: row.created_at,
            agent_id: row.agent_id,
            actor: row.actor,
            action: row.action,
            detail: row.detail,
            prev_hash: row.prev_hash.unwrap_or_default(),
            hash: row.hash.unwrap_or_default(),
        }
    }
}

#[derive(sqlx::FromRow)]
pub struct OwnerChallengeRow {
    nonce: String,
    agent_id: Uuid,
    chain: String,
    address: String,
    message: String,
    expires_at: DateTime<Utc>,
    used_at: Option<DateTime<Utc>>,
}

impl OwnerChallengeRow {
    pub fn into_challenge(self) -> StoreResult<OwnerChallenge> {
        Ok(OwnerChallenge {
            nonce: self.nonce,
            agent_id: self.agent_id,
            chain: self.chain,
            address: address_from_text(&self.address)?,
            message: self.message,
            expires_at: self.expires_at,
            used: self.used_at.is_some(),
        })
    }
}

#[derive(sqlx::FromRow)]
pub struct OwnerSessionRow {
    token_hash: String,
    agent_id: Uuid,
    address: String,
    expires_at: DateTime<Utc>,
    chain: Option<String>,
}

impl OwnerSessionRow {
    pub fn into_session(self) -> StoreResult<OwnerSessionRecord> {
        Ok(OwnerSessionRecord {
            token_hash: self.token_hash,
            agent_id: self.agent_id,
            address: address_from_text(&self.address)?,
            expires_at: self.expires_at,
            chain: self.chain,
        })
    }
}

/// Reads the whole log in id order and checks its chain and head. `Ok(Ok(n))`: intact, `n` chained entries
/// (rows written before the chain began, which carry no hash, are skipped while they lead the log);
/// `Ok(Err(..))`: the first bad entry.
pub async fn verify_audit(store: &dyn Store, key: Option<AuditKey>) -> StoreResult<Result<u64, AuditBreak>> {
    const PAGE: i64 = 1000;
    // Read the head first: entries appended while the check runs come after it and are not checked.
    let (head_id, head_hash) = store.audit_head().await?;
    let mut check = ChainCheck::keyed(key);
    let mut chained = false;
    let mut after = 0;
    loop {
        let page = store.audit_entries_after(after, PAGE).await?;
        for entry in &page {
            if entry.id > head_id && head_id > 0 {
                break;
            }
            after = entry.id;
            if !chained && entry.hash.is_empty() && entry.prev_hash.is_empty() {
                continue;
            }
            chained = true;
            if let Err(broken) = check.push(entry) {
                return Ok(Err(broken));
            }
        }
        if (page.len() as i64) < PAGE || page.last().is_none_or(|e| e.id > head_id) {
            break;
        }
    }
    Ok(check.finish(head_id, &head_hash))
}
