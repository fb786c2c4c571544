//! The hash-chained audit log. An append reads the chain's head and moves it in one write transaction: under
//! SQLite's single write lock, or with the head row locked (`FOR UPDATE`) on PostgreSQL, so appends of every instance
//! sharing the database are serialised and never read the same head.

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use sqlx::{ColumnIndex, Decode, Encode, Executor, Type};
use uuid::Uuid;

use super::{Backend, SqlStore};
use crate::domain::audit::{self, AuditEntry, AuditKey};
use crate::domain::webhook;
use crate::store::audit::{AUDIT_COLUMNS, AuditRow};
use crate::store::shared;
use crate::store::{AuditEvent, AuditStore, OutflowEntry, StoreError, StoreResult};

#[async_trait]
impl<B> AuditStore for SqlStore<B>
where
    B: Backend,
    for<'c> &'c mut B::Connection: Executor<'c, Database = B>,
    // Ids and entry ids, text (actor, action, canonical detail, hashes) and times; rows read by name, the head by index.
    for<'r> Uuid: Encode<'r, B> + Decode<'r, B> + Type<B>,
    for<'r> String: Encode<'r, B> + Decode<'r, B> + Type<B>,
    for<'r> &'r str: Encode<'r, B> + Type<B>,
    for<'r> i64: Encode<'r, B> + Decode<'r, B> + Type<B>,
    for<'r> DateTime<Utc>: Encode<'r, B> + Decode<'r, B> + Type<B>,
    // A transfer's record, read whole for its `transfer.pending` webhook event.
    for<'r> Vec<u8>: Encode<'r, B> + Decode<'r, B> + Type<B>,
    usize: ColumnIndex<B::Row>,
    for<'r> &'r str: ColumnIndex<B::Row>,
{
    fn use_audit_key(&self, key: AuditKey) {
        if self.audit_key.set(key).is_err() {
            tracing::warn!("the audit key was already set; the first one stays");
        }
    }

    async fn insert_audit(&self, event: &AuditEvent) -> StoreResult<()> {
        let mut tx = B::begin_write(self).await?;
        self.append_audit(&mut tx, event).await?;
        tx.commit().await?;
        Ok(())
    }

    async fn record_outflows(&self, records: &[&OutflowEntry]) -> StoreResult<()> {
        let mut tx = B::begin_write(self).await?;
        self.record_outflows_in(&mut tx, records).await?;
        tx.commit().await?;
        Ok(())
    }

    async fn write_owed(&self, chain: &str, cutoff: DateTime<Utc>) -> StoreResult<usize> {
        // Read first, outside any write transaction: nearly always there is nothing, and SQLite's one writer is
        // not taken for it.
        let any: Option<(Uuid,)> = sqlx::query_as(
            "SELECT id FROM transactions WHERE audit_owed IS NOT NULL AND created_at < $1 AND chain = $2 LIMIT 1",
        )
        .bind(cutoff)
        .bind(chain)
        .fetch_optional(&self.pool)
        .await?;
        if any.is_none() {
            return Ok(0);
        }
        let mut tx = B::begin_write(self).await?;
        // Read locked (PostgreSQL) and dropped in this transaction: a round writing a transfer's own entry at the same
        // time either finds it gone and leaves its entry out (`record_outflows_in`), or took it first, and then it
        // is not read here: the transfer has one entry.
        let sql = format!(
            "SELECT id, agent_id, tx_hash, audit_owed FROM transactions WHERE audit_owed IS NOT NULL AND created_at < $1 \
             AND chain = $2 ORDER BY id{}",
            B::ROW_LOCK
        );
        let taken: Vec<(Uuid, Uuid, Option<String>, String)> = sqlx::query_as(sqlx::AssertSqlSafe(sql))
            .bind(cutoff)
            .bind(chain)
            .fetch_all(&mut *tx)
            .await?;
        for chunk in taken.chunks(shared::ROWS_PER_STATEMENT) {
            let sql = format!(
                "UPDATE transactions SET audit_owed = NULL WHERE id IN ({})",
                shared::placeholders(1, chunk.len())
            );
            let mut update = sqlx::query(sqlx::AssertSqlSafe(sql));
            for (id, ..) in chunk {
                update = update.bind(*id);
            }
            update.execute(&mut *tx).await?;
        }
        let events = taken
            .into_iter()
            .map(|(id, agent_id, tx_hash, owed)| {
                let owed: audit::OwedEntry =
                    serde_json::from_str(&owed).map_err(|e| StoreError::Corrupt(format!("a kept audit entry: {e}")))?;
                Ok(AuditEvent::new(agent_id, owed.actor(), owed.detail(id, tx_hash)))
            })
            .collect::<StoreResult<Vec<AuditEvent>>>()?;
        self.append_audits(&mut tx, &events.iter().collect::<Vec<_>>()).await?;
        tx.commit().await?;
        for event in &events {
            tracing::warn!(agent_id = %event.agent_id, "wrote the audit entry of a transfer whose own entry never came");
        }
        Ok(events.len())
    }

    async fn list_audit(&self, agent_id: Uuid, before: Option<i64>, limit: i64) -> StoreResult<Vec<AuditEntry>> {
        let sql = format!(
            "SELECT {AUDIT_COLUMNS} FROM audit_events WHERE agent_id = $1 AND id < $2 ORDER BY id DESC LIMIT $3"
        );
        let rows: Vec<AuditRow> = sqlx::query_as(sqlx::AssertSqlSafe(sql))
            .bind(agent_id)
            .bind(before.unwrap_or(i64::MAX))
            .bind(limit)
            .fetch_all(&self.pool)
            .await?;
        Ok(rows.into_iter().map(AuditEntry::from).collect())
    }

    async fn audit_entries_after(&self, after_id: i64, limit: i64) -> StoreResult<Vec<AuditEntry>> {
        let sql = format!("SELECT {AUDIT_COLUMNS} FROM audit_events WHERE id > $1 ORDER BY id LIMIT $2");
        let rows: Vec<AuditRow> = sqlx::query_as(sqlx::AssertSqlSafe(sql))
            .bind(after_id)
            .bind(limit)
            .fetch_all(&self.pool)
            .await?;
        Ok(rows.into_iter().map(AuditEntry::from).collect())
    }

    async fn audit_head(&self) -> StoreResult<(i64, String)> {
        Ok(sqlx::query_as("SELECT entry_id, hash FROM audit_head WHERE id = 1")
            .fetch_one(&self.pool)
            .await?)
    }

    async fn audit_head_entry(&self) -> StoreResult<Option<(i64, String, DateTime<Utc>)>> {
        Ok(sqlx::query_as(
            "SELECT h.entry_id, h.hash, e.created_at FROM audit_head h JOIN audit_events e ON e.id = h.entry_id \
             WHERE h.id = 1",
        )
        .fetch_optional(&self.pool)
        .await?)
    }
}

impl<B> SqlStore<B>
where
    B: Backend,
    for<'c> &'c mut B::Connection: Executor<'c, Database = B>,
    for<'r> Uuid: Encode<'r, B> + Type<B>,
    for<'r> String: Encode<'r, B> + Decode<'r, B> + Type<B>,
    for<'r> &'r str: Encode<'r, B> + Type<B>,
    for<'r> i64: Encode<'r, B> + Decode<'r, B> + Type<B>,
    for<'r> DateTime<Utc>: Encode<'r, B> + Type<B>,
    usize: ColumnIndex<B::Row>,
{
    /// Appends `event` inside the caller's write transaction (`append_audits`).
    pub(super) async fn append_audit(&self, conn: &mut B::Connection, event: &AuditEvent) -> StoreResult<()> {
        self.append_audits(conn, &[event]).await
    }

    /// Appends `events` inside the caller's write transaction, in four statements per `ROWS_PER_STATEMENT` of them:
    /// reads the head (locked on PostgreSQL), inserts the entries, hashes each (under `key` from its `keyed_from`
    /// on) chained in id order, writes their hashes, moves the head. An entry is inserted with a stand-in for its
    /// previous hash (`#` and its place in `events`) which its hash replaces in the same transaction: the insert
    /// returns it beside the id the database gave, so each hash is of its own row whatever order the ids came in.
    pub(super) async fn append_audits(&self, conn: &mut B::Connection, events: &[&AuditEvent]) -> StoreResult<()> {
        if events.is_empty() {
            return Ok(());
        }
        let key = self.audit_key.get();
        let head = format!("SELECT entry_id, hash FROM audit_head WHERE id = 1{}", B::ROW_LOCK);
        let (_, mut prev_hash): (i64, String) = sqlx::query_as(sqlx::AssertSqlSafe(head)).fetch_one(&mut *conn).await?;
        let at = self.now();
        let mut last_id = None;
        for chunk in events.chunks(shared::ROWS_PER_STATEMENT) {
            let details = canonical_details(chunk)?;
            let placed = Self::insert_audit_rows(conn, chunk, &details, at).await?;
            let mut hashed = Vec::with_capacity(placed.len());
            for (id, place) in placed {
                let event = chunk[place];
                let entry = AuditEntry {
                    id,
                    at,
                    agent_id: event.agent_id,
                    actor: event.actor.as_str().to_string(),
                    action: event.action().to_string(),
                    detail: details[place].clone(),
                    prev_hash: prev_hash.clone(),
                    hash: String::new(),
                };
                let hash = entry.computed_hash(key);
                hashed.push((id, std::mem::replace(&mut prev_hash, hash.clone()), hash));
                last_id = Some(id);
            }
            Self::write_audit_hashes(conn, &hashed).await?;
        }
        sqlx::query("UPDATE audit_head SET entry_id = $1, hash = $2 WHERE id = 1")
            .bind(last_id.expect("at least one entry was appended"))
            .bind(&prev_hash)
            .execute(&mut *conn)
            .await?;
        // What an entry reports to webhooks (a policy refusal, a change, an expiry, a fee bump), in its transaction.
        for event in events {
            let pushed = webhook::from_audit(event.agent_id, event.actor, &event.detail, at)
                .map_err(|e| StoreError::Corrupt(format!("webhook event of an audit entry: {e}")))?;
            if let Some(pushed) = pushed {
                Self::outbox_in(conn, pushed).await?;
            }
        }
        Ok(())
    }

    /// Inserts `chunk`'s entries (with their canonical `details`) in one statement, each with a stand-in for its
    /// previous hash (`#` and its place in the chunk): the ids the database gave, with each one's place, in id order.
    async fn insert_audit_rows(
        conn: &mut B::Connection,
        chunk: &[&AuditEvent],
        details: &[String],
        at: DateTime<Utc>,
    ) -> StoreResult<Vec<(i64, usize)>> {
        let sql = format!(
            "INSERT INTO audit_events (agent_id, action, actor, detail, created_at, prev_hash) VALUES {} \
             RETURNING id, prev_hash",
            shared::value_rows(chunk.len(), &["?"; 6])
        );
        let mut insert = sqlx::query_as(sqlx::AssertSqlSafe(sql));
        for (place, (event, detail)) in chunk.iter().zip(details).enumerate() {
            insert = insert
                .bind(event.agent_id)
                .bind(event.action().as_str())
                .bind(event.actor.as_str())
                .bind(detail)
                .bind(at)
                .bind(format!("#{place}"));
        }
        let given: Vec<(i64, String)> = insert.fetch_all(&mut *conn).await?;
        let mut placed = given
            .into_iter()
            .map(
                |(id, stand_in)| match stand_in.strip_prefix('#').and_then(|p| p.parse().ok()) {
                    Some(place) if place < chunk.len() => Ok((id, place)),
                    _ => Err(StoreError::Corrupt(
                        "an audit insert returned a row it did not write".into(),
                    )),
                },
            )
            .collect::<StoreResult<Vec<(i64, usize)>>>()?;
        if placed.len() != chunk.len() {
            return Err(StoreError::Corrupt(
                "an audit insert returned fewer rows than it wrote".into(),
            ));
        }
        placed.sort_unstable();
        Ok(placed)
    }

    /// Writes each entry's previous hash and hash, `(id, prev_hash, hash)`, over the stand-ins, in one statement.
    async fn write_audit_hashes(conn: &mut B::Connection, hashed: &[(i64, String, String)]) -> StoreResult<()> {
        let cases = |column: usize| {
            (0..hashed.len())
                .map(|i| format!("WHEN ${} THEN ${}", i * 3 + 1, i * 3 + column))
                .collect::<Vec<_>>()
                .join(" ")
        };
        let ids: Vec<String> = (0..hashed.len()).map(|i| format!("${}", i * 3 + 1)).collect();
        let sql = format!(
            "UPDATE audit_events SET prev_hash = CASE id {} END, hash = CASE id {} END WHERE id IN ({})",
            cases(2),
            cases(3),
            ids.join(", ")
        );
        let mut update = sqlx::query(sqlx::AssertSqlSafe(sql));
        for (id, prev, hash) in hashed {
            update = update.bind(*id).bind(prev.as_str()).bind(hash.as_str());
        }
        update.execute(&mut *conn).await?;
        Ok(())
    }
}

/// Each event's detail as the chain hashes and stores it: its canonical JSON.
fn canonical_details(chunk: &[&AuditEvent]) -> StoreResult<Vec<String>> {
    chunk
        .iter()
        .map(|event| {
            let json = event
                .detail
                .to_json()
                .map_err(|e| StoreError::Corrupt(format!("audit detail: {e}")))?;
            Ok(audit::canonical_json(&json))
        })
        .collect()
}
