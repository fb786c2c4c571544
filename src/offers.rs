//! The offer service (§23): what an agent puts up for sale at `/x402/{id}`, created, listed, read and closed by the
//! HTTP API and the `create_offer` tool alike. A new offer is checked cheap parts first (chain, asset, price,
//! resource, settlement, limits; the URL by §16's rules and the policy's `allowed_hosts`), then on chain: the asset's
//! contract must answer EIP-3009's `authorizationState` and report its EIP-712 domain, which the offer keeps for
//! its 402s. The upstream's headers are sealed under the master key before they are stored and never shown. The
//! tool of a guarded agent holds its offer for the owner's approval instead (`held`).

pub mod held;
pub mod request;
pub mod token;
pub mod view;

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::sync::{Arc, OnceLock};

use uuid::Uuid;

use crate::chain::{ChainError, Chains};
use crate::domain::agent::{Agent, Capability};
use crate::domain::amount::Amount;
use crate::domain::audit::{Actor, Detail, detail};
use crate::domain::chain::{self as registry, ChainInfo};
use crate::net::egress::FetchRequest;
use crate::net::egress::guard;
use crate::store::offers::{Offer, OfferState, Resource, SettleWhen};
use crate::store::{AuditEvent, Store, StoreError};
use crate::vault::Vault;
pub use request::{Forward, NewContent, NewOffer, NewResource, NewUpstream};
use request::{check_terms, forward_list, media_type};

/// `max_timeout_seconds` bounds and default (§23).
pub const MIN_TIMEOUT_SECONDS: u64 = 60;
pub const MAX_TIMEOUT_SECONDS: u64 = 3600;
pub const DEFAULT_TIMEOUT_SECONDS: u64 = 300;
/// Longest URL an offer fronts (as webhooks take).
const MAX_URL_LEN: usize = 2048;
/// Longest description (what the 402 advertises).
const MAX_DESCRIPTION_LEN: usize = 1000;
/// Methods an upstream may be fetched with.
const METHODS: &[&str] = &["GET", "HEAD", "POST"];

/// Why an offer call failed; each maps to one status and code at the edge.
#[derive(Debug, thiserror::Error)]
pub enum OfferError {
    /// A field that does not parse or is out of bounds (422 `validation_failed`).
    #[error("{field}: {reason}")]
    Field { field: &'static str, reason: String },
    /// The agent lacks `transact` (403 `capability_denied`).
    #[error("creating an offer needs the 'transact' capability, which this agent does not have")]
    CapabilityDenied,
    /// §16's URL rules refuse the upstream (422 `url_not_allowed`).
    #[error("{0}")]
    UrlNotAllowed(String),
    /// The policy's `allowed_hosts` does not list the upstream's host (403 `policy_denied`, `host_not_allowed`).
    #[error("the agent's policy does not allow the host {0} (allowed_hosts)")]
    HostNotAllowed(String),
    /// The asset's contract does not implement EIP-3009 or report its EIP-712 domain (422 `asset_not_payable`).
    #[error("{0}")]
    AssetNotPayable(String),
    /// No such offer of this agent (404 `offer_not_found`).
    #[error("offer not found")]
    NotFound,
    /// No offer of this agent waited for approval under that id (404 `transfer_not_found`, as for a transfer).
    #[error("no transfer or offer awaiting approval with this id")]
    NotHeld,
    /// A held offer no longer waiting, or past `expires_at` (409 `transfer_not_pending` / `transfer_expired`).
    #[error("the offer is no longer awaiting approval ({})", .0.as_str())]
    NotAwaiting(crate::domain::policy::ApprovalStatus),
    #[error(transparent)]
    Chain(#[from] ChainError),
    #[error(transparent)]
    Store(#[from] StoreError),
}

fn field(field: &'static str, reason: impl Into<String>) -> OfferError {
    OfferError::Field {
        field,
        reason: reason.into(),
    }
}

/// The service, built once at start.
#[derive(Clone)]
pub struct Offers {
    store: Arc<dyn Store>,
    chains: Arc<Chains>,
    vault: Arc<Vault>,
    /// `OFFER_ALLOW_PRIVATE`: upstreams on private and loopback addresses (development only).
    allow_private: bool,
    /// `PUBLIC_URL`'s origin, where offers' URLs point when set.
    public_origin: Option<String>,
    /// The address the HTTP listener is bound to, once it is (offers' URLs point there without `PUBLIC_URL`).
    listening: Arc<OnceLock<SocketAddr>>,
    /// `BIND_ADDR`, where a process that does not listen itself (`agentd mcp` over stdio) points offers' URLs: the
    /// server it shares the database with listens there.
    bind_addr: SocketAddr,
    clock: Arc<dyn crate::domain::clock::Clock>,
}

impl Offers {
    pub fn new(
        store: Arc<dyn Store>,
        chains: Arc<Chains>,
        vault: Arc<Vault>,
        allow_private: bool,
        public_origin: Option<String>,
        listening: Arc<OnceLock<SocketAddr>>,
        bind_addr: SocketAddr,
    ) -> Self {
        Offers {
            store,
            chains,
            vault,
            allow_private,
            public_origin,
            listening,
            bind_addr,
            clock: Arc::new(crate::domain::clock::SystemClock),
        }
    }

    /// The same service reading the time on `clock` (a test's).
    pub fn with_clock(mut self, clock: Arc<dyn crate::domain::clock::Clock>) -> Self {
        self.clock = clock;
        self
    }

    /// Where offer `id` is bought: `<PUBLIC_URL, else the listening address>/x402/<id>` (an unspecified listening
    /// address as the loopback one; `BIND_ADDR` in a process that does not listen). Never a request's `Host`,
    /// which whoever sends it chooses.
    pub fn url(&self, id: Uuid) -> String {
        let origin = match &self.public_origin {
            Some(public) => public.clone(),
            None => {
                let bound = self.listening.get().copied().unwrap_or(self.bind_addr);
                let ip = match bound.ip() {
                    std::net::IpAddr::V4(v4) if v4.is_unspecified() => std::net::Ipv4Addr::LOCALHOST.into(),
                    std::net::IpAddr::V6(v6) if v6.is_unspecified() => std::net::Ipv6Addr::LOCALHOST.into(),
                    ip => ip,
                };
                format!("http://{}", SocketAddr::new(ip, bound.port()))
            }
        };
        format!("{origin}/x402/{id}")
    }

    /// Checks `new` for `agent` and stores it with its `offer_created` entry. The caller has proved the authority
    /// (owner authority, or the agent token of an unguarded agent); the capability is checked here.
    pub async fn create(&self, agent: &Agent, new: NewOffer, actor: Actor) -> Result<Offer, OfferError> {
        let offer = self.checked(agent, new).await?;
        let detail = Detail::OfferCreated(offer.created_detail());
        self.store
            .create_offer(&offer, &AuditEvent::new(agent.id, actor, detail))
            .await?;
        Ok(offer)
    }

    /// `new` checked for `agent` as `POST …/offers` checks it (every field, the URL rules and the policy's hosts, the
    /// token's EIP-3009 on chain), as the `active` offer it would be; nothing stored.
    async fn checked(&self, agent: &Agent, new: NewOffer) -> Result<Offer, OfferError> {
        if !agent.has(Capability::Transact) {
            return Err(OfferError::CapabilityDenied);
        }
        let id = Uuid::new_v4();
        let chain = registry::find(new.chain.trim())
            .filter(|c| agent.has_chain(c.name))
            .ok_or_else(|| field("chain", "must be one of the agent's chains"))?;
        if !agent.wallet_addresses.contains_key(chain.name) {
            return Err(field("chain", "the agent has no wallet on this chain"));
        }
        let asset = self
            .chains
            .tokens()
            .named(chain, Some(&new.asset))
            .map_err(|e| field("asset", e.to_string()))?;
        let Some(token) = asset.token else {
            return Err(OfferError::AssetNotPayable(format!(
                "{} is the native coin of {}: an offer is paid in an EIP-3009 token",
                asset.symbol, chain.name
            )));
        };
        let price = Amount::parse(&new.price, asset.decimals).map_err(|e| field("price", e.to_string()))?;
        let description = new.description.trim().to_string();
        if description.is_empty() || description.chars().count() > MAX_DESCRIPTION_LEN {
            return Err(field("description", format!("1 to {MAX_DESCRIPTION_LEN} characters")));
        }
        let forward = forward_list(new.forward)?;
        let (resource, method) = self.resource(agent, id, new.resource).await?;
        let settle = match new.settle.as_deref().map(str::trim) {
            None => SettleWhen::OnSuccess,
            Some(text) => {
                SettleWhen::parse(text).ok_or_else(|| field("settle", "must be on_success or before_serving"))?
            }
        };
        check_terms(settle, method.as_deref(), &forward)?;
        let gas_per_day = Amount::parse(&new.gas_per_day, chain.decimals)
            .map_err(|e| field("gas_per_day", e.to_string()))?
            .value();
        let max_timeout_seconds = new.max_timeout_seconds.unwrap_or(DEFAULT_TIMEOUT_SECONDS);
        if !(MIN_TIMEOUT_SECONDS..=MAX_TIMEOUT_SECONDS).contains(&max_timeout_seconds) {
            return Err(field(
                "max_timeout_seconds",
                format!("must be {MIN_TIMEOUT_SECONDS} to {MAX_TIMEOUT_SECONDS}"),
            ));
        }
        let (token_name, token_version) = self.payable(chain, &asset.symbol, token).await?;
        Ok(Offer {
            id,
            agent_id: agent.id,
            chain: chain.name.to_string(),
            asset: asset.symbol.clone(),
            token,
            decimals: asset.decimals,
            token_name,
            token_version,
            price: price.value(),
            description,
            resource,
            settle,
            forward,
            gas_per_day,
            max_timeout_seconds,
            status: OfferState::Active,
            created_at: self.clock.now(),
            approval: None,
        })
    }

    /// The agent's offers, newest first, closed ones included.
    pub async fn list(&self, agent_id: Uuid) -> Result<Vec<Offer>, OfferError> {
        Ok(self.store.offers(agent_id).await?)
    }

    /// One of the agent's offers (another agent's is not found).
    pub async fn get(&self, agent_id: Uuid, id: Uuid) -> Result<Offer, OfferError> {
        match self.store.offer(id).await? {
            Some(offer) if offer.agent_id == agent_id => Ok(offer),
            _ => Err(OfferError::NotFound),
        }
    }

    /// Closes one of the agent's offers with its `offer_closed` entry; closing a closed one again changes nothing.
    /// An offer awaiting approval is rejected instead (by `actor`, as `POST …/reject` would), so that it never sells.
    pub async fn close(&self, agent_id: Uuid, id: Uuid, actor: Actor) -> Result<(), OfferError> {
        let detail = Detail::OfferClosed(detail::OfferClosed { offer_id: id });
        if self
            .store
            .close_offer(agent_id, id, &AuditEvent::new(agent_id, actor, detail))
            .await?
        {
            return Ok(());
        }
        let offer = self.get(agent_id, id).await?;
        if offer.status == OfferState::AwaitingApproval {
            let verdict = crate::store::offers::OfferVerdict::Rejected;
            match self.store.decide_offer(agent_id, id, verdict, actor, None).await? {
                crate::store::offers::OfferDecision::Decided(_)
                | crate::store::offers::OfferDecision::NotWaiting(_)
                | crate::store::offers::OfferDecision::NotFound => {}
            }
        }
        Ok(())
    }

    /// The upstream (checked, its headers sealed) or the stored body, and the upstream's method.
    async fn resource(
        &self,
        agent: &Agent,
        id: Uuid,
        resource: NewResource,
    ) -> Result<(Resource, Option<String>), OfferError> {
        match resource {
            NewResource::Content(c) => {
                if c.content.is_empty() {
                    return Err(field("resource.content", "must not be empty"));
                }
                Ok((
                    Resource::Content {
                        content: c.content.into_bytes(),
                        content_type: media_type("resource.content_type", &c.content_type)?,
                    },
                    None,
                ))
            }
            NewResource::Upstream(u) => {
                let method = u.method.as_deref().unwrap_or("GET").trim().to_ascii_uppercase();
                if !METHODS.contains(&method.as_str()) {
                    return Err(field("resource.method", "must be GET, HEAD or POST"));
                }
                let url = u.url.trim().to_string();
                if url.len() > MAX_URL_LEN {
                    return Err(field("resource.url", format!("at most {MAX_URL_LEN} characters")));
                }
                let headers = u.headers.unwrap_or_default();
                // The guarded client's own checks of the method and headers (reserved names, malformed values).
                FetchRequest::new(Some(&method), &url, &headers, None).map_err(|e| match e {
                    crate::net::egress::FetchError::Invalid { reason, .. } => field("resource.headers", reason),
                    other => field("resource", other.to_string()),
                })?;
                let (parsed, _) =
                    guard::check_url(&url, self.allow_private).map_err(|e| OfferError::UrlNotAllowed(e.to_string()))?;
                let policy = self.store.get_policy(agent.id).await?;
                let host = parsed.host_str().unwrap_or_default();
                if !policy.allows_host(host, parsed.port_or_known_default().unwrap_or(0)) {
                    return Err(OfferError::HostNotAllowed(host.to_string()));
                }
                let mime_type = media_type(
                    "resource.mime_type",
                    u.mime_type.as_deref().unwrap_or("application/json"),
                )?;
                let sealed_headers = (!headers.is_empty()).then(|| {
                    let plain = zeroize::Zeroizing::new(serde_json::to_vec(&headers).expect("headers serialise"));
                    self.vault.seal_offer_headers(id, &plain)
                });
                Ok((
                    Resource::Upstream {
                        url,
                        method: method.clone(),
                        mime_type,
                        sealed_headers,
                    },
                    Some(method),
                ))
            }
        }
    }

    /// The token's EIP-712 domain `(name, version)` if its contract implements EIP-3009, else `asset_not_payable`.
    async fn payable(
        &self,
        chain: &'static ChainInfo,
        symbol: &str,
        token: alloy::primitives::Address,
    ) -> Result<(String, String), OfferError> {
        let client = self.chains.get(chain.name)?;
        token::payable_domain(client, token).await?.ok_or_else(|| {
            OfferError::AssetNotPayable(format!(
                "{symbol} on {} ({token}) does not implement EIP-3009 (authorizationState) with an EIP-712 domain",
                chain.name
            ))
        })
    }
}

/// The upstream's headers as the offer was given them, opened with `vault` (empty when it has none), for the fetch.
pub fn open_headers(vault: &Vault, offer: &Offer) -> Result<BTreeMap<String, String>, crate::vault::VaultError> {
    let Resource::Upstream {
        sealed_headers: Some(sealed),
        ..
    } = &offer.resource
    else {
        return Ok(BTreeMap::new());
    };
    let plain = vault.open_offer_headers(offer.id, sealed)?;
    serde_json::from_slice(&plain).map_err(|_| crate::vault::VaultError::Decrypt)
}

/// The resource as shown (the API, the audit log): an upstream's origin and path, never its query or headers; a
/// stored body as `content` (`Resource::shown`).
pub fn shown_resource(resource: &Resource) -> String {
    resource.shown()
}
