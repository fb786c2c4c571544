//! Delegations (§21): registration, listing, removal and the revocation noticed on chain, each change with its
//! audit entry (and, for a revocation, its stream event) in one transaction.

use alloy::primitives::{Address, U256};
use async_trait::async_trait;
use chrono::{DateTime, Utc};
use serde_json::json;
use sqlx::{ColumnIndex, Decode, Encode, Executor, Type};
use uuid::Uuid;

use super::{Backend, SqlStore};
use crate::domain::audit::Detail;
use crate::domain::delegation::Status;
use crate::store::delegations::{DelegationRecord, DelegationStore, Registration};
use crate::store::shared::{EVENT_COLUMNS, EventRow};
use crate::store::{AuditEvent, EventRecord, StoreError, StoreResult};

const COLUMNS: &str = "id, agent_id, chain, hash, delegator, delegation, status, created_at, revoked_at";

#[derive(sqlx::FromRow)]
struct DelegationRow {
    id: Uuid,
    agent_id: Uuid,
    chain: String,
    hash: String,
    delegator: String,
    delegation: String,
    status: String,
    created_at: DateTime<Utc>,
    revoked_at: Option<DateTime<Utc>>,
}

impl DelegationRow {
    fn into_record(self) -> StoreResult<DelegationRecord> {
        let corrupt = |what: &str| StoreError::Corrupt(format!("delegations.{what}"));
        Ok(DelegationRecord {
            id: self.id,
            agent_id: self.agent_id,
            chain: self.chain,
            hash: self.hash.parse().map_err(|_| corrupt("hash"))?,
            delegator: self.delegator.parse().map_err(|_| corrupt("delegator"))?,
            delegation: serde_json::from_str(&self.delegation).map_err(|_| corrupt("delegation"))?,
            status: Status::parse(&self.status).ok_or_else(|| corrupt("status"))?,
            created_at: self.created_at,
            revoked_at: self.revoked_at,
        })
    }
}

/// The hash's stored spelling: 0x and lower-case, so one delegation has one row whatever its spelling.
fn hash_text(record: &DelegationRecord) -> String {
    format!("{:#x}", record.hash)
}

#[async_trait]
impl<B> DelegationStore for SqlStore<B>
where
    B: Backend,
    for<'c> &'c mut B::Connection: Executor<'c, Database = B>,
    for<'r> Uuid: Encode<'r, B> + Decode<'r, B> + Type<B>,
    for<'r> String: Encode<'r, B> + Decode<'r, B> + Type<B>,
    for<'r> &'r str: Encode<'r, B> + Type<B>,
    for<'r> i64: Encode<'r, B> + Decode<'r, B> + Type<B>,
    for<'r> DateTime<Utc>: Encode<'r, B> + Decode<'r, B> + Type<B>,
    for<'r> Option<DateTime<Utc>>: Decode<'r, B>,
    for<'r> Option<Uuid>: Decode<'r, B> + Encode<'r, B>,
    for<'r> Option<String>: Encode<'r, B>,
    usize: ColumnIndex<B::Row>,
    for<'r> &'r str: ColumnIndex<B::Row>,
{
    async fn add_delegation(
        &self,
        new: &DelegationRecord,
        owner: bool,
        audit: &AuditEvent,
    ) -> StoreResult<Registration> {
        let mut tx = B::begin_write(self).await?;
        let sql = format!(
            "SELECT {COLUMNS} FROM delegations WHERE chain = $1 AND hash = $2{}",
            B::ROW_LOCK
        );
        let known: Option<DelegationRow> = sqlx::query_as(sqlx::AssertSqlSafe(sql))
            .bind(&new.chain)
            .bind(hash_text(new))
            .fetch_optional(&mut *tx)
            .await?;
        let record = match known.map(DelegationRow::into_record).transpose()? {
            None => {
                let inserted = sqlx::query(
                    "INSERT INTO delegations (id, agent_id, chain, hash, delegator, delegation, status, created_at) \
                     VALUES ($1, $2, $3, $4, $5, $6, 'active', $7) ON CONFLICT DO NOTHING",
                )
                .bind(new.id)
                .bind(new.agent_id)
                .bind(&new.chain)
                .bind(hash_text(new))
                .bind(new.delegator.to_checksum(None))
                .bind(new.delegation.to_string())
                .bind(new.created_at)
                .execute(&mut *tx)
                .await?;
                if B::rows_affected(&inserted) != 1 {
                    return Ok(Registration::Exists);
                }
                DelegationRecord {
                    status: Status::Active,
                    revoked_at: None,
                    ..new.clone()
                }
            }
            Some(old)
                if owner && old.agent_id == new.agent_id && matches!(old.status, Status::Removed | Status::Revoked) =>
            {
                sqlx::query(
                    "UPDATE delegations SET status = 'active', delegation = $1, created_at = $2, revoked_at = NULL, \
                     removed_at = NULL WHERE id = $3",
                )
                .bind(new.delegation.to_string())
                .bind(new.created_at)
                .bind(old.id)
                .execute(&mut *tx)
                .await?;
                DelegationRecord {
                    id: old.id,
                    status: Status::Active,
                    revoked_at: None,
                    ..new.clone()
                }
            }
            Some(_) => return Ok(Registration::Exists),
        };
        let mut audit = audit.clone();
        if let Detail::DelegationAdded(added) = &mut audit.detail {
            added.delegation_id = record.id;
        }
        self.append_audit(&mut tx, &audit).await?;
        tx.commit().await?;
        Ok(Registration::Added(record))
    }

    async fn list_delegations(&self, agent_id: Uuid) -> StoreResult<Vec<DelegationRecord>> {
        let sql = format!("SELECT {COLUMNS} FROM delegations WHERE agent_id = $1 ORDER BY created_at, id");
        let rows: Vec<DelegationRow> = sqlx::query_as(sqlx::AssertSqlSafe(sql))
            .bind(agent_id)
            .fetch_all(&self.pool)
            .await?;
        rows.into_iter().map(DelegationRow::into_record).collect()
    }

    async fn get_delegation(&self, agent_id: Uuid, id: Uuid) -> StoreResult<Option<DelegationRecord>> {
        let sql = format!("SELECT {COLUMNS} FROM delegations WHERE id = $1 AND agent_id = $2");
        let row: Option<DelegationRow> = sqlx::query_as(sqlx::AssertSqlSafe(sql))
            .bind(id)
            .bind(agent_id)
            .fetch_optional(&self.pool)
            .await?;
        row.map(DelegationRow::into_record).transpose()
    }

    async fn remove_delegation(&self, agent_id: Uuid, id: Uuid, audit: &AuditEvent) -> StoreResult<Option<bool>> {
        let mut tx = B::begin_write(self).await?;
        let status: Option<(String,)> = sqlx::query_as(sqlx::AssertSqlSafe(format!(
            "SELECT status FROM delegations WHERE id = $1 AND agent_id = $2{}",
            B::ROW_LOCK
        )))
        .bind(id)
        .bind(agent_id)
        .fetch_optional(&mut *tx)
        .await?;
        match status {
            None => return Ok(None),
            Some((status,)) if status == Status::Removed.as_str() => return Ok(Some(false)),
            Some(_) => {}
        }
        sqlx::query("UPDATE delegations SET status = 'removed', removed_at = $1 WHERE id = $2")
            .bind(self.now())
            .bind(id)
            .execute(&mut *tx)
            .await?;
        self.append_audit(&mut tx, audit).await?;
        tx.commit().await?;
        Ok(Some(true))
    }

    async fn unmined_redemptions(&self, id: Uuid, token: Option<Address>, mined_nonce: u64) -> StoreResult<U256> {
        // As the reserving transaction holds them (`held_by_redemptions`): whatever their recorded status since.
        let rows: Vec<(String,)> = sqlx::query_as(concat!(
            "SELECT value_wei FROM transactions WHERE delegation_id = $1 AND nonce >= $2 \
             AND token_address IS NOT DISTINCT FROM $3 AND status IN ",
            crate::store::shared::outgoing_statuses!()
        ))
        .bind(id)
        .bind(i64::try_from(mined_nonce).unwrap_or(i64::MAX))
        .bind(token.map(|t| t.to_checksum(None)))
        .fetch_all(&self.pool)
        .await?;
        crate::store::shared::sum_wei(&rows, "value_wei")
    }

    async fn active_delegations(&self, chain: &str) -> StoreResult<Vec<DelegationRecord>> {
        let sql = format!("SELECT {COLUMNS} FROM delegations WHERE chain = $1 AND status = 'active' ORDER BY id");
        let rows: Vec<DelegationRow> = sqlx::query_as(sqlx::AssertSqlSafe(sql))
            .bind(chain)
            .fetch_all(&self.pool)
            .await?;
        rows.into_iter().map(DelegationRow::into_record).collect()
    }

    async fn revoke_delegation(&self, id: Uuid, audit: &AuditEvent) -> StoreResult<Option<EventRecord>> {
        let now = self.now();
        let mut tx = B::begin_write(self).await?;
        let changed = sqlx::query(
            "UPDATE delegations SET status = 'revoked', revoked_at = $1 WHERE id = $2 AND status = 'active'",
        )
        .bind(now)
        .bind(id)
        .execute(&mut *tx)
        .await?;
        if B::rows_affected(&changed) != 1 {
            return Ok(None);
        }
        let mut payload = audit
            .detail
            .to_json()
            .map_err(|e| StoreError::Corrupt(format!("audit detail: {e}")))?;
        payload["type"] = json!("delegation_revoked");
        payload["agent_id"] = json!(audit.agent_id);
        let row: EventRow = sqlx::query_as(sqlx::AssertSqlSafe(format!(
            "INSERT INTO events (conversation_id, agent_id, kind, payload, created_at) VALUES ($1, $2, $3, $4, $5) \
             RETURNING {EVENT_COLUMNS}"
        )))
        .bind(None::<Uuid>)
        .bind(audit.agent_id)
        .bind("delegation_revoked")
        .bind(payload.to_string())
        .bind(now)
        .fetch_one(&mut *tx)
        .await?;
        let record = row.into_event()?;
        B::notify_event(&mut tx, record.id).await?;
        self.append_audit(&mut tx, audit).await?;
        tx.commit().await?;
        self.feed.announce(&record);
        Ok(Some(record))
    }
}
