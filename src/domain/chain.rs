//! The static chain registry: names, chain ids, native symbols and explorers of the EVM chains agentd knows.

use serde::Serialize;

/// One chain the service knows about. Static data; whether it is usable depends on configuration.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct ChainInfo {
    pub name: &'static str,
    pub chain_id: u64,
    pub native_symbol: &'static str,
    pub decimals: u8,
    pub explorer_url: &'static str,
}

/// Every chain of the registry, in display order.
pub const CHAINS: &[ChainInfo] = &[
    chain("ethereum", 1, "ETH", "https://etherscan.io"),
    chain("base", 8453, "ETH", "https://basescan.org"),
    chain("optimism", 10, "ETH", "https://optimistic.etherscan.io"),
    chain("arbitrum", 42161, "ETH", "https://arbiscan.io"),
    chain("polygon", 137, "POL", "https://polygonscan.com"),
    chain("sepolia", 11155111, "ETH", "https://sepolia.etherscan.io"),
    chain("base-sepolia", 84532, "ETH", "https://sepolia.basescan.org"),
];

const fn chain(
    name: &'static str,
    chain_id: u64,
    native_symbol: &'static str,
    explorer_url: &'static str,
) -> ChainInfo {
    ChainInfo {
        name,
        chain_id,
        native_symbol,
        decimals: 18,
        explorer_url,
    }
}

/// Looks a chain up by its registry name (exact, lower-case).
pub fn find(name: &str) -> Option<&'static ChainInfo> {
    CHAINS.iter().find(|c| c.name == name)
}

/// The environment-variable suffix of a chain: upper-cased, `-` as `_` (`base-sepolia` -> `BASE_SEPOLIA`).
pub fn env_suffix(name: &str) -> String {
    name.to_ascii_uppercase().replace('-', "_")
}

impl ChainInfo {
    /// Explorer link for a transaction hash.
    pub fn tx_url(&self, tx_hash: &str) -> String {
        format!("{}/tx/{}", self.explorer_url, tx_hash)
    }

    /// Explorer link for an address.
    pub fn address_url(&self, address: &str) -> String {
        format!("{}/address/{}", self.explorer_url, address)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn env_suffix_upper_cases_and_replaces_dashes() {
        assert_eq!(env_suffix("base-sepolia"), "BASE_SEPOLIA");
        assert_eq!(env_suffix("ethereum"), "ETHEREUM");
    }

    #[test]
    fn registry_names_are_unique_and_findable() {
        for c in CHAINS {
            assert_eq!(find(c.name), Some(c));
        }
        assert!(find("Ethereum").is_none());
    }
}
