//! The set of configured chain clients, built once from `RPC_URL_<CHAIN>` settings.

use std::time::Duration;

use alloy::transports::http::reqwest;

use super::client::ChainClient;
use super::error::ChainError;
use super::node::Node;
use crate::domain::asset::Registry;
use crate::domain::chain::{self as registry, CHAINS};

/// Idle connections to a node are kept this long for reuse across calls.
const POOL_IDLE_TIMEOUT: Duration = Duration::from_secs(60);

/// All configured chains. Chains of the registry without a URL answer `NotConfigured`.
#[derive(Clone, Default)]
pub struct Chains {
    /// In registry order.
    clients: Vec<ChainClient>,
    /// The ERC-20 tokens of every registry chain (configured or not).
    tokens: std::sync::Arc<Registry>,
    /// The delegation framework's `DelegationManager` per chain name (the MetaMask Delegation Framework), configured or not.
    delegation_managers: std::sync::Arc<Vec<(String, alloy::primitives::Address)>>,
    /// Nodes standing in for configured clients' on the money path (`with_node`: a unit test's scripted node).
    nodes: Vec<(&'static str, std::sync::Arc<dyn Node>)>,
}

impl std::fmt::Debug for Chains {
    // Names only: the URLs may embed API keys.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Chains")
            .field("configured", &self.configured_names())
            .finish()
    }
}

impl Chains {
    /// Builds one client per `(chain name, RPC URL)` pair; a later pair for the same chain wins.
    /// Unknown names and URLs that are not absolute http(s) URLs are configuration errors. All
    /// clients share one HTTP connection pool. Nothing is sent to any node here.
    pub fn new(urls: Vec<(String, String)>, timeout: Duration) -> Result<Chains, ChainError> {
        let mut parsed = Vec::with_capacity(urls.len());
        for (name, url) in urls {
            let info = registry::find(&name).ok_or_else(|| ChainError::UnknownChain { chain: name.clone() })?;
            let url = reqwest::Url::parse(url.trim())
                .ok()
                .filter(|u| matches!(u.scheme(), "http" | "https") && u.host_str().is_some())
                .ok_or_else(|| ChainError::InvalidUrl { chain: name.clone() })?;
            parsed.retain(|(i, _): &(&registry::ChainInfo, reqwest::Url)| i.name != info.name);
            parsed.push((info, url));
        }
        if parsed.is_empty() {
            return Ok(Chains::default());
        }
        let http = reqwest::Client::builder()
            .connect_timeout(timeout)
            // A backstop only: each call is bounded by its own timeout in the client.
            .timeout(timeout.saturating_mul(2))
            .pool_idle_timeout(POOL_IDLE_TIMEOUT)
            .user_agent(concat!("agentd/", env!("CARGO_PKG_VERSION")))
            .build()
            .map_err(|_| ChainError::Unavailable {
                chain: parsed[0].0.name.to_owned(),
                reason: "the HTTP client could not be initialised".to_owned(),
            })?;
        // Registry order, so listings are stable whatever the order of the settings.
        let clients = CHAINS
            .iter()
            .filter_map(|c| parsed.iter().find(|(i, _)| i.name == c.name))
            .map(|(info, url)| ChainClient::new(info, url.clone(), http.clone(), timeout))
            .collect();
        Ok(Chains {
            clients,
            tokens: Default::default(),
            delegation_managers: Default::default(),
            nodes: Vec::new(),
        })
    }

    /// The same chains reading the ages of their caches and rechecks on `clock` (a test's, which it can move ahead).
    pub fn with_clock(mut self, clock: std::sync::Arc<dyn crate::domain::clock::Clock>) -> Chains {
        self.clients = self.clients.into_iter().map(|c| c.with_clock(clock.clone())).collect();
        self
    }

    /// The same chains with `tokens` as the token registry (the built-in one by default).
    pub fn with_tokens(mut self, tokens: Registry) -> Chains {
        self.tokens = std::sync::Arc::new(tokens);
        self
    }

    /// The same chains with `managers` as the delegation framework's managers.
    pub fn with_delegation_managers(mut self, managers: Vec<(String, alloy::primitives::Address)>) -> Chains {
        self.delegation_managers = std::sync::Arc::new(managers);
        self
    }

    /// Every chain's `DelegationManager`: typed data any of them verifies is never signed (one key signs for every
    /// chain, §18).
    pub fn delegation_managers(&self) -> Vec<alloy::primitives::Address> {
        self.delegation_managers.iter().map(|(_, a)| *a).collect()
    }

    /// Whether `name` is configured with a node on this machine (its transactions exist on that node only).
    pub fn is_local_node(&self, name: &str) -> bool {
        self.clients.iter().any(|c| c.name() == name && c.is_local_node())
    }

    /// The token registry.
    pub fn tokens(&self) -> &std::sync::Arc<Registry> {
        &self.tokens
    }

    /// The `(chain, url)` pairs of the registry chains whose `RPC_URL_<CHAIN>` is set and not
    /// blank, read through `lookup` (e.g. `|var| std::env::var(var).ok()`), for `Chains::new`.
    pub fn urls_from(lookup: impl Fn(&str) -> Option<String>) -> Vec<(String, String)> {
        CHAINS
            .iter()
            .filter_map(|c| {
                let url = lookup(&format!("RPC_URL_{}", registry::env_suffix(c.name)))?;
                (!url.trim().is_empty()).then(|| (c.name.to_owned(), url.trim().to_owned()))
            })
            .collect()
    }

    /// Sets `CONFIRMATIONS_<CHAIN>` for a configured chain (values below 1 count as 1).
    pub fn set_confirmations(&mut self, name: &str, confirmations: u64) -> Result<(), ChainError> {
        let client = self.clients.iter_mut().find(|c| c.name() == name);
        match client {
            Some(client) => {
                client.set_confirmations(confirmations);
                Ok(())
            }
            None => Err(self.missing(name)),
        }
    }

    /// The client of a chain: `UnknownChain` for a name outside the registry, `NotConfigured`
    /// for a registry chain without a URL.
    pub fn get(&self, name: &str) -> Result<&ChainClient, ChainError> {
        self.clients
            .iter()
            .find(|c| c.name() == name)
            .ok_or_else(|| self.missing(name))
    }

    /// The node the money path uses for a chain (`Transfers`): its client, or the node that stands in for it.
    pub fn node(&self, name: &str) -> Result<&dyn Node, ChainError> {
        if let Some((_, node)) = self.nodes.iter().find(|(n, _)| *n == name) {
            return Ok(node.as_ref());
        }
        self.get(name).map(|c| c as &dyn Node)
    }

    /// The same chains with `node` in place of its chain's client on the money path (the transfer service's unit
    /// tests script one); the chain need not have a URL.
    pub fn with_node(mut self, node: std::sync::Arc<dyn Node>) -> Chains {
        let name = node.info().name;
        self.nodes.retain(|(n, _)| *n != name);
        self.nodes.push((name, node));
        self
    }

    /// Whether the chain has an RPC URL.
    pub fn is_configured(&self, name: &str) -> bool {
        self.clients.iter().any(|c| c.name() == name)
    }

    /// The configured clients, in registry order.
    pub fn iter(&self) -> impl Iterator<Item = &ChainClient> {
        self.clients.iter()
    }

    /// Names of the configured chains, in registry order.
    pub fn configured_names(&self) -> Vec<&'static str> {
        self.clients.iter().map(|c| c.name()).collect()
    }

    /// Starts a background chain-id check of every configured node; returns at once.
    pub fn verify_at_start(&self) {
        for client in &self.clients {
            client.verify_at_start();
        }
    }

    fn missing(&self, name: &str) -> ChainError {
        match registry::find(name) {
            Some(_) => ChainError::NotConfigured { chain: name.to_owned() },
            None => ChainError::UnknownChain { chain: name.to_owned() },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn urls(pairs: &[(&str, &str)]) -> Vec<(String, String)> {
        pairs.iter().map(|(n, u)| (n.to_string(), u.to_string())).collect()
    }

    #[test]
    fn lookups_distinguish_unknown_and_unconfigured() {
        let chains = Chains::new(urls(&[("base", "http://127.0.0.1:1")]), Duration::from_secs(1)).unwrap();
        assert!(chains.is_configured("base"));
        assert!(!chains.is_configured("ethereum"));
        assert_eq!(chains.get("base").unwrap().info().chain_id, 8453);
        assert_eq!(chains.get("ethereum").unwrap_err().code(), "chain_not_configured");
        assert_eq!(chains.get("dogecoin").unwrap_err().code(), "unknown_chain");
    }

    #[test]
    fn bad_urls_are_config_errors_without_the_url() {
        for bad in ["not a url", "ftp://host/x", "/relative", "wss://host/key"] {
            let err = Chains::new(urls(&[("base", bad)]), Duration::from_secs(1)).unwrap_err();
            assert_eq!(err, ChainError::InvalidUrl { chain: "base".into() });
        }
        let err = Chains::new(urls(&[("moon", "http://x")]), Duration::from_secs(1)).unwrap_err();
        assert_eq!(err.code(), "unknown_chain");
    }

    #[test]
    fn urls_come_from_rpc_url_variables() {
        let found = Chains::urls_from(|var| match var {
            "RPC_URL_BASE_SEPOLIA" => Some(" http://a ".into()),
            "RPC_URL_ETHEREUM" => Some("  ".into()),
            _ => None,
        });
        assert_eq!(found, urls(&[("base-sepolia", "http://a")]));
    }

    #[test]
    fn debug_never_prints_urls() {
        let secret = "https://eth.example.com/v2/SECRETKEY";
        let mut chains = Chains::new(
            urls(&[("ethereum", secret), ("base", "http://127.0.0.1:1")]),
            Duration::from_secs(1),
        )
        .unwrap();
        chains.set_confirmations("base", 3).unwrap();
        let shown = format!("{chains:?} {:?}", chains.get("ethereum").unwrap());
        assert!(!shown.contains("SECRETKEY"), "{shown}");
        assert_eq!(chains.configured_names(), vec!["ethereum", "base"]);
        assert_eq!(chains.get("base").unwrap().confirmations(), 3);
    }
}
