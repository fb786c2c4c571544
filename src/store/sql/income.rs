//! Payments an agent takes (§23), in SQL: the hold (unique keys decide who takes a payment; the offer's
//! `gas_per_day` is judged under the agent's lock in the same transaction), its end, and — called from the watcher's
//! settlement of the settling transaction (`income_settled_in`) — its settlement with event and audit entry.

use alloy::primitives::{Address, B256, U256};
use async_trait::async_trait;
use chrono::{DateTime, Utc};
use serde_json::json;
use sqlx::{ColumnIndex, Decode, Encode, Executor, Row, Type};
use uuid::Uuid;

use super::{Backend, SqlStore};
use crate::domain::audit::Actor;
use crate::domain::audit::detail::{Detail, X402PaymentReceived};
use crate::domain::transaction::TxState;
use crate::domain::webhook;
use crate::store::income::{Held, Hold, Income, IncomeStatus, IncomeStore};
use crate::store::shared::{self, EVENT_COLUMNS, EventRow};
use crate::store::{AuditEvent, EventRecord, Settlement, StoreError, StoreResult};

const INCOME_COLUMNS: &str = "id, agent_id, offer_id, chain, asset, token_address, decimals, amount, payer, nonce, \
     valid_before, signature_key, status, settled_by, transfer_id, tx_hash, fee, outcome, created_at, settled_at";

impl<B> SqlStore<B>
where
    B: Backend,
    for<'c> &'c mut B::Connection: Executor<'c, Database = B>,
    for<'r> Uuid: Encode<'r, B> + Decode<'r, B> + Type<B>,
    for<'r> String: Encode<'r, B> + Decode<'r, B> + Type<B>,
    for<'r> &'r str: Encode<'r, B> + Type<B>,
    for<'r> i64: Encode<'r, B> + Decode<'r, B> + Type<B>,
    for<'r> DateTime<Utc>: Encode<'r, B> + Decode<'r, B> + Type<B>,
    for<'r> Option<Uuid>: Encode<'r, B> + Decode<'r, B>,
    for<'r> Option<String>: Encode<'r, B> + Decode<'r, B>,
    for<'r> Option<DateTime<Utc>>: Decode<'r, B>,
    for<'r> Vec<u8>: Encode<'r, B> + Decode<'r, B> + Type<B>,
    for<'r> Option<&'r str>: Encode<'r, B>,
    for<'r> Option<i64>: Encode<'r, B> + Decode<'r, B>,
    usize: ColumnIndex<B::Row>,
    for<'r> &'r str: ColumnIndex<B::Row>,
{
    fn income_of(row: &B::Row) -> StoreResult<Income> {
        let text = |i: usize| -> StoreResult<String> { Ok(row.try_get::<String, _>(i)?) };
        let address = |i: usize| shared::address_from_text(&text(i)?);
        let decimals: i64 = row.try_get(6)?;
        let valid_before: i64 = row.try_get(10)?;
        let status = text(12)?;
        let fee: Option<String> = row.try_get(16)?;
        let outcome: Option<String> = row.try_get(17)?;
        Ok(Income {
            id: row.try_get(0)?,
            agent_id: row.try_get(1)?,
            offer_id: row.try_get(2)?,
            chain: text(3)?,
            asset: text(4)?,
            token: address(5)?,
            decimals: u8::try_from(decimals).map_err(|_| StoreError::Corrupt("x402_income.decimals".into()))?,
            amount: shared::wei_from_text(&text(7)?, "x402_income.amount")?,
            payer: address(8)?,
            nonce: text(9)?
                .parse::<B256>()
                .map_err(|_| StoreError::Corrupt("x402_income.nonce".into()))?,
            valid_before: u64::try_from(valid_before).unwrap_or(0),
            signature_key: text(11)?,
            status: IncomeStatus::parse(&status)
                .ok_or_else(|| StoreError::Corrupt(format!("x402_income.status {status}")))?,
            settled_by: row.try_get(13)?,
            transfer_id: row.try_get(14)?,
            tx_hash: row.try_get(15)?,
            fee: fee.map(|f| shared::wei_from_text(&f, "x402_income.fee")).transpose()?,
            outcome: outcome.and_then(|o| serde_json::from_str(&o).ok()),
            created_at: row.try_get(18)?,
            settled_at: row.try_get(19)?,
        })
    }

    /// The payment settled by the agent's transaction `transfer_id`, marked from the watcher's settlement of that
    /// transaction in the caller's write transaction (`settle_in`): confirmed → `settled` by agentd with its fee, its
    /// `payment.received` event and its `x402_payment_received` entry; reverted or dropped → `failed` (its payer is
    /// blocked for a day). Returns the event to announce once committed.
    pub(super) async fn income_settled_in(
        &self,
        conn: &mut B::Connection,
        transfer_id: Uuid,
        s: &Settlement,
    ) -> StoreResult<Option<EventRecord>> {
        let row = sqlx::query(sqlx::AssertSqlSafe(format!(
            "SELECT {INCOME_COLUMNS} FROM x402_income WHERE transfer_id = $1 AND status = 'settling'"
        )))
        .bind(transfer_id)
        .fetch_optional(&mut *conn)
        .await?;
        let Some(row) = row else { return Ok(None) };
        let income = Self::income_of(&row)?;
        let now = self.now();
        let (tx_hash,): (Option<String>,) = sqlx::query_as("SELECT tx_hash FROM transactions WHERE id = $1")
            .bind(transfer_id)
            .fetch_one(&mut *conn)
            .await?;
        let fee = s.actual_cost_wei.unwrap_or(U256::ZERO);
        if s.status != TxState::Confirmed {
            // What the reverted settlement cost counts against the offer's gas; its payer is blocked for a day.
            sqlx::query(
                "UPDATE x402_income SET status = 'failed', tx_hash = $1, fee = $2, updated_at = $3 WHERE id = $4",
            )
            .bind(tx_hash)
            .bind(fee.to_string())
            .bind(now)
            .bind(income.id)
            .execute(&mut *conn)
            .await?;
            return Ok(None);
        }
        sqlx::query(
            "UPDATE x402_income SET status = 'settled', settled_by = 'agentd', tx_hash = $1, fee = $2, \
             settled_at = $3, updated_at = $3 WHERE id = $4",
        )
        .bind(tx_hash.clone())
        .bind(fee.to_string())
        .bind(now)
        .bind(income.id)
        .execute(&mut *conn)
        .await?;
        let audit = received_audit(&income, "agentd", tx_hash.clone());
        self.received_in(conn, &income, "agentd", tx_hash, fee, now, &audit)
            .await
            .map(Some)
    }

    /// The `payment.received` event (stream and webhook) and the `x402_payment_received` entry of a settled payment.
    #[allow(clippy::too_many_arguments)]
    async fn received_in(
        &self,
        conn: &mut B::Connection,
        income: &Income,
        settled_by: &str,
        tx_hash: Option<String>,
        fee: U256,
        now: DateTime<Utc>,
        audit: &AuditEvent,
    ) -> StoreResult<EventRecord> {
        let payload = json!({
            "type": "payment.received",
            "agent_id": income.agent_id,
            "income_id": income.id,
            "offer_id": income.offer_id,
            "chain": income.chain,
            "asset": income.asset,
            "amount": crate::domain::amount::format_units(income.amount, income.decimals),
            "payer": income.payer.to_checksum(None),
            "nonce": income.nonce.to_string(),
            "settled_by": settled_by,
            "tx_hash": tx_hash,
            "fee": crate::domain::amount::format_units(fee, 18),
        });
        let row: EventRow = sqlx::query_as(sqlx::AssertSqlSafe(format!(
            "INSERT INTO events (conversation_id, agent_id, kind, payload, created_at) VALUES ($1, $2, $3, $4, $5) \
             RETURNING {EVENT_COLUMNS}"
        )))
        .bind(None::<Uuid>)
        .bind(income.agent_id)
        .bind("payment.received")
        .bind(payload.to_string())
        .bind(now)
        .fetch_one(&mut *conn)
        .await?;
        let record = row.into_event()?;
        if let Some(pushed) = webhook::from_stream(income.agent_id, "payment.received", &payload, now) {
            Self::outbox_in(&mut *conn, pushed).await?;
        }
        self.append_audit(&mut *conn, audit).await?;
        B::notify_event(&mut *conn, record.id).await?;
        Ok(record)
    }
}

fn received_audit(income: &Income, _by: &str, tx_hash: Option<String>) -> AuditEvent {
    AuditEvent::new(
        income.agent_id,
        Actor::System,
        Detail::X402PaymentReceived(X402PaymentReceived {
            offer_id: income.offer_id,
            chain: income.chain.clone(),
            asset: income.asset.clone(),
            payer: income.payer.to_checksum(None),
            amount: crate::domain::amount::format_units(income.amount, income.decimals),
            nonce: income.nonce.to_string(),
            tx_hash,
        }),
    )
}

#[async_trait]
impl<B> IncomeStore for SqlStore<B>
where
    B: Backend,
    for<'c> &'c mut B::Connection: Executor<'c, Database = B>,
    for<'r> Uuid: Encode<'r, B> + Decode<'r, B> + Type<B>,
    for<'r> String: Encode<'r, B> + Decode<'r, B> + Type<B>,
    for<'r> &'r str: Encode<'r, B> + Type<B>,
    for<'r> i64: Encode<'r, B> + Decode<'r, B> + Type<B>,
    for<'r> DateTime<Utc>: Encode<'r, B> + Decode<'r, B> + Type<B>,
    for<'r> Vec<u8>: Encode<'r, B> + Decode<'r, B> + Type<B>,
    for<'r> Option<Uuid>: Encode<'r, B> + Decode<'r, B>,
    for<'r> Option<String>: Encode<'r, B> + Decode<'r, B>,
    for<'r> Option<&'r str>: Encode<'r, B>,
    for<'r> Option<i64>: Encode<'r, B> + Decode<'r, B>,
    for<'r> Option<DateTime<Utc>>: Decode<'r, B>,
    usize: ColumnIndex<B::Row>,
    for<'r> &'r str: ColumnIndex<B::Row>,
{
    async fn payer_blocked(&self, payer: Address) -> StoreResult<bool> {
        let since = self.now() - chrono::Duration::hours(24);
        let found: Option<(i64,)> = sqlx::query_as(
            "SELECT CAST(1 AS BIGINT) FROM x402_income WHERE payer = $1 AND status = 'failed' AND updated_at > $2 \
             LIMIT 1",
        )
        .bind(payer.to_checksum(None))
        .bind(since)
        .fetch_optional(&self.pool)
        .await?;
        Ok(found.is_some())
    }

    async fn income_by_nonce(
        &self,
        chain: &str,
        token: Address,
        payer: Address,
        nonce: B256,
    ) -> StoreResult<Option<Income>> {
        let row = sqlx::query(sqlx::AssertSqlSafe(format!(
            "SELECT {INCOME_COLUMNS} FROM x402_income \
             WHERE chain = $1 AND token_address = $2 AND payer = $3 AND nonce = $4"
        )))
        .bind(chain)
        .bind(token.to_checksum(None))
        .bind(payer.to_checksum(None))
        .bind(nonce.to_string())
        .fetch_optional(&self.pool)
        .await?;
        row.as_ref().map(Self::income_of).transpose()
    }

    async fn held_of_payer(&self, chain: &str, token: Address, payer: Address) -> StoreResult<U256> {
        let rows: Vec<(String,)> = sqlx::query_as(
            "SELECT amount FROM x402_income WHERE chain = $1 AND token_address = $2 AND payer = $3 \
             AND status = 'settling'",
        )
        .bind(chain)
        .bind(token.to_checksum(None))
        .bind(payer.to_checksum(None))
        .fetch_all(&self.pool)
        .await?;
        rows.iter().try_fold(U256::ZERO, |sum, (amount,)| {
            Ok(sum.saturating_add(shared::wei_from_text(amount, "x402_income.amount")?))
        })
    }

    async fn offer_gas_counted(&self, offer_id: Uuid) -> StoreResult<U256> {
        let mut conn = self.pool.acquire().await?;
        offer_gas_in::<B>(&mut conn, offer_id, self.now()).await
    }

    async fn take_hold(&self, hold: &Hold, gas_per_day: Option<U256>) -> StoreResult<Held> {
        let now = self.now();
        // Its commit needs no sync of its own: nothing is sent or served on the strength of a hold until the
        // settlement's reservation, whose full commit syncs it first (lost in a power cut only with that).
        let mut tx = B::begin_write_relaxed(self).await?;
        // Under the agent's lock: two holds of one offer judge its gas one after the other.
        B::lock_agent(&mut tx, hold.agent_id).await?;
        if let (Some(per_day), Some(offer_id)) = (gas_per_day, hold.offer_id) {
            let counted = offer_gas_in::<B>(&mut tx, offer_id, now).await?;
            if counted.saturating_add(hold.gas) > per_day {
                return Ok(Held::GasExhausted);
            }
        }
        let in_flight: Option<(i64,)> = match hold.offer_id {
            Some(offer_id) => {
                sqlx::query_as(
                    "SELECT CAST(1 AS BIGINT) FROM x402_income WHERE offer_id = $1 AND payer = $2 \
                     AND status = 'settling' LIMIT 1",
                )
                .bind(offer_id)
                .bind(hold.payer.to_checksum(None))
                .fetch_optional(&mut *tx)
                .await?
            }
            None => None,
        };
        if in_flight.is_some() {
            return Ok(Held::NonceHeld);
        }
        // The unique keys decide between instances: a second insert of the same (chain, token, payer, nonce), or of
        // a second payment of the payer's to the offer in flight, inserts nothing.
        let done = sqlx::query(
            "INSERT INTO x402_income (id, agent_id, offer_id, chain, asset, token_address, decimals, amount, payer, \
             nonce, valid_before, signature_key, status, gas_held, transfer_id, created_at, updated_at) \
             VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, 'settling', $13, $14, $15, $15) \
             ON CONFLICT DO NOTHING",
        )
        .bind(hold.id)
        .bind(hold.agent_id)
        .bind(hold.offer_id)
        .bind(&hold.chain)
        .bind(&hold.asset)
        .bind(hold.token.to_checksum(None))
        .bind(i64::from(hold.decimals))
        .bind(hold.amount.to_string())
        .bind(hold.payer.to_checksum(None))
        .bind(hold.nonce.to_string())
        .bind(i64::try_from(hold.valid_before).unwrap_or(i64::MAX))
        .bind(&hold.signature_key)
        .bind(hold.gas.to_string())
        .bind(hold.transfer_id)
        .bind(now)
        .execute(&mut *tx)
        .await?;
        if B::rows_affected(&done) != 1 {
            return Ok(Held::NonceHeld);
        }
        tx.commit().await?;
        Ok(Held::Taken)
    }

    async fn end_hold(&self, id: Uuid, status: IncomeStatus) -> StoreResult<bool> {
        let done =
            sqlx::query("UPDATE x402_income SET status = $1, updated_at = $2 WHERE id = $3 AND status = 'settling'")
                .bind(status.as_str())
                .bind(self.now())
                .bind(id)
                .execute(&self.pool)
                .await?;
        Ok(B::rows_affected(&done) == 1)
    }

    async fn settled_externally(&self, id: Uuid, tx_hash: Option<String>, _audit: &AuditEvent) -> StoreResult<bool> {
        let now = self.now();
        let mut tx = B::begin_write(self).await?;
        let row = sqlx::query(sqlx::AssertSqlSafe(format!(
            "SELECT {INCOME_COLUMNS} FROM x402_income WHERE id = $1"
        )))
        .bind(id)
        .fetch_optional(&mut *tx)
        .await?;
        let Some(row) = row else { return Ok(false) };
        let income = Self::income_of(&row)?;
        if income.status == IncomeStatus::Settled {
            return Ok(false);
        }
        B::lock_agent(&mut tx, income.agent_id).await?;
        sqlx::query(
            "UPDATE x402_income SET status = 'settled', settled_by = 'external', tx_hash = $1, fee = '0', \
             settled_at = $2, updated_at = $2 WHERE id = $3 AND status <> 'settled'",
        )
        .bind(tx_hash.clone())
        .bind(now)
        .bind(id)
        .execute(&mut *tx)
        .await?;
        let audit = received_audit(&income, "external", tx_hash.clone());
        let record = self
            .received_in(&mut tx, &income, "external", tx_hash, U256::ZERO, now, &audit)
            .await?;
        tx.commit().await?;
        self.feed.announce(&record);
        Ok(true)
    }

    async fn keep_outcome(&self, id: Uuid, outcome: &serde_json::Value) -> StoreResult<bool> {
        // The served mark (or the first settle answer) of a payment the chain shows settled: a power cut that loses
        // it can let the same signature be served once more, never move money; no sync of its own.
        let mut tx = B::begin_write_relaxed(self).await?;
        let done = sqlx::query("UPDATE x402_income SET outcome = $1 WHERE id = $2 AND outcome IS NULL")
            .bind(outcome.to_string())
            .bind(id)
            .execute(&mut *tx)
            .await?;
        tx.commit().await?;
        Ok(B::rows_affected(&done) == 1)
    }

    async fn income(&self, id: Uuid) -> StoreResult<Option<Income>> {
        let row = sqlx::query(sqlx::AssertSqlSafe(format!(
            "SELECT {INCOME_COLUMNS} FROM x402_income WHERE id = $1"
        )))
        .bind(id)
        .fetch_optional(&self.pool)
        .await?;
        row.as_ref().map(Self::income_of).transpose()
    }

    async fn stale_holds(&self, before: DateTime<Utc>) -> StoreResult<Vec<Income>> {
        // A hold whose settlement was never reserved (no transaction row): a crash before it, or a check that failed.
        let rows = sqlx::query(sqlx::AssertSqlSafe(format!(
            "SELECT {} FROM x402_income i WHERE i.status = 'settling' AND i.updated_at < $1 \
             AND (i.transfer_id IS NULL OR NOT EXISTS (SELECT 1 FROM transactions t WHERE t.id = i.transfer_id))",
            INCOME_COLUMNS
                .split(", ")
                .map(|c| format!("i.{c}"))
                .collect::<Vec<_>>()
                .join(", ")
        )))
        .bind(before)
        .fetch_all(&self.pool)
        .await?;
        rows.iter().map(Self::income_of).collect()
    }

    async fn purge_holds(&self, now_unix: u64) -> StoreResult<u64> {
        let done = sqlx::query("DELETE FROM x402_income WHERE status = 'released' AND valid_before < $1")
            .bind(i64::try_from(now_unix).unwrap_or(i64::MAX))
            .execute(&self.pool)
            .await?;
        Ok(B::rows_affected(&done))
    }
}

/// What the offer's settlements of the 24 hours before `now` cost and hold of its `gas_per_day`: a settlement
/// from the agent's wallet its fee once mined; a sponsored one (a user operation) what the sponsorship paid for it
/// once mined, else its maximum cost (the agent's fee is 0: the offer's budget is the sponsorship's gas then, §23);
/// a hold in flight before its settlement is signed, its priced gas.
async fn offer_gas_in<B>(conn: &mut B::Connection, offer_id: Uuid, now: DateTime<Utc>) -> StoreResult<U256>
where
    B: Backend,
    for<'c> &'c mut B::Connection: Executor<'c, Database = B>,
    for<'r> Uuid: Encode<'r, B> + Type<B>,
    for<'r> String: Decode<'r, B> + Type<B>,
    for<'r> DateTime<Utc>: Encode<'r, B> + Type<B>,
    for<'r> Option<String>: Decode<'r, B>,
    usize: ColumnIndex<B::Row>,
{
    type Costs = (Option<String>, String, Option<String>, Option<String>);
    let rows: Vec<Costs> = sqlx::query_as(
        "SELECT i.fee, i.gas_held, u.gas_cost, u.max_cost FROM x402_income i \
         LEFT JOIN user_operations u ON u.transfer_id = i.transfer_id \
         WHERE i.offer_id = $1 AND i.created_at > $2 AND i.status IN ('settling', 'settled', 'failed')",
    )
    .bind(offer_id)
    .bind(now - chrono::Duration::hours(24))
    .fetch_all(&mut *conn)
    .await?;
    rows.iter().try_fold(U256::ZERO, |sum, (fee, held, op_cost, op_max)| {
        let cost = match (op_cost, op_max, fee) {
            (Some(paid), _, _) => shared::wei_from_text(paid, "user_operations.gas_cost")?,
            (None, Some(max), _) => shared::wei_from_text(max, "user_operations.max_cost")?,
            (None, None, Some(fee)) => shared::wei_from_text(fee, "x402_income.fee")?,
            (None, None, None) => shared::wei_from_text(held, "x402_income.gas_held")?,
        };
        Ok(sum.saturating_add(cost))
    })
}
