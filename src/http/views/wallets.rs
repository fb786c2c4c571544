//! Views of an agent's wallets: balances per chain (a figure or a failure each) and funding instructions.

use std::collections::BTreeMap;

use alloy::primitives::{Address, U256};
use serde::Serialize;
use utoipa::ToSchema;
use uuid::Uuid;

use super::error::FailureView;
use crate::domain::amount::format_units;
use crate::domain::chain::ChainInfo;

#[derive(Debug, Serialize, ToSchema)]
pub struct BalancesView {
    pub agent_id: Uuid,
    /// Chain name -> the balance there, or why it could not be read.
    pub balances: BTreeMap<String, BalanceEntryView>,
}

/// One chain's entry: a balance, or an error for that chain only.
#[derive(Debug, Serialize, ToSchema)]
#[serde(untagged)]
pub enum BalanceEntryView {
    Balance(BalanceView),
    Failed(FailedBalanceView),
}

#[derive(Debug, Serialize, ToSchema)]
pub struct BalanceView {
    /// EIP-55 address.
    pub address: String,
    /// Decimal string.
    pub wei: String,
    /// Decimal string in whole native units.
    pub formatted: String,
    pub symbol: &'static str,
}

impl BalanceView {
    pub fn new(chain: &ChainInfo, address: Address, wei: U256) -> Self {
        Self {
            address: address.to_checksum(None),
            wei: wei.to_string(),
            formatted: format_units(wei, chain.decimals),
            symbol: chain.native_symbol,
        }
    }
}

#[derive(Debug, Serialize, ToSchema)]
pub struct FailedBalanceView {
    /// EIP-55 address.
    pub address: String,
    pub error: FailureView,
}

/// Where and how to send funds to the agent.
#[derive(Debug, Serialize, ToSchema)]
pub struct FundingView {
    pub agent_id: Uuid,
    pub deposits: Vec<DepositView>,
    pub instructions: String,
}

#[derive(Debug, Serialize, ToSchema)]
pub struct DepositView {
    pub chain: &'static str,
    pub chain_id: u64,
    /// EIP-55 address.
    pub address: String,
    pub symbol: &'static str,
    /// The amount asked for (decimal string, native units), or null.
    #[schema(required = true)]
    pub amount: Option<String>,
    /// The same amount in wei (decimal string), or null.
    #[schema(required = true)]
    pub amount_wei: Option<String>,
    /// EIP-681: `ethereum:<address>@<chain_id>[?value=<wei>]`.
    pub payment_uri: String,
    pub explorer_url: String,
}
