//! Sponsored user operations, their bundles and the sponsor keys (§22), for both dialects. The reservation's part
//! (`held_of_deposit_in`, `insert_operation_in`; the account's next nonce comes with the sponsorship, `sponsorship_in`) runs inside the reserving transaction.

use alloy::primitives::U256;
use async_trait::async_trait;
use chrono::{DateTime, Utc};
use sqlx::{ColumnIndex, Decode, Encode, Executor, Type};
use uuid::Uuid;

use super::settlements::ToSettle;
use super::{Backend, SqlStore};
use crate::store::operations::{BundleRecord, OpenOperation, OperationPart, OperationStore, SettlingOperation};
use crate::store::shared::{self, KeyRow};
use crate::store::{EventRecord, StoreError, StoreResult};
use crate::vault::EncryptedKey;

#[async_trait]
impl<B> OperationStore for SqlStore<B>
where
    B: Backend,
    for<'c> &'c mut B::Connection: Executor<'c, Database = B>,
    for<'r> Uuid: Encode<'r, B> + Decode<'r, B> + Type<B>,
    for<'r> String: Encode<'r, B> + Decode<'r, B> + Type<B>,
    for<'r> &'r str: Encode<'r, B> + Type<B>,
    for<'r> i64: Encode<'r, B> + Decode<'r, B> + Type<B>,
    for<'r> i32: Encode<'r, B> + Decode<'r, B> + Type<B>,
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
    async fn sponsor_key(&self, chain: &str) -> StoreResult<Option<EncryptedKey>> {
        let row: Option<KeyRow> =
            sqlx::query_as("SELECT address, ciphertext, nonce, key_version, scheme FROM sponsor_keys WHERE chain = $1")
                .bind(chain)
                .fetch_optional(&self.pool)
                .await?;
        row.map(KeyRow::into_key).transpose()
    }

    async fn init_sponsor_key(&self, chain: &str, key_id: Uuid, key: &EncryptedKey) -> StoreResult<EncryptedKey> {
        sqlx::query(
            "INSERT INTO sponsor_keys (chain, key_id, scheme, address, ciphertext, nonce, key_version, created_at) \
             VALUES ($1, $2, $3, $4, $5, $6, $7, $8) ON CONFLICT (chain) DO NOTHING",
        )
        .bind(chain)
        .bind(key_id)
        .bind(key.scheme.as_str())
        .bind(key.address.to_checksum(None))
        .bind(&key.ciphertext)
        .bind(&key.nonce)
        .bind(key.key_version)
        .bind(self.now())
        .execute(&self.pool)
        .await?;
        self.sponsor_key(chain)
            .await?
            .ok_or_else(|| StoreError::Corrupt("a sponsor key vanished as it was stored".into()))
    }

    async fn open_operations(&self, chain: &str, in_no_bundle: bool) -> StoreResult<Vec<OpenOperation>> {
        type Row = (
            Uuid,
            Uuid,
            String,
            i64,
            Vec<u8>,
            String,
            String,
            i64,
            Option<Uuid>,
            String,
            String,
            Option<i64>,
            i64,
        );
        let sql = match in_no_bundle {
            true => OPEN_OPERATIONS_IN_NO_BUNDLE,
            false => OPEN_OPERATIONS,
        };
        let rows: Vec<Row> = sqlx::query_as(sql).bind(chain).fetch_all(&self.pool).await?;
        rows.into_iter()
            .map(
                |(
                    transfer_id,
                    agent_id,
                    from,
                    nonce,
                    packed,
                    hash,
                    fee,
                    until,
                    bundle_id,
                    status,
                    reserved,
                    read,
                    alone,
                )| {
                    Ok(OpenOperation {
                        transfer_id,
                        agent_id,
                        sender: shared::address_from_text(&from)?,
                        nonce: shared::u64_from(nonce, "transactions.nonce")?,
                        packed,
                        user_op_hash: hash,
                        max_fee_per_gas: fee
                            .parse()
                            .map_err(|_| StoreError::Corrupt("transactions.max_fee_per_gas".into()))?,
                        valid_until: shared::u64_from(until, "user_operations.valid_until")?,
                        bundle_id,
                        status,
                        reserved: shared::wei_from_text(&reserved, "transactions.reserved_wei")?,
                        read_block: read
                            .map(|n| shared::u64_from(n, "user_operations.read_block"))
                            .transpose()?,
                        alone: alone != 0,
                    })
                },
            )
            .collect()
    }

    async fn designate(
        &self,
        (transfer_id, agent_id, chain): (Uuid, Uuid, &str),
        nonce: u64,
        rlp: &[u8],
    ) -> StoreResult<bool> {
        let nonce = i64::try_from(nonce).map_err(|_| StoreError::Corrupt("an authorization's nonce".into()))?;
        let mut tx = B::begin_write(self).await?;
        // As a reservation does: the wallet's transactions and its nonce counter stay still until this commits.
        B::lock_agent(&mut tx, agent_id).await?;
        let (open, counted): (i64, Option<i64>) = sqlx::query_as(concat!(
            "SELECT (SELECT COUNT(*) FROM transactions WHERE agent_id = $1 AND chain = $2 AND kind = 'transfer' \
             AND status IN ",
            shared::open_statuses!(),
            "), (SELECT next_nonce FROM nonces WHERE agent_id = $1 AND chain = $2)"
        ))
        .bind(agent_id)
        .bind(chain)
        .fetch_one(&mut *tx)
        .await?;
        if open > 0 || counted.is_some_and(|next| next > nonce) {
            return Ok(false);
        }
        let recorded = sqlx::query(concat!(
            "UPDATE user_operations SET authorization_rlp = $1, authorization_nonce = $2 WHERE transfer_id = $3 \
             AND transfer_id IN (SELECT id FROM transactions WHERE kind = 'user_op' AND status IN ",
            shared::open_statuses!(),
            ")"
        ))
        .bind(rlp.to_vec())
        .bind(nonce)
        .bind(transfer_id)
        .execute(&mut *tx)
        .await?;
        if B::rows_affected(&recorded) == 0 {
            return Ok(false);
        }
        tx.commit().await?;
        Ok(true)
    }

    async fn next_bundle_nonce(&self, chain: &str) -> StoreResult<Option<u64>> {
        let row: (Option<i64>,) = sqlx::query_as(NEXT_BUNDLE_NONCE)
            .bind(chain)
            .fetch_one(&self.pool)
            .await?;
        row.0
            .map(|n| shared::u64_from(n, "bundles.nonce").map(|n| n + 1))
            .transpose()
    }

    async fn record_bundles(&self, bundles: &[(BundleRecord, Vec<Uuid>)]) -> StoreResult<()> {
        let (mut tx, now) = (B::begin_write(self).await?, self.now());
        for (bundle, operations) in bundles {
            Self::insert_bundle_in(&mut tx, bundle, now).await?;
            Self::carry_in(&mut tx, bundle.id, operations).await?;
        }
        let carried: Vec<Uuid> = bundles.iter().flat_map(|(_, ops)| ops.iter().copied()).collect();
        self.mark_pending_in(&mut tx, &carried).await?;
        tx.commit().await?;
        Ok(())
    }

    async fn settle_operations(&self, batch: &[SettlingOperation]) -> StoreResult<Vec<Option<EventRecord>>> {
        if batch.is_empty() {
            return Ok(Vec::new());
        }
        // Agents are locked in the order of their ids (PostgreSQL): two writers each locking several never wait for
        // each other in a circle.
        let mut order: Vec<usize> = (0..batch.len()).collect();
        order.sort_by_key(|&i| (batch[i].agent_id, batch[i].id));
        let items: Vec<ToSettle<'_>> = order
            .iter()
            .map(|&i| {
                let s = &batch[i].settlement;
                ToSettle {
                    id: batch[i].id,
                    settlement: &s.settlement,
                    event: &s.event,
                    message: s.message.as_ref(),
                }
            })
            .collect();
        let mut records: Vec<Option<EventRecord>> = vec![None; batch.len()];
        let mut tx = B::begin_write(self).await?;
        let mut settled = Vec::with_capacity(batch.len());
        for (&i, record) in order.iter().zip(self.settle_all_in(&mut tx, &items).await?) {
            if record.is_some() {
                settled.push(&batch[i]);
            }
            records[i] = record;
        }
        let mut received = Vec::new();
        for some in settled.chunks(shared::ROWS_PER_STATEMENT) {
            received.extend(self.operations_settled_in(&mut tx, some).await?);
        }
        tx.commit().await?;
        // Announced only once committed: a follower reading the store after it finds the events there.
        for record in records.iter().flatten().chain(&received) {
            self.feed.announce(record);
        }
        Ok(records)
    }

    async fn operation_part(&self, transfer_id: Uuid) -> StoreResult<Option<OperationPart>> {
        let row: Option<(String, Option<String>, Option<String>)> = sqlx::query_as(
            "SELECT u.user_op_hash, b.tx_hash, u.gas_cost FROM user_operations u \
             LEFT JOIN bundles b ON b.id = u.bundle_id WHERE u.transfer_id = $1",
        )
        .bind(transfer_id)
        .fetch_optional(&self.pool)
        .await?;
        row.map(|(user_op_hash, bundle_hash, gas_cost)| {
            Ok(OperationPart {
                user_op_hash,
                bundle_hash,
                gas_cost: gas_cost
                    .map(|c| shared::wei_from_text(&c, "user_operations.gas_cost"))
                    .transpose()?,
            })
        })
        .transpose()
    }

    async fn held_of_deposit(&self, chain: &str) -> StoreResult<U256> {
        let mut conn = self.pool.acquire().await?;
        Self::held_of_deposit_in(&mut conn, chain).await
    }

    async fn open_bundles(&self, chain: &str) -> StoreResult<Vec<BundleRecord>> {
        self.bundles_where("chain = $1 AND status = 'signed' ORDER BY nonce", chain, None)
            .await
    }

    async fn close_bundles(&self, closing: &[(Uuid, &str, Option<U256>)]) -> StoreResult<u64> {
        if closing.is_empty() {
            return Ok(0);
        }
        let (mut tx, now) = (B::begin_write(self).await?, self.now());
        let mut released = 0;
        for (id, status, gas_cost) in closing {
            sqlx::query("UPDATE bundles SET status = $1, gas_cost = $2, updated_at = $3 WHERE id = $4")
                .bind(*status)
                .bind(gas_cost.map(|c| c.to_string()))
                .bind(now)
                .bind(*id)
                .execute(&mut *tx)
                .await?;
            released += Self::release_in(&mut tx, *id).await?;
        }
        tx.commit().await?;
        Ok(released)
    }

    async fn replace_bundle(&self, old: Uuid, new: &BundleRecord, operations: &[Uuid]) -> StoreResult<bool> {
        let mut tx = B::begin_write(self).await?;
        let now = self.now();
        let closed =
            sqlx::query("UPDATE bundles SET status = 'replaced', updated_at = $1 WHERE id = $2 AND status = 'signed'")
                .bind(now)
                .bind(old)
                .execute(&mut *tx)
                .await?;
        if B::rows_affected(&closed) == 0 {
            return Ok(false);
        }
        Self::insert_bundle_in(&mut tx, new, now).await?;
        sqlx::query("UPDATE user_operations SET bundle_id = NULL WHERE bundle_id = $1")
            .bind(old)
            .execute(&mut *tx)
            .await?;
        Self::carry_in(&mut tx, new.id, operations).await?;
        tx.commit().await?;
        Ok(true)
    }

    async fn bundle_attempts(&self, chain: &str, nonce: u64) -> StoreResult<Vec<BundleRecord>> {
        let nonce = i64::try_from(nonce).map_err(|_| StoreError::Corrupt("bundles.nonce".into()))?;
        self.bundles_where(
            "chain = $1 AND nonce = $2 AND status = 'replaced' ORDER BY created_at DESC",
            chain,
            Some(nonce),
        )
        .await
    }

    async fn earlier_attempt_mined(&self, live: Uuid, landed: Uuid, gas_cost: U256) -> StoreResult<u64> {
        let mut tx = B::begin_write(self).await?;
        let now = self.now();
        // The live one first: one bundle at a nonce is not `replaced`.
        sqlx::query("UPDATE bundles SET status = 'replaced', updated_at = $1 WHERE id = $2 AND status = 'signed'")
            .bind(now)
            .bind(live)
            .execute(&mut *tx)
            .await?;
        sqlx::query("UPDATE bundles SET status = 'mined', gas_cost = $1, updated_at = $2 WHERE id = $3")
            .bind(gas_cost.to_string())
            .bind(now)
            .bind(landed)
            .execute(&mut *tx)
            .await?;
        let released = Self::release_in(&mut tx, live).await?;
        tx.commit().await?;
        Ok(released)
    }

    async fn failed_on_chain(&self, transfer_id: Uuid, bundle_hash: &str, gas_cost: U256) -> StoreResult<()> {
        let mut tx = B::begin_write(self).await?;
        let row: Option<(Option<String>, Option<String>)> =
            sqlx::query_as("SELECT failed_in, failed_gas FROM user_operations WHERE transfer_id = $1")
                .bind(transfer_id)
                .fetch_optional(&mut *tx)
                .await?;
        let Some((failed_in, failed_gas)) = row else {
            return Ok(());
        };
        // Once per bundle: a round that read the same receipt again adds nothing.
        if failed_in.as_deref() == Some(bundle_hash) {
            return Ok(());
        }
        let before = failed_gas
            .map(|g| shared::wei_from_text(&g, "user_operations.failed_gas"))
            .transpose()?
            .unwrap_or_default();
        sqlx::query("UPDATE user_operations SET failed_in = $1, failed_gas = $2 WHERE transfer_id = $3")
            .bind(bundle_hash)
            .bind(before.saturating_add(gas_cost).to_string())
            .bind(transfer_id)
            .execute(&mut *tx)
            .await?;
        tx.commit().await?;
        Ok(())
    }
}

/// The bundles' rows, for both dialects.
impl<B> SqlStore<B>
where
    B: Backend,
    for<'c> &'c mut B::Connection: Executor<'c, Database = B>,
    for<'r> Uuid: Encode<'r, B> + Decode<'r, B> + Type<B>,
    for<'r> String: Encode<'r, B> + Decode<'r, B> + Type<B>,
    for<'r> &'r str: Encode<'r, B> + Type<B>,
    for<'r> i64: Encode<'r, B> + Decode<'r, B> + Type<B>,
    for<'r> DateTime<Utc>: Encode<'r, B> + Decode<'r, B> + Type<B>,
    for<'r> Vec<u8>: Encode<'r, B> + Decode<'r, B> + Type<B>,
    for<'r> Option<i64>: Encode<'r, B>,
    usize: ColumnIndex<B::Row>,
{
    /// The bundles of `chain` (`$1`) matching `filter`, a constant of this file (which may name `$2`, bound to
    /// `nonce`).
    async fn bundles_where(&self, filter: &str, chain: &str, nonce: Option<i64>) -> StoreResult<Vec<BundleRecord>> {
        type Row = (Uuid, String, i64, String, Vec<u8>, i64, String, DateTime<Utc>);
        let sql = format!(
            "SELECT id, chain, nonce, tx_hash, raw_tx, gas_limit, max_fee_per_gas, updated_at FROM bundles WHERE {filter}"
        );
        let mut query = sqlx::query_as::<B, Row>(sqlx::AssertSqlSafe(sql)).bind(chain);
        if let Some(nonce) = nonce {
            query = query.bind(nonce);
        }
        let rows = query.fetch_all(&self.pool).await?;
        rows.into_iter()
            .map(|(id, chain, nonce, tx_hash, raw_tx, gas_limit, fee, signed_at)| {
                Ok(BundleRecord {
                    id,
                    chain,
                    nonce: shared::u64_from(nonce, "bundles.nonce")?,
                    tx_hash,
                    raw_tx,
                    gas_limit: shared::u64_from(gas_limit, "bundles.gas_limit")?,
                    max_fee_per_gas: fee
                        .parse()
                        .map_err(|_| StoreError::Corrupt("bundles.max_fee_per_gas".into()))?,
                    signed_at,
                })
            })
            .collect()
    }

    /// Stores a signed bundle (`signed`) in the writing transaction.
    async fn insert_bundle_in(conn: &mut B::Connection, bundle: &BundleRecord, now: DateTime<Utc>) -> StoreResult<()> {
        sqlx::query(
            "INSERT INTO bundles (id, chain, nonce, tx_hash, raw_tx, gas_limit, max_fee_per_gas, status, created_at, \
             updated_at) VALUES ($1, $2, $3, $4, $5, $6, $7, 'signed', $8, $8)",
        )
        .bind(bundle.id)
        .bind(&bundle.chain)
        .bind(i64::try_from(bundle.nonce).map_err(|_| StoreError::Corrupt("bundles.nonce".into()))?)
        .bind(&bundle.tx_hash)
        .bind(&bundle.raw_tx)
        .bind(i64::try_from(bundle.gas_limit).unwrap_or(i64::MAX))
        .bind(bundle.max_fee_per_gas.to_string())
        .bind(now)
        .execute(&mut *conn)
        .await?;
        Ok(())
    }

    /// Names `bundle` as the carrier of `operations` in the writing transaction.
    async fn carry_in(conn: &mut B::Connection, bundle: Uuid, operations: &[Uuid]) -> StoreResult<()> {
        for chunk in operations.chunks(shared::ROWS_PER_STATEMENT) {
            let sql = format!(
                "UPDATE user_operations SET bundle_id = $1 WHERE transfer_id IN ({})",
                shared::placeholders(2, chunk.len())
            );
            let mut update = sqlx::query(sqlx::AssertSqlSafe(sql)).bind(bundle);
            for id in chunk {
                update = update.bind(*id);
            }
            update.execute(&mut *conn).await?;
        }
        Ok(())
    }
}

/// The reservation's part, inside the reserving transaction.
impl<B> SqlStore<B>
where
    B: Backend,
    for<'c> &'c mut B::Connection: Executor<'c, Database = B>,
    for<'r> Uuid: Encode<'r, B> + Type<B>,
    for<'r> String: Encode<'r, B> + Decode<'r, B> + Type<B>,
    for<'r> &'r str: Encode<'r, B> + Type<B>,
    for<'r> i64: Encode<'r, B> + Decode<'r, B> + Type<B>,
    for<'r> DateTime<Utc>: Encode<'r, B> + Type<B>,
    for<'r> Option<i64>: Decode<'r, B>,
    usize: ColumnIndex<B::Row>,
{
    /// The open operations `bundle` carried wait for another bundle again; answers how many.
    async fn release_in(conn: &mut B::Connection, bundle: Uuid) -> StoreResult<u64> {
        let released = sqlx::query(concat!(
            "UPDATE user_operations SET bundle_id = NULL WHERE bundle_id = $1 AND transfer_id IN \
             (SELECT id FROM transactions WHERE kind = 'user_op' AND status IN ",
            shared::open_statuses!(),
            ")"
        ))
        .bind(bundle)
        .execute(&mut *conn)
        .await?;
        Ok(B::rows_affected(&released))
    }

    /// What this service's operations on `chain` not yet settled hold of the paymaster's deposit: their maximum
    /// costs (the EntryPoint takes each one's prefund from the deposit as it validates it).
    pub(super) async fn held_of_deposit_in(conn: &mut B::Connection, chain: &str) -> StoreResult<U256> {
        let (joined,): (Option<String>,) = sqlx::query_as(sqlx::AssertSqlSafe(held_of_deposit(B::TEXT_AGG)))
            .bind(chain)
            .fetch_one(&mut *conn)
            .await?;
        shared::sum_joined(joined.as_deref(), "user_operations.max_cost")
    }

    /// The wallet's nonce of the agent's EIP-7702 authorization that an operation of it still open on `chain`
    /// carries (`designate`), unless the wallet's mined nonce read before (`mined_nonce`) shows it used; and the
    /// wallet's next nonce past an authorization so used (it landed; its operation is not settled yet).
    pub(super) async fn designation_in(
        conn: &mut B::Connection,
        (agent_id, chain): (Uuid, &str),
        mined_nonce: Option<u64>,
    ) -> StoreResult<(Option<u64>, Option<u64>)> {
        let (max,): (Option<i64>,) = sqlx::query_as(concat!(
            "SELECT MAX(u.authorization_nonce) FROM user_operations u JOIN transactions t ON t.id = u.transfer_id \
             WHERE u.agent_id = $1 AND u.chain = $2 AND u.authorization_nonce IS NOT NULL AND t.status IN ",
            shared::open_statuses!()
        ))
        .bind(agent_id)
        .bind(chain)
        .fetch_one(&mut *conn)
        .await?;
        let Some(nonce) = max
            .map(|n| shared::u64_from(n, "user_operations.authorization_nonce"))
            .transpose()?
        else {
            return Ok((None, None));
        };
        Ok(match mined_nonce {
            Some(mined) if mined > nonce => (None, Some(nonce + 1)),
            _ => (Some(nonce), None),
        })
    }

    /// Stores the sponsorship part of a sponsored outflow reserved in this transaction.
    pub(super) async fn insert_operation_in(
        conn: &mut B::Connection,
        (transfer_id, agent_id, chain): (Uuid, Uuid, &str),
        user_op_hash: &str,
        (max_cost, valid_until, read_block): (U256, u64, u64),
        now: DateTime<Utc>,
    ) -> StoreResult<()> {
        sqlx::query(
            "INSERT INTO user_operations (transfer_id, agent_id, chain, user_op_hash, max_cost, valid_until, \
             created_at, read_block) VALUES ($1, $2, $3, $4, $5, $6, $7, $8)",
        )
        .bind(transfer_id)
        .bind(agent_id)
        .bind(chain)
        .bind(user_op_hash)
        .bind(max_cost.to_string())
        .bind(i64::try_from(valid_until).unwrap_or(i64::MAX))
        .bind(now)
        .bind(i64::try_from(read_block).unwrap_or(i64::MAX))
        .execute(&mut *conn)
        .await?;
        Ok(())
    }
}

/// What the open user operations of a chain hold of its paymaster's deposit: read for every sponsored request, by
/// the index of the open operations (`transactions_open_operations`). Their maximum costs come back joined in one
/// row by the backend's text aggregate (`agg`): on SQLite each row of an answer is one hand-over from the
/// connection's thread, and a busy chain has hundreds of operations open.
fn held_of_deposit(agg: &str) -> String {
    format!(
        "SELECT {agg}(u.max_cost, ',') FROM transactions t JOIN user_operations u ON u.transfer_id = t.id \
         WHERE t.chain = $1 AND t.kind = 'user_op' AND t.status IN {}",
        shared::OPEN
    )
}

/// The open operations of a chain (`$1`), each with whether its agent goes in bundles of its own (its key was ever
/// exported, or one of its operations failed validation on chain), to be ordered (and narrowed): read every bundler
/// round. The two questions are asked through indexes of the rare rows that answer yes (migration 0035), not through
/// every audit entry and every operation of the agent.
macro_rules! open_operations {
    () => {
        concat!(
            "SELECT t.id, t.agent_id, t.from_address, t.nonce, t.raw_tx, u.user_op_hash, t.max_fee_per_gas, \
             u.valid_until, u.bundle_id, t.status, t.reserved_wei, u.read_block, CAST(CASE WHEN EXISTS (SELECT 1 \
             FROM audit_events a WHERE a.agent_id = t.agent_id AND a.action = 'key_exported') OR EXISTS (SELECT 1 \
             FROM user_operations f WHERE f.agent_id = t.agent_id AND f.chain = t.chain AND f.failed_in IS NOT NULL) \
             THEN 1 ELSE 0 END AS BIGINT) \
             FROM transactions t JOIN user_operations u ON u.transfer_id = t.id \
             WHERE t.chain = $1 AND t.kind = 'user_op' AND t.status IN ",
            shared::open_statuses!()
        )
    };
}

/// Every open operation of the chain (a round that follows the open bundles settles them).
const OPEN_OPERATIONS: &str = concat!(open_operations!(), " ORDER BY t.agent_id, t.nonce");
/// The open operations of the chain no bundle carries (a round that only carries).
const OPEN_OPERATIONS_IN_NO_BUNDLE: &str = concat!(
    open_operations!(),
    " AND u.bundle_id IS NULL ORDER BY t.agent_id, t.nonce"
);

/// The highest nonce a bundle of the chain took, by the index of bundles by chain and nonce (migration 0035).
const NEXT_BUNDLE_NONCE: &str = "SELECT MAX(nonce) FROM bundles WHERE chain = $1";

mod settled;

#[cfg(test)]
mod tests {
    /// The steps of SQLite's plan for `sql` (one text parameter) on the migrated schema.
    async fn plan(sql: &str) -> Vec<String> {
        let pool = sqlx::sqlite::SqlitePoolOptions::new()
            .max_connections(1)
            .connect("sqlite::memory:")
            .await
            .expect("an in-memory database");
        sqlx::migrate!("./migrations/sqlite")
            .run(&pool)
            .await
            .expect("migrations");
        let plan: Vec<(i64, i64, i64, String)> =
            sqlx::query_as(sqlx::AssertSqlSafe(format!("EXPLAIN QUERY PLAN {sql}")))
                .bind("base")
                .fetch_all(&pool)
                .await
                .expect("a plan");
        plan.into_iter().map(|(.., step)| step).collect()
    }

    /// The bundler's round reads whether each open operation's agent goes alone through the indexes of the rare
    /// rows that say so, and its next nonce through the index by chain and nonce (before migration 0035: every
    /// audit entry and operation of the agent, for each open operation, and every bundle of the chain).
    #[tokio::test]
    async fn the_bundlers_reads_go_through_their_indexes() {
        for sql in [super::OPEN_OPERATIONS, super::OPEN_OPERATIONS_IN_NO_BUNDLE] {
            let steps = plan(sql).await;
            for index in [
                "audit_events_key_exported",
                "user_operations_failed",
                "transactions_open_operations",
            ] {
                assert!(steps.iter().any(|s| s.contains(index)), "{index}: {steps:?}");
            }
        }
        let steps = plan(super::NEXT_BUNDLE_NONCE).await;
        assert!(steps.iter().any(|s| s.contains("bundles_chain_nonce")), "{steps:?}");
    }

    /// The deposit's holds are read through the open operations only, not through every operation the chain ever
    /// had (the plan before migration 0034 searched `user_operations_hash` by chain).
    #[tokio::test]
    async fn the_deposits_holds_are_read_through_the_open_operations_only() {
        let steps = plan(&super::held_of_deposit("group_concat")).await;
        assert!(
            steps.iter().any(|s| s.contains("transactions_open_operations")),
            "{steps:?}"
        );
        assert!(!steps.iter().any(|s| s.contains("user_operations_hash")), "{steps:?}");
    }
}
