//! The `x402` section: what the guarded fetch of HTTP resources for agents may reach and how much it reads.

use std::time::Duration;

use super::vars::Vars;
use super::{AppEnv, ConfigError, HTTP_REQUEST_TIMEOUT, invalid};

/// Fetching HTTP resources for agents (§16): what the guarded fetch may reach and how much of it it reads.
#[derive(Debug, Clone)]
pub struct X402Config {
    /// `X402_ALLOW_PRIVATE`: lets URLs reach loopback, private and other non-global addresses (tests, private
    /// deployments). Off by default: a server-side fetch must not become a way into the service's own network.
    pub allow_private: bool,
    /// `OFFER_ALLOW_PRIVATE`: lets offers (§23) front upstreams on loopback and private addresses. Development only:
    /// refused in production, where an offer must not sell the service's own network.
    pub offer_allow_private: bool,
    /// `X402_MAX_RESPONSE_BYTES`: the answer body is cut here (`truncated: true`).
    pub max_response_bytes: usize,
    /// `X402_TIMEOUT_MS`: one deadline for the whole exchange (first request, signing, paid retry).
    pub timeout: Duration,
}

impl Default for X402Config {
    fn default() -> Self {
        X402Config {
            allow_private: false,
            offer_allow_private: false,
            max_response_bytes: 1024 * 1024,
            timeout: Duration::from_millis(30_000),
        }
    }
}

impl X402Config {
    pub(super) fn read(vars: &Vars, app_env: AppEnv) -> Result<Self, ConfigError> {
        let defaults = X402Config::default();
        let max_response_bytes = match vars.number("X402_MAX_RESPONSE_BYTES", defaults.max_response_bytes)? {
            0 => return Err(invalid("X402_MAX_RESPONSE_BYTES", "must be at least 1")),
            n => n,
        };
        let timeout_ms = vars.number("X402_TIMEOUT_MS", defaults.timeout.as_millis() as u64)?;
        let timeout = Duration::from_millis(timeout_ms);
        if timeout.is_zero() || timeout >= HTTP_REQUEST_TIMEOUT {
            return Err(invalid(
                "X402_TIMEOUT_MS",
                format!(
                    "must be above 0 and below the HTTP timeout ({} ms)",
                    HTTP_REQUEST_TIMEOUT.as_millis()
                ),
            ));
        }
        let offer_allow_private = vars.flag("OFFER_ALLOW_PRIVATE", defaults.offer_allow_private)?;
        if offer_allow_private && app_env == AppEnv::Production {
            return Err(ConfigError::Refused(
                "OFFER_ALLOW_PRIVATE=true is for development and is refused in production",
            ));
        }
        Ok(X402Config {
            allow_private: vars.flag("X402_ALLOW_PRIVATE", defaults.allow_private)?,
            offer_allow_private,
            max_response_bytes,
            timeout,
        })
    }
}
