//! Startup: build the state, bind the listener, start the workers (event feed, watchers), serve until stopped.

use std::future::Future;
use std::io;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;
use axum::Router;
use axum::body::Body;
use axum::extract::ConnectInfo;
use hyper::body::Incoming;
use hyper_util::rt::TokioIo;
use hyper_util::service::TowerToHyperService;
use tokio::net::TcpListener;
use tokio::sync::watch;
use tower::ServiceExt;

use crate::config::Config;
use crate::state::{AppState, BuiltState};
use crate::watcher::{Watcher, WatcherState};

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
        Self::build_on(config, Arc::new(crate::domain::clock::SystemClock)).await
    }

    /// `build` with the time read on `clock` (a test's `ManualClock`).
    pub async fn build_on(config: Config, clock: Arc<dyn crate::domain::clock::Clock>) -> anyhow::Result<App> {
        let bind_addr = config.server.bind_addr;
        let BuiltState { state, stop } = crate::state::build_state_on(config, clock).await?;
        let listener = TcpListener::bind(bind_addr)
            .await
            .with_context(|| format!("cannot listen on {bind_addr}"))?;
        if let Ok(bound) = listener.local_addr() {
            let _ = state.listening.set(bound);
        }
        Ok(App { listener, state, stop })
    }

    pub fn local_addr(&self) -> SocketAddr {
        self.listener.local_addr().expect("a bound listener has an address")
    }

    pub fn state(&self) -> &AppState {
        &self.state
    }

    /// What a first `cargo run` lacks, said once at start so that a newcomer is not left guessing.
    fn warn_of_missing_setup(&self) {
        let config = &self.state.config;
        if config.chains.rpc_urls.is_empty() {
            tracing::warn!(
                "no chain is configured: balances, transfers and chain answers fail until an RPC_URL_<CHAIN> is set \
                 (e.g. RPC_URL_BASE); scripts/demo.sh runs agentd against a local node"
            );
        }
        if config.security.admin_token.is_none() {
            tracing::warn!(
                "ADMIN_TOKEN is unset: anyone who reaches this server can create and list agents, and agents without \
                 owner_addresses are unguarded; set ADMIN_TOKEN (or ADMIN_TOKEN_FILE) outside local development"
            );
        }
    }

    /// Serves until `shutdown` completes: then stops the watchers, ends the streams and finishes in-flight requests.
    pub async fn run_until_stopped(self, shutdown: impl Future<Output = ()> + Send + 'static) -> anyhow::Result<()> {
        // The warnings come first: whoever waits for "listening on" (a supervisor, a test) has read them by then.
        self.warn_of_missing_setup();
        tracing::info!("listening on {}", self.local_addr());
        self.spawn_workers().await;
        let stop = self.stop;
        let mut stopping = stop.subscribe();
        let shutdown = async move {
            shutdown.await;
            let _ = stop.send(true);
        };
        let transfers = self.state.transfers.clone();
        let router = crate::http::router(self.state);
        // The entries of the sends answered before the stop are written before the process ends (else the watcher
        // of the next start writes them from what their reservations kept).
        let server = async move {
            serve(self.listener, router, shutdown).await;
            transfers.entries_written().await;
        };
        // In-flight requests get a grace period; a chat turn waiting on a slow model must not hold the exit.
        let deadline = async move {
            let _ = stopping.wait_for(|stopped| *stopped).await;
            tokio::time::sleep(SHUTDOWN_GRACE).await;
        };
        tokio::select! {
            () = server => Ok(()),
            () = deadline => {
                tracing::warn!("requests still running after the grace period; stopping anyway");
                Ok(())
            }
        }
    }
}

/// Serves HTTP/1.1 on `listener` until `shutdown` completes, then lets open connections finish their current
/// response. Not `axum::serve`: its connection builder first reads up to 24 bytes to tell HTTP/2 from HTTP/1 and
/// hands them back to hyper, whose read buffer then holds those bytes when it must grow to read the rest of the
/// request, so it doubles from 8 KiB to 16 KiB. That buffer lives as long as the connection: with thousands of open
/// event streams it was most of the memory they took. Serving HTTP/1 directly keeps it at 8 KiB.
async fn serve(listener: TcpListener, router: Router, shutdown: impl Future<Output = ()>) {
    // Every connection holds a receiver: `closing` tells them to finish, and its sender sees when all are gone.
    let (closing, connections) = watch::channel(false);
    let mut shutdown = std::pin::pin!(shutdown);
    loop {
        let (stream, remote) = tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok(accepted) => accepted,
                Err(e) => {
                    accept_failed(e).await;
                    continue;
                }
            },
            () = &mut shutdown => break,
        };
        let service = router
            .clone()
            .map_request(move |mut request: axum::http::Request<Incoming>| {
                request.extensions_mut().insert(ConnectInfo(remote));
                request.map(Body::new)
            });
        let mut stop = connections.clone();
        tokio::spawn(async move {
            let connection = hyper::server::conn::http1::Builder::new()
                .serve_connection(TokioIo::new(stream), TowerToHyperService::new(service))
                .with_upgrades();
            let mut connection = std::pin::pin!(connection);
            tokio::select! {
                result = connection.as_mut() => {
                    if let Err(e) = result {
                        tracing::trace!(error = %e, "connection ended with an error");
                    }
                    return;
                }
                _ = stop.wait_for(|stopping| *stopping) => {}
            }
            // Finish the response in flight (the event streams end on the same signal), then close.
            connection.as_mut().graceful_shutdown();
            let _ = connection.await;
        });
    }
    drop(listener);
    let _ = closing.send(true);
    drop(connections);
    closing.closed().await;
}

/// A failed accept: the peer gave up (nothing to do), or the process is out of something (file descriptors): wait a
/// little before accepting again rather than spin.
async fn accept_failed(e: io::Error) {
    if matches!(
        e.kind(),
        io::ErrorKind::ConnectionRefused | io::ErrorKind::ConnectionAborted | io::ErrorKind::ConnectionReset
    ) {
        return;
    }
    tracing::error!(error = %e, "cannot accept a connection");
    tokio::time::sleep(Duration::from_secs(1)).await;
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
        let watching = watcher_state(&self.state);
        for chain in self.state.chains.configured_names() {
            let watcher = Watcher::new(watching.clone(), chain);
            tokio::spawn(watcher.run_until_stopped(self.state.shutdown.clone()));
        }
        for sponsor in self.state.sponsors.all() {
            let bundler = crate::sponsor::bundler::Bundler {
                store: self.state.store.clone(),
                chains: self.state.chains.clone(),
                keys: self.state.keys.clone(),
                sponsor: sponsor.clone(),
                bell: self.state.bundles.clone(),
                metrics: self.state.metrics.clone(),
                stuck_after: self.state.config.chains.stuck_after,
                follow_every: self.state.config.chains.watcher_interval,
                clock: self.state.clock.clone(),
            };
            tokio::spawn(bundler.run_until_stopped(self.state.shutdown.clone()));
        }
        tokio::spawn(
            self.state
                .delegations
                .clone()
                .run_until_stopped(self.state.shutdown.clone()),
        );
        let deliverer = crate::webhooks::Deliverer::new(
            self.state.store.clone(),
            self.state.vault.clone(),
            self.state.config.webhooks.clone(),
            self.state.clock.clone(),
        );
        tokio::spawn(deliverer.run_until_stopped(self.state.shutdown.clone()));
        tokio::spawn(purge_until_stopped(
            self.state.store.clone(),
            self.state.clock.clone(),
            self.state.shutdown.clone(),
        ));
        tokio::spawn(
            self.state
                .seller
                .clone()
                .recover_until_stopped(self.state.shutdown.clone()),
        );
    }
}

/// How often what has outlived its use is deleted (docs/api.md §15), besides once at start.
const PURGE_EVERY: Duration = Duration::from_secs(3600);

/// Purges at start and then every `PURGE_EVERY` until the shutdown signal. Several instances purging at once only
/// find less to delete.
async fn purge_until_stopped(
    store: Arc<dyn crate::store::Store>,
    clock: Arc<dyn crate::domain::clock::Clock>,
    mut stop: watch::Receiver<bool>,
) {
    loop {
        match store.purge(clock.now()).await {
            Ok(0) => {}
            Ok(removed) => tracing::info!(removed, "purged expired sessions, challenges and idempotency records"),
            Err(e) => tracing::warn!(error = %e, "purge failed; trying again later"),
        }
        tokio::select! {
            _ = tokio::time::sleep(PURGE_EVERY) => {}
            _ = stop.changed() => return,
        }
    }
}

/// What the confirmation watchers of an app use: built once by `App` for its own watchers; a test drives one more
/// with it (`Watcher::poll_once` is safe beside them: one round at a time per chain, by the store's watcher lock).
pub fn watcher_state(state: &AppState) -> WatcherState {
    WatcherState {
        store: state.store.clone(),
        chains: state.chains.clone(),
        transfers: state.transfers.clone(),
        interval: state.config.chains.watcher_interval,
        drop_after: state.config.chains.tx_drop_after,
        stuck_after: state.config.chains.stuck_after,
        clock: state.clock.clone(),
    }
}
