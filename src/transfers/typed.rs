//! EIP-712 signatures (docs/api.md §18 `sign-typed-data`) on the one send path: typed data is decoded as what it
//! grants (`domain::call::typed`), judged by the typed-data rules and the unlimited-approval guard, and what it
//! grants counted against the assets' limits in the reserving transaction, exactly as the same allowance granted
//! by a call. Nothing is sent: the signature is the transfer's signed bytes, complete once made.

use alloy::primitives::{Address, U256};
use alloy::sol_types::SolCall;
use uuid::Uuid;

use super::call::{AllowanceView, ChangeView, SimulationView, totalSupplyCall};
use super::kinds::{Outflow, Purpose, TypedDraft};
use super::{AuditProtocol, Transacting, TransferError, TransferOutcome, Transfers};
use crate::chain::simulate::SimCall;
use crate::domain::audit::OwedEntry;
use crate::domain::audit::detail::{Asked, TypedAsked, TypedKind};
use crate::domain::call::ledger::{AllowanceMove, TokenOut};
use crate::domain::call::typed::{Typed, TypedGrant};
use crate::domain::chain::ChainInfo;
use crate::domain::transaction::SignatureRecord;
use crate::store::{CallCheck, Clearance};

/// Typed data the agent was asked to sign.
pub struct TypedOrder<'a> {
    /// The agent, checked for the `transact` capability, with who asked and the mandate the request came with.
    pub by: Transacting<'a>,
    pub chain: &'static ChainInfo,
    pub typed: Typed,
    pub conversation_id: Option<Uuid>,
    pub guarded: bool,
}

impl Transfers {
    /// Judges, counts and — when allowed — signs typed data (see the module's doc). Audited as
    /// `typed_data_signed` with the domain, the primary type and what it grants; held or refused as a transfer is.
    #[tracing::instrument(skip_all, fields(agent_id = %order.by.agent.id, chain = order.chain.name))]
    pub async fn sign_typed_data(&self, order: TypedOrder<'_>) -> Result<TransferOutcome, TransferError> {
        let record = self.typed_record(order.chain, &order.typed);
        let asked = TypedAsked {
            chain: order.chain.name.into(),
            kind: TypedKind::TypedData,
            to: order.typed.verifying().to_checksum(None),
            domain: order.typed.json.get("domain").cloned().unwrap_or_default(),
            primary_type: order.typed.primary_type().into(),
            digest: order.typed.digest,
            simulation: record.simulation.clone(),
        };
        // The entry is kept with the signature's reservation: a signature stored is readable at once, so a process
        // that dies before the entry's round leaves it for the watcher (`write_owed`), never unaudited.
        let owed = OwedEntry::TypedData {
            actor: order.by.actor,
            asked: asked.clone(),
        };
        let outcome = self.try_sign_typed(&order, record, owed).await;
        let (agent_id, actor) = (order.by.agent.id, order.by.actor);
        self.record_owed(
            agent_id,
            actor,
            Asked::TypedData(asked),
            outcome.as_ref(),
            AuditProtocol::KeptWithReservation,
        )
        .await;
        outcome
    }

    async fn try_sign_typed(
        &self,
        order: &TypedOrder<'_>,
        record: SignatureRecord,
        owed: OwedEntry,
    ) -> Result<TransferOutcome, TransferError> {
        let chain = order.chain;
        let from = *order
            .by
            .agent
            .wallet_addresses
            .get(chain.name)
            .ok_or(TransferError::NoWallet)?;
        let mut check = self.typed_check(chain, &order.typed, order.guarded, from);
        check.unlimited |= self.grants_whole_supply(chain, &order.typed).await;
        self.send_outflow(Outflow {
            id: Uuid::new_v4(),
            agent_id: order.by.agent.id,
            chain,
            conversation_id: order.conversation_id,
            from,
            to: order.typed.verifying(),
            value: U256::ZERO,
            purpose: Purpose::TypedData(Box::new(TypedDraft {
                record,
                check: Some(check),
            })),
            gas: crate::domain::transaction::Payer::Wallet,
            clearance: Clearance::Policy,
            mandate: order.by.mandate.clone(),
            owed: Some(owed),
        })
        .await
    }

    /// What the reservation judges of a signature: what is forbidden whatever the rules (for the agent whose
    /// address is `account`), the unlimited guard, the transfers it lets the spender make (outflows), and the
    /// allowances it sets — a permit sets the allowance it names whatever stood before, so it counts whole (§18),
    /// and the ledger's counted remainder for its spender becomes it once signed.
    pub(super) fn typed_check(
        &self,
        chain: &'static ChainInfo,
        typed: &Typed,
        guarded: bool,
        account: Address,
    ) -> CallCheck {
        let grants = &typed.grants;
        let outs: Vec<TokenOut> = grants
            .iter()
            .filter(|g| g.is_transfer())
            .map(|g| TokenOut {
                asset_key: self.name_token(chain, Some(g.token)).asset_key,
                token: g.token,
                amount: g.amount,
                party: g.spender,
            })
            .collect();
        let moves: Vec<AllowanceMove> = grants
            .iter()
            .filter(|g| !g.is_transfer())
            .map(|g| AllowanceMove::set(self.name_token(chain, Some(g.token)).asset_key, g.pair(), g.amount))
            .collect();
        let decimals = self.limit_decimals(std::iter::empty(), &outs, &moves);
        CallCheck {
            forbidden: typed.forbidden(&self.chains.delegation_managers(), account),
            typed: Some(std::sync::Arc::new(typed.clone())),
            unlimited: typed.grants_unlimited(),
            guarded,
            fixed: Vec::new(),
            outs,
            moves,
            receivers: grants.iter().map(|g| g.spender).collect(),
            opaque: None,
            decimals,
        }
    }

    /// Whether a permit sets an allowance of at least its token's whole supply (§18: unlimited), read at the latest
    /// block; a node or token that does not answer leaves it to the amounts §18 names.
    async fn grants_whole_supply(&self, chain: &'static ChainInfo, typed: &Typed) -> bool {
        let grants: Vec<&TypedGrant> = typed
            .grants
            .iter()
            .filter(|g| !g.is_transfer() && !g.amount.is_zero())
            .collect();
        if grants.is_empty() {
            return false;
        }
        let Ok(client) = self.chains.node(chain.name) else {
            return false;
        };
        let reads: Vec<SimCall> = grants
            .iter()
            .map(|g| SimCall {
                from: Address::ZERO,
                to: g.token,
                data: totalSupplyCall {}.abi_encode().into(),
                ..SimCall::default()
            })
            .collect();
        let Ok((_, results)) = client.simulate(&reads, false, None).await else {
            return false;
        };
        grants.iter().zip(results).any(|(g, r)| {
            r.success && r.return_data.len() >= 32 && {
                let supply = U256::from_be_slice(&r.return_data[..32]);
                !supply.is_zero() && g.amount >= supply
            }
        })
    }

    /// What is stored of a signature: the typed data, its digest, and what it grants shown as a call's simulation
    /// is (`approvals` for allowances, `changes` out for a transfer the spender may make).
    fn typed_record(&self, chain: &'static ChainInfo, typed: &Typed) -> SignatureRecord {
        let grants = &typed.grants;
        let simulation = SimulationView {
            changes: grants
                .iter()
                .filter(|g| g.is_transfer())
                .map(|g| {
                    let named = self.name_token(chain, Some(g.token));
                    ChangeView {
                        token: named.registry.is_none().then(|| g.token.to_checksum(None)),
                        amount: named.amount(g.amount),
                        asset: named.asset_key,
                        direction: "out".into(),
                    }
                })
                .collect(),
            approvals: grants
                .iter()
                .filter(|g| !g.is_transfer())
                .map(|g| AllowanceView {
                    token: g.token.to_checksum(None),
                    spender: g.spender.to_checksum(None),
                    amount: self.name_token(chain, Some(g.token)).amount(g.amount),
                    unlimited: g.unlimited,
                })
                .collect(),
            gas_used: 0,
        };
        SignatureRecord {
            typed_data: typed.json.clone(),
            digest: typed.digest,
            simulation: serde_json::to_value(&simulation).unwrap_or_default(),
        }
    }
}
