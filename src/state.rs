//! The shared application state handed to every handler: cheap to clone, all `Arc`s.

use std::sync::Arc;

use crate::auth::Authenticator;
use crate::chain::Chains;
use crate::config::Config;
use crate::events::EventBus;
use crate::llm::LlmProvider;
use crate::rate_limit::RateLimiter;
use crate::store::Store;
use crate::vault::Vault;

#[derive(Clone)]
pub struct AppState {
    /// Who is calling: the one place that checks tokens.
    pub auth: Authenticator,
    pub store: Arc<dyn Store>,
    pub vault: Arc<Vault>,
    pub config: Arc<Config>,
    pub reissue_limits: Arc<RateLimiter>,
    pub chains: Arc<Chains>,
    pub llm: Arc<dyn LlmProvider>,
    pub events: EventBus,
    pub metrics: Arc<crate::metrics::Metrics>,
    /// Turns true when the service is shutting down; long-lived streams end then.
    pub shutdown: tokio::sync::watch::Receiver<bool>,
}

impl axum::extract::FromRef<AppState> for Authenticator {
    fn from_ref(state: &AppState) -> Self {
        state.auth.clone()
    }
}
