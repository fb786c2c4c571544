//! The shared application state handed to every handler: cheap to clone, all `Arc`s.

use std::sync::Arc;

use crate::auth::Authenticator;
use axum::extract::FromRef;

use crate::chain::Chains;
use crate::chat::ChatServices;
use crate::config::Config;
use crate::events::EventBus;
use crate::llm::LlmProvider;
use crate::rate_limit::RateLimiter;
use crate::store::Store;
use crate::tools::ToolServices;
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

impl FromRef<AppState> for Authenticator {
    fn from_ref(state: &AppState) -> Self {
        state.auth.clone()
    }
}

impl AppState {
    /// What the tools act through (chat turns, MCP calls).
    pub fn tool_services(&self) -> ToolServices {
        ToolServices::new(
            self.store.clone(),
            self.chains.clone(),
            self.vault.clone(),
            self.config.faults,
        )
    }

    /// What a chat turn uses.
    pub fn chat_services(&self) -> ChatServices {
        ChatServices {
            store: self.store.clone(),
            llm: self.llm.clone(),
            tools: self.tool_services(),
            metrics: self.metrics.clone(),
        }
    }
}

impl FromRef<AppState> for ChatServices {
    fn from_ref(state: &AppState) -> Self {
        state.chat_services()
    }
}
