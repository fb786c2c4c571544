//! Startup: open the store by URL scheme, migrate, build the state, bind the listener, serve until stopped.

use std::future::{Future, IntoFuture};
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;
use secrecy::ExposeSecret;
use tokio::net::TcpListener;

use crate::chain::Chains;
use crate::config::{Config, DatabaseKind, LlmProviderKind};
use crate::confirmations::{Watcher, WatcherState};
use crate::events::EventBus;
use crate::llm::LlmProvider;
use crate::llm::builtin::BuiltinProvider;
use crate::llm::openai::{OpenAiConfig, OpenAiProvider};
use crate::rate_limit::RateLimiter;
use crate::state::AppState;
use crate::store::{PgStore, SqliteStore, Store};
use crate::vault::{self, Vault};

/// How long in-flight requests may run on after a shutdown signal.
const SHUTDOWN_GRACE: Duration = Duration::from_secs(7);

/// A built application: migrated store, bound listener, ready to serve.
pub struct App {
    listener: TcpListener,
    state: AppState,
    stop: tokio::sync::watch::Sender<bool>,
}

/// Opens the configured database and applies the embedded migrations.
pub async fn open_store(config: &Config) -> anyhow::Result<Arc<dyn Store>> {
    let url = config.database.url.expose_secret();
    Ok(match &config.database.kind {
        DatabaseKind::Sqlite(path) => {
            let store = SqliteStore::connect(url, path)
                .await
                .context("cannot open the SQLite database")?;
            store.migrate().await.context("cannot migrate the SQLite database")?;
            Arc::new(store)
        }
        DatabaseKind::Postgres => {
            let store = PgStore::connect(url).await.context("cannot connect to PostgreSQL")?;
            store
                .migrate()
                .await
                .context("cannot migrate the PostgreSQL database")?;
            Arc::new(store)
        }
    })
}

/// The shared state of a service process, with what owns its lifetime: the shutdown sender.
pub struct BuiltState {
    pub state: AppState,
    /// Sending `true` ends streams and workers; keep it alive as long as the state is used.
    pub stop: tokio::sync::watch::Sender<bool>,
}

/// Opens and migrates the store, opens the vault, builds the chain clients and the LLM provider.
pub async fn build_state(config: Config) -> anyhow::Result<BuiltState> {
    let store = open_store(&config).await?;
    let vault = match &config.security.encryption_key {
        Some(key) => Vault::new(key),
        None => Vault::new(&vault::load_or_create_key_file(&config.database.data_dir)?),
    };
    let chains = build_chains(&config)?;
    let llm = build_llm(&config)?;
    let (stop, shutdown) = tokio::sync::watch::channel(false);
    let auth = crate::auth::Authenticator::new(
        store.clone(),
        config.security.disable_agent_auth,
        config.security.admin_token.clone(),
    );
    let state = AppState {
        auth,
        store,
        vault: Arc::new(vault),
        config: Arc::new(config),
        reissue_limits: Arc::new(RateLimiter::new(Duration::from_secs(60))),
        chains: Arc::new(chains),
        llm,
        events: EventBus::default(),
        metrics: Arc::default(),
        shutdown,
    };
    // Checks each node's chain id in the background: a node that is down never delays the start.
    state.chains.verify_at_start();
    Ok(BuiltState { state, stop })
}

impl App {
    pub async fn build(config: Config) -> anyhow::Result<App> {
        let bind_addr = config.server.bind_addr;
        let BuiltState { state, stop } = build_state(config).await?;
        let listener = TcpListener::bind(bind_addr)
            .await
            .with_context(|| format!("cannot listen on {bind_addr}"))?;
        Ok(App { listener, state, stop })
    }

    pub fn local_addr(&self) -> SocketAddr {
        self.listener.local_addr().expect("a bound listener has an address")
    }

    pub fn state(&self) -> &AppState {
        &self.state
    }

    /// Serves until `shutdown` completes: then stops the watchers, ends the streams and finishes in-flight requests.
    pub async fn run_until_stopped(self, shutdown: impl Future<Output = ()> + Send + 'static) -> anyhow::Result<()> {
        tracing::info!("listening on {}", self.local_addr());
        self.spawn_workers().await;
        let stop = self.stop;
        let mut stopping = stop.subscribe();
        let shutdown = async move {
            shutdown.await;
            let _ = stop.send(true);
        };
        let router = crate::http::router(self.state);
        let server = axum::serve(
            self.listener,
            router.into_make_service_with_connect_info::<SocketAddr>(),
        )
        .with_graceful_shutdown(shutdown)
        .into_future();
        // In-flight requests get a grace period; a chat turn waiting on a slow model must not hold the exit.
        let deadline = async move {
            let _ = stopping.wait_for(|stopped| *stopped).await;
            tokio::time::sleep(SHUTDOWN_GRACE).await;
        };
        tokio::select! {
            result = server => result.context("server error"),
            () = deadline => {
                tracing::warn!("requests still running after the grace period; stopping anyway");
                Ok(())
            }
        }
    }
}

impl App {
    /// Starts the event feed into the bus, then one confirmation watcher per configured chain (the feed first, so
    /// that no settlement is committed before it follows).
    async fn spawn_workers(&self) {
        let feed = self.state.store.event_feed().await;
        tokio::spawn(crate::events::forward(
            feed,
            self.state.events.clone(),
            self.state.shutdown.clone(),
        ));
        let watching = WatcherState {
            store: self.state.store.clone(),
            chains: self.state.chains.clone(),
            interval: self.state.config.chains.watcher_interval,
            drop_after: self.state.config.chains.tx_drop_after,
        };
        for chain in self.state.chains.configured_names() {
            let watcher = Watcher::new(watching.clone(), chain);
            tokio::spawn(watcher.run_until_stopped(self.state.shutdown.clone()));
        }
    }
}

fn build_chains(config: &Config) -> anyhow::Result<Chains> {
    let urls = config
        .chains
        .rpc_urls
        .iter()
        .map(|(name, url)| (name.clone(), url.expose_secret().to_string()))
        .collect();
    let mut chains =
        Chains::new(urls, config.chains.rpc_timeout).map_err(|e| anyhow::anyhow!("RPC_URL_<CHAIN>: {e}"))?;
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
