//! The agent's income list (§23) in SQL: `x402_income` newest first by `(created_at, id)`, so a cursor never skips
//! or repeats a record of the same instant, with the offer and status filters in the query.

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use sqlx::{ColumnIndex, Decode, Encode, Executor, Type};
use uuid::Uuid;

use super::{Backend, SqlStore};
use crate::store::income_list::{IncomeFilter, IncomeListStore, IncomeRecord};
use crate::store::shared;
use crate::store::{StoreError, StoreResult};

#[derive(sqlx::FromRow)]
struct IncomeRow {
    id: Uuid,
    offer_id: Option<Uuid>,
    chain: String,
    asset: String,
    decimals: i64,
    amount: String,
    payer: String,
    nonce: String,
    status: String,
    settled_by: Option<String>,
    tx_hash: Option<String>,
    fee: Option<String>,
    created_at: DateTime<Utc>,
    settled_at: Option<DateTime<Utc>>,
}

impl IncomeRow {
    fn into_record(self) -> StoreResult<IncomeRecord> {
        Ok(IncomeRecord {
            decimals: u8::try_from(self.decimals)
                .map_err(|_| StoreError::Corrupt(format!("x402_income.decimals of {}", self.id)))?,
            amount: shared::wei_from_text(&self.amount, "x402_income.amount")?,
            fee: shared::opt_wei_from_text(self.fee, "x402_income.fee")?,
            id: self.id,
            offer_id: self.offer_id,
            chain: self.chain,
            asset: self.asset,
            payer: self.payer,
            nonce: self.nonce,
            status: self.status,
            settled_by: self.settled_by,
            tx_hash: self.tx_hash,
            created_at: self.created_at,
            settled_at: self.settled_at,
        })
    }
}

#[async_trait]
impl<B> IncomeListStore for SqlStore<B>
where
    B: Backend,
    for<'c> &'c mut B::Connection: Executor<'c, Database = B>,
    for<'r> Uuid: Encode<'r, B> + Decode<'r, B> + Type<B>,
    for<'r> String: Decode<'r, B> + Type<B>,
    for<'r> i64: Encode<'r, B> + Decode<'r, B> + Type<B>,
    for<'r> DateTime<Utc>: Decode<'r, B> + Type<B>,
    for<'r> Option<Uuid>: Encode<'r, B> + Decode<'r, B>,
    for<'r> Option<String>: Encode<'r, B> + Decode<'r, B>,
    for<'r> Option<DateTime<Utc>>: Decode<'r, B>,
    for<'r> &'r str: ColumnIndex<B::Row>,
    usize: ColumnIndex<B::Row>,
{
    async fn income_page(
        &self,
        agent_id: Uuid,
        filter: &IncomeFilter,
        before: Option<Uuid>,
        limit: i64,
    ) -> StoreResult<Option<Vec<IncomeRecord>>> {
        if let Some(cursor) = before {
            let known: Option<(Uuid,)> = sqlx::query_as("SELECT id FROM x402_income WHERE id = $1 AND agent_id = $2")
                .bind(cursor)
                .bind(agent_id)
                .fetch_optional(&self.pool)
                .await?;
            if known.is_none() {
                return Ok(None);
            }
        }
        let rows: Vec<IncomeRow> = sqlx::query_as(
            "SELECT id, offer_id, chain, asset, decimals, amount, payer, nonce, status, settled_by, tx_hash, fee, \
             created_at, settled_at FROM x402_income WHERE agent_id = $1 \
             AND ($2 IS NULL OR offer_id = $2) AND ($3 IS NULL OR status = $3) AND ($4 IS NULL \
               OR created_at < (SELECT created_at FROM x402_income WHERE id = $4) \
               OR (created_at = (SELECT created_at FROM x402_income WHERE id = $4) AND id < $4)) \
             ORDER BY created_at DESC, id DESC LIMIT $5",
        )
        .bind(agent_id)
        .bind(filter.offer_id)
        .bind(filter.status.clone())
        .bind(before)
        .bind(limit)
        .fetch_all(&self.pool)
        .await?;
        shared::convert(rows, IncomeRow::into_record).map(Some)
    }
}
