//! Startup: build the state, bind the listener, start the workers (event feed, watchers), serve until stopped.

use std::future::{Future, IntoFuture};
use std::net::SocketAddr;
use std::time::Duration;

use anyhow::Context;
use tokio::net::TcpListener;

use crate::config::Config;
use crate::confirmations::{Watcher, WatcherState};
use crate::state::{AppState, BuiltState};

/// How long in-flight requests may run on after a shutdown signal.
const SHUTDOWN_GRACE: Duration = Duration::from_secs(7);

/// A built application: migrated store, bound listener, ready to serve.
pub struct App {
    listener: TcpListener,
    state: AppState,
    stop: tokio::sync::watch::Sender<bool>,
}

impl App {
    pub async fn build(config: Config) -> anyhow::Result<App> {
        let bind_addr = config.server.bind_addr;
        let BuiltState { state, stop } = crate::state::build_state(config).await?;
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
    /// Starts the event feed into the bus, the re-check of open streams' credentials, then one confirmation watcher
    /// per configured chain (the feed first, so that no settlement is committed before it follows).
    async fn spawn_workers(&self) {
        let feed = self.state.store.event_feed().await;
        tokio::spawn(crate::events::forward(
            feed,
            self.state.events.clone(),
            self.state.shutdown.clone(),
        ));
        tokio::spawn(
            self.state
                .streams
                .clone()
                .run_until_stopped(self.state.shutdown.clone()),
        );
        let watching = WatcherState {
            store: self.state.store.clone(),
            chains: self.state.chains.clone(),
            transfers: crate::transfers::Transfers::new(
                self.state.store.clone(),
                self.state.chains.clone(),
                self.state.vault.clone(),
                self.state.config.faults,
                self.state.config.x402.clone(),
            ),
            interval: self.state.config.chains.watcher_interval,
            drop_after: self.state.config.chains.tx_drop_after,
            stuck_after: self.state.config.chains.stuck_after,
        };
        for chain in self.state.chains.configured_names() {
            let watcher = Watcher::new(watching.clone(), chain);
            tokio::spawn(watcher.run_until_stopped(self.state.shutdown.clone()));
        }
    }
}
