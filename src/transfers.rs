//! Transfers of the native coin and of ERC-20 tokens: validate -> quote -> reserve-and-sign (one DB transaction: cap, nonce, sign, store) ->
//! broadcast. The agent's policy is evaluated in that same transaction: a refusal names its rule, and a transfer
//! that needs an owner's approval is stored waiting instead of signed (`approvals` approves and rejects). Sends of one (agent, chain) are serialised by a store lock, so a refused broadcast gives its nonce back
//! and no nonce is ever reused or skipped. The service answers with a typed outcome or a `TransferError`; what a
//! caller shows of them (a tool result, an HTTP body) is decided at that caller.

use std::sync::Arc;

use alloy::consensus::{SignableTransaction, TxEip1559, TxEnvelope};
use alloy::eips::eip2718::Encodable2718;
use alloy::network::TxSignerSync;
use alloy::primitives::{Address, Bytes, TxKind, U256};
use alloy::signers::local::PrivateKeySigner;
use uuid::Uuid;

use crate::chain::{ChainClient, ChainError, Chains, Fees, RefusalKind};
use crate::domain::agent::Agent;
use crate::domain::amount::parse_units;
use crate::domain::asset::Asset;
use crate::domain::audit::Actor;
use crate::domain::chain::ChainInfo;
use crate::domain::transaction::{StoredTx, TokenRef, on_chain_call};
use crate::store::{
    Approval, AuditEvent, Authorization, NativeFunds, Reservation, SignFn, SignedTx, Store, StoreError, TransferRequest,
};
use crate::vault::Vault;

mod approvals;
mod error;
mod gaps;
mod pay;
mod replace;

pub use error::TransferError;
pub use pay::{Paid, PayError, PayOrder, Payment, url_without_query};
pub use replace::{Bump, Cancelled};

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
    faults: Faults,
    /// The guarded fetch x402 payments go through.
    fetcher: crate::x402::Fetcher,
    /// (agent, chain) pairs the store is known to count nonces for (its rows are never removed): their sends need
    /// not ask whether to start from the node's count.
    counted: Arc<std::sync::Mutex<std::collections::HashSet<(Uuid, &'static str)>>>,
}

/// A transfer the agent was asked to make.
pub struct TransferOrder<'a> {
    pub agent: &'a Agent,
    pub chain: &'static ChainInfo,
    pub to: Address,
    /// The registry token to move (its `token` set); `None`: the chain's native coin.
    pub token: Option<Asset>,
    /// Decimal amount in whole units of the asset, as the caller wrote it.
    pub amount: &'a str,
    pub conversation_id: Option<Uuid>,
    /// Who asked for it, as the audit log records it: the agent (chat, transfers API) or an MCP client.
    pub actor: Actor,
}

/// Where a stored transfer stands when `send_native` returns.
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

/// What a reservation produced.
enum Reserved {
    Signed(StoredTx),
    Held(Approval),
}

fn store_error(err: StoreError) -> TransferError {
    tracing::error!(error = %err, "store error during a transfer");
    TransferError::Store(err)
}

/// What the node says a transfer will cost, read once before anything is reserved.
struct Quote {
    gas_limit: u64,
    fees: Fees,
    /// Amount plus twice the maximum fee: what the transfer holds against the cap until it settles.
    reserved: U256,
    /// The native balance as read and what the wallet must hold of it: the amount (of the native coin) plus one
    /// maximum fee. The reservation checks it again, less what the agent's transfers on their way hold.
    funds: NativeFunds,
    /// A token transfer's token balance as read: the reservation subtracts unused x402 authorizations from it.
    token_balance: Option<U256>,
}

impl Transfers {
    pub fn new(
        store: Arc<dyn Store>,
        chains: Arc<Chains>,
        vault: Arc<Vault>,
        faults: Faults,
        x402: crate::config::X402Config,
    ) -> Self {
        Transfers {
            store,
            chains,
            vault,
            faults,
            fetcher: crate::x402::Fetcher::new(x402),
            counted: Default::default(),
        }
    }

    /// Sends the native coin or a token. Refusals create no transaction.
    #[tracing::instrument(skip_all, fields(agent_id = %order.agent.id, chain = order.chain.name))]
    pub async fn send(&self, order: TransferOrder<'_>) -> Result<TransferOutcome, TransferError> {
        let outcome = self.try_send(&order).await;
        let event = order_event(&order, &outcome);
        // A transfer the node accepted is marked `pending` in the audit entry's transaction (a native send leaves
        // it `signed` until then; a token send marked it already, and marking again changes nothing).
        let recorded = match &outcome {
            Ok(TransferOutcome::Sent {
                tx,
                status: BroadcastStatus::Pending,
                ..
            }) => self.store.mark_broadcast_audited(tx.id, &event).await,
            _ => self.store.insert_audit(&event).await,
        };
        if let Err(e) = recorded {
            // The transfer stands: one still `signed` is broadcast again by the watcher (the same transaction).
            tracing::error!(agent_id = %order.agent.id, action = event.action, error = %e, "audit entry not recorded");
        }
        outcome
    }

    async fn try_send(&self, order: &TransferOrder<'_>) -> Result<TransferOutcome, TransferError> {
        let (from, value) = validate(order)?;
        let client = self.chains.get(order.chain.name)?;
        let Some(token) = &order.token else {
            return self.send_native(client, order, from, value).await;
        };
        let _guard = self
            .store
            .lock_sender(order.agent.id, order.chain.name)
            .await
            .map_err(store_error)?;
        let quote = quote_token(client, order.chain, token, from, order.to, value).await?;
        let node_nonce = self.node_nonce(client, order.agent.id, order.chain, from).await?;
        let request = self.order_request(order, from, value, &quote, node_nonce);
        self.sign_and_broadcast(client, order.chain, request, quote.fees.max_priority_fee_per_gas)
            .await
    }

    /// A native transfer. The quote reads the balance (a wallet that cannot pay the amount and one maximum fee is
    /// refused before anything is signed) and otherwise asks the node nothing most of the time (a recipient known to
    /// have no code, a recent fee reading); it is made before the send lock, with the wallet key. Under the lock: the nonce, the signature and the stored
    /// record; the broadcast follows once the lock is released, so the next transfer of the agent is signed while
    /// this one travels. A broadcast refused then gives its nonce back, or fills it when later ones are out
    /// (`refused_after_release`).
    async fn send_native(
        &self,
        client: &ChainClient,
        order: &TransferOrder<'_>,
        from: Address,
        value: U256,
    ) -> Result<TransferOutcome, TransferError> {
        let chain = order.chain;
        let (quote, signer) = tokio::join!(quote(client, chain, from, order.to, value), self.signer(order.agent.id));
        let (quote, signer) = (quote?, signer?);
        let priority_fee = quote.fees.max_priority_fee_per_gas;
        let guard = self
            .store
            .lock_sender(order.agent.id, chain.name)
            .await
            .map_err(store_error)?;
        let node_nonce = self.node_nonce(client, order.agent.id, chain, from).await?;
        let mut request = self.order_request(order, from, value, &quote, node_nonce);
        let tx = match self.reserve_with(&signer, &request, chain, priority_fee).await? {
            Reserved::Signed(tx) => tx,
            Reserved::Held(approval) => return Ok(TransferOutcome::AwaitingApproval { chain, approval }),
        };
        drop(guard);
        let sent = |status| TransferOutcome::Sent {
            chain,
            tx: tx.clone(),
            status,
        };
        match self.broadcast(client, &tx).await {
            // Marked `pending` with its audit entry, in one commit (`send`).
            Ok(()) => Ok(sent(BroadcastStatus::Pending)),
            Err(e) if e.is_transport() => {
                // It may have reached the node: it stays stored as signed and the watcher broadcasts it again.
                tracing::warn!(tx_id = %tx.id, chain = chain.name, error = %e, "broadcast not confirmed; will retry");
                Ok(sent(BroadcastStatus::Submitted))
            }
            Err(e) if e.refusal() == Some(RefusalKind::NonceTooLow) => {
                // The wallet was used elsewhere: its nonce is the node's, not a gap. Resynchronise and send again
                // the way tokens are sent, holding the lock through the broadcast.
                let _guard = self
                    .store
                    .lock_sender(order.agent.id, chain.name)
                    .await
                    .map_err(store_error)?;
                let pending = client.pending_nonce(from).await?;
                tracing::warn!(tx_id = %tx.id, chain = chain.name, pending, "nonce too low; resynchronising from the node");
                self.store
                    .discard_transfer(tx.id, Some(pending))
                    .await
                    .map_err(store_error)?;
                request.id = Uuid::new_v4();
                request.node_nonce = Some(pending);
                self.sign_and_broadcast(client, chain, request, priority_fee).await
            }
            Err(e) => Err(self
                .refused_after_release(client, &signer, &tx, priority_fee, quote.funds.needed, e)
                .await),
        }
    }

    /// What the store records of an order before its nonce is known.
    fn order_request(
        &self,
        order: &TransferOrder<'_>,
        from: Address,
        value: U256,
        quote: &Quote,
        node_nonce: Option<u64>,
    ) -> TransferRequest {
        TransferRequest {
            id: Uuid::new_v4(),
            agent_id: order.agent.id,
            chain: order.chain.name.to_string(),
            conversation_id: order.conversation_id,
            from,
            to: order.to,
            value_wei: value,
            gas_limit: quote.gas_limit,
            max_fee_per_gas: quote.fees.max_fee_per_gas,
            reserved_wei: quote.reserved,
            node_nonce,
            asset: symbol(order).to_string(),
            token: order.token.as_ref().and_then(token_ref),
            authorization: Authorization::Policy,
            token_balance: quote.token_balance,
            native_funds: Some(quote.funds),
            x402: None,
        }
    }

    /// A transfer the node refused after the send lock was released: removed with its reservation, its nonce given
    /// back if it is still the newest, else filled at once by a zero-value send of the wallet to itself at the same
    /// fee cap (broadcast now; if the node does not take it either, the watcher sends it again and, failing that,
    /// fills its nonce at today's fees). Nothing is re-signed, no nonce is left unused. The refusal is the answer.
    async fn refused_after_release(
        &self,
        client: &ChainClient,
        signer: &PrivateKeySigner,
        tx: &StoredTx,
        priority_fee: u128,
        needed: U256,
        e: ChainError,
    ) -> TransferError {
        let chain = client.info();
        tracing::warn!(chain = chain.name, tx_id = %tx.id, error = %e, "the node refused the transfer");
        let gas = crate::chain::TRANSFER_GAS;
        let reserved = U256::from(gas).saturating_mul(U256::from(tx.max_fee_per_gas));
        let fill = nonce_filler(tx, chain, gas, tx.max_fee_per_gas, reserved.min(tx.reserved_wei));
        let sign = |nonce| sign_transfer(signer, chain, &fill, priority_fee, nonce);
        match self.store.discard_or_fill(tx.id, &fill, &sign).await {
            Ok(None) => {}
            Ok(Some(filled)) => self.send_fill(client, tx, &filled).await,
            Err(err) => return store_error(err),
        }
        if e.refusal() == Some(RefusalKind::InsufficientFunds) {
            return TransferError::InsufficientFunds {
                chain,
                needed,
                balance: client.balance(tx.from).await.ok(),
            };
        }
        TransferError::Rejected(e)
    }

    /// Records and broadcasts the send that fills the nonce of a refused transfer.
    async fn send_fill(&self, client: &ChainClient, refused: &StoredTx, fill: &StoredTx) {
        tracing::warn!(tx_id = %refused.id, fill_id = %fill.id, chain = %fill.chain, nonce = fill.nonce,
            "a refused transfer's nonce was followed by later ones; filling it with a zero-value self-send");
        let detail = serde_json::json!({"transfer_id": refused.id, "fill_id": fill.id, "chain": fill.chain,
            "nonce": fill.nonce, "tx_hash": fill.tx_hash});
        self.audit(fill.agent_id, "nonce_filled", "system", detail).await;
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
    async fn audit(&self, agent_id: Uuid, action: &'static str, actor: &str, detail: serde_json::Value) {
        let event = AuditEvent {
            agent_id,
            action,
            actor: actor.to_string(),
            detail,
        };
        if let Err(e) = self.store.insert_audit(&event).await {
            tracing::error!(%agent_id, action, error = %e, "audit entry not recorded");
        }
    }

    /// Reserves, signs and broadcasts; a `nonce too low` answer resynchronises from the node and tries once more.
    async fn sign_and_broadcast(
        &self,
        client: &ChainClient,
        chain: &'static ChainInfo,
        mut request: TransferRequest,
        priority_fee: u128,
    ) -> Result<TransferOutcome, TransferError> {
        let from_approval = request.authorization == Authorization::Approval;
        for attempt in 0..2 {
            let tx = match self.reserve(&request, chain, priority_fee).await? {
                Reserved::Signed(tx) => tx,
                Reserved::Held(approval) => return Ok(TransferOutcome::AwaitingApproval { chain, approval }),
            };
            let outcome = |status| TransferOutcome::Sent {
                chain,
                tx: tx.clone(),
                status,
            };
            match self.broadcast(client, &tx).await {
                Ok(()) => {
                    self.store.mark_broadcast(tx.id).await.map_err(store_error)?;
                    return Ok(outcome(BroadcastStatus::Pending));
                }
                Err(e) if e.is_transport() => {
                    // It may have reached the node: it stays stored as signed and the watcher broadcasts it again.
                    tracing::warn!(tx_id = %tx.id, chain = chain.name, error = %e, "broadcast not confirmed; will retry");
                    return Ok(outcome(BroadcastStatus::Submitted));
                }
                Err(e) if e.refusal() == Some(RefusalKind::NonceTooLow) && attempt == 0 => {
                    let pending = client.pending_nonce(request.from).await?;
                    tracing::warn!(tx_id = %tx.id, chain = chain.name, pending, "nonce too low; resynchronising from the node");
                    self.store
                        .discard_transfer(tx.id, Some(pending))
                        .await
                        .map_err(store_error)?;
                    // An approved transfer keeps its id (the discarded row is gone) and its approval.
                    if request.authorization == Authorization::Approval {
                        request.authorization = Authorization::Decided;
                    } else {
                        request.id = Uuid::new_v4();
                    }
                    request.node_nonce = Some(pending);
                }
                Err(e) => {
                    let refusal = self.refused(client, chain, &tx, e).await;
                    if from_approval {
                        // Nothing was sent: the owner's approval stands and the transfer waits again (§11).
                        self.store.reopen_approval(tx.id).await.map_err(store_error)?;
                    }
                    return Err(refusal);
                }
            }
        }
        Err(TransferError::NonceKeptRefused)
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

    /// Gives the nonce and the reservation back after a refusal and says why nothing was sent.
    async fn refused(
        &self,
        client: &ChainClient,
        chain: &'static ChainInfo,
        tx: &StoredTx,
        e: ChainError,
    ) -> TransferError {
        if let Err(err) = self.store.discard_transfer(tx.id, None).await {
            return store_error(err);
        }
        tracing::warn!(chain = chain.name, error = %e, "the node refused the transfer");
        if e.refusal() == Some(RefusalKind::InsufficientFunds) {
            return TransferError::InsufficientFunds {
                chain,
                needed: tx.reserved_wei,
                balance: client.balance(tx.from).await.ok(),
            };
        }
        TransferError::Rejected(e)
    }

    /// The agent's wallet key, opened.
    async fn signer(&self, agent_id: Uuid) -> Result<PrivateKeySigner, TransferError> {
        let key = self.store.wallet_key(agent_id).await.map_err(store_error)?;
        self.vault.open(agent_id, &key).map_err(|e| {
            tracing::error!(%agent_id, error = %e, "wallet key could not be opened");
            TransferError::KeyUnavailable
        })
    }

    /// Reserves the cap, allocates the nonce and stores the signed transaction, all in one database transaction.
    async fn reserve(
        &self,
        request: &TransferRequest,
        chain: &'static ChainInfo,
        priority_fee: u128,
    ) -> Result<Reserved, TransferError> {
        let signer = self.signer(request.agent_id).await?;
        self.reserve_with(&signer, request, chain, priority_fee).await
    }

    /// `reserve` with the wallet key already opened.
    async fn reserve_with(
        &self,
        signer: &PrivateKeySigner,
        request: &TransferRequest,
        chain: &'static ChainInfo,
        priority_fee: u128,
    ) -> Result<Reserved, TransferError> {
        let sign = |nonce: u64| sign_transfer(signer, chain, request, priority_fee, nonce);
        self.decide(request, chain, &sign).await
    }

    /// The one step that decides a payment (cap, policy, approval, balances) and, when it passes, signs and stores
    /// it: every way to pay goes through it.
    async fn decide(
        &self,
        request: &TransferRequest,
        chain: &'static ChainInfo,
        sign: SignFn<'_>,
    ) -> Result<Reserved, TransferError> {
        match self.store.reserve_transfer(request, sign).await.map_err(store_error)? {
            Reservation::Reserved(tx) => Ok(Reserved::Signed(*tx)),
            Reservation::AwaitingApproval(approval) => Ok(Reserved::Held(*approval)),
            Reservation::CapExceeded { cap, spent } => Err(TransferError::CapExceeded {
                chain,
                reserved: request.reserved_wei,
                cap,
                spent,
            }),
            Reservation::PolicyDenied(rule) => Err(TransferError::PolicyDenied(rule)),
            Reservation::NotAwaiting(status) => Err(TransferError::NotAwaiting(status)),
            Reservation::InsufficientTokens { available } => Err(insufficient_tokens(request, available)),
            Reservation::InsufficientFunds { available } => Err(TransferError::InsufficientFunds {
                chain,
                needed: request.native_funds.map_or(U256::ZERO, |f| f.needed),
                balance: Some(available),
            }),
        }
    }
}

/// What became of an order, for the audit log: accepted (sent or held for approval) or refused with its code.
fn order_event(order: &TransferOrder<'_>, outcome: &Result<TransferOutcome, TransferError>) -> AuditEvent {
    let mut detail = serde_json::json!({"chain": order.chain.name, "asset": symbol(order),
        "to": order.to.to_checksum(None), "amount": order.amount});
    let action = match outcome {
        Ok(TransferOutcome::Sent { tx, status, .. }) => {
            detail["transfer_id"] = serde_json::json!(tx.id);
            detail["status"] = serde_json::json!(status.as_str());
            detail["tx_hash"] = serde_json::json!(tx.tx_hash);
            "transfer_accepted"
        }
        Ok(TransferOutcome::AwaitingApproval { approval, .. }) => {
            detail["transfer_id"] = serde_json::json!(approval.id);
            detail["status"] = serde_json::json!("awaiting_approval");
            "transfer_accepted"
        }
        Err(e) => {
            detail["code"] = serde_json::json!(e.code());
            if let TransferError::PolicyDenied(rule) = e {
                detail["rule"] = serde_json::json!(rule.as_str());
            }
            "transfer_refused"
        }
    };
    AuditEvent {
        agent_id: order.agent.id,
        action,
        actor: order.actor.as_str().to_string(),
        detail,
    }
}

/// The native balance as read and what a transfer needs of it; refused at once when the balance alone falls short.
fn native_funds(chain: &'static ChainInfo, balance: U256, needed: U256) -> Result<NativeFunds, TransferError> {
    if balance < needed {
        return Err(TransferError::InsufficientFunds {
            chain,
            needed,
            balance: Some(balance),
        });
    }
    Ok(NativeFunds { balance, needed })
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
        gas_limit,
        max_fee_per_gas,
        reserved_wei,
        node_nonce: None,
        asset: chain.native_symbol.to_string(),
        token: None,
        authorization: Authorization::Decided,
        token_balance: None,
        native_funds: None,
        x402: None,
    }
}

/// Signs `request` at `nonce` (EIP-1559 with the chain's id): the raw bytes and hash to store before broadcast.
fn sign_transfer(
    signer: &PrivateKeySigner,
    chain: &ChainInfo,
    request: &TransferRequest,
    priority_fee: u128,
    nonce: u64,
) -> Result<SignedTx, String> {
    let (to, value, input) = on_chain_call(request.to, request.value_wei, request.token);
    let tx = TxEip1559 {
        chain_id: chain.chain_id,
        nonce,
        gas_limit: request.gas_limit,
        max_fee_per_gas: request.max_fee_per_gas,
        max_priority_fee_per_gas: priority_fee.min(request.max_fee_per_gas),
        to: TxKind::Call(to),
        value,
        input,
        ..Default::default()
    };
    sign_eip1559(signer, tx)
}

/// Signs an EIP-1559 transaction: the raw bytes and hash to store before broadcast.
fn sign_eip1559(signer: &PrivateKeySigner, mut tx: TxEip1559) -> Result<SignedTx, String> {
    let signature = signer.sign_transaction_sync(&mut tx).map_err(|e| e.to_string())?;
    let envelope = TxEnvelope::from(tx.into_signed(signature));
    Ok(SignedTx {
        hash: envelope.tx_hash().to_string(),
        raw: envelope.encoded_2718(),
    })
}

/// The symbol of the order's asset.
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

/// The amount in base units of the asset and the sending wallet, before anything is asked of the node; a recipient
/// that is the zero address (funds burnt) or the sending wallet itself (only fees spent) is refused (§15).
fn validate(order: &TransferOrder<'_>) -> Result<(Address, U256), TransferError> {
    let decimals = order.token.as_ref().map_or(order.chain.decimals, |t| t.decimals);
    let value = parse_units(order.amount, decimals).map_err(|e| TransferError::InvalidAmount(e.to_string()))?;
    if value.is_zero() {
        return Err(TransferError::ZeroAmount);
    }
    let from = *order
        .agent
        .wallet_addresses
        .get(order.chain.name)
        .ok_or(TransferError::NoWallet)?;
    if order.to == Address::ZERO {
        return Err(TransferError::InvalidRecipient("the zero address"));
    }
    if order.to == from {
        return Err(TransferError::InvalidRecipient("the agent's own wallet"));
    }
    Ok((from, value))
}

/// Gas, fees and the balance (independent reads, asked together); refuses when the balance cannot pay the amount
/// plus the maximum fee. Gas is 21,000 without an estimate for a recipient without code, fees and the L1 fee
/// estimate are reused for `FEE_MAX_AGE`: besides the balance, most quotes ask the node nothing.
async fn quote(
    client: &ChainClient,
    chain: &'static ChainInfo,
    from: Address,
    to: Address,
    value: U256,
) -> Result<Quote, TransferError> {
    let probe = l1_probe(chain, to, value, Bytes::new());
    let (gas_limit, fees, balance, l1_fee) = tokio::join!(
        client.transfer_gas(from, to, value),
        client.recent_fees(FEE_MAX_AGE),
        client.balance(from),
        client.recent_l1_fee(&probe, FEE_MAX_AGE),
    );
    let gas_limit = match gas_limit {
        Ok(gas) => gas,
        Err(e) if e.refusal() == Some(RefusalKind::InsufficientFunds) => {
            return Err(TransferError::InsufficientFunds {
                chain,
                needed: value,
                balance: balance.ok(),
            });
        }
        Err(e) => return Err(e.into()),
    };
    let (fees, balance, l1_fee) = (fees?, balance?, l1_fee?);
    // On OP-stack chains the L1 data fee is part of the fee (§14).
    let max_fee = fees.max_cost(gas_limit).saturating_add(l1_fee);
    // The wallet must pay the amount and one maximum fee; the cap holds twice the fee, room for fee bumps (§8).
    let funds = native_funds(chain, balance, value.saturating_add(max_fee))?;
    Ok(Quote {
        gas_limit,
        fees,
        reserved: funds.needed.saturating_add(max_fee),
        funds,
        token_balance: None,
    })
}

/// Gas, fees, the native balance and the token balance of a token transfer, asked together. The token amount
/// must be covered by the spendable token balance (else `insufficient_funds` before anything is signed), the gas
/// by the native balance; the cap holds twice the maximum fee and no value (the native coin moves none).
async fn quote_token(
    client: &ChainClient,
    chain: &'static ChainInfo,
    token: &Asset,
    from: Address,
    to: Address,
    value: U256,
) -> Result<Quote, TransferError> {
    let contract = token.token.ok_or(TransferError::NoWallet)?;
    let data = crate::domain::erc20::transfer_calldata(to, value);
    let probe = l1_probe(chain, contract, U256::ZERO, data.clone());
    let (gas_limit, fees, balance, held, l1_fee) = tokio::join!(
        client.estimate_call_gas(from, contract, data),
        client.recent_fees(FEE_MAX_AGE),
        client.balance(from),
        spendable_token_balance(client, from, token),
        client.l1_fee(&probe),
    );
    let held = held?;
    if held < value {
        return Err(TransferError::InsufficientTokenFunds {
            symbol: token.symbol.clone(),
            decimals: token.decimals,
            needed: value,
            balance: held,
        });
    }
    let (gas_limit, fees, balance, l1_fee) = (gas_limit?, fees?, balance?, l1_fee?);
    // On OP-stack chains the L1 data fee is part of the fee (§14).
    let max_fee = fees.max_cost(gas_limit).saturating_add(l1_fee);
    Ok(Quote {
        gas_limit,
        fees,
        reserved: max_fee.saturating_add(max_fee),
        funds: native_funds(chain, balance, max_fee)?,
        token_balance: Some(held),
    })
}

/// The agent's balance of `token` on chain (the token's decimals checked against the registry): the early refusal
/// before anything is quoted. What unused x402 authorizations hold of it is subtracted in the reservation step
/// (`TransferRequest::token_balance`), under the agent's lock, so concurrent payments cannot both count it.
async fn spendable_token_balance(client: &ChainClient, owner: Address, token: &Asset) -> Result<U256, TransferError> {
    Ok(client.token_balance(owner, token).await?)
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
    let Ok(hash) = tx.tx_hash.parse() else { return false };
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
