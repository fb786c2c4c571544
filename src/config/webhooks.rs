//! The `webhooks` section: webhook deliveries.

use std::time::Duration;

use super::vars::Vars;
use super::{ConfigError, invalid};

/// Webhook deliveries (§19).
#[derive(Debug, Clone)]
pub struct WebhookConfig {
    /// `WEBHOOK_ALLOW_PRIVATE`: endpoints may be on loopback, private and other non-global addresses.
    pub allow_private: bool,
    /// `WEBHOOK_TIMEOUT_MS`: an attempt's deadline.
    pub timeout: Duration,
    /// `WEBHOOK_RETRY_SCHEDULE`: the waits between attempts.
    pub retry_schedule: crate::domain::webhook::RetrySchedule,
}

impl Default for WebhookConfig {
    fn default() -> Self {
        WebhookConfig {
            allow_private: false,
            timeout: Duration::from_millis(10_000),
            retry_schedule: Default::default(),
        }
    }
}

impl WebhookConfig {
    pub(super) fn read(vars: &Vars) -> Result<Self, ConfigError> {
        let defaults = WebhookConfig::default();
        let timeout_ms = vars.number("WEBHOOK_TIMEOUT_MS", defaults.timeout.as_millis() as u64)?;
        if timeout_ms == 0 || timeout_ms > 600_000 {
            return Err(invalid("WEBHOOK_TIMEOUT_MS", "must be between 1 and 600000"));
        }
        let retry_schedule = match vars.get("WEBHOOK_RETRY_SCHEDULE") {
            Some(text) => {
                crate::domain::webhook::RetrySchedule::parse(&text).map_err(|e| invalid("WEBHOOK_RETRY_SCHEDULE", e))?
            }
            None => defaults.retry_schedule,
        };
        Ok(WebhookConfig {
            allow_private: vars.flag("WEBHOOK_ALLOW_PRIVATE", defaults.allow_private)?,
            timeout: Duration::from_millis(timeout_ms),
            retry_schedule,
        })
    }
}
