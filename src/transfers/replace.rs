//! Transfers that do not land (§14). A transfer pending longer than `STUCK_AFTER_SECS` is signed again at its nonce,
//! the same `to`, value and input rebuilt from its latest signed bytes, with both fee figures raised by at least
//! 12.5% (nodes refuse a smaller bump as underpriced) — as long as its reservation covers the new attempt; after
//! that the watcher only broadcasts the latest attempt again. A cancel replaces it with a zero-value send from the
//! wallet to itself at the same nonce, fees raised the same way. A type-4 transaction that designates the account
//! (a wallet-paid batch from an EOA, §22) is bumped with its authorization as signed, and cancelled by a type-4
//! self-send carrying it too: the designation stays, the batch does not run, both nonces are used. Each attempt is stored before it is broadcast; one
//! the node refuses is withdrawn (the one it replaced is the latest again). Whichever attempt lands settles the
//! transfer (the watcher).

use alloy::consensus::{SignableTransaction, Transaction as _, TxEnvelope, TypedTransaction};
use alloy::eips::eip2718::Decodable2718;
use alloy::primitives::U256;
use uuid::Uuid;

use super::carriers::wallet::{self_send, sign_typed};
use super::{TransferError, Transfers, sign_eip1559, store_error};
use crate::chain::{ChainError, Fees, Node, RefusalKind, TRANSFER_GAS};
use crate::domain::agent::Agent;
use crate::domain::audit::{Actor, Detail, detail};
use crate::domain::chain as registry;
use crate::domain::policy::ApprovalStatus;
use crate::domain::transaction::{Attempt, AttemptKind, Placed, StoredTx};
use crate::store::{Replacement, StoreError};

/// What a fee bump did.
#[derive(Debug)]
pub enum Bump {
    /// A new attempt was stored and handed to the node (or will be, by the watcher, after a transport failure).
    Sent(Box<StoredTx>),
    /// The reservation does not cover higher fees: the latest attempt is only broadcast again.
    NotCovered,
    /// The transfer settled or was replaced meanwhile, or the node refused the new attempt (withdrawn): nothing now.
    Nothing,
}

/// A cancel that was accepted: the zero-value self-send is stored as the transfer's latest attempt.
#[derive(Debug)]
pub enum Cancelled {
    /// The node took it before the answer.
    Sent(Box<StoredTx>),
    /// The node's answer was lost: it is stored, and the watcher sends it after the answer (202).
    Queued(Box<StoredTx>),
}

/// `fee` raised by at least 12.5% (an eighth, rounded up), and to no less than what the chain asks now.
fn raised(fee: u128, now: u128) -> u128 {
    fee.saturating_add(fee.div_ceil(8)).max(now)
}

/// The fee figures of the next attempt after `latest`, given today's `fees`.
fn next_fees(latest: &TypedTransaction, fees: &Fees) -> (u128, u128) {
    let tip = latest.max_priority_fee_per_gas().unwrap_or_default();
    let priority = raised(tip, fees.max_priority_fee_per_gas);
    let max_fee = raised(latest.max_fee_per_gas(), fees.max_fee_per_gas).max(priority);
    (max_fee, priority)
}

/// `latest` at the fee figures `(max_fee, priority)`, the rest as signed (a type-4 one keeps its authorizations).
fn with_fees(latest: TypedTransaction, (max_fee, priority): (u128, u128)) -> Result<TypedTransaction, TransferError> {
    Ok(match latest {
        TypedTransaction::Eip1559(tx) => TypedTransaction::Eip1559(alloy::consensus::TxEip1559 {
            max_fee_per_gas: max_fee,
            max_priority_fee_per_gas: priority,
            ..tx
        }),
        TypedTransaction::Eip7702(tx) => TypedTransaction::Eip7702(alloy::consensus::TxEip7702 {
            max_fee_per_gas: max_fee,
            max_priority_fee_per_gas: priority,
            ..tx
        }),
        _ => return Err(store_error(StoreError::Corrupt("transactions.raw_tx".into()))),
    })
}

/// The audit detail of `tx`'s attempt at `at` replaced by `stored` (a fee bump or a cancellation).
fn replaced(tx: &StoredTx, at: &Placed, stored: &StoredTx) -> detail::Replaced {
    detail::Replaced {
        transfer_id: tx.id,
        chain: tx.chain.clone(),
        nonce: at.nonce,
        replaced: at.tx_hash.clone(),
        tx_hash: stored.tx_hash().map(str::to_owned),
    }
}

/// The transaction inside a stored attempt: an EIP-1559 one, or the type-4 one of a wallet-paid batch that
/// designates the account (§22).
fn decode(raw: &[u8]) -> Result<TypedTransaction, TransferError> {
    match TxEnvelope::decode_2718_exact(raw) {
        Ok(TxEnvelope::Eip1559(signed)) => Ok(signed.tx().clone().into()),
        Ok(TxEnvelope::Eip7702(signed)) => Ok(signed.tx().clone().into()),
        _ => Err(store_error(StoreError::Corrupt("transactions.raw_tx".into()))),
    }
}

/// What the cap must hold for `tx` to land: its value, its gas at its fee cap, and the L1 data fee where there is one.
async fn needed(client: &dyn Node, tx: &TypedTransaction) -> Result<U256, TransferError> {
    let l1_fee = client.l1_fee(&tx.encoded_for_signing()).await?;
    let gas = U256::from(tx.gas_limit()) * U256::from(tx.max_fee_per_gas());
    Ok(tx.value().saturating_add(gas).saturating_add(l1_fee))
}

/// The gas of a zero-value send of the wallet to itself that carries `authorizations` (a cancel or a fill of a
/// transaction that designates the account, §22): a plain one's, each authorization's, and the account's `receive`,
/// which the designated address runs.
pub(super) fn self_send_gas(authorizations: usize) -> u64 {
    match authorizations {
        0 => TRANSFER_GAS,
        n => TRANSFER_GAS + n as u64 * super::carriers::wallet::AUTHORIZATION_GAS + 15_000,
    }
}

/// How a replacement went: stored and broadcast, stored and queued for the watcher, refused by the node (the
/// earlier attempt is the latest again), or not stored at all (`Declined`: the store's reason).
enum Broadcast {
    Sent(Box<StoredTx>),
    Queued(Box<StoredTx>),
    Refused(ChainError),
    Declined(Replacement),
}

impl Transfers {
    /// Signs the latest attempt of a stuck transfer again with higher fees (the watcher, once it has been pending
    /// for `STUCK_AFTER_SECS`).
    pub async fn bump(&self, client: &dyn Node, tx: &StoredTx) -> Result<Bump, TransferError> {
        let Some(at) = tx.placed() else {
            return Ok(Bump::Nothing);
        };
        let latest = decode(&tx.raw_tx)?;
        let fees = next_fees(&latest, &client.fees().await?);
        let next = with_fees(latest, fees)?;
        let needed = needed(client, &next).await?;
        if needed > tx.reserved_wei {
            return Ok(Bump::NotCovered);
        }
        let kind = match self.store.attempts(tx.id).await.map_err(store_error)?.first() {
            Some(attempt) => attempt.kind,
            None => return Ok(Bump::Nothing),
        };
        match self.replace(client, (tx, at), next, kind, needed, false).await? {
            Broadcast::Declined(Replacement::NotCovered) => Ok(Bump::NotCovered),
            Broadcast::Declined(_) => Ok(Bump::Nothing),
            Broadcast::Sent(stored) | Broadcast::Queued(stored) => {
                tracing::warn!(tx_id = %tx.id, chain = client.name(), nonce = at.nonce, tx_hash = ?stored.tx_hash(),
                    "a stuck transfer was sent again with higher fees");
                let detail = Detail::TransferFeeBumped(replaced(tx, at, &stored));
                self.audit(tx.agent_id, Actor::System, detail).await;
                Ok(Bump::Sent(stored))
            }
            Broadcast::Refused(e) => {
                tracing::warn!(tx_id = %tx.id, error = %e, "the node refused a fee bump; the earlier attempt stands");
                Ok(Bump::Nothing)
            }
        }
    }

    /// Replaces the agent's pending transfer `id` with a zero-value send to its own wallet at the same nonce.
    #[tracing::instrument(skip_all, fields(agent_id = %agent.id, transfer_id = %id))]
    pub async fn cancel(&self, agent: &Agent, id: Uuid, actor: Actor) -> Result<Cancelled, TransferError> {
        let (tx, at) = self.cancellable(agent, id).await?;
        let attempts = self.store.attempts(tx.id).await.map_err(store_error)?;
        if attempts.first().is_some_and(|a| a.kind == AttemptKind::Cancel) {
            // Already being cancelled: the same answer again, nothing new signed.
            return Ok(Cancelled::Sent(Box::new(tx)));
        }
        let chain = registry::find(&tx.chain).ok_or(TransferError::NoWallet)?;
        let client = self.chains.node(chain.name)?;
        let latest = decode(&tx.raw_tx)?;
        let fees = next_fees(&latest, &client.fees().await?);
        // A transaction that designates the account is cancelled by one carrying the same authorization: the
        // batch does not run, and the nonce after it is used as the store counted it (§22).
        let carried = latest.authorization_list().map(<[_]>::to_vec).unwrap_or_default();
        let gas = self_send_gas(carried.len());
        let next = self_send(chain, tx.from, (at.nonce, gas), fees, carried);
        let needed = needed(client, &next).await?;
        let outcome = self
            .replace(client, (&tx, &at), next, AttemptKind::Cancel, needed, true)
            .await?;
        let cancelled = match outcome {
            Broadcast::Declined(Replacement::CapExceeded { cap, spent }) => {
                return Err(TransferError::CapExceeded {
                    chain,
                    reserved: needed,
                    cap,
                    spent,
                });
            }
            // Settled or replaced meanwhile: answer with what it is now.
            Broadcast::Declined(_) => return Err(self.not_pending(agent, id).await),
            Broadcast::Sent(stored) => Cancelled::Sent(stored),
            Broadcast::Queued(stored) => Cancelled::Queued(stored),
            Broadcast::Refused(e) if e.refusal() == Some(RefusalKind::NonceTooLow) => {
                // Its nonce is used: one of its attempts was mined (the watcher settles it).
                return Err(TransferError::NotPending("already mined"));
            }
            Broadcast::Refused(e) => return Err(TransferError::Rejected(e)),
        };
        let stored = match &cancelled {
            Cancelled::Sent(stored) | Cancelled::Queued(stored) => stored,
        };
        let detail = Detail::TransferCancelRequested(replaced(&tx, &at, stored));
        self.audit(agent.id, actor, detail).await;
        Ok(cancelled)
    }

    /// The agent's open transaction `id` and where it is, or why it cannot be cancelled.
    async fn cancellable(&self, agent: &Agent, id: Uuid) -> Result<(StoredTx, Placed), TransferError> {
        match self.store.get_transaction(agent.id, id).await.map_err(store_error)? {
            // An x402 authorization has no transaction of the agent's to replace (§16).
            Some(tx) if tx.body.x402().is_some() => Err(TransferError::NotPending("x402")),
            // A sponsored user operation has no transaction of the wallet's at its nonce: its nonce is the account's
            // EntryPoint sequence, and nothing of the wallet's may take it (§22).
            Some(tx)
                if tx
                    .on_chain()
                    .is_some_and(|t| t.gas == crate::domain::transaction::Payer::Sponsor) =>
            {
                Err(TransferError::NotPending("sponsored"))
            }
            Some(tx) if tx.status.is_open() => match tx.placed().cloned() {
                Some(at) => Ok((tx, at)),
                None => Err(TransferError::NotPending(tx.kind())),
            },
            Some(_) => Err(self.not_pending(agent, id).await),
            None => Err(self.not_pending(agent, id).await),
        }
    }

    /// Why transfer `id` of the agent is not pending: its status, or not found.
    async fn not_pending(&self, agent: &Agent, id: Uuid) -> TransferError {
        match self.store.get_transaction(agent.id, id).await {
            Ok(Some(tx)) if tx.status.is_open() => return TransferError::NotPending("being replaced"),
            Ok(Some(tx)) => return TransferError::NotPending(tx.status.as_str()),
            Ok(None) => {}
            Err(e) => return store_error(e),
        }
        match self.store.get_approval(id).await {
            Ok(Some(a)) if a.agent_id == agent.id => match a.status {
                ApprovalStatus::AwaitingApproval => TransferError::NotPending("awaiting_approval"),
                other => TransferError::NotPending(other.as_str()),
            },
            Ok(_) => TransferError::TransferNotFound,
            Err(e) => store_error(e),
        }
    }

    /// Signs `next`, stores it as the latest attempt of `tx` (in place of `at.tx_hash`) and broadcasts it;
    /// `Broadcast::Declined` with the store's reason when it stored nothing.
    async fn replace(
        &self,
        client: &dyn Node,
        (tx, at): (&StoredTx, &Placed),
        next: TypedTransaction,
        kind: AttemptKind,
        needed: U256,
        may_grow: bool,
    ) -> Result<Broadcast, TransferError> {
        let signer = self.signer(tx.agent_id).await?;
        let max_fee_per_gas = next.max_fee_per_gas();
        // A token that does not answer: nothing is replaced; the bump or cancel waits for it (§20).
        let signed = match next {
            TypedTransaction::Eip1559(next) => sign_eip1559(signer.as_ref(), next),
            next => sign_typed(signer.as_ref(), next),
        }
        .map_err(|e| super::signer_error(tx.agent_id, e))?;
        let attempt = Attempt {
            tx_hash: signed.hash,
            raw_tx: signed.raw,
            max_fee_per_gas,
            kind,
        };
        let stored = match self
            .store
            .replace_attempt(tx.id, &at.tx_hash, &attempt, needed, may_grow)
            .await
            .map_err(store_error)?
        {
            Replacement::Stored(stored) => stored,
            other => return Ok(Broadcast::Declined(other)),
        };
        match client.send_raw(&attempt.raw_tx).await {
            Ok(_) => {
                self.store.mark_broadcast(tx.id).await.map_err(store_error)?;
                Ok(Broadcast::Sent(stored))
            }
            Err(e) if e.is_transport() => {
                tracing::warn!(tx_id = %tx.id, error = %e, "a replacement's broadcast was not confirmed; will retry");
                Ok(Broadcast::Queued(stored))
            }
            Err(e) => {
                // Refused, so not in the node's pool: the attempt it replaced is the latest again.
                self.store
                    .withdraw_attempt(tx.id, &attempt.tx_hash)
                    .await
                    .map_err(store_error)?;
                Ok(Broadcast::Refused(e))
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_bump_raises_both_fees_by_at_least_an_eighth() {
        let latest: TypedTransaction = alloy::consensus::TxEip1559 {
            max_fee_per_gas: 3_000_000_001,
            max_priority_fee_per_gas: 1_000_000_000,
            ..Default::default()
        }
        .into();
        let quiet = Fees::from_parts(Some(1), 1, 1);
        let (max_fee, priority) = next_fees(&latest, &quiet);
        assert!(max_fee * 8 >= latest.max_fee_per_gas() * 9, "{max_fee}");
        assert!(
            priority * 8 >= latest.max_priority_fee_per_gas().unwrap_or_default() * 9,
            "{priority}"
        );
        assert_eq!(priority, 1_125_000_000);
    }

    #[test]
    fn a_bump_follows_the_chain_when_it_asks_more() {
        let latest: TypedTransaction = alloy::consensus::TxEip1559 {
            max_fee_per_gas: 10,
            max_priority_fee_per_gas: 1,
            ..Default::default()
        }
        .into();
        let busy = Fees::from_parts(Some(100), 50, 150);
        assert_eq!(next_fees(&latest, &busy), (250, 50));
    }

    #[test]
    fn the_smallest_fees_still_rise() {
        assert_eq!(raised(1, 0), 2);
        assert_eq!(raised(0, 0), 0);
        assert_eq!(raised(8, 0), 9);
    }
}
