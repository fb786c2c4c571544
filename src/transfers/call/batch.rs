//! Batches of calls (§22 "Batches"): 2 to 16 calls the agent's account runs in order, all or nothing, as its
//! ERC-7579 `execute` in batch mode. One outflow on the one send path: its record is a call to the agent's own
//! address whose calldata is that `execute` and whose `calls` list each call; it is simulated as the account
//! executes it (`sim`), each call judged by the `calls` rules on its own, the counts summed over the batch. Sponsored
//! it is one user operation; paid by the wallet, one transaction the agent sends to its own address, which an agent
//! still an EOA makes a type-4 one designating the account implementation by its own authorization at the nonce
//! after the transaction's (`carriers::wallet::sign_designating`: two nonces of the wallet used).

mod sim;

use alloy::primitives::{Address, U256};
use uuid::Uuid;

use super::{CallOrder, Previewed};
use crate::chain::userop::Execution;
use crate::domain::amount::format_units;
use crate::domain::audit::OwedEntry;
use crate::domain::audit::detail::{Asked, CallAsked, CallKind, CallPreview};
use crate::domain::call::Encoded;
use crate::domain::call::batch::BatchFacts;
use crate::domain::call::policy::CallVerdict;
use crate::domain::chain::ChainInfo;
use crate::domain::transaction::Payer;
use crate::sponsor::Account;
use crate::store::{Clearance, SendGuard};
use crate::transfers::kinds::{CallDraft, Outflow, Purpose};
use crate::transfers::{AuditProtocol, Transacting, TransferError, TransferOutcome, Transfers, store_error};

/// One call of a batch as asked.
#[derive(Debug, Clone)]
pub struct BatchCall {
    pub to: Address,
    /// Native value, in wei.
    pub value: U256,
    pub encoded: Encoded,
}

/// A batch the agent was asked to run.
pub struct BatchOrder<'a> {
    pub by: Transacting<'a>,
    pub chain: &'static ChainInfo,
    pub calls: Vec<BatchCall>,
    /// Who pays the gas, as asked (`None`: the default, `Transfers::payer`).
    pub gas: Option<Payer>,
    pub conversation_id: Option<Uuid>,
    /// Whether the agent is guarded (see `CallOrder::guarded`).
    pub guarded: bool,
}

impl<'a> BatchOrder<'a> {
    /// The `index`th call as a single call's order (what the §18 counting reads of one call).
    fn single(&self, index: usize) -> CallOrder<'a> {
        let call = &self.calls[index];
        CallOrder {
            by: self.by,
            chain: self.chain,
            to: call.to,
            value: call.value,
            encoded: call.encoded.clone(),
            conversation_id: self.conversation_id,
            guarded: self.guarded,
            gas: self.gas,
        }
    }

    /// A held batch as its record keeps it (`approval` the waiting outflow), simulated again when it is approved.
    pub(super) fn held(
        agent: &'a crate::domain::agent::Agent,
        chain: &'static ChainInfo,
        approval: &crate::store::Approval,
        record: &crate::domain::transaction::CallRecord,
    ) -> Self {
        let calls = record
            .calls
            .iter()
            .map(|c| BatchCall {
                to: c.to,
                value: c.value,
                encoded: Encoded {
                    calldata: c.data.clone(),
                    function: None,
                },
            })
            .collect();
        BatchOrder {
            by: Transacting::approved(agent),
            chain,
            calls,
            gas: approval.body.transaction().map(|t| t.gas),
            conversation_id: approval.conversation_id,
            guarded: true,
        }
    }

    /// The sum of the calls' values (the record's `amount`).
    pub fn total(&self) -> U256 {
        self.calls.iter().fold(U256::ZERO, |t, c| t.saturating_add(c.value))
    }

    /// The calls as the account executes them.
    fn executions(&self) -> Vec<Execution> {
        self.calls
            .iter()
            .map(|c| Execution {
                target: c.to,
                value: c.value,
                callData: c.encoded.calldata.clone(),
            })
            .collect()
    }

    /// The agent's address on the order's chain.
    fn from(&self) -> Result<Address, TransferError> {
        self.by
            .agent
            .wallet_addresses
            .get(self.chain.name)
            .copied()
            .ok_or(TransferError::NoWallet)
    }

    /// The previewed batch as the one send path takes it: a call of the agent's own address, paid by `gas`; paid by
    /// the wallet of an address with no code yet, designating `designate` in the same transaction (the gas of its
    /// authorization added).
    fn outflow(&self, from: Address, previewed: &Previewed, (gas, designate): (Payer, Option<Address>)) -> Outflow<'_> {
        let designate = designate.filter(|_| gas == Payer::Wallet);
        let authorization_gas = match designate {
            Some(_) => crate::transfers::carriers::wallet::AUTHORIZATION_GAS,
            None => 0,
        };
        Outflow {
            id: Uuid::new_v4(),
            agent_id: self.by.agent.id,
            chain: self.chain,
            conversation_id: self.conversation_id,
            from,
            to: from,
            value: self.total(),
            purpose: Purpose::Call(Box::new(CallDraft {
                record: previewed.record.clone(),
                check: Some(previewed.check.clone()),
                gas_limit: previewed.gas_limit.saturating_add(authorization_gas),
                designate,
            })),
            gas,
            clearance: Clearance::Policy,
            mandate: self.by.mandate.clone(),
            owed: Some(OwedEntry::Call {
                actor: self.by.actor,
                asked: self.asked(from, Some(previewed)),
            }),
        }
    }

    /// What its audit entry records was asked: a call of the agent's own address (its `execute`), the sum of the
    /// values, and once previewed the batch's simulated changes.
    fn asked(&self, from: Address, previewed: Option<&Previewed>) -> CallAsked {
        CallAsked {
            chain: self.chain.name.into(),
            to: from.to_checksum(None),
            kind: CallKind::Call,
            amount: format_units(self.total(), self.chain.decimals),
            previewed: previewed.map(|previewed| CallPreview {
                selector: previewed.record.selector.clone(),
                function: previewed.record.function.clone(),
                simulation: previewed.record.simulation.clone(),
            }),
        }
    }
}

impl crate::transfers::kinds::Quote {
    /// The quote of an outflow whose gas the sponsorship pays: the cap holds, and the wallet must hold, only the
    /// native coin it moves (`value`).
    pub(in crate::transfers) fn sponsored(self, value: U256) -> Self {
        let funds = self
            .funds
            .filter(|_| !value.is_zero())
            .map(|f| crate::store::NativeFunds {
                balance: f.balance,
                needed: value,
            });
        Self {
            reserved: value,
            funds,
            ..self
        }
    }
}

impl Outflow<'_> {
    /// The account's own calldata and call gas when the outflow is a batch (its record's `execute` in batch mode):
    /// a user operation carries it as its `callData` in place of the `execute` of one execution.
    pub(in crate::transfers) fn batch_call(&self) -> Option<(alloy::primitives::Bytes, u64)> {
        match &self.purpose {
            Purpose::Call(draft) if !draft.record.calls.is_empty() => {
                Some((draft.record.data.clone(), draft.gas_limit))
            }
            _ => None,
        }
    }
}

impl Transfers {
    /// The account implementation a batch on `chain` runs in: the sponsorable chain's, checked at start (§22: a chain
    /// whose implementation is not configured or did not check out has no batches).
    fn batch_implementation(&self, chain: &'static ChainInfo) -> Result<(Address, Vec<Address>), TransferError> {
        self.sponsors
            .chain(chain.name)
            .map(|s| (s.account_implementation, s.previous_implementations.clone()))
            .ok_or_else(|| TransferError::BatchUnavailable(chain.name.to_string()))
    }

    /// What a batch needs before it is simulated, in §22's order: the implementation (`batch_unavailable`), who pays
    /// (`sponsorship_unavailable`), the targets no call reaches (`call_denied` with its index), the account
    /// (`account_foreign`). The payer, and the implementation to designate in the simulation when the address has
    /// no code yet.
    async fn batch_ready(&self, order: &BatchOrder<'_>) -> Result<(Payer, Option<Address>), TransferError> {
        let (implementation, previous) = self.batch_implementation(order.chain)?;
        let payer = self.payer(order.by.agent.id, order.chain, order.gas).await?;
        let from = order.from()?;
        let targets: Vec<Address> = order.calls.iter().map(|c| c.to).collect();
        self.refuse_unreachable(order.chain, from, &targets)?;
        let calls: Vec<(Address, &alloy::primitives::Bytes)> =
            order.calls.iter().map(|c| (c.to, &c.encoded.calldata)).collect();
        self.refuse_held_authorizations(order.chain, &calls).await?;
        let code = self.chains.get(order.chain.name)?.code(from).await?;
        match (Account::of(&code, Some(implementation), &previous), payer) {
            (Account::Foreign, _) => Err(TransferError::AccountForeign),
            // Designated by the bundle that carries it (sponsored) or by the agent's own transaction (wallet).
            (Account::Eoa, Payer::Sponsor | Payer::Wallet) => Ok((payer, Some(implementation))),
            (Account::Smart, _) => Ok((payer, None)),
        }
    }

    /// Simulates the batch from the agent's address (after its transactions still pending) and reads what it would
    /// do, refusing a call that reverts (`BatchReverted`). The rules are not read here (`judge_batch` does).
    pub async fn preview_batch(&self, order: &BatchOrder<'_>) -> Result<Previewed, TransferError> {
        Ok(self.held_batch(order).await?.0)
    }

    /// `preview_batch`, with the implementation a wallet-paid batch designates in its own transaction (the address
    /// has no code yet), as an approved batch is signed.
    pub(in crate::transfers) async fn held_batch(
        &self,
        order: &BatchOrder<'_>,
    ) -> Result<(Previewed, Option<Address>), TransferError> {
        let (payer, designate) = self.batch_ready(order).await?;
        let pending = self.pending_calls(&order.single(0)).await?;
        let previewed = self.preview_batch_after(order, &pending, designate).await?;
        Ok((previewed, designate.filter(|_| payer == Payer::Wallet)))
    }

    /// The first call the `calls` rules deny, refused with its index (`call_denied`, `details.index`) before the
    /// reservation (which judges the rules again, with the rest, in its atomic step). Left to the reservation when a
    /// refusal §18 orders first applies (a call not understood, an unlimited approval).
    async fn refuse_denied_call(&self, order: &BatchOrder<'_>, previewed: &Previewed) -> Result<(), TransferError> {
        let policy = self.store.get_policy(order.by.agent.id).await.map_err(store_error)?;
        let not_understood = previewed
            .check
            .opaque
            .as_ref()
            .is_some_and(|o| sim::not_understood(o, &policy));
        if not_understood || (previewed.check.unlimited && !policy.allows_unlimited_approvals()) {
            return Ok(());
        }
        let facts = BatchFacts {
            chain: order.chain.name,
            calls: &previewed.record.calls,
            agent: order.from()?,
        };
        match facts.judge(policy.calls.as_deref(), order.guarded) {
            (CallVerdict::Deny, _, Some(_)) => {
                let (index, why) = facts.denial(policy.calls.as_deref(), order.guarded).unwrap_or_default();
                Err(TransferError::CallTargetDenied {
                    index,
                    words: format!("call {index}: {why}"),
                })
            }
            _ => Ok(()),
        }
    }

    /// Simulates, judges and — when allowed — signs and sends the batch (see the module's doc), audited as a call.
    #[tracing::instrument(skip_all, fields(agent_id = %order.by.agent.id, chain = order.chain.name))]
    pub async fn batch(&self, order: BatchOrder<'_>) -> Result<(TransferOutcome, Previewed), TransferError> {
        let from = order.from()?;
        // While the agent's sponsored designation is unmined, the batch is simulated and judged again for a while
        // (§22), and designates the account itself only if the address still has no code then.
        let unmined =
            |o: &Result<_, (TransferError, _)>| matches!(o, Err((TransferError::DesignationUnmined { .. }, _)));
        let outcome = crate::transfers::send::after_designation(|| self.try_batch(&order), unmined).await;
        let previewed = match &outcome {
            Ok((_, previewed)) => Some(previewed),
            Err((_, previewed)) => previewed.as_ref(),
        };
        let asked = Asked::Call(order.asked(from, previewed));
        let result = outcome.as_ref().map(|(o, _)| o).map_err(|(e, _)| e);
        self.record_owed(
            order.by.agent.id,
            order.by.actor,
            asked,
            result,
            AuditProtocol::KeptWithReservation,
        )
        .await;
        outcome.map_err(|(e, _)| e)
    }

    async fn try_batch(
        &self,
        order: &BatchOrder<'_>,
    ) -> Result<(TransferOutcome, Previewed), (TransferError, Option<Previewed>)> {
        let (payer, designate) = self.batch_ready(order).await.map_err(|e| (e, None))?;
        let from = order.from().map_err(|e| (e, None))?;
        // Under the agent's send lock from the simulation to the signature, as a single call (§18).
        let guard: Box<dyn SendGuard> = self
            .store
            .lock_sender(order.by.agent.id, order.chain.name)
            .await
            .map_err(|e| (store_error(e), None))?;
        let pending = self.pending_calls(&order.single(0)).await.map_err(|e| (e, None))?;
        let previewed = self
            .preview_batch_after(order, &pending, designate)
            .await
            .map_err(|e| (e, None))?;
        if let Err(e) = self.refuse_denied_call(order, &previewed).await {
            return Err((e, Some(previewed)));
        }
        match self
            .send_outflow_locked(order.outflow(from, &previewed, (payer, designate)), Some(guard))
            .await
        {
            Ok(outcome) => Ok((outcome, previewed)),
            Err(e) => Err((e, Some(previewed))),
        }
    }

    /// The verdict on a previewed batch: the one decision its reservation would reach now, nothing reserved.
    pub async fn judge_batch(
        &self,
        order: &BatchOrder<'_>,
        previewed: &Previewed,
    ) -> Result<super::DecisionView, TransferError> {
        let from = order.from()?;
        if let Err(denied) = self.refuse_denied_call(order, previewed).await {
            return Ok(super::DecisionView::deny(&denied));
        }
        let ready = self.batch_ready(order).await?;
        let judged = self.judge_outflow(&order.outflow(from, previewed, ready)).await?;
        Ok(super::DecisionView::of(judged))
    }
}
