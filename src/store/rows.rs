//! Conversions between stored column values and domain types, shared by both backends.

use std::collections::BTreeMap;

use alloy::primitives::{Address, U256};

use super::{StoreError, StoreResult};
use crate::domain::agent::Capability;

pub fn chains_to_text(chains: &[String]) -> String {
    serde_json::to_string(chains).expect("a list of strings serialises")
}

pub fn chains_from_text(text: &str) -> StoreResult<Vec<String>> {
    serde_json::from_str(text).map_err(|_| StoreError::Corrupt("agents.chains".into()))
}

pub fn capabilities_to_text(capabilities: &[Capability]) -> String {
    serde_json::to_string(capabilities).expect("capabilities serialise")
}

pub fn capabilities_from_text(text: &str) -> StoreResult<Vec<Capability>> {
    serde_json::from_str(text).map_err(|_| StoreError::Corrupt("agents.capabilities".into()))
}

pub fn wei_from_text(text: &str, column: &str) -> StoreResult<U256> {
    U256::from_str_radix(text, 10).map_err(|_| StoreError::Corrupt(column.into()))
}

pub fn address_from_text(text: &str) -> StoreResult<Address> {
    text.parse().map_err(|_| StoreError::Corrupt("address".into()))
}

pub fn address_map(rows: Vec<(String, String)>) -> StoreResult<BTreeMap<String, Address>> {
    rows.into_iter()
        .map(|(chain, address)| Ok((chain, address_from_text(&address)?)))
        .collect()
}

pub fn opt_wei_from_text(text: Option<String>, column: &str) -> StoreResult<Option<U256>> {
    text.map(|t| wei_from_text(&t, column)).transpose()
}

pub fn u64_from(value: i64, column: &str) -> StoreResult<u64> {
    u64::try_from(value).map_err(|_| StoreError::Corrupt(column.into()))
}
