//! Agents with their keys and addresses.

use std::collections::BTreeMap;
use std::sync::LazyLock;

use alloy::primitives::Address;
use async_trait::async_trait;
use chrono::{DateTime, Utc};
use sqlx::{ColumnIndex, Decode, Encode, Executor, FromRow, Row, Type};
use uuid::Uuid;

use super::{Backend, SqlStore};
use crate::domain::agent::Agent;
use crate::store::shared::{self, AGENT_COLUMNS, AgentRow, AgentTokenRow, KeyRow, PerChainRow};
use crate::store::{AgentStore, AgentUpdate, AuditEvent, AuditOf, NewAgent, StoreError, StoreResult};
use crate::vault::EncryptedKey;

/// An agent with its per-chain values (wallet and owner addresses, spending) and the owner of a live token hash
/// (`$2`; empty when none was presented), for `load_agent_and_token`. Uncorrelated, the token lookup runs once per
/// statement on both dialects.
static AGENT_DETAIL_SQL: LazyLock<String> = LazyLock::new(|| {
    format!(
        "SELECT {AGENT_COLUMNS}, (SELECT t.agent_id FROM access_tokens t \
         WHERE t.token_hash = $2 AND t.revoked_at IS NULL) AS token_owner, \
         p.kind AS per_chain_kind, p.chain AS per_chain_chain, p.value AS per_chain_value \
         FROM agents LEFT JOIN (\
         SELECT 'wallet' AS kind, chain, address AS value FROM wallet_addresses WHERE agent_id = $1 \
         UNION ALL SELECT 'owner', chain, address FROM owner_addresses WHERE agent_id = $1 \
         UNION ALL SELECT 'spent', chain, spent_wei FROM spending WHERE agent_id = $1\
         ) p ON TRUE WHERE id = $1"
    )
});

#[async_trait]
impl<B> AgentStore for SqlStore<B>
where
    B: Backend,
    for<'c> &'c mut B::Connection: Executor<'c, Database = B>,
    // Bound and read: ids, text, flags, times, key bytes and version; tuples are read by index, rows by name.
    for<'r> Uuid: Encode<'r, B> + Decode<'r, B> + Type<B>,
    for<'r> String: Encode<'r, B> + Decode<'r, B> + Type<B>,
    for<'r> &'r str: Encode<'r, B> + Type<B>,
    for<'r> Option<String>: Encode<'r, B>,
    for<'r> bool: Encode<'r, B> + Decode<'r, B> + Type<B>,
    for<'r> i32: Encode<'r, B> + Decode<'r, B> + Type<B>,
    for<'r> DateTime<Utc>: Encode<'r, B> + Decode<'r, B> + Type<B>,
    for<'r> Vec<u8>: Encode<'r, B> + Decode<'r, B> + Type<B>,
    // The audit chain's head is read back (entry id).
    for<'r> i64: Encode<'r, B> + Decode<'r, B> + Type<B>,
    usize: ColumnIndex<B::Row>,
    for<'r> &'r str: ColumnIndex<B::Row>,
{
    async fn create_agent(&self, new: &NewAgent, audit: &AuditEvent) -> StoreResult<()> {
        let a = &new.agent;
        let mut tx = B::begin_write(self).await?;
        Self::check_key_version(&mut tx, new.key.key_version).await?;
        sqlx::query(
            "INSERT INTO agents (id, name, description, chains, capabilities, spending_cap_wei, is_active, \
             created_at, updated_at) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)",
        )
        .bind(a.id)
        .bind(&a.name)
        .bind(&a.description)
        .bind(shared::chains_to_text(&a.chains))
        .bind(shared::capabilities_to_text(&a.capabilities))
        .bind(a.spending_cap_wei.to_string())
        .bind(a.is_active)
        .bind(a.created_at)
        .bind(a.updated_at)
        .execute(&mut *tx)
        .await?;
        sqlx::query(
            "INSERT INTO wallet_keys (agent_id, scheme, address, ciphertext, nonce, key_version, created_at) \
             VALUES ($1, $2, $3, $4, $5, $6, $7)",
        )
        .bind(a.id)
        .bind(new.key.scheme.as_str())
        .bind(new.key.address.to_checksum(None))
        .bind(&new.key.ciphertext)
        .bind(&new.key.nonce)
        .bind(new.key.key_version)
        .bind(a.created_at)
        .execute(&mut *tx)
        .await?;
        Self::add_wallet_addresses(&mut tx, a.id, &a.chains, new.key.address).await?;
        Self::replace_owners(&mut tx, a.id, &a.owner_addresses).await?;
        sqlx::query("INSERT INTO access_tokens (token_hash, agent_id, created_at) VALUES ($1, $2, $3)")
            .bind(&new.token_hash)
            .bind(a.id)
            .bind(a.created_at)
            .execute(&mut *tx)
            .await?;
        self.append_audit(&mut tx, audit).await?;
        tx.commit().await?;
        Ok(())
    }

    async fn list_agents(&self, limit: i64, offset: i64) -> StoreResult<Vec<Agent>> {
        let rows: Vec<AgentRow> = sqlx::query_as(sqlx::AssertSqlSafe(format!(
            "SELECT {AGENT_COLUMNS} FROM agents ORDER BY created_at DESC, id DESC LIMIT $1 OFFSET $2"
        )))
        .bind(limit)
        .bind(offset)
        .fetch_all(&self.pool)
        .await?;
        shared::convert(rows, AgentRow::into_agent)
    }

    async fn get_agent(&self, id: Uuid) -> StoreResult<Agent> {
        let mut conn = self.pool.acquire().await?;
        Ok(Self::load_agent_and_token(&mut conn, id, None).await?.0)
    }

    async fn get_agent_for_token(&self, id: Uuid, token_hash: &str) -> StoreResult<(Agent, Option<Uuid>)> {
        // SQLite: an unchanged database gives the same answer (see `store::speedups::views` for why this is exact),
        // and a read connection without the pool's pings reads it otherwise.
        if let Some(sqlite) = &self.sqlite {
            let before = match sqlite.views.get(id, token_hash) {
                Ok(view) => return Ok(view),
                Err(mark) => mark,
            };
            let mut read = sqlite.reads.take().await?;
            let found = Self::load_agent_and_token(&mut read.conn, id, Some(token_hash)).await;
            // The statement ran to its end (found or not): the connection is fit for the next read.
            if !matches!(found, Err(StoreError::Database(_))) {
                read.give_back();
            }
            if let (Some(before), Ok(view)) = (before, &found) {
                sqlite.views.put(before, id, token_hash, view);
            }
            return found;
        }
        let mut conn = self.pool.acquire().await?;
        Self::load_agent_and_token(&mut conn, id, Some(token_hash)).await
    }

    async fn update_agent(
        &self,
        id: Uuid,
        update: &AgentUpdate,
        wallet: Address,
        audit: AuditOf<'_>,
    ) -> StoreResult<Agent> {
        // On SQLite `BEGIN IMMEDIATE` already holds the only write lock; PostgreSQL locks the agent's row.
        let mut tx = B::begin_write(self).await?;
        B::lock_agent(&mut tx, id).await?;
        let before = Self::load_agent_and_token(&mut tx, id, None).await?.0;
        let mut agent = before.clone();
        update.apply_to(&mut agent);
        if let Some(chains) = &update.chains {
            Self::add_wallet_addresses(&mut tx, id, chains, wallet).await?;
        }
        if let Some(owners) = &update.owner_addresses {
            Self::replace_owners(&mut tx, id, owners).await?;
            Self::end_orphaned_sessions(&mut tx, id).await?;
        }
        sqlx::query(
            "UPDATE agents SET name = $1, description = $2, chains = $3, capabilities = $4, \
             spending_cap_wei = $5, updated_at = $6 WHERE id = $7",
        )
        .bind(&agent.name)
        .bind(&agent.description)
        .bind(shared::chains_to_text(&agent.chains))
        .bind(shared::capabilities_to_text(&agent.capabilities))
        .bind(agent.spending_cap_wei.to_string())
        .bind(self.now())
        .bind(id)
        .execute(&mut *tx)
        .await?;
        let agent = Self::load_agent_and_token(&mut tx, id, None).await?.0;
        if let Some(event) = audit(&before, &agent) {
            self.append_audit(&mut tx, &event).await?;
        }
        tx.commit().await?;
        Ok(agent)
    }

    async fn deactivate_agent(&self, id: Uuid, audit: &AuditEvent) -> StoreResult<bool> {
        let mut tx = B::begin_write(self).await?;
        let done = sqlx::query("UPDATE agents SET is_active = $1, updated_at = $2 WHERE id = $3 AND is_active = $4")
            .bind(false)
            .bind(self.now())
            .bind(id)
            .bind(true)
            .execute(&mut *tx)
            .await?;
        if B::rows_affected(&done) != 1 {
            return Ok(false);
        }
        self.append_audit(&mut tx, audit).await?;
        tx.commit().await?;
        Ok(true)
    }

    async fn wallet_key(&self, agent_id: Uuid) -> StoreResult<EncryptedKey> {
        let row: KeyRow = sqlx::query_as(
            "SELECT address, ciphertext, nonce, key_version, scheme FROM wallet_keys WHERE agent_id = $1",
        )
        .bind(agent_id)
        .fetch_optional(&self.pool)
        .await?
        .ok_or(StoreError::AgentNotFound)?;
        row.into_key()
    }
}

/// The helpers the agent operations share, inside the caller's connection or transaction.
impl<B> SqlStore<B>
where
    B: Backend,
    for<'c> &'c mut B::Connection: Executor<'c, Database = B>,
    // Agent rows are read by name, per-chain values as tuples by index; addresses are bound as text.
    for<'r> Uuid: Encode<'r, B> + Decode<'r, B> + Type<B>,
    for<'r> String: Encode<'r, B> + Decode<'r, B> + Type<B>,
    for<'r> &'r str: Encode<'r, B> + Type<B>,
    for<'r> bool: Decode<'r, B> + Type<B>,
    for<'r> DateTime<Utc>: Decode<'r, B> + Type<B>,
    usize: ColumnIndex<B::Row>,
    for<'r> &'r str: ColumnIndex<B::Row>,
{
    /// The agent with its addresses and spending, and (when a token hash is given) the agent owning that live token:
    /// one statement, one round trip (the authenticated hot path). The agent's columns and the token's owner repeat on
    /// each per-chain row and are read from the first; an agent without any per-chain value gives one row of NULLs.
    async fn load_agent_and_token(
        conn: &mut B::Connection,
        id: Uuid,
        token_hash: Option<&str>,
    ) -> StoreResult<(Agent, Option<Uuid>)> {
        let rows: Vec<B::Row> = sqlx::query(AGENT_DETAIL_SQL.as_str())
            .bind(id)
            .bind(token_hash.unwrap_or_default())
            .fetch_all(&mut *conn)
            .await?;
        let first = rows.first().ok_or(StoreError::AgentNotFound)?;
        let head = AgentTokenRow::from_row(first)?;
        let mut per_chain: Vec<PerChainRow> = Vec::with_capacity(rows.len());
        for row in &rows {
            let kind: Option<String> = row.try_get("per_chain_kind")?;
            let chain: Option<String> = row.try_get("per_chain_chain")?;
            let value: Option<String> = row.try_get("per_chain_value")?;
            if let (Some(kind), Some(chain), Some(value)) = (kind, chain, value) {
                per_chain.push((kind, chain, value));
            }
        }
        let mut agent = head.agent.into_agent()?;
        shared::fill_per_chain(&mut agent, per_chain)?;
        Ok((agent, head.token_owner))
    }

    /// In the transaction that changed the owners: ends the sessions whose address is no longer the owner on their
    /// chain (or, for a session without one, on any chain). The check at each use refuses them all the same.
    async fn end_orphaned_sessions(conn: &mut B::Connection, agent_id: Uuid) -> StoreResult<()> {
        sqlx::query(
            "DELETE FROM owner_sessions WHERE agent_id = $1 AND NOT EXISTS (SELECT 1 FROM owner_addresses o \
             WHERE o.agent_id = owner_sessions.agent_id AND o.address = owner_sessions.address \
             AND (owner_sessions.chain IS NULL OR o.chain = owner_sessions.chain))",
        )
        .bind(agent_id)
        .execute(&mut *conn)
        .await?;
        Ok(())
    }

    async fn replace_owners(
        conn: &mut B::Connection,
        agent_id: Uuid,
        owners: &BTreeMap<String, Address>,
    ) -> StoreResult<()> {
        sqlx::query("DELETE FROM owner_addresses WHERE agent_id = $1")
            .bind(agent_id)
            .execute(&mut *conn)
            .await?;
        for (chain, address) in owners {
            sqlx::query("INSERT INTO owner_addresses (agent_id, chain, address) VALUES ($1, $2, $3)")
                .bind(agent_id)
                .bind(chain)
                .bind(address.to_checksum(None))
                .execute(&mut *conn)
                .await?;
        }
        Ok(())
    }

    async fn add_wallet_addresses(
        conn: &mut B::Connection,
        agent_id: Uuid,
        chains: &[String],
        address: Address,
    ) -> StoreResult<()> {
        for chain in chains {
            sqlx::query(
                "INSERT INTO wallet_addresses (agent_id, chain, address) VALUES ($1, $2, $3) \
                 ON CONFLICT (agent_id, chain) DO NOTHING",
            )
            .bind(agent_id)
            .bind(chain)
            .bind(address.to_checksum(None))
            .execute(&mut *conn)
            .await?;
        }
        Ok(())
    }
}
