//! The confirmation watcher's round, batched: the attempts of every open transfer of a chain in one read, and the
//! settlements of a round in one write transaction, whatever the number of open transfers.

use std::collections::{BTreeMap, BTreeSet};

use alloy::primitives::U256;
use async_trait::async_trait;
use chrono::{DateTime, Utc};
use sqlx::{ColumnIndex, Decode, Encode, Executor, Type};
use uuid::Uuid;

use super::{Backend, SqlStore};
use crate::domain::transaction::{Attempt, AttemptKind, TxState};
use crate::domain::webhook;
use crate::store::shared::{self, EVENT_COLUMNS, EventRow};
use crate::store::{EventRecord, Message, Settlement, SettlementStore, Settling, StoreError, StoreResult};

/// One settlement to write (`SqlStore::settle_all_in`): the transfer, how it settled, its event and its message.
pub(super) struct ToSettle<'a> {
    pub id: Uuid,
    pub settlement: &'a Settlement,
    pub event: &'a serde_json::Value,
    pub message: Option<&'a Message>,
}

/// A transfer as a settlement reads it: id, agent, conversation, chain, reserved wei, status.
type SettlingRow = (Uuid, Uuid, Option<Uuid>, String, String, String);

/// An attempt as read with its transfer and its place: `-1` for the latest (the transfer's row), else its `seq` among
/// the replaced ones.
type OpenAttemptRow = (Uuid, i64, String, Vec<u8>, String, String);

#[async_trait]
impl<B> SettlementStore for SqlStore<B>
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
    usize: ColumnIndex<B::Row>,
    for<'r> &'r str: ColumnIndex<B::Row>,
{
    async fn open_attempts(&self, chain: &str) -> StoreResult<BTreeMap<Uuid, Vec<Attempt>>> {
        // One statement, so that a replacement committed meanwhile is seen whole or not at all.
        let rows: Vec<OpenAttemptRow> = sqlx::query_as(concat!(
            "SELECT id, CAST(-1 AS BIGINT), tx_hash, raw_tx, max_fee_per_gas, attempt_kind FROM transactions \
             WHERE chain = $1 AND status IN ",
            shared::open_statuses!(),
            " \
             UNION ALL \
             SELECT r.transfer_id, r.seq, r.tx_hash, r.raw_tx, r.max_fee_per_gas, r.attempt_kind \
             FROM replaced_attempts r JOIN transactions t ON t.id = r.transfer_id \
             WHERE t.chain = $1 AND t.status IN ",
            shared::open_statuses!()
        ))
        .bind(chain)
        .fetch_all(&self.pool)
        .await?;
        let mut by_transfer: BTreeMap<Uuid, Vec<(i64, Attempt)>> = BTreeMap::new();
        for (id, seq, tx_hash, raw_tx, max_fee, kind) in rows {
            let attempt = Attempt {
                tx_hash,
                raw_tx,
                max_fee_per_gas: max_fee
                    .parse()
                    .map_err(|_| StoreError::Corrupt("max_fee_per_gas".into()))?,
                kind: AttemptKind::parse(&kind).ok_or_else(|| StoreError::Corrupt(format!("attempt_kind {kind}")))?,
            };
            by_transfer.entry(id).or_default().push((seq, attempt));
        }
        Ok(by_transfer
            .into_iter()
            .map(|(id, mut attempts)| {
                // The latest (-1) first, then the replaced ones newest first.
                attempts.sort_by_key(|(seq, _)| if *seq < 0 { i64::MIN } else { -seq });
                (id, attempts.into_iter().map(|(_, a)| a).collect())
            })
            .collect())
    }

    async fn settle_transactions(&self, batch: &[Settling]) -> StoreResult<Vec<Option<EventRecord>>> {
        if batch.is_empty() {
            return Ok(Vec::new());
        }
        // Agents are locked in the order of their ids (PostgreSQL): two writers each locking several never wait for
        // each other in a circle.
        let mut order: Vec<usize> = (0..batch.len()).collect();
        order.sort_by_key(|&i| (batch[i].agent_id, batch[i].id));
        let items: Vec<ToSettle<'_>> = order
            .iter()
            .map(|&i| ToSettle {
                id: batch[i].id,
                settlement: &batch[i].settlement,
                event: &batch[i].event,
                message: batch[i].message.as_ref(),
            })
            .collect();
        let mut records: Vec<Option<EventRecord>> = vec![None; batch.len()];
        let mut tx = B::begin_write(self).await?;
        let mut received = Vec::new();
        for (&i, record) in order.iter().zip(self.settle_all_in(&mut tx, &items).await?) {
            // A settlement of a payment to the agent (§23) settles the payment with it.
            if record.is_some() {
                received.extend(
                    self.income_settled_in(&mut tx, batch[i].id, &batch[i].settlement)
                        .await?,
                );
            }
            records[i] = record;
        }
        tx.commit().await?;
        // Announced only once committed: a follower reading the store after it finds the events there.
        for record in records.iter().flatten().chain(&received) {
            self.feed.announce(record);
        }
        Ok(records)
    }
}

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
    for<'r> Option<Uuid>: Encode<'r, B> + Decode<'r, B>,
    for<'r> Option<String>: Encode<'r, B> + Decode<'r, B>,
    for<'r> Option<&'r str>: Encode<'r, B>,
    for<'r> Option<i64>: Encode<'r, B> + Decode<'r, B>,
    usize: ColumnIndex<B::Row>,
    for<'r> &'r str: ColumnIndex<B::Row>,
{
    /// A mined call's receipt replaces its simulated figures (§18): what it moved beyond them is counted at the
    /// call's time, what it moved short of them taken off its own rows.
    async fn receipt_counts_in(
        conn: &mut B::Connection,
        id: Uuid,
        (agent_id, chain): (Uuid, &str),
        counts: &[crate::store::CountChange],
    ) -> StoreResult<()> {
        let (created_at,): (DateTime<Utc>,) = sqlx::query_as("SELECT created_at FROM transactions WHERE id = $1")
            .bind(id)
            .fetch_one(&mut *conn)
            .await?;
        for count in counts {
            if !count.more.is_zero() {
                sqlx::query(
                    "INSERT INTO call_outflows (transfer_id, agent_id, chain, asset, amount, created_at) \
                     VALUES ($1, $2, $3, $4, $5, $6)",
                )
                .bind(id)
                .bind(agent_id)
                .bind(chain)
                .bind(&count.asset)
                .bind(count.more.to_string())
                .bind(created_at)
                .execute(&mut *conn)
                .await?;
            }
            if count.less.is_zero() {
                continue;
            }
            let rows: Vec<(String,)> =
                sqlx::query_as("SELECT amount FROM call_outflows WHERE transfer_id = $1 AND asset = $2")
                    .bind(id)
                    .bind(&count.asset)
                    .fetch_all(&mut *conn)
                    .await?;
            let mut total = U256::ZERO;
            for (amount,) in rows {
                total = total.saturating_add(shared::wei_from_text(&amount, "call_outflows.amount")?);
            }
            sqlx::query("DELETE FROM call_outflows WHERE transfer_id = $1 AND asset = $2")
                .bind(id)
                .bind(&count.asset)
                .execute(&mut *conn)
                .await?;
            let left = total.saturating_sub(count.less);
            if !left.is_zero() {
                sqlx::query(
                    "INSERT INTO call_outflows (transfer_id, agent_id, chain, asset, amount, created_at) \
                     VALUES ($1, $2, $3, $4, $5, $6)",
                )
                .bind(id)
                .bind(agent_id)
                .bind(chain)
                .bind(&count.asset)
                .bind(left.to_string())
                .bind(created_at)
                .execute(&mut *conn)
                .await?;
            }
        }
        Ok(())
    }

    /// One settlement inside the caller's write transaction (`settle_transaction` alone, `settle_all_in`'s batch of
    /// one). `None` when the transfer was no longer open.
    pub(super) async fn settle_in(
        &self,
        conn: &mut B::Connection,
        id: Uuid,
        settlement: &Settlement,
        event: &serde_json::Value,
        message: Option<&Message>,
    ) -> StoreResult<Option<EventRecord>> {
        let one = ToSettle {
            id,
            settlement,
            event,
            message,
        };
        Ok(self.settle_all_in(conn, &[one]).await?.pop().flatten())
    }

    /// Settlements inside the caller's write transaction (a round's batch), in the order given (the caller's: by
    /// agent id): each transfer's status, the attempt that landed, what counts against the cap, the event and the
    /// message. The transfers' rows are read, and their statuses written, a statement for all of them each (on
    /// SQLite every statement is a hand-over to the connection's thread and back while the one writer waits).
    /// Answers each one's event, `None` for one that was no longer open.
    pub(super) async fn settle_all_in(
        &self,
        conn: &mut B::Connection,
        items: &[ToSettle<'_>],
    ) -> StoreResult<Vec<Option<EventRecord>>> {
        let mut records = Vec::with_capacity(items.len());
        for chunk in items.chunks(shared::ROWS_PER_STATEMENT) {
            records.extend(self.settle_chunk_in(conn, chunk).await?);
        }
        Ok(records)
    }

    async fn settle_chunk_in(
        &self,
        conn: &mut B::Connection,
        items: &[ToSettle<'_>],
    ) -> StoreResult<Vec<Option<EventRecord>>> {
        let sql = format!(
            "SELECT id, agent_id, conversation_id, chain, reserved_wei, status FROM transactions WHERE id IN ({})",
            shared::placeholders(1, items.len())
        );
        let mut read = sqlx::query_as::<_, SettlingRow>(sqlx::AssertSqlSafe(sql));
        for item in items {
            read = read.bind(item.id);
        }
        let rows: BTreeMap<Uuid, SettlingRow> = read
            .fetch_all(&mut *conn)
            .await?
            .into_iter()
            .map(|row| (row.0, row))
            .collect();
        let found: Vec<(&ToSettle<'_>, &SettlingRow)> = items
            .iter()
            .filter_map(|item| rows.get(&item.id).map(|row| (item, row)))
            .collect();
        // Each agent first, as reservations do, so the spending rows change under their locks.
        let mut locked: Vec<Uuid> = Vec::new();
        for (_, row) in &found {
            if !locked.contains(&row.1) {
                B::lock_agent(&mut *conn, row.1).await?;
                locked.push(row.1);
            }
        }
        // Landed while still `signed`: its `pending` mark rides in a lazy round (or its sender died before it).
        // Marked here, with its `transfer.pending` event, so that every settled transfer's event comes first.
        let signed: Vec<Uuid> = found
            .iter()
            .filter(|(_, row)| row.5 == TxState::Signed.as_str())
            .map(|(item, _)| item.id)
            .collect();
        self.mark_pending_in(&mut *conn, &signed).await?;
        let now = self.now();
        let settled: BTreeSet<Uuid> = self.write_statuses_in(conn, &found, now).await?.into_iter().collect();
        let listening = Self::any_listening_in(conn, &locked).await?;
        let mut records = Vec::with_capacity(items.len());
        for item in items {
            let record = match (settled.contains(&item.id), rows.get(&item.id)) {
                (true, Some(row)) => Some(self.settled_in(conn, (item, row), listening, now).await?),
                _ => None,
            };
            records.push(record);
        }
        Ok(records)
    }

    /// Writes the settlements' statuses in one statement, each only where its transfer is still open; answers the
    /// transfers it wrote. (After the `pending` marks: their events are the older.)
    async fn write_statuses_in(
        &self,
        conn: &mut B::Connection,
        found: &[(&ToSettle<'_>, &SettlingRow)],
        now: DateTime<Utc>,
    ) -> StoreResult<Vec<Uuid>> {
        if found.is_empty() {
            return Ok(Vec::new());
        }
        let case = |column: usize| {
            (0..found.len())
                .map(|i| format!("WHEN ${} THEN ${}", i * 5 + 1, i * 5 + column))
                .collect::<Vec<_>>()
                .join(" ")
        };
        let ids: Vec<String> = (0..found.len()).map(|i| format!("${}", i * 5 + 1)).collect();
        let sql = format!(
            "UPDATE transactions SET status = CASE id {} END, block_number = CASE id {} END, \
             gas_used = CASE id {} END, actual_cost_wei = CASE id {} END, updated_at = ${} \
             WHERE id IN ({}) AND status IN {} RETURNING id",
            case(2),
            case(3),
            case(4),
            case(5),
            found.len() * 5 + 1,
            ids.join(", "),
            shared::open_statuses!()
        );
        let mut update = sqlx::query_as::<_, (Uuid,)>(sqlx::AssertSqlSafe(sql));
        for (item, _) in found {
            let s = item.settlement;
            update = update
                .bind(item.id)
                .bind(s.status.as_str())
                .bind(s.block_number.map(|n| n as i64))
                .bind(s.gas_used.map(|n| n as i64))
                .bind(s.actual_cost_wei.map(|w| w.to_string()));
        }
        let written = update.bind(now).fetch_all(&mut *conn).await?;
        Ok(written.into_iter().map(|(id,)| id).collect())
    }

    /// The rest of a settlement whose status was written (`settle_chunk_in`): the attempt that landed, what counts
    /// against the cap, the event, its webhook (when an endpoint of its chunk's agents is `listening`) and the
    /// message.
    async fn settled_in(
        &self,
        conn: &mut B::Connection,
        (item, (_, agent_id, conversation_id, chain, reserved, _)): (&ToSettle<'_>, &SettlingRow),
        listening: bool,
        now: DateTime<Utc>,
    ) -> StoreResult<EventRecord> {
        let (id, s, agent_id) = (item.id, item.settlement, *agent_id);
        if let Some(hash) = &s.landed {
            self.adopt_in(&mut *conn, id, hash).await?;
        }
        let reserved = shared::wei_from_text(reserved, "reserved_wei")?;
        let actual = s.actual_cost_wei.unwrap_or(U256::ZERO);
        Self::adjust_spent(&mut *conn, agent_id, chain, actual, reserved).await?;
        if !s.counts.is_empty() {
            Self::receipt_counts_in(&mut *conn, id, (agent_id, chain), &s.counts).await?;
        }
        let row: EventRow = sqlx::query_as(sqlx::AssertSqlSafe(format!(
            "INSERT INTO events (conversation_id, agent_id, kind, payload, created_at) VALUES ($1, $2, $3, $4, $5) \
             RETURNING {EVENT_COLUMNS}"
        )))
        .bind(*conversation_id)
        .bind(agent_id)
        .bind("tx_confirmation")
        .bind(item.event.to_string())
        .bind(now)
        .fetch_one(&mut *conn)
        .await?;
        let record = row.into_event()?;
        if let Some(mut pushed) =
            webhook::from_stream(agent_id, "tx_confirmation", item.event, now).filter(|_| listening)
        {
            pushed.data["transfer_id"] = serde_json::json!(id);
            Self::outbox_in(&mut *conn, pushed).await?;
        }
        if let Some(message) = item.message {
            // The conversation may have been deleted meanwhile; the event is stored all the same.
            let exists: Option<(Uuid,)> = sqlx::query_as("SELECT id FROM conversations WHERE id = $1")
                .bind(message.conversation_id)
                .fetch_optional(&mut *conn)
                .await?;
            if exists.is_some() {
                Self::insert_message_in(&mut *conn, message).await?;
            }
        }
        B::notify_event(&mut *conn, record.id).await?;
        Ok(record)
    }
}
