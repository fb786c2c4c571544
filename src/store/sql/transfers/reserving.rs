//! The reserving transaction on SQLite or PostgreSQL (`TransferStore::reserving`): the facts of a request read under
//! its agent's lock, the decision the service took on them applied (approval closed, row inserted, nonce, spending,
//! call counts); the events of what it applied are announced once it commits.

use alloy::primitives::U256;
use async_trait::async_trait;
use chrono::{DateTime, Utc};
use sqlx::{ColumnIndex, Decode, Encode, Executor, Type};
use uuid::Uuid;

use super::super::sponsorship::SponsorshipRead;
use super::super::{Backend, SqlStore, WriteTx};
use super::facts::AgentFacts;
use crate::domain::decision::{self, Counted, Facts, Funds, SponsorFacts, Windows};
use crate::domain::outflow::CallCount;
use crate::domain::policy::{ApprovalStatus, Holds, Policy};
use crate::domain::transaction::{StoredTx, wallet_nonces};
use crate::store::shared;
use crate::store::{Approval, Clearance, OutflowEntry, idempotency};
use crate::store::{
    Closing, EventRecord, Gathered, Reserve, Reserving, SignedTx, StoreError, StoreResult, TransferRequest,
};

/// A reserving transaction on SQLite or PostgreSQL (`TransferStore::reserving`); the events of what it applied
/// are announced once it commits.
pub(super) struct SqlReserving<'s, B: Backend> {
    pub(super) store: &'s SqlStore<B>,
    pub(super) tx: WriteTx<B>,
    pub(super) announce: Vec<EventRecord>,
    /// The agents whose lock `tx` holds already (held until it ends): a round's next request of one asks no more.
    pub(super) locked: Vec<Uuid>,
    /// What this transaction's open user operations hold of each chain's paymaster deposit (§22), added up once and
    /// then kept as the transaction adds to it: a round's sponsored requests do not each read them all again.
    pub(super) deposit_held: Vec<(String, U256)>,
}

#[async_trait]
impl<B> Reserving for SqlReserving<'_, B>
where
    B: Backend,
    for<'c> &'c mut B::Connection: Executor<'c, Database = B>,
    // As `TransferStore` above: amounts and addresses are text, nonces integers, raw transactions bytes.
    for<'r> Uuid: Encode<'r, B> + Decode<'r, B> + Type<B>,
    for<'r> String: Encode<'r, B> + Decode<'r, B> + Type<B>,
    for<'r> &'r str: Encode<'r, B> + Type<B>,
    for<'r> i64: Encode<'r, B> + Decode<'r, B> + Type<B>,
    for<'r> DateTime<Utc>: Encode<'r, B> + Decode<'r, B> + Type<B>,
    for<'r> Vec<u8>: Encode<'r, B> + Decode<'r, B> + Type<B>,
    for<'r> Option<Uuid>: Encode<'r, B>,
    for<'r> Option<String>: Encode<'r, B>,
    for<'r> Option<&'r str>: Encode<'r, B>,
    for<'r> Option<i64>: Encode<'r, B>,
    usize: ColumnIndex<B::Row>,
    for<'r> &'r str: ColumnIndex<B::Row>,
{
    async fn facts(&mut self, r: &TransferRequest) -> StoreResult<Gathered> {
        let tx = &mut self.tx;
        // The cap, the spending, the balances' holds and the nonce stay still until this commits.
        if !self.locked.contains(&r.agent_id) {
            B::lock_agent(tx, r.agent_id).await?;
            self.locked.push(r.agent_id);
        }
        let now = self.store.now();
        let AgentFacts {
            standing,
            cap,
            spent,
            stored_nonce,
            policy,
            held_by_transfers,
        } = SqlStore::<B>::agent_facts_in(tx, (r.agent_id, &r.chain), &r.mandate, r.reads.mined_nonce).await?;
        let tokens = match (r.reads.token_balance, r.token) {
            (Some(balance), Some(token)) => Some(Funds {
                balance,
                held: SqlStore::<B>::held_of_token(tx, (r.agent_id, &r.chain), token.address, r.reads.mined_nonce)
                    .await?,
            }),
            _ => None,
        };
        let native = r.reads.native.map(|funds| Funds {
            balance: funds.balance,
            held: held_by_transfers,
        });
        let delegation = match r.check.delegated() {
            Some(d) => Some(Funds {
                balance: d.available,
                held: SqlStore::<B>::held_by_redemptions(tx, d.delegation_id, r.reads.mined_nonce).await?,
            }),
            None => None,
        };
        // A sponsored outflow takes its place in the account's EntryPoint sequence, not the wallet's (§22): its
        // next nonce is read with the sponsorship.
        let (sponsorship, op_nonce) = match r.reads.sponsor {
            Some(sponsor) => {
                let SponsorshipRead {
                    per_day,
                    counted,
                    next_nonce,
                } = SqlStore::<B>::sponsorship_in(tx, r.agent_id, &r.chain, now).await?;
                let facts = SponsorFacts {
                    per_day: per_day.unwrap_or_default(),
                    counted,
                    deposit: Funds {
                        balance: sponsor.deposit,
                        held: match self.deposit_held.iter().find(|(chain, _)| *chain == r.chain) {
                            Some((_, held)) => *held,
                            None => {
                                let held = SqlStore::<B>::held_of_deposit_in(tx, &r.chain).await?;
                                self.deposit_held.push((r.chain.clone(), held));
                                held
                            }
                        },
                    },
                };
                (Some(facts), next_nonce)
            }
            None => (None, None),
        };
        let gate = SqlStore::<B>::gate_in(tx, r, policy, now).await?;
        let counted = match r.check.call() {
            Some(_) => SqlStore::<B>::ledger_in(tx, r.agent_id, &r.chain).await?,
            None => Vec::new(),
        };
        let stored_nonce = match r.reads.sponsor {
            Some(_) => op_nonce,
            None => stored_nonce.filter(|_| r.uses_nonce()),
        };
        // A wallet's transaction waits for the designation of the account, whose authorization takes the wallet's
        // next nonce, to land; one that landed (its operation not settled yet) moves the wallet's count past it.
        let (designation, stored_nonce) = match (r.reads.sponsor, r.uses_nonce()) {
            (None, true) => {
                let (unmined, past) =
                    SqlStore::<B>::designation_in(tx, (r.agent_id, &r.chain), r.reads.mined_nonce).await?;
                (unmined, stored_nonce.max(past))
            }
            _ => (None, stored_nonce),
        };
        Ok(Gathered {
            facts: Facts {
                standing,
                cap,
                spent,
                tokens,
                native,
                gate,
                stored_nonce,
                call_windows: Vec::new(),
                delegation,
                sponsorship,
                designation,
            },
            counted,
        })
    }

    async fn call_windows(
        &mut self,
        r: &TransferRequest,
        counts: &[Counted],
        policy: &Policy,
    ) -> StoreResult<Vec<(Windows, bool)>> {
        SqlStore::<B>::call_windows_in(&mut self.tx, (r.agent_id, &r.chain), counts, policy, self.store.now()).await
    }

    async fn hold(
        &mut self,
        r: &TransferRequest,
        (ttl_secs, holds): (u64, Holds),
        count: &CallCount,
    ) -> StoreResult<Approval> {
        let tx = &mut self.tx;
        let (approval, event) = self.store.hold_in(tx, r, ttl_secs, (holds, &count.counts)).await?;
        // A held call counts in the windows while it waits; the allowance ledger changes only once it is reserved
        // for signing (§18): a rejected or expired one leaves nothing behind.
        SqlStore::<B>::count_call_in(tx, r, &count.counts, &[], self.store.now()).await?;
        self.store.mark_acted_in(tx, r).await?;
        self.announce.push(event);
        Ok(approval)
    }

    async fn reserve(
        &mut self,
        r: &TransferRequest,
        reserve: Reserve,
        signed: SignedTx,
        count: &CallCount,
    ) -> StoreResult<StoredTx> {
        let tx = &mut self.tx;
        let approved = match r.clearance {
            Clearance::Approval { by } => match self.store.close_in(tx, r.id, ApprovalStatus::Approved, false).await? {
                Closing::Closed(approval, event) => Some((by, approval, event)),
                _ => return Err(StoreError::Corrupt("an approval changed under the agent's lock".into())),
            },
            _ => None,
        };
        // An x402 authorization or a typed-data signature uses no nonce of the agent's.
        let record = shared::new_transfer(r, reserve.nonce.unwrap_or(0), signed, self.store.now());
        let owed = match &r.owed {
            Some(owed) => {
                Some(serde_json::to_string(owed).map_err(|e| StoreError::Corrupt(format!("owed entry: {e}")))?)
            }
            None => None,
        };
        SqlStore::<B>::insert_transfer(tx, &record, None, owed).await?;
        if let Some(sponsor) = r.reads.sponsor {
            let hash = record.tx_hash().unwrap_or_default();
            let part = (sponsor.max_cost, sponsor.valid_until, sponsor.read_block);
            SqlStore::<B>::insert_operation_in(tx, (r.id, r.agent_id, &r.chain), hash, part, self.store.now()).await?;
            if let Some((_, held)) = self.deposit_held.iter_mut().find(|(chain, _)| *chain == r.chain) {
                *held = held.saturating_add(sponsor.max_cost);
            }
        }
        self.store.mark_acted_in(tx, r).await?;
        if approved.is_some() {
            // What it counted while it waited gives way to what it counts as signed.
            SqlStore::<B>::uncount_call_in(tx, r.id).await?;
        }
        SqlStore::<B>::count_call_in(tx, r, &count.counts, &count.ledger, self.store.now()).await?;
        if let Some((by, approval, event)) = approved {
            if let Some(audit) = approval.decided_audit(by, record.chain_hash(), None) {
                self.store.append_audit(tx, &audit).await?;
            }
            self.announce.push(event);
        }
        if let (Some(nonce), None) = (reserve.nonce, r.reads.sponsor) {
            sqlx::query(
                "INSERT INTO nonces (agent_id, chain, next_nonce) VALUES ($1, $2, $3) \
                 ON CONFLICT (agent_id, chain) DO UPDATE SET next_nonce = $3",
            )
            .bind(r.agent_id)
            .bind(&r.chain)
            // A wallet-paid batch that designates the account uses its authorization's nonce too (§22).
            .bind(nonce as i64 + wallet_nonces(&record.raw_tx) as i64)
            .execute(&mut **tx)
            .await?;
        }
        let spent = decision::spent_after(reserve.spent, r.reserved_wei, reserve.release);
        SqlStore::<B>::set_spent(tx, r.agent_id, &r.chain, spent).await?;
        Ok(record)
    }

    async fn record_outflows(&mut self, records: &[&OutflowEntry]) -> StoreResult<()> {
        self.store.record_outflows_in(&mut self.tx, records).await
    }

    async fn commit(self: Box<Self>) -> StoreResult<()> {
        let SqlReserving {
            store, tx, announce, ..
        } = *self;
        tx.commit().await?;
        for event in &announce {
            store.feed.announce(event);
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
    for<'r> DateTime<Utc>: Encode<'r, B> + Type<B>,
    usize: ColumnIndex<B::Row>,
{
    /// Takes the lock of the agent whose transfer `id` is, as every write of its transfers does first (SQLite holds
    /// Records that the request's idempotency claim moved (or held) money with `r`: it is never taken over after
    /// this, and a repeat after its request stopped unanswered answers `r` (its first such reservation).
    async fn mark_acted_in(&self, conn: &mut B::Connection, r: &TransferRequest) -> StoreResult<()> {
        if let Some(claim) = &r.mandate.claim {
            sqlx::query(idempotency::sql::ACTED)
                .bind(self.now())
                .bind(r.agent_id)
                .bind(&claim.key)
                .bind(claim.claim_id)
                .bind(r.id)
                .execute(&mut *conn)
                .await?;
        }
        Ok(())
    }
}
