//! Transfers — the `TransferStore` of SQLite and PostgreSQL: the lists and reads of transfers, broadcast marks,
//! settlement with its event and message, send and watcher locks; the rest in one child module an idea:
//! `reserving` (the reserving transaction: the facts of a request read under its agent's lock, the decision the
//! service took on them applied), `facts` (what it reads of the agent), `rows` (the transfer row's insert, nonce and
//! spending rows), `repair` (discards and nonce fills), `x402` (authorizations' records).

mod facts;
mod repair;
mod reserving;
mod rows;
mod x402;

use std::collections::BTreeMap;

use alloy::primitives::U256;
use async_trait::async_trait;
use chrono::{DateTime, Utc};
use sqlx::{ColumnIndex, Decode, Encode, Executor, Type};
use uuid::Uuid;

use super::{Backend, SqlStore};
use crate::domain::transaction::StoredTx;
use crate::store::shared::{self, OPEN, TX_COLUMNS, TxRow};
use crate::store::{
    AuditEvent, EventRecord, Message, NonceFill, Presigned, Reserving, SendGuard, Settlement, StoreResult,
    TransferRequest, TransferStore,
};
use reserving::SqlReserving;

#[async_trait]
impl<B> TransferStore for SqlStore<B>
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
    async fn list_transactions(&self, agent_id: Uuid, chain: Option<&str>, limit: i64) -> StoreResult<Vec<StoredTx>> {
        let rows: Vec<TxRow> = sqlx::query_as(sqlx::AssertSqlSafe(format!(
            "SELECT {TX_COLUMNS} FROM transactions WHERE agent_id = $1 AND ($2 IS NULL OR chain = $2) \
             ORDER BY created_at DESC, nonce DESC NULLS LAST LIMIT $3"
        )))
        .bind(agent_id)
        .bind(chain)
        .bind(limit)
        .fetch_all(&self.pool)
        .await?;
        shared::convert(rows, TxRow::into_tx)
    }

    async fn spent_by_chain(&self, agent_id: Uuid) -> StoreResult<BTreeMap<String, U256>> {
        let rows: Vec<(String, String)> = sqlx::query_as("SELECT chain, spent_wei FROM spending WHERE agent_id = $1")
            .bind(agent_id)
            .fetch_all(&self.pool)
            .await?;
        rows.into_iter()
            .map(|(chain, wei)| Ok((chain, shared::wei_from_text(&wei, "spending.spent_wei")?)))
            .collect()
    }

    async fn count_transactions_by_status(&self) -> StoreResult<Vec<(String, i64)>> {
        Ok(
            sqlx::query_as("SELECT status, COUNT(*) FROM transactions GROUP BY status ORDER BY status")
                .fetch_all(&self.pool)
                .await?,
        )
    }

    async fn lock_sender(&self, agent_id: Uuid, chain: &str) -> StoreResult<Box<dyn SendGuard>> {
        B::lock(self, &sender_lock(agent_id, chain)).await
    }

    async fn lock_senders(&self, senders: &[(Uuid, &str)]) -> StoreResult<Box<dyn SendGuard>> {
        let mut names: Vec<String> = senders
            .iter()
            .map(|(agent_id, chain)| sender_lock(*agent_id, chain))
            .collect();
        names.sort();
        names.dedup();
        B::lock_all(self, &names).await
    }

    async fn next_nonce(&self, agent_id: Uuid, chain: &str) -> StoreResult<Option<u64>> {
        let mut conn = self.pool.acquire().await?;
        Self::stored_nonce(&mut conn, agent_id, chain).await
    }

    fn round_leaders(&self) -> usize {
        B::round_leaders(&self.pool)
    }

    fn rounds_on_own_thread(&self) -> bool {
        B::ROUNDS_ON_OWN_THREAD
    }

    async fn reserving(&self) -> StoreResult<Box<dyn Reserving + '_>> {
        Ok(Box::new(SqlReserving {
            store: self,
            tx: B::begin_write(self).await?,
            announce: Vec::new(),
            locked: Vec::new(),
            deposit_held: Vec::new(),
        }))
    }

    /// With the transfer's `transfer.pending` webhook event, in one transaction.
    async fn mark_broadcast(&self, id: Uuid) -> StoreResult<()> {
        let mut tx = B::begin_write(self).await?;
        self.mark_pending_in(&mut tx, &[id]).await?;
        tx.commit().await?;
        Ok(())
    }

    async fn discard_transfer(&self, id: Uuid, resync_to: Option<u64>) -> StoreResult<()> {
        self.discard_reserved(id, resync_to).await
    }

    async fn discard_or_fill(
        &self,
        id: Uuid,
        fill: &TransferRequest,
        signed: &Presigned,
    ) -> StoreResult<Option<StoredTx>> {
        self.discard_or_fill_signed(id, fill, signed).await
    }

    async fn fill_nonce(&self, gap: Uuid, r: &TransferRequest, signed: &Presigned) -> StoreResult<NonceFill> {
        self.fill_gap(gap, r, signed).await
    }

    async fn open_transactions(&self, chain: &str) -> StoreResult<Vec<StoredTx>> {
        let rows: Vec<TxRow> = sqlx::query_as(sqlx::AssertSqlSafe(format!(
            "SELECT {TX_COLUMNS} FROM transactions WHERE chain = $1 AND status IN {OPEN} \
             AND kind = 'transfer' ORDER BY agent_id, nonce"
        )))
        .bind(chain)
        .fetch_all(&self.pool)
        .await?;
        shared::convert(rows, TxRow::into_tx)
    }

    async fn open_transactions_of(&self, agent_id: Uuid, chain: &str) -> StoreResult<Vec<StoredTx>> {
        let rows: Vec<TxRow> = sqlx::query_as(sqlx::AssertSqlSafe(format!(
            "SELECT {TX_COLUMNS} FROM transactions WHERE agent_id = $1 AND chain = $2 \
             AND status IN {OPEN} AND kind = 'transfer' ORDER BY nonce"
        )))
        .bind(agent_id)
        .bind(chain)
        .fetch_all(&self.pool)
        .await?;
        shared::convert(rows, TxRow::into_tx)
    }

    async fn settle_transaction(
        &self,
        id: Uuid,
        s: &Settlement,
        event: serde_json::Value,
        message: Option<&Message>,
    ) -> StoreResult<Option<EventRecord>> {
        let mut tx = B::begin_write(self).await?;
        let record = self.settle_in(&mut tx, id, s, &event, message).await?;
        let received = match record {
            Some(_) => self.income_settled_in(&mut tx, id, s).await?,
            None => None,
        };
        tx.commit().await?;
        // Announced only once committed: a follower reading the store after it will find the event there.
        // Other instances hear of it through the notification (PostgreSQL).
        for record in record.iter().chain(&received) {
            self.feed.announce(record);
        }
        Ok(record)
    }

    async fn open_authorizations(&self, chain: &str) -> StoreResult<Vec<StoredTx>> {
        let rows: Vec<TxRow> = sqlx::query_as(sqlx::AssertSqlSafe(format!(
            "SELECT {TX_COLUMNS} FROM transactions WHERE chain = $1 AND status IN {OPEN} \
             AND kind = 'x402' ORDER BY created_at"
        )))
        .bind(chain)
        .fetch_all(&self.pool)
        .await?;
        shared::convert(rows, TxRow::into_tx)
    }

    async fn merge_x402(
        &self,
        id: Uuid,
        response: Option<serde_json::Value>,
        settlement_tx: Option<String>,
    ) -> StoreResult<()> {
        self.merge_x402_locked(id, response, settlement_tx).await
    }

    async fn record_paid(
        &self,
        id: Uuid,
        response: Option<serde_json::Value>,
        settlement_tx: Option<String>,
        accepted: Option<&AuditEvent>,
        outcome: &AuditEvent,
    ) -> StoreResult<()> {
        self.record_paid_x402(id, response, settlement_tx, accepted, outcome)
            .await
    }

    async fn expire_authorization(&self, id: Uuid, audit: &AuditEvent) -> StoreResult<bool> {
        self.expire_x402(id, audit).await
    }

    async fn try_lock_watcher(&self, chain: &str) -> StoreResult<Option<Box<dyn SendGuard>>> {
        B::try_lock(self, &format!("watch:{chain}")).await
    }

    async fn get_transaction(&self, agent_id: Uuid, id: Uuid) -> StoreResult<Option<StoredTx>> {
        let row: Option<TxRow> = sqlx::query_as(sqlx::AssertSqlSafe(format!(
            "SELECT {TX_COLUMNS} FROM transactions WHERE id = $1 AND agent_id = $2"
        )))
        .bind(id)
        .bind(agent_id)
        .fetch_optional(&self.pool)
        .await?;
        row.map(TxRow::into_tx).transpose()
    }

    async fn transaction_page(
        &self,
        agent_id: Uuid,
        before: Option<Uuid>,
        limit: i64,
    ) -> StoreResult<Option<Vec<StoredTx>>> {
        if let Some(cursor) = before
            && self.get_transaction(agent_id, cursor).await?.is_none()
        {
            return Ok(None);
        }
        // (created_at, id) orders the page totally, so a cursor never skips or repeats a transfer of the same instant.
        let rows: Vec<TxRow> = sqlx::query_as(sqlx::AssertSqlSafe(format!(
            "SELECT {TX_COLUMNS} FROM transactions WHERE agent_id = $1 AND ($2 IS NULL \
               OR created_at < (SELECT created_at FROM transactions WHERE id = $2) \
               OR (created_at = (SELECT created_at FROM transactions WHERE id = $2) AND id < $2)) \
             ORDER BY created_at DESC, id DESC LIMIT $3"
        )))
        .bind(agent_id)
        .bind(before)
        .bind(limit)
        .fetch_all(&self.pool)
        .await?;
        shared::convert(rows, TxRow::into_tx).map(Some)
    }
}

/// The name of (agent, chain)'s send lock.
fn sender_lock(agent_id: Uuid, chain: &str) -> String {
    format!("send:{agent_id}:{chain}")
}
