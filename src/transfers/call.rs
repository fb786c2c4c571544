//! Contract calls (docs/api.md §18), a third kind of outflow on the one send path: the call is simulated from the
//! agent's address before anything is signed, its effect on the wallet read from the simulation's logs
//! (`domain::call::effect`), and what it takes or allows counted against the assets' limits in the reserving
//! transaction, beside the `calls` rules and the unlimited-approval guard (`domain::decision`). A call that reverts
//! is refused with its decoded reason; a node that cannot simulate refuses every call. The simulation is `preview`;
//! the counting of what a call moves (its outflows, the allowances it sets or spends), `counts`; the addresses no
//! call reaches whatever the rules, refused before the simulation (§22), `targets`.

use alloy::primitives::{Address, U256};
use serde::Serialize;
use uuid::Uuid;

use super::kinds::{CallDraft, Outflow, Purpose};
use super::send::Judged;
use super::{AuditProtocol, Transacting, TransferError, TransferOutcome, Transfers, store_error};
use crate::domain::amount::format_units;
use crate::domain::asset::{self, Asset};
use crate::domain::audit::OwedEntry;
use crate::domain::audit::detail::{Asked, CallAsked, CallKind, CallPreview};
use crate::domain::call::ledger::{AllowanceMove, TokenOut};
use crate::domain::call::{self, Encoded};
use crate::domain::chain::ChainInfo;
use crate::domain::transaction::{CallRecord, Payer};
use crate::sponsor::Account;
use crate::store::{CallCheck, Clearance};

mod batch;
mod counts;
mod held;
mod preview;
pub(crate) mod targets;

pub use batch::{BatchCall, BatchOrder};
pub(super) use counts::totalSupplyCall;

/// A call the agent was asked to make.
pub struct CallOrder<'a> {
    /// The agent, checked for the `transact` capability, with who asked and the mandate the request came with.
    pub by: Transacting<'a>,
    pub chain: &'static ChainInfo,
    pub to: Address,
    /// Native value, in wei.
    pub value: U256,
    pub encoded: Encoded,
    pub conversation_id: Option<Uuid>,
    /// Whether the agent is guarded (an admin token, or owner addresses): when no rule decides, a guarded agent's
    /// calls are refused.
    pub guarded: bool,
    /// Who pays the gas, as asked (`None`: the default, `Transfers::payer`): sponsored, the call is one user
    /// operation of the agent's account, its `execute` in single mode (§22).
    pub gas: Option<Payer>,
}

impl CallOrder<'_> {
    /// The previewed call from `from`, its gas paid by `gas`, as the one send path takes it (and its preview judges
    /// it).
    fn outflow(&self, from: Address, previewed: &Previewed, gas: Payer) -> Outflow<'_> {
        Outflow {
            id: Uuid::new_v4(),
            agent_id: self.by.agent.id,
            chain: self.chain,
            conversation_id: self.conversation_id,
            from,
            to: self.to,
            value: self.value,
            purpose: Purpose::Call(Box::new(CallDraft {
                record: previewed.record.clone(),
                check: Some(previewed.check.clone()),
                gas_limit: previewed.gas_limit,
                designate: None,
            })),
            gas,
            clearance: Clearance::Policy,
            mandate: self.by.mandate.clone(),
            owed: Some(OwedEntry::Call {
                actor: self.by.actor,
                asked: self.asked(Some(previewed)),
            }),
        }
    }

    /// What its audit entry records was asked: the call, with its function and simulated changes once previewed.
    fn asked(&self, previewed: Option<&Previewed>) -> CallAsked {
        CallAsked {
            chain: self.chain.name.into(),
            to: self.to.to_checksum(None),
            kind: CallKind::Call,
            amount: format_units(self.value, self.chain.decimals),
            previewed: previewed.map(|previewed| CallPreview {
                selector: previewed.record.selector.clone(),
                function: previewed.record.function.clone(),
                simulation: previewed.record.simulation.clone(),
            }),
        }
    }
}

/// One balance change of the agent's (§18 `simulation.changes`).
#[derive(Debug, Clone, Serialize, serde::Deserialize, PartialEq, Eq)]
pub struct ChangeView {
    pub asset: String,
    pub token: Option<String>,
    pub amount: String,
    pub direction: String,
}

/// One allowance the call grants (§18 `simulation.approvals`).
#[derive(Debug, Clone, Serialize, serde::Deserialize, PartialEq, Eq)]
pub struct AllowanceView {
    pub token: String,
    pub spender: String,
    pub amount: String,
    pub unlimited: bool,
}

/// What the simulation showed (§18 `simulation`).
#[derive(Debug, Clone, Serialize, serde::Deserialize, PartialEq, Eq)]
pub struct SimulationView {
    pub changes: Vec<ChangeView>,
    pub approvals: Vec<AllowanceView>,
    pub gas_used: u64,
}

/// A simulated call: what it is, what it would do, and what its reservation will judge.
#[derive(Debug, Clone)]
pub struct Previewed {
    pub record: CallRecord,
    pub simulation: SimulationView,
    pub check: CallCheck,
    pub gas_limit: u64,
}

/// An asset of the chain as the policy and the views name it: a registry asset by its symbol (amounts in whole
/// units), any other token by its lower-case address (amounts in base units).
pub(super) struct Named {
    pub asset_key: String,
    pub registry: Option<Asset>,
}

impl Named {
    pub(super) fn amount(&self, value: U256) -> String {
        match &self.registry {
            Some(asset) => format_units(value, asset.decimals),
            None => value.to_string(),
        }
    }
}

impl Transfers {
    pub(super) fn name_token(&self, chain: &'static ChainInfo, token: Option<Address>) -> Named {
        match token {
            None => Named {
                asset_key: asset::key(chain.name, chain.native_symbol),
                registry: Some(Asset::native(chain)),
            },
            Some(address) => match self.chains.tokens().find(chain, &address.to_checksum(None)) {
                Some(found) => Named {
                    asset_key: found.key(),
                    registry: Some(found),
                },
                None => Named {
                    asset_key: format!("{}:{}", chain.name, format!("{address:#x}").to_lowercase()),
                    registry: None,
                },
            },
        }
    }

    /// The decimals the policy's limits of each asset a call or signature may count are written in (`CallCheck::
    /// decimals`): those of its native value or allowances (`fixed`), its token outflows and its allowance moves.
    pub(super) fn limit_decimals<'k>(
        &self,
        fixed: impl Iterator<Item = &'k String>,
        outs: &'k [TokenOut],
        moves: &'k [AllowanceMove],
    ) -> std::collections::BTreeMap<String, u8> {
        let keys = fixed
            .chain(outs.iter().map(|o| &o.asset_key))
            .chain(moves.iter().map(|m| &m.asset_key));
        keys.map(|key| {
            let decimals = self.chains.tokens().limit_key(key).map_or(0, |(_, d)| d);
            (key.clone(), decimals)
        })
        .collect()
    }

    /// Simulates, judges and — when allowed — signs and sends the call (see the module's doc). Audited as a
    /// transfer is, with the call's function and its simulated changes.
    #[tracing::instrument(skip_all, fields(agent_id = %order.by.agent.id, chain = order.chain.name))]
    pub async fn call(&self, order: CallOrder<'_>) -> Result<(TransferOutcome, Previewed), TransferError> {
        // While the agent's sponsored designation is unmined, the call is simulated and judged again for a while (§22).
        let unmined =
            |o: &Result<_, (TransferError, _)>| matches!(o, Err((TransferError::DesignationUnmined { .. }, _)));
        let outcome = super::send::after_designation(|| self.try_call(&order), unmined).await;
        let previewed = match &outcome {
            Ok((_, previewed)) => Some(previewed),
            Err((_, previewed)) => previewed.as_ref(),
        };
        let asked = Asked::Call(order.asked(previewed));
        let result = outcome.as_ref().map(|(o, _)| o).map_err(|(e, _)| e);
        // A call that was stored was reserved with its entry kept (`CallOrder::outflow`).
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

    async fn try_call(
        &self,
        order: &CallOrder<'_>,
    ) -> Result<(TransferOutcome, Previewed), (TransferError, Option<Previewed>)> {
        let payer = self.call_ready(order).await.map_err(|e| (e, None))?;
        // Under the agent's send lock from the simulation to the signature: nothing of the agent's lands between
        // them, and the call is simulated after the agent's transactions still pending (§18).
        let guard = self
            .store
            .lock_sender(order.by.agent.id, order.chain.name)
            .await
            .map_err(|e| (store_error(e), None))?;
        let pending = self.pending_calls(order).await.map_err(|e| (e, None))?;
        let previewed = self.preview_after(order, &pending).await.map_err(|e| (e, None))?;
        let from = *order
            .by
            .agent
            .wallet_addresses
            .get(order.chain.name)
            .ok_or((TransferError::NoWallet, None))?;
        let sent = self
            .send_outflow_locked(order.outflow(from, &previewed, payer), Some(guard))
            .await;
        match sent {
            Ok(outcome) => Ok((outcome, previewed)),
            Err(e) => Err((e, Some(previewed))),
        }
    }

    /// What a call needs before it is simulated, in §22's order: who pays (`sponsorship_unavailable`), the targets
    /// no call reaches (`call_denied`, §22) and the authorizations held for payments to the agent (§23), and, for a
    /// sponsored one, the account (`account_foreign`). The payer.
    async fn call_ready(&self, order: &CallOrder<'_>) -> Result<Payer, TransferError> {
        let payer = self.payer(order.by.agent.id, order.chain, order.gas).await?;
        // A target no call may reach is refused before anything is read or simulated (§22).
        self.refuse_unreachable_call(order)?;
        // An authorization held for a payment to the agent is settled through no call (§23).
        self.refuse_held_authorizations(order.chain, &[(order.to, &order.encoded.calldata)])
            .await?;
        if payer == Payer::Sponsor {
            let from = *order
                .by
                .agent
                .wallet_addresses
                .get(order.chain.name)
                .ok_or(TransferError::NoWallet)?;
            let sponsor = self
                .sponsors
                .chain(order.chain.name)
                .ok_or_else(|| TransferError::SponsorshipUnavailable(order.chain.name.to_string()))?;
            let code = self.chains.get(order.chain.name)?.code(from).await?;
            let account = Account::of(
                &code,
                Some(sponsor.account_implementation),
                &sponsor.previous_implementations,
            );
            if account == Account::Foreign {
                return Err(TransferError::AccountForeign);
            }
        }
        Ok(payer)
    }
}

/// The verdict a call's simulation reports (§18 `decision`): what its reservation would decide now.
#[derive(Debug, Clone, Serialize, PartialEq, Eq)]
pub struct DecisionView {
    /// `allow`, `deny` or `approve`.
    pub result: &'static str,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub code: Option<&'static str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub rule: Option<&'static str>,
    /// A refusal in the words its error would give (`deny` only). Not part of `decision`, whose keys §18 names:
    /// the answer carries it beside it.
    #[serde(skip)]
    pub message: Option<String>,
}

impl DecisionView {
    /// The view of a verdict.
    pub(super) fn of(judged: Judged) -> Self {
        match judged {
            Judged::Allow => DecisionView {
                result: "allow",
                code: None,
                rule: None,
                message: None,
            },
            Judged::Approve => DecisionView {
                result: "approve",
                code: None,
                rule: None,
                message: None,
            },
            Judged::Deny(e) => DecisionView::deny(&e),
        }
    }

    fn deny(error: &TransferError) -> Self {
        let code = if error.policy_rule().is_some() {
            "policy_denied"
        } else {
            error.code()
        };
        DecisionView {
            result: "deny",
            code: Some(code),
            // A policy's rule, or a delegation's (§21 `delegation_limit`, `delegation_caveat`) as its 403 names it.
            rule: (code == "policy_denied").then(|| error.refused_rule()).flatten(),
            message: Some(error.to_string()),
        }
    }
}

impl Transfers {
    /// The verdict on a previewed call: the one decision its reservation would reach now (the same request, facts
    /// and `decide`, under the agent's lock), with nothing reserved, signed or written.
    pub async fn judge_call(
        &self,
        order: &CallOrder<'_>,
        previewed: &Previewed,
    ) -> Result<DecisionView, TransferError> {
        let from = *order
            .by
            .agent
            .wallet_addresses
            .get(order.chain.name)
            .ok_or(TransferError::NoWallet)?;
        let payer = self.payer(order.by.agent.id, order.chain, order.gas).await?;
        Ok(DecisionView::of(
            self.judge_outflow(&order.outflow(from, previewed, payer)).await?,
        ))
    }
}

impl Transfers {
    /// Simulates a held call again before it is approved: refused (`SimulationChanged`, it stays waiting) when any
    /// outflow or allowance grew, or one appeared that the owner was not shown. Its answer is what the approved
    /// call counts and leaves in the allowance ledger when it is reserved for signing (§18: nothing before); with
    /// the implementation a wallet-paid batch designates in its own transaction when the address has no code yet.
    pub(super) async fn check_unchanged(
        &self,
        agent: &crate::domain::agent::Agent,
        chain: &'static ChainInfo,
        approval: &crate::store::Approval,
        record: &CallRecord,
    ) -> Result<(CallCheck, Option<Address>), TransferError> {
        let order = CallOrder {
            by: Transacting::approved(agent),
            chain,
            to: approval.to,
            value: approval.value_wei,
            encoded: call::Encoded {
                calldata: record.data.clone(),
                function: None,
            },
            conversation_id: approval.conversation_id,
            guarded: true,
            gas: approval.body.transaction().map(|t| t.gas),
        };
        // A batch (§22) is simulated again as a batch, from what its record keeps of each call.
        let (previewed, designate) = match record.calls.is_empty() {
            true => (self.preview_call(&order).await?, None),
            false => {
                self.held_batch(&BatchOrder::held(agent, chain, approval, record))
                    .await?
            }
        };
        let now = previewed.simulation;
        let shown: SimulationView = serde_json::from_value(record.simulation.clone()).map_err(|e| {
            store_error(crate::store::StoreError::Corrupt(format!(
                "call_record.simulation: {e}"
            )))
        })?;
        let amount = |text: &str| crate::domain::amount::parse_units(text, 36).unwrap_or(U256::MAX);
        for change in now.changes.iter().filter(|c| c.direction == "out") {
            let before = shown
                .changes
                .iter()
                .find(|c| c.direction == "out" && c.asset == change.asset);
            if before.is_none_or(|b| amount(&change.amount) > amount(&b.amount)) {
                return Err(TransferError::SimulationChanged(format!(
                    "{} {} out",
                    change.amount, change.asset
                )));
            }
        }
        for grant in &now.approvals {
            let before = shown
                .approvals
                .iter()
                .find(|g| g.token == grant.token && g.spender == grant.spender);
            if before.is_none_or(|b| amount(&grant.amount) > amount(&b.amount) || (grant.unlimited && !b.unlimited)) {
                return Err(TransferError::SimulationChanged(format!(
                    "an allowance of {} to {}",
                    grant.amount, grant.spender
                )));
            }
        }
        Ok((previewed.check, designate))
    }
}
