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
    usize: ColumnIndex<B::Row>,
{
    /// The agent's sponsorship on `chain` at `now`: its `per_day` (`None` when the operator never set one) and what
    /// it counted over the 24 hours before `now`. Plain reads on `conn`: inside the caller's transaction, they see
    /// what it wrote and hold what it locked.
    pub(in crate::store) async fn sponsorship_in(
        conn: &mut B::Connection,
        agent_id: Uuid,
        chain: &str,
        now: DateTime<Utc>,
    ) -> StoreResult<(Option<U256>, U256)> {
        let per_day: Option<(String,)> =
            sqlx::query_as("SELECT per_day FROM sponsorships WHERE agent_id = $1 AND chain = $2")
                .bind(agent_id)
                .bind(chain)
                .fetch_optional(&mut *conn)
                .await?;
        let per_day = per_day
            .map(|(text,)| shared::wei_from_text(&text, "sponsorships.per_day"))
            .transpose()?;
        Ok((per_day, Self::sponsored_in(conn, agent_id, chain, now).await?))
    }

    /// What the agent's user operations on `chain` signed in the 24 hours before `now` (strictly inside, as §11's
    /// windows) hold of its sponsorship: each its `gas_cost` once mined, else its `max_cost` (a dropped one never
    /// landed: nothing), plus what bundles that reverted on chain at its validation cost the sponsor.
    async fn sponsored_in(
        conn: &mut B::Connection,
        agent_id: Uuid,
        chain: &str,
        now: DateTime<Utc>,
    ) -> StoreResult<U256> {
        type Row = (Option<String>, String, Option<String>, String);
        let rows: Vec<Row> = sqlx::query_as(
            "SELECT uo.gas_cost, uo.max_cost, uo.failed_gas, t.status FROM user_operations uo \
             JOIN transactions t ON t.id = uo.transfer_id WHERE uo.agent_id = $1 AND uo.chain = $2 \
             AND uo.created_at > $3 AND (t.status <> 'dropped' OR uo.gas_cost IS NOT NULL OR uo.failed_gas IS NOT NULL)",
        )
        .bind(agent_id)
        .bind(chain)
        .bind(now - chrono::Duration::hours(24))
        .fetch_all(&mut *conn)
        .await?;
        rows.iter()
            .try_fold(U256::ZERO, |sum, (gas_cost, max_cost, failed_gas, status)| {
                let cost = match gas_cost {
                    Some(text) => shared::wei_from_text(text, "user_operations.gas_cost")?,
                    None if status == "dropped" => U256::ZERO,
                    None => shared::wei_from_text(max_cost, "user_operations.max_cost")?,
                };
                let failed = failed_gas
                    .as_deref()
                    .map(|text| shared::wei_from_text(text, "user_operations.failed_gas"))
                    .transpose()?
                    .unwrap_or_default();
                Ok(sum.saturating_add(cost).saturating_add(failed))
            })
    }
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
        let counted = Self::sponsored_in(&mut tx, agent_id, chain, now).await?;
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
            let (per_day, counted) = Self::sponsorship_in(&mut tx, agent_id, &chain, now).await?;
            all.push(SponsorshipState {
                chain,
                per_day: per_day.unwrap_or_default(),
                counted,
            });
        }
        tx.commit().await?;
        Ok(all)
    }
}
