//! Transfers — the reserving transaction (the facts of a request read under its agent's lock, the decision the
//! service took on them applied: nonce, insert, spending, counts); broadcast marks,
//! discards, settlement with its event and message; send and watcher locks.

use std::collections::BTreeMap;

use alloy::primitives::U256;
use async_trait::async_trait;
use chrono::{DateTime, Utc};
use sqlx::{ColumnIndex, Decode, Encode, Executor, Type};
use uuid::Uuid;

use super::{Backend, SqlStore, WriteTx};
use crate::domain::decision::{self, Counted, Facts, Funds, SponsorFacts, Standing, Windows};
use crate::domain::outflow::CallCount;
use crate::domain::policy::{ApprovalStatus, Holds, Policy};
use crate::domain::transaction::{StoredTx, X402Record, wallet_nonces};
use crate::store::shared::{self, OPEN, TX_COLUMNS, TxRow};
use crate::store::{Approval, AuditEvent, Clearance, Mandate, OutflowEntry, idempotency};
use crate::store::{
    Closing, EventRecord, Gathered, Message, NonceFill, Presigned, Reserve, Reserving, SendGuard, Settlement, SignedTx,
    StoreError, StoreResult, TransferRequest, TransferStore,
};

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
        let mut tx = B::begin_write(self).await?;
        let row: Option<(Uuid, String, i64, String, Vec<u8>)> =
            sqlx::query_as("SELECT agent_id, chain, nonce, reserved_wei, raw_tx FROM transactions WHERE id = $1")
                .bind(id)
                .fetch_optional(&mut *tx)
                .await?;
        let Some((agent_id, chain, nonce, reserved, raw)) = row else {
            return Ok(());
        };
        B::lock_agent(&mut tx, agent_id).await?;
        sqlx::query("DELETE FROM transactions WHERE id = $1")
            .bind(id)
            .execute(&mut *tx)
            .await?;
        let reserved = shared::wei_from_text(&reserved, "reserved_wei")?;
        Self::adjust_spent(&mut tx, agent_id, &chain, U256::ZERO, reserved).await?;
        // Give the nonce back (both, for a transaction that designates the account) only if nothing was allocated
        // after it.
        sqlx::query("UPDATE nonces SET next_nonce = $1 WHERE agent_id = $2 AND chain = $3 AND next_nonce = $4")
            .bind(nonce)
            .bind(agent_id)
            .bind(&chain)
            .bind(nonce + wallet_nonces(&raw) as i64)
            .execute(&mut *tx)
            .await?;
        if let Some(next) = resync_to {
            sqlx::query("UPDATE nonces SET next_nonce = $1 WHERE agent_id = $2 AND chain = $3 AND next_nonce < $1")
                .bind(next as i64)
                .bind(agent_id)
                .bind(&chain)
                .execute(&mut *tx)
                .await?;
        }
        tx.commit().await?;
        Ok(())
    }

    async fn discard_or_fill(
        &self,
        id: Uuid,
        fill: &TransferRequest,
        signed: &Presigned,
    ) -> StoreResult<Option<StoredTx>> {
        let mut tx = B::begin_write(self).await?;
        // The agent's row lock first (PostgreSQL): a reserving transaction takes it before it hands out a nonce.
        B::lock_agent(&mut tx, fill.agent_id).await?;
        let row: Option<(i64, String, Vec<u8>)> = sqlx::query_as(
            "SELECT nonce, reserved_wei, raw_tx FROM transactions WHERE id = $1 AND agent_id = $2 AND chain = $3 \
             AND status = 'signed'",
        )
        .bind(id)
        .bind(fill.agent_id)
        .bind(&fill.chain)
        .fetch_optional(&mut *tx)
        .await?;
        let Some((nonce, reserved, raw)) = row else {
            return Ok(None);
        };
        sqlx::query("DELETE FROM transactions WHERE id = $1")
            .bind(id)
            .execute(&mut *tx)
            .await?;
        let reserved = shared::wei_from_text(&reserved, "reserved_wei")?;
        Self::adjust_spent(&mut tx, fill.agent_id, &fill.chain, U256::ZERO, reserved).await?;
        let given_back =
            sqlx::query("UPDATE nonces SET next_nonce = $1 WHERE agent_id = $2 AND chain = $3 AND next_nonce = $4")
                .bind(nonce)
                .bind(fill.agent_id)
                .bind(&fill.chain)
                .bind(nonce + wallet_nonces(&raw) as i64)
                .execute(&mut *tx)
                .await?;
        if B::rows_affected(&given_back) == 1 {
            tx.commit().await?;
            return Ok(None);
        }
        // Later nonces are out: this one is used by a send of the wallet to itself. Its fee fits in what the
        // refused transfer held (the same fee cap, 21,000 gas), so it needs no cap check.
        let nonce = shared::u64_from(nonce, "nonce")?;
        let record = shared::new_transfer(fill, nonce, presigned_at(signed, nonce)?, self.now());
        Self::insert_transfer(&mut tx, &record, None, None).await?;
        Self::adjust_spent(&mut tx, fill.agent_id, &fill.chain, fill.reserved_wei, U256::ZERO).await?;
        tx.commit().await?;
        Ok(Some(record))
    }

    async fn fill_nonce(&self, gap: Uuid, r: &TransferRequest, signed: &Presigned) -> StoreResult<NonceFill> {
        let mut tx = B::begin_write(self).await?;
        B::lock_agent(&mut tx, r.agent_id).await?;
        let row: Option<(i64, String, String)> = sqlx::query_as(
            "SELECT nonce, reserved_wei, status FROM transactions WHERE id = $1 AND agent_id = $2 AND chain = $3",
        )
        .bind(gap)
        .bind(r.agent_id)
        .bind(&r.chain)
        .fetch_optional(&mut *tx)
        .await?;
        let Some((nonce, held, _)) = row.filter(|(_, _, status)| status == "signed" || status == "pending") else {
            return Ok(NonceFill::NotNeeded);
        };
        let (others,): (i64,) = sqlx::query_as(concat!(
            "SELECT COUNT(*) FROM transactions WHERE agent_id = $1 AND chain = $2 AND nonce = $3 AND id <> $4 \
             AND status IN ",
            shared::open_statuses!()
        ))
        .bind(r.agent_id)
        .bind(&r.chain)
        .bind(nonce)
        .bind(gap)
        .fetch_one(&mut *tx)
        .await?;
        if others > 0 {
            return Ok(NonceFill::NotNeeded);
        }
        let held = shared::wei_from_text(&held, "reserved_wei")?;
        let cap = Self::cap_in(&mut tx, r.agent_id).await?;
        let spent = Self::spent_on_chain(&mut tx, r.agent_id, &r.chain).await?;
        let Some(cost) = decision::fill_cost(held, r.reserved_wei, cap, spent) else {
            return Ok(NonceFill::CapExceeded);
        };
        let nonce = shared::u64_from(nonce, "nonce")?;
        let record = shared::new_transfer(r, nonce, presigned_at(signed, nonce)?, self.now());
        Self::insert_transfer(&mut tx, &record, Some(gap), None).await?;
        sqlx::query("UPDATE transactions SET reserved_wei = $1 WHERE id = $2")
            .bind(cost.left.to_string())
            .bind(gap)
            .execute(&mut *tx)
            .await?;
        Self::adjust_spent(&mut tx, r.agent_id, &r.chain, cost.extra, U256::ZERO).await?;
        tx.commit().await?;
        Ok(NonceFill::Stored(Box::new(record)))
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
        let mut tx = B::begin_write(self).await?;
        self.lock_transfer_agent(&mut tx, id).await?;
        self.merge_x402_in(&mut tx, id, response, settlement_tx).await?;
        tx.commit().await?;
        Ok(())
    }

    async fn record_paid(
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

    async fn expire_authorization(&self, id: Uuid, audit: &AuditEvent) -> StoreResult<bool> {
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

/// A reserving transaction on SQLite or PostgreSQL (`TransferStore::reserving`); the events of what it applied
/// are announced once it commits.
/// The name of (agent, chain)'s send lock.
fn sender_lock(agent_id: Uuid, chain: &str) -> String {
    format!("send:{agent_id}:{chain}")
}

struct SqlReserving<'s, B: Backend> {
    store: &'s SqlStore<B>,
    tx: WriteTx<B>,
    announce: Vec<EventRecord>,
    /// The agents whose lock `tx` holds already (held until it ends): a round's next request of one asks no more.
    locked: Vec<Uuid>,
}

#[async_trait]
impl<B> Reserving for SqlReserving<'_, B>
where
    B: Backend,
    for<'c> &'c mut B::Connection: Executor<'c, Database = B>,
    // As `TransferStore` above: amounts and addresses are text, nonces integers, raw transactions bytes.
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
    async fn facts(&mut self, r: &TransferRequest) -> StoreResult<Gathered> {
        let tx = &mut self.tx;
        // The cap, the spending, the balances' holds and the nonce stay still until this commits.
        if !self.locked.contains(&r.agent_id) {
            B::lock_agent(tx, r.agent_id).await?;
            self.locked.push(r.agent_id);
        }
        let now = self.store.now();
        let AgentFacts {
            standing,
            cap,
            spent,
            stored_nonce,
            policy,
            held_by_transfers,
        } = SqlStore::<B>::agent_facts_in(tx, (r.agent_id, &r.chain), &r.mandate, r.reads.mined_nonce).await?;
        let tokens = match (r.reads.token_balance, r.token) {
            (Some(balance), Some(token)) => Some(Funds {
                balance,
                held: SqlStore::<B>::held_of_token(tx, (r.agent_id, &r.chain), token.address, r.reads.mined_nonce)
                    .await?,
            }),
            _ => None,
        };
        let native = r.reads.native.map(|funds| Funds {
            balance: funds.balance,
            held: held_by_transfers,
        });
        let delegation = match r.check.delegated() {
            Some(d) => Some(Funds {
                balance: d.available,
                held: SqlStore::<B>::held_by_redemptions(tx, d.delegation_id, r.reads.mined_nonce).await?,
            }),
            None => None,
        };
        let sponsorship = match r.reads.sponsor {
            Some(sponsor) => {
                let (per_day, counted) = SqlStore::<B>::sponsorship_in(tx, r.agent_id, &r.chain, now).await?;
                Some(SponsorFacts {
                    per_day: per_day.unwrap_or_default(),
                    counted,
                    deposit: Funds {
                        balance: sponsor.deposit,
                        held: SqlStore::<B>::held_of_deposit_in(tx, &r.chain).await?,
                    },
                })
            }
            None => None,
        };
        let gate = SqlStore::<B>::gate_in(tx, r, policy, now).await?;
        let counted = match r.check.call() {
            Some(_) => SqlStore::<B>::ledger_in(tx, r.agent_id, &r.chain).await?,
            None => Vec::new(),
        };
        // A sponsored outflow takes its place in the account's EntryPoint sequence, not the wallet's (§22).
        let stored_nonce = match r.reads.sponsor {
            Some(_) => SqlStore::<B>::stored_op_nonce_in(tx, r.agent_id, &r.chain).await?,
            None => stored_nonce.filter(|_| r.uses_nonce()),
        };
        Ok(Gathered {
            facts: Facts {
                standing,
                cap,
                spent,
                tokens,
                native,
                gate,
                stored_nonce,
                call_windows: Vec::new(),
                delegation,
                sponsorship,
            },
            counted,
        })
    }

    async fn call_windows(
        &mut self,
        r: &TransferRequest,
        counts: &[Counted],
        policy: &Policy,
    ) -> StoreResult<Vec<(Windows, bool)>> {
        SqlStore::<B>::call_windows_in(&mut self.tx, (r.agent_id, &r.chain), counts, policy, self.store.now()).await
    }

    async fn hold(
        &mut self,
        r: &TransferRequest,
        (ttl_secs, holds): (u64, Holds),
        count: &CallCount,
    ) -> StoreResult<Approval> {
        let tx = &mut self.tx;
        let (approval, event) = self.store.hold_in(tx, r, ttl_secs, (holds, &count.counts)).await?;
        // A held call counts in the windows while it waits; the allowance ledger changes only once it is reserved
        // for signing (§18): a rejected or expired one leaves nothing behind.
        SqlStore::<B>::count_call_in(tx, r, &count.counts, &[], self.store.now()).await?;
        self.store.mark_acted_in(tx, r).await?;
        self.announce.push(event);
        Ok(approval)
    }

    async fn reserve(
        &mut self,
        r: &TransferRequest,
        reserve: Reserve,
        signed: SignedTx,
        count: &CallCount,
    ) -> StoreResult<StoredTx> {
        let tx = &mut self.tx;
        let approved = match r.clearance {
            Clearance::Approval { by } => match self.store.close_in(tx, r.id, ApprovalStatus::Approved, false).await? {
                Closing::Closed(approval, event) => Some((by, approval, event)),
                _ => return Err(StoreError::Corrupt("an approval changed under the agent's lock".into())),
            },
            _ => None,
        };
        // An x402 authorization or a typed-data signature uses no nonce of the agent's.
        let record = shared::new_transfer(r, reserve.nonce.unwrap_or(0), signed, self.store.now());
        let owed = match &r.owed {
            Some(owed) => {
                Some(serde_json::to_string(owed).map_err(|e| StoreError::Corrupt(format!("owed entry: {e}")))?)
            }
            None => None,
        };
        SqlStore::<B>::insert_transfer(tx, &record, None, owed).await?;
        if let Some(sponsor) = r.reads.sponsor {
            let hash = record.tx_hash().unwrap_or_default();
            let part = (sponsor.max_cost, sponsor.valid_until);
            SqlStore::<B>::insert_operation_in(tx, (r.id, r.agent_id, &r.chain), hash, part, self.store.now()).await?;
        }
        self.store.mark_acted_in(tx, r).await?;
        if approved.is_some() {
            // What it counted while it waited gives way to what it counts as signed.
            SqlStore::<B>::uncount_call_in(tx, r.id).await?;
        }
        SqlStore::<B>::count_call_in(tx, r, &count.counts, &count.ledger, self.store.now()).await?;
        if let Some((by, approval, event)) = approved {
            if let Some(audit) = approval.decided_audit(by, record.chain_hash(), None) {
                self.store.append_audit(tx, &audit).await?;
            }
            self.announce.push(event);
        }
        if let (Some(nonce), None) = (reserve.nonce, r.reads.sponsor) {
            sqlx::query(
                "INSERT INTO nonces (agent_id, chain, next_nonce) VALUES ($1, $2, $3) \
                 ON CONFLICT (agent_id, chain) DO UPDATE SET next_nonce = $3",
            )
            .bind(r.agent_id)
            .bind(&r.chain)
            // A wallet-paid batch that designates the account uses its authorization's nonce too (§22).
            .bind(nonce as i64 + wallet_nonces(&record.raw_tx) as i64)
            .execute(&mut **tx)
            .await?;
        }
        let spent = decision::spent_after(reserve.spent, r.reserved_wei, reserve.release);
        SqlStore::<B>::set_spent(tx, r.agent_id, &r.chain, spent).await?;
        Ok(record)
    }

    async fn record_outflows(&mut self, records: &[&OutflowEntry]) -> StoreResult<()> {
        self.store.record_outflows_in(&mut self.tx, records).await
    }

    async fn commit(self: Box<Self>) -> StoreResult<()> {
        let SqlReserving {
            store, tx, announce, ..
        } = *self;
        tx.commit().await?;
        for event in &announce {
            store.feed.announce(event);
        }
        Ok(())
    }
}

impl<B> SqlStore<B>
where
    B: Backend,
    for<'c> &'c mut B::Connection: Executor<'c, Database = B>,
    for<'r> Uuid: Encode<'r, B> + Type<B>,
    for<'r> String: Encode<'r, B> + Type<B>,
    for<'r> &'r str: Encode<'r, B> + Type<B>,
    for<'r> i64: Encode<'r, B> + Type<B>,
    for<'r> DateTime<Utc>: Encode<'r, B> + Type<B>,
    for<'r> Vec<u8>: Encode<'r, B> + Type<B>,
    for<'r> Option<Uuid>: Encode<'r, B>,
    for<'r> Option<String>: Encode<'r, B>,
    for<'r> Option<i64>: Encode<'r, B>,
    for<'r> Option<&'r str>: Encode<'r, B>,
{
    /// Inserts a signed transfer; `fills` names the transfer whose nonce it fills (see `fill_nonce`), `owed` is its
    /// kept entry (`TransferRequest::owed`, as JSON).
    async fn insert_transfer(
        conn: &mut B::Connection,
        record: &StoredTx,
        fills: Option<Uuid>,
        owed: Option<String>,
    ) -> StoreResult<()> {
        let (token_address, asset_decimals) = shared::token_columns(record.token);
        let body = shared::BodyColumns::of(&record.body);
        // An authorization or a signature has no nonce and no transaction hash of the agent's (NULL).
        let (nonce, tx_hash) = match record.on_chain() {
            None => (None, None),
            Some(t) => (Some(t.at.nonce as i64), Some(t.at.tx_hash.as_str())),
        };
        sqlx::query(sqlx::AssertSqlSafe(format!(
            "INSERT INTO transactions ({TX_COLUMNS}, fills, audit_owed) VALUES \
             ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, $17, $18, $19, $20, $21, $22, \
              $23, $24, $25, $26, $27, $28, $29)"
        )))
        .bind(record.id)
        .bind(record.agent_id)
        .bind(&record.chain)
        .bind(record.conversation_id)
        .bind(nonce)
        .bind(record.from.to_checksum(None))
        .bind(record.to.to_checksum(None))
        .bind(record.value_wei.to_string())
        .bind(body.gas_limit)
        .bind(body.max_fee_per_gas)
        .bind(record.reserved_wei.to_string())
        .bind(Option::<String>::None)
        .bind(&record.raw_tx)
        .bind(tx_hash)
        .bind(record.status.as_str())
        .bind(Option::<i64>::None)
        .bind(Option::<i64>::None)
        .bind(record.created_at)
        .bind(record.updated_at)
        .bind(&record.asset)
        .bind(token_address)
        .bind(asset_decimals)
        .bind(body.kind)
        .bind(body.x402)
        .bind(body.call_record)
        .bind(body.delegation)
        .bind(record.body.via().map(|v| v.delegation_id))
        .bind(fills)
        .bind(owed)
        .execute(&mut *conn)
        .await?;
        Ok(())
    }
}

/// Nonce and spending rows, inside the caller's transaction.
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

    async fn stored_nonce(conn: &mut B::Connection, agent_id: Uuid, chain: &str) -> StoreResult<Option<u64>> {
        let row: Option<(i64,)> = sqlx::query_as("SELECT next_nonce FROM nonces WHERE agent_id = $1 AND chain = $2")
            .bind(agent_id)
            .bind(chain)
            .fetch_optional(&mut *conn)
            .await?;
        row.map(|(n,)| shared::u64_from(n, "next_nonce")).transpose()
    }

    /// What the agent's outflows of `token` on `chain` that a balance read may not show yet can still move: token
    /// transfers signed or on their way, and unused (signed or pending) x402 authorizations (§15, §16).
    async fn held_of_token(
        conn: &mut B::Connection,
        (agent_id, chain): (Uuid, &str),
        token: alloy::primitives::Address,
        mined_nonce: Option<u64>,
    ) -> StoreResult<U256> {
        // A transfer below the node's mined nonce has landed (the balance read shows it) even before the watcher
        // settles it: only the others are held. Authorizations (no nonce) are held until settled.
        // A redemption moves the delegator's tokens, not the wallet's (§21).
        let rows: Vec<(String,)> = sqlx::query_as(concat!(
            "SELECT value_wei FROM transactions WHERE agent_id = $1 AND chain = $2 \
             AND token_address = $3 AND delegation_id IS NULL AND status IN ",
            shared::open_statuses!(),
            " AND (nonce IS NULL OR kind = 'user_op' OR nonce >= $4)"
        ))
        .bind(agent_id)
        .bind(chain)
        .bind(token.to_checksum(None))
        .bind(mined_nonce.map_or(0, |n| n as i64))
        .fetch_all(&mut *conn)
        .await?;
        let transfers = shared::sum_wei(&rows, "value_wei")?;
        // A call's simulated outflows of the token are held as a token transfer's are while it is on its way (§18).
        let calls: Vec<(Option<String>,)> = sqlx::query_as(concat!(
            "SELECT call_record FROM transactions WHERE agent_id = $1 AND chain = $2 AND kind = 'transfer' \
             AND call_record IS NOT NULL AND status IN ",
            shared::open_statuses!(),
            " AND nonce >= $3"
        ))
        .bind(agent_id)
        .bind(chain)
        .bind(mined_nonce.map_or(0, |n| n as i64))
        .fetch_all(&mut *conn)
        .await?;
        let mut held = transfers;
        for (record,) in calls {
            let Some(record) = shared::call_from_column(record, "transactions.call_record")? else {
                continue;
            };
            for figure in record.figures.iter().filter(|f| f.token == token) {
                held = held.saturating_add(figure.out);
            }
        }
        Ok(held)
    }

    /// What this service's redemptions of a delegation that the chain may not count yet hold of it (§21): those
    /// whose nonce the agent's wallet had not used when `available` was read (`mined_nonce`, read before it), in
    /// any status that may spend (signed, pending, or confirmed since: a redemption mined after the read is not in
    /// its figure); one the read's block includes is in the chain's figure already, whatever its recorded status.
    async fn held_by_redemptions(
        conn: &mut B::Connection,
        delegation_id: Uuid,
        mined_nonce: Option<u64>,
    ) -> StoreResult<U256> {
        let rows: Vec<(String,)> = sqlx::query_as(concat!(
            "SELECT value_wei FROM transactions WHERE delegation_id = $1 AND status IN ",
            shared::outgoing_statuses!(),
            " AND nonce >= $2"
        ))
        .bind(delegation_id)
        .bind(mined_nonce.map_or(0, |n| n as i64))
        .fetch_all(&mut *conn)
        .await?;
        shared::sum_wei(&rows, "value_wei")
    }

    /// What a reservation reads of the agent under its lock, in one statement after the lock's own (each statement
    /// of a PostgreSQL transaction sees what committed before it began, so one taken after the lock sees every
    /// write of the lock's last holder): whether the agent is active and the caller's token (when it came with one)
    /// still live, so that a deletion or a reissue committed after the request was authenticated is seen here (§15);
    /// the cap, what counts against it on the chain, the chain's next stored nonce and the policy. The request's idempotency
    /// claim, when it runs under one, is read beside it.
    async fn agent_facts_in(
        conn: &mut B::Connection,
        (agent_id, chain): (Uuid, &str),
        mandate: &Mandate,
        mined_nonce: Option<u64>,
    ) -> StoreResult<AgentFacts> {
        let token_hash = mandate.token_hash.as_deref();
        let claim_held = match &mandate.claim {
            None => true,
            Some(claim) => {
                let (held,): (i64,) = sqlx::query_as(idempotency::sql::HELD)
                    .bind(agent_id)
                    .bind(&claim.key)
                    .bind(claim.claim_id)
                    .fetch_one(&mut *conn)
                    .await?;
                held > 0
            }
        };
        // The reservations of the agent's signed or pending transfers on the chain (value and up to twice the first
        // maximum fee, room for the bumps) that the balance read may not show yet: those at or above the wallet's
        // mined nonce read before it (`mined_nonce`; all of them without one). The index on agent, chain, kind and
        // status finds them. x402 payments move tokens only.
        let sql = format!(
            "SELECT (SELECT COUNT(*) FROM agents WHERE id = $1 AND is_active), \
             (SELECT COUNT(*) FROM access_tokens WHERE token_hash = $2 AND agent_id = $1 AND revoked_at IS NULL), \
             (SELECT spending_cap_wei FROM agents WHERE id = $1), \
             (SELECT spent_wei FROM spending WHERE agent_id = $1 AND chain = $3), \
             (SELECT next_nonce FROM nonces WHERE agent_id = $1 AND chain = $3), \
             (SELECT policy FROM policies WHERE agent_id = $1), \
             (SELECT {}(reserved_wei, ',') FROM transactions WHERE agent_id = $1 AND chain = $3 \
              AND kind IN ('transfer', 'user_op') AND status IN {OPEN} \
              AND (nonce IS NULL OR kind = 'user_op' OR nonce >= $4))",
            B::TEXT_AGG
        );
        type Row = (
            i64,
            i64,
            Option<String>,
            Option<String>,
            Option<i64>,
            Option<String>,
            Option<String>,
        );
        let row: Row = sqlx::query_as(sqlx::AssertSqlSafe(sql))
            .bind(agent_id)
            .bind(token_hash.unwrap_or_default())
            .bind(chain)
            .bind(mined_nonce.map_or(0, |n| i64::try_from(n).unwrap_or(i64::MAX)))
            .fetch_one(&mut *conn)
            .await?;
        let (active, live, cap, spent, nonce, policy, reserved) = row;
        let held = shared::sum_wei_texts(reserved.iter().flat_map(|joined| joined.split(',')), "reserved_wei")?;
        let cap = cap.ok_or_else(|| StoreError::Corrupt("a reservation for an agent without a row".into()))?;
        Ok(AgentFacts {
            standing: Standing {
                agent_active: active > 0,
                token_current: token_hash.is_none() || live > 0,
                claim_held,
            },
            cap: shared::wei_from_text(&cap, "spending_cap_wei")?,
            spent: spent.map_or(Ok(U256::ZERO), |w| shared::wei_from_text(&w, "spending.spent_wei"))?,
            stored_nonce: nonce.map(|n| shared::u64_from(n, "next_nonce")).transpose()?,
            policy,
            held_by_transfers: held,
        })
    }

    /// Records that the request's idempotency claim moved (or held) money with `r`: it is never taken over after
    /// this, and a repeat after its request stopped unanswered answers `r` (its first such reservation).
    async fn mark_acted_in(&self, conn: &mut B::Connection, r: &TransferRequest) -> StoreResult<()> {
        if let Some(claim) = &r.mandate.claim {
            sqlx::query(idempotency::sql::ACTED)
                .bind(self.now())
                .bind(r.agent_id)
                .bind(&claim.key)
                .bind(claim.claim_id)
                .bind(r.id)
                .execute(&mut *conn)
                .await?;
        }
        Ok(())
    }

    /// The agent's spending cap (native units, per chain).
    pub(super) async fn cap_in(conn: &mut B::Connection, agent_id: Uuid) -> StoreResult<U256> {
        let (cap,): (String,) = sqlx::query_as("SELECT spending_cap_wei FROM agents WHERE id = $1")
            .bind(agent_id)
            .fetch_one(&mut *conn)
            .await?;
        shared::wei_from_text(&cap, "spending_cap_wei")
    }

    pub(super) async fn spent_on_chain(conn: &mut B::Connection, agent_id: Uuid, chain: &str) -> StoreResult<U256> {
        let row: Option<(String,)> =
            sqlx::query_as("SELECT spent_wei FROM spending WHERE agent_id = $1 AND chain = $2")
                .bind(agent_id)
                .bind(chain)
                .fetch_optional(&mut *conn)
                .await?;
        row.map_or(Ok(U256::ZERO), |(w,)| shared::wei_from_text(&w, "spending.spent_wei"))
    }

    /// Moves what counts against the cap on (agent, chain): `+ add - sub`. Callers hold the agent's write lock.
    pub(super) async fn adjust_spent(
        conn: &mut B::Connection,
        agent_id: Uuid,
        chain: &str,
        add: U256,
        sub: U256,
    ) -> StoreResult<()> {
        let current = Self::spent_on_chain(&mut *conn, agent_id, chain).await?;
        Self::set_spent(conn, agent_id, chain, decision::spent_after(current, add, sub)).await
    }

    /// Sets what counts against the cap on (agent, chain). Callers hold the agent's write lock.
    async fn set_spent(conn: &mut B::Connection, agent_id: Uuid, chain: &str, next: U256) -> StoreResult<()> {
        sqlx::query(
            "INSERT INTO spending (agent_id, chain, spent_wei) VALUES ($1, $2, $3) \
             ON CONFLICT (agent_id, chain) DO UPDATE SET spent_wei = $3",
        )
        .bind(agent_id)
        .bind(chain)
        .bind(next.to_string())
        .execute(&mut *conn)
        .await?;
        Ok(())
    }
}

/// What `SqlStore::agent_facts_in` read of an agent under its lock.
struct AgentFacts {
    standing: Standing,
    cap: U256,
    spent: U256,
    stored_nonce: Option<u64>,
    /// The stored policy, as text (`policies::policy_from` reads it when the request is judged by it).
    policy: Option<String>,
    /// What the agent's signed or pending transfers on the chain hold of its native balance.
    held_by_transfers: U256,
}

/// The signature made beforehand for `nonce`, the one the stored row holds (under the agent's send lock and row lock
/// it cannot have moved; if it did, nothing is stored).
fn presigned_at(presigned: &Presigned, nonce: u64) -> StoreResult<crate::store::SignedTx> {
    match presigned.nonce == Some(nonce) {
        true => Ok(presigned.signed.clone()),
        false => Err(StoreError::Corrupt(format!(
            "a fill was signed at nonce {:?}, the transfer holds nonce {nonce}",
            presigned.nonce
        ))),
    }
}
