//! The `llm` section: the chat engine.

use std::time::Duration;

use secrecy::SecretString;

use super::vars::Vars;
use super::{ConfigError, HTTP_REQUEST_TIMEOUT, invalid};

/// Which chat engine answers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LlmProviderKind {
    Builtin,
    OpenAi,
}

/// The chat engine.
#[derive(Debug)]
pub struct LlmConfig {
    pub provider: LlmProviderKind,
    pub base_url: Option<String>,
    pub api_key: Option<SecretString>,
    pub model: String,
    /// One provider call.
    pub timeout: Duration,
    /// A whole chat turn, model calls and tools together (`LLM_TURN_TIMEOUT_MS`); below `HTTP_REQUEST_TIMEOUT`.
    pub turn_timeout: Duration,
}

impl LlmConfig {
    pub(super) fn read(vars: &Vars) -> Result<Self, ConfigError> {
        let provider = match vars
            .get("LLM_PROVIDER")
            .as_deref()
            .map(str::to_ascii_lowercase)
            .as_deref()
        {
            None | Some("builtin") => LlmProviderKind::Builtin,
            Some("openai") => LlmProviderKind::OpenAi,
            Some(_) => return Err(invalid("LLM_PROVIDER", "must be builtin or openai")),
        };
        let base_url = vars.get("LLM_BASE_URL");
        if provider == LlmProviderKind::OpenAi && base_url.is_none() {
            return Err(invalid("LLM_BASE_URL", "is required when LLM_PROVIDER=openai"));
        }
        let turn_timeout = Duration::from_millis(vars.number("LLM_TURN_TIMEOUT_MS", 120_000u64)?);
        if turn_timeout.is_zero() || turn_timeout >= HTTP_REQUEST_TIMEOUT {
            return Err(invalid(
                "LLM_TURN_TIMEOUT_MS",
                format!(
                    "must be above 0 and below the HTTP timeout ({} ms)",
                    HTTP_REQUEST_TIMEOUT.as_millis()
                ),
            ));
        }
        Ok(LlmConfig {
            provider,
            base_url,
            api_key: vars.secret("LLM_API_KEY")?,
            model: vars.get("LLM_MODEL").unwrap_or_else(|| "gpt-4o-mini".into()),
            timeout: Duration::from_millis(vars.number("LLM_TIMEOUT_MS", 60_000)?),
            turn_timeout,
        })
    }
}
