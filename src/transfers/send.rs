//! The one send path of every outflow — the native coin, a token, an x402 authorization; a first try or an owner's
//! approval: quote (the wallet key opened meanwhile) → lock (agent, chain) → decide (`reserve_once`: the store's
//! reserving transaction reads the facts, the domain decides with `domain::decision::decide`), sign outside the
//! database, decide again and record in one reserving transaction (`reserve`) → release the lock → deliver. An
//! on-chain send not already under its lock is reserved so in a round with the sends that came meanwhile
//! (`rounds`, group commit): one lock per (agent, chain), one commit for all.
//! A transaction is broadcast after the lock is released, so the agent's next transfer is signed while this one
//! travels; a "nonce too low" answer resynchronises from the node and tries once more; any other refusal goes to
//! the one handler, `refused`, which gives the nonce back or fills it. An authorization takes no nonce and no lock,
//! and is delivered by the paid request (`pay`). What differs between kinds is data: what is quoted
//! (`Kind::quote`) and what is signed (`Kind::sign`).

use std::sync::Arc;

use alloy::primitives::{Address, Bytes, U256};
use uuid::Uuid;

use super::{
    BroadcastStatus, FEE_MAX_AGE, TransferError, TransferOutcome, Transfers, insufficient_tokens, l1_probe,
    nonce_filler, rounds, sign_transfer, signer_error, store_error, token_ref,
};
use crate::chain::{ChainError, Node, RefusalKind};
use crate::domain::asset::Asset;
use crate::domain::audit::OwedEntry;
use crate::domain::chain::ChainInfo;
use crate::domain::decision::{Cost, Decision, Gate, Refusal};
use crate::domain::outflow::CallCount;
use crate::domain::policy::PolicyRule;
use crate::domain::transaction::{Body, CallRecord, OnChain, SignatureRecord, StoredTx, X402Record};
use crate::signer::{SignerError, WalletSigner};
use crate::store::{
    Clearance, Gathered, Mandate, NativeFunds, Presigned, Reservation, Reserve, Reserving, SendGuard, SignedTx,
    StoreError, TransferRequest, TransferStore,
};
use crate::x402::Choice;
use crate::x402::wire::PaymentRequired;

/// How many times a reservation is signed when the nonce it named was taken meanwhile (see `Transfers::reserve`).
pub(super) const SIGNING_ROUNDS: usize = 16;

/// One outflow to send, whatever its kind.
pub(super) struct Outflow<'a> {
    pub id: Uuid,
    pub agent_id: Uuid,
    pub chain: &'static ChainInfo,
    pub conversation_id: Option<Uuid>,
    pub from: Address,
    /// The recipient (of the token, for a token or a payment).
    pub to: Address,
    /// In base units of the asset.
    pub value: U256,
    pub kind: Kind<'a>,
    /// What the reservation checks besides the cap: the policy (a new outflow) or the approval (a waiting one).
    pub clearance: Clearance,
    /// The agent token and idempotency claim that asked, checked again as the outflow is reserved.
    pub mandate: Mandate,
    /// Its `transfer_accepted` entry, kept with its reservation (`TransferRequest::owed`): a transfer's.
    pub owed: Option<OwedEntry>,
}

/// What is moved, and so what is quoted and signed.
pub(super) enum Kind<'a> {
    /// The chain's native coin: a plain EIP-1559 transaction.
    Native,
    /// A registry token: an EIP-1559 call of its `transfer(to, value)`.
    Token(Asset),
    /// An x402 payment (§16): an EIP-3009 authorization, signed off chain and delivered by the paid request.
    Payment(Box<PaymentDraft<'a>>),
    /// A contract call (§18): its calldata with native `value`, at the gas limit its simulation found.
    Call(Box<CallDraft>),
    /// An EIP-712 signature (§18 `sign-typed-data`): its digest signed, nothing sent; its record carries the typed
    /// data (`CallRecord::typed_data`) and what it grants.
    TypedData(Box<TypedDraft>),
    /// An owner's sweep (§20) of the whole balance of the native coin (`None`: less the maximum fee) or of a token
    /// (the gas paid in the native coin): its amount is the quote's, read from the node.
    Sweep(Option<Asset>),
    /// A transfer redeemed through an on-chain delegation (§21): the delegator's money, the agent's gas.
    Redeem(Box<super::redeem::RedeemDraft>),
}

/// What a typed-data signature is made from: its record and what its reservation judges (none when an owner
/// approved it).
pub(super) struct TypedDraft {
    pub record: SignatureRecord,
    pub check: Option<crate::store::CallCheck>,
}

/// What a call is signed from: its record (calldata, decoding, simulation) and the gas limit to sign.
pub(super) struct CallDraft {
    pub record: CallRecord,
    /// What the reservation judges (none when an owner approved it: the approval decides, and its counts were
    /// stored when it was held).
    pub check: Option<crate::store::CallCheck>,
    pub gas_limit: u64,
}

/// What an x402 authorization is signed from.
pub(super) struct PaymentDraft<'a> {
    pub required: &'a PaymentRequired,
    pub choice: &'a Choice,
    pub authorization: crate::x402::Authorization,
    pub record: X402Record,
    pub token: Asset,
}

/// What the node says an outflow will cost, read before anything is reserved.
pub(super) struct Quote {
    pub gas_limit: u64,
    pub max_fee_per_gas: u128,
    pub priority_fee: u128,
    /// What it holds against the cap until it settles.
    pub reserved: U256,
    /// The native balance as read and what the wallet must hold of it; the reservation checks it again, less what
    /// the agent's transfers on their way hold. `None`: no native coin is needed (a payment).
    pub funds: Option<NativeFunds>,
    /// The token balance as read (a token transfer or a payment): the reservation subtracts unused x402
    /// authorizations from it.
    pub token_balance: Option<U256>,
    /// The wallet's nonce the node has mined, read with the token balance (a token transfer, a redemption).
    pub mined_nonce: Option<u64>,
    /// The amount the quote found (a sweep: the whole balance), in place of the outflow's.
    pub value: Option<U256>,
}

impl Kind<'_> {
    /// The asset's symbol.
    fn symbol(&self, chain: &ChainInfo) -> String {
        match self {
            Kind::Native => chain.native_symbol.to_string(),
            Kind::Token(asset) | Kind::Sweep(Some(asset)) => asset.symbol.clone(),
            Kind::Payment(p) => p.token.symbol.clone(),
            Kind::Call(_) | Kind::TypedData(_) | Kind::Sweep(None) => chain.native_symbol.to_string(),
            Kind::Redeem(r) => r
                .token
                .as_ref()
                .map_or(chain.native_symbol, |t| t.symbol.as_str())
                .to_string(),
        }
    }

    /// Whether it is a transaction of the agent's wallet (a nonce, a broadcast).
    fn on_chain(&self) -> bool {
        !matches!(self, Kind::Payment(_) | Kind::TypedData(_))
    }

    async fn quote(&self, client: &dyn Node, o: &Outflow<'_>) -> Result<Quote, TransferError> {
        match self {
            Kind::Native => quote_native(client, o.chain, o.from, o.to, o.value).await,
            Kind::Call(call) => quote_call(client, o.chain, call, o.from, o.to, o.value).await,
            Kind::Token(asset) => quote_token(client, o.chain, asset, o.from, o.to, o.value).await,
            Kind::Redeem(r) => super::redeem::quote_redeem(client, o.chain, r, o.from, o.value).await,
            Kind::Sweep(None) => quote_native_sweep(client, o.chain, o.from, o.to).await,
            Kind::Sweep(Some(asset)) => {
                let held = client.token_balance(o.from, asset).await?;
                if held.is_zero() {
                    return Err(TransferError::NothingToSweep(asset.symbol.clone()));
                }
                let quote = quote_token(client, o.chain, asset, o.from, o.to, held).await?;
                Ok(Quote {
                    value: Some(held),
                    ..quote
                })
            }
            // Nothing is sent: no gas, no balance to hold.
            Kind::TypedData(_) => Ok(Quote {
                gas_limit: 0,
                max_fee_per_gas: 0,
                priority_fee: 0,
                reserved: U256::ZERO,
                funds: None,
                token_balance: None,
                mined_nonce: None,
                value: None,
            }),
            // No native coin moves: the facilitator pays the gas.
            Kind::Payment(p) => Ok(Quote {
                gas_limit: 0,
                max_fee_per_gas: 0,
                priority_fee: 0,
                reserved: U256::ZERO,
                funds: None,
                token_balance: Some(client.token_balance(o.from, &p.token).await?),
                mined_nonce: None,
                value: None,
            }),
        }
    }

    /// Signs the reserved outflow at `nonce` (ignored by an authorization, which carries its own random nonce).
    /// Every kind signs a 32-byte digest through the signer seam: a transaction's signature hash, an EIP-3009
    /// authorization's or an EIP-712 message's digest.
    fn sign(
        &self,
        signer: &dyn WalletSigner,
        chain: &ChainInfo,
        request: &TransferRequest,
        priority_fee: u128,
        nonce: u64,
    ) -> Result<SignedTx, SignerError> {
        match self {
            Kind::Payment(p) => crate::x402::sign_payment(signer, p.required, p.choice, &p.authorization)
                .map(|signed| SignedTx {
                    raw: signed.header_value.into_bytes(),
                    // No transaction of the agent's: the settlement, once known, is the payee's.
                    hash: String::new(),
                })
                .map_err(|e| match e {
                    crate::x402::SignError::Signer(e) => e,
                    other => SignerError::Key(other.to_string()),
                }),
            Kind::TypedData(t) => signer.sign_hash(&t.record.digest).map(|signature| SignedTx {
                raw: signature.as_bytes().to_vec(),
                hash: String::new(),
            }),
            _ => sign_transfer(signer, chain, request, priority_fee, nonce),
        }
    }
}

impl Outflow<'_> {
    /// What the store records of it before its nonce is known.
    fn request(&self, quote: &Quote, node_nonce: Option<u64>) -> TransferRequest {
        TransferRequest {
            id: self.id,
            agent_id: self.agent_id,
            chain: self.chain.name.to_string(),
            conversation_id: self.conversation_id,
            from: self.from,
            to: self.to,
            value_wei: quote.value.unwrap_or(self.value),
            reserved_wei: quote.reserved,
            node_nonce,
            asset: self.kind.symbol(self.chain),
            token: match &self.kind {
                Kind::Native | Kind::Call(_) | Kind::TypedData(_) | Kind::Sweep(None) => None,
                Kind::Token(asset) | Kind::Sweep(Some(asset)) => token_ref(asset),
                Kind::Payment(p) => token_ref(&p.token),
                Kind::Redeem(r) => r.token.as_ref().and_then(token_ref),
            },
            clearance: self.clearance,
            token_balance: quote.token_balance,
            mined_nonce: quote.mined_nonce,
            native_funds: quote.funds,
            body: match &self.kind {
                Kind::Payment(p) => Body::Authorization(p.record.clone()),
                Kind::TypedData(t) => Body::Signature(t.record.clone()),
                Kind::Call(c) => Body::Transaction(OnChain {
                    at: (),
                    gas_limit: quote.gas_limit,
                    max_fee_per_gas: quote.max_fee_per_gas,
                    call: Some(c.record.clone()),
                    via: None,
                }),
                Kind::Native | Kind::Token(_) | Kind::Sweep(_) | Kind::Redeem(_) => Body::Transaction(OnChain {
                    at: (),
                    gas_limit: quote.gas_limit,
                    max_fee_per_gas: quote.max_fee_per_gas,
                    call: None,
                    via: self.kind.redeem().map(|r| r.via.clone()),
                }),
            },
            call_check: match &self.kind {
                Kind::Call(c) => c.check.clone(),
                Kind::TypedData(t) => t.check.clone(),
                _ => None,
            },
            mandate: self.mandate.clone(),
            delegated: self.kind.redeem().map(|r| r.delegated()),
            // A sweep's entry says the amount it was quoted, in the units its own entry uses.
            owed: self.owed.clone().map(|owed| {
                owed.with_amount(|| {
                    let decimals = match &self.kind {
                        Kind::Sweep(Some(asset)) => asset.decimals,
                        _ => self.chain.decimals,
                    };
                    crate::domain::amount::format_units(quote.value.unwrap_or(self.value), decimals)
                })
            }),
        }
    }
}

/// What the reservation of an outflow would decide now (a call's preview, §18 `calls/simulate`).
pub(super) enum Judged {
    Allow,
    /// Held for an owner's approval.
    Approve,
    /// Refused, with the error the send would answer.
    Deny(TransferError),
}

impl Transfers {
    /// What sending `o` would decide now, by the same quote, request and decision as `send_outflow`, with nothing
    /// reserved, signed or written. A quote that already refuses (funds) is that refusal.
    pub(super) async fn judge_outflow(&self, o: &Outflow<'_>) -> Result<Judged, TransferError> {
        let chain = o.chain;
        let client = self.chains.node(chain.name)?;
        let quote = match o.kind.quote(client, o).await {
            Ok(quote) => quote,
            Err(e @ TransferError::InsufficientFunds { .. }) => return Ok(Judged::Deny(e)),
            Err(e) => return Err(e),
        };
        let node_nonce = match o.kind.on_chain() {
            true => self.node_nonce(client, o.agent_id, chain, o.from).await?,
            false => None,
        };
        let request = o.request(&quote, node_nonce);
        // The reserving transaction's own read and decision, rolled back when it is dropped: nothing is written.
        let mut tx = self.store.reserving().await.map_err(store_error)?;
        let decided = decide_in(tx.as_mut(), &request).await?;
        drop(tx);
        Ok(match decided.decision {
            Decision::Reserve { .. } => Judged::Allow,
            Decision::Hold { .. } => Judged::Approve,
            Decision::Refuse(r) => Judged::Deny(refusal(r, &request, chain)),
        })
    }

    /// Sends `o` (see the module's doc). `Sent` with `Pending` when the node took it (the caller marks it so),
    /// `Submitted` when it is stored signed for the watcher (or, for an authorization, for the paid request).
    pub(super) async fn send_outflow(&self, o: Outflow<'_>) -> Result<TransferOutcome, TransferError> {
        self.send_outflow_locked(o, None).await
    }

    /// `send_outflow` under the agent's send lock on the chain when the caller took it already (`held`: a call is
    /// simulated under it, §18).
    pub(super) async fn send_outflow_locked(
        &self,
        o: Outflow<'_>,
        held: Option<Box<dyn SendGuard>>,
    ) -> Result<TransferOutcome, TransferError> {
        let chain = o.chain;
        let client = self.chains.node(chain.name)?;
        let (quote, signer) = tokio::join!(o.kind.quote(client, &o), self.signer(o.agent_id));
        let (quote, signer) = (quote?, signer?);
        let on_chain = o.kind.on_chain();
        // Without a lock of the caller's, an on-chain send is reserved in a round, which takes the lock.
        let mut guard = held.filter(|_| on_chain);
        let node_nonce = match on_chain {
            true => self.node_nonce(client, o.agent_id, chain, o.from).await?,
            false => None,
        };
        let mut request = o.request(&quote, node_nonce);
        let from_approval = matches!(o.clearance, Clearance::Approval { .. });
        for attempt in 0..2 {
            let reservation = match (on_chain, &guard) {
                (true, None) => self.reserve_in_round(&o, &signer, &request, quote.priority_fee).await?,
                _ => self.reserve(&o, signer.as_ref(), &request, quote.priority_fee).await?,
            };
            let tx = match reservation {
                Reservation::Reserved(tx) => *tx,
                Reservation::AwaitingApproval(approval) => {
                    return Ok(TransferOutcome::AwaitingApproval {
                        chain,
                        approval: *approval,
                    });
                }
                Reservation::Refused(r) => return Err(refusal(r, &request, chain)),
                // `reserve` signs and asks again until the store stores or refuses.
                Reservation::Sign { .. } => {
                    return Err(store_error(StoreError::Corrupt(
                        "a reservation was left unsigned".into(),
                    )));
                }
            };
            drop(guard.take());
            let sent = |status| TransferOutcome::Sent {
                chain,
                tx: tx.clone(),
                status,
            };
            if !on_chain {
                if self.faults.exit_before_broadcast {
                    tracing::error!(tx_id = %tx.id, "FAULT_EXIT_BEFORE_BROADCAST: exiting after storing a signature");
                    std::process::exit(86);
                }
                return Ok(sent(BroadcastStatus::Submitted));
            }
            match self.broadcast(client, &tx).await {
                Ok(()) => return Ok(sent(BroadcastStatus::Pending)),
                Err(e) if e.is_transport() => {
                    // It may have reached the node: it stays stored as signed and the watcher broadcasts it again.
                    tracing::warn!(tx_id = %tx.id, chain = chain.name, error = %e, "broadcast not confirmed; will retry");
                    return Ok(sent(BroadcastStatus::Submitted));
                }
                Err(e) if e.refusal() == Some(RefusalKind::NonceTooLow) && attempt == 0 => {
                    // The wallet was used elsewhere: its nonce is the node's, not a gap. Resynchronise under the
                    // lock and send again.
                    guard = Some(self.lock(&o).await?);
                    let pending = client.pending_nonce(o.from).await?;
                    tracing::warn!(tx_id = %tx.id, chain = chain.name, pending, "nonce too low; resynchronising from the node");
                    self.store
                        .discard_transfer(tx.id, Some(pending))
                        .await
                        .map_err(store_error)?;
                    // An approved transfer keeps its id (the discarded row is gone) and its approval.
                    if matches!(request.clearance, Clearance::Approval { .. }) {
                        request.clearance = Clearance::Decided;
                    } else {
                        request.id = Uuid::new_v4();
                    }
                    request.node_nonce = Some(pending);
                }
                Err(e) => {
                    return Err(self
                        .refused(client, signer.as_ref(), &tx, &quote, from_approval, e)
                        .await);
                }
            }
        }
        Err(TransferError::NonceKeptRefused)
    }

    /// Decides, signs and stores `request`. A key in memory signs in the reserving transaction, at the nonce the
    /// decision named once it allowed the request. A token signs outside every database transaction (§20): the
    /// store decides and names the nonce (writing nothing), the token signs at it, and the store decides again under
    /// the agent's lock and stores the signature only if it reserves at that nonce. The agent's send lock is held throughout,
    /// so the nonce does not move between the two; a signer that does not answer leaves nothing recorded and the
    /// nonce free (503 `signer_unavailable`). Nothing is signed that the decision refuses or holds for approval.
    async fn reserve(
        &self,
        o: &Outflow<'_>,
        signer: &dyn WalletSigner,
        request: &TransferRequest,
        priority_fee: u128,
    ) -> Result<Reservation, TransferError> {
        let mut presigned: Option<Presigned> = None;
        // A key in memory signs inside the reserving transaction, once its decision allowed the request: one
        // transaction. A token signs outside it, between two.
        let sign_now = |nonce: Option<u64>| {
            o.kind
                .sign(signer, o.chain, request, priority_fee, nonce.unwrap_or(0))
                .map_err(|e| signer_error(o.agent_id, e))
        };
        let sign_now: Option<&SignNow<'_>> = match signer.in_memory() {
            true => Some(&sign_now),
            false => None,
        };
        // Under the send lock the nonce does not move, and the second decision takes the signature. Another process
        // on the same SQLite file (`agentd mcp`, a second instance) takes no part in this process's send lock: it may
        // take the nonce between the two, and the store then names the next one; signing again converges.
        for _ in 0..SIGNING_ROUNDS {
            let nonce = match reserve_once(self.store.as_ref(), request, presigned.as_ref(), sign_now).await? {
                Reservation::Sign { nonce } => nonce,
                other => return Ok(other),
            };
            // An x402 authorization or a typed-data signature uses no nonce of the agent's (`sign` ignores it).
            let signed = o
                .kind
                .sign(signer, o.chain, request, priority_fee, nonce.unwrap_or(0))
                .map_err(|e| signer_error(o.agent_id, e))?;
            presigned = Some(Presigned { nonce, signed });
        }
        Err(store_error(StoreError::Corrupt(
            "the nonce to sign at moved under the agent's send lock".into(),
        )))
    }

    /// `reserve` for an on-chain send, in the next reservation round with the sends of any agents waiting with it
    /// (`rounds`); alone, under its own lock, when the round could not take it.
    async fn reserve_in_round(
        &self,
        o: &Outflow<'_>,
        signer: &Arc<dyn WalletSigner>,
        request: &TransferRequest,
        priority_fee: u128,
    ) -> Result<Reservation, TransferError> {
        let (sending, answer) = rounds::Sending::new(request.clone(), signer.clone(), o.chain, priority_fee);
        self.rounds.push(rounds::Item::Send(Box::new(sending)));
        match answer.await {
            Ok(rounds::Answer::Decided(reservation)) => reservation,
            Ok(rounds::Answer::Alone) => {
                let _guard = self.lock(o).await?;
                self.reserve(o, signer.as_ref(), request, priority_fee).await
            }
            Err(_) => Err(store_error(StoreError::Corrupt(
                "the round reserving a transfer ended without an answer".into(),
            ))),
        }
    }

    /// The nonce to start from when the store has none for (agent, chain) yet: the node's count.
    async fn node_nonce(
        &self,
        client: &dyn Node,
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

    async fn lock(&self, o: &Outflow<'_>) -> Result<Box<dyn SendGuard>, TransferError> {
        self.store
            .lock_sender(o.agent_id, o.chain.name)
            .await
            .map_err(store_error)
    }

    /// The one refusal handler: the transfer is removed with its reservation, its nonce given back if it is still
    /// the newest, else filled at once by a zero-value send of the wallet to itself at the same fee cap (broadcast
    /// now; if the node does not take it either, the watcher sends it again and, failing that, fills its nonce at
    /// today's fees). Nothing is re-signed, no nonce is left unused. An approved transfer waits again (the owner's
    /// approval stands, §11). The refusal is the answer.
    async fn refused(
        &self,
        client: &dyn Node,
        signer: &dyn WalletSigner,
        tx: &StoredTx,
        quote: &Quote,
        from_approval: bool,
        e: ChainError,
    ) -> TransferError {
        let chain = client.info();
        tracing::warn!(chain = chain.name, tx_id = %tx.id, error = %e, "the node refused the transfer");
        let Some(sent) = tx.on_chain() else {
            return store_error(crate::store::StoreError::Corrupt(format!(
                "the refused outflow {} is not a transaction",
                tx.id
            )));
        };
        let gas = crate::chain::TRANSFER_GAS;
        let fee = U256::from(gas).saturating_mul(U256::from(sent.max_fee_per_gas));
        let fill = nonce_filler(tx, chain, gas, sent.max_fee_per_gas, fee.min(tx.reserved_wei));
        // Signed before the store is asked, outside its transaction, at the refused transfer's nonce: used only
        // when later nonces are out and the nonce cannot be given back.
        let signed = match sign_transfer(signer, chain, &fill, quote.priority_fee, sent.at.nonce) {
            Ok(signed) => signed,
            Err(err) => return signer_error(tx.agent_id, err),
        };
        let signed = Presigned {
            nonce: Some(sent.at.nonce),
            signed,
        };
        match self.store.discard_or_fill(tx.id, &fill, &signed).await {
            Ok(None) => {}
            Ok(Some(filled)) => self.send_fill(client, tx, &filled).await,
            Err(err) => return store_error(err),
        }
        if from_approval && let Err(err) = self.store.reopen_approval(tx.id).await {
            return store_error(err);
        }
        if e.refusal() == Some(RefusalKind::InsufficientFunds) {
            return TransferError::InsufficientFunds {
                chain,
                needed: quote.funds.map_or(tx.reserved_wei, |f| f.needed),
                balance: client.balance(tx.from).await.ok(),
            };
        }
        TransferError::Rejected(e)
    }
}

/// What a reserving transaction read for a request and what `domain::decision::decide` answered on it.
struct Decided {
    decision: Decision,
    /// What counted against the cap on the chain as read.
    spent: U256,
    /// What a call counts, and leaves of the allowances it moves.
    count: CallCount,
}

/// The one decision on `request`: the store reads the facts under the agent's lock (a call's windows once its counts
/// are known), the domain builds the request and decides. The same for a send, an approval and a preview.
async fn decide_in(tx: &mut (dyn Reserving + '_), request: &TransferRequest) -> Result<Decided, TransferError> {
    let Gathered { mut facts, counted } = tx.facts(request).await.map_err(store_error)?;
    let count = request.call_count(&counted);
    if let (Some(_), Gate::Policy { policy, .. }) = (&request.call_check, &facts.gate) {
        facts.call_windows = tx
            .call_windows(request, &count.counts, policy)
            .await
            .map_err(store_error)?;
    }
    let asset_key = request.asset_key();
    let judged = request
        .decision_request(&asset_key, &count.counts)
        .map_err(|_| store_error(StoreError::Corrupt("typed data came without its parse".into())))?;
    let decision = crate::domain::decision::decide(&judged, &facts);
    Ok(Decided {
        decision,
        spent: facts.spent,
        count,
    })
}

/// What `apply` did with a decision.
pub(super) enum Applied {
    /// Refused (nothing written), held for approval (stored), or reserved and stored with its signature.
    Final(Reservation),
    /// Allowed at `nonce`, but not signed for it: the caller signs there (outside the database) and comes again.
    Unsigned { nonce: Option<u64> },
    /// Allowed, and the key in memory failed to sign at the nonce: nothing of it written, the transaction goes on.
    SignerFailed(TransferError),
}

/// Signs a request at the nonce its decision named, inside the reserving transaction: only a key in this process's
/// memory (`WalletSigner::in_memory`), which takes microseconds.
pub(super) type SignNow<'a> = dyn Fn(Option<u64>) -> Result<SignedTx, TransferError> + Send + Sync + 'a;

/// The decision on `request` (`decide_in`), applied in `tx`: refused; or held for approval (stored); or allowed at
/// a nonce, then stored as signed with `signed` when it was made at that nonce, or with what `sign_now` signs there
/// (a key in memory: the decision allowed it first, in this transaction). Unsigned for that nonce, nothing is
/// written unless `stand_in`: then the reservation is written with a stand-in for its signature, so that what a
/// round decides after it counts it, and the caller must roll `tx` back. A token never signs inside `tx`.
pub(super) async fn apply(
    tx: &mut (dyn Reserving + '_),
    request: &TransferRequest,
    signed: Option<&Presigned>,
    stand_in: bool,
    sign_now: Option<&SignNow<'_>>,
) -> Result<Applied, TransferError> {
    let Decided { decision, spent, count } = decide_in(tx, request).await?;
    let (nonce, release) = match decision {
        Decision::Refuse(r) => return Ok(Applied::Final(Reservation::Refused(r))),
        Decision::Hold { ttl_secs, holds } => {
            let approval = tx.hold(request, (ttl_secs, holds), &count).await.map_err(store_error)?;
            return Ok(Applied::Final(Reservation::AwaitingApproval(Box::new(approval))));
        }
        Decision::Reserve { nonce, release } => (nonce, release),
    };
    let reserve = Reserve { nonce, spent, release };
    let (signature, made) = match (signed.filter(|p| p.nonce == nonce), sign_now) {
        (Some(p), _) => (p.signed.clone(), true),
        (None, Some(sign)) => match sign(nonce) {
            Ok(signature) => (signature, true),
            Err(e) => return Ok(Applied::SignerFailed(e)),
        },
        (None, None) if stand_in => {
            let stand_in = SignedTx {
                raw: Vec::new(),
                // Unique, as every stored hash must be; never committed.
                hash: format!("0x{}{}", Uuid::new_v4().simple(), Uuid::new_v4().simple()),
            };
            (stand_in, false)
        }
        (None, None) => return Ok(Applied::Unsigned { nonce }),
    };
    let record = tx
        .reserve(request, reserve, signature, &count)
        .await
        .map_err(store_error)?;
    match made {
        true => Ok(Applied::Final(Reservation::Reserved(Box::new(record)))),
        false => Ok(Applied::Unsigned { nonce }),
    }
}

/// One reservation of one request, in one reserving transaction (`apply`, signing in it with `sign_now`): committed
/// when held or stored; `Reservation::Sign` with the nonce to sign at when allowed but not signed for it (nothing
/// written).
pub async fn reserve_once(
    store: &dyn TransferStore,
    request: &TransferRequest,
    signed: Option<&Presigned>,
    sign_now: Option<&SignNow<'_>>,
) -> Result<Reservation, TransferError> {
    let mut tx = store.reserving().await.map_err(store_error)?;
    match apply(tx.as_mut(), request, signed, false, sign_now).await? {
        Applied::Unsigned { nonce } => Ok(Reservation::Sign { nonce }),
        Applied::SignerFailed(e) => Err(e),
        Applied::Final(refused @ Reservation::Refused(_)) => Ok(refused),
        Applied::Final(done) => {
            tx.commit().await.map_err(store_error)?;
            Ok(done)
        }
    }
}

/// A refusal over one of the asset's limits in words, with the figures the decision used (in whole units of the
/// asset; for a call or typed data, of the asset `counted_asset` whose counts broke it, named by its symbol, or by
/// its key in base units for a token outside the registry).
fn over_limit(
    rule: PolicyRule,
    (limit, counted, asked): (U256, U256, U256),
    counted_asset: Option<&str>,
    request: &TransferRequest,
    chain: &'static ChainInfo,
) -> TransferError {
    let (asset, decimals) = match (counted_asset, &request.call_check) {
        (Some(key), Some(check)) => {
            let name = match key.split_once(':') {
                Some((_, symbol)) if !symbol.starts_with("0x") => symbol.to_string(),
                _ => format!("(base units of {key})"),
            };
            (name, check.decimals_of(key))
        }
        _ => (
            request.asset.clone(),
            request.token.map_or(chain.decimals, |t| t.decimals),
        ),
    };
    let units = |v: U256| crate::domain::amount::format_units(v, decimals);
    let words = match rule {
        PolicyRule::PerTransfer => format!(
            "over the per-transfer limit of {} {asset}: it asked {}",
            units(limit),
            units(asked)
        ),
        _ => {
            let (name, span) = match rule {
                PolicyRule::PerDay => ("daily", "24 h"),
                _ => ("weekly", "7 days"),
            };
            format!(
                "over the {name} limit of {} {asset}: {} was already counted in the last {span}, {} was left, and it asked {}",
                units(limit),
                units(counted),
                units(limit.saturating_sub(counted)),
                units(asked)
            )
        }
    };
    TransferError::OverLimit { rule, words }
}

/// A reservation's refusal, as the transfer service says it.
fn refusal(refusal: Refusal, request: &TransferRequest, chain: &'static ChainInfo) -> TransferError {
    match refusal {
        Refusal::CapExceeded { cap, spent } => TransferError::CapExceeded {
            chain,
            reserved: request.reserved_wei,
            cap,
            spent,
        },
        Refusal::PolicyDenied(rule) => TransferError::PolicyDenied(rule),
        Refusal::CallDenied(words) => TransferError::CallDenied(words),
        Refusal::OverLimit {
            rule,
            limit,
            counted,
            asked,
            asset,
        } => over_limit(rule, (limit, counted, asked), asset.as_deref(), request, chain),
        Refusal::AgentInactive => TransferError::AgentInactive,
        Refusal::TokenRevoked => TransferError::TokenRevoked,
        Refusal::ClaimLost => TransferError::ClaimLost,
        Refusal::NotAwaiting(status) => TransferError::NotAwaiting(status),
        Refusal::OwnerAddressRequired => TransferError::OwnerAddressRequired,
        Refusal::InsufficientTokens { available } => insufficient_tokens(request, available),
        Refusal::DelegationLimit { available } => TransferError::DelegationLimit {
            available: crate::domain::amount::format_units(
                available,
                request.token.map_or(chain.decimals, |t| t.decimals),
            ),
            symbol: request.asset.clone(),
        },
        Refusal::InsufficientFunds { available } => TransferError::InsufficientFunds {
            chain,
            needed: request.native_funds.map_or(U256::ZERO, |f| f.needed),
            balance: Some(available),
        },
    }
}

/// The native balance as read and what a transfer needs of it; refused at once when the balance alone falls short.
pub(super) fn native_funds(
    chain: &'static ChainInfo,
    balance: U256,
    needed: U256,
) -> Result<NativeFunds, TransferError> {
    if balance < needed {
        return Err(TransferError::InsufficientFunds {
            chain,
            needed,
            balance: Some(balance),
        });
    }
    Ok(NativeFunds { balance, needed })
}

/// Gas, fees and the balance of a native transfer (asked together; the wallet's mined nonce just before the balance,
/// which says what of the agent's open transfers the balance shows already); refused when the balance
/// cannot pay the amount plus the maximum fee. Gas is 21,000 without an estimate for a recipient without code, fees
/// and the L1 fee estimate are reused for `FEE_MAX_AGE`: besides the balance, most quotes ask the node nothing.
async fn quote_native(
    client: &dyn Node,
    chain: &'static ChainInfo,
    from: Address,
    to: Address,
    value: U256,
) -> Result<Quote, TransferError> {
    let probe = l1_probe(chain, to, value, Bytes::new());
    let (gas_limit, fees, funds, l1_fee) = tokio::join!(
        client.transfer_gas(from, to, value),
        client.recent_fees(FEE_MAX_AGE),
        client.mined_nonce_then_balance(from),
        client.recent_l1_fee(&probe, FEE_MAX_AGE),
    );
    let gas_limit = match gas_limit {
        Ok(gas) => gas,
        Err(e) if e.refusal() == Some(RefusalKind::InsufficientFunds) => {
            return Err(TransferError::InsufficientFunds {
                chain,
                needed: value,
                balance: funds.as_ref().ok().map(|(_, balance)| *balance),
            });
        }
        Err(e) => return Err(e.into()),
    };
    let (fees, (mined, balance), l1_fee) = (fees?, funds?, l1_fee?);
    // On OP-stack chains the L1 data fee is part of the fee (§14).
    let cost = Cost::of(value, fees.max_cost(gas_limit).saturating_add(l1_fee));
    Ok(Quote {
        gas_limit,
        max_fee_per_gas: fees.max_fee_per_gas,
        priority_fee: fees.max_priority_fee_per_gas,
        reserved: cost.reserved,
        funds: Some(native_funds(chain, balance, cost.needed)?),
        token_balance: None,
        mined_nonce: Some(mined),
        value: None,
    })
}

/// Fees, the native balance and the L1 fee of a call at the gas limit its simulation found; the cap holds its value
/// and twice the maximum fee, as a native transfer's.
async fn quote_call(
    client: &dyn Node,
    chain: &'static ChainInfo,
    call: &CallDraft,
    from: Address,
    to: Address,
    value: U256,
) -> Result<Quote, TransferError> {
    let probe = l1_probe(chain, to, value, call.record.data.clone());
    let (fees, balance, l1_fee) = tokio::join!(
        client.recent_fees(FEE_MAX_AGE),
        client.balance(from),
        client.recent_l1_fee(&probe, FEE_MAX_AGE),
    );
    let (fees, balance, l1_fee) = (fees?, balance?, l1_fee?);
    let cost = Cost::of(value, fees.max_cost(call.gas_limit).saturating_add(l1_fee));
    // Not refused here: a call's funds are judged last, in the reservation (§18).
    Ok(Quote {
        gas_limit: call.gas_limit,
        max_fee_per_gas: fees.max_fee_per_gas,
        priority_fee: fees.max_priority_fee_per_gas,
        reserved: cost.reserved,
        funds: Some(NativeFunds {
            balance,
            needed: cost.needed,
        }),
        token_balance: None,
        mined_nonce: None,
        value: None,
    })
}

/// Gas, fees, the native balance and the token balance of a token transfer, asked together. The token amount
/// must be covered by the token balance (else `insufficient_funds` before anything is signed), the gas by the
/// native balance; the cap holds twice the maximum fee and no value (the native coin moves none). The token's
/// decimals are checked against the registry by the balance read.
async fn quote_token(
    client: &dyn Node,
    chain: &'static ChainInfo,
    token: &Asset,
    from: Address,
    to: Address,
    value: U256,
) -> Result<Quote, TransferError> {
    let contract = token.token.ok_or(TransferError::NoWallet)?;
    let data = crate::domain::erc20::transfer_calldata(to, value);
    let probe = l1_probe(chain, contract, U256::ZERO, data.clone());
    // The mined nonce is read before both balances, as for a native transfer (`Node::mined_nonce_then_balance`).
    let balances = async {
        let mined = client.mined_nonce(from).await;
        let (balance, held) = tokio::join!(client.balance(from), client.token_balance(from, token));
        (mined, balance, held)
    };
    let (gas_limit, fees, (mined, balance, held), l1_fee) = tokio::join!(
        client.estimate_call_gas(from, contract, data),
        client.recent_fees(FEE_MAX_AGE),
        balances,
        client.l1_fee(&probe),
    );
    let short_of = |balance| TransferError::InsufficientTokenFunds {
        symbol: token.symbol.clone(),
        decimals: token.decimals,
        needed: value,
        balance,
    };
    let held = held?;
    if held < value {
        return Err(short_of(held));
    }
    let gas_limit = match gas_limit {
        Ok(gas) => gas,
        // Blocks landed between the two reads and took the balance below the amount: refused as if read after them.
        Err(e) if e.refusal() == Some(RefusalKind::TokenBalanceTooLow) => {
            return Err(short_of(client.token_balance(from, token).await?));
        }
        Err(e) => return Err(e.into()),
    };
    let (fees, balance, l1_fee) = (fees?, balance?, l1_fee?);
    // On OP-stack chains the L1 data fee is part of the fee (§14).
    let cost = Cost::of(U256::ZERO, fees.max_cost(gas_limit).saturating_add(l1_fee));
    Ok(Quote {
        gas_limit,
        max_fee_per_gas: fees.max_fee_per_gas,
        priority_fee: fees.max_priority_fee_per_gas,
        reserved: cost.reserved,
        funds: Some(native_funds(chain, balance, cost.needed)?),
        token_balance: Some(held),
        mined_nonce: Some(mined?),
        value: None,
    })
}

/// The whole native balance less one maximum fee (gas limit × `maxFeePerGas`, plus the L1 fee estimate on OP-stack
/// chains, §14): what an owner's sweep sends (§20). The balance is read first, so the gas of a recipient with code is
/// estimated for the amount it will receive; `nothing_to_sweep` when the balance does not exceed the fee.
async fn quote_native_sweep(
    client: &dyn Node,
    chain: &'static ChainInfo,
    from: Address,
    to: Address,
) -> Result<Quote, TransferError> {
    let balance = client.balance(from).await?;
    if balance.is_zero() {
        return Err(TransferError::NothingToSweep(chain.native_symbol.to_string()));
    }
    let probe = l1_probe(chain, to, balance, Bytes::new());
    let (gas_limit, fees, l1_fee) = tokio::join!(
        client.transfer_gas(from, to, balance),
        client.recent_fees(FEE_MAX_AGE),
        client.recent_l1_fee(&probe, FEE_MAX_AGE),
    );
    let (gas_limit, fees, l1_fee) = (gas_limit?, fees?, l1_fee?);
    let fee = fees.max_cost(gas_limit).saturating_add(l1_fee);
    let value = balance.saturating_sub(fee);
    if value.is_zero() {
        return Err(TransferError::NothingToSweep(chain.native_symbol.to_string()));
    }
    let cost = Cost::of(value, fee);
    Ok(Quote {
        gas_limit,
        max_fee_per_gas: fees.max_fee_per_gas,
        priority_fee: fees.max_priority_fee_per_gas,
        reserved: cost.reserved,
        funds: Some(native_funds(chain, balance, cost.needed)?),
        token_balance: None,
        mined_nonce: None,
        value: Some(value),
    })
}
