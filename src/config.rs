//! One typed configuration, read from environment variables (a `.env` file may add to them) and validated at load.
//! Each section of it lives in its own child module, which reads and checks that section's variables; this module holds
//! what they share (the error, the HTTP deadline) and puts the sections together.

use std::time::Duration;

mod chains;
mod database;
mod faults;
mod llm;
mod mcp;
mod security;
mod server;
mod sponsorship;
mod vars;
mod webhooks;
mod x402;

pub use chains::ChainsConfig;
pub use database::{DatabaseConfig, DatabaseKind};
pub use faults::Faults;
pub use llm::{LlmConfig, LlmProviderKind};
pub use mcp::McpConfig;
pub use security::{EncryptionKey, Pkcs11Config, PublicUrl, SecurityConfig, new_encryption_key, parse_encryption_key};
pub use server::ServerConfig;
pub use sponsorship::{SponsorParts, SponsorshipConfig};
pub use webhooks::WebhookConfig;
pub use x402::X402Config;

use vars::Vars;

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
    pub sponsorship: SponsorshipConfig,
    pub faults: Faults,
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
            x402: X402Config::read(&vars, app_env)?,
            webhooks: WebhookConfig::read(&vars)?,
            mcp: McpConfig::read(&vars)?,
            sponsorship: SponsorshipConfig::read(&vars)?,
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

#[cfg(test)]
mod tests {
    use std::path::PathBuf;

    use secrecy::ExposeSecret;

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
    fn offers_reach_private_upstreams_only_in_development() {
        assert!(!Config::from_vars(vars(&[])).unwrap().x402.offer_allow_private);
        let c = Config::from_vars(vars(&[("OFFER_ALLOW_PRIVATE", "true")])).unwrap();
        assert!(c.x402.offer_allow_private && !c.x402.allow_private);
        let key = "11".repeat(32);
        let production = [
            ("APP_ENV", "production"),
            ("ENCRYPTION_KEY", &key),
            ("ADMIN_TOKEN", "adm"),
            ("PUBLIC_URL", "https://wallet.example.com"),
            ("OFFER_ALLOW_PRIVATE", "true"),
        ];
        let err = Config::from_vars(vars(&production)).unwrap_err().to_string();
        assert!(err.contains("OFFER_ALLOW_PRIVATE"), "{err}");
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
}
