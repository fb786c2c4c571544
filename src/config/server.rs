//! The `server` section: the listener and the request pipeline (bind address, body limit, CORS, streams, proxies).

use std::net::SocketAddr;
use std::time::Duration;

use secrecy::SecretString;

use super::vars::Vars;
use super::{ConfigError, invalid};

/// The listener and the request pipeline.
#[derive(Debug)]
pub struct ServerConfig {
    pub bind_addr: SocketAddr,
    pub max_body_bytes: usize,
    pub json_logs: bool,
    /// `CORS_ORIGINS`: origins (`scheme://host[:port]`, as browsers send them) allowed to call the API from a page
    /// of theirs. Empty: same-origin only.
    pub cors_origins: Vec<String>,
    /// `METRICS_TOKEN`: when set, `GET /metrics` needs `Authorization: Bearer <token>`.
    pub metrics_token: Option<SecretString>,
    /// `MAX_STREAMS_PER_AGENT`: open server-sent event streams (chat and conversation) per agent on this instance.
    pub max_streams_per_agent: usize,
    /// How often an open stream's token and agent are checked again (`STREAM_RECHECK_MS`).
    pub stream_recheck: Duration,
    /// `TRUSTED_PROXIES`: peers whose `X-Forwarded-For` is believed for rate limits (docs/api.md §15).
    pub trusted_proxies: Vec<crate::domain::net::IpNet>,
}

impl ServerConfig {
    pub(super) fn read(vars: &Vars) -> Result<Self, ConfigError> {
        let bind_addr = vars
            .get("BIND_ADDR")
            .unwrap_or_else(|| "127.0.0.1:8080".into())
            .parse()
            .map_err(|_| invalid("BIND_ADDR", "must be host:port, e.g. 127.0.0.1:8080"))?;
        Ok(ServerConfig {
            bind_addr,
            max_body_bytes: vars.number("MAX_BODY_BYTES", 64 * 1024)?,
            json_logs: vars.get("LOG_FORMAT").is_some_and(|f| f.eq_ignore_ascii_case("json")),
            cors_origins: vars
                .get("CORS_ORIGINS")
                .map(|list| parse_origins(&list))
                .transpose()?
                .unwrap_or_default(),
            metrics_token: vars.secret("METRICS_TOKEN")?,
            max_streams_per_agent: match vars.number("MAX_STREAMS_PER_AGENT", 100usize)? {
                0 => return Err(invalid("MAX_STREAMS_PER_AGENT", "must be at least 1")),
                n => n,
            },
            stream_recheck: match vars.number("STREAM_RECHECK_MS", 2_000u64)? {
                0 => return Err(invalid("STREAM_RECHECK_MS", "must be at least 1")),
                ms => Duration::from_millis(ms),
            },
            trusted_proxies: vars
                .get("TRUSTED_PROXIES")
                .map(|list| crate::domain::net::parse_trusted_proxies(&list))
                .transpose()
                .map_err(|e| invalid("TRUSTED_PROXIES", e))?
                .unwrap_or_default(),
        })
    }
}

/// `CORS_ORIGINS`: comma-separated `http(s)://host[:port]` origins, kept in the form browsers send in `Origin`
/// (lower-case, default port left out). A wildcard is refused: the API's answers carry wallets and keys.
fn parse_origins(list: &str) -> Result<Vec<String>, ConfigError> {
    let mut origins = Vec::new();
    for entry in list.split(',').map(str::trim).filter(|e| !e.is_empty()) {
        let refuse = |reason: &str| invalid("CORS_ORIGINS", format!("{entry:?} {reason}"));
        if entry == "*" {
            return Err(refuse("is not allowed: list each origin"));
        }
        let url = reqwest::Url::parse(entry).map_err(|_| refuse("is not an origin such as https://app.example.com"))?;
        let bare = url.path() == "/" && url.query().is_none() && url.fragment().is_none();
        if !matches!(url.scheme(), "http" | "https") || url.host().is_none() || !bare || !url.username().is_empty() {
            return Err(refuse(
                "must be scheme://host[:port] with http or https and nothing after",
            ));
        }
        let origin = url.origin().ascii_serialization();
        if !origins.contains(&origin) {
            origins.push(origin);
        }
    }
    Ok(origins)
}
