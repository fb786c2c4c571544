//! The webhook outbox (§19) in SQL, written inside the transaction of each change it reports: an event recorded
//! unless no enabled endpoint could receive it (`outbox_in`), and a reservation round's accepted transfers marked
//! `pending` with their events and audit entries (`record_outflows_in`, `mark_pending_in`).

use chrono::{DateTime, Utc};
use serde_json::{Value, json};
use sqlx::{ColumnIndex, Decode, Encode, Executor, Type};
use uuid::Uuid;

use super::super::{Backend, SqlStore};
use crate::domain::amount::format_units;
use crate::domain::webhook::WebhookEvent;
use crate::store::shared::{self, TX_COLUMNS, TxRow};
use crate::store::{AuditEvent, OutflowEntry, StoreResult, StoredTx};

/// A transfer `mark_pending_in` moved, and whether its `transfer.pending` goes out (not a nonce fill, and an enabled
/// endpoint listens to its agent).
#[derive(sqlx::FromRow)]
struct MovedRow {
    #[sqlx(flatten)]
    tx: TxRow,
    heard: i64,
}

impl<B> SqlStore<B>
where
    B: Backend,
    for<'c> &'c mut B::Connection: Executor<'c, Database = B>,
    for<'r> Uuid: Encode<'r, B> + Type<B>,
    for<'r> String: Encode<'r, B> + Decode<'r, B> + Type<B>,
    for<'r> &'r str: Encode<'r, B> + Type<B>,
    for<'r> i64: Decode<'r, B> + Type<B>,
    for<'r> DateTime<Utc>: Encode<'r, B> + Type<B>,
    usize: ColumnIndex<B::Row>,
{
    /// Whether any enabled webhook endpoint could receive an event of `agents` (one of theirs, or one for every
    /// agent): when none can, their events go to no outbox (a batch of settlements asks once for all its agents).
    pub(in crate::store::sql) async fn any_listening_in(
        conn: &mut B::Connection,
        agents: &[Uuid],
    ) -> StoreResult<bool> {
        if agents.is_empty() {
            return Ok(false);
        }
        let sql = format!(
            "SELECT CAST(1 AS BIGINT) FROM webhooks WHERE enabled = TRUE AND (agent_id IS NULL OR agent_id IN ({})) \
             LIMIT 1",
            shared::placeholders(1, agents.len())
        );
        let mut query = sqlx::query_as::<_, (i64,)>(sqlx::AssertSqlSafe(sql));
        for agent in agents {
            query = query.bind(*agent);
        }
        Ok(query.fetch_optional(&mut *conn).await?.is_some())
    }

    /// Records `event` in the outbox inside the caller's transaction (the change it reports), unless no enabled
    /// endpoint could receive it; a transfer's `kind` is added when the event does not carry it.
    pub(in crate::store::sql) async fn outbox_in(conn: &mut B::Connection, event: WebhookEvent) -> StoreResult<()> {
        if !Self::any_listening_in(conn, &[event.agent_id]).await? {
            return Ok(());
        }
        let mut event = event;
        if let Some(transfer_id) = event.transfer_id()
            && (event.data.get("kind").is_none() || event.data.get("to").is_none())
        {
            let facts: Option<(String, String)> = sqlx::query_as(
                "SELECT CASE WHEN call_record IS NOT NULL THEN 'call' ELSE kind END, to_address FROM transactions \
                 WHERE id = $1 UNION ALL SELECT CASE WHEN call_record IS NOT NULL THEN 'call' ELSE kind END, \
                 to_address FROM approvals WHERE id = $1",
            )
            .bind(transfer_id)
            .fetch_optional(&mut *conn)
            .await?;
            if let Some((kind, to)) = facts {
                let to = to
                    .parse::<alloy::primitives::Address>()
                    .map_or(to, |a| a.to_checksum(None));
                let map = event.data.as_object_mut().expect("event data is an object");
                map.entry("kind").or_insert(Value::String(kind));
                map.entry("to").or_insert(Value::String(to));
            }
        }
        Self::insert_outbox(conn, std::slice::from_ref(&event)).await
    }

    /// Inserts `events` in the outbox (one statement per `ROWS_PER_STATEMENT`; one already there by its id or
    /// `dedup` is skipped) and wakes the delivery workers once when any row went in.
    async fn insert_outbox(conn: &mut B::Connection, events: &[WebhookEvent]) -> StoreResult<()> {
        let mut inserted = 0;
        for chunk in events.chunks(shared::ROWS_PER_STATEMENT) {
            let sql = format!(
                "INSERT INTO webhook_events (id, type, agent_id, body, dedup, created_at) VALUES {} \
                 ON CONFLICT DO NOTHING",
                shared::value_rows(chunk.len(), &["?", "?", "?", "?", "NULLIF(?, '')", "?"])
            );
            let mut insert = sqlx::query(sqlx::AssertSqlSafe(sql));
            for event in chunk {
                insert = insert
                    .bind(event.id)
                    .bind(event.ty)
                    .bind(event.agent_id)
                    .bind(event.body())
                    .bind(event.dedup.clone().unwrap_or_default())
                    .bind(event.at);
            }
            inserted += B::rows_affected(&insert.execute(&mut *conn).await?);
        }
        if inserted > 0 {
            B::notify_outbox(conn).await?;
        }
        Ok(())
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
    usize: ColumnIndex<B::Row>,
    for<'r> &'r str: ColumnIndex<B::Row>,
{
    /// `AuditStore::record_outflows` in `conn`'s transaction (also a reservation round's, `Reserving`): the kept
    /// entries they take the place of dropped (`take_owed_in`), the accepted transfers marked `pending`
    /// (`mark_pending_in`), then the entries appended (`append_audits`) but those whose kept one was written
    /// already, each part in a few statements whatever the number of records.
    pub(in crate::store::sql) async fn record_outflows_in(
        &self,
        conn: &mut B::Connection,
        records: &[&OutflowEntry],
    ) -> StoreResult<()> {
        let owes: Vec<Uuid> = records.iter().filter_map(|r| r.owes).collect();
        let taken = self.take_owed_in(conn, &owes).await?;
        let accepted: Vec<Uuid> = records.iter().filter_map(|r| r.accepted).collect();
        self.mark_pending_in(conn, &accepted).await?;
        let entries: Vec<&AuditEvent> = records
            .iter()
            .filter(|r| r.owes.is_none_or(|id| taken.contains(&id)))
            .map(|r| &r.event)
            .collect();
        self.append_audits(conn, &entries).await
    }

    /// Drops the kept entries of transfers `ids`; the ids whose entry was still kept (the others' were written by
    /// `write_owed`, or their rows are gone).
    pub(in crate::store::sql) async fn take_owed_in(
        &self,
        conn: &mut B::Connection,
        ids: &[Uuid],
    ) -> StoreResult<Vec<Uuid>> {
        let mut taken = Vec::with_capacity(ids.len());
        for chunk in ids.chunks(shared::ROWS_PER_STATEMENT) {
            let sql = format!(
                "UPDATE transactions SET audit_owed = NULL WHERE audit_owed IS NOT NULL AND id IN ({}) RETURNING id",
                shared::placeholders(1, chunk.len())
            );
            let mut update = sqlx::query_as(sqlx::AssertSqlSafe(sql));
            for id in chunk {
                update = update.bind(*id);
            }
            let rows: Vec<(Uuid,)> = update.fetch_all(&mut *conn).await?;
            taken.extend(rows.into_iter().map(|(id,)| id));
        }
        Ok(taken)
    }

    /// Transfers `ids` `signed` -> `pending` (the node accepted them, or their x402 authorizations were sent), with
    /// the `transfer.pending` event of each that moved, once per transfer (a fee bump marks it pending again), none
    /// for a nonce fill, and only for an agent an enabled endpoint listens to: one statement per
    /// `ROWS_PER_STATEMENT` of them returns the rows it moved with whether each is announced and heard, then one
    /// inserts the events and one wakes the deliverer. Nothing for one no longer `signed`.
    pub(in crate::store::sql) async fn mark_pending_in(
        &self,
        conn: &mut B::Connection,
        ids: &[Uuid],
    ) -> StoreResult<()> {
        if ids.is_empty() {
            return Ok(());
        }
        // With no webhook enabled nobody hears of it: the rows are moved without reading them back (each row an
        // answer gives is one hand-over from SQLite's connection thread).
        let (listening,): (i64,) = sqlx::query_as("SELECT COUNT(*) FROM webhooks WHERE enabled = TRUE")
            .fetch_one(&mut *conn)
            .await?;
        for chunk in ids.chunks(shared::ROWS_PER_STATEMENT) {
            let update = format!(
                "UPDATE transactions SET status = 'pending', updated_at = $1 WHERE status = 'signed' AND id IN ({})",
                shared::placeholders(2, chunk.len())
            );
            if listening == 0 {
                let moving = chunk
                    .iter()
                    .fold(sqlx::query(sqlx::AssertSqlSafe(update)).bind(self.now()), |q, id| {
                        q.bind(*id)
                    });
                moving.execute(&mut *conn).await?;
                continue;
            }
            let sql = format!(
                "{update} RETURNING {TX_COLUMNS}, CASE WHEN fills IS NULL AND EXISTS (SELECT 1 FROM webhooks w \
                 WHERE w.enabled = TRUE AND (w.agent_id IS NULL OR w.agent_id = transactions.agent_id)) \
                 THEN CAST(1 AS BIGINT) ELSE CAST(0 AS BIGINT) END AS heard"
            );
            let update = chunk
                .iter()
                .fold(sqlx::query_as(sqlx::AssertSqlSafe(sql)).bind(self.now()), |q, id| {
                    q.bind(*id)
                });
            let moved: Vec<MovedRow> = update.fetch_all(&mut *conn).await?;
            let heard = moved.into_iter().filter(|m| m.heard == 1).map(|m| m.tx);
            let mut transfers = shared::convert(heard.collect(), TxRow::into_tx)?;
            transfers.sort_by_key(|tx| chunk.iter().position(|id| *id == tx.id));
            let events: Vec<WebhookEvent> = transfers.iter().map(|tx| self.pending_event(tx)).collect();
            Self::insert_outbox(conn, &events).await?;
        }
        Ok(())
    }

    /// The `transfer.pending` event of `tx`, which the node just accepted (or whose x402 authorization was just sent).
    fn pending_event(&self, tx: &StoredTx) -> WebhookEvent {
        let mut data = json!({
            "transfer_id": tx.id,
            "kind": tx.kind(),
            "conversation_id": tx.conversation_id,
            "chain": tx.chain,
            "asset": tx.asset,
            "amount": format_units(tx.value_wei, tx.decimals()),
            "to": tx.to.to_checksum(None),
            "tx_hash": tx.tx_hash().unwrap_or_default(),
            "nonce": tx.nonce().unwrap_or_default(),
            "status": "pending",
        });
        if let Some(record) = tx.body.x402() {
            data["tx_hash"] = json!(record.settlement_tx);
            data["url"] = json!(record.url);
        }
        let mut event = WebhookEvent::new("transfer.pending", tx.agent_id, data, self.now());
        event.dedup = Some(format!("transfer.pending:{}", tx.id));
        event
    }
}
