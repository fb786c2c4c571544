//! The policy body (docs/api.md §11): amounts as decimal strings in whole units of each asset.

use std::collections::BTreeMap;

use serde::Serialize;
use utoipa::ToSchema;

use crate::domain::amount::format_units;
use crate::domain::asset;
use crate::domain::policy::{AssetLimits, Policy};

/// Limits on one asset; an absent field is no limit.
#[derive(Debug, Serialize, ToSchema)]
pub struct AssetLimitsView {
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(nullable = false, example = "0.05")]
    pub per_transfer: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(nullable = false)]
    pub per_day: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(nullable = false)]
    pub per_week: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(nullable = false)]
    pub approval_above: Option<String>,
}

#[derive(Debug, Serialize, ToSchema)]
pub struct PolicyView {
    /// Keyed by asset (`<chain>:<SYMBOL>`, e.g. `base:ETH`).
    pub limits: BTreeMap<String, AssetLimitsView>,
    /// EIP-55 addresses; null: any recipient.
    pub allowed_recipients: Option<Vec<String>>,
    pub blocked_recipients: Vec<String>,
    pub approve_new_recipients: bool,
    pub approval_ttl_secs: u64,
    /// x402 hosts (`host` or `host:port`); null: any.
    pub allowed_hosts: Option<Vec<String>>,
    /// Contract-call rules (§18); absent when none are set.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(nullable = false, value_type = Option<Object>)]
    pub calls: Option<serde_json::Value>,
}

impl PolicyView {
    /// The policy with its amounts in whole units of each asset (decimals from the token registry).
    pub fn new(policy: &Policy, assets: &asset::Registry) -> Self {
        let checksummed = |list: &[alloy::primitives::Address]| list.iter().map(|a| a.to_checksum(None)).collect();
        PolicyView {
            limits: policy
                .limits
                .iter()
                .map(|(key, limits)| (key.clone(), limits_view(assets, key, limits)))
                .collect(),
            allowed_recipients: policy.allowed_recipients.as_deref().map(checksummed),
            blocked_recipients: checksummed(&policy.blocked_recipients),
            approve_new_recipients: policy.approve_new_recipients,
            approval_ttl_secs: policy.approval_ttl_secs,
            allowed_hosts: policy.allowed_hosts.clone(),
            calls: policy.calls.as_deref().map(|c| serde_json::Value::from(c.clone())),
        }
    }
}

fn limits_view(assets: &asset::Registry, key: &str, limits: &AssetLimits) -> AssetLimitsView {
    let decimals = assets.limit_key(key).map_or(18, |(_, decimals)| decimals);
    let text = |v: Option<alloy::primitives::U256>| v.map(|v| format_units(v, decimals));
    AssetLimitsView {
        per_transfer: text(limits.per_transfer),
        per_day: text(limits.per_day),
        per_week: text(limits.per_week),
        approval_above: text(limits.approval_above),
    }
}
