//! The money path: every outflow of an agent's wallet (native and ERC-20 transfers, contract calls and typed-data
//! signatures, §18; x402 payments, `pay`, §16; an owner's sweep, §20) goes through one send path (`send`):
//! quote -> the agent's send lock -> decide in the store's transaction -> sign (a key in memory in that transaction,
//! once allowed; a token outside every database transaction, nothing written, then decide again under the agent's
//! lock) -> record the signature -> release -> broadcast
//! (or, for a payment, the paid request) -> on refusal give the nonce back or fill it. The rules that decide (cap,
//! funds, policy, call rules, approval, a sweep's destination) are `domain::decision::decide`'s, on facts the store
//! reads in that transaction: a refusal names its rule, and an outflow that needs an owner's approval is stored
//! waiting instead of signed (`approvals` approves and rejects). Only an agent checked for the `transact`
//! capability (`Transacting`) reaches the path. Sends of one (agent, chain) are serialised by a store lock, so no
//! nonce is ever reused or skipped. The service answers with a typed outcome or a `TransferError`; what a caller shows
//! of them (a tool result, an HTTP body) is decided at that caller.
//!
//! Rooms: `send` is the path (quote, lock, `reserve_once`, deliver, the refusal handler); `signing` opens the
//! agent's signer and signs; `deliver` hands a stored transaction to the node and fills a refused one's nonce;
//! `call`, `typed`, `pay` and `sweep` are the kinds' entry points onto the path; `approvals`, `replace` (fee bumps
//! and cancels) and `gaps` act on what the path stored; `rounds` is group commit's work (a round of sends reserved
//! and audit entries written in one transaction, on `crate::batch`'s queue); this file holds the service, its orders
//! and outcomes, and the audit of each outcome (`AuditProtocol`: an entry kept with its reservation is written lazily,
//! any other before the answer).

use std::sync::Arc;

use alloy::primitives::{Address, U256};
use uuid::Uuid;

use crate::chain::Chains;
use crate::domain::agent::Agent;
use crate::domain::amount::Amount;
use crate::domain::asset::Asset;
use crate::domain::audit::detail::{self, Asked, AssetAsked};
use crate::domain::audit::{Actor, Detail, OwedEntry};
use crate::domain::chain::ChainInfo;
use crate::domain::recipient::Recipient;
use crate::domain::transaction::{Body, StoredTx, TokenRef};
use crate::signer::Keys;
use crate::store::{Approval, AuditEvent, Clearance, OutflowEntry, Store, StoreError, TransferRequest};
use crate::vault::Vault;

mod approvals;
mod call;
mod carriers;
mod deliver;
mod error;
mod gaps;
mod kinds;
mod nonces;
mod pay;
mod preview;
mod redeem;
mod replace;
mod reserve;
mod rounds;
mod send;
mod settle;
mod signing;
mod sponsored;
mod sweep;
mod transacting;
mod typed;

#[cfg(test)]
pub(crate) mod tests;

pub use call::{AllowanceView, BatchCall, BatchOrder, CallOrder, ChangeView, DecisionView, Previewed, SimulationView};
use carriers::wallet::{sign_eip1559, sign_transfer};
pub use deliver::rebroadcast;
pub use error::TransferError;
use kinds::{Outflow, Purpose};
use nonces::{Nonces, nonce_filler};
pub use pay::{Paid, PayError, PayOrder, Payment, url_without_query};
pub use preview::{FeePreview, TransferPreview, WalletFee};
pub use replace::{Bump, Cancelled};
pub use reserve::reserve_once;
pub use settle::SettleOrder;
pub(crate) use signing::l1_probe;
pub(crate) use signing::signer_error;
pub use sweep::SweepOrder;
pub use transacting::Transacting;
pub use typed::TypedOrder;

/// How old a fee reading a transfer may use (its fee cap covers the base-fee growth of a few blocks).
const FEE_MAX_AGE: std::time::Duration = std::time::Duration::from_secs(2);

/// Test switches that simulate failures around the broadcast (refused in production by the configuration).
pub use crate::config::Faults;

/// The transfer service: what a native transfer needs, and nothing else.
#[derive(Clone)]
pub struct Transfers {
    store: Arc<dyn Store>,
    chains: Arc<Chains>,
    vault: Arc<Vault>,
    /// Where the agents' keys sign (§20).
    keys: Arc<Keys>,
    faults: Faults,
    /// The guarded fetch x402 payments go through.
    fetcher: crate::net::egress::Fetcher,
    /// What the send path knows of nonces besides the store (where an (agent, chain) starts counting).
    nonces: Arc<Nonces>,
    /// The on-chain delegations the agents' transfers may redeem (§21); none: every chain answers
    /// `delegations_unavailable`.
    delegations: Option<crate::delegations::Delegations>,
    /// On-chain sends waiting to be reserved and outflows' audit entries (with the `pending` mark of the ones the
    /// node took) waiting to be written: a round of both per transaction (group commit).
    rounds: rounds::Rounds,
    /// What the service reads the time on (the system's clock outside tests).
    clock: Arc<dyn crate::domain::clock::Clock>,
    /// The chains where the operator sponsors gas (§22).
    sponsors: crate::sponsor::Sponsors,
    /// Rung when a sponsored operation is stored, so the bundler carries it at once.
    bundles: Arc<tokio::sync::Notify>,
}

/// How an outflow's audit entry reaches the log, and so when the outflow is answered.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum AuditProtocol {
    /// The outflow was reserved with its entry kept (`TransferRequest::owed`, an `OwedEntry`: a transfer, a call, a
    /// sweep, typed data). Once stored and sent, its entry takes the kept one's place (`OutflowEntry::owes`; left
    /// out if the watcher wrote the kept one first) and is written lazily, in a round that runs anyway
    /// (`Rounds::record_lazily`): the outflow is answered at once. Refused or held, it kept none, and is answered
    /// as `WrittenBeforeAnswer` is.
    KeptWithReservation,
    /// No entry was kept: the outflow is answered once its entry is written (or its failure logged).
    WrittenBeforeAnswer,
}

/// Counts of group commit's rounds (`Transfers::round_figures`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct RoundFigures {
    pub reservation_rounds: u64,
    pub reserved: u64,
    pub record_rounds: u64,
    pub recorded: u64,
    /// Microseconds spent in rounds of either kind, over every shard.
    pub busy_micros: u64,
}

/// A transfer the agent was asked to make.
pub struct TransferOrder<'a> {
    /// The agent, checked for the `transact` capability, with who asked and the mandate the request came with.
    pub by: Transacting<'a>,
    pub chain: &'static ChainInfo,
    pub to: Address,
    /// The registry token to move (its `token` set); `None`: the chain's native coin.
    pub token: Option<Asset>,
    /// In base units of the asset (parsed once, where the order entered), never zero.
    pub amount: Amount,
    pub conversation_id: Option<Uuid>,
    /// An on-chain delegation of the agent's to redeem (§21): the amount leaves its delegator's account.
    pub delegation: Option<Uuid>,
    /// Who pays the gas (§22 `gas`); `None`: the sponsorship where the agent has one with a non-zero `per_day` on
    /// the chain, else the wallet.
    pub gas: Option<crate::domain::transaction::Payer>,
}

/// Where a stored outflow stands when the send path returns.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BroadcastStatus {
    /// The node accepted it.
    Pending,
    /// The node's answer was lost: it is stored as signed and the watcher broadcasts it again.
    Submitted,
}

impl BroadcastStatus {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Pending => "pending",
            Self::Submitted => "submitted",
        }
    }
}

/// What became of a transfer the service accepted.
#[derive(Debug, Clone)]
pub enum TransferOutcome {
    /// Signed, stored and handed to the node.
    Sent {
        chain: &'static ChainInfo,
        tx: StoredTx,
        status: BroadcastStatus,
    },
    /// Stored waiting for an owner's approval (holding its reservation; no nonce, no signature).
    AwaitingApproval {
        chain: &'static ChainInfo,
        approval: Approval,
    },
}

fn store_error(err: StoreError) -> TransferError {
    tracing::error!(error = %err, "store error during a transfer");
    TransferError::Store(err)
}

impl Transfers {
    pub fn new(
        store: Arc<dyn Store>,
        chains: Arc<Chains>,
        vault: Arc<Vault>,
        keys: Arc<Keys>,
        faults: Faults,
        x402: crate::config::X402Config,
    ) -> Self {
        let (leaders, own_thread) = (store.round_leaders(), store.rounds_on_own_thread());
        Transfers {
            rounds: rounds::Rounds::new(store.clone(), leaders, own_thread),
            store,
            chains,
            vault,
            keys,
            faults,
            fetcher: crate::net::egress::Fetcher::new(x402),
            nonces: Default::default(),
            delegations: None,
            clock: Arc::new(crate::domain::clock::SystemClock),
            sponsors: Default::default(),
            bundles: Default::default(),
        }
    }

    /// The same service sending sponsored outflows on `sponsors`' chains, ringing `bundles` as it stores one.
    pub fn with_sponsors(mut self, sponsors: crate::sponsor::Sponsors, bundles: Arc<tokio::sync::Notify>) -> Self {
        self.sponsors = sponsors;
        self.bundles = bundles;
        self
    }

    /// The same service reading the time on `clock` (a test's, which it can move ahead).
    pub fn with_clock(mut self, clock: Arc<dyn crate::domain::clock::Clock>) -> Self {
        self.clock = clock;
        self
    }

    /// How group commit went so far, for the benchmarks: reservation rounds and the sends they reserved, rounds of
    /// audit entries alone, and the entries every round wrote.
    pub fn round_figures(&self) -> RoundFigures {
        let [reservation_rounds, reserved, record_rounds, recorded, busy_micros] = self.rounds.figures();
        RoundFigures {
            reservation_rounds,
            reserved,
            record_rounds,
            recorded,
            busy_micros,
        }
    }

    /// The same service redeeming the delegations `delegations` registers (§21).
    pub fn with_delegations(mut self, delegations: crate::delegations::Delegations) -> Self {
        self.delegations = Some(delegations);
        self
    }

    /// Sends the native coin or a token. Refusals create no transaction.
    #[tracing::instrument(skip_all, fields(agent_id = %order.by.agent.id, chain = order.chain.name))]
    pub async fn send(&self, order: TransferOrder<'_>) -> Result<TransferOutcome, TransferError> {
        let asked = AssetAsked {
            chain: order.chain.name.into(),
            asset: symbol(&order).into(),
            to: order.to.to_checksum(None),
            amount: Some(order.amount.text().to_owned()),
            delegation_id: order.delegation,
        };
        let owed = OwedEntry::Transfer {
            actor: order.by.actor,
            asked: asked.clone(),
        };
        let outcome = self.try_send(&order, owed).await;
        let (agent_id, actor) = (order.by.agent.id, order.by.actor);
        let kept = AuditProtocol::KeptWithReservation;
        self.record_owed(agent_id, actor, Asked::Asset(asked), outcome.as_ref(), kept)
            .await;
        outcome
    }

    /// An outflow refused where it entered, before it was an order (an amount that does not parse): audited as
    /// `send` audits its own refusals (`asked` saying what was asked), and returned.
    pub async fn refused_order(
        &self,
        agent: &Agent,
        actor: Actor,
        asked: Asked,
        refusal: TransferError,
    ) -> TransferError {
        self.record_outcome(agent.id, actor, asked, Err(&refusal)).await;
        refusal
    }

    /// Audits what became of an outflow (`transfer_accepted` with its id, status and hash, `typed_data_signed`, or
    /// `transfer_refused` with its code and rule), `asked` saying what was asked.
    pub(crate) async fn record_outcome(
        &self,
        agent_id: Uuid,
        actor: Actor,
        asked: Asked,
        outcome: Result<&TransferOutcome, &TransferError>,
    ) {
        self.record_owed(agent_id, actor, asked, outcome, AuditProtocol::WrittenBeforeAnswer)
            .await;
    }

    /// `record_outcome` of an outflow whose entry may have been kept with its reservation (`protocol`).
    pub(super) async fn record_owed(
        &self,
        agent_id: Uuid,
        actor: Actor,
        asked: Asked,
        outcome: Result<&TransferOutcome, &TransferError>,
        protocol: AuditProtocol,
    ) {
        let detail = match (asked, outcome) {
            (Asked::TypedData(asked), Ok(TransferOutcome::Sent { tx, .. }))
                if matches!(tx.body, Body::Signature(_)) =>
            {
                Detail::TypedDataSigned(detail::TypedDataSigned {
                    asked,
                    transfer_id: tx.id,
                })
            }
            (asked, outcome) => match audited(outcome) {
                Ok(accepted) => Detail::TransferAccepted(detail::TransferAccepted { asked, accepted }),
                Err(refused) => Detail::TransferRefused(detail::TransferRefused { asked, refused }),
            },
        };
        self.record_audited(agent_id, actor, detail, outcome, protocol).await;
    }

    /// `record_outcome` for a sweep (§20): `funds_swept` or `sweep_refused`; a sweep is reserved with its entry kept.
    async fn record_sweep(
        &self,
        agent_id: Uuid,
        actor: Actor,
        asked: AssetAsked,
        outcome: Result<&TransferOutcome, &TransferError>,
    ) {
        let detail = match audited(outcome) {
            Ok(accepted) => Detail::FundsSwept(detail::FundsSwept { asked, accepted }),
            Err(refused) => Detail::SweepRefused(detail::SweepRefused { asked, refused }),
        };
        let kept = AuditProtocol::KeptWithReservation;
        self.record_audited(agent_id, actor, detail, outcome, kept).await;
    }

    /// Writes an outflow's audit entry (see `AuditProtocol`). One the node accepted is marked `pending` in the
    /// entry's transaction (the send path leaves it `signed` until then).
    async fn record_audited(
        &self,
        agent_id: Uuid,
        actor: Actor,
        detail: Detail,
        outcome: Result<&TransferOutcome, &TransferError>,
        protocol: AuditProtocol,
    ) {
        let sent = match outcome {
            Ok(TransferOutcome::Sent { tx, status, .. }) => Some((tx.id, *status)),
            _ => None,
        };
        let entry = |owes| OutflowEntry {
            accepted: sent.and_then(|(id, status)| (status == BroadcastStatus::Pending).then_some(id)),
            owes,
            event: AuditEvent::new(agent_id, actor, detail),
        };
        match (protocol, sent) {
            // The entry is in the database already, and is in the log before a read of it here
            // (`entries_written`), or, after a crash, once the watcher writes the kept one.
            (AuditProtocol::KeptWithReservation, Some((id, _))) => self.rounds.record_lazily(entry(Some(id))),
            // Refused or held, an outflow kept no entry.
            (AuditProtocol::KeptWithReservation, None) | (AuditProtocol::WrittenBeforeAnswer, _) => {
                self.rounds.record(entry(None)).await
            }
        }
    }

    /// Waits until the audit entries of the outflows answered so far are in the log (at most a few seconds): a
    /// read of the log after an answer shows its entry.
    pub async fn entries_written(&self) {
        self.rounds.entries_written(std::time::Duration::from_secs(5)).await;
    }

    /// Sends what `order` asks; while the agent's sponsored designation is unmined, asks again for a while (§22).
    async fn try_send(&self, order: &TransferOrder<'_>, owed: OwedEntry) -> Result<TransferOutcome, TransferError> {
        let attempt = || {
            let owed = owed.clone();
            async move {
                let outflow = self.outflow(order, Some(owed)).await?;
                self.send_outflow(outflow).await
            }
        };
        send::after_designation(attempt, |o| matches!(o, Err(TransferError::DesignationUnmined { .. }))).await
    }

    /// The outflow `order` makes (its recipient checked, a delegation's redemption drafted, who pays the gas), as
    /// `send` sends it and `preview_transfer` judges it.
    async fn outflow<'a>(
        &self,
        order: &TransferOrder<'a>,
        owed: Option<OwedEntry>,
    ) -> Result<Outflow<'a>, TransferError> {
        let to = recipient(order.by.agent, order.chain, order.to)?;
        let purpose = match (&order.token, order.delegation) {
            (_, Some(id)) => {
                let draft = self
                    .redeemable(
                        order.by.agent.id,
                        order.chain,
                        id,
                        order.token.as_ref(),
                        to.from(),
                        to.to(),
                        order.amount.value(),
                    )
                    .await?;
                Purpose::Redeem(Box::new(draft))
            }
            (None, None) => Purpose::Native,
            (Some(token), None) => Purpose::Token(token.clone()),
        };
        Ok(Outflow {
            id: Uuid::new_v4(),
            agent_id: order.by.agent.id,
            chain: order.chain,
            conversation_id: order.conversation_id,
            from: to.from(),
            to: to.to(),
            value: order.amount.value(),
            purpose,
            gas: self.payer(order.by.agent.id, order.chain, order.gas).await?,
            clearance: Clearance::Policy,
            mandate: order.by.mandate.clone(),
            owed,
        })
    }

    /// Records an audit entry; a failure is logged, never turned into a failed transfer after the fact.
    async fn audit(&self, agent_id: Uuid, actor: Actor, detail: Detail) {
        self.audit_event(&AuditEvent::new(agent_id, actor, detail)).await;
    }

    async fn audit_event(&self, event: &AuditEvent) {
        if let Err(e) = self.store.insert_audit(event).await {
            let agent_id = event.agent_id;
            tracing::error!(%agent_id, action = %event.action(), error = %e, "audit entry not recorded");
        }
    }
}

/// The refusal of a token amount above what the wallet holds less its unused x402 authorizations.
fn insufficient_tokens(request: &TransferRequest, available: U256) -> TransferError {
    TransferError::InsufficientTokenFunds {
        symbol: request.asset.clone(),
        decimals: request.token.map_or(18, |t| t.decimals),
        needed: request.value_wei,
        balance: available,
    }
}

/// The symbol of the order's asset.
/// What became of an outflow, as its audit entry records it beside what was asked.
fn audited(outcome: Result<&TransferOutcome, &TransferError>) -> Result<detail::Accepted, detail::Refused> {
    match outcome {
        Ok(TransferOutcome::Sent { tx, status, .. }) => Ok(detail::Accepted {
            transfer_id: tx.id,
            status: status.as_str().into(),
            tx_hash: Some(tx.on_chain().map(|t| t.at.tx_hash.clone())),
        }),
        Ok(TransferOutcome::AwaitingApproval { approval, .. }) => Ok(detail::Accepted {
            transfer_id: approval.id,
            status: "awaiting_approval".into(),
            tx_hash: None,
        }),
        Err(e) => Err(detail::Refused {
            code: e.code().into(),
            rule: e.refused_rule().map(str::to_owned),
            limit: e.limit_words(),
            denial: e.call_denial().map(str::to_owned),
        }),
    }
}

fn symbol<'a>(order: &'a TransferOrder<'_>) -> &'a str {
    order
        .token
        .as_ref()
        .map_or(order.chain.native_symbol, |t| t.symbol.as_str())
}

/// What a transfer stores of its token.
fn token_ref(token: &Asset) -> Option<TokenRef> {
    token.token.map(|address| TokenRef {
        address,
        decimals: token.decimals,
    })
}

/// `to` checked against the agent's wallet on `chain`, before anything is asked of the node: the zero address
/// (funds burnt) and the sending wallet itself (only fees spent) are refused (§15).
fn recipient(agent: &Agent, chain: &ChainInfo, to: Address) -> Result<Recipient, TransferError> {
    let from = *agent.wallet_addresses.get(chain.name).ok_or(TransferError::NoWallet)?;
    Ok(Recipient::new(to, from)?)
}
