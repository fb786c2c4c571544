//! The `chains` section: the chain nodes, how transfers on them are watched, and what each chain's deployment names
//! (tokens, the delegation framework, contracts).

use std::collections::HashMap;
use std::time::Duration;

use secrecy::{ExposeSecret, SecretString};

use super::ConfigError;
use super::vars::Vars;
use crate::domain::chain::{self as registry, CHAINS};
use crate::domain::delegation;

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

impl ChainsConfig {
    pub(super) fn read(vars: &Vars) -> Result<Self, ConfigError> {
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

#[cfg(test)]
mod tests {
    use super::*;

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
