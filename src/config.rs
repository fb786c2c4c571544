//! One typed configuration, read from environment variables (a `.env` file may add to them) and validated at load.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::num::NonZeroU32;
use std::path::{Path, PathBuf};
use std::time::Duration;

use secrecy::{ExposeSecret, SecretBox, SecretString};

use crate::domain::chain::{self as registry, CHAINS};
use crate::domain::delegation;

/// Why the configuration was refused. Messages name the variable, never its secret value.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    #[error("{var}: {reason}")]
    Invalid { var: &'static str, reason: String },
    #[error("{0}")]
    Refused(&'static str),
    #[error("cannot read {var} file: {source}")]
    File { var: &'static str, source: std::io::Error },
}

/// The HTTP layer's limit on one request: every deadline below it (the chat turn's) must be shorter, so that a client
/// never gets the timeout layer's bare 504 while its request goes on moving money.
pub const HTTP_REQUEST_TIMEOUT: Duration = Duration::from_secs(180);

fn invalid(var: &'static str, reason: impl Into<String>) -> ConfigError {
    ConfigError::Invalid {
        var,
        reason: reason.into(),
    }
}

/// `development` or `production`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AppEnv {
    Development,
    Production,
}

/// Which chat engine answers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LlmProviderKind {
    Builtin,
    OpenAi,
}

/// Where the database lives, by URL scheme.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DatabaseKind {
    Sqlite(PathBuf),
    Postgres,
}

/// The 32-byte master key that encrypts wallet keys at rest.
pub type EncryptionKey = SecretBox<[u8; 32]>;

/// The whole configuration of one service instance, in sections, each read by its own function.
#[derive(Debug)]
pub struct Config {
    pub app_env: AppEnv,
    pub server: ServerConfig,
    pub database: DatabaseConfig,
    pub chains: ChainsConfig,
    pub llm: LlmConfig,
    pub security: SecurityConfig,
    pub x402: X402Config,
    pub webhooks: WebhookConfig,
    pub mcp: McpConfig,
    pub faults: Faults,
}

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

/// The MCP server's Streamable HTTP transport (`POST /mcp`).
#[derive(Debug, Clone)]
pub struct McpConfig {
    /// `MCP_HTTP_SESSIONS` (default true): an `initialize` from a client that accepts event streams opens a session
    /// (`Mcp-Session-Id`) held in this instance's memory. False: every request is answered on its own (JSON), so
    /// instances behind a load balancer without stickiness all answer every client (no elicitation then).
    pub http_sessions: bool,
    /// `MCP_SESSION_IDLE_SECS` (default 600): a session unused this long is closed.
    pub session_idle: Duration,
    /// `MCP_MAX_SESSIONS_PER_AGENT` (default 16): open sessions per agent on this instance; opening one more closes
    /// the least recently used.
    pub max_sessions_per_agent: usize,
}

impl McpConfig {
    fn read(vars: &Vars) -> Result<Self, ConfigError> {
        Ok(McpConfig {
            http_sessions: vars.flag("MCP_HTTP_SESSIONS", true)?,
            session_idle: match vars.number("MCP_SESSION_IDLE_SECS", 600u64)? {
                0 => return Err(invalid("MCP_SESSION_IDLE_SECS", "must be at least 1")),
                secs => Duration::from_secs(secs),
            },
            max_sessions_per_agent: match vars.number("MCP_MAX_SESSIONS_PER_AGENT", 16usize)? {
                0 => return Err(invalid("MCP_MAX_SESSIONS_PER_AGENT", "must be at least 1")),
                n => n,
            },
        })
    }
}

/// Where data lives.
#[derive(Debug)]
pub struct DatabaseConfig {
    pub url: SecretString,
    pub kind: DatabaseKind,
    /// The SQLite file's directory by default; holds the development key file.
    pub data_dir: PathBuf,
    /// `DATABASE_MAX_CONNECTIONS` (PostgreSQL): the most connections this instance opens, its two listening ones
    /// included. Instances times this, plus other clients, must fit in the server's `max_connections`.
    pub max_connections: u32,
}

/// `DATABASE_MAX_CONNECTIONS` unset.
const DEFAULT_MAX_CONNECTIONS: u32 = 16;
/// Two connections listen (events, webhook wake-ups), and a write may wait for a second connection while it holds
/// one (a lease renewed beside a reserving transaction).
const FEWEST_CONNECTIONS: u32 = 4;

/// The chain nodes and how transfers on them are watched.
#[derive(Debug)]
pub struct ChainsConfig {
    /// `(chain name, url)` for each chain with an RPC URL.
    pub rpc_urls: Vec<(String, SecretString)>,
    /// Blocks on top of the including block (1 = included), per chain name.
    pub confirmations: HashMap<String, u64>,
    pub rpc_timeout: Duration,
    /// Pause between confirmation-watcher rounds.
    pub watcher_interval: Duration,
    /// How long a broadcast transfer may be unknown to the node before it counts as dropped.
    pub tx_drop_after: Duration,
    /// The ERC-20 token registry: the built-in tokens with `TOKENS_<CHAIN>` added or replaced.
    pub tokens: crate::domain::asset::Registry,
    /// `STUCK_AFTER_SECS`: how long a transfer may stay pending before it is sent again with higher fees (§14).
    pub stuck_after: Duration,
    /// `DELEGATION_MANAGER_<CHAIN>`: the delegation framework's `DelegationManager` per chain name (MetaMask's Delegation Framework). Typed
    /// data it verifies is never signed (§18 `delegation_signature`); delegations the owner grants are verified and
    /// redeemed through it (§21). Default: the framework's v1.3 deployment on the registry chains that have one;
    /// set to `none` or empty, none.
    pub delegation_managers: Vec<(String, alloy::primitives::Address)>,
    /// `DELEGATION_ENFORCERS_<CHAIN>`: the caveat enforcers agentd reads per chain name (`name=address`, §21).
    /// Default: the framework's v1.3 deployments on the registry chains that have them; set to `none` or empty, none.
    pub delegation_enforcers: Vec<(
        String,
        Vec<(crate::domain::delegation::Kind, alloy::primitives::Address)>,
    )>,
    /// `CONTRACTS_<CHAIN>`: contracts this deployment names for its clients per chain name (`label=address`, comma
    /// separated; a router, a vault), which the console offers to call from the start. They grant nothing: every
    /// call is judged by the policy as any other. Default: none.
    pub contracts: Vec<(String, Vec<(String, alloy::primitives::Address)>)>,
}

impl ChainsConfig {
    /// Whether `chain`'s node is a local development node: its RPC URL's host is `localhost` or a loopback address
    /// (the demo's anvil). Its transactions exist on that node only, so no public explorer shows them.
    pub fn is_local_node(&self, chain: &str) -> bool {
        self.rpc_urls
            .iter()
            .find(|(name, _)| name == chain)
            .is_some_and(|(_, url)| is_loopback_url(url.expose_secret()))
    }
}

/// `DELEGATION_ENFORCERS_<CHAIN>`: comma-separated `name=address`, each name one of §21's once (empty: none).
fn parse_enforcers(spec: &str) -> Result<Vec<(delegation::Kind, alloy::primitives::Address)>, String> {
    let mut out: Vec<(delegation::Kind, alloy::primitives::Address)> = Vec::new();
    for entry in spec.split(',').map(str::trim).filter(|e| !e.is_empty()) {
        let (name, address) = entry
            .split_once('=')
            .ok_or_else(|| format!("`{entry}` is not name=address"))?;
        let kind = delegation::Kind::from_name(name.trim()).ok_or_else(|| {
            let names: Vec<&str> = delegation::Kind::ALL.iter().map(|k| k.name()).collect();
            format!("unknown enforcer name `{}` (known: {})", name.trim(), names.join(", "))
        })?;
        let address = address
            .trim()
            .parse()
            .map_err(|_| format!("the address of {} must be a 0x address", kind.name()))?;
        if out.iter().any(|(k, _)| *k == kind) {
            return Err(format!("{} is named twice", kind.name()));
        }
        out.push((kind, address));
    }
    Ok(out)
}

/// `CONTRACTS_<CHAIN>`: comma-separated `label=address`, a label of 1 to 40 letters, digits, spaces, `.`, `-` or
/// `_`, each address once (empty: none).
fn parse_contracts(spec: &str) -> Result<Vec<(String, alloy::primitives::Address)>, String> {
    let mut out: Vec<(String, alloy::primitives::Address)> = Vec::new();
    for entry in spec.split(',').map(str::trim).filter(|e| !e.is_empty()) {
        let (label, address) = entry
            .split_once('=')
            .ok_or_else(|| format!("`{entry}` is not label=address"))?;
        let label = label.trim();
        let valid = (1..=40).contains(&label.chars().count())
            && label
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || matches!(c, ' ' | '.' | '-' | '_'));
        if !valid {
            return Err(format!(
                "the label `{label}` must be 1 to 40 letters, digits, spaces, '.', '-' or '_'"
            ));
        }
        let address: alloy::primitives::Address = address
            .trim()
            .parse()
            .map_err(|_| format!("the address of {label} must be a 0x address"))?;
        if out.iter().any(|(_, a)| *a == address) {
            return Err(format!("{address} is named twice"));
        }
        out.push((label.to_string(), address));
    }
    Ok(out)
}

/// `http(s)://host[:port]/…` with a host of `localhost`, 127.0.0.0/8 or `[::1]`.
fn is_loopback_url(url: &str) -> bool {
    let Some((_, rest)) = url.split_once("://") else {
        return false;
    };
    let authority = rest.split(['/', '?', '#']).next().unwrap_or_default();
    let host_port = authority.rsplit_once('@').map_or(authority, |(_, h)| h);
    let host = match host_port.strip_prefix('[') {
        Some(v6) => v6.split(']').next().unwrap_or_default(),
        None => host_port.split(':').next().unwrap_or_default(),
    };
    host.eq_ignore_ascii_case("localhost") || host.parse::<std::net::IpAddr>().is_ok_and(|ip| ip.is_loopback())
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

/// Keys, tokens and the limits around them.
#[derive(Debug)]
pub struct SecurityConfig {
    /// `None` in development means "generate or reuse the key file in `data_dir`".
    pub encryption_key: Option<EncryptionKey>,
    pub disable_agent_auth: bool,
    pub admin_token: Option<SecretString>,
    pub allow_key_export: bool,
    /// `KEY_BACKEND=pkcs11` (§20): the token new agents' keys are generated and signed in; `None`: `local`.
    pub pkcs11: Option<Pkcs11Config>,
    pub challenge_prefix: String,
    /// `PUBLIC_URL`: the service's public origin; its host is the Sign-In with Ethereum domain of owner challenges.
    pub public_url: Option<PublicUrl>,
    /// Failed proofs a minute per agent, reissue and owner session together.
    pub reissue_limit_per_agent: NonZeroU32,
    /// Requests a minute per client address on each reissue and owner-session endpoint.
    pub reissue_limit_per_ip: NonZeroU32,
}

/// Fetching HTTP resources for agents (§16): what the guarded fetch may reach and how much of it it reads.
#[derive(Debug, Clone)]
pub struct X402Config {
    /// `X402_ALLOW_PRIVATE`: lets URLs reach loopback, private and other non-global addresses (tests, private
    /// deployments). Off by default: a server-side fetch must not become a way into the service's own network.
    pub allow_private: bool,
    /// `X402_MAX_RESPONSE_BYTES`: the answer body is cut here (`truncated: true`).
    pub max_response_bytes: usize,
    /// `X402_TIMEOUT_MS`: one deadline for the whole exchange (first request, signing, paid retry).
    pub timeout: Duration,
}

impl Default for X402Config {
    fn default() -> Self {
        X402Config {
            allow_private: false,
            max_response_bytes: 1024 * 1024,
            timeout: Duration::from_millis(30_000),
        }
    }
}

impl X402Config {
    fn read(vars: &Vars) -> Result<Self, ConfigError> {
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
        Ok(X402Config {
            allow_private: vars.flag("X402_ALLOW_PRIVATE", defaults.allow_private)?,
            max_response_bytes,
            timeout,
        })
    }
}

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
    fn read(vars: &Vars) -> Result<Self, ConfigError> {
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

/// The service's public origin (`PUBLIC_URL`), split into what Sign-In with Ethereum messages name.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PublicUrl {
    /// `scheme://authority`, without a trailing slash.
    pub origin: String,
    /// The authority (host, and port when not the scheme's default): the EIP-4361 `domain`.
    pub host: String,
}

impl PublicUrl {
    fn parse(text: &str) -> Result<Self, ConfigError> {
        let url = reqwest::Url::parse(text.trim()).map_err(|e| invalid("PUBLIC_URL", e.to_string()))?;
        let host = match (url.host_str(), url.scheme()) {
            (Some(host), "http" | "https") => host,
            _ => return Err(invalid("PUBLIC_URL", "must be an http or https URL with a host")),
        };
        if !url.username().is_empty() || url.password().is_some() {
            return Err(invalid("PUBLIC_URL", "must not hold credentials"));
        }
        let host = match url.port() {
            Some(port) => format!("{host}:{port}"),
            None => host.to_string(),
        };
        Ok(PublicUrl {
            origin: format!("{}://{host}", url.scheme()),
            host,
        })
    }
}

/// Fault injection for crash-safety tests; refused in production.
#[derive(Debug, Default, Clone, Copy)]
pub struct Faults {
    /// Exit right after an outflow is stored, before it leaves: a transfer before its broadcast, a typed-data
    /// signature or an x402 authorization before it is handed out.
    pub exit_before_broadcast: bool,
    /// Every broadcast is sent once more beforehand with its answer dropped, as when a node's reply is lost and the
    /// client tries again.
    pub lost_broadcast_answer: bool,
}

impl Config {
    /// Loads from the process environment, after reading `.env` (which never overrides the environment).
    pub fn from_env() -> Result<Self, ConfigError> {
        let _ = dotenvy::dotenv();
        Self::from_vars(std::env::vars())
    }

    /// Builds and validates the configuration from a set of variables (the environment, or a test's map).
    pub fn from_vars(vars: impl IntoIterator<Item = (String, String)>) -> Result<Self, ConfigError> {
        let vars = Vars(vars.into_iter().collect());
        let app_env = match vars.get("APP_ENV").as_deref().map(str::to_ascii_lowercase).as_deref() {
            None | Some("development") | Some("dev") => AppEnv::Development,
            Some("production") | Some("prod") => AppEnv::Production,
            Some(_) => return Err(invalid("APP_ENV", "must be development or production")),
        };
        let config = Config {
            app_env,
            server: ServerConfig::read(&vars)?,
            database: DatabaseConfig::read(&vars)?,
            chains: ChainsConfig::read(&vars)?,
            llm: LlmConfig::read(&vars)?,
            security: SecurityConfig::read(&vars, app_env)?,
            x402: X402Config::read(&vars)?,
            webhooks: WebhookConfig::read(&vars)?,
            mcp: McpConfig::read(&vars)?,
            faults: Faults::read(&vars, app_env)?,
        };
        // Without agent auth every wallet answers to anyone who can connect: only to this machine, then.
        if config.security.disable_agent_auth && !config.server.bind_addr.ip().is_loopback() {
            return Err(ConfigError::Refused(
                "DISABLE_AGENT_AUTH=true is refused on a BIND_ADDR that is not a loopback address (127.0.0.1, ::1)",
            ));
        }
        Ok(config)
    }
}

impl ServerConfig {
    fn read(vars: &Vars) -> Result<Self, ConfigError> {
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

impl DatabaseConfig {
    fn read(vars: &Vars) -> Result<Self, ConfigError> {
        let url = vars
            .get("DATABASE_URL")
            .unwrap_or_else(|| "sqlite://./data/agentd.db".into());
        let kind = parse_database_url(&url)?;
        let data_dir = match (&kind, vars.get("DATA_DIR")) {
            (_, Some(dir)) => PathBuf::from(dir),
            (DatabaseKind::Sqlite(path), None) => path
                .parent()
                .filter(|p| !p.as_os_str().is_empty())
                .unwrap_or(Path::new("."))
                .to_path_buf(),
            (DatabaseKind::Postgres, None) => PathBuf::from("./data"),
        };
        let max_connections = vars.number("DATABASE_MAX_CONNECTIONS", DEFAULT_MAX_CONNECTIONS)?;
        if max_connections < FEWEST_CONNECTIONS {
            return Err(invalid(
                "DATABASE_MAX_CONNECTIONS",
                format!(
                    "must be at least {FEWEST_CONNECTIONS} (two connections listen for other instances, the rest serve)"
                ),
            ));
        }
        Ok(DatabaseConfig {
            url: SecretString::from(url),
            kind,
            data_dir,
            max_connections,
        })
    }
}

impl ChainsConfig {
    fn read(vars: &Vars) -> Result<Self, ConfigError> {
        let mut rpc_urls = Vec::new();
        let mut confirmations = HashMap::new();
        let mut tokens = crate::domain::asset::Registry::default();
        let mut delegation_managers = Vec::new();
        let mut delegation_enforcers = Vec::new();
        let mut contracts = Vec::new();
        for chain in CHAINS {
            let suffix = registry::env_suffix(chain.name);
            let deployed = delegation::deployments::CHAIN_IDS.contains(&chain.chain_id);
            match vars.get_or_off(&format!("DELEGATION_MANAGER_{suffix}")) {
                Some(manager) if manager.is_empty() => {}
                Some(manager) => {
                    let address = manager.trim().parse().map_err(|_| ConfigError::Invalid {
                        var: "DELEGATION_MANAGER_<CHAIN>",
                        reason: format!("DELEGATION_MANAGER_{suffix} must be a 0x address"),
                    })?;
                    delegation_managers.push((chain.name.to_string(), address));
                }
                None if deployed => {
                    delegation_managers.push((chain.name.to_string(), delegation::deployments::DELEGATION_MANAGER));
                }
                None => {}
            }
            let enforcers = match vars.get_or_off(&format!("DELEGATION_ENFORCERS_{suffix}")) {
                Some(spec) => parse_enforcers(&spec).map_err(|reason| ConfigError::Invalid {
                    var: "DELEGATION_ENFORCERS_<CHAIN>",
                    reason: format!("DELEGATION_ENFORCERS_{suffix}: {reason}"),
                })?,
                None if deployed => delegation::Kind::ALL
                    .iter()
                    .map(|k| (*k, delegation::deployments::enforcer(*k)))
                    .collect(),
                None => Vec::new(),
            };
            if !enforcers.is_empty() {
                delegation_enforcers.push((chain.name.to_string(), enforcers));
            }
            if let Some(spec) = vars.get(&format!("CONTRACTS_{suffix}")) {
                let named = parse_contracts(&spec).map_err(|reason| ConfigError::Invalid {
                    var: "CONTRACTS_<CHAIN>",
                    reason: format!("CONTRACTS_{suffix}: {reason}"),
                })?;
                if !named.is_empty() {
                    contracts.push((chain.name.to_string(), named));
                }
            }
            if let Some(url) = vars.get(&format!("RPC_URL_{suffix}")) {
                if !(url.starts_with("http://") || url.starts_with("https://")) {
                    return Err(ConfigError::Invalid {
                        var: "RPC_URL_<CHAIN>",
                        reason: format!("RPC_URL_{suffix} must be an http(s) URL"),
                    });
                }
                rpc_urls.push((chain.name.to_string(), SecretString::from(url)));
            }
            let confirmations_var = format!("CONFIRMATIONS_{suffix}");
            let blocks = match vars.get(&confirmations_var) {
                Some(v) => v
                    .parse::<u64>()
                    .ok()
                    .filter(|n| *n >= 1)
                    .ok_or_else(|| ConfigError::Invalid {
                        var: "CONFIRMATIONS_<CHAIN>",
                        reason: format!("{confirmations_var} must be an integer >= 1"),
                    })?,
                None => 1,
            };
            confirmations.insert(chain.name.to_string(), blocks);
            if let Some(spec) = vars.get(&format!("TOKENS_{suffix}")) {
                let extra =
                    crate::domain::asset::Registry::parse_spec(chain, &spec).map_err(|e| ConfigError::Invalid {
                        var: "TOKENS_<CHAIN>",
                        reason: format!("TOKENS_{suffix}: {e}"),
                    })?;
                tokens = tokens.with(extra);
            }
        }
        Ok(ChainsConfig {
            rpc_urls,
            confirmations,
            tokens,
            rpc_timeout: Duration::from_millis(vars.number("RPC_TIMEOUT_MS", 5_000)?),
            watcher_interval: Duration::from_millis(vars.number("WATCHER_INTERVAL_MS", 1_000)?),
            tx_drop_after: Duration::from_secs(vars.number("TX_DROP_AFTER_SECS", 600)?),
            stuck_after: Duration::from_secs(vars.number("STUCK_AFTER_SECS", 120)?),
            delegation_managers,
            delegation_enforcers,
            contracts,
        })
    }

    /// The `DelegationManager` of `chain`, if one is configured (or deployed there by default).
    pub fn delegation_manager(&self, chain: &str) -> Option<alloy::primitives::Address> {
        self.delegation_managers
            .iter()
            .find(|(c, _)| c == chain)
            .map(|(_, a)| *a)
    }

    /// Confirmation depth for a chain (1 = included).
    pub fn confirmations_for(&self, chain: &str) -> u64 {
        self.confirmations.get(chain).copied().unwrap_or(1)
    }
}

impl LlmConfig {
    fn read(vars: &Vars) -> Result<Self, ConfigError> {
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

impl SecurityConfig {
    fn read(vars: &Vars, app_env: AppEnv) -> Result<Self, ConfigError> {
        let encryption_key = vars
            .secret("ENCRYPTION_KEY")?
            .map(|k| parse_encryption_key(k.expose_secret()))
            .transpose()?;
        let disable_agent_auth = vars.flag("DISABLE_AGENT_AUTH", false)?;
        if app_env == AppEnv::Production {
            if encryption_key.is_none() {
                return Err(ConfigError::Refused(
                    "ENCRYPTION_KEY is required when APP_ENV=production",
                ));
            }
            if disable_agent_auth {
                return Err(ConfigError::Refused(
                    "DISABLE_AGENT_AUTH=true is refused when APP_ENV=production",
                ));
            }
        }
        let admin_token = vars.admin_token()?;
        if app_env == AppEnv::Production && admin_token.is_none() {
            return Err(ConfigError::Refused(
                "ADMIN_TOKEN or ADMIN_TOKEN_FILE is required when APP_ENV=production",
            ));
        }
        let public_url = vars.get("PUBLIC_URL").map(|u| PublicUrl::parse(&u)).transpose()?;
        // Without it the sign-in domain would come from each request's `Host`, which a phishing page can choose.
        if app_env == AppEnv::Production && public_url.is_none() {
            return Err(ConfigError::Refused(
                "PUBLIC_URL is required when APP_ENV=production (the Sign-In with Ethereum domain never comes from a request's Host)",
            ));
        }
        let challenge_prefix = vars.get("CHALLENGE_PREFIX").unwrap_or_else(|| "agentd".into());
        if challenge_prefix.contains(':') || challenge_prefix.len() > 64 {
            return Err(invalid(
                "CHALLENGE_PREFIX",
                "must not contain ':' and be at most 64 characters",
            ));
        }
        Ok(SecurityConfig {
            encryption_key,
            disable_agent_auth,
            admin_token,
            allow_key_export: vars.flag("ALLOW_KEY_EXPORT", true)?,
            pkcs11: vars.key_backend()?,
            challenge_prefix,
            public_url,
            reissue_limit_per_agent: vars.positive("REISSUE_LIMIT_PER_AGENT", 10)?,
            reissue_limit_per_ip: vars.positive("REISSUE_LIMIT_PER_IP", 100)?,
        })
    }
}

impl Faults {
    fn read(vars: &Vars, app_env: AppEnv) -> Result<Self, ConfigError> {
        let faults = Faults {
            exit_before_broadcast: vars.flag("FAULT_EXIT_BEFORE_BROADCAST", false)?,
            lost_broadcast_answer: vars.flag("FAULT_LOST_BROADCAST_ANSWER", false)?,
        };
        if (faults.exit_before_broadcast || faults.lost_broadcast_answer) && app_env == AppEnv::Production {
            return Err(ConfigError::Refused(
                "FAULT_* switches are for tests and are refused in production",
            ));
        }
        Ok(faults)
    }
}

/// The variables as given; a blank value counts as unset, except where a blank secret must be refused.
struct Vars(HashMap<String, String>);

impl Vars {
    fn get(&self, name: &str) -> Option<String> {
        self.0.get(name).map(|v| v.trim().to_string()).filter(|v| !v.is_empty())
    }

    /// Like `get`, but a variable set to nothing (or to `none`) is `Some("")`: for settings whose default is
    /// something, so that an operator can turn it off.
    fn get_or_off(&self, name: &str) -> Option<String> {
        let value = self.0.get(name)?.trim();
        Some(if value.eq_ignore_ascii_case("none") { "" } else { value }.to_string())
    }

    /// A secret from `NAME`, or from the file named by `NAME_FILE`.
    fn secret(&self, name: &'static str) -> Result<Option<SecretString>, ConfigError> {
        if let Some(v) = self.get(name) {
            return Ok(Some(SecretString::from(v)));
        }
        match self.get(&format!("{name}_FILE")) {
            Some(path) => std::fs::read_to_string(path.trim())
                .map(|v| Some(SecretString::from(v.trim().to_string())))
                .map_err(|source| ConfigError::File { var: name, source }),
            None => Ok(None),
        }
    }

    /// `ADMIN_TOKEN`, or the contents of `ADMIN_TOKEN_FILE` (`ADMIN_TOKEN` wins). Set but blank, or a blank or
    /// unreadable file, is refused: read as unset it would silently open the admin endpoints.
    fn admin_token(&self) -> Result<Option<SecretString>, ConfigError> {
        let token = match (self.0.get("ADMIN_TOKEN"), self.0.get("ADMIN_TOKEN_FILE")) {
            (Some(token), _) => {
                if token.trim().is_empty() {
                    return Err(ConfigError::Refused(
                        "ADMIN_TOKEN is set but empty: set a token, or unset it (development only)",
                    ));
                }
                token.trim().to_string()
            }
            (None, Some(path)) => {
                let token = std::fs::read_to_string(path.trim()).map_err(|source| ConfigError::File {
                    var: "ADMIN_TOKEN_FILE",
                    source,
                })?;
                if token.trim().is_empty() {
                    return Err(ConfigError::Refused("ADMIN_TOKEN_FILE is set but names an empty file"));
                }
                token.trim().to_string()
            }
            (None, None) => return Ok(None),
        };
        Ok(Some(SecretString::from(token)))
    }

    /// `KEY_BACKEND` (`local` or `pkcs11`) and, for `pkcs11`, the module, the token's label and the PIN
    /// (`PKCS11_PIN` wins over `PKCS11_PIN_FILE`; set but empty, or an empty file, is refused).
    fn key_backend(&self) -> Result<Option<Pkcs11Config>, ConfigError> {
        match self.get("KEY_BACKEND").map(|v| v.to_ascii_lowercase()).as_deref() {
            None | Some("local") => return Ok(None),
            Some("pkcs11") => {}
            Some(_) => return Err(invalid("KEY_BACKEND", "must be local or pkcs11")),
        }
        let module = self.get("PKCS11_MODULE").ok_or(ConfigError::Refused(
            "KEY_BACKEND=pkcs11 needs PKCS11_MODULE (the module's path)",
        ))?;
        let token_label = self
            .get("PKCS11_TOKEN_LABEL")
            .ok_or(ConfigError::Refused("KEY_BACKEND=pkcs11 needs PKCS11_TOKEN_LABEL"))?;
        let pin = match (self.0.get("PKCS11_PIN"), self.0.get("PKCS11_PIN_FILE")) {
            (Some(pin), _) => {
                if pin.trim().is_empty() {
                    return Err(ConfigError::Refused("PKCS11_PIN is set but empty"));
                }
                pin.trim().to_string()
            }
            (None, Some(path)) => {
                let pin = std::fs::read_to_string(path.trim()).map_err(|source| ConfigError::File {
                    var: "PKCS11_PIN_FILE",
                    source,
                })?;
                if pin.trim().is_empty() {
                    return Err(ConfigError::Refused("PKCS11_PIN_FILE is set but names an empty file"));
                }
                pin.trim().to_string()
            }
            (None, None) => {
                return Err(ConfigError::Refused(
                    "KEY_BACKEND=pkcs11 needs the user PIN in PKCS11_PIN or PKCS11_PIN_FILE",
                ));
            }
        };
        Ok(Some(Pkcs11Config {
            module: PathBuf::from(module),
            token_label,
            pin: SecretString::from(pin),
        }))
    }

    fn positive(&self, name: &'static str, default: u32) -> Result<NonZeroU32, ConfigError> {
        let n = self.number(name, default)?;
        NonZeroU32::new(n).ok_or_else(|| invalid(name, "must be a positive integer"))
    }

    fn flag(&self, name: &'static str, default: bool) -> Result<bool, ConfigError> {
        match self.get(name).map(|v| v.to_ascii_lowercase()).as_deref() {
            None => Ok(default),
            Some("true" | "1" | "yes" | "on") => Ok(true),
            Some("false" | "0" | "no" | "off") => Ok(false),
            Some(_) => Err(invalid(name, "must be true or false")),
        }
    }

    fn number<T: std::str::FromStr + Copy>(&self, name: &'static str, default: T) -> Result<T, ConfigError> {
        match self.get(name) {
            None => Ok(default),
            Some(v) => v.parse().map_err(|_| invalid(name, "must be a non-negative integer")),
        }
    }
}

fn parse_database_url(url: &str) -> Result<DatabaseKind, ConfigError> {
    if let Some(rest) = url.strip_prefix("sqlite://").or_else(|| url.strip_prefix("sqlite:")) {
        let path = rest.split('?').next().unwrap_or_default();
        if path.is_empty() || path.starts_with(":memory:") {
            return Err(invalid(
                "DATABASE_URL",
                "sqlite needs a file path, e.g. sqlite://./data/agentd.db",
            ));
        }
        Ok(DatabaseKind::Sqlite(PathBuf::from(path)))
    } else if url.starts_with("postgres://") || url.starts_with("postgresql://") {
        Ok(DatabaseKind::Postgres)
    } else {
        Err(invalid("DATABASE_URL", "must start with sqlite:// or postgres://"))
    }
}

/// Accepts 64 hex characters or standard/url-safe base64 of exactly 32 bytes.
pub fn parse_encryption_key(text: &str) -> Result<EncryptionKey, ConfigError> {
    parse_key("ENCRYPTION_KEY", text)
}

/// The key `agentd rotate-key` moves the wallet keys to: `--new-key` when given, else `NEW_ENCRYPTION_KEY`, else the
/// file named by `NEW_ENCRYPTION_KEY_FILE` (read from the environment and `.env`).
pub fn new_encryption_key(flag: Option<&str>) -> Result<EncryptionKey, ConfigError> {
    let _ = dotenvy::dotenv();
    if let Some(text) = flag {
        return parse_key("--new-key", text);
    }
    let vars = Vars(std::env::vars().collect());
    match vars.secret("NEW_ENCRYPTION_KEY")? {
        Some(text) => parse_key("NEW_ENCRYPTION_KEY", text.expose_secret()),
        None => Err(ConfigError::Refused(
            "rotate-key needs the new key in NEW_ENCRYPTION_KEY, NEW_ENCRYPTION_KEY_FILE or --new-key",
        )),
    }
}

fn parse_key(var: &'static str, text: &str) -> Result<EncryptionKey, ConfigError> {
    use base64::Engine;
    let text = text.trim();
    let text = text.strip_prefix("0x").unwrap_or(text);
    let bytes = if text.len() == 64 && text.bytes().all(|b| b.is_ascii_hexdigit()) {
        alloy::hex::decode(text).ok()
    } else {
        let engines = [
            &base64::engine::general_purpose::STANDARD,
            &base64::engine::general_purpose::URL_SAFE,
            &base64::engine::general_purpose::STANDARD_NO_PAD,
            &base64::engine::general_purpose::URL_SAFE_NO_PAD,
        ];
        engines.iter().find_map(|e| e.decode(text).ok())
    };
    let mut bytes = bytes
        .filter(|b| b.len() == 32)
        .ok_or_else(|| invalid(var, "must be 32 bytes as 64 hex characters or base64"))?;
    let mut key = [0u8; 32];
    key.copy_from_slice(&bytes);
    zeroize::Zeroize::zeroize(&mut bytes);
    Ok(SecretBox::new(Box::new(key)))
}

/// Where the token is: `PKCS11_MODULE`, `PKCS11_TOKEN_LABEL`, and the user PIN (`PKCS11_PIN` or `PKCS11_PIN_FILE`).
pub struct Pkcs11Config {
    pub module: PathBuf,
    pub token_label: String,
    pub pin: SecretString,
}

impl std::fmt::Debug for Pkcs11Config {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Pkcs11Config")
            .field("module", &self.module)
            .field("token_label", &self.token_label)
            .finish_non_exhaustive()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn vars(pairs: &[(&str, &str)]) -> Vec<(String, String)> {
        pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect()
    }

    #[test]
    fn defaults_apply_when_nothing_is_set() {
        let c = Config::from_vars(vars(&[])).unwrap();
        assert_eq!(c.server.bind_addr.to_string(), "127.0.0.1:8080");
        assert_eq!(c.database.kind, DatabaseKind::Sqlite(PathBuf::from("./data/agentd.db")));
        assert_eq!(c.database.data_dir, PathBuf::from("./data"));
        assert!(c.security.allow_key_export && !c.security.disable_agent_auth);
        assert_eq!(c.security.challenge_prefix, "agentd");
        assert_eq!(c.security.public_url, None);
        assert!(c.server.cors_origins.is_empty() && c.server.metrics_token.is_none());
        assert_eq!(c.server.max_streams_per_agent, 100);
    }

    #[test]
    fn database_max_connections_sizes_the_pool_and_too_few_refuse_the_start() {
        assert_eq!(Config::from_vars(vars(&[])).unwrap().database.max_connections, 16);
        let c = Config::from_vars(vars(&[("DATABASE_MAX_CONNECTIONS", " 4 ")])).unwrap();
        assert_eq!(c.database.max_connections, 4);
        for bad in ["3", "0", "-1", "many", "99999999999"] {
            let err = Config::from_vars(vars(&[("DATABASE_MAX_CONNECTIONS", bad)])).unwrap_err();
            assert!(
                err.to_string().starts_with("DATABASE_MAX_CONNECTIONS: "),
                "{bad}: {err}"
            );
        }
    }

    #[test]
    fn cors_origins_are_kept_as_browsers_send_them() {
        let c = Config::from_vars(vars(&[(
            "CORS_ORIGINS",
            " https://App.Example.com , http://localhost:5173/,https://app.example.com:443",
        )]))
        .unwrap();
        assert_eq!(
            c.server.cors_origins,
            ["https://app.example.com", "http://localhost:5173"]
        );
        for bad in [
            "*",
            "app.example.com",
            "https://example.com/path",
            "ftp://example.com",
            "https://u@example.com",
        ] {
            assert!(Config::from_vars(vars(&[("CORS_ORIGINS", bad)])).is_err(), "{bad}");
        }
    }

    #[test]
    fn public_url_gives_the_sign_in_domain() {
        let c = Config::from_vars(vars(&[("PUBLIC_URL", "https://Wallet.example.com:8443/app/")])).unwrap();
        let public = c.security.public_url.unwrap();
        assert_eq!(public.host, "wallet.example.com:8443");
        assert_eq!(public.origin, "https://wallet.example.com:8443");
        assert!(Config::from_vars(vars(&[("PUBLIC_URL", "ftp://example.com")])).is_err());
        assert!(Config::from_vars(vars(&[("PUBLIC_URL", "not a url")])).is_err());
    }

    #[test]
    fn production_refuses_missing_key_and_disabled_auth() {
        assert!(Config::from_vars(vars(&[("APP_ENV", "production")])).is_err());
        let key = "11".repeat(32);
        let production = [
            ("APP_ENV", "production"),
            ("ENCRYPTION_KEY", &key),
            ("ADMIN_TOKEN", "adm"),
            ("PUBLIC_URL", "https://wallet.example.com"),
        ];
        assert!(Config::from_vars(vars(&production)).is_ok());
        let disabled = [&production[..], &[("DISABLE_AGENT_AUTH", "true")]].concat();
        assert!(Config::from_vars(vars(&disabled)).is_err());
    }

    #[test]
    fn production_refuses_to_run_without_a_public_url() {
        let key = "11".repeat(32);
        let without = [
            ("APP_ENV", "production"),
            ("ENCRYPTION_KEY", &key),
            ("ADMIN_TOKEN", "adm"),
        ];
        let err = Config::from_vars(vars(&without)).unwrap_err().to_string();
        assert!(err.contains("PUBLIC_URL"), "{err}");
        let with = [&without[..], &[("PUBLIC_URL", "https://wallet.example.com")]].concat();
        assert!(Config::from_vars(vars(&with)).is_ok());
        // Development keeps working without one (the sign-in domain is then the request's Host).
        assert!(Config::from_vars(vars(&[])).is_ok());
    }

    #[test]
    fn production_refuses_to_run_without_an_admin_token() {
        let key = "11".repeat(32);
        let err = Config::from_vars(vars(&[("APP_ENV", "production"), ("ENCRYPTION_KEY", &key)]))
            .unwrap_err()
            .to_string();
        assert!(err.contains("ADMIN_TOKEN"), "{err}");
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("admin-token");
        std::fs::write(&file, "from-a-file\n").unwrap();
        let file = file.display().to_string();
        let c = Config::from_vars(vars(&[
            ("APP_ENV", "production"),
            ("ENCRYPTION_KEY", &key),
            ("ADMIN_TOKEN_FILE", &file),
            ("PUBLIC_URL", "https://wallet.example.com"),
        ]))
        .unwrap();
        assert_eq!(c.security.admin_token.unwrap().expose_secret(), "from-a-file");
    }

    #[test]
    fn a_blank_admin_token_or_token_file_is_refused_not_read_as_unset() {
        let dir = tempfile::tempdir().unwrap();
        let empty = dir.path().join("empty");
        std::fs::write(&empty, " \n").unwrap();
        let empty = empty.display().to_string();
        let missing = dir.path().join("missing").display().to_string();
        for set in [
            [("ADMIN_TOKEN", "")],
            [("ADMIN_TOKEN", "  ")],
            [("ADMIN_TOKEN_FILE", "")],
            [("ADMIN_TOKEN_FILE", empty.as_str())],
            [("ADMIN_TOKEN_FILE", missing.as_str())],
        ] {
            let err = Config::from_vars(vars(&set)).unwrap_err().to_string();
            assert!(err.contains("ADMIN_TOKEN"), "{set:?}: {err}");
        }
        let c = Config::from_vars(vars(&[("ADMIN_TOKEN", "a"), ("ADMIN_TOKEN_FILE", &missing)])).unwrap();
        assert_eq!(c.security.admin_token.unwrap().expose_secret(), "a", "ADMIN_TOKEN wins");
    }

    #[test]
    fn disabled_agent_auth_is_refused_off_loopback() {
        for bind in ["0.0.0.0:8080", "192.0.2.1:80", "[::]:8080"] {
            let err = Config::from_vars(vars(&[("DISABLE_AGENT_AUTH", "true"), ("BIND_ADDR", bind)]))
                .unwrap_err()
                .to_string();
            assert!(err.contains("DISABLE_AGENT_AUTH") && err.contains("BIND_ADDR"), "{err}");
        }
        for bind in ["127.0.0.1:0", "127.0.0.2:8080", "[::1]:8080"] {
            assert!(Config::from_vars(vars(&[("DISABLE_AGENT_AUTH", "true"), ("BIND_ADDR", bind)])).is_ok());
        }
        assert!(Config::from_vars(vars(&[("BIND_ADDR", "0.0.0.0:8080")])).is_ok());
    }

    #[test]
    fn x402_settings_have_the_contract_defaults_and_are_checked() {
        let c = Config::from_vars(vars(&[])).unwrap();
        assert!(!c.x402.allow_private);
        assert_eq!(c.x402.max_response_bytes, 1_048_576);
        assert_eq!(c.x402.timeout, Duration::from_millis(30_000));
        let c = Config::from_vars(vars(&[
            ("X402_ALLOW_PRIVATE", "true"),
            ("X402_MAX_RESPONSE_BYTES", "100"),
            ("X402_TIMEOUT_MS", "2500"),
        ]))
        .unwrap();
        assert!(c.x402.allow_private);
        assert_eq!(c.x402.max_response_bytes, 100);
        assert_eq!(c.x402.timeout, Duration::from_millis(2500));
        for bad in [
            ("X402_ALLOW_PRIVATE", "maybe"),
            ("X402_MAX_RESPONSE_BYTES", "0"),
            ("X402_TIMEOUT_MS", "0"),
            ("X402_TIMEOUT_MS", "999999999"),
        ] {
            let err = Config::from_vars(vars(&[bad])).unwrap_err().to_string();
            assert!(err.starts_with(bad.0), "{err}");
        }
    }

    #[test]
    fn reissue_limits_must_be_positive() {
        assert!(Config::from_vars(vars(&[("REISSUE_LIMIT_PER_AGENT", "0")])).is_err());
        assert!(Config::from_vars(vars(&[("REISSUE_LIMIT_PER_IP", "0")])).is_err());
        let c = Config::from_vars(vars(&[])).unwrap();
        assert_eq!(
            (
                c.security.reissue_limit_per_agent.get(),
                c.security.reissue_limit_per_ip.get()
            ),
            (10, 100)
        );
    }

    #[test]
    fn encryption_key_accepts_hex_and_base64_only_of_32_bytes() {
        assert!(parse_encryption_key(&"ab".repeat(32)).is_ok());
        assert!(parse_encryption_key("q83vq83vq83vq83vq83vq83vq83vq83vq83vq83vq80=").is_ok());
        assert!(parse_encryption_key("abcd").is_err());
    }

    #[test]
    fn rpc_urls_and_confirmations_are_read_per_chain() {
        let c = Config::from_vars(vars(&[
            ("RPC_URL_BASE_SEPOLIA", "http://127.0.0.1:1"),
            ("CONFIRMATIONS_BASE", "3"),
        ]))
        .unwrap();
        assert_eq!(c.chains.rpc_urls[0].0, "base-sepolia");
        assert_eq!(c.chains.confirmations_for("base"), 3);
        assert!(Config::from_vars(vars(&[("CONFIRMATIONS_BASE", "0")])).is_err());
        assert!(Config::from_vars(vars(&[("RPC_URL_BASE", "ftp://x")])).is_err());
    }

    #[test]
    fn contracts_a_deployment_names_are_read_per_chain_and_checked() {
        let router = "0x00000000000000000000000000000000000000b2";
        let c = Config::from_vars(vars(&[(
            "CONTRACTS_BASE",
            &format!("Uniswap V2 router={router}, Vault.v2 = 0x00000000000000000000000000000000000000c3"),
        )]))
        .unwrap();
        let (chain, named) = &c.chains.contracts[0];
        assert_eq!(chain, "base");
        assert_eq!(named[0], ("Uniswap V2 router".to_string(), router.parse().unwrap()));
        assert_eq!(named[1].0, "Vault.v2");
        assert!(Config::from_vars(vars(&[])).unwrap().chains.contracts.is_empty());
        for bad in [
            router,
            "router=0x12",
            &format!("a<b>={router}"),
            &format!("a={router},b={router}"),
        ] {
            assert!(Config::from_vars(vars(&[("CONTRACTS_BASE", bad)])).is_err(), "{bad}");
        }
    }

    #[test]
    fn delegations_default_to_the_frameworks_deployments_and_can_be_set_or_turned_off() {
        use crate::domain::delegation::{Kind, deployments};
        let c = Config::from_vars(vars(&[])).unwrap();
        assert_eq!(
            c.chains.delegation_manager("base"),
            Some(deployments::DELEGATION_MANAGER)
        );
        assert_eq!(
            c.chains.delegation_manager("sepolia"),
            Some(deployments::DELEGATION_MANAGER)
        );
        let base = &c
            .chains
            .delegation_enforcers
            .iter()
            .find(|(n, _)| n == "base")
            .unwrap()
            .1;
        assert_eq!(base.len(), Kind::ALL.len());
        let manager = "0x00000000000000000000000000000000000000a1";
        let c = Config::from_vars(vars(&[
            ("DELEGATION_MANAGER_BASE", manager),
            (
                "DELEGATION_ENFORCERS_BASE",
                "timestamp=0x00000000000000000000000000000000000000b2",
            ),
            ("DELEGATION_MANAGER_OPTIMISM", "none"),
            ("DELEGATION_ENFORCERS_OPTIMISM", ""),
        ]))
        .unwrap();
        assert_eq!(c.chains.delegation_manager("base"), Some(manager.parse().unwrap()));
        let base = &c
            .chains
            .delegation_enforcers
            .iter()
            .find(|(n, _)| n == "base")
            .unwrap()
            .1;
        assert_eq!(
            base,
            &vec![(
                Kind::Timestamp,
                "0x00000000000000000000000000000000000000b2".parse().unwrap()
            )]
        );
        assert_eq!(c.chains.delegation_manager("optimism"), None);
        assert!(!c.chains.delegation_enforcers.iter().any(|(n, _)| n == "optimism"));
        for bad in [
            "nope=0x00000000000000000000000000000000000000b2",
            "timestamp",
            "timestamp=0x12",
        ] {
            let err = Config::from_vars(vars(&[("DELEGATION_ENFORCERS_BASE", bad)])).unwrap_err();
            assert!(err.to_string().contains("DELEGATION_ENFORCERS_BASE"), "{err}");
        }
        let twice =
            "timestamp=0x00000000000000000000000000000000000000b2,timestamp=0x00000000000000000000000000000000000000b3";
        assert!(Config::from_vars(vars(&[("DELEGATION_ENFORCERS_BASE", twice)])).is_err());
    }

    #[test]
    fn token_lists_add_tokens_per_chain_and_refuse_bad_entries() {
        let c = Config::from_vars(vars(&[(
            "TOKENS_BASE",
            "USDC:0x0000000000000000000000000000000000000abc:18,FOO:0x0000000000000000000000000000000000000def:2",
        )]))
        .unwrap();
        assert_eq!(c.chains.tokens.resolve("base:USDC").map(|a| a.decimals), Some(18));
        assert_eq!(c.chains.tokens.resolve("base:FOO").map(|a| a.decimals), Some(2));
        let err = Config::from_vars(vars(&[("TOKENS_BASE_SEPOLIA", "USDC:0xnope:6")])).unwrap_err();
        assert!(err.to_string().contains("TOKENS_BASE_SEPOLIA"), "{err}");
    }

    #[test]
    fn bad_values_name_the_variable() {
        let err = Config::from_vars(vars(&[("BIND_ADDR", "nope")]))
            .unwrap_err()
            .to_string();
        assert!(err.starts_with("BIND_ADDR"), "{err}");
        assert!(Config::from_vars(vars(&[("DATABASE_URL", "mysql://x")])).is_err());
    }

    #[test]
    fn a_loopback_rpc_url_is_a_local_node() {
        for url in [
            "http://127.0.0.1:8545",
            "http://localhost:8545/",
            "http://[::1]:8545",
            "ws://u:p@127.0.0.2/x",
        ] {
            assert!(is_loopback_url(url), "{url}");
        }
        for url in [
            "https://mainnet.base.org",
            "http://10.0.0.1:8545",
            "http://localhost.example.com",
            "127.0.0.1",
        ] {
            assert!(!is_loopback_url(url), "{url}");
        }
    }
}
