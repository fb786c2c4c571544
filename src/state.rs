//! The shared application state handed to every handler (cheap to clone, all `Arc`s), how it is built from the
//! configuration, and the service views handed to what needs less than all of it.

use std::sync::Arc;

use axum::extract::FromRef;
use secrecy::ExposeSecret;

use crate::auth::Authenticator;
use crate::auth::streams::OpenStreams;
use crate::chain::Chains;
use crate::chat::ChatServices;
use crate::config::{Config, LlmProviderKind};
use crate::events::EventBus;
use crate::llm::LlmProvider;
use crate::llm::builtin::BuiltinProvider;
use crate::llm::openai::{OpenAiConfig, OpenAiProvider};
use crate::rate_limit::ProofLimits;
use crate::signer::Keys;
use crate::store::Store;
use crate::tools::ToolServices;
use crate::transfers::Transfers;
use crate::vault::{self, Vault};

/// Cloned for every request (middleware, extractors), so it is one `Arc`: a clone is one atomic increment, not one
/// per service. Fields are reached through `Deref`.
#[derive(Clone)]
pub struct AppState(Arc<Services>);

impl std::ops::Deref for AppState {
    type Target = Services;

    fn deref(&self) -> &Services {
        &self.0
    }
}

/// Everything a handler may use.
pub struct Services {
    /// Who is calling: the one place that checks tokens.
    pub auth: Authenticator,
    pub store: Arc<dyn Store>,
    pub vault: Arc<Vault>,
    /// Where wallet keys are made and sign (§20): the vault, and the PKCS#11 token with `KEY_BACKEND=pkcs11`.
    pub keys: Arc<Keys>,
    pub config: Arc<Config>,
    /// Per-client and failed-proof limits of the reissue and owner-session endpoints.
    pub reissue_limits: Arc<ProofLimits>,
    pub chains: Arc<Chains>,
    pub llm: Arc<dyn LlmProvider>,
    pub events: EventBus,
    pub metrics: Arc<crate::metrics::Metrics>,
    /// Open server-sent event streams per agent, ended when their token or agent stops holding.
    pub streams: Arc<OpenStreams>,
    /// Turns true when the service is shutting down; long-lived streams end then.
    pub shutdown: tokio::sync::watch::Receiver<bool>,
    /// The money path, built once: its nonce cache and the x402 fetcher's connection pool live as long as the app.
    pub transfers: Transfers,
    /// Webhook endpoints (§19): registration, changes, secrets, the delivery log.
    pub webhooks: crate::webhooks::Endpoints,
    /// On-chain delegations the owner grants (§21).
    pub delegations: crate::delegations::Delegations,
    /// The chains where the operator sponsors gas (§22), as checked at start.
    pub sponsors: crate::sponsor::Sponsors,
    /// Rung when a sponsored operation is stored, so the chain's bundler carries it at once.
    pub bundles: Arc<tokio::sync::Notify>,
    /// Offers the agents sell (§23): created, listed, closed.
    pub offers: crate::offers::Offers,
    /// Payments to agents (§23): offers sold at `/x402/{id}` and the agent's own x402 facilitator.
    pub seller: crate::sell::Seller,
    /// What the tools act through (chat turns, MCP calls).
    pub tools: ToolServices,
    /// What a chat turn uses.
    pub chat: ChatServices,
    /// The address this instance's HTTP listener is bound to (`BIND_ADDR`, its port as bound), once it is: where
    /// links to the console point when `PUBLIC_URL` is unset. Never the `Host` a request names, which whoever sends
    /// it chooses.
    pub listening: Arc<std::sync::OnceLock<std::net::SocketAddr>>,
    /// The time as the service reads it where a test may move it (the chain clients' caches and rechecks).
    pub clock: Arc<dyn crate::domain::clock::Clock>,
}

impl FromRef<AppState> for Authenticator {
    fn from_ref(state: &AppState) -> Self {
        state.auth.clone()
    }
}

impl FromRef<AppState> for Transfers {
    fn from_ref(state: &AppState) -> Self {
        state.transfers.clone()
    }
}

impl FromRef<AppState> for crate::webhooks::Endpoints {
    fn from_ref(state: &AppState) -> Self {
        state.webhooks.clone()
    }
}

impl FromRef<AppState> for crate::delegations::Delegations {
    fn from_ref(state: &AppState) -> Self {
        state.delegations.clone()
    }
}

impl FromRef<AppState> for crate::offers::Offers {
    fn from_ref(state: &AppState) -> Self {
        state.offers.clone()
    }
}

impl FromRef<AppState> for ToolServices {
    fn from_ref(state: &AppState) -> Self {
        state.tools.clone()
    }
}

impl FromRef<AppState> for ChatServices {
    fn from_ref(state: &AppState) -> Self {
        state.chat.clone()
    }
}

/// The shared state of a service process, with what owns its lifetime: the shutdown sender.
pub struct BuiltState {
    pub state: AppState,
    /// Sending `true` ends streams and workers; keep it alive as long as the state is used.
    pub stop: tokio::sync::watch::Sender<bool>,
}

/// Opens and migrates the store, opens the vault, builds the chain clients and the LLM provider.
pub async fn build_state(config: Config) -> anyhow::Result<BuiltState> {
    build_state_on(config, Arc::new(crate::domain::clock::SystemClock)).await
}

/// `build_state` with the time read on `clock` (a test's `ManualClock`).
pub async fn build_state_on(config: Config, clock: Arc<dyn crate::domain::clock::Clock>) -> anyhow::Result<BuiltState> {
    let (store, vault) = open_store_and_vault(&config, clock.clone()).await?;
    let chains = build_chains(&config)?.with_clock(clock.clone());
    let llm = build_llm(&config)?;
    let vault = Arc::new(vault);
    let keys = Arc::new(open_keys(&config, store.as_ref(), vault.clone()).await?);
    let (stop, shutdown) = tokio::sync::watch::channel(false);
    let (auth, streams, reissue_limits) = access(&config, &store, &clock);
    let (chains, metrics) = (Arc::new(chains), Arc::<crate::metrics::Metrics>::default());
    let delegations = crate::delegations::Delegations::new(
        store.clone(),
        chains.clone(),
        config.chains.delegation_managers.clone(),
        config.chains.delegation_enforcers.clone(),
    )
    .with_clock(clock.clone());
    let sponsors = crate::sponsor::start::start(&config, &chains, &store, &keys).await;
    let bundles = Arc::new(tokio::sync::Notify::new());
    let transfers = Transfers::new(
        store.clone(),
        chains.clone(),
        vault.clone(),
        keys.clone(),
        config.faults,
        config.x402.clone(),
    )
    .with_delegations(delegations.clone())
    .with_sponsors(sponsors.clone(), bundles.clone())
    .with_clock(clock.clone());
    let webhooks = crate::webhooks::Endpoints::new(store.clone(), vault.clone(), config.webhooks.allow_private)
        .with_clock(clock.clone());
    let listening: Arc<std::sync::OnceLock<std::net::SocketAddr>> = Arc::default();
    let offers = crate::offers::Offers::new(
        store.clone(),
        chains.clone(),
        vault.clone(),
        config.x402.offer_allow_private,
        config.security.public_url.as_ref().map(|p| p.origin.clone()),
        listening.clone(),
        config.server.bind_addr,
    )
    .with_clock(clock.clone());
    let seller = crate::sell::Seller::new(
        store.clone(),
        chains.clone(),
        transfers.clone(),
        vault.clone(),
        &config,
        clock.clone(),
    );
    let tools = ToolServices {
        store: store.clone(),
        chains: chains.clone(),
        transfers: transfers.clone(),
        delegations: delegations.clone(),
        offers: offers.clone(),
    };
    let chat = ChatServices {
        store: store.clone(),
        llm: llm.clone(),
        tools: tools.clone(),
        metrics: metrics.clone(),
        turn_timeout: config.llm.turn_timeout,
        clock: clock.clone(),
    };
    let state = AppState(Arc::new(Services {
        auth,
        streams,
        store,
        vault,
        keys,
        config: Arc::new(config),
        reissue_limits: Arc::new(reissue_limits),
        chains,
        llm,
        events: EventBus::default(),
        metrics,
        shutdown,
        transfers,
        webhooks,
        delegations,
        sponsors,
        bundles,
        offers,
        seller,
        listening,
        clock,
        tools,
        chat,
    }));
    // Checks each node's chain id in the background: a node that is down never delays the start.
    state.chains.verify_at_start();
    Ok(BuiltState { state, stop })
}

/// Opens and migrates the store, then the vault with the configured key (or the data directory's key file), refused
/// when the stored wallet keys were not written with it; keys the audit log.
async fn open_store_and_vault(
    config: &Config,
    clock: Arc<dyn crate::domain::clock::Clock>,
) -> anyhow::Result<(Arc<dyn Store>, Vault)> {
    let store = crate::store::open_on(config, clock).await?;
    let generated;
    let key = match &config.security.encryption_key {
        Some(key) => key,
        None => {
            generated = vault::load_or_create_key_file(&config.database.data_dir)?;
            &generated
        }
    };
    // Refuses a key the stored wallet keys were not written with, before anything is served or written.
    let vault = crate::custody::open_vault(store.as_ref(), key).await?;
    // Every process that appends to the audit log keys it (docs/api.md §15).
    if let Some(audit_key) = crate::custody::open_audit_key(store.as_ref(), &vault, true).await? {
        store.use_audit_key(audit_key);
    }
    Ok((store, vault))
}

/// Who may call (the authenticator), the open streams it rechecks and the reissue proofs' limits.
fn access(
    config: &Config,
    store: &Arc<dyn Store>,
    clock: &Arc<dyn crate::domain::clock::Clock>,
) -> (Authenticator, Arc<OpenStreams>, ProofLimits) {
    let auth = crate::auth::Authenticator::new(
        store.clone(),
        config.security.disable_agent_auth,
        config.security.admin_token.clone(),
    )
    .with_clock(clock.clone());
    let streams = OpenStreams::new(
        auth.clone(),
        config.server.max_streams_per_agent,
        config.server.stream_recheck,
    );
    let reissue_limits = ProofLimits::new(
        config.security.reissue_limit_per_ip,
        config.security.reissue_limit_per_agent,
    );
    (auth, streams, reissue_limits)
}

/// The key backends: with `KEY_BACKEND=pkcs11` the token is opened (module loaded, token found by label, logged in)
/// and every active agent's key object must be in it; with `local`, no active agent's key may be in a token. Any
/// failure refuses the start (§20): the service never starts half-able to sign.
pub async fn open_keys(config: &Config, store: &dyn Store, vault: Arc<Vault>) -> anyhow::Result<Keys> {
    let token_keys = store.token_keys().await?;
    let token = match &config.security.pkcs11 {
        Some(pkcs11) => {
            let token = crate::signer::Token::open(pkcs11)?;
            token.check_keys(&token_keys)?;
            tracing::info!(token = token.label(), keys = token_keys.len(), "PKCS#11 token opened");
            Some(Arc::new(token))
        }
        None => {
            if let Some((agent_id, _)) = token_keys.first() {
                anyhow::bail!(
                    "active agent {agent_id}'s key is in a PKCS#11 token but KEY_BACKEND is local: set KEY_BACKEND=pkcs11 \
                     and the PKCS11_* variables"
                );
            }
            None
        }
    };
    Ok(Keys::new(vault, token))
}

fn build_chains(config: &Config) -> anyhow::Result<Chains> {
    let urls = config
        .chains
        .rpc_urls
        .iter()
        .map(|(name, url)| (name.clone(), url.expose_secret().to_string()))
        .collect();
    let mut chains = Chains::new(urls, config.chains.rpc_timeout)
        .map_err(|e| anyhow::anyhow!("RPC_URL_<CHAIN>: {e}"))?
        .with_tokens(config.chains.tokens.clone())
        .with_delegation_managers(config.chains.delegation_managers.clone());
    for (name, _) in &config.chains.rpc_urls {
        chains
            .set_confirmations(name, config.chains.confirmations_for(name))
            .map_err(|e| anyhow::anyhow!("{e}"))?;
    }
    Ok(chains)
}

fn build_llm(config: &Config) -> anyhow::Result<Arc<dyn LlmProvider>> {
    Ok(match config.llm.provider {
        LlmProviderKind::Builtin => Arc::new(BuiltinProvider::new()),
        LlmProviderKind::OpenAi => Arc::new(
            OpenAiProvider::new(OpenAiConfig {
                base_url: config.llm.base_url.clone().unwrap_or_default(),
                api_key: config.llm.api_key.clone(),
                model: config.llm.model.clone(),
                timeout: config.llm.timeout,
            })
            .map_err(|e| anyhow::anyhow!("LLM provider: {e}"))?,
        ),
    })
}
