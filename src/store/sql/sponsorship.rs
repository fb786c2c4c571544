//! The operator's sponsorship per agent and chain (§22): `per_day` as set, and what the sponsorship counted over the
//! last 24 hours, read by `sponsorship_in` inside the caller's transaction (the reservation step, under the agent's
//! lock) or on its own (the HTTP layer).

use alloy::primitives::U256;
use async_trait::async_trait;
use chrono::{DateTime, Utc};
use sqlx::{ColumnIndex, Decode, Encode, Executor, Type};
use uuid::Uuid;

use super::{Backend, SqlStore};
use crate::store::shared;
use crate::store::sponsorship::{SponsorshipState, SponsorshipStore};
use crate::store::{AuditEvent, StoreResult};

impl<B> SqlStore<B>
where
    B: Backend,
    for<'c> &'c mut B::Connection: Executor<'c, Database = B>,
    for<'r> Uuid: Encode<'r, B> + Type<B>,
    for<'r> String: Decode<'r, B> + Type<B>,
    for<'r> &'r str: Encode<'r, B> + Type<B>,
    for<'r> DateTime<Utc>: Encode<'r, B> + Type<B>,
    for<'r> Option<String>: Decode<'r, B>,
    for<'r> i64: Decode<'r, B> + Type<B>,
    usize: ColumnIndex<B::Row>,
{
    /// The agent's `per_day` on `chain` (`None`: never set), read on `conn`.
    async fn per_day_in(conn: &mut B::Connection, agent_id: Uuid, chain: &str) -> StoreResult<Option<U256>> {
        let per_day: Option<(String,)> =
            sqlx::query_as("SELECT per_day FROM sponsorships WHERE agent_id = $1 AND chain = $2")
                .bind(agent_id)
                .bind(chain)
                .fetch_optional(&mut *conn)
                .await?;
        per_day
            .map(|(text,)| shared::wei_from_text(&text, "sponsorships.per_day"))
            .transpose()
    }

    /// The agent's sponsorship on `chain` at `now`, in one statement: its `per_day` (`None` when the operator never
    /// set one) and what it counted over the 24 hours before `now` (strictly inside, as §11's windows): each of the
    /// agent's user operations on `chain` signed then its `gas_cost` once mined, else its `max_cost` (a dropped one
    /// never landed: nothing), plus what bundles that reverted on chain at its validation cost the sponsor. In the
    /// same statement, the next nonce of the agent's EntryPoint sequence the store counts: one past its newest
    /// operation that may still land or has (a dropped one's nonce is free again once nothing later was signed);
    /// a sponsored reservation takes its place there (§22). A plain read on `conn`: inside the caller's
    /// transaction, it sees what that wrote and holds what it locked.
    pub(in crate::store) async fn sponsorship_in(
        conn: &mut B::Connection,
        agent_id: Uuid,
        chain: &str,
        now: DateTime<Utc>,
    ) -> StoreResult<SponsorshipRead> {
        // Each operation's part comes back joined in one row (the backend's text aggregate): on SQLite each row of
        // an answer is one hand-over from the connection's thread, and an agent may have many operations a day.
        let sql = format!(
            "SELECT (SELECT per_day FROM sponsorships WHERE agent_id = $1 AND chain = $2), \
             {agg}(COALESCE(uo.gas_cost, CASE WHEN t.status = 'dropped' THEN '0' ELSE uo.max_cost END), ','), \
             {agg}(uo.failed_gas, ','), \
             (SELECT MAX(nonce) FROM transactions WHERE agent_id = $1 AND chain = $2 AND kind = 'user_op' \
             AND status <> 'dropped') \
             FROM user_operations uo JOIN transactions t ON t.id = uo.transfer_id \
             WHERE uo.agent_id = $1 AND uo.chain = $2 AND uo.created_at > $3 \
             AND (t.status <> 'dropped' OR uo.gas_cost IS NOT NULL OR uo.failed_gas IS NOT NULL)",
            agg = B::TEXT_AGG
        );
        type Row = (Option<String>, Option<String>, Option<String>, Option<i64>);
        let (per_day, costs, failed, newest): Row = sqlx::query_as(sqlx::AssertSqlSafe(sql))
            .bind(agent_id)
            .bind(chain)
            .bind(now - chrono::Duration::hours(24))
            .fetch_one(&mut *conn)
            .await?;
        let per_day = per_day
            .map(|text| shared::wei_from_text(&text, "sponsorships.per_day"))
            .transpose()?;
        // Each its `gas_cost` once mined, else its `max_cost` (a dropped one: nothing); plus what its reverted
        // bundles cost.
        let costs = shared::sum_joined(costs.as_deref(), "user_operations.gas_cost")?;
        let failed = shared::sum_joined(failed.as_deref(), "user_operations.failed_gas")?;
        let next_nonce = newest
            .map(|n| shared::u64_from(n, "transactions.nonce").map(|n| n + 1))
            .transpose()?;
        Ok(SponsorshipRead {
            per_day,
            counted: costs.saturating_add(failed),
            next_nonce,
        })
    }
}

/// What `sponsorship_in` read.
pub(in crate::store) struct SponsorshipRead {
    pub per_day: Option<U256>,
    pub counted: U256,
    /// The next nonce of the agent's EntryPoint sequence the store counts (`None`: it stored none).
    pub next_nonce: Option<u64>,
}

#[async_trait]
impl<B> SponsorshipStore for SqlStore<B>
where
    B: Backend,
    for<'c> &'c mut B::Connection: Executor<'c, Database = B>,
    // Ids, text amounts and times bound; text read back; the audit entry as `append_audit` writes it.
    for<'r> Uuid: Encode<'r, B> + Type<B>,
    for<'r> String: Encode<'r, B> + Decode<'r, B> + Type<B>,
    for<'r> &'r str: Encode<'r, B> + Type<B>,
    for<'r> i64: Encode<'r, B> + Decode<'r, B> + Type<B>,
    for<'r> DateTime<Utc>: Encode<'r, B> + Type<B>,
    for<'r> Option<String>: Decode<'r, B>,
    usize: ColumnIndex<B::Row>,
{
    async fn set_sponsorship(
        &self,
        agent_id: Uuid,
        chain: &str,
        per_day: U256,
        audit: &AuditEvent,
    ) -> StoreResult<SponsorshipState> {
        let now = self.now();
        let mut tx = B::begin_write(self).await?;
        sqlx::query(
            "INSERT INTO sponsorships (agent_id, chain, per_day, updated_at) VALUES ($1, $2, $3, $4) \
             ON CONFLICT (agent_id, chain) DO UPDATE SET per_day = $3, updated_at = $4",
        )
        .bind(agent_id)
        .bind(chain)
        .bind(per_day.to_string())
        .bind(now)
        .execute(&mut *tx)
        .await?;
        let counted = Self::sponsorship_in(&mut tx, agent_id, chain, now).await?.counted;
        self.append_audit(&mut tx, audit).await?;
        tx.commit().await?;
        Ok(SponsorshipState {
            chain: chain.to_string(),
            per_day,
            counted,
        })
    }

    async fn sponsorships(&self, agent_id: Uuid) -> StoreResult<Vec<SponsorshipState>> {
        // One transaction: every chain's figures as of one moment.
        let mut tx = self.pool.begin().await?;
        let now = self.now();
        let chains: Vec<(String,)> =
            sqlx::query_as("SELECT chain FROM sponsorships WHERE agent_id = $1 ORDER BY chain")
                .bind(agent_id)
                .fetch_all(&mut *tx)
                .await?;
        let mut all = Vec::with_capacity(chains.len());
        for (chain,) in chains {
            let SponsorshipRead { per_day, counted, .. } = Self::sponsorship_in(&mut tx, agent_id, &chain, now).await?;
            all.push(SponsorshipState {
                chain,
                per_day: per_day.unwrap_or_default(),
                counted,
            });
        }
        tx.commit().await?;
        Ok(all)
    }

    async fn sponsorship_per_day(&self, agent_id: Uuid, chain: &str) -> StoreResult<Option<U256>> {
        let mut conn = self.pool.acquire().await?;
        Self::per_day_in(&mut conn, agent_id, chain).await
    }
}
