//! Agents that earn (§23): agentd as the seller's server and its own facilitator. A buyer's payment (an EIP-3009
//! authorization to the agent's wallet) is checked in §23's order — the cheap checks first and no chain read before
//! the signature verifies (`domain::sale`), then the reads it needs, together (`checks`) — held once by a unique row
//! with the settlement's gas (`store::income`), settled through the one send path (`Transfers::settle_payment`) and
//! waited for until included or `X402_TIMEOUT_MS`. `serve` sells an offer at `/x402/{id}`; `facilitator` answers the
//! agent's own x402 facilitator endpoints with the same checks and settlement.

mod checks;
mod facilitator;
mod serve;

use std::sync::Arc;
use std::time::Duration;

use alloy::primitives::{Address, TxHash, U256};
use uuid::Uuid;

use crate::chain::{Chains, Node};
use crate::config::Config;
use crate::domain::agent::Agent;
use crate::domain::asset::Asset;
use crate::domain::chain::ChainInfo;
use crate::domain::clock::Clock;
use crate::domain::sale::{Payment, Reason, Terms};
use crate::net::egress::Fetcher;
use crate::store::Store;
use crate::store::income::{Hold, Income, IncomeStatus};
use crate::store::offers::Offer;
use crate::transfers::{SettleOrder, TransferError, TransferOutcome, Transfers};
use crate::vault::Vault;

pub use serve::{Sale, SaleRequest};

/// The gas a settlement is priced at before its simulation (`offer_paused`, the hold): `transferWithAuthorization`
/// of a FiatToken uses about 80,000 the first time a payer's nonce is written; the room covers a token's own costs.
pub const SETTLE_GAS: u64 = 120_000;

/// How often holds a crash may have left are looked for.
const RECOVER_EVERY: Duration = Duration::from_secs(10);

/// How often a settlement's receipt is asked for while it is waited for, at the most: the first asks come sooner
/// (`FIRST_POLL`, doubling up to this), so a chain that includes in milliseconds is not waited on for 100 ms.
const RECEIPT_POLL: Duration = Duration::from_millis(100);
const FIRST_POLL: Duration = Duration::from_millis(5);

/// What failed inside the seller (not a refusal of the payment): the node or the store. Logged; the buyer sees a
/// 502 (`node_error`) or a 500.
#[derive(Debug, thiserror::Error)]
pub enum SellError {
    #[error(transparent)]
    Chain(#[from] crate::chain::ChainError),
    #[error(transparent)]
    Store(#[from] crate::store::StoreError),
}

/// A payment as verified: who pays, what, and what its settlement is priced at.
#[derive(Debug, Clone)]
pub struct Verified {
    pub payment: Payment,
    pub payer: Address,
    /// The settlement's gas limit as its simulation found it, with room.
    pub gas_limit: u64,
    /// The settlement priced now (`gas_limit` times the latest base fee plus the priority fee).
    pub gas: U256,
}

/// A refusal, with the payer when the signature verified (it is audited then).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Refused {
    pub reason: Reason,
    pub payer: Option<Address>,
}

impl From<Reason> for Refused {
    fn from(reason: Reason) -> Self {
        Refused { reason, payer: None }
    }
}

/// What became of a settlement.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Settled {
    /// Included and successful (by agentd's transaction, or someone else's that used the authorization first).
    Done { transaction: String },
    /// Sent, not included within `X402_TIMEOUT_MS`: it stays `settling`.
    Pending { transaction: String },
    /// It reverted, or could not be sent (`transaction` empty when nothing was sent).
    Failed { transaction: String },
    /// Refused again right before signing (its window, its simulation, the cap): released, nothing sent.
    Refused(Reason),
}

/// The seller (see the module's doc). Cheap to clone.
#[derive(Clone)]
pub struct Seller {
    store: Arc<dyn Store>,
    chains: Arc<Chains>,
    transfers: Transfers,
    vault: Arc<Vault>,
    /// The guarded fetch of offers' upstreams (`OFFER_ALLOW_PRIVATE` decides private addresses).
    fetcher: Fetcher,
    timeout: Duration,
    clock: Arc<dyn Clock>,
    /// Payments per payer and minute on the public endpoint (§15), counted once a payer's signature verified (a
    /// forged `from` counts against nobody).
    per_payer: Arc<crate::rate_limit::KeyedLimiter<Address>>,
}

impl Seller {
    pub fn new(
        store: Arc<dyn Store>,
        chains: Arc<Chains>,
        transfers: Transfers,
        vault: Arc<Vault>,
        config: &Config,
        clock: Arc<dyn Clock>,
    ) -> Seller {
        let mut x402 = config.x402.clone();
        x402.allow_private = x402.offer_allow_private;
        Seller {
            store,
            chains,
            transfers,
            vault,
            fetcher: Fetcher::new(x402.clone()),
            timeout: x402.timeout,
            clock,
            per_payer: Arc::new(crate::rate_limit::KeyedLimiter::per_minute(
                config.security.reissue_limit_per_ip,
            )),
        }
    }

    fn now_unix(&self) -> u64 {
        u64::try_from(self.clock.now().timestamp()).unwrap_or(0)
    }

    /// The terms of an offer: its token, price and the agent's wallet on its chain.
    fn offer_terms(&self, offer: &Offer, agent: &Agent) -> Option<(Terms, &'static ChainInfo, Asset)> {
        let chain = crate::domain::chain::find(&offer.chain)?;
        let pay_to = *agent.wallet_addresses.get(chain.name)?;
        let terms = Terms {
            chain_id: chain.chain_id,
            token: offer.token,
            amount: offer.price,
            pay_to,
            max_timeout_seconds: offer.max_timeout_seconds,
            name: offer.token_name.clone(),
            version: offer.token_version.clone(),
            upfront: offer.settle == crate::store::offers::SettleWhen::BeforeServing,
        };
        let asset = Asset {
            chain,
            symbol: offer.asset.clone(),
            decimals: offer.decimals,
            token: Some(offer.token),
            eip712: Some((offer.token_name.clone(), offer.token_version.clone())),
        };
        Some((terms, chain, asset))
    }

    /// Takes the payment: its hold, with the settlement's gas judged against the offer's `gas_per_day`.
    async fn hold(
        &self,
        agent: &Agent,
        offer: Option<&Offer>,
        (chain, asset): (&'static ChainInfo, &Asset),
        verified: &Verified,
    ) -> Result<Income, Refused> {
        let auth = &verified.payment.authorization;
        let hold = Hold {
            id: Uuid::new_v4(),
            agent_id: agent.id,
            offer_id: offer.map(|o| o.id),
            chain: chain.name.to_string(),
            asset: asset.symbol.clone(),
            token: asset.token.unwrap_or_default(),
            decimals: asset.decimals,
            amount: auth.value,
            payer: auth.from,
            nonce: auth.nonce,
            valid_before: auth.valid_before,
            signature_key: verified.payment.signature_key(),
            gas: verified.gas,
            transfer_id: Uuid::new_v4(),
        };
        let refused = |reason| Refused {
            reason,
            payer: Some(auth.from),
        };
        match self.store.take_hold(&hold, offer.map(|o| o.gas_per_day)).await {
            Ok(crate::store::income::Held::Taken) => {}
            Ok(crate::store::income::Held::NonceHeld) => return Err(refused(Reason::NonceAlreadyUsed)),
            Ok(crate::store::income::Held::GasExhausted) => return Err(refused(Reason::OfferPaused)),
            Err(e) => {
                tracing::error!(error = %e, "a payment's hold could not be written");
                return Err(refused(Reason::NonceAlreadyUsed));
            }
        }
        Ok(hold.taken(self.clock.now()))
    }

    /// Settles a held payment (see `Settled`): the window and the simulation (an `eth_call` with the gas limit it
    /// will be signed with) again, the transaction named on the hold, sent through the one send path, waited for.
    async fn settle(
        &self,
        agent: &Agent,
        (chain, terms): (&'static ChainInfo, &Terms),
        income: &Income,
        verified: &Verified,
    ) -> Result<Settled, SellError> {
        let payment = &verified.payment;
        if let Err(reason) = crate::domain::sale::check_window(&payment.authorization, terms, self.now_unix()) {
            self.store.end_hold(income.id, IncomeStatus::Released).await?;
            return Ok(Settled::Refused(reason));
        }
        // The settlement's own quote simulates it as it will be signed (an `eth_call` with its gas limit, beside the
        // fees and the balance; a sponsored one in its operation's estimate): a revert comes back as a refusal.
        let (calldata, gas_limit) = (crate::domain::sale::settle_calldata(payment), verified.gas_limit);
        // Named with the hold (`Hold::transfer_id`).
        let Some(transfer_id) = income.transfer_id else {
            self.store.end_hold(income.id, IncomeStatus::Released).await?;
            return Ok(Settled::Refused(Reason::NonceAlreadyUsed));
        };
        let sent = self
            .transfers
            .settle_payment(SettleOrder {
                id: transfer_id,
                agent,
                chain,
                token: terms.token,
                calldata,
                gas_limit,
            })
            .await;
        let tx = match sent {
            Ok(TransferOutcome::Sent { tx, .. }) => tx,
            Ok(TransferOutcome::AwaitingApproval { .. }) => {
                // A settlement is never held for approval (`Clearance::Decided`); were it, nothing was sent.
                self.store.end_hold(income.id, IncomeStatus::Released).await?;
                return Ok(Settled::Refused(Reason::OfferPaused));
            }
            Err(e) => {
                // Refused or failed before anything was recorded — unless it was recorded (then the watcher sends
                // and settles it, and the payment with it).
                if let Some(tx) = self.store.get_transaction(agent.id, transfer_id).await? {
                    tracing::warn!(error = %e, "a settlement failed after it was recorded; the watcher carries it");
                    return self.wait_for(agent, income, terms, &tx).await;
                }
                let reverted = match &e {
                    TransferError::CallReverted(_) => true,
                    TransferError::Chain(chain) => chain.refusal().is_some(),
                    _ => false,
                };
                // Used by someone else meanwhile: then it is settled, not refused.
                if reverted && let Some(done) = self.settled_elsewhere(agent, income, terms).await? {
                    return Ok(done);
                }
                self.store.end_hold(income.id, IncomeStatus::Released).await?;
                return Ok(match e {
                    _ if reverted => Settled::Refused(Reason::SimulationFailed),
                    TransferError::CapExceeded { .. } | TransferError::InsufficientFunds { .. } => {
                        Settled::Refused(Reason::OfferPaused)
                    }
                    TransferError::Chain(chain) => return Err(chain.into()),
                    other => {
                        tracing::warn!(error = %other, "a settlement was refused by the money path");
                        Settled::Failed {
                            transaction: String::new(),
                        }
                    }
                });
            }
        };
        self.wait_for(agent, income, terms, &tx).await
    }

    /// Waits for the settlement `tx` until it is included or `X402_TIMEOUT_MS` passed: a transaction of the
    /// agent's wallet by its receipt; a sponsored user operation by its record, which the bundler settles once its
    /// `UserOperationEvent` is mined (its `tx_hash` then the bundle's).
    pub(crate) async fn wait_for(
        &self,
        agent: &Agent,
        income: &Income,
        terms: &Terms,
        tx: &crate::domain::transaction::StoredTx,
    ) -> Result<Settled, SellError> {
        use crate::domain::transaction::{Payer, TxState};
        let sponsored = tx.body.transaction().is_some_and(|t| t.gas == Payer::Sponsor);
        if !sponsored {
            let client = self.chains.get(&income.chain)?;
            return match tx.tx_hash().and_then(|h| h.parse::<TxHash>().ok()) {
                Some(hash) => self.wait(agent, client, income, terms, hash).await,
                None => Ok(Settled::Pending {
                    transaction: String::new(),
                }),
            };
        }
        let deadline = tokio::time::Instant::now() + self.timeout;
        loop {
            let now = self.store.get_transaction(agent.id, tx.id).await?;
            let transaction = now.as_ref().and_then(|t| t.tx_hash()).unwrap_or_default().to_string();
            match now.map(|t| t.status) {
                Some(TxState::Confirmed) => return Ok(Settled::Done { transaction }),
                Some(TxState::Reverted | TxState::Dropped | TxState::Cancelled | TxState::Expired) => {
                    if let Some(done) = self.settled_elsewhere(agent, income, terms).await? {
                        return Ok(done);
                    }
                    self.store.end_hold(income.id, IncomeStatus::Failed).await?;
                    return Ok(Settled::Failed { transaction });
                }
                Some(TxState::Signed | TxState::Pending) | None => {}
            }
            if tokio::time::Instant::now() + RECEIPT_POLL > deadline {
                return Ok(Settled::Pending { transaction });
            }
            tokio::time::sleep(RECEIPT_POLL).await;
        }
    }

    /// Waits for the settlement `hash` until it is included or `X402_TIMEOUT_MS` passed.
    async fn wait(
        &self,
        agent: &Agent,
        client: &crate::chain::ChainClient,
        income: &Income,
        terms: &Terms,
        hash: TxHash,
    ) -> Result<Settled, SellError> {
        let deadline = tokio::time::Instant::now() + self.timeout;
        let transaction = hash.to_string();
        let mut pause = FIRST_POLL;
        loop {
            if let Some(receipt) = client.receipt(hash).await? {
                if receipt.success {
                    return Ok(Settled::Done { transaction });
                }
                // Reverted: someone else's transaction may have used the authorization first.
                if let Some(done) = self.settled_elsewhere(agent, income, terms).await? {
                    return Ok(done);
                }
                self.store.end_hold(income.id, IncomeStatus::Failed).await?;
                return Ok(Settled::Failed { transaction });
            }
            if tokio::time::Instant::now() + pause > deadline {
                return Ok(Settled::Pending { transaction });
            }
            tokio::time::sleep(pause).await;
            pause = (pause * 2).min(RECEIPT_POLL);
        }
    }

    /// A payment whose authorization the chain shows used by a transaction that was not agentd's, paying the agent:
    /// `settled`, `settled_by: "external"`.
    async fn settled_elsewhere(
        &self,
        _agent: &Agent,
        income: &Income,
        terms: &Terms,
    ) -> Result<Option<Settled>, SellError> {
        let client = self.chains.get(&income.chain)?;
        let Some(hash) = paid_elsewhere(client, income, terms.pay_to).await? else {
            return Ok(None);
        };
        let tx_hash = Some(hash.to_string());
        let audit = received_audit(income, tx_hash.clone());
        self.store
            .settled_externally(income.id, tx_hash.clone(), &audit)
            .await?;
        Ok(Some(Settled::Done {
            transaction: hash.to_string(),
        }))
    }

    /// Audits a refusal of a payment whose signature verified (never the signature).
    async fn audit_refusal(&self, agent: &Agent, offer_id: Option<Uuid>, refused: Refused) {
        let Some(payer) = refused.payer else { return };
        let event = crate::store::AuditEvent::new(
            agent.id,
            crate::domain::audit::Actor::System,
            crate::domain::audit::detail::Detail::X402SaleRefused(crate::domain::audit::detail::X402SaleRefused {
                offer_id,
                reason: refused.reason.code().to_string(),
                payer: payer.to_checksum(None),
            }),
        );
        if let Err(e) = self.store.insert_audit(&event).await {
            tracing::error!(error = %e, "a refused payment's audit entry could not be written");
        }
    }

    /// Runs `recover` at start and then every `RECOVER_EVERY` until the shutdown signal.
    pub async fn recover_until_stopped(self, mut stop: tokio::sync::watch::Receiver<bool>) {
        loop {
            if let Err(e) = self.recover().await {
                tracing::warn!(error = %e, "recovering payment holds failed; trying again later");
            }
            tokio::select! {
                _ = tokio::time::sleep(RECOVER_EVERY) => {}
                _ = stop.changed() => return,
            }
        }
    }

    /// Recovers what a crash left: holds whose settlement was never reserved are let go, or settled when the chain
    /// shows their authorization used. Holds never taken are purged after their `validBefore`.
    pub async fn recover(&self) -> Result<(), SellError> {
        // Older than a whole exchange (the upstream's fetch and the settlement's wait, each bounded by the timeout)
        // and a margin: no live instance is still working on it.
        let exchange = 2 * self.timeout.as_millis() as i64 + 10_000;
        let before = self.clock.now() - chrono::Duration::milliseconds(exchange);
        for income in self.store.stale_holds(before).await? {
            let Ok(client) = self.chains.get(&income.chain) else {
                continue;
            };
            let pay_to = match self.store.get_agent(income.agent_id).await {
                Ok(agent) => agent.wallet_addresses.get(income.chain.as_str()).copied(),
                Err(crate::store::StoreError::AgentNotFound) => None,
                Err(e) => return Err(e.into()),
            };
            let paid = match pay_to {
                Some(pay_to) => paid_elsewhere(client, &income, pay_to).await?,
                None => None,
            };
            if let Some(hash) = paid {
                let tx_hash = Some(hash.to_string());
                let audit = received_audit(&income, tx_hash.clone());
                self.store.settled_externally(income.id, tx_hash, &audit).await?;
            } else {
                self.store.end_hold(income.id, IncomeStatus::Released).await?;
            }
        }
        self.store.purge_holds(self.now_unix()).await?;
        Ok(())
    }
}

/// The transaction that used `income`'s authorization to pay `pay_to`, when the chain shows one: the token's
/// `AuthorizationUsed` of (payer, nonce) — not `AuthorizationCanceled` — in a successful transaction whose receipt
/// holds the token's `Transfer` of the amount from the payer to `pay_to`. `authorizationState` alone is not enough:
/// the payer can cancel its nonce, or spend it on another authorization to someone else.
async fn paid_elsewhere(
    client: &crate::chain::ChainClient,
    income: &Income,
    pay_to: Address,
) -> Result<Option<TxHash>, SellError> {
    if !client
        .authorization_state(income.token, income.payer, income.nonce)
        .await?
    {
        return Ok(None);
    }
    let latest = client.block_number().await?;
    let log = client
        .authorization_log(income.token, income.payer, income.nonce, latest)
        .await?;
    let Some(hash) = log.filter(|l| l.used).and_then(|l| l.tx_hash) else {
        return Ok(None);
    };
    let Some(receipt) = client.receipt(hash).await? else {
        return Ok(None);
    };
    let transfer = alloy::primitives::keccak256("Transfer(address,address,uint256)");
    let paid = receipt.success
        && receipt.logs.iter().any(|log| {
            log.address == income.token
                && log.topics.len() == 3
                && log.topics[0] == transfer
                && log.topics[1] == income.payer.into_word()
                && log.topics[2] == pay_to.into_word()
                && log.data.len() == 32
                && U256::from_be_slice(&log.data) == income.amount
        });
    Ok(paid.then_some(hash))
}

fn received_audit(income: &Income, tx_hash: Option<String>) -> crate::store::AuditEvent {
    crate::store::AuditEvent::new(
        income.agent_id,
        crate::domain::audit::Actor::System,
        crate::domain::audit::detail::Detail::X402PaymentReceived(crate::domain::audit::detail::X402PaymentReceived {
            offer_id: income.offer_id,
            chain: income.chain.clone(),
            asset: income.asset.clone(),
            payer: income.payer.to_checksum(None),
            amount: crate::domain::amount::format_units(income.amount, income.decimals),
            nonce: income.nonce.to_string(),
            tx_hash,
        }),
    )
}
