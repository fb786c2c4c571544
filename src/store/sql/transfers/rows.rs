//! The transfer row's insert, and the nonce and spending rows beside it, inside the caller's transaction.

use alloy::primitives::U256;
use chrono::{DateTime, Utc};
use sqlx::{ColumnIndex, Decode, Encode, Executor, Type};
use uuid::Uuid;

use super::super::{Backend, SqlStore};
use crate::domain::decision;
use crate::domain::transaction::StoredTx;
use crate::store::StoreResult;
use crate::store::shared::{self, TX_COLUMNS};

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
    /// Inserts a signed transfer; `fills` names the transfer whose nonce it fills (see `fill_nonce`), `owed` is its
    /// kept entry (`TransferRequest::owed`, as JSON).
    pub(super) async fn insert_transfer(
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
    pub(super) async fn stored_nonce(
        conn: &mut B::Connection,
        agent_id: Uuid,
        chain: &str,
    ) -> StoreResult<Option<u64>> {
        let row: Option<(i64,)> = sqlx::query_as("SELECT next_nonce FROM nonces WHERE agent_id = $1 AND chain = $2")
            .bind(agent_id)
            .bind(chain)
            .fetch_optional(&mut *conn)
            .await?;
        row.map(|(n,)| shared::u64_from(n, "next_nonce")).transpose()
    }

    /// The agent's spending cap (native units, per chain).
    pub(in crate::store::sql) async fn cap_in(conn: &mut B::Connection, agent_id: Uuid) -> StoreResult<U256> {
        let (cap,): (String,) = sqlx::query_as("SELECT spending_cap_wei FROM agents WHERE id = $1")
            .bind(agent_id)
            .fetch_one(&mut *conn)
            .await?;
        shared::wei_from_text(&cap, "spending_cap_wei")
    }

    pub(in crate::store::sql) async fn spent_on_chain(
        conn: &mut B::Connection,
        agent_id: Uuid,
        chain: &str,
    ) -> StoreResult<U256> {
        let row: Option<(String,)> =
            sqlx::query_as("SELECT spent_wei FROM spending WHERE agent_id = $1 AND chain = $2")
                .bind(agent_id)
                .bind(chain)
                .fetch_optional(&mut *conn)
                .await?;
        row.map_or(Ok(U256::ZERO), |(w,)| shared::wei_from_text(&w, "spending.spent_wei"))
    }

    /// Moves what counts against the cap on (agent, chain): `+ add - sub`. Callers hold the agent's write lock.
    pub(in crate::store::sql) async fn adjust_spent(
        conn: &mut B::Connection,
        agent_id: Uuid,
        chain: &str,
        add: U256,
        sub: U256,
    ) -> StoreResult<()> {
        // Nothing moves (a settlement whose cost is what it reserved, such as a sponsored token transfer's 0): no
        // statement. (What counts is a sum of wei amounts, far from where `+ add` would saturate.)
        if add == sub {
            return Ok(());
        }
        let current = Self::spent_on_chain(&mut *conn, agent_id, chain).await?;
        Self::set_spent(conn, agent_id, chain, decision::spent_after(current, add, sub)).await
    }

    /// Sets what counts against the cap on (agent, chain). Callers hold the agent's write lock.
    pub(super) async fn set_spent(
        conn: &mut B::Connection,
        agent_id: Uuid,
        chain: &str,
        next: U256,
    ) -> StoreResult<()> {
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
