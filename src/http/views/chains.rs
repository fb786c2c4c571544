//! Views of the chain registry and the health check.

use std::collections::BTreeMap;

use alloy::primitives::Address;
use chrono::{DateTime, Utc};
use serde::Serialize;
use utoipa::ToSchema;

use crate::domain::asset::Registry;
use crate::domain::chain::ChainInfo;
use crate::domain::delegation::Enforcers;
use crate::store::PoolStatus;

/// A registry chain and whether this server has an RPC URL for it.
#[derive(Debug, Serialize, ToSchema)]
pub struct ChainView {
    pub name: &'static str,
    pub chain_id: u64,
    pub native_symbol: &'static str,
    pub decimals: u8,
    pub explorer_url: &'static str,
    /// An RPC URL is set for this chain.
    pub configured: bool,
    /// The configured node is a local development node (its RPC URL's host is `localhost` or a loopback address,
    /// as with `scripts/demo.sh`'s anvil): its transactions exist on that node only, so `explorer_url` and the
    /// explorer links of transfers do not show them. A client labels such a network as local. (Not required in the
    /// schema: clients of servers before this field treat its absence as `false`.)
    #[schema(required = false)]
    pub local_node: bool,
    /// The registry's ERC-20 tokens on this chain.
    pub tokens: Vec<TokenView>,
    /// On-chain delegations (§21) on this chain: the `DelegationManager` and the caveat enforcers agentd reads, what
    /// a client needs to build and sign a delegation (EIP-712 domain `DelegationManager`, version `1`, this chain
    /// id, `verifyingContract` the manager); `null` on a chain without a manager (`delegations_unavailable`). (Not
    /// required in the schema: clients of servers before this field treat its absence as `null`.)
    #[schema(required = false)]
    pub delegations: Option<ChainDelegationsView>,
    /// Beyond the contract: contracts this deployment names on this chain (`CONTRACTS_<CHAIN>`; the demo's
    /// Uniswap V2 router), which a client may offer to call. Naming one allows nothing: calls to it are judged by
    /// the policy like any other. (Not required in the schema: clients of servers before this field treat its
    /// absence as none.)
    #[schema(required = false)]
    pub contracts: Vec<ContractView>,
    /// Gas the operator sponsors (§22): `null` where the chain is not sponsorable (a part not configured, or not
    /// checking out at start: the log says why). (Not required in the schema: clients of servers before this field
    /// treat its absence as `null`.)
    #[schema(required = false)]
    pub sponsorship: Option<ChainSponsorshipView>,
}

/// A sponsorable chain's parts and what they hold, read at the latest block (§22).
#[derive(Debug, Serialize, ToSchema)]
pub struct ChainSponsorshipView {
    pub entry_point: String,
    pub paymaster: String,
    pub account_implementation: String,
    /// The sponsor key's address: the paymaster's signer and the bundles' sender and beneficiary.
    pub sponsor: String,
    /// The paymaster's `signers(sponsor)`.
    pub trusted: bool,
    /// The paymaster's `isBundlerAllowed(sponsor)`.
    pub bundler_allowed: bool,
    /// Every address the paymaster's `SignerAdded`/`SignerRemoved` logs leave trusted.
    pub signers: Vec<String>,
    /// Some signer is not the sponsor: the deposit is not agentd's alone.
    pub shared: bool,
    /// The paymaster's balance at the EntryPoint, in whole native units.
    pub deposit: String,
    /// The sponsor's balance, in whole native units (it pays the bundles' gas, paid back by the EntryPoint).
    pub sponsor_balance: String,
}

impl ChainSponsorshipView {
    pub fn new(sponsor: &crate::sponsor::SponsorChain, status: &crate::sponsor::status::Status) -> Self {
        let address = sponsor.key.address();
        let units = |v| crate::domain::amount::format_units(v, sponsor.chain.decimals);
        ChainSponsorshipView {
            entry_point: sponsor.entry_point.to_checksum(None),
            paymaster: sponsor.paymaster.to_checksum(None),
            account_implementation: sponsor.account_implementation.to_checksum(None),
            sponsor: address.to_checksum(None),
            trusted: status.trusted,
            bundler_allowed: status.bundler_allowed,
            signers: status.signers.iter().map(|s| s.to_checksum(None)).collect(),
            shared: status.shared(address),
            deposit: units(status.deposit),
            sponsor_balance: units(status.sponsor_balance),
        }
    }
}

/// A contract the deployment names for its clients (`CONTRACTS_<CHAIN>`).
#[derive(Debug, Serialize, ToSchema)]
pub struct ContractView {
    /// The operator's label (`Uniswap V2 router`).
    pub name: String,
    /// EIP-55 address.
    pub address: String,
}

/// The delegation framework a chain is configured with (`DELEGATION_MANAGER_<CHAIN>`, `DELEGATION_ENFORCERS_<CHAIN>`).
#[derive(Debug, Serialize, ToSchema)]
pub struct ChainDelegationsView {
    /// EIP-55 address of the `DelegationManager`.
    pub manager: String,
    /// Each configured enforcer's EIP-55 address by its configuration name (`erc20_period_transfer`, …, the names
    /// of `DELEGATION_ENFORCERS_<CHAIN>`).
    #[schema(value_type = std::collections::BTreeMap<String, String>)]
    pub enforcers: BTreeMap<&'static str, String>,
}

impl ChainDelegationsView {
    pub fn new(manager: Address, enforcers: &Enforcers) -> Self {
        Self {
            manager: manager.to_checksum(None),
            enforcers: enforcers
                .iter()
                .map(|(kind, address)| (kind.name(), address.to_checksum(None)))
                .collect(),
        }
    }
}

/// A registry token.
#[derive(Debug, Serialize, ToSchema)]
pub struct TokenView {
    pub symbol: String,
    /// EIP-55 address of the token contract.
    pub address: String,
    pub decimals: u8,
}

impl ChainView {
    pub fn new(
        chain: &ChainInfo,
        configured: bool,
        local_node: bool,
        assets: &Registry,
        delegations: Option<ChainDelegationsView>,
        contracts: &[(String, Address)],
    ) -> Self {
        Self {
            name: chain.name,
            chain_id: chain.chain_id,
            native_symbol: chain.native_symbol,
            decimals: chain.decimals,
            explorer_url: chain.explorer_url,
            configured,
            local_node,
            tokens: assets
                .tokens(chain)
                .map(|t| TokenView {
                    symbol: t.symbol.clone(),
                    address: t.token.unwrap_or_default().to_checksum(None),
                    decimals: t.decimals,
                })
                .collect(),
            delegations,
            contracts: contracts
                .iter()
                .map(|(name, address)| ContractView {
                    name: name.clone(),
                    address: address.to_checksum(None),
                })
                .collect(),
            sponsorship: None,
        }
    }
}

#[derive(Debug, Serialize, ToSchema)]
pub struct HealthView {
    /// `ok`.
    pub status: &'static str,
    pub version: &'static str,
    /// `ok`: the database answered.
    pub database: &'static str,
    /// This instance's database connections, and whether they ran out.
    pub database_pool: PoolView,
}

/// A connection pool's size and use. Connections ran out when a wait for one passed its timeout (10 s) or the
/// server refused a new one at its limit (`max_connections`, or the role's `CONNECTION LIMIT`): the instance goes
/// on with what it has, and says so here and in its log.
#[derive(Debug, Serialize, ToSchema)]
pub struct PoolView {
    /// The most connections the instance opens (`DATABASE_MAX_CONNECTIONS` on PostgreSQL; on SQLite, its writer
    /// pool's 8).
    pub max_connections: u32,
    /// Open now, in use or idle (on PostgreSQL, the two that listen for other instances among them).
    pub open: u32,
    pub idle: u32,
    /// How many times connections ran out since the start.
    pub ran_out: u64,
    pub last_ran_out_at: Option<DateTime<Utc>>,
    /// Whether they ran out in the last 5 minutes.
    pub ran_out_recently: bool,
}

impl From<PoolStatus> for PoolView {
    fn from(status: PoolStatus) -> Self {
        PoolView {
            max_connections: status.max_connections,
            open: status.open,
            idle: status.idle,
            ran_out: status.ran_out,
            last_ran_out_at: status.last_ran_out_at,
            ran_out_recently: status.ran_out_recently,
        }
    }
}
