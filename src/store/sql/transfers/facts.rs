//! What a reservation reads of the agent under its lock: its standing, cap, spending, stored nonce and policy in one
//! statement, and what its open outflows hold of a token's balance and of a delegation.

use alloy::primitives::U256;
use chrono::{DateTime, Utc};
use sqlx::{ColumnIndex, Decode, Encode, Executor, Type};
use uuid::Uuid;

use super::super::{Backend, SqlStore};
use crate::domain::decision::Standing;
use crate::store::shared::{self, OPEN};
use crate::store::{Mandate, StoreError, StoreResult, idempotency};

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
    /// What the agent's outflows of `token` on `chain` that a balance read may not show yet can still move: token
    /// transfers signed or on their way, and unused (signed or pending) x402 authorizations (§15, §16).
    pub(super) async fn held_of_token(
        conn: &mut B::Connection,
        (agent_id, chain): (Uuid, &str),
        token: alloy::primitives::Address,
        mined_nonce: Option<u64>,
    ) -> StoreResult<U256> {
        // A transfer below the node's mined nonce has landed (the balance read shows it) even before the watcher
        // settles it: only the others are held. Authorizations (no nonce) are held until settled.
        // A redemption moves the delegator's tokens, not the wallet's (§21).
        // Joined in one row (the backend's text aggregate): an agent's sponsored operations stay open until their
        // bundle settles, and on SQLite each row of an answer is one hand-over from the connection's thread.
        let sql = format!(
            "SELECT {}(value_wei, ',') FROM transactions WHERE agent_id = $1 AND chain = $2 \
             AND token_address = $3 AND delegation_id IS NULL AND status IN {OPEN} \
             AND (nonce IS NULL OR kind = 'user_op' OR nonce >= $4)",
            B::TEXT_AGG
        );
        let (joined,): (Option<String>,) = sqlx::query_as(sqlx::AssertSqlSafe(sql))
            .bind(agent_id)
            .bind(chain)
            .bind(token.to_checksum(None))
            .bind(mined_nonce.map_or(0, |n| n as i64))
            .fetch_one(&mut *conn)
            .await?;
        let transfers = shared::sum_joined(joined.as_deref(), "value_wei")?;
        // A call's simulated outflows of the token are held as a token transfer's are while it is on its way (§18).
        let calls: Vec<(Option<String>,)> = sqlx::query_as(concat!(
            "SELECT call_record FROM transactions WHERE agent_id = $1 AND chain = $2 AND kind = 'transfer' \
             AND call_record IS NOT NULL AND status IN ",
            shared::open_statuses!(),
            " AND nonce >= $3"
        ))
        .bind(agent_id)
        .bind(chain)
        .bind(mined_nonce.map_or(0, |n| n as i64))
        .fetch_all(&mut *conn)
        .await?;
        let mut held = transfers;
        for (record,) in calls {
            let Some(record) = shared::call_from_column(record, "transactions.call_record")? else {
                continue;
            };
            for figure in record.figures.iter().filter(|f| f.token == token) {
                held = held.saturating_add(figure.out);
            }
        }
        Ok(held)
    }

    /// What this service's redemptions of a delegation that the chain may not count yet hold of it (§21): those
    /// whose nonce the agent's wallet had not used when `available` was read (`mined_nonce`, read before it), in
    /// any status that may spend (signed, pending, or confirmed since: a redemption mined after the read is not in
    /// its figure); one the read's block includes is in the chain's figure already, whatever its recorded status.
    pub(super) async fn held_by_redemptions(
        conn: &mut B::Connection,
        delegation_id: Uuid,
        mined_nonce: Option<u64>,
    ) -> StoreResult<U256> {
        let rows: Vec<(String,)> = sqlx::query_as(concat!(
            "SELECT value_wei FROM transactions WHERE delegation_id = $1 AND status IN ",
            shared::outgoing_statuses!(),
            " AND nonce >= $2"
        ))
        .bind(delegation_id)
        .bind(mined_nonce.map_or(0, |n| n as i64))
        .fetch_all(&mut *conn)
        .await?;
        shared::sum_wei(&rows, "value_wei")
    }

    /// What a reservation reads of the agent under its lock, in one statement after the lock's own (each statement
    /// of a PostgreSQL transaction sees what committed before it began, so one taken after the lock sees every
    /// write of the lock's last holder): whether the agent is active and the caller's token (when it came with one)
    /// still live, so that a deletion or a reissue committed after the request was authenticated is seen here (§15);
    /// the cap, what counts against it on the chain, the chain's next stored nonce and the policy. The request's idempotency
    /// claim, when it runs under one, is read beside it.
    pub(super) async fn agent_facts_in(
        conn: &mut B::Connection,
        (agent_id, chain): (Uuid, &str),
        mandate: &Mandate,
        mined_nonce: Option<u64>,
    ) -> StoreResult<AgentFacts> {
        let token_hash = mandate.token_hash.as_deref();
        let claim_held = match &mandate.claim {
            None => true,
            Some(claim) => {
                let (held,): (i64,) = sqlx::query_as(idempotency::sql::HELD)
                    .bind(agent_id)
                    .bind(&claim.key)
                    .bind(claim.claim_id)
                    .fetch_one(&mut *conn)
                    .await?;
                held > 0
            }
        };
        // The reservations of the agent's signed or pending transfers on the chain (value and up to twice the first
        // maximum fee, room for the bumps) that the balance read may not show yet: those at or above the wallet's
        // mined nonce read before it (`mined_nonce`; all of them without one). The index on agent, chain, kind and
        // status finds them. x402 payments move tokens only.
        let sql = format!(
            "SELECT (SELECT COUNT(*) FROM agents WHERE id = $1 AND is_active), \
             (SELECT COUNT(*) FROM access_tokens WHERE token_hash = $2 AND agent_id = $1 AND revoked_at IS NULL), \
             (SELECT spending_cap_wei FROM agents WHERE id = $1), \
             (SELECT spent_wei FROM spending WHERE agent_id = $1 AND chain = $3), \
             (SELECT next_nonce FROM nonces WHERE agent_id = $1 AND chain = $3), \
             (SELECT policy FROM policies WHERE agent_id = $1), \
             (SELECT {}(reserved_wei, ',') FROM transactions WHERE agent_id = $1 AND chain = $3 \
              AND kind IN ('transfer', 'user_op') AND status IN {OPEN} \
              AND (nonce IS NULL OR kind = 'user_op' OR nonce >= $4))",
            B::TEXT_AGG
        );
        type Row = (
            i64,
            i64,
            Option<String>,
            Option<String>,
            Option<i64>,
            Option<String>,
            Option<String>,
        );
        let row: Row = sqlx::query_as(sqlx::AssertSqlSafe(sql))
            .bind(agent_id)
            .bind(token_hash.unwrap_or_default())
            .bind(chain)
            .bind(mined_nonce.map_or(0, |n| i64::try_from(n).unwrap_or(i64::MAX)))
            .fetch_one(&mut *conn)
            .await?;
        let (active, live, cap, spent, nonce, policy, reserved) = row;
        let held = shared::sum_joined(reserved.as_deref(), "reserved_wei")?;
        let cap = cap.ok_or_else(|| StoreError::Corrupt("a reservation for an agent without a row".into()))?;
        Ok(AgentFacts {
            standing: Standing {
                agent_active: active > 0,
                token_current: token_hash.is_none() || live > 0,
                claim_held,
            },
            cap: shared::wei_from_text(&cap, "spending_cap_wei")?,
            spent: spent.map_or(Ok(U256::ZERO), |w| shared::wei_from_text(&w, "spending.spent_wei"))?,
            stored_nonce: nonce.map(|n| shared::u64_from(n, "next_nonce")).transpose()?,
            policy,
            held_by_transfers: held,
        })
    }
}

/// What `SqlStore::agent_facts_in` read of an agent under its lock.
pub(super) struct AgentFacts {
    pub(super) standing: Standing,
    pub(super) cap: U256,
    pub(super) spent: U256,
    pub(super) stored_nonce: Option<u64>,
    /// The stored policy, as text (`policies::policy_from` reads it when the request is judged by it).
    pub(super) policy: Option<String>,
    /// What the agent's signed or pending transfers on the chain hold of its native balance.
    pub(super) held_by_transfers: U256,
}
