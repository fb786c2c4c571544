//! Paying for HTTP resources (x402, §16) under the same guardrails as a transfer: the host rule before any request,
//! then the first request; for a 402, the entry chosen and its price checked (`crate::x402`), then the policy, the
//! cap, the reservation and the token balance less other unused authorizations decided on the one send path every
//! transfer goes through (`send`), and only inside its reservation the EIP-3009 authorization signed.
//! Then the paid retry. A payment that needs approval is stored waiting with the exchange to make; approving it
//! fetches the resource again, checks its price against what was approved, and pays through the same step: the
//! first try and the approval share `exchange_and_reserve`.

use std::collections::BTreeMap;

use serde_json::{Value, json};
use uuid::Uuid;
use zeroize::Zeroizing;

use super::kinds::{Outflow, PaymentDraft, Purpose};
use super::{Transacting, TransferError, TransferOutcome, Transfers, store_error};
use crate::domain::agent::Agent;
use crate::domain::amount::format_units;
use crate::domain::audit::detail::{self, X402Choice, X402Fetch, X402Result};
use crate::domain::audit::{Actor, Detail, OwedEntry};
use crate::domain::chain as registry;
use crate::domain::policy::PolicyRule;
use crate::domain::transaction::{SealedRequest, StoredTx, X402Record};
use crate::net::egress::{FetchError, FetchRequest, Fetched};
use crate::store::AuditEvent;
use crate::store::{Approval, Clearance, Mandate, StoreError};
use crate::x402::wire::{self, PaymentRequired};
use crate::x402::{Authorization, Choice, KnownToken, X402Error};

/// A paid (or free) fetch an agent was asked to make.
pub struct PayOrder<'a> {
    /// The agent, checked for the `transact` capability, with who asked and the mandate the request came with.
    pub by: Transacting<'a>,
    pub url: &'a str,
    /// Decimal string in whole units of the chosen token.
    pub max_amount: &'a str,
    pub method: Option<&'a str>,
    pub headers: &'a BTreeMap<String, String>,
    pub body: Option<String>,
    /// A registry token's symbol or address the payment must be in.
    pub asset: Option<&'a str>,
    pub conversation_id: Option<Uuid>,
}

/// What a fetch gave: the resource's answer and the payment made for it, if one was asked.
#[derive(Debug)]
pub struct Paid {
    pub answer: Fetched,
    pub payment: Option<Payment>,
}

/// A payment made, or waiting for an owner's approval (then `answer` is the resource's 402 and nothing is signed).
#[derive(Debug)]
pub enum Payment {
    Signed(Box<StoredTx>),
    AwaitingApproval(Box<Approval>),
}

/// Why a fetch was refused or failed.
#[derive(Debug, thiserror::Error)]
pub enum PayError {
    /// Before anything was paid: the URL, the caller's headers, an unreachable resource.
    #[error(transparent)]
    Fetch(#[from] FetchError),
    /// The 402 offers nothing payable, or its price is above `max_amount`.
    #[error(transparent)]
    Refused(#[from] X402Error),
    /// The policy, the cap, the balance, the approval state.
    #[error(transparent)]
    Transfer(#[from] TransferError),
    /// The paid retry was answered 402 again: 502 `x402_payment_failed`.
    #[error("the resource refused the payment: {reason}")]
    PaymentFailed { reason: String, transfer_id: Uuid },
    /// The paid retry got no answer in time: 504 `upstream_timeout`.
    #[error("the resource did not answer the paid request in time")]
    Timeout { transfer_id: Uuid },
    /// The paid retry got no answer at all: 502 `upstream_unavailable`.
    #[error("the resource could not be reached with the payment")]
    Unavailable { transfer_id: Uuid },
}

impl PayError {
    pub fn code(&self) -> &'static str {
        match self {
            Self::Fetch(FetchError::UrlNotAllowed(_)) => "url_not_allowed",
            Self::Fetch(FetchError::Invalid { .. }) => "validation_failed",
            Self::Fetch(FetchError::Timeout) | Self::Timeout { .. } => "upstream_timeout",
            Self::Fetch(_) | Self::Unavailable { .. } => "upstream_unavailable",
            Self::Refused(X402Error::Unsupported { .. }) => "x402_unsupported",
            Self::Refused(X402Error::PriceAboveMax { .. }) => "price_above_max",
            Self::Refused(X402Error::InvalidMaxAmount(_)) => "validation_failed",
            Self::Transfer(e) => e.code(),
            Self::PaymentFailed { .. } => "x402_payment_failed",
        }
    }
}

/// The request a waiting payment makes once approved (kept with the approval, never shown).
#[derive(serde::Serialize, serde::Deserialize)]
struct Exchange {
    method: Option<String>,
    url: String,
    headers: BTreeMap<String, String>,
    body: Option<String>,
    asset: Option<String>,
}

/// Who a payment is and what decides it: its id, conversation, what clears it besides the cap (the policy on a
/// first try, the approval after one), and for a first try the exchange to make again if it must wait.
struct Ticket {
    id: Uuid,
    conversation_id: Option<Uuid>,
    /// The agent token and idempotency claim that asked (a first try), checked again as the payment is reserved.
    mandate: Mandate,
    clearance: Clearance,
    pending: Option<SealedRequest>,
    /// A first try's `x402_payment_accepted`, by whom and of what fetch (the entry chosen and the id are added as
    /// it is reserved): kept with the reservation (`OwedEntry::X402Payment`), so a process that dies while the paid
    /// request is out, with the authorization perhaps settled, leaves it for the watcher. None for an approval's.
    accepted: Option<(Actor, X402Fetch)>,
}

/// The first request of an exchange and what became of its price.
enum Exchanged {
    /// The resource asked for no payment: its answer.
    Free(Fetched),
    /// A 402 whose chosen entry was reserved: paid (signed) or waiting for approval.
    Reserved {
        first: Fetched,
        required: Box<PaymentRequired>,
        payment: Payment,
    },
}

/// A paid request that was made: what its one closing transaction records (`TransferStore::record_paid`).
struct Sent {
    id: Uuid,
    /// The paid answer and the settlement transaction it named, as `send_paid` put them on the payment.
    response: Option<Value>,
    settlement_tx: Option<String>,
    /// A first try's `x402_payment_accepted`, written before the outcome's in place of the one kept with its
    /// reservation, or left out if the watcher wrote that one already.
    accepted: Option<AuditEvent>,
}

impl Sent {
    fn of(tx: &StoredTx, accepted: Option<AuditEvent>) -> Sent {
        let (response, settlement_tx) = tx
            .body
            .x402()
            .map_or((None, None), |r| (r.response.clone(), r.settlement_tx.clone()));
        Sent {
            id: tx.id,
            response,
            settlement_tx,
            accepted,
        }
    }
}

/// The URL as the audit log and the transfer keep it: without its query (which may hold the caller's keys) and
/// fragment, and without credentials (refused anyway).
pub fn url_without_query(url: &reqwest::Url) -> String {
    let mut shown = url.clone();
    shown.set_query(None);
    shown.set_fragment(None);
    shown.to_string()
}

impl Transfers {
    /// Fetches `order.url`, paying a 402 under the agent's guardrails. Every outcome is audited.
    #[tracing::instrument(skip_all, fields(agent_id = %order.by.agent.id))]
    pub async fn pay(&self, order: PayOrder<'_>) -> Result<Paid, PayError> {
        let request = FetchRequest::new(order.method, order.url, order.headers, order.body.clone())?;
        let url = self.fetcher.check_url(order.url)?;
        let mut fetch = X402Fetch {
            host: url.host_str().map(str::to_owned),
            path: url.path().into(),
            max_amount: Some(order.max_amount.into()),
            chosen: None,
            transfer_id: None,
        };
        let mut sent = None;
        let result = self.try_pay(&order, &request, &url, &mut fetch, &mut sent).await;
        let detail = match &result {
            Ok(Paid { payment: None, answer }) => Detail::X402FetchFree(detail::X402FetchFree {
                fetch,
                status: answer.status,
            }),
            Ok(Paid {
                payment: Some(Payment::AwaitingApproval(_)),
                ..
            }) => Detail::X402PaymentAccepted(detail::X402PaymentAccepted {
                fetch,
                status: "awaiting_approval".into(),
            }),
            Ok(Paid {
                payment: Some(Payment::Signed(_)),
                answer,
            }) => Detail::X402PaymentOutcome(detail::X402PaymentOutcome {
                fetch,
                result: X402Result::Answered {
                    status: "pending".into(),
                    response_status: answer.status,
                },
            }),
            Err(e @ (PayError::PaymentFailed { .. } | PayError::Timeout { .. } | PayError::Unavailable { .. })) => {
                Detail::X402PaymentOutcome(detail::X402PaymentOutcome {
                    fetch,
                    result: X402Result::Failed { code: e.code().into() },
                })
            }
            Err(e) => Detail::X402PaymentRefused(detail::X402PaymentRefused {
                fetch,
                refused: detail::Refused {
                    code: e.code().into(),
                    rule: match e {
                        PayError::Transfer(e) => e.policy_rule().map(|rule| rule.as_str().into()),
                        _ => None,
                    },
                    limit: match e {
                        PayError::Transfer(e) => e.over_limit().map(str::to_owned),
                        _ => None,
                    },
                    denial: None,
                },
            }),
        };
        let outcome = AuditEvent::new(order.by.agent.id, order.by.actor, detail);
        match sent {
            Some(sent) => self.record_paid(sent, outcome).await,
            None => self.audit_event(&outcome).await,
        }
        result
    }

    /// Closes a paid request in one transaction: the payment marked sent, its answer and settlement kept, its audit
    /// entries appended (the accepted one in place of the kept one, once).
    async fn record_paid(&self, sent: Sent, outcome: AuditEvent) {
        let stored = self
            .store
            .record_paid(
                sent.id,
                sent.response.clone(),
                sent.settlement_tx.clone(),
                sent.accepted.as_ref(),
                &outcome,
            )
            .await;
        if let Err(e) = stored {
            tracing::error!(tx_id = %sent.id, error = %e, "an x402 payment's answer and audit entries could not be stored");
        }
    }

    async fn try_pay(
        &self,
        order: &PayOrder<'_>,
        request: &FetchRequest,
        url: &reqwest::Url,
        audit: &mut X402Fetch,
        sent: &mut Option<Sent>,
    ) -> Result<Paid, PayError> {
        // The host rule comes before any request, paid or not.
        let policy = self.store.get_policy(order.by.agent.id).await.map_err(store_error)?;
        let host = url.host_str().unwrap_or_default();
        if !policy.allows_host(host, url.port_or_known_default().unwrap_or(0)) {
            return Err(TransferError::PolicyDenied(PolicyRule::HostNotAllowed).into());
        }
        let exchange = Exchange {
            method: order.method.map(str::to_owned),
            url: order.url.to_owned(),
            headers: order.headers.clone(),
            body: order.body.clone(),
            asset: order.asset.map(str::to_owned),
        };
        let id = Uuid::new_v4();
        // Kept (encrypted) only if the payment must wait for an owner.
        let plain = serde_json::to_vec(&exchange).map_err(|e| store_error(StoreError::Corrupt(e.to_string())))?;
        let plain = Zeroizing::new(plain);
        let ticket = Ticket {
            id,
            conversation_id: order.conversation_id,
            mandate: order.by.mandate.clone(),
            clearance: Clearance::Policy,
            pending: Some(self.vault.seal_request(id, &plain)),
            accepted: Some((order.by.actor, audit.clone())),
        };
        let accept = |choice: &Choice| {
            audit.chosen = Some(chosen(choice));
            crate::x402::check_price(choice, order.max_amount)?;
            audit.transfer_id = Some(ticket.id);
            Ok(())
        };
        let deadline = self.fetcher.deadline();
        let (first, required, payment) = match self
            .exchange_and_reserve(order.by.agent, &ticket, request, url, order.asset, deadline, accept)
            .await?
        {
            Exchanged::Free(answer) => return Ok(Paid { answer, payment: None }),
            Exchanged::Reserved {
                first,
                required,
                payment,
            } => (first, required, payment),
        };
        let tx = match payment {
            Payment::Signed(tx) => tx,
            waiting @ Payment::AwaitingApproval(_) => {
                return Ok(Paid {
                    answer: first,
                    payment: Some(waiting),
                });
            }
        };
        let accepted = detail::X402PaymentAccepted {
            fetch: audit.clone(),
            status: "pending".into(),
        };
        let accepted = AuditEvent::new(order.by.agent.id, order.by.actor, Detail::X402PaymentAccepted(accepted));
        let (tx, answer) = self.send_paid(request, &required, *tx, deadline).await;
        *sent = Some(Sent::of(&tx, Some(accepted)));
        let answer = paid_answer(answer, tx.id)?;
        Ok(Paid {
            answer,
            payment: Some(Payment::Signed(Box::new(tx))),
        })
    }

    /// What the first try and an approval share: the request made, and for a 402 the price list read, an entry
    /// chosen, checked by `accept` (the caller's price rule), and the payment reserved on the send path (signed, or
    /// stored waiting). A resource that no longer asks for payment answers `Free`.
    #[allow(clippy::too_many_arguments)]
    async fn exchange_and_reserve(
        &self,
        agent: &Agent,
        ticket: &Ticket,
        request: &FetchRequest,
        url: &reqwest::Url,
        asset: Option<&str>,
        deadline: tokio::time::Instant,
        accept: impl FnOnce(&Choice) -> Result<(), X402Error>,
    ) -> Result<Exchanged, PayError> {
        let first = self.fetcher.send(request, deadline).await?;
        if first.status != 402 {
            return Ok(Exchanged::Free(first));
        }
        let required =
            wire::payment_required(first.header(wire::PAYMENT_REQUIRED), &first.body).map_err(X402Error::from)?;
        let choice = crate::x402::choose(&required, &self.known_tokens(agent), asset)?;
        accept(&choice)?;
        let payment = self.reserve_payment(agent, ticket, url, &required, &choice).await?;
        Ok(Exchanged::Reserved {
            first,
            required: Box::new(required),
            payment,
        })
    }

    /// The agent's payable tokens: the registry tokens of its chains.
    fn known_tokens(&self, agent: &Agent) -> Vec<KnownToken> {
        let assets = self.chains.tokens();
        agent
            .chains
            .iter()
            .filter_map(|name| registry::find(name))
            .filter(|chain| agent.wallet_addresses.contains_key(chain.name))
            .flat_map(|chain| {
                assets.tokens(chain).filter_map(move |asset| {
                    Some(KnownToken {
                        chain: chain.name.to_string(),
                        chain_id: chain.chain_id,
                        symbol: asset.symbol.clone(),
                        address: asset.token?,
                        decimals: asset.decimals,
                        eip712: asset.eip712.clone(),
                    })
                })
            })
            .collect()
    }

    /// A payment on the send path of every transfer: policy, cap, amount, token balance less other unused
    /// authorizations decided in its reservation; the authorization is signed once the reservation allows it
    /// and stored by it (see `send::reserve`), or the payment stored waiting unsigned.
    async fn reserve_payment(
        &self,
        agent: &Agent,
        ticket: &Ticket,
        url: &reqwest::Url,
        required: &PaymentRequired,
        choice: &Choice,
    ) -> Result<Payment, TransferError> {
        let chain = registry::find(&choice.token.chain).ok_or(TransferError::NoWallet)?;
        let from = super::recipient(agent, chain, choice.pay_to)?.from();
        let asset = self
            .chains
            .tokens()
            .find(chain, &choice.token.symbol)
            .ok_or(TransferError::NoWallet)?;
        let authorization = Authorization::new(
            from,
            choice,
            u64::try_from(self.clock.now().timestamp()).unwrap_or_default(),
        );
        let record = X402Record {
            url: url_without_query(url),
            network: choice.entry.network.clone().unwrap_or_default(),
            nonce: authorization.nonce.to_string(),
            valid_before: authorization.valid_before,
            settlement_tx: None,
            response: None,
            pending_request: ticket.pending.clone(),
            host: url
                .host_str()
                .map(|h| (h.to_string(), url.port_or_known_default().unwrap_or(0))),
        };
        let draft = PaymentDraft {
            required,
            choice,
            authorization,
            record,
            token: asset,
        };
        let outcome = self
            .send_outflow(Outflow {
                id: ticket.id,
                agent_id: agent.id,
                chain,
                conversation_id: ticket.conversation_id,
                from,
                to: choice.pay_to,
                value: choice.amount,
                purpose: Purpose::Payment(Box::new(draft)),
                gas: crate::domain::transaction::Payer::Wallet,
                clearance: ticket.clearance,
                mandate: ticket.mandate.clone(),
                owed: ticket.accepted.clone().map(|(actor, fetch)| OwedEntry::X402Payment {
                    actor,
                    fetch: X402Fetch {
                        chosen: Some(chosen(choice)),
                        transfer_id: Some(ticket.id),
                        ..fetch
                    },
                }),
            })
            .await?;
        Ok(match outcome {
            TransferOutcome::Sent { tx, .. } => Payment::Signed(Box::new(tx)),
            TransferOutcome::AwaitingApproval { approval, .. } => Payment::AwaitingApproval(Box::new(approval)),
        })
    }

    /// Sends the paid retry and puts its answer (and the settlement it names) on the payment, which stays `pending`
    /// until the watcher sees the authorization used or expired; the caller records it (`record_paid`).
    async fn send_paid(
        &self,
        request: &FetchRequest,
        required: &PaymentRequired,
        mut tx: StoredTx,
        deadline: tokio::time::Instant,
    ) -> (StoredTx, Result<Fetched, FetchError>) {
        let header = String::from_utf8_lossy(&tx.raw_tx).into_owned();
        let answer = match request.with_payment(wire::payment_header_name(required.protocol), &header) {
            Ok(paid) => self.fetcher.send(&paid, deadline).await,
            Err(e) => Err(e),
        };
        tx.status = crate::domain::transaction::TxState::Pending;
        if let (Ok(answer), Some(record)) = (&answer, tx.body.x402_mut()) {
            let settled = wire::settle_response(answer.header(wire::settle_header_name(required.protocol)));
            record.settlement_tx = settled
                .map(|s| s.transaction)
                .filter(|t| t.len() == 66 && t.starts_with("0x"));
            record.response = Some(json!({"status": answer.status, "headers": answer.headers,
                "body": answer.text()}));
        }
        (tx, answer)
    }

    /// Pays a waiting x402 payment an owner approved: the resource is asked again, its price must be the one
    /// approved (or lower, to the same payee in the same token), the balance is checked again in the reservation,
    /// a fresh authorization is signed, and the paid request is made by the service. Its answer is kept with the
    /// transfer (`x402.response`); a failed paid request leaves the payment pending as for the agent's own fetch.
    pub(super) async fn approve_payment(
        &self,
        agent: &Agent,
        approval: &Approval,
        by: Actor,
    ) -> Result<StoredTx, TransferError> {
        let unpayable = |reason: &str| unpayable(approval, reason);
        let (exchange, request, url) = self.kept_request(approval)?;
        let ticket = Ticket {
            id: approval.id,
            conversation_id: approval.conversation_id,
            mandate: Mandate::NONE,
            clearance: Clearance::Approval { by },
            pending: None,
            accepted: None,
        };
        // The price must be the one approved (or lower), to the same payee in the same token.
        let accept = |choice: &Choice| {
            let same = choice.token.chain == approval.chain
                && approval.token.is_some_and(|t| t.address == choice.token.address)
                && choice.pay_to == approval.to
                && choice.amount <= approval.value_wei;
            match same {
                true => Ok(()),
                false => Err(X402Error::PriceAboveMax {
                    price: choice.price(),
                    max: approval.amount(),
                    symbol: choice.token.symbol.clone(),
                }),
            }
        };
        let deadline = self.fetcher.deadline();
        let exchanged = self
            .exchange_and_reserve(
                agent,
                &ticket,
                &request,
                &url,
                exchange.asset.as_deref(),
                deadline,
                accept,
            )
            .await;
        let (required, tx) = match exchanged {
            Ok(Exchanged::Reserved {
                required,
                payment: Payment::Signed(tx),
                ..
            }) => (required, tx),
            Ok(Exchanged::Reserved { .. }) => return Err(unpayable("held again")),
            Ok(Exchanged::Free(_)) => return Err(unpayable("no longer asks for payment")),
            Err(PayError::Transfer(e)) => return Err(e),
            Err(PayError::Fetch(_)) => return Err(unpayable("unreachable")),
            Err(PayError::Refused(X402Error::PriceAboveMax { .. })) => {
                return Err(unpayable("the price or payee changed"));
            }
            Err(_) => return Err(unpayable("nothing payable")),
        };
        let (tx, answer) = self.send_paid(&request, &required, *tx, deadline).await;
        let outcome = paid_outcome(agent, &url, &tx, &answer);
        self.record_paid(Sent::of(&tx, None), outcome).await;
        Ok(tx)
    }

    /// The request kept with a held x402 payment, opened and read again as the agent's fetch would be: the exchange,
    /// its request and its checked URL.
    fn kept_request(&self, approval: &Approval) -> Result<(Exchange, FetchRequest, reqwest::Url), TransferError> {
        let unpayable = |reason: &str| unpayable(approval, reason);
        let sealed = approval.body.x402().and_then(|x| x.pending_request.as_ref());
        let plain = sealed
            .map(|sealed| self.vault.open_request(approval.id, sealed))
            .ok_or_else(|| unpayable("no request kept"))?
            .map_err(|_| unpayable("the kept request does not open"))?;
        let exchange: Exchange = serde_json::from_slice(&plain).map_err(|_| unpayable("the kept request"))?;
        let request = FetchRequest::new(
            exchange.method.as_deref(),
            &exchange.url,
            &exchange.headers,
            exchange.body.clone(),
        )
        .map_err(|_| unpayable("request"))?;
        let url = self.fetcher.check_url(&exchange.url).map_err(|_| unpayable("url"))?;
        Ok((exchange, request, url))
    }
}

/// An approved payment that cannot be made: logged with its reason, refused as no longer payable.
fn unpayable(approval: &Approval, reason: &str) -> TransferError {
    tracing::warn!(transfer_id = %approval.id, reason, "an approved x402 payment could not be made");
    TransferError::NotPending("unpayable")
}

/// The audit entry of an approved payment made: what was fetched and paid, and how the paid request was answered
/// (its status, or why it got no answer; the payment pending either way).
fn paid_outcome(agent: &Agent, url: &reqwest::Url, tx: &StoredTx, answer: &Result<Fetched, FetchError>) -> AuditEvent {
    let result = match answer {
        Ok(a) => X402Result::Answered {
            status: "pending".into(),
            response_status: a.status,
        },
        Err(e) => X402Result::Unanswered {
            status: "pending".into(),
            error: e.to_string(),
        },
    };
    let fetch = X402Fetch {
        host: url.host_str().map(str::to_owned),
        path: url.path().into(),
        max_amount: None,
        chosen: Some(X402Choice {
            chain: tx.chain.clone(),
            asset: tx.asset.clone(),
            amount: format_units(tx.value_wei, tx.decimals()),
            pay_to: tx.to.to_checksum(None),
        }),
        transfer_id: Some(tx.id),
    };
    let detail = Detail::X402PaymentOutcome(detail::X402PaymentOutcome { fetch, result });
    AuditEvent::new(agent.id, Actor::System, detail)
}

/// What the audit log keeps of the chosen entry.
fn chosen(choice: &Choice) -> X402Choice {
    X402Choice {
        chain: choice.token.chain.clone(),
        asset: choice.token.symbol.clone(),
        amount: choice.price(),
        pay_to: choice.pay_to.to_checksum(None),
    }
}

/// The paid retry's answer: passed through unless the resource refused the payment (402 again) or did not answer.
fn paid_answer(answer: Result<Fetched, FetchError>, transfer_id: Uuid) -> Result<Fetched, PayError> {
    match answer {
        Ok(a) if a.status == 402 => Err(PayError::PaymentFailed {
            reason: refusal_reason(&a),
            transfer_id,
        }),
        Ok(a) => Ok(a),
        Err(FetchError::Timeout) => Err(PayError::Timeout { transfer_id }),
        Err(_) => Err(PayError::Unavailable { transfer_id }),
    }
}

/// Why the resource refused a payment: its `error` or `errorReason` (header or body), cut short.
fn refusal_reason(answer: &Fetched) -> String {
    let from_header = wire::payment_required(answer.header(wire::PAYMENT_REQUIRED), &answer.body)
        .ok()
        .and_then(|r| r.error);
    let from_body = || {
        let body: Value = serde_json::from_slice(&answer.body).ok()?;
        ["error", "errorReason"]
            .iter()
            .find_map(|k| body.get(k).and_then(Value::as_str).map(str::to_owned))
    };
    let reason = from_header
        .or_else(from_body)
        .unwrap_or_else(|| "the resource answered 402 again".into());
    reason.chars().take(200).collect()
}
