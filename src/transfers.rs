//! The money path: every outflow of an agent's wallet (native and ERC-20 transfers, contract calls and typed-data
//! signatures, §18; x402 payments, `pay`, §16; an owner's sweep, §20) goes through one send path (`send`):
//! quote -> the agent's send lock -> decide in the store's transaction (nothing written) -> sign outside every
//! database transaction -> decide again under the agent's lock and record the signature -> release -> broadcast
//! (or, for a payment, the paid request) -> on refusal give the nonce back or fill it. The rules that decide (cap,
//! funds, policy, call rules, approval, a sweep's destination) are `domain::decision::decide`'s, on facts the store
//! reads in that transaction: a refusal names its rule, and an outflow that needs an owner's approval is stored
//! waiting instead of signed (`approvals` approves and rejects). Only an agent checked for the `transact`
//! capability (`Transacting`) reaches the path. Sends of one (agent, chain) are serialised by a store lock, so no
//! nonce is ever reused or skipped. The service answers with a typed outcome or a `TransferError`; what a caller shows
//! of them (a tool result, an HTTP body) is decided at that caller.

use std::sync::Arc;

use alloy::consensus::{SignableTransaction, TxEip1559, TxEnvelope};
use alloy::eips::eip2718::Encodable2718;
use alloy::primitives::{Address, Bytes, TxKind, U256};
use uuid::Uuid;

use crate::chain::{ChainClient, ChainError, Chains, RefusalKind};
use crate::domain::agent::Agent;
use crate::domain::amount::Amount;
use crate::domain::asset::Asset;
use crate::domain::audit::detail::{self, Asked, AssetAsked};
use crate::domain::audit::{Actor, Detail};
use crate::domain::chain::ChainInfo;
use crate::domain::recipient::Recipient;
use crate::domain::transaction::{Body, OnChain, StoredTx, TokenRef, on_chain_call};
use crate::signer::{Keys, SignerError, WalletSigner};
use crate::store::{Approval, AuditEvent, Clearance, Mandate, SignedTx, Store, StoreError, TransferRequest};
use crate::vault::Vault;

mod approvals;
mod call;
mod error;
mod gaps;
mod pay;
mod replace;
mod send;
mod sweep;
mod transacting;
mod typed;

pub use call::{AllowanceView, CallOrder, ChangeView, DecisionView, Previewed, SimulationView};
pub use error::TransferError;
pub use pay::{Paid, PayError, PayOrder, Payment, url_without_query};
pub use replace::{Bump, Cancelled};
use send::{Kind, Outflow};
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
    /// (agent, chain) pairs the store is known to count nonces for (its rows are never removed): their sends need
    /// not ask whether to start from the node's count.
    counted: Arc<std::sync::Mutex<std::collections::HashSet<(Uuid, &'static str)>>>,
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
        Transfers {
            store,
            chains,
            vault,
            keys,
            faults,
            fetcher: crate::net::egress::Fetcher::new(x402),
            counted: Default::default(),
        }
    }

    /// Sends the native coin or a token. Refusals create no transaction.
    #[tracing::instrument(skip_all, fields(agent_id = %order.by.agent.id, chain = order.chain.name))]
    pub async fn send(&self, order: TransferOrder<'_>) -> Result<TransferOutcome, TransferError> {
        let outcome = self.try_send(&order).await;
        let asked = Asked::Asset(AssetAsked {
            chain: order.chain.name.into(),
            asset: symbol(&order).into(),
            to: order.to.to_checksum(None),
            amount: Some(order.amount.text().to_owned()),
        });
        self.record_outcome(order.by.agent.id, order.by.actor, asked, outcome.as_ref())
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
        self.record_audited(agent_id, actor, detail, outcome).await;
    }

    /// `record_outcome` for a sweep (§20): `funds_swept` or `sweep_refused`.
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
        self.record_audited(agent_id, actor, detail, outcome).await;
    }

    /// Writes an outflow's audit entry. One the node accepted is marked `pending` in the entry's transaction (the
    /// send path leaves it `signed` until then).
    async fn record_audited(
        &self,
        agent_id: Uuid,
        actor: Actor,
        detail: Detail,
        outcome: Result<&TransferOutcome, &TransferError>,
    ) {
        let event = AuditEvent::new(agent_id, actor, detail);
        let recorded = match outcome {
            Ok(TransferOutcome::Sent {
                tx,
                status: BroadcastStatus::Pending,
                ..
            }) => self.store.mark_broadcast_audited(tx.id, &event).await,
            _ => self.store.insert_audit(&event).await,
        };
        if let Err(e) = recorded {
            // The transfer stands: one still `signed` is broadcast again by the watcher (the same transaction).
            tracing::error!(agent_id = %agent_id, action = %event.action(), error = %e, "audit entry not recorded");
        }
    }

    async fn try_send(&self, order: &TransferOrder<'_>) -> Result<TransferOutcome, TransferError> {
        let to = recipient(order.by.agent, order.chain, order.to)?;
        self.send_outflow(Outflow {
            id: Uuid::new_v4(),
            agent_id: order.by.agent.id,
            chain: order.chain,
            conversation_id: order.conversation_id,
            from: to.from(),
            to: to.to(),
            value: order.amount.value(),
            kind: match &order.token {
                None => Kind::Native,
                Some(token) => Kind::Token(token.clone()),
            },
            clearance: Clearance::Policy,
            mandate: order.by.mandate.clone(),
        })
        .await
    }

    /// Records and broadcasts the send that fills the nonce of a refused transfer.
    async fn send_fill(&self, client: &ChainClient, refused: &StoredTx, fill: &StoredTx) {
        let at = fill.on_chain().map(|t| &t.at);
        tracing::warn!(tx_id = %refused.id, fill_id = %fill.id, chain = %fill.chain, nonce = ?at.map(|a| a.nonce),
            "a refused transfer's nonce was followed by later ones; filling it with a zero-value self-send");
        let detail = Detail::NonceFilled(detail::NonceFilled {
            transfer_id: refused.id,
            fill_id: fill.id,
            chain: fill.chain.clone(),
            nonce: at.map(|a| a.nonce),
            tx_hash: at.map(|a| a.tx_hash.clone()),
        });
        self.audit(fill.agent_id, Actor::System, detail).await;
        match client.send_raw(&fill.raw_tx).await {
            Ok(_) => {
                if let Err(e) = self.store.mark_broadcast(fill.id).await {
                    tracing::error!(fill_id = %fill.id, error = %e, "a nonce fill's broadcast was not recorded");
                }
            }
            Err(e) => {
                tracing::warn!(fill_id = %fill.id, error = %e, "the nonce fill was not accepted yet; it will be sent again")
            }
        }
    }

    /// The nonce to start from when the store has none for (agent, chain) yet: the node's count.
    async fn node_nonce(
        &self,
        client: &ChainClient,
        agent_id: Uuid,
        chain: &ChainInfo,
        from: Address,
    ) -> Result<Option<u64>, TransferError> {
        let known = |counted: &std::collections::HashSet<_>| counted.contains(&(agent_id, chain.name));
        if known(&self.counted.lock().unwrap_or_else(std::sync::PoisonError::into_inner)) {
            return Ok(None);
        }
        match self.store.next_nonce(agent_id, chain.name).await.map_err(store_error)? {
            Some(_) => {
                let mut counted = self.counted.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
                if counted.len() >= 100_000 {
                    counted.clear();
                }
                counted.insert((agent_id, chain.name));
                Ok(None)
            }
            None => Ok(Some(client.pending_nonce(from).await?)),
        }
    }

    /// Records an audit entry; a failure is logged, never turned into a failed transfer after the fact.
    async fn audit(&self, agent_id: Uuid, actor: Actor, detail: Detail) {
        let event = AuditEvent::new(agent_id, actor, detail);
        if let Err(e) = self.store.insert_audit(&event).await {
            tracing::error!(%agent_id, action = %event.action(), error = %e, "audit entry not recorded");
        }
    }

    /// Hands the stored transaction to the node. A refusal can follow our own earlier attempt that did land (the
    /// client retries once after a lost answer; the node then calls the nonce used): a transaction the node knows
    /// counts as accepted and is never discarded.
    async fn broadcast(&self, client: &ChainClient, tx: &StoredTx) -> Result<(), ChainError> {
        if self.faults.exit_before_broadcast {
            tracing::error!(tx_id = %tx.id, "FAULT_EXIT_BEFORE_BROADCAST: exiting after storing a signed transfer");
            std::process::exit(86);
        }
        if self.faults.lost_broadcast_answer {
            let _ = client.send_raw(&tx.raw_tx).await;
        }
        match client.send_raw(&tx.raw_tx).await {
            Err(e) if !e.is_transport() && node_knows(client, tx).await => Ok(()),
            other => other.map(|_| ()),
        }
    }

    /// The agent's signer (§20): its vault key opened, or its key in the token (asked nothing until it signs).
    async fn signer(&self, agent_id: Uuid) -> Result<Arc<dyn WalletSigner>, TransferError> {
        let key = self.store.wallet_key(agent_id).await.map_err(store_error)?;
        self.keys.open(agent_id, &key).map_err(|e| signer_error(agent_id, e))
    }
}

/// What a signer's failure is to the caller: a token that does not answer is 503 `signer_unavailable` (nothing
/// recorded, try again), a key that cannot be used an internal error.
pub(crate) fn signer_error(agent_id: Uuid, e: SignerError) -> TransferError {
    tracing::error!(%agent_id, error = %e, "the wallet key could not sign");
    match e {
        SignerError::Unavailable(_) => TransferError::SignerUnavailable,
        SignerError::Key(_) => TransferError::KeyUnavailable,
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

/// A zero-value send of `tx`'s wallet to itself, to take a nonce that `tx` left unused (a gap, or a transfer refused
/// after later ones were signed): nothing moves but the fee, held against the cap as `reserved_wei`.
fn nonce_filler(
    tx: &StoredTx,
    chain: &ChainInfo,
    gas_limit: u64,
    max_fee_per_gas: u128,
    reserved_wei: U256,
) -> TransferRequest {
    TransferRequest {
        id: Uuid::new_v4(),
        agent_id: tx.agent_id,
        chain: tx.chain.clone(),
        conversation_id: None,
        from: tx.from,
        to: tx.from,
        value_wei: U256::ZERO,
        reserved_wei,
        node_nonce: None,
        asset: chain.native_symbol.to_string(),
        token: None,
        clearance: Clearance::Decided,
        token_balance: None,
        mined_nonce: None,
        native_funds: None,
        body: Body::Transaction(OnChain {
            at: (),
            gas_limit,
            max_fee_per_gas,
            call: None,
        }),
        call_check: None,
        mandate: Mandate::NONE,
    }
}

/// Signs `request` at `nonce` (EIP-1559 with the chain's id): the raw bytes and hash to store before broadcast.
fn sign_transfer(
    signer: &dyn WalletSigner,
    chain: &ChainInfo,
    request: &TransferRequest,
    priority_fee: u128,
    nonce: u64,
) -> Result<SignedTx, SignerError> {
    let (to, value, input) = match request.body.call() {
        Some(call) => (request.to, request.value_wei, call.data.clone()),
        None => on_chain_call(request.to, request.value_wei, request.token),
    };
    let (gas_limit, max_fee_per_gas) = request.body.fees();
    let tx = TxEip1559 {
        chain_id: chain.chain_id,
        nonce,
        gas_limit,
        max_fee_per_gas,
        max_priority_fee_per_gas: priority_fee.min(max_fee_per_gas),
        to: TxKind::Call(to),
        value,
        input,
        ..Default::default()
    };
    sign_eip1559(signer, tx)
}

/// Signs an EIP-1559 transaction (its signature hash, through the signer seam): the raw bytes and hash to store
/// before broadcast.
fn sign_eip1559(signer: &dyn WalletSigner, tx: TxEip1559) -> Result<SignedTx, SignerError> {
    let signature = signer.sign_hash(&tx.signature_hash())?;
    let envelope = TxEnvelope::from(tx.into_signed(signature));
    Ok(SignedTx {
        hash: envelope.tx_hash().to_string(),
        raw: envelope.encoded_2718(),
    })
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
            rule: match e {
                TransferError::PolicyDenied(rule) => Some(rule.as_str().into()),
                _ => None,
            },
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

/// The unsigned encoding the L1 fee of a transfer to `to` of `value` is estimated on, before its gas, fees and nonce
/// are known: those fields take values at least as long as the real ones, so the estimate does not fall short.
pub(crate) fn l1_probe(chain: &ChainInfo, to: Address, value: U256, input: Bytes) -> Vec<u8> {
    TxEip1559 {
        chain_id: chain.chain_id,
        nonce: u64::from(u32::MAX),
        gas_limit: 30_000_000,
        max_fee_per_gas: 1_000 * crate::chain::GWEI,
        max_priority_fee_per_gas: 1_000 * crate::chain::GWEI,
        to: TxKind::Call(to),
        value,
        input,
        ..Default::default()
    }
    .encoded_for_signing()
}

/// Whether the node knows this exact transaction (pending or mined). Unknown when the node cannot be asked: then
/// `true`, so that nothing that may be on chain is ever discarded; the watcher settles it later.
async fn node_knows(client: &ChainClient, tx: &StoredTx) -> bool {
    let Some(Ok(hash)) = tx.on_chain().map(|t| t.at.tx_hash.parse()) else {
        return false;
    };
    match client.transaction(hash).await {
        Ok(found) => found.is_some(),
        Err(e) => {
            tracing::warn!(tx_id = %tx.id, error = %e, "cannot tell whether the node has the transaction; keeping it");
            true
        }
    }
}

/// Broadcasts a stored transaction again (after a restart or a lost broadcast). `Ok(true)` when a node has it.
pub async fn rebroadcast(client: &ChainClient, tx: &StoredTx) -> Result<bool, ChainError> {
    match client.send_raw(&tx.raw_tx).await {
        Ok(_) => Ok(true),
        Err(e) if e.refusal() == Some(RefusalKind::NonceTooLow) => Ok(false),
        Err(e) => Err(e),
    }
}
