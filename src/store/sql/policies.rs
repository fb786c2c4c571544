//! Policies and transfers held for approval. `gate_in` (the facts the decision reads), `hold_in` and `close_in`
//! run inside the reserving transaction of `transfers.rs`, under the agent's write lock, so the policy sees every
//! earlier transfer of that agent, on one instance and across instances sharing a PostgreSQL database.

use std::collections::BTreeMap;

use alloy::primitives::{Address, U256};
use async_trait::async_trait;
use chrono::{DateTime, Utc};
use serde_json::json;
use sqlx::{ColumnIndex, Decode, Encode, Executor, Type};
use uuid::Uuid;

use super::{Backend, SqlStore};
use crate::domain::asset;
use crate::domain::audit::Actor;
use crate::domain::call::ledger::Remaining;
use crate::domain::decision::{self, Counted, Gate, Windows};
use crate::domain::policy::{ApprovalStatus, Holds, Policy};
use crate::store::approvals::{APPROVAL_COLUMNS, ApprovalRow};
use crate::store::shared::{self, EVENT_COLUMNS, EventRow};
use crate::store::{
    Approval, AuditEvent, Clearance, Closing, EventRecord, PolicyStore, StoreError, StoreResult, TransferRequest,
};

#[async_trait]
impl<B> PolicyStore for SqlStore<B>
where
    B: Backend,
    for<'c> &'c mut B::Connection: Executor<'c, Database = B>,
    // Policies are JSON text; approvals carry ids, text amounts and addresses, gas as an integer and times; rows
    // are read by name, single values by index.
    for<'r> Uuid: Encode<'r, B> + Decode<'r, B> + Type<B>,
    for<'r> String: Encode<'r, B> + Decode<'r, B> + Type<B>,
    for<'r> &'r str: Encode<'r, B> + Type<B>,
    for<'r> i64: Encode<'r, B> + Decode<'r, B> + Type<B>,
    for<'r> DateTime<Utc>: Encode<'r, B> + Decode<'r, B> + Type<B>,
    for<'r> Option<Uuid>: Encode<'r, B>,
    for<'r> Option<String>: Encode<'r, B>,
    for<'r> Option<i64>: Encode<'r, B>,
    usize: ColumnIndex<B::Row>,
    for<'r> &'r str: ColumnIndex<B::Row>,
{
    async fn get_policy(&self, agent_id: Uuid) -> StoreResult<Policy> {
        let mut conn = self.pool.acquire().await?;
        Self::policy_in(&mut conn, agent_id).await
    }

    async fn budget_windows(&self, agent_id: Uuid) -> StoreResult<(Policy, BTreeMap<String, Windows>)> {
        // One transaction: the policy and every window as of one moment.
        let mut tx = self.pool.begin().await?;
        let now = self.now();
        let policy = Self::policy_in(&mut tx, agent_id).await?;
        let mut windows = BTreeMap::new();
        for key in policy.limits.keys().filter(|k| policy.counts_windows(k)) {
            let Some((chain, asset)) = key.split_once(':') else {
                continue;
            };
            windows.insert(
                key.clone(),
                Self::windows_in(&mut tx, (agent_id, chain), asset, now).await?,
            );
        }
        tx.commit().await?;
        Ok((policy, windows))
    }

    async fn allowance_ledger(&self, agent_id: Uuid, chain: &str) -> StoreResult<Vec<Remaining>> {
        let mut conn = self.pool.acquire().await?;
        Self::ledger_in(&mut conn, agent_id, chain).await
    }

    async fn put_policy(&self, agent_id: Uuid, policy: &Policy, audit: &AuditEvent) -> StoreResult<()> {
        let text = serde_json::to_string(policy).map_err(|e| StoreError::Corrupt(format!("policy: {e}")))?;
        let mut tx = B::begin_write(self).await?;
        sqlx::query(
            "INSERT INTO policies (agent_id, policy, updated_at) VALUES ($1, $2, $3) \
             ON CONFLICT (agent_id) DO UPDATE SET policy = $2, updated_at = $3",
        )
        .bind(agent_id)
        .bind(text)
        .bind(self.now())
        .execute(&mut *tx)
        .await?;
        self.append_audit(&mut tx, audit).await?;
        tx.commit().await?;
        Ok(())
    }

    async fn get_approval(&self, id: Uuid) -> StoreResult<Option<Approval>> {
        let mut conn = self.pool.acquire().await?;
        Self::approval_in(&mut conn, id).await
    }

    async fn waiting_approvals(&self, agent_id: Uuid) -> StoreResult<Vec<Approval>> {
        let rows: Vec<ApprovalRow> = sqlx::query_as(sqlx::AssertSqlSafe(format!(
            "SELECT {APPROVAL_COLUMNS} FROM approvals WHERE agent_id = $1 AND status = 'awaiting_approval' \
             ORDER BY created_at, id"
        )))
        .bind(agent_id)
        .fetch_all(&self.pool)
        .await?;
        shared::convert(rows, ApprovalRow::into_approval)
    }

    async fn due_approvals(&self, chain: &str, now: DateTime<Utc>) -> StoreResult<Vec<Approval>> {
        let rows: Vec<ApprovalRow> = sqlx::query_as(sqlx::AssertSqlSafe(format!(
            "SELECT {APPROVAL_COLUMNS} FROM approvals WHERE chain = $1 AND status = 'awaiting_approval'"
        )))
        .bind(chain)
        .fetch_all(&self.pool)
        .await?;
        let all = shared::convert(rows, ApprovalRow::into_approval)?;
        Ok(all.into_iter().filter(|a| a.is_expired_at(now)).collect())
    }

    async fn close_approval(
        &self,
        id: Uuid,
        status: ApprovalStatus,
        by: Actor,
        reason: Option<&str>,
    ) -> StoreResult<Closing> {
        let mut tx = B::begin_write(self).await?;
        // The agent first, as reservations do, so that spending changes under one lock.
        let agent: Option<(Uuid,)> = sqlx::query_as("SELECT agent_id FROM approvals WHERE id = $1")
            .bind(id)
            .fetch_optional(&mut *tx)
            .await?;
        let Some((agent_id,)) = agent else {
            return Ok(Closing::NotFound);
        };
        B::lock_agent(&mut tx, agent_id).await?;
        let closing = self.close_in(&mut tx, id, status, true).await?;
        if let Closing::Closed(approval, _) = &closing
            && let Some(event) = approval.decided_audit(by, None, reason)
        {
            self.append_audit(&mut tx, &event).await?;
        }
        tx.commit().await?;
        if let Closing::Closed(_, event) = &closing {
            self.feed.announce(event);
        }
        Ok(closing)
    }

    async fn reopen_approval(&self, id: Uuid) -> StoreResult<bool> {
        let mut tx = B::begin_write(self).await?;
        let Some(mut a) = Self::approval_in(&mut tx, id).await? else {
            return Ok(false);
        };
        B::lock_agent(&mut tx, a.agent_id).await?;
        let now = self.now();
        let done = sqlx::query(
            "UPDATE approvals SET status = 'awaiting_approval', updated_at = $1 WHERE id = $2 AND status = 'approved'",
        )
        .bind(now)
        .bind(id)
        .execute(&mut *tx)
        .await?;
        if B::rows_affected(&done) != 1 {
            return Ok(false);
        }
        Self::adjust_spent(&mut tx, a.agent_id, &a.chain, a.reserved_wei, U256::ZERO).await?;
        a.status = ApprovalStatus::AwaitingApproval;
        a.updated_at = now;
        let event = self
            .approval_event_in(&mut tx, &a, "approval_required", a.required_event())
            .await?;
        tx.commit().await?;
        self.feed.announce(&event);
        Ok(true)
    }
}

/// The policy and approval steps, inside the caller's write transaction (the agent locked).
impl<B> SqlStore<B>
where
    B: Backend,
    for<'c> &'c mut B::Connection: Executor<'c, Database = B>,
    for<'r> Uuid: Encode<'r, B> + Decode<'r, B> + Type<B>,
    for<'r> String: Encode<'r, B> + Decode<'r, B> + Type<B>,
    for<'r> &'r str: Encode<'r, B> + Type<B>,
    for<'r> i64: Encode<'r, B> + Decode<'r, B> + Type<B>,
    for<'r> DateTime<Utc>: Encode<'r, B> + Decode<'r, B> + Type<B>,
    for<'r> Option<Uuid>: Encode<'r, B>,
    for<'r> Option<String>: Encode<'r, B>,
    for<'r> Option<i64>: Encode<'r, B>,
    usize: ColumnIndex<B::Row>,
    for<'r> &'r str: ColumnIndex<B::Row>,
{
    async fn policy_in(conn: &mut B::Connection, agent_id: Uuid) -> StoreResult<Policy> {
        let row: Option<(String,)> = sqlx::query_as("SELECT policy FROM policies WHERE agent_id = $1")
            .bind(agent_id)
            .fetch_optional(&mut *conn)
            .await?;
        policy_from(row.map(|(text,)| text))
    }

    async fn approval_in(conn: &mut B::Connection, id: Uuid) -> StoreResult<Option<Approval>> {
        let row: Option<ApprovalRow> = sqlx::query_as(sqlx::AssertSqlSafe(format!(
            "SELECT {APPROVAL_COLUMNS} FROM approvals WHERE id = $1"
        )))
        .bind(id)
        .fetch_optional(&mut *conn)
        .await?;
        row.map(ApprovalRow::into_approval).transpose()
    }

    /// Reads what decides besides the cap and the balances: the waiting transfer for an approval; for a new
    /// transfer the policy, and only the windows and recipient history the policy needs.
    /// `policy` is the agent's stored policy as read under its lock (`agent_facts_in`).
    pub(super) async fn gate_in(
        conn: &mut B::Connection,
        r: &TransferRequest,
        policy: Option<String>,
        now: DateTime<Utc>,
    ) -> StoreResult<Gate> {
        match r.clearance {
            Clearance::Decided => Ok(Gate::Decided),
            Clearance::Sweep { anywhere: true } => Ok(Gate::Sweep { owners: None }),
            Clearance::Sweep { anywhere: false } => {
                let rows: Vec<(String,)> = sqlx::query_as("SELECT address FROM owner_addresses WHERE agent_id = $1")
                    .bind(r.agent_id)
                    .fetch_all(&mut *conn)
                    .await?;
                let owners = rows
                    .iter()
                    .map(|(address,)| shared::address_from_text(address))
                    .collect::<StoreResult<Vec<_>>>()?;
                Ok(Gate::Sweep { owners: Some(owners) })
            }
            Clearance::Approval { .. } => match Self::approval_in(conn, r.id).await? {
                Some(a) => Ok(Gate::Approval {
                    status: a.status,
                    expired: a.is_expired_at(now),
                    held: a.reserved_wei,
                }),
                None => Err(StoreError::Corrupt("approval to reserve is missing".into())),
            },
            Clearance::Policy => {
                let policy = policy_from(policy)?;
                let windows = if policy.counts_windows(&asset::key(&r.chain, &r.asset)) {
                    Self::windows_in(conn, (r.agent_id, &r.chain), &r.asset, now).await?
                } else {
                    Windows::default()
                };
                let paid_before = !policy.approve_new_recipients || Self::paid_before(conn, r.agent_id, r.to).await?;
                Ok(Gate::Policy {
                    policy: Box::new(policy),
                    windows,
                    paid_before,
                })
            }
        }
    }

    /// The windows of each asset a call counts, and whether its party was paid before (`counts` order).
    pub(super) async fn call_windows_in(
        conn: &mut B::Connection,
        r: (Uuid, &str),
        counts: &[Counted],
        policy: &Policy,
        now: DateTime<Utc>,
    ) -> StoreResult<Vec<(Windows, bool)>> {
        let mut windows = Vec::with_capacity(counts.len());
        for count in counts {
            let totals = match policy.counts_windows(&count.asset_key) {
                true => {
                    let asset = count.asset_key.split_once(':').map_or("", |(_, a)| a);
                    Self::windows_in(conn, r, asset, now).await?
                }
                false => Windows::default(),
            };
            let paid = !policy.approve_new_recipients || Self::paid_before(conn, r.0, count.party).await?;
            windows.push((totals, paid));
        }
        Ok(windows)
    }

    /// What the rolling windows of `asset` on the agent's chain have counted at `now`: the one read of the windows
    /// that the decision (`gate_in`, `call_windows_in`) and the budget (`budget_windows`) both take.
    pub(super) async fn windows_in(
        conn: &mut B::Connection,
        (agent_id, chain): (Uuid, &str),
        asset: &str,
        now: DateTime<Utc>,
    ) -> StoreResult<Windows> {
        Ok(decision::windows(
            &Self::window_rows(conn, agent_id, chain, asset, now).await?,
            now,
        ))
    }

    /// The allowances the service counted for the agent on `chain` (§18).
    pub(super) async fn ledger_in(
        conn: &mut B::Connection,
        agent_id: Uuid,
        chain: &str,
    ) -> StoreResult<Vec<Remaining>> {
        // A row whose writer never landed counts nothing (see migration 0023).
        let rows: Vec<(String, String, String, String)> = sqlx::query_as(concat!(
            "SELECT l.holder, l.token, l.spender, l.remaining FROM allowance_ledger l WHERE l.agent_id = $1 \
             AND l.chain = $2 AND (l.transfer_id IS NULL OR EXISTS (SELECT 1 FROM transactions t \
             WHERE t.id = l.transfer_id AND t.status IN ",
            shared::outgoing_statuses!(),
            "))"
        ))
        .bind(agent_id)
        .bind(chain)
        .fetch_all(&mut *conn)
        .await?;
        rows.into_iter()
            .map(|(holder, token, spender, remaining)| {
                Ok(Remaining {
                    holder: shared::address_from_text(&holder)?,
                    token: shared::address_from_text(&token)?,
                    spender: shared::address_from_text(&spender)?,
                    remaining: shared::wei_from_text(&remaining, "allowance_ledger.remaining")?,
                })
            })
            .collect()
    }

    /// Stores what a call counted: each token's count against the windows (its native value is its row's
    /// `value_wei`), and what is left of the allowances it moved.
    pub(super) async fn count_call_in(
        conn: &mut B::Connection,
        r: &TransferRequest,
        counts: &[Counted],
        ledger: &[Remaining],
        now: DateTime<Utc>,
    ) -> StoreResult<()> {
        let native = crate::domain::asset::key(&r.chain, &r.asset);
        for count in counts.iter().filter(|c| c.asset_key != native && !c.value.is_zero()) {
            let asset = count.asset_key.split_once(':').map_or("", |(_, a)| a);
            sqlx::query(
                "INSERT INTO call_outflows (transfer_id, agent_id, chain, asset, amount, created_at) \
                 VALUES ($1, $2, $3, $4, $5, $6)",
            )
            .bind(r.id)
            .bind(r.agent_id)
            .bind(&r.chain)
            .bind(asset)
            .bind(count.value.to_string())
            .bind(now)
            .execute(&mut *conn)
            .await?;
        }
        for row in ledger {
            sqlx::query(
                "INSERT INTO allowance_ledger (agent_id, chain, holder, token, spender, remaining, transfer_id) \
                 VALUES ($1, $2, $3, $4, $5, $6, $7) \
                 ON CONFLICT (agent_id, chain, holder, token, spender) DO UPDATE SET remaining = $6, transfer_id = $7",
            )
            .bind(r.agent_id)
            .bind(&r.chain)
            .bind(format!("{:#x}", row.holder))
            .bind(format!("{:#x}", row.token))
            .bind(format!("{:#x}", row.spender))
            .bind(row.remaining.to_string())
            .bind(r.id)
            .execute(&mut *conn)
            .await?;
        }
        Ok(())
    }

    /// Removes what a waiting call counted in the windows (its approval counts it again as signed).
    pub(super) async fn uncount_call_in(conn: &mut B::Connection, transfer_id: Uuid) -> StoreResult<()> {
        sqlx::query("DELETE FROM call_outflows WHERE transfer_id = $1")
            .bind(transfer_id)
            .execute(&mut *conn)
            .await?;
        Ok(())
    }

    /// Values and times of this asset's outflows in the week window: transfers sent, and waiting ones not yet
    /// expired; what calls sent or waiting count of it besides their native value (`call_outflows`, §18).
    pub(super) async fn window_rows(
        conn: &mut B::Connection,
        agent_id: Uuid,
        chain: &str,
        asset: &str,
        now: DateTime<Utc>,
    ) -> StoreResult<Vec<(U256, DateTime<Utc>)>> {
        let mut rows: Vec<(String, DateTime<Utc>)> = sqlx::query_as(concat!(
            "SELECT value_wei, created_at FROM transactions WHERE agent_id = $1 AND chain = $2 AND asset = $3 \
             AND status IN ",
            shared::outgoing_statuses!(),
            " AND created_at >= $4"
        ))
        .bind(agent_id)
        .bind(chain)
        .bind(asset)
        .bind(decision::week_ago(now))
        .fetch_all(&mut *conn)
        .await?;
        let counted: Vec<(String, DateTime<Utc>)> = sqlx::query_as(concat!(
            "SELECT o.amount, o.created_at FROM call_outflows o WHERE o.agent_id = $1 AND o.chain = $2 \
             AND o.asset = $3 AND o.created_at >= $4 AND (EXISTS (SELECT 1 FROM transactions t WHERE t.id = \
             o.transfer_id AND t.status IN ",
            shared::outgoing_statuses!(),
            ") OR EXISTS (SELECT 1 FROM approvals a \
             WHERE a.id = o.transfer_id AND a.status = 'awaiting_approval' AND a.expires_at > $5))"
        ))
        .bind(agent_id)
        .bind(chain)
        .bind(asset)
        .bind(decision::week_ago(now))
        .bind(now)
        .fetch_all(&mut *conn)
        .await?;
        rows.extend(counted);
        let waiting: Vec<(String, DateTime<Utc>, DateTime<Utc>)> = sqlx::query_as(
            "SELECT value_wei, created_at, expires_at FROM approvals WHERE agent_id = $1 AND chain = $2 \
             AND asset = $3 AND status = 'awaiting_approval'",
        )
        .bind(agent_id)
        .bind(chain)
        .bind(asset)
        .fetch_all(&mut *conn)
        .await?;
        rows.extend(
            waiting
                .into_iter()
                .filter(|(_, _, expires)| *expires > now)
                .map(|(v, at, _)| (v, at)),
        );
        rows.into_iter()
            .map(|(v, at)| Ok((shared::wei_from_text(&v, "value_wei")?, at)))
            .collect()
    }

    /// Whether the agent has a sent (signed, pending or confirmed) transfer to `to` on any chain. Addresses are
    /// stored checksummed; `lower` makes the comparison independent of case.
    pub(super) async fn paid_before(conn: &mut B::Connection, agent_id: Uuid, to: Address) -> StoreResult<bool> {
        let row: Option<(Uuid,)> = sqlx::query_as(concat!(
            "SELECT id FROM transactions WHERE agent_id = $1 AND lower(to_address) = $2 \
             AND status IN ",
            shared::outgoing_statuses!(),
            " LIMIT 1"
        ))
        .bind(agent_id)
        .bind(to.to_string().to_lowercase())
        .fetch_optional(&mut *conn)
        .await?;
        Ok(row.is_some())
    }

    /// Stores `r` as waiting for approval with its `approval_required` event, and counts its reservation.
    pub(super) async fn hold_in(
        &self,
        conn: &mut B::Connection,
        r: &TransferRequest,
        ttl_secs: u64,
        holds: (Holds, &[Counted]),
    ) -> StoreResult<(Approval, EventRecord)> {
        let a = Approval::from_request(r, ttl_secs, holds, self.now());
        let (token_address, asset_decimals) = shared::token_columns(a.token);
        let body = shared::BodyColumns::of(&a.body);
        sqlx::query(sqlx::AssertSqlSafe(format!(
            "INSERT INTO approvals ({APPROVAL_COLUMNS}) VALUES \
             ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, $17, $18, $19, $20, $21, $22, $23, $24, $25)"
        )))
        .bind(a.id)
        .bind(a.agent_id)
        .bind(&a.chain)
        .bind(&a.asset)
        .bind(a.conversation_id)
        .bind(a.from.to_checksum(None))
        .bind(a.to.to_checksum(None))
        .bind(a.value_wei.to_string())
        .bind(body.gas_limit)
        .bind(body.max_fee_per_gas)
        .bind(a.reserved_wei.to_string())
        .bind(a.status.as_str())
        .bind(a.expires_at)
        .bind(a.created_at)
        .bind(a.updated_at)
        .bind(token_address)
        .bind(asset_decimals)
        .bind(body.kind)
        .bind(body.x402)
        .bind(body.call_record)
        .bind(serde_json::to_string(&a.held_by).expect("rule names serialise"))
        .bind(body.delegation)
        .bind(a.held_above.map(|w| w.to_string()))
        .bind(a.held_above_asset.as_ref().map(|h| h.key.clone()))
        .bind(a.held_above_asset.as_ref().map(|h| i64::from(h.decimals)))
        .execute(&mut *conn)
        .await?;
        Self::adjust_spent(conn, a.agent_id, &a.chain, a.reserved_wei, U256::ZERO).await?;
        let event = self
            .approval_event_in(conn, &a, "approval_required", a.required_event())
            .await?;
        Ok((a, event))
    }

    /// Closes a waiting transfer with `status` and stores its `approval_resolved` event. `release` gives its
    /// reservation back (rejected, expired); an approval keeps it for the caller to exchange. An approval past
    /// `expires_at` is refused as `expired` (the caller then closes it as such).
    pub(super) async fn close_in(
        &self,
        conn: &mut B::Connection,
        id: Uuid,
        status: ApprovalStatus,
        release: bool,
    ) -> StoreResult<Closing> {
        let Some(mut a) = Self::approval_in(conn, id).await? else {
            return Ok(Closing::NotFound);
        };
        let now = self.now();
        if a.status != ApprovalStatus::AwaitingApproval {
            return Ok(Closing::NotWaiting(a.status));
        }
        if status == ApprovalStatus::Approved && a.is_expired_at(now) {
            return Ok(Closing::NotWaiting(ApprovalStatus::Expired));
        }
        // A waiting payment's request (the caller's query and headers) is not kept past its decision; an approved
        // one was opened before this step.
        let mut body = a.body.clone();
        if let Some(record) = body.x402_mut() {
            record.pending_request = None;
        }
        let x402_text = shared::BodyColumns::of(&body).x402;
        sqlx::query(
            "UPDATE approvals SET status = $1, updated_at = $2, x402 = $3 \
             WHERE id = $4 AND status = 'awaiting_approval'",
        )
        .bind(status.as_str())
        .bind(now)
        .bind(x402_text)
        .bind(id)
        .execute(&mut *conn)
        .await?;
        a.body = body;
        if release {
            Self::adjust_spent(conn, a.agent_id, &a.chain, U256::ZERO, a.reserved_wei).await?;
        }
        a.status = status;
        a.updated_at = now;
        let event = self
            .approval_event_in(conn, &a, "approval_resolved", a.resolved_event())
            .await?;
        Ok(Closing::Closed(Box::new(a), event))
    }

    /// Stores an approval event; it is announced to other instances once the transaction commits.
    async fn approval_event_in(
        &self,
        conn: &mut B::Connection,
        a: &Approval,
        kind: &str,
        payload: serde_json::Value,
    ) -> StoreResult<EventRecord> {
        let row: EventRow = sqlx::query_as(sqlx::AssertSqlSafe(format!(
            "INSERT INTO events (conversation_id, agent_id, kind, payload, created_at) VALUES ($1, $2, $3, $4, $5) \
             RETURNING {EVENT_COLUMNS}"
        )))
        .bind(a.conversation_id)
        .bind(a.agent_id)
        .bind(kind)
        .bind(payload.to_string())
        .bind(self.now())
        .fetch_one(&mut *conn)
        .await?;
        let record = row.into_event()?;
        B::notify_event(&mut *conn, record.id).await?;
        let mut data = a.required_event();
        data["kind"] = json!(a.kind());
        if let Some(x402) = a.body.x402() {
            data["url"] = json!(x402.url);
        }
        let ty = if kind == "approval_required" {
            "approval.required"
        } else {
            data["decision"] = json!(a.status.decision());
            data["status"] = json!(a.status.as_str());
            "approval.resolved"
        };
        Self::outbox_in(
            conn,
            crate::domain::webhook::WebhookEvent::new(ty, a.agent_id, data, self.now()),
        )
        .await?;
        Ok(record)
    }
}

/// A stored policy (`None`: the agent has none, the default applies).
pub(super) fn policy_from(stored: Option<String>) -> StoreResult<Policy> {
    match stored {
        Some(text) => serde_json::from_str(&text).map_err(|_| StoreError::Corrupt("policies.policy".into())),
        None => Ok(Policy::default()),
    }
}
