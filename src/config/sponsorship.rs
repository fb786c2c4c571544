//! The `sponsorship` section (§22): per chain, the EntryPoint, the account implementation an agent's address
//! designates by EIP-7702, and the paymaster the operator owns. A chain is sponsorable only when all three are set
//! (and check out at start, `crate::sponsor`); batches need the first two.

use alloy::primitives::Address;

use super::ConfigError;
use super::vars::Vars;
use crate::domain::chain::{self as registry, CHAINS};
use crate::domain::delegation::deployments;

/// What one chain is configured with for sponsored gas and batches.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SponsorParts {
    /// `ENTRY_POINT_<CHAIN>`: default the canonical v0.7 EntryPoint.
    pub entry_point: Option<Address>,
    /// `ACCOUNT_IMPLEMENTATION_<CHAIN>`: default the framework's v1.3 `EIP7702StatelessDeleGator` where deployed.
    pub account_implementation: Option<Address>,
    /// `ACCOUNT_IMPLEMENTATION_PREVIOUS_<CHAIN>`: earlier implementations still read as `smart`.
    pub previous_implementations: Vec<Address>,
    /// `PAYMASTER_<CHAIN>`: no default (the operator deploys its own `SingletonPaymaster` v0.7).
    pub paymaster: Option<Address>,
}

/// Every chain's parts, by chain name (chains with none of them set are left out).
#[derive(Debug, Default)]
pub struct SponsorshipConfig {
    pub chains: Vec<(String, SponsorParts)>,
}

impl SponsorshipConfig {
    /// The parts configured for `chain` (all `None` when nothing is).
    pub fn parts(&self, chain: &str) -> SponsorParts {
        self.chains
            .iter()
            .find(|(name, _)| name == chain)
            .map(|(_, parts)| parts.clone())
            .unwrap_or_default()
    }

    pub(super) fn read(vars: &Vars) -> Result<Self, ConfigError> {
        let mut chains = Vec::new();
        for chain in CHAINS {
            let suffix = registry::env_suffix(chain.name);
            let deployed = deployments::CHAIN_IDS.contains(&chain.chain_id);
            let implementation_default = deployed.then_some(deployments::EIP7702_STATELESS_DELEGATOR);
            let parts = SponsorParts {
                entry_point: address(vars, "ENTRY_POINT_<CHAIN>", &suffix, Some(deployments::ENTRY_POINT_V07))?,
                account_implementation: address(
                    vars,
                    "ACCOUNT_IMPLEMENTATION_<CHAIN>",
                    &suffix,
                    implementation_default,
                )?,
                previous_implementations: addresses(vars, "ACCOUNT_IMPLEMENTATION_PREVIOUS_<CHAIN>", &suffix)?,
                paymaster: address(vars, "PAYMASTER_<CHAIN>", &suffix, None)?,
            };
            if parts != SponsorParts::default() {
                chains.push((chain.name.to_string(), parts));
            }
        }
        Ok(SponsorshipConfig { chains })
    }
}

/// `var` with `<CHAIN>` made `suffix`: its address, `default` when unset, none when set to `none` or empty.
fn address(
    vars: &Vars,
    var: &'static str,
    suffix: &str,
    default: Option<Address>,
) -> Result<Option<Address>, ConfigError> {
    let name = var.replace("<CHAIN>", suffix);
    match vars.get_or_off(&name) {
        None => Ok(default),
        Some(v) if v.is_empty() => Ok(None),
        Some(v) => v.parse().map(Some).map_err(|_| ConfigError::Invalid {
            var,
            reason: format!("{name} must be a 0x address, or none"),
        }),
    }
}

/// A comma-separated list of addresses (none when unset).
fn addresses(vars: &Vars, var: &'static str, suffix: &str) -> Result<Vec<Address>, ConfigError> {
    let name = var.replace("<CHAIN>", suffix);
    let Some(spec) = vars.get(&name) else {
        return Ok(Vec::new());
    };
    spec.split(',')
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .map(|s| {
            s.parse().map_err(|_| ConfigError::Invalid {
                var,
                reason: format!("{name} must list 0x addresses, comma separated"),
            })
        })
        .collect()
}
