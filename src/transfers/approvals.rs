//! Transfers held for an owner's approval: approving signs and sends one through the same send path as any
//! transfer (at the fees of that moment); rejecting and expiring release what it held. Each decision is audited,
//! as `by`'s (the owner or admin who decided; expiry is the system's), in the transaction that takes it.

use uuid::Uuid;

use super::kinds::{CallDraft, TypedDraft, token};
use super::{BroadcastStatus, Outflow, Purpose, TransferError, TransferOutcome, Transfers, store_error};
use crate::domain::agent::Agent;
use crate::domain::audit::Actor;
use crate::domain::chain::{self as registry, ChainInfo};
use crate::domain::policy::ApprovalStatus;
use crate::domain::transaction::{Action, Body, OnChain, Payer};
use crate::store::{Approval, CallCheck, Clearance, Closing, Mandate};

impl Transfers {
    /// The agent's transfer `id` if it still waits; one past `expires_at` is expired on the spot (releasing its
    /// reservation) and answered as such.
    pub async fn waiting(&self, agent: &Agent, id: Uuid) -> Result<Approval, TransferError> {
        let approval = self
            .store
            .get_approval(id)
            .await
            .map_err(store_error)?
            .filter(|a| a.agent_id == agent.id)
            .ok_or(TransferError::TransferNotFound)?;
        if approval.status != ApprovalStatus::AwaitingApproval {
            return Err(TransferError::NotAwaiting(approval.status));
        }
        if approval.is_expired_at(self.clock.now()) {
            self.close(id, ApprovalStatus::Expired, Actor::System, None).await?;
            return Err(TransferError::NotAwaiting(ApprovalStatus::Expired));
        }
        Ok(approval)
    }

    /// Signs and sends a waiting transfer. Its reservation is taken again at today's fees; when that no longer
    /// fits the cap it stays waiting (`CapExceeded`).
    #[tracing::instrument(skip_all, fields(agent_id = %agent.id, transfer_id = %id))]
    pub async fn approve(&self, agent: &Agent, id: Uuid, by: Actor) -> Result<TransferOutcome, TransferError> {
        let approval = self.waiting(agent, id).await?;
        if approval.body.x402().is_some() {
            // An x402 payment: the service makes the paid request itself (§16).
            let chain = registry::find(&approval.chain).ok_or(TransferError::NoWallet)?;
            let tx = self.approve_payment(agent, &approval, by).await?;
            return Ok(TransferOutcome::Sent {
                chain,
                tx,
                status: super::BroadcastStatus::Pending,
            });
        }
        let chain = registry::find(&approval.chain).ok_or(TransferError::NoWallet)?;
        let (held, check, designate) = match approval.body.call() {
            Some(record) => {
                // What the owner saw must still be what the call does (§18), simulated under the send lock that is
                // held until it is signed.
                let guard = self
                    .store
                    .lock_sender(agent.id, chain.name)
                    .await
                    .map_err(store_error)?;
                let (check, designate) = self.check_unchanged(agent, chain, &approval, record).await?;
                (Some(guard), Some(check), designate)
            }
            None => (None, None, None),
        };
        let purpose = self.held_purpose(agent, chain, &approval, (check, designate)).await?;
        let outcome = self
            .send_outflow_locked(
                Outflow {
                    id: approval.id,
                    agent_id: agent.id,
                    chain,
                    conversation_id: approval.conversation_id,
                    from: approval.from,
                    to: approval.to,
                    value: approval.value_wei,
                    purpose,
                    gas: approval.body.transaction().map_or(Payer::Wallet, |t| t.gas),
                    clearance: Clearance::Approval { by },
                    mandate: Mandate::NONE,
                    owed: None,
                },
                held,
            )
            .await?;
        if let TransferOutcome::Sent {
            tx,
            status: BroadcastStatus::Pending,
            ..
        } = &outcome
        {
            self.store.mark_broadcast(tx.id).await.map_err(store_error)?;
        }
        Ok(outcome)
    }

    /// What a held outflow is sent as once approved, from its stored body: each purpose's draft from what was held
    /// (`from_held` in its file under `kinds/`) with what is checked again now: a signature's with what its message
    /// grants, a call's with `check` (its simulation again) and the implementation a wallet-paid batch designates
    /// (`designate`), a redemption's against its delegation; a native or token transfer's as held.
    async fn held_purpose(
        &self,
        agent: &Agent,
        chain: &'static ChainInfo,
        approval: &Approval,
        checked: (Option<CallCheck>, Option<alloy::primitives::Address>),
    ) -> Result<Purpose<'_>, TransferError> {
        let token = |held| token::from_held(chain, &approval.asset, held);
        Ok(match (&approval.body, approval.token) {
            // A signature grants what its message says, whenever it is made: nothing to simulate again. What it
            // sets is written to the allowance ledger only now that it is signed (§18).
            (Body::Signature(record), _) => {
                let parsed = crate::domain::call::typed::read(&record.typed_data)
                    .map_err(|e| store_error(crate::store::StoreError::Corrupt(format!("held typed data: {e}"))))?;
                let account = *agent.wallet_addresses.get(chain.name).ok_or(TransferError::NoWallet)?;
                let check = self.typed_check(chain, &parsed, true, account);
                Purpose::TypedData(Box::new(TypedDraft::from_held(record, check)))
            }
            (
                Body::Transaction(OnChain {
                    action: Action::Call(record),
                    gas_limit,
                    ..
                }),
                _,
            ) => Purpose::Call(Box::new(CallDraft::from_held(record, *gas_limit, checked))),
            (Body::Authorization(_), _) => {
                return Err(store_error(crate::store::StoreError::Corrupt(
                    "an x402 approval past its path".into(),
                )));
            }
            // A held redemption (§21) is checked again against its delegation as it is approved.
            (
                Body::Transaction(OnChain {
                    action: Action::Redeem(via),
                    ..
                }),
                held,
            ) => {
                let asset = held.map(token);
                let draft = self
                    .redeemable(
                        agent.id,
                        chain,
                        via.delegation_id,
                        asset.as_ref(),
                        approval.from,
                        approval.to,
                        approval.value_wei,
                    )
                    .await?;
                Purpose::Redeem(Box::new(draft))
            }
            (
                Body::Transaction(OnChain {
                    action: Action::Transfer,
                    ..
                }),
                None,
            ) => Purpose::Native,
            (
                Body::Transaction(OnChain {
                    action: Action::Transfer,
                    ..
                }),
                Some(held),
            ) => Purpose::Token(token(held)),
        })
    }

    /// Rejects a waiting transfer, releasing its reservation; `reason` (the owner's, optional) goes into the audit
    /// entry of the rejection.
    #[tracing::instrument(skip_all, fields(agent_id = %agent.id, transfer_id = %id))]
    pub async fn reject(
        &self,
        agent: &Agent,
        id: Uuid,
        by: Actor,
        reason: Option<&str>,
    ) -> Result<Approval, TransferError> {
        self.waiting(agent, id).await?;
        self.close(id, ApprovalStatus::Rejected, by, reason).await
    }

    async fn close(
        &self,
        id: Uuid,
        status: ApprovalStatus,
        by: Actor,
        reason: Option<&str>,
    ) -> Result<Approval, TransferError> {
        match self
            .store
            .close_approval(id, status, by, reason)
            .await
            .map_err(store_error)?
        {
            Closing::Closed(approval, _) => Ok(*approval),
            Closing::NotWaiting(status) => Err(TransferError::NotAwaiting(status)),
            Closing::NotFound => Err(TransferError::TransferNotFound),
        }
    }
}
