//! Nonce repair: a signed transfer the node never took is discarded (its nonce given back when nothing came after it,
//! or filled by a send of the wallet to itself when something did), and a gap a failed transfer left is filled
//! (`TransferStore::discard_transfer`, `discard_or_fill`, `fill_nonce`).

use alloy::primitives::U256;
use chrono::{DateTime, Utc};
use sqlx::{ColumnIndex, Decode, Encode, Executor, Type};
use uuid::Uuid;

use super::super::{Backend, SqlStore};
use crate::domain::decision;
use crate::domain::transaction::{StoredTx, wallet_nonces};
use crate::store::shared;
use crate::store::{NonceFill, Presigned, StoreError, StoreResult, TransferRequest};

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
    pub(super) async fn discard_reserved(&self, id: Uuid, resync_to: Option<u64>) -> StoreResult<()> {
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

    pub(super) async fn discard_or_fill_signed(
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

    pub(super) async fn fill_gap(&self, gap: Uuid, r: &TransferRequest, signed: &Presigned) -> StoreResult<NonceFill> {
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
