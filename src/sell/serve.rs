//! Selling an offer at `/x402/{id}` (§23): without a payment a 402 with the offer's terms; with one, the checks, the
//! hold, then — `on_success` — the resource first and the settlement only of a 2xx, or — `before_serving` — the
//! settlement first and the resource after its inclusion. A payment answered `settlement_pending` is served once,
//! when the same signature comes again after its inclusion; no authorization is served twice.

use std::collections::BTreeMap;

use serde_json::{Value, json};
use uuid::Uuid;

use super::{Refused, SellError, Seller, Settled};
use crate::domain::agent::Agent;
use crate::domain::sale::{Payment, Reason, Terms};
use crate::net::egress::FetchRequest;
use crate::store::income::{Income, IncomeStatus};
use crate::store::offers::{Offer, Resource, SettleWhen};

/// A buyer's request, as the edge read it.
#[derive(Debug, Clone)]
pub struct SaleRequest {
    pub offer_id: Uuid,
    /// `GET`, `HEAD` or `POST`.
    pub method: String,
    /// `PAYMENT-SIGNATURE`.
    pub payment: Option<String>,
    pub query: Option<String>,
    pub body: Option<String>,
    /// The offer's public URL (the 402's `resource.url`).
    pub resource_url: String,
}

/// The answer (the edge renders it).
#[derive(Debug, Clone)]
pub enum Sale {
    /// 404 `offer_not_found`.
    NotFound,
    /// 429 `rate_limited`: the payer sent more payments than its limit, with the seconds to wait.
    RateLimited(u64),
    /// 405: a method the offer does not sell.
    MethodNotAllowed,
    /// 402 with `PAYMENT-REQUIRED` (the document, carrying `error` when a check refused).
    Required(Value),
    /// 402 with `PAYMENT-RESPONSE` `{success: false, errorReason, transaction, network, payer}` and the terms again.
    NotSettled { response: Value, required: Value },
    /// 502 `upstream_failed`, with the upstream's status (none when it could not be reached); `response` when the
    /// payment stands (`before_serving`).
    UpstreamFailed {
        status: Option<u16>,
        response: Option<Value>,
    },
    /// 2xx: the resource, with `PAYMENT-RESPONSE`.
    Served {
        status: u16,
        /// Only `content-type`, `content-length`, `etag` and `last-modified` of the upstream's.
        headers: BTreeMap<String, String>,
        body: Vec<u8>,
        response: Value,
    },
}

/// What the upstream answered, or that it could not be reached.
struct Upstream {
    status: Option<u16>,
    ok: bool,
    headers: BTreeMap<String, String>,
    body: Vec<u8>,
}

const KEPT_HEADERS: &[&str] = &["content-type", "content-length", "etag", "last-modified"];

/// The `PAYMENT-REQUIRED` document of an offer.
fn required(offer: &Offer, terms: &Terms, url: &str, error: Option<Reason>) -> Value {
    let mime = match &offer.resource {
        Resource::Upstream { mime_type, .. } => mime_type.clone(),
        Resource::Content { content_type, .. } => content_type.clone(),
    };
    let mut document = json!({
        "x402Version": 2,
        "resource": {"url": url, "description": offer.description, "mimeType": mime},
        "accepts": [terms.entry()],
    });
    if let Some(reason) = error {
        document["error"] = json!(reason.code());
    }
    document
}

fn settle_response(success: bool, reason: Option<&str>, transaction: &str, terms: &Terms, payer: &str) -> Value {
    let mut response = json!({
        "success": success,
        "transaction": transaction,
        "network": terms.network(),
        "payer": payer,
    });
    if let Some(reason) = reason {
        response["errorReason"] = json!(reason);
    }
    response
}

impl Seller {
    /// Sells the offer to `request` (see the module's doc).
    #[tracing::instrument(skip_all, fields(offer_id = %request.offer_id))]
    pub async fn sell(&self, request: SaleRequest) -> Result<Sale, SellError> {
        let Some(offer) = self.store.offer(request.offer_id).await?.filter(|o| o.is_active()) else {
            return Ok(Sale::NotFound);
        };
        let payment = request.payment.as_deref().map(Payment::from_header);
        // The agent, and beside it any payment this service holds of the same authorization (the offer names the
        // chain and the token): the same signature again after a `settlement_pending` answer is served once included.
        let (agent, earlier) = tokio::join!(self.store.get_agent(offer.agent_id), async {
            match &payment {
                Some(Ok(payment)) => {
                    self.store
                        .income_by_nonce(
                            &offer.chain,
                            offer.token,
                            payment.authorization.from,
                            payment.authorization.nonce,
                        )
                        .await
                }
                _ => Ok(None),
            }
        });
        let agent = match agent {
            Ok(agent) if agent.is_active => agent,
            Ok(_) | Err(crate::store::StoreError::AgentNotFound) => return Ok(Sale::NotFound),
            Err(e) => return Err(e.into()),
        };
        let Some((terms, chain, asset)) = self.offer_terms(&offer, &agent) else {
            return Ok(Sale::NotFound);
        };
        if !sells(request.method.as_str(), &offer.settle) {
            return Ok(Sale::MethodNotAllowed);
        }
        let refuse = |reason| Sale::Required(required(&offer, &terms, &request.resource_url, Some(reason)));
        let Some(payment) = payment else {
            return Ok(Sale::Required(required(&offer, &terms, &request.resource_url, None)));
        };
        let earlier = earlier?;
        if let Ok(payment) = &payment
            && let Some(income) = &earlier
            && income.offer_id == Some(offer.id)
            && income.signature_key == payment.signature_key()
            && income.transfer_id.is_some()
        {
            return self.resume(&agent, &offer, &terms, &request, income).await;
        }
        let verified = match self
            .check(&agent, Some(&offer), (&terms, chain), payment, Some(earlier.is_some()))
            .await?
        {
            Ok(verified) => verified,
            Err(Refused {
                reason: Reason::RateLimited(seconds),
                ..
            }) => return Ok(Sale::RateLimited(seconds)),
            Err(refused) => {
                self.audit_refusal(&agent, Some(offer.id), refused).await;
                return Ok(refuse(refused.reason));
            }
        };
        let income = match self.hold(&agent, Some(&offer), (chain, &asset), &verified).await {
            Ok(income) => income,
            Err(refused) => {
                self.audit_refusal(&agent, Some(offer.id), refused).await;
                return Ok(refuse(refused.reason));
            }
        };
        let payer = verified.payer.to_checksum(None);
        match offer.settle {
            SettleWhen::OnSuccess => {
                let upstream = self.fetch(&offer, &request).await;
                if !upstream.ok {
                    self.store.end_hold(income.id, IncomeStatus::Released).await?;
                    return Ok(Sale::UpstreamFailed {
                        status: upstream.status,
                        response: None,
                    });
                }
                let settled = self.settle(&agent, (chain, &terms), &income, &verified).await?;
                self.answer(
                    &agent,
                    &offer,
                    &terms,
                    &request,
                    &income,
                    &payer,
                    settled,
                    Some(upstream),
                )
                .await
            }
            SettleWhen::BeforeServing => {
                let settled = self.settle(&agent, (chain, &terms), &income, &verified).await?;
                self.answer(&agent, &offer, &terms, &request, &income, &payer, settled, None)
                    .await
            }
        }
    }

    /// The answer to a settlement's outcome: the resource (fetched now unless it already was) once settled, marked
    /// served once; else the 402 that says why.
    #[allow(clippy::too_many_arguments)]
    async fn answer(
        &self,
        agent: &Agent,
        offer: &Offer,
        terms: &Terms,
        request: &SaleRequest,
        income: &Income,
        payer: &str,
        settled: Settled,
        fetched: Option<Upstream>,
    ) -> Result<Sale, SellError> {
        let not_settled = |reason: &str, transaction: &str| Sale::NotSettled {
            response: settle_response(false, Some(reason), transaction, terms, payer),
            required: required(offer, terms, &request.resource_url, None),
        };
        let transaction = match settled {
            Settled::Done { transaction } => transaction,
            Settled::Pending { transaction } => return Ok(not_settled("settlement_pending", &transaction)),
            Settled::Failed { transaction } => return Ok(not_settled("transaction_failed", &transaction)),
            Settled::Refused(reason) => {
                self.audit_refusal(
                    agent,
                    Some(offer.id),
                    Refused {
                        reason,
                        payer: Some(income.payer),
                    },
                )
                .await;
                return Ok(Sale::Required(required(
                    offer,
                    terms,
                    &request.resource_url,
                    Some(reason),
                )));
            }
        };
        let response = settle_response(true, None, &transaction, terms, payer);
        // Served at most once, whichever request gets here first.
        if !self.store.keep_outcome(income.id, &json!("served")).await? {
            return Ok(Sale::Required(required(
                offer,
                terms,
                &request.resource_url,
                Some(Reason::NonceAlreadyUsed),
            )));
        }
        let upstream = match fetched {
            Some(upstream) => upstream,
            None => self.fetch(offer, request).await,
        };
        if !upstream.ok {
            // Settled before serving: the payment stands (`paymentFlow: "upfront"`).
            return Ok(Sale::UpstreamFailed {
                status: upstream.status,
                response: Some(response),
            });
        }
        Ok(Sale::Served {
            status: upstream.status.unwrap_or(200),
            headers: upstream.headers,
            body: upstream.body,
            response,
        })
    }

    /// A payment answered `settlement_pending` before, sent again: still pending, or included (then served once).
    async fn resume(
        &self,
        agent: &Agent,
        offer: &Offer,
        terms: &Terms,
        request: &SaleRequest,
        income: &Income,
    ) -> Result<Sale, SellError> {
        let payer = income.payer.to_checksum(None);
        let tx = match income.transfer_id {
            Some(id) => self.store.get_transaction(agent.id, id).await?,
            None => None,
        };
        let hash = tx.as_ref().and_then(|t| t.tx_hash()).unwrap_or_default().to_string();
        let settled = match income.status {
            IncomeStatus::Settled => Settled::Done {
                transaction: income.tx_hash.clone().unwrap_or(hash),
            },
            IncomeStatus::Failed => Settled::Failed { transaction: hash },
            IncomeStatus::Released => Settled::Refused(Reason::NonceAlreadyUsed),
            IncomeStatus::Settling => match &tx {
                Some(tx) => self.wait_for(agent, income, terms, tx).await?,
                // Its settlement is not recorded yet: the first request is still at work on it, and this one (sent
                // beside it, never answered pending) is a second payment in flight.
                None => {
                    return Ok(Sale::Required(required(
                        offer,
                        terms,
                        &request.resource_url,
                        Some(Reason::NonceAlreadyUsed),
                    )));
                }
            },
        };
        let fetched = match (&settled, offer.settle) {
            (Settled::Done { .. }, SettleWhen::OnSuccess) => {
                let upstream = self.fetch(offer, request).await;
                if !upstream.ok {
                    return Ok(Sale::UpstreamFailed {
                        status: upstream.status,
                        response: None,
                    });
                }
                Some(upstream)
            }
            _ => None,
        };
        self.answer(agent, offer, terms, request, income, &payer, settled, fetched)
            .await
    }

    /// The offer's resource: its stored body, or its upstream fetched by the guarded client with what `forward`
    /// lets through of the buyer's request, no redirect followed, cut at `X402_MAX_RESPONSE_BYTES` (a cut body is
    /// not a success).
    async fn fetch(&self, offer: &Offer, request: &SaleRequest) -> Upstream {
        let (url, method, sealed) = match &offer.resource {
            Resource::Content { content, content_type } => {
                let mut headers = BTreeMap::new();
                headers.insert("content-type".to_string(), content_type.clone());
                return Upstream {
                    status: Some(200),
                    ok: true,
                    headers,
                    body: content.clone(),
                };
            }
            Resource::Upstream {
                url,
                method,
                sealed_headers,
                ..
            } => (url, method, sealed_headers),
        };
        let failed = |status| Upstream {
            status,
            ok: false,
            headers: BTreeMap::new(),
            body: Vec::new(),
        };
        let headers = match sealed {
            Some(_) => match crate::offers::open_headers(&self.vault, offer) {
                Ok(headers) => headers,
                Err(e) => {
                    tracing::error!(error = %e, "an offer's upstream headers could not be opened");
                    return failed(None);
                }
            },
            None => BTreeMap::new(),
        };
        let mut url = url.clone();
        if offer.forward.iter().any(|f| f == "query")
            && let Some(query) = request.query.as_deref().filter(|q| !q.is_empty())
        {
            url.push(if url.contains('?') { '&' } else { '?' });
            url.push_str(query);
        }
        let body = match offer.forward.iter().any(|f| f == "body") {
            true => request.body.clone(),
            false => None,
        };
        let method = match request.method.as_str() {
            "HEAD" => "HEAD",
            _ => method.as_str(),
        };
        let fetch = match FetchRequest::new(Some(method), &url, &headers, body) {
            Ok(fetch) => fetch,
            Err(e) => {
                tracing::warn!(error = %e, "an offer's upstream request could not be built");
                return failed(None);
            }
        };
        match self.fetcher.send(&fetch, self.fetcher.deadline()).await {
            Ok(answer) => {
                let ok = (200..300).contains(&answer.status) && !answer.truncated;
                let headers = answer
                    .headers
                    .into_iter()
                    .filter(|(name, _)| KEPT_HEADERS.contains(&name.as_str()))
                    .collect();
                Upstream {
                    status: Some(answer.status),
                    ok,
                    headers,
                    body: answer.body,
                }
            }
            Err(e) => {
                tracing::info!(error = %e, "an offer's upstream could not be fetched");
                failed(None)
            }
        }
    }
}

/// Whether a request with `method` buys the offer: GET and HEAD always, POST only when it settles before serving.
fn sells(method: &str, settle: &SettleWhen) -> bool {
    match method {
        "GET" | "HEAD" => true,
        "POST" => *settle == SettleWhen::BeforeServing,
        _ => false,
    }
}
