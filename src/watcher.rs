//! The watcher: per chain, settles open transfers (`confirmed`, `reverted`, `dropped`, `cancelled`) by
//! whichever of their attempts lands, re-broadcasts those that never reached a node, sends those stuck in the pool
//! again with higher fees (§14), fills the nonce of one that can no longer land (so later ones do not wait
//! behind it), and stores an event and a conversation message per change (the store's event
//! feed announces the event once committed); expires transfers that waited for approval too long; settles x402 authorizations (`authorizations`).

mod authorizations;
#[cfg(test)]
mod tests;

use std::collections::HashSet;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use alloy::primitives::{TxHash, U256};
use serde_json::json;
use uuid::Uuid;

use crate::chain::{ChainError, Chains, Node, ReceiptInfo};
use crate::domain::amount::format_units;
use crate::domain::audit::Actor;
use crate::domain::chain as registry;
use crate::domain::policy::ApprovalStatus;
use crate::domain::transaction::{Attempt, AttemptKind, StoredTx, TxState};
use crate::store::SETTLED_PER_COMMIT;
use crate::store::Store;
use crate::store::StoreError;
use crate::store::{Message, Role, Settlement, Settling};
use crate::transfers::{Bump, TransferError, Transfers};

/// Why a round of the watcher stopped short; the next round tries again.
#[derive(Debug, thiserror::Error)]
pub enum WatchError {
    #[error(transparent)]
    Store(#[from] StoreError),
    #[error(transparent)]
    Chain(#[from] ChainError),
    /// A fee bump or a nonce fill the round asked of the transfer service.
    #[error(transparent)]
    Transfer(#[from] TransferError),
    /// A stored value that does not read as it must (a malformed hash, an unknown chain).
    #[error("a stored record is malformed: {0}")]
    Corrupt(String),
}

/// A 32-byte 0x-hex value as stored (a transaction hash, an EIP-3009 nonce).
fn hash(text: &str) -> Result<alloy::primitives::B256, WatchError> {
    text.parse()
        .map_err(|_| WatchError::Corrupt(format!("{text:?} is not a 32-byte hex value")))
}

/// What the watchers use, and nothing more: built once at startup, shared by the watcher of each chain.
#[derive(Clone)]
pub struct WatcherState {
    pub store: Arc<dyn Store>,
    pub chains: Arc<Chains>,
    /// Fills the nonce of a transfer that can no longer land.
    pub transfers: Transfers,
    /// The pause between rounds.
    pub interval: Duration,
    /// How long a broadcast transfer may stay unseen before it is sent again or dropped.
    pub drop_after: Duration,
    /// How long a transfer may stay pending before it is sent again with higher fees (`STUCK_AFTER_SECS`, §14).
    pub stuck_after: Duration,
    /// What ages and expiries are read on (the system's clock outside tests).
    pub clock: Arc<dyn crate::domain::clock::Clock>,
}

/// Watches one chain.
pub struct Watcher {
    state: WatcherState,
    chain: &'static str,
    /// Transfers stored before this moment were left by an earlier process (a crash): they are sent again at once.
    started_at: chrono::DateTime<chrono::Utc>,
    /// The head of the last round and the attempts that had no receipt at it.
    without_receipt: Mutex<Option<(u64, HashSet<TxHash>)>>,
}

/// How long a transfer stored by a running process is left to its sender before the watcher broadcasts it again:
/// the sender may be between storing and broadcasting, and two broadcasts of one transaction race for nothing.
const SENDER_GRACE: Duration = Duration::from_secs(5);

impl Watcher {
    pub fn new(state: WatcherState, chain: &'static str) -> Self {
        Watcher {
            started_at: state.clock.now(),
            state,
            chain,
            without_receipt: Mutex::new(None),
        }
    }

    /// The time now, on the watcher's clock.
    fn now(&self) -> chrono::DateTime<chrono::Utc> {
        self.state.clock.now()
    }

    /// Polls until `stop` turns true.
    pub async fn run_until_stopped(self, mut stop: tokio::sync::watch::Receiver<bool>) {
        let interval = self.state.interval;
        loop {
            if let Err(e) = self.poll_once().await {
                tracing::warn!(chain = self.chain, error = %e, "confirmation watcher round failed");
            }
            tokio::select! {
                _ = tokio::time::sleep(interval) => {}
                _ = stop.changed() => return,
            }
        }
    }

    /// Transfers of this chain still awaiting approval past their `expires_at` become `expired`, releasing their
    /// reservations (the store announces `approval_resolved` and audits it as the system's doing); so do offers held
    /// for approval. One approved or rejected meanwhile is left as it is.
    async fn expire_approvals(&self) -> Result<(), WatchError> {
        let store = &self.state.store;
        for due in store.due_approvals(self.chain, self.now()).await? {
            // Approved or rejected meanwhile: nothing to do.
            store
                .close_approval(due.id, ApprovalStatus::Expired, Actor::System, None)
                .await?;
        }
        // Offers held for approval (§23 Tools) past their `expires_at` never sell: `expired`, audited and announced
        // as a held transfer's expiry.
        for due in store.due_offers(self.chain, self.now()).await? {
            let verdict = crate::store::offers::OfferVerdict::Expired;
            // Decided meanwhile: nothing to do.
            match store
                .decide_offer(due.agent_id, due.id, verdict, Actor::System, None)
                .await?
            {
                crate::store::offers::OfferDecision::Decided(_)
                | crate::store::offers::OfferDecision::NotWaiting(_)
                | crate::store::offers::OfferDecision::NotFound => {}
            }
        }
        Ok(())
    }

    /// The audit entries of transfers whose own never came (`AuditStore::write_owed`): stored by an earlier process
    /// (a crash), or by this one longer ago than a sender takes between its reservation and its entry.
    async fn write_owed(&self) -> Result<(), WatchError> {
        let grace = chrono::Duration::from_std(SENDER_GRACE).unwrap_or_default();
        let cutoff = self.started_at.max(self.now() - grace);
        self.state.store.write_owed(self.chain, cutoff).await?;
        Ok(())
    }

    /// One round over the chain's open transfers. Returns how many were settled. The node is asked for its head,
    /// then, in one JSON-RPC batch (`Node::receipts`), for the receipts of the attempts of the open transfers
    /// it may have put in a block since the last round: all of them once the head moved, else only attempts new since;
    /// the transfers that landed deep enough settle together in one database
    /// transaction; then those still out are looked after one by one (rebroadcast, fee bump, nonce fill, drop).
    pub async fn poll_once(&self) -> Result<usize, WatchError> {
        let Some(_guard) = self.state.store.try_lock_watcher(self.chain).await? else {
            return Ok(0);
        };
        self.expire_approvals().await?;
        self.write_owed().await?;
        let paid = self.settle_authorizations().await?;
        let open = self.state.store.open_transactions(self.chain).await?;
        if open.is_empty() {
            return Ok(paid);
        }
        let node = self.state.chains.node(self.chain)?;
        let mut by_transfer = self.state.store.open_attempts(self.chain).await?;
        let mut watched = Vec::with_capacity(open.len());
        for tx in open {
            let attempts = match by_transfer.remove(&tx.id) {
                Some(attempts) => attempts,
                // Settled or replaced between the two reads: read on its own.
                None => self.state.store.attempts(tx.id).await?,
            };
            watched.push((tx, attempts));
        }
        let (latest, found) = self.find_receipts(node, &watched).await?;
        let mut landed = Vec::new();
        let mut out = Vec::new();
        for ((tx, attempts), found) in watched.iter().zip(found) {
            let checked = match found {
                Ok(Some((i, receipt))) => {
                    self.landed(tx, &attempts[i], &receipt, latest, node.confirmations())
                        .await
                }
                Ok(None) => {
                    out.push((tx, attempts));
                    continue;
                }
                Err(e) => Err(e),
            };
            match checked {
                Ok(Some(settling)) => landed.push(settling),
                Ok(None) => {}
                Err(e) => tracing::warn!(tx_id = %tx.id, chain = self.chain, error = %e, "cannot check a transfer"),
            }
        }
        let mut settled = paid + self.settle_all(&landed).await;
        for (tx, attempts) in out {
            match self.check(node, tx, attempts).await {
                Ok(true) => settled += 1,
                Ok(false) => {}
                Err(e) => tracing::warn!(tx_id = %tx.id, chain = self.chain, error = %e, "cannot check a transfer"),
            }
        }
        Ok(settled)
    }

    /// The head, and for each transfer the first of its attempts (the latest first, §14: any may land) with a
    /// receipt and its index, asked in one batch; an error is that transfer's alone, unless the node could not be
    /// asked at all.
    async fn find_receipts(
        &self,
        node: &dyn Node,
        watched: &[(StoredTx, Vec<Attempt>)],
    ) -> Result<(u64, Vec<Result<Option<(usize, ReceiptInfo)>, WatchError>>), WatchError> {
        let mut hashes = Vec::new();
        let mut parsed = Vec::with_capacity(watched.len());
        for (_, attempts) in watched {
            let hashes_of: Result<Vec<TxHash>, _> = attempts.iter().map(|a| a.tx_hash.parse::<TxHash>()).collect();
            parsed.push(hashes_of.map(|h| {
                let first = hashes.len();
                hashes.extend(h);
                first
            }));
        }
        // Asked at the head this round saw, as the round before did: a hash without a receipt then has none now
        // (a block that replaced the head's moves the head on), so only the others are asked.
        let head = node.block_number().await?;
        let known: HashSet<TxHash> = self
            .without_receipt
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .take()
            .filter(|(at, _)| *at == head)
            .map(|(_, hashes)| hashes)
            .unwrap_or_default();
        let ask: Vec<TxHash> = hashes.iter().filter(|h| !known.contains(*h)).copied().collect();
        let mut asked = node.receipts(&ask).await?.into_iter();
        let mut unseen = HashSet::new();
        let mut receipts = Vec::with_capacity(hashes.len());
        for hash in &hashes {
            let receipt = match known.contains(hash) {
                true => Ok(None),
                false => asked.next().unwrap_or(Ok(None)),
            };
            if matches!(receipt, Ok(None)) {
                unseen.insert(*hash);
            }
            receipts.push(receipt);
        }
        *self.without_receipt.lock().unwrap_or_else(PoisonError::into_inner) = Some((head, unseen));
        let mut receipts = receipts.into_iter();
        let mut found = Vec::with_capacity(watched.len());
        for ((_, attempts), first) in watched.iter().zip(parsed) {
            let Ok(_) = first else {
                found.push(Err(WatchError::Corrupt("an attempt's hash is malformed".into())));
                continue;
            };
            let mut answer = Ok(None);
            for (i, receipt) in receipts.by_ref().take(attempts.len()).enumerate() {
                if !matches!(answer, Ok(None)) {
                    continue;
                }
                answer = match receipt {
                    Ok(Some(receipt)) => Ok(Some((i, receipt))),
                    Ok(None) => Ok(None),
                    Err(e) => Err(e.into()),
                };
            }
            found.push(answer);
        }
        Ok((head, found))
    }

    /// Settles `landed` in transactions of at most `SETTLED_PER_COMMIT` (`settle_some`). Returns how many were
    /// settled.
    async fn settle_all(&self, landed: &[Settling]) -> usize {
        let mut settled = 0;
        for some in landed.chunks(SETTLED_PER_COMMIT) {
            settled += self.settle_some(some).await;
        }
        settled
    }

    /// Settles `landed` in one transaction; if that fails, one by one, so that one transfer's trouble holds up no
    /// other. Returns how many were settled.
    async fn settle_some(&self, landed: &[Settling]) -> usize {
        if landed.is_empty() {
            return 0;
        }
        let done = match self.state.store.settle_transactions(landed).await {
            Ok(done) => done,
            Err(e) => {
                tracing::warn!(chain = self.chain, error = %e, "settling a round at once failed; settling one by one");
                let mut done = Vec::with_capacity(landed.len());
                for item in landed {
                    let one = self
                        .state
                        .store
                        .settle_transaction(item.id, &item.settlement, item.event.clone(), item.message.as_ref())
                        .await;
                    done.push(one.unwrap_or_else(|e| {
                        tracing::warn!(tx_id = %item.id, chain = self.chain, error = %e, "cannot settle a transfer");
                        None
                    }));
                }
                done
            }
        };
        let mut settled = 0;
        for (item, record) in landed.iter().zip(done) {
            if record.is_some() {
                tracing::info!(tx_id = %item.id, chain = self.chain, status = item.settlement.status.as_str(),
                    "transfer settled");
                settled += 1;
            }
        }
        settled
    }

    /// An open transfer none of whose attempts has a receipt.
    async fn check(&self, node: &dyn Node, tx: &StoredTx, attempts: &[Attempt]) -> Result<bool, WatchError> {
        if tx.status == TxState::Signed {
            let age = (self.now() - tx.updated_at).to_std().unwrap_or_default();
            if tx.updated_at >= self.started_at && age < SENDER_GRACE {
                return Ok(false);
            }
            // Stored but never accepted (a crash or a lost broadcast): send the same bytes again, exactly once on chain.
            return match crate::transfers::rebroadcast(node, tx).await {
                Ok(true) => {
                    tracing::info!(tx_id = %tx.id, chain = self.chain, "re-broadcast a stored transaction");
                    self.state.store.mark_broadcast(tx.id).await?;
                    Ok(false)
                }
                Ok(false) => self.drop_if_unknown(node, tx, attempts).await,
                Err(e) if e.is_transport() => Ok(false),
                Err(e) => {
                    tracing::warn!(tx_id = %tx.id, error = %e, "a stored transaction was refused on re-broadcast");
                    self.drop_if_unknown(node, tx, attempts).await
                }
            };
        }
        let age = (self.now() - tx.updated_at).to_std().unwrap_or_default();
        if age >= self.state.stuck_after {
            // Stuck: the same nonce again with higher fees while the reservation covers them; else (below) the
            // latest attempt is only broadcast again.
            match self.state.transfers.bump(node, tx).await {
                Ok(Bump::Sent(_)) => return Ok(false),
                Ok(Bump::NotCovered | Bump::Nothing) => {}
                Err(e) => tracing::warn!(tx_id = %tx.id, error = %e, "a stuck transfer could not be sent again"),
            }
        } else if age < self.state.drop_after {
            return Ok(false);
        }
        match crate::transfers::rebroadcast(node, tx).await {
            Ok(true) => Ok(false),
            Ok(false) | Err(ChainError::Refused { .. }) => self.drop_if_unknown(node, tx, attempts).await,
            Err(_) => Ok(false),
        }
    }

    /// Attempt `attempt` of `tx` has a receipt: once deep enough (`confirmations` blocks, counting its own), the
    /// transfer settles by it. The cost counted is what the wallet paid: the value only if the transfer itself
    /// succeeded, the fee (with any L1 data fee) always.
    async fn landed(
        &self,
        tx: &StoredTx,
        attempt: &Attempt,
        receipt: &ReceiptInfo,
        latest: u64,
        needed: u64,
    ) -> Result<Option<Settling>, WatchError> {
        let Some(block) = receipt.block_number else {
            return Ok(None);
        };
        let confirmations = latest.saturating_sub(block) + 1;
        if confirmations < needed {
            if tx.status == TxState::Signed {
                self.state.store.mark_broadcast(tx.id).await?;
            }
            return Ok(None);
        }
        let (status, cost) = match (attempt.kind, receipt.success) {
            // The zero-value self-send took the nonce: only its fee is spent.
            (AttemptKind::Cancel, _) => (TxState::Cancelled, receipt.fee_paid()),
            // A token transfer moves no native coin: only its fee counts against the cap.
            (AttemptKind::Send, true) => (TxState::Confirmed, tx.native_value() + receipt.fee_paid()),
            // A reverted transfer moves no value; only its fee is spent.
            (AttemptKind::Send, false) => (TxState::Reverted, receipt.fee_paid()),
        };
        let counts = match status {
            TxState::Confirmed => self.receipt_counts(tx, receipt),
            _ => Vec::new(),
        };
        let settlement = Settlement {
            status,
            landed: (Some(attempt.tx_hash.as_str()) != tx.tx_hash()).then(|| attempt.tx_hash.clone()),
            block_number: Some(block),
            gas_used: Some(receipt.gas_used),
            actual_cost_wei: Some(cost),
            counts,
        };
        self.settling(tx, settlement, confirmations).map(Some)
    }

    /// A mined call's receipt against its simulation (§18): per asset, what it really moved or allowed beyond what
    /// was counted, or short of it. Nothing for a transfer that is not a call.
    fn receipt_counts(&self, tx: &StoredTx, receipt: &ReceiptInfo) -> Vec<crate::store::CountChange> {
        use crate::domain::call::ledger;
        let Some(record) = tx.body.call() else {
            return Vec::new();
        };
        let real = ledger::figures(&crate::domain::call::effect(&receipt.logs, tx.from));
        let chain = crate::domain::chain::find(&tx.chain);
        ledger::receipt_counts(&record.figures, &real)
            .into_iter()
            .map(|c| crate::store::CountChange {
                asset: chain
                    .and_then(|chain| self.state.chains.tokens().find(chain, &c.token.to_checksum(None)))
                    .map_or_else(|| format!("{:#x}", c.token).to_lowercase(), |asset| asset.symbol),
                more: c.more,
                less: c.less,
            })
            .collect()
    }

    /// A transfer the node refused again and none of whose attempts it knows: `dropped` once another transaction used
    /// its nonce; while none has, later nonces of the wallet wait behind it, so its nonce is filled
    /// (`Transfers::fill_gap`) and it stays open until either lands.
    async fn drop_if_unknown(&self, node: &dyn Node, tx: &StoredTx, attempts: &[Attempt]) -> Result<bool, WatchError> {
        // The nonce first: an attempt mined after this read is then found below, never taken for a stranger.
        let mined = node.mined_nonce(tx.from).await?;
        for attempt in attempts {
            if node.transaction(hash(&attempt.tx_hash)?).await?.is_some() {
                return Ok(false);
            }
        }
        if tx.nonce().is_some_and(|nonce| mined <= nonce) {
            self.state.transfers.fill_gap(node, tx).await?;
            return Ok(false);
        }
        let settlement = Settlement {
            status: TxState::Dropped,
            landed: None,
            block_number: None,
            gas_used: None,
            actual_cost_wei: Some(U256::ZERO),
            counts: Vec::new(),
        };
        self.settle(tx, settlement, 0).await
    }

    async fn settle(&self, tx: &StoredTx, s: Settlement, confirmations: u64) -> Result<bool, WatchError> {
        let item = self.settling(tx, s, confirmations)?;
        match self
            .state
            .store
            .settle_transaction(item.id, &item.settlement, item.event, item.message.as_ref())
            .await?
        {
            Some(_) => {
                tracing::info!(tx_id = %tx.id, chain = self.chain, status = item.settlement.status.as_str(),
                    "transfer settled");
                Ok(true)
            }
            None => Ok(false),
        }
    }

    /// The settlement of `tx` with its `tx_confirmation` event and, in its conversation, a message saying it.
    fn settling(&self, tx: &StoredTx, s: Settlement, confirmations: u64) -> Result<Settling, WatchError> {
        let chain =
            registry::find(&tx.chain).ok_or_else(|| WatchError::Corrupt(format!("unknown chain {}", tx.chain)))?;
        // The attempt that landed names the transfer from now on (§14).
        let tx_hash = s.landed.as_deref().or(tx.tx_hash()).unwrap_or_default();
        let explorer_url = chain.tx_url(tx_hash);
        let event = json!({
            "type": "tx_confirmation",
            "conversation_id": tx.conversation_id,
            "agent_id": tx.agent_id,
            "chain": tx.chain,
            "tx_hash": tx_hash,
            "status": s.status.as_str(),
            "block_number": s.block_number,
            "gas_used": s.gas_used,
            "confirmations": confirmations,
            "explorer_url": explorer_url,
            "asset": tx.asset,
            "amount": format_units(tx.value_wei, tx.decimals()),
        });
        let amount = format!("{} {}", format_units(tx.value_wei, tx.decimals()), tx.asset);
        let content = match s.status {
            TxState::Confirmed => format!(
                "Transaction {} sending {amount} to {} on {} is confirmed in block {} (gas used {}).",
                tx_hash,
                tx.to.to_checksum(None),
                tx.chain,
                s.block_number.unwrap_or_default(),
                s.gas_used.unwrap_or_default()
            ),
            TxState::Reverted => format!(
                "Transaction {} sending {amount} on {} reverted in block {}: no value moved, the fee was paid.",
                tx_hash,
                tx.chain,
                s.block_number.unwrap_or_default()
            ),
            TxState::Cancelled => format!(
                "The transfer of {amount} to {} on {} was cancelled: transaction {} (a zero-value send to the agent's \
                 own wallet) took its nonce in block {}; no value moved, only the fee was paid.",
                tx.to.to_checksum(None),
                tx.chain,
                tx_hash,
                s.block_number.unwrap_or_default()
            ),
            _ => format!(
                "Transaction {tx_hash} sending {amount} on {} was dropped by the network; nothing was spent.",
                tx.chain
            ),
        };
        let message = tx.conversation_id.map(|conversation_id| Message {
            id: Uuid::new_v4(),
            conversation_id,
            role: Role::Assistant,
            content,
            chain_calls: json!([]),
            tokens_used: 0,
            created_at: self.now(),
        });
        Ok(Settling {
            id: tx.id,
            agent_id: tx.agent_id,
            settlement: s,
            event,
            message,
        })
    }
}

/// The default pause between watcher rounds.
pub const DEFAULT_INTERVAL: Duration = Duration::from_secs(1);
