//! The attempts of a transfer at its nonce (§14). The transfer's row holds the latest attempt; a fee bump or a cancel
//! moves it to `replaced_attempts` as it stores the next one, in one transaction under the agent's write lock (the
//! same lock settlement takes, so an attempt is never replaced after its transfer settled). When an earlier attempt
//! lands, settlement swaps it back into the row (`adopt_in`), so `tx_hash` names what is on chain.

use std::collections::BTreeMap;

use alloy::primitives::U256;
use async_trait::async_trait;
use chrono::{DateTime, Utc};
use sqlx::{ColumnIndex, Decode, Encode, Executor, Type};
use uuid::Uuid;

use super::{Backend, SqlStore};
use crate::domain::decision::{self, Growth};
use crate::domain::transaction::{Attempt, AttemptKind};
use crate::store::shared::{self, TX_COLUMNS, TxRow};
use crate::store::{AttemptStore, Replacement, StoreError, StoreResult};

/// An attempt as read: hash, signed bytes, fee cap and kind.
type AttemptRow = (String, Vec<u8>, String, String);

fn attempt_from(row: AttemptRow) -> StoreResult<Attempt> {
    let (tx_hash, raw_tx, max_fee, kind) = row;
    Ok(Attempt {
        tx_hash,
        raw_tx,
        max_fee_per_gas: max_fee
            .parse()
            .map_err(|_| StoreError::Corrupt("max_fee_per_gas".into()))?,
        kind: AttemptKind::parse(&kind).ok_or_else(|| StoreError::Corrupt(format!("attempt_kind {kind}")))?,
    })
}

#[async_trait]
impl<B> AttemptStore for SqlStore<B>
where
    B: Backend,
    for<'c> &'c mut B::Connection: Executor<'c, Database = B>,
    for<'r> Uuid: Encode<'r, B> + Decode<'r, B> + Type<B>,
    for<'r> String: Encode<'r, B> + Decode<'r, B> + Type<B>,
    for<'r> &'r str: Encode<'r, B> + Type<B>,
    for<'r> i64: Encode<'r, B> + Decode<'r, B> + Type<B>,
    for<'r> DateTime<Utc>: Encode<'r, B> + Decode<'r, B> + Type<B>,
    for<'r> Vec<u8>: Encode<'r, B> + Decode<'r, B> + Type<B>,
    for<'r> Option<Uuid>: Decode<'r, B>,
    for<'r> Option<String>: Decode<'r, B>,
    for<'r> Option<i64>: Decode<'r, B>,
    usize: ColumnIndex<B::Row>,
    for<'r> &'r str: ColumnIndex<B::Row>,
{
    async fn replace_attempt(
        &self,
        id: Uuid,
        replaced: &str,
        next: &Attempt,
        needed: U256,
        may_grow: bool,
    ) -> StoreResult<Replacement> {
        let mut tx = B::begin_write(self).await?;
        let owner: Option<(Uuid,)> = sqlx::query_as("SELECT agent_id FROM transactions WHERE id = $1")
            .bind(id)
            .fetch_optional(&mut *tx)
            .await?;
        let Some((agent_id,)) = owner else {
            return Ok(Replacement::Changed);
        };
        B::lock_agent(&mut tx, agent_id).await?;
        let row: (String, String, String) =
            sqlx::query_as("SELECT chain, status, reserved_wei FROM transactions WHERE id = $1 AND tx_hash = $2")
                .bind(id)
                .bind(replaced)
                .fetch_optional(&mut *tx)
                .await?
                .unwrap_or_default();
        let (chain, status, reserved) = row;
        if status != "signed" && status != "pending" {
            return Ok(Replacement::Changed);
        }
        let reserved = shared::wei_from_text(&reserved, "reserved_wei")?;
        let cap = Self::cap_in(&mut tx, agent_id).await?;
        let spent = Self::spent_on_chain(&mut tx, agent_id, &chain).await?;
        match decision::growth(reserved, needed, may_grow, cap, spent) {
            Growth::Covered => {}
            Growth::NotCovered => return Ok(Replacement::NotCovered),
            Growth::CapExceeded => return Ok(Replacement::CapExceeded { cap, spent }),
            Growth::Grow { extra } => {
                Self::adjust_spent(&mut tx, agent_id, &chain, extra, U256::ZERO).await?;
                sqlx::query("UPDATE transactions SET reserved_wei = $1 WHERE id = $2")
                    .bind(needed.to_string())
                    .bind(id)
                    .execute(&mut *tx)
                    .await?;
            }
        }
        self.retire_latest_in(&mut tx, id).await?;
        self.set_latest_in(&mut tx, id, next, "signed").await?;
        let stored: TxRow = sqlx::query_as(sqlx::AssertSqlSafe(format!(
            "SELECT {TX_COLUMNS} FROM transactions WHERE id = $1"
        )))
        .bind(id)
        .fetch_one(&mut *tx)
        .await?;
        tx.commit().await?;
        Ok(Replacement::Stored(Box::new(stored.into_tx()?)))
    }

    async fn withdraw_attempt(&self, id: Uuid, hash: &str) -> StoreResult<bool> {
        let mut tx = B::begin_write(self).await?;
        let owner: Option<(Uuid,)> = sqlx::query_as("SELECT agent_id FROM transactions WHERE id = $1 AND tx_hash = $2")
            .bind(id)
            .bind(hash)
            .fetch_optional(&mut *tx)
            .await?;
        let Some((agent_id,)) = owner else {
            return Ok(false);
        };
        B::lock_agent(&mut tx, agent_id).await?;
        let previous: Option<(i64, String, Vec<u8>, String, String)> = sqlx::query_as(
            "SELECT seq, tx_hash, raw_tx, max_fee_per_gas, attempt_kind FROM replaced_attempts \
             WHERE transfer_id = $1 ORDER BY seq DESC LIMIT 1",
        )
        .bind(id)
        .fetch_optional(&mut *tx)
        .await?;
        let Some((seq, tx_hash, raw_tx, max_fee, kind)) = previous else {
            return Ok(false);
        };
        sqlx::query("DELETE FROM replaced_attempts WHERE transfer_id = $1 AND seq = $2")
            .bind(id)
            .bind(seq)
            .execute(&mut *tx)
            .await?;
        let restored = attempt_from((tx_hash, raw_tx, max_fee, kind))?;
        self.set_latest_in(&mut tx, id, &restored, "pending").await?;
        tx.commit().await?;
        Ok(true)
    }

    async fn attempts(&self, id: Uuid) -> StoreResult<Vec<Attempt>> {
        let mut rows: Vec<AttemptRow> =
            sqlx::query_as("SELECT tx_hash, raw_tx, max_fee_per_gas, attempt_kind FROM transactions WHERE id = $1")
                .bind(id)
                .fetch_all(&self.pool)
                .await?;
        let earlier: Vec<AttemptRow> = sqlx::query_as(
            "SELECT tx_hash, raw_tx, max_fee_per_gas, attempt_kind FROM replaced_attempts WHERE transfer_id = $1 \
             ORDER BY seq DESC",
        )
        .bind(id)
        .fetch_all(&self.pool)
        .await?;
        rows.extend(earlier);
        shared::convert(rows, attempt_from)
    }

    async fn replaced_hashes(&self, agent_id: Uuid) -> StoreResult<BTreeMap<Uuid, Vec<String>>> {
        let rows: Vec<(Uuid, String)> = sqlx::query_as(
            "SELECT r.transfer_id, r.tx_hash FROM replaced_attempts r JOIN transactions t ON t.id = r.transfer_id \
             WHERE t.agent_id = $1 ORDER BY r.transfer_id, r.seq",
        )
        .bind(agent_id)
        .fetch_all(&self.pool)
        .await?;
        let mut by_transfer: BTreeMap<Uuid, Vec<String>> = BTreeMap::new();
        for (id, hash) in rows {
            by_transfer.entry(id).or_default().push(hash);
        }
        Ok(by_transfer)
    }
}

/// Moving attempts between the transfer's row and `replaced_attempts`, inside the caller's transaction.
impl<B> SqlStore<B>
where
    B: Backend,
    for<'c> &'c mut B::Connection: Executor<'c, Database = B>,
    for<'r> Uuid: Encode<'r, B> + Type<B>,
    for<'r> String: Encode<'r, B> + Decode<'r, B> + Type<B>,
    for<'r> &'r str: Encode<'r, B> + Type<B>,
    for<'r> i64: Encode<'r, B> + Decode<'r, B> + Type<B>,
    for<'r> DateTime<Utc>: Encode<'r, B> + Type<B>,
    for<'r> Vec<u8>: Encode<'r, B> + Decode<'r, B> + Type<B>,
    usize: ColumnIndex<B::Row>,
{
    /// Copies the transfer's latest attempt to `replaced_attempts`, as the newest of the earlier ones.
    async fn retire_latest_in(&self, conn: &mut B::Connection, id: Uuid) -> StoreResult<()> {
        let (seq,): (i64,) =
            sqlx::query_as("SELECT COALESCE(MAX(seq), 0) + 1 FROM replaced_attempts WHERE transfer_id = $1")
                .bind(id)
                .fetch_one(&mut *conn)
                .await?;
        sqlx::query(
            "INSERT INTO replaced_attempts (transfer_id, seq, tx_hash, raw_tx, max_fee_per_gas, attempt_kind, created_at) \
             SELECT id, $2, tx_hash, raw_tx, max_fee_per_gas, attempt_kind, $3 FROM transactions WHERE id = $1",
        )
        .bind(id)
        .bind(seq)
        .bind(self.now())
        .execute(&mut *conn)
        .await?;
        Ok(())
    }

    /// Makes `attempt` the transfer's latest, with `status`.
    async fn set_latest_in(
        &self,
        conn: &mut B::Connection,
        id: Uuid,
        attempt: &Attempt,
        status: &str,
    ) -> StoreResult<()> {
        sqlx::query(
            "UPDATE transactions SET tx_hash = $1, raw_tx = $2, max_fee_per_gas = $3, attempt_kind = $4, status = $5, \
             updated_at = $6 WHERE id = $7",
        )
        .bind(&attempt.tx_hash)
        .bind(&attempt.raw_tx)
        .bind(attempt.max_fee_per_gas.to_string())
        .bind(attempt.kind.as_str())
        .bind(status)
        .bind(self.now())
        .bind(id)
        .execute(&mut *conn)
        .await?;
        Ok(())
    }

    /// An earlier attempt `hash` landed: it becomes the latest again, and the latest joins the earlier ones.
    pub(super) async fn adopt_in(&self, conn: &mut B::Connection, id: Uuid, hash: &str) -> StoreResult<()> {
        let landed: Option<(i64, String, Vec<u8>, String, String)> = sqlx::query_as(
            "SELECT seq, tx_hash, raw_tx, max_fee_per_gas, attempt_kind FROM replaced_attempts \
             WHERE transfer_id = $1 AND tx_hash = $2",
        )
        .bind(id)
        .bind(hash)
        .fetch_optional(&mut *conn)
        .await?;
        let Some((seq, tx_hash, raw_tx, max_fee, kind)) = landed else {
            return Ok(());
        };
        sqlx::query("DELETE FROM replaced_attempts WHERE transfer_id = $1 AND seq = $2")
            .bind(id)
            .bind(seq)
            .execute(&mut *conn)
            .await?;
        self.retire_latest_in(&mut *conn, id).await?;
        let attempt = attempt_from((tx_hash, raw_tx, max_fee, kind))?;
        // The status is the settlement's, written by the caller right after.
        sqlx::query(
            "UPDATE transactions SET tx_hash = $1, raw_tx = $2, max_fee_per_gas = $3, attempt_kind = $4 WHERE id = $5",
        )
        .bind(&attempt.tx_hash)
        .bind(&attempt.raw_tx)
        .bind(attempt.max_fee_per_gas.to_string())
        .bind(attempt.kind.as_str())
        .bind(id)
        .execute(&mut *conn)
        .await?;
        Ok(())
    }
}
