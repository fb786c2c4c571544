//! The one send path of every outflow — the native coin, a token, an x402 authorization; a first try or an owner's
//! approval: quote (the wallet key opened meanwhile) → lock (agent, chain) → decide, sign and record by the one
//! reservation protocol (`reserve`: the store's reserving transaction reads the facts, the domain decides with
//! `domain::decision::decide`; a key in memory signs in that transaction, a token outside the database and the
//! store decides again) → release the lock → deliver. An on-chain send not already under its lock is reserved so in
//! a round with the sends that came meanwhile (`rounds`, group commit): one lock per (agent, chain), one commit for
//! all; any other is a round of one, run at once (`reserve::sign_and_apply`).
//! A transaction is broadcast after the lock is released, so the agent's next transfer is signed while this one
//! travels; a "nonce too low" answer resynchronises from the node and tries once more; any other refusal goes to
//! the one handler, `refused`, which gives the nonce back or fills it. An authorization takes no nonce and no lock,
//! and is delivered by the paid request (`pay`). What differs between kinds is data: what is quoted
//! (`Purpose::quote`) and what is signed (`Purpose::sign`), each kind's in its file under `kinds/`; the decision and its
//! application are the one reservation protocol (`reserve`).

use std::sync::Arc;

use alloy::primitives::{Address, U256};
use uuid::Uuid;

use super::carriers::Carrier;
use super::kinds::{Outflow, Quote};
use super::nonces::sign_fill;
use super::reserve::{decide_in, refusal, sign_and_apply};
use super::{
    BroadcastStatus, TransferError, TransferOutcome, Transfers, nonce_filler, rounds, signer_error, store_error,
};
use crate::chain::{ChainError, Node, RefusalKind};
use crate::domain::chain::ChainInfo;
use crate::domain::decision::Decision;
use crate::domain::transaction::StoredTx;
use crate::signer::WalletSigner;
use crate::store::{Clearance, Presigned, Reservation, SendGuard, StoreError, TransferRequest};

/// How long a wallet-paid outflow waits for the agent's sponsored designation to be mined before it is refused
/// (§22: none of the wallet's own transactions is signed while the authorization that takes its nonce is unmined;
/// the bundle carrying it is usually mined within a block), asking again every `DESIGNATION_POLL`.
const DESIGNATION_WAIT: std::time::Duration = std::time::Duration::from_secs(10);
const DESIGNATION_POLL: std::time::Duration = std::time::Duration::from_millis(100);

/// Runs `attempt` again while `unmined` says it was refused for an unmined sponsored designation of the agent, for
/// at most `DESIGNATION_WAIT` (nothing is written on such a refusal); then answers what the last attempt answered.
pub(super) async fn after_designation<T, F: Future<Output = T>>(
    mut attempt: impl FnMut() -> F,
    unmined: impl Fn(&T) -> bool,
) -> T {
    let started = tokio::time::Instant::now();
    loop {
        let outcome = attempt().await;
        if !unmined(&outcome) || started.elapsed() >= DESIGNATION_WAIT {
            return outcome;
        }
        tokio::time::sleep(DESIGNATION_POLL).await;
    }
}

/// A quote's gas, kept as read before a sponsorship takes it: what the transaction would be signed with (§12
/// `transfers/preview`).
pub(super) struct QuotedGas {
    pub gas_limit: u64,
    pub max_fee_per_gas: u128,
    /// One maximum fee in wei, the L1 estimate included: what the cap holds beyond what the wallet must hold
    /// (`Cost::of`: reserved = needed + one maximum fee); gas limit × max fee per gas without a native funds read.
    pub max_fee: U256,
}

impl QuotedGas {
    fn of(quote: &Quote) -> Self {
        let l2 = U256::from(quote.gas_limit) * U256::from(quote.max_fee_per_gas);
        let max_fee = quote
            .funds
            .map_or(l2, |funds| quote.reserved.saturating_sub(funds.needed).max(l2));
        QuotedGas {
            gas_limit: quote.gas_limit,
            max_fee_per_gas: quote.max_fee_per_gas,
            max_fee,
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
        Ok(self.judge_quoted(o).await?.0)
    }

    /// `judge_outflow`, with the gas of the quote it judged (as read, before a sponsorship takes it; `None` when the
    /// quote itself refused): the gas limit and maximum fee the send would sign with (§12 `transfers/preview`).
    pub(super) async fn judge_quoted(&self, o: &Outflow<'_>) -> Result<(Judged, Option<QuotedGas>), TransferError> {
        let chain = o.chain;
        let client = self.chains.node(chain.name)?;
        let quote = match o.purpose.quote(client, o).await {
            Ok(quote) => quote,
            Err(e @ TransferError::InsufficientFunds { .. }) => return Ok((Judged::Deny(e), None)),
            Err(e) => return Err(e),
        };
        let gas = QuotedGas::of(&quote);
        // Sponsored (§22): the gas is the sponsorship's; the wallet needs only what it moves.
        let quote = match o.carrier() {
            Carrier::Operation => quote.sponsored(o.value),
            _ => quote,
        };
        let node_nonce = match o.purpose.on_chain() {
            true => self.node_nonce(client, o.agent_id, chain, o.from).await?,
            false => None,
        };
        let request = o.request(&quote, node_nonce);
        // The reserving transaction's own read and decision, rolled back when it is dropped: nothing is written.
        let mut tx = self.store.reserving().await.map_err(store_error)?;
        let (decision, ..) = decide_in(tx.as_mut(), &request).await?;
        drop(tx);
        let judged = match decision {
            Decision::Reserve { .. } => Judged::Allow,
            Decision::Hold { .. } => Judged::Approve,
            Decision::Refuse(r) => Judged::Deny(refusal(r, &request, chain)),
        };
        Ok((judged, Some(gas)))
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
        if o.carrier() == Carrier::Operation {
            return self.send_sponsored(o, held).await;
        }
        let chain = o.chain;
        let client = self.chains.node(chain.name)?;
        let (quote, signer) = tokio::join!(o.purpose.quote(client, &o), self.signer(o.agent_id));
        let (quote, signer) = (quote?, signer?);
        let on_chain = o.purpose.on_chain();
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
                    request.reads.node_nonce = Some(pending);
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

    /// Decides, signs and stores `request` alone: a round of one of the one sign-and-apply loop, run at once under
    /// the agent's send lock (`reserve::sign_and_apply`). A key in memory signs in the reserving transaction, at the nonce the
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
        let sign = |nonce: Option<u64>| {
            // An x402 authorization or a typed-data signature uses no nonce of the agent's (`sign` ignores it).
            o.purpose
                .sign(signer, o.chain, request, priority_fee, nonce.unwrap_or(0))
                .map_err(|e| signer_error(o.agent_id, e))
        };
        sign_and_apply(self.store.as_ref(), request, signer.in_memory(), &sign).await
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
        let sending = rounds::Sending::transaction(request.clone(), signer.clone(), o.chain, priority_fee);
        match self.rounds.reserve(sending).await {
            Some(reservation) => reservation,
            None => {
                let _guard = self.lock(o).await?;
                self.reserve(o, signer.as_ref(), request, priority_fee).await
            }
        }
    }

    /// The nonce to start from when the store has none for (agent, chain) yet (`Nonces::start`).
    async fn node_nonce(
        &self,
        client: &dyn Node,
        agent_id: Uuid,
        chain: &'static ChainInfo,
        from: Address,
    ) -> Result<Option<u64>, TransferError> {
        self.nonces
            .start(self.store.as_ref(), client, agent_id, chain, from)
            .await
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
        let signed = match sign_fill(signer, chain, &fill, quote.priority_fee, (sent.at.nonce, &tx.raw_tx)) {
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
