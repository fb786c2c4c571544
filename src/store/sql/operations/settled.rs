//! What a settlement of user operations adds to their transfers' settlement (`OperationStore::settle_operations`), a
//! statement for all of them each.

use chrono::{DateTime, Utc};
use sqlx::{ColumnIndex, Decode, Encode, Executor, Type};
use uuid::Uuid;

use super::super::{Backend, SqlStore};
use crate::store::operations::SettlingOperation;
use crate::store::shared;
use crate::store::{EventRecord, StoreResult};

/// The settlement's part of the operations (`settle_operations`), with the bounds of the payments it settles.
impl<B> SqlStore<B>
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
    /// What the operations `settled` in this transaction (`settle_all_in`) add to their transfers' settlement, a
    /// statement for all of them each (on SQLite every statement is a hand-over to the connection's thread and back,
    /// while the one writer waits): the transaction each landed in and its gas cost; for one that carried the
    /// designation, its authorization's nonce used, the wallet's nonce counter moved past it (never back); for a
    /// sponsored settlement of a payment to the agent (§23), the payment settled with it (its fee is 0). Answers the
    /// payments' events, to announce once committed.
    pub(super) async fn operations_settled_in(
        &self,
        conn: &mut B::Connection,
        settled: &[&SettlingOperation],
    ) -> StoreResult<Vec<EventRecord>> {
        if settled.is_empty() {
            return Ok(Vec::new());
        }
        let landed: Vec<(Uuid, &str)> = settled
            .iter()
            .filter_map(|op| op.settlement.landed_in.as_deref().map(|hash| (op.id, hash)))
            .collect();
        if !landed.is_empty() {
            let (cases, ids) = cases_by_id(landed.len());
            let sql = format!(
                "UPDATE transactions SET tx_hash = CASE id {cases} END WHERE kind = 'user_op' AND id IN ({ids})"
            );
            let mut update = sqlx::query(sqlx::AssertSqlSafe(sql));
            for (id, hash) in &landed {
                update = update.bind(*id).bind(*hash);
            }
            update.execute(&mut *conn).await?;
            let sql = format!(
                "INSERT INTO nonces (agent_id, chain, next_nonce) SELECT agent_id, chain, MAX(authorization_nonce) + 1 \
                 FROM user_operations WHERE transfer_id IN ({}) AND authorization_nonce IS NOT NULL \
                 GROUP BY agent_id, chain \
                 ON CONFLICT (agent_id, chain) DO UPDATE SET next_nonce = excluded.next_nonce \
                 WHERE nonces.next_nonce < excluded.next_nonce",
                shared::placeholders(1, landed.len())
            );
            let mut designated = sqlx::query(sqlx::AssertSqlSafe(sql));
            for (id, _) in &landed {
                designated = designated.bind(*id);
            }
            designated.execute(&mut *conn).await?;
        }
        let (cases, ids) = cases_by_id(settled.len());
        let sql =
            format!("UPDATE user_operations SET gas_cost = CASE transfer_id {cases} END WHERE transfer_id IN ({ids})");
        let mut update = sqlx::query(sqlx::AssertSqlSafe(sql));
        for op in settled {
            update = update.bind(op.id).bind(op.settlement.gas_cost.map(|c| c.to_string()));
        }
        update.execute(&mut *conn).await?;
        let sql = format!(
            "SELECT transfer_id FROM x402_income WHERE status = 'settling' AND transfer_id IN ({})",
            shared::placeholders(1, settled.len())
        );
        let mut paying = sqlx::query_as::<_, (Uuid,)>(sqlx::AssertSqlSafe(sql));
        for op in settled {
            paying = paying.bind(op.id);
        }
        let paying = paying.fetch_all(&mut *conn).await?;
        let mut received = Vec::new();
        for op in settled.iter().filter(|op| paying.iter().any(|(id,)| *id == op.id)) {
            received.extend(
                self.income_settled_in(&mut *conn, op.id, &op.settlement.settlement)
                    .await?,
            );
        }
        Ok(received)
    }
}

/// `WHEN $1 THEN $2 WHEN $3 THEN $4 …` for `rows` (id, value) pairs bound in turn, and the ids' `$1, $3, …`: the
/// parts of an update that sets each row's own value in one statement.
fn cases_by_id(rows: usize) -> (String, String) {
    let cases: Vec<String> = (0..rows)
        .map(|i| format!("WHEN ${} THEN ${}", 2 * i + 1, 2 * i + 2))
        .collect();
    let ids: Vec<String> = (0..rows).map(|i| format!("${}", 2 * i + 1)).collect();
    (cases.join(" "), ids.join(", "))
}
