//! x402 authorizations' rows: what is learnt of a payment's answer and settlement merged into its record, a paid
//! request marked pending with its audit, an unused authorization expired and its hold released
//! (`TransferStore::merge_x402`, `record_paid`, `expire_authorization`).

use alloy::primitives::U256;
use chrono::{DateTime, Utc};
use sqlx::{ColumnIndex, Decode, Encode, Executor, Type};
use uuid::Uuid;

use super::super::{Backend, SqlStore};
use crate::domain::transaction::X402Record;
use crate::store::shared;
use crate::store::{AuditEvent, StoreError, StoreResult};

impl<B> SqlStore<B>
where
    B: Backend,
    for<'c> &'c mut B::Connection: Executor<'c, Database = B>,
    // Amounts and addresses are text, nonces and gas integers, raw transactions bytes; tuples are read by index,
    // transfers and events by column name. Settlement appends a message (see `conversations`).
    for<'r> Uuid: Encode<'r, B> + Decode<'r, B> + Type<B>,
    for<'r> String: Encode<'r, B> + Decode<'r, B> + Type<B>,
    for<'r> &'r str: Encode<'r, B> + Type<B>,
    for<'r> i64: Encode<'r, B> + Decode<'r, B> + Type<B>,
    for<'r> DateTime<Utc>: Encode<'r, B> + Decode<'r, B> + Type<B>,
    for<'r> Vec<u8>: Encode<'r, B> + Decode<'r, B> + Type<B>,
    for<'r> Option<Uuid>: Encode<'r, B>,
    for<'r> Option<String>: Encode<'r, B>,
    for<'r> Option<&'r str>: Encode<'r, B>,
    for<'r> Option<i64>: Encode<'r, B>,
    usize: ColumnIndex<B::Row>,
    for<'r> &'r str: ColumnIndex<B::Row>,
{
    pub(super) async fn merge_x402_locked(
        &self,
        id: Uuid,
        response: Option<serde_json::Value>,
        settlement_tx: Option<String>,
    ) -> StoreResult<()> {
        let mut tx = B::begin_write(self).await?;
        self.lock_transfer_agent(&mut tx, id).await?;
        self.merge_x402_in(&mut tx, id, response, settlement_tx).await?;
        tx.commit().await?;
        Ok(())
    }

    pub(super) async fn record_paid_x402(
        &self,
        id: Uuid,
        response: Option<serde_json::Value>,
        settlement_tx: Option<String>,
        accepted: Option<&AuditEvent>,
        outcome: &AuditEvent,
    ) -> StoreResult<()> {
        let mut tx = B::begin_write(self).await?;
        self.lock_transfer_agent(&mut tx, id).await?;
        self.mark_pending_in(&mut tx, &[id]).await?;
        self.merge_x402_in(&mut tx, id, response, settlement_tx).await?;
        if let Some(accepted) = accepted
            && !self.take_owed_in(&mut tx, &[id]).await?.is_empty()
        {
            self.append_audit(&mut tx, accepted).await?;
        }
        self.append_audit(&mut tx, outcome).await?;
        tx.commit().await?;
        Ok(())
    }

    pub(super) async fn expire_x402(&self, id: Uuid, audit: &AuditEvent) -> StoreResult<bool> {
        let mut tx = B::begin_write(self).await?;
        let row: Option<(Uuid, String, String)> =
            sqlx::query_as("SELECT agent_id, chain, reserved_wei FROM transactions WHERE id = $1 AND kind = 'x402'")
                .bind(id)
                .fetch_optional(&mut *tx)
                .await?;
        let Some((agent_id, chain, reserved)) = row else {
            return Ok(false);
        };
        B::lock_agent(&mut tx, agent_id).await?;
        let done = sqlx::query(concat!(
            "UPDATE transactions SET status = 'expired', actual_cost_wei = '0', updated_at = $1 \
             WHERE id = $2 AND status IN ",
            shared::open_statuses!()
        ))
        .bind(self.now())
        .bind(id)
        .execute(&mut *tx)
        .await?;
        if B::rows_affected(&done) != 1 {
            return Ok(false);
        }
        let reserved = shared::wei_from_text(&reserved, "reserved_wei")?;
        Self::adjust_spent(&mut tx, agent_id, &chain, U256::ZERO, reserved).await?;
        self.append_audit(&mut tx, audit).await?;
        tx.commit().await?;
        Ok(true)
    }
}

impl<B> SqlStore<B>
where
    B: Backend,
    for<'c> &'c mut B::Connection: Executor<'c, Database = B>,
    for<'r> Uuid: Encode<'r, B> + Decode<'r, B> + Type<B>,
    for<'r> String: Encode<'r, B> + Decode<'r, B> + Type<B>,
    for<'r> &'r str: Encode<'r, B> + Type<B>,
    for<'r> i64: Encode<'r, B> + Decode<'r, B> + Type<B>,
    for<'r> DateTime<Utc>: Encode<'r, B> + Type<B>,
    usize: ColumnIndex<B::Row>,
{
    /// Takes the lock of the agent whose transfer `id` is, as every write of its transfers does first (SQLite holds
    /// Takes the lock of the agent whose transfer `id` is, as every write of its transfers does first (SQLite holds
    /// the write lock already); nothing when there is no such transfer.
    async fn lock_transfer_agent(&self, conn: &mut B::Connection, id: Uuid) -> StoreResult<()> {
        let agent: Option<(Uuid,)> = sqlx::query_as("SELECT agent_id FROM transactions WHERE id = $1")
            .bind(id)
            .fetch_optional(&mut *conn)
            .await?;
        if let Some((agent_id,)) = agent {
            B::lock_agent(conn, agent_id).await?;
        }
        Ok(())
    }

    /// Sets what is given of x402 payment `id`'s answer and settlement, keeping the rest of its record (under the
    /// agent's lock: the request path and the watcher each write their part).
    async fn merge_x402_in(
        &self,
        conn: &mut B::Connection,
        id: Uuid,
        response: Option<serde_json::Value>,
        settlement_tx: Option<String>,
    ) -> StoreResult<()> {
        if response.is_none() && settlement_tx.is_none() {
            return Ok(());
        }
        let row: Option<(Option<String>,)> =
            sqlx::query_as("SELECT x402 FROM transactions WHERE id = $1 AND kind = 'x402'")
                .bind(id)
                .fetch_optional(&mut *conn)
                .await?;
        let Some((Some(text),)) = row else {
            return Ok(());
        };
        let mut record: X402Record =
            serde_json::from_str(&text).map_err(|_| StoreError::Corrupt("transactions.x402".into()))?;
        if response.is_some() {
            record.response = response;
        }
        if settlement_tx.is_some() {
            record.settlement_tx = settlement_tx;
        }
        let text = serde_json::to_string(&record).map_err(|e| StoreError::Corrupt(format!("x402: {e}")))?;
        sqlx::query("UPDATE transactions SET x402 = $1 WHERE id = $2")
            .bind(text)
            .bind(id)
            .execute(&mut *conn)
            .await?;
        Ok(())
    }
}
