//! The agent aggregate, its capabilities, and the validation rules of its fields.

use std::collections::BTreeMap;

use alloy::primitives::{Address, U256};
use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use uuid::Uuid;

use crate::domain::chain as registry;

/// What an agent is allowed to do; each unlocks a group of chat tools.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Capability {
    Read,
    Compare,
    Transact,
    Analytics,
}

impl Capability {
    pub const ALL: [Capability; 4] = [
        Capability::Read,
        Capability::Compare,
        Capability::Transact,
        Capability::Analytics,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            Capability::Read => "read",
            Capability::Compare => "compare",
            Capability::Transact => "transact",
            Capability::Analytics => "analytics",
        }
    }

    pub fn parse(text: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|c| c.as_str() == text)
    }
}

/// An agent as stored, with its addresses.
#[derive(Debug, Clone, PartialEq)]
pub struct Agent {
    pub id: Uuid,
    pub name: String,
    pub description: Option<String>,
    pub chains: Vec<String>,
    pub capabilities: Vec<Capability>,
    pub spending_cap_wei: U256,
    /// Owner wallets by chain: humans who may prove ownership for token reissue.
    pub owner_addresses: BTreeMap<String, Address>,
    /// The agent's own custodial addresses by chain.
    pub wallet_addresses: BTreeMap<String, Address>,
    /// What counts against the cap per chain, in wei (as stored when the agent was read).
    pub spent_wei: BTreeMap<String, U256>,
    pub is_active: bool,
    pub created_at: DateTime<Utc>,
    pub updated_at: DateTime<Utc>,
}

impl Agent {
    pub fn has(&self, capability: Capability) -> bool {
        self.capabilities.contains(&capability)
    }

    pub fn has_chain(&self, chain: &str) -> bool {
        self.chains.iter().any(|c| c == chain)
    }
}

/// The chains of a new agent when none are given.
pub fn default_chains() -> Vec<String> {
    vec!["ethereum".into(), "base".into()]
}

/// `name`: 1–100 characters after trimming. Returns the trimmed name.
pub fn validate_name(name: &str) -> Result<String, String> {
    let trimmed = name.trim();
    match trimmed.chars().count() {
        0 => Err("must not be empty".into()),
        n if n > 100 => Err("must be at most 100 characters".into()),
        _ => Ok(trimmed.to_string()),
    }
}

/// `description`: at most 1000 characters.
pub fn validate_description(description: &str) -> Result<String, String> {
    if description.chars().count() > 1000 {
        return Err("must be at most 1000 characters".into());
    }
    Ok(description.to_string())
}

/// `chains`: a non-empty list of registry names; duplicates folded, order kept.
pub fn validate_chains(chains: &[String]) -> Result<Vec<String>, String> {
    if chains.is_empty() {
        return Err("must list at least one chain".into());
    }
    let mut out: Vec<String> = Vec::with_capacity(chains.len());
    for chain in chains {
        if registry::find(chain).is_none() {
            return Err(format!(
                "unknown chain '{}'; known: {}",
                truncate(chain),
                known_chains()
            ));
        }
        if !out.contains(chain) {
            out.push(chain.clone());
        }
    }
    Ok(out)
}

/// `capabilities`: a subset of read, compare, transact, analytics; empty means `["read"]`.
pub fn validate_capabilities(capabilities: &[String]) -> Result<Vec<Capability>, String> {
    let mut out = Vec::new();
    for text in capabilities {
        let cap = Capability::parse(text).ok_or_else(|| {
            format!(
                "unknown capability '{}'; known: read, compare, transact, analytics",
                truncate(text)
            )
        })?;
        if !out.contains(&cap) {
            out.push(cap);
        }
    }
    if out.is_empty() {
        out.push(Capability::Read);
    }
    Ok(out)
}

/// `owner_addresses`: `{chain: 0x address}` with registry chains and valid EVM addresses.
pub fn validate_owner_addresses(owners: &BTreeMap<String, String>) -> Result<BTreeMap<String, Address>, String> {
    let mut out = BTreeMap::new();
    for (chain, address) in owners {
        if registry::find(chain).is_none() {
            return Err(format!("unknown chain '{}'", truncate(chain)));
        }
        let address = parse_address(address).ok_or_else(|| {
            format!(
                "'{}' (the owner on {chain}) is not a valid 0x address: 40 hex digits, mixed case only as an EIP-55 \
                 checksum",
                truncate(address)
            )
        })?;
        out.insert(chain.clone(), address);
    }
    Ok(out)
}

/// Parses a 0x-prefixed 20-byte hex address. Mixed case must carry a valid EIP-55 checksum.
pub fn parse_address(text: &str) -> Option<Address> {
    let hex = text.strip_prefix("0x")?;
    if hex.len() != 40 || !hex.bytes().all(|b| b.is_ascii_hexdigit()) {
        return None;
    }
    let all_one_case = hex == hex.to_ascii_lowercase() || hex == hex.to_ascii_uppercase();
    if all_one_case {
        text.parse().ok()
    } else {
        Address::parse_checksummed(text, None).ok()
    }
}

fn known_chains() -> String {
    registry::CHAINS.iter().map(|c| c.name).collect::<Vec<_>>().join(", ")
}

fn truncate(text: &str) -> String {
    text.chars().take(40).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn strings(items: &[&str]) -> Vec<String> {
        items.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn names_are_trimmed_and_bounded() {
        assert_eq!(validate_name("  Ada  ").unwrap(), "Ada");
        assert!(validate_name("   ").is_err());
        assert!(validate_name(&"x".repeat(101)).is_err());
        assert!(validate_name(&"é".repeat(100)).is_ok());
    }

    #[test]
    fn chains_fold_duplicates_and_keep_order() {
        assert_eq!(
            validate_chains(&strings(&["base", "ethereum", "base"])).unwrap(),
            strings(&["base", "ethereum"])
        );
        assert!(validate_chains(&[]).is_err());
        assert!(validate_chains(&strings(&["solana"])).is_err());
    }

    #[test]
    fn capabilities_default_to_read() {
        assert_eq!(validate_capabilities(&[]).unwrap(), vec![Capability::Read]);
        assert_eq!(
            validate_capabilities(&strings(&["transact", "read", "transact"])).unwrap(),
            vec![Capability::Transact, Capability::Read]
        );
        assert!(validate_capabilities(&strings(&["admin"])).is_err());
    }

    #[test]
    fn addresses_need_hex_and_a_valid_checksum_when_mixed_case() {
        assert!(parse_address("0x52908400098527886e0f7030069857d2e4169ee7").is_some());
        assert!(parse_address("0x52908400098527886E0F7030069857D2E4169EE7").is_some());
        assert!(parse_address("0x5aAeb6053F3E94C9b9A09f33669435E7Ef1BeAed").is_some());
        assert!(parse_address("0x5aAeb6053F3E94C9b9A09f33669435E7Ef1BeAeD").is_none());
        assert!(parse_address("5aAeb6053F3E94C9b9A09f33669435E7Ef1BeAed").is_none());
        assert!(parse_address("0x1234").is_none());
    }
}
