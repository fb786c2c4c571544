//! Views of an agent's wallets: balances per chain (a figure or a failure each) and funding instructions.

use std::collections::BTreeMap;

use alloy::primitives::{Address, U256};
use serde::Serialize;
use utoipa::ToSchema;
use uuid::Uuid;

use super::error::FailureView;
use crate::chain::ChainError;
use crate::domain::amount::format_units;
use crate::domain::asset::Asset;
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
    /// The registry's ERC-20 tokens of the chain, by symbol: a balance or that token's error.
    pub tokens: BTreeMap<String, TokenBalanceEntryView>,
    /// What the address holds as code (§22): `eoa`, `smart` (it designates the configured account implementation)
    /// or `foreign` (other code: nothing sponsored or batched is signed for it). Absent where no account
    /// implementation is configured, or the code could not be read.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(nullable = false, example = "eoa")]
    pub account: Option<&'static str>,
}

impl BalanceView {
    pub fn new(chain: &ChainInfo, address: Address, wei: U256, tokens: &[(Asset, Result<U256, ChainError>)]) -> Self {
        Self {
            address: address.to_checksum(None),
            wei: wei.to_string(),
            formatted: format_units(wei, chain.decimals),
            symbol: chain.native_symbol,
            tokens: tokens
                .iter()
                .map(|(token, balance)| (token.symbol.clone(), TokenBalanceEntryView::new(token, balance)))
                .collect(),
            account: None,
        }
    }
}

/// One token's entry: its balance, or an error for that token only.
#[derive(Debug, Serialize, ToSchema)]
#[serde(untagged)]
pub enum TokenBalanceEntryView {
    Balance(TokenBalanceView),
    Failed(FailedTokenBalanceView),
}

impl TokenBalanceEntryView {
    pub fn new(token: &Asset, balance: &Result<U256, ChainError>) -> Self {
        let address = token.token.unwrap_or_default().to_checksum(None);
        match balance {
            Ok(units) => Self::Balance(TokenBalanceView {
                address,
                units: units.to_string(),
                formatted: format_units(*units, token.decimals),
                decimals: token.decimals,
            }),
            Err(e) => Self::Failed(FailedTokenBalanceView {
                address,
                error: FailureView {
                    code: e.code().to_string(),
                    message: e.to_string(),
                },
            }),
        }
    }
}

#[derive(Debug, Serialize, ToSchema)]
pub struct TokenBalanceView {
    /// EIP-55 address of the token contract.
    pub address: String,
    /// Decimal string of base units.
    pub units: String,
    /// Decimal string in whole tokens.
    pub formatted: String,
    pub decimals: u8,
}

#[derive(Debug, Serialize, ToSchema)]
pub struct FailedTokenBalanceView {
    /// EIP-55 address of the token contract.
    pub address: String,
    pub error: FailureView,
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
    /// The asset to send: the native symbol, or the token asked for.
    pub symbol: String,
    /// EIP-55 address of the token contract when a token was asked for; null for the native coin.
    #[schema(required = true)]
    pub token_address: Option<String>,
    /// The amount asked for (decimal string, whole units of the asset), or null.
    #[schema(required = true)]
    pub amount: Option<String>,
    /// The same amount in base units (wei for the native coin; decimal string), or null.
    #[schema(required = true)]
    pub amount_wei: Option<String>,
    /// EIP-681: `ethereum:<address>@<chain_id>[?value=<wei>]`, or for a token
    /// `ethereum:<token>@<chain_id>/transfer?address=<address>[&uint256=<base units>]`.
    pub payment_uri: String,
    pub explorer_url: String,
}
