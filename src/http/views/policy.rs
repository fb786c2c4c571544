//! The policy body (docs/api.md §11): amounts as decimal strings in whole units of each asset.

use std::collections::BTreeMap;

use serde::Serialize;
use utoipa::ToSchema;

use crate::domain::amount::format_units;
use crate::domain::asset;
use crate::domain::decision;
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

/// One window of a limit as the service counts it, decimal strings in whole units of the asset (native units for
/// the cap): `counted` is what the next decision counts against `limit` (transfers mined, pending, signed and held
/// for approval, what calls and signatures counted, allowances included), `left` what a transfer may still take
/// (`limit − counted`, never below 0).
#[derive(Debug, Serialize, ToSchema)]
pub struct WindowView {
    #[schema(example = "500")]
    pub limit: String,
    #[schema(example = "120")]
    pub counted: String,
    #[schema(example = "380")]
    pub left: String,
}

/// The windows of one asset's limits; a window the policy does not set is absent.
#[derive(Debug, Serialize, ToSchema)]
pub struct AssetBudgetView {
    /// The last 24 hours.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(nullable = false)]
    pub per_day: Option<WindowView>,
    /// The last 7 days.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(nullable = false)]
    pub per_week: Option<WindowView>,
}

/// What the agent's limits have counted and have left, as the service's next decision counts them.
#[derive(Debug, Serialize, ToSchema)]
pub struct BudgetView {
    /// Keyed by asset (`<chain>:<SYMBOL>`) as in the policy's `limits`: only assets with `per_day` or `per_week`.
    pub limits: BTreeMap<String, AssetBudgetView>,
    /// Keyed by chain: the spending cap (§8) there, what counts against it and what is left, in native units.
    pub caps: BTreeMap<String, WindowView>,
}

impl WindowView {
    pub fn new(w: decision::Window, decimals: u8) -> Self {
        WindowView {
            limit: format_units(w.limit, decimals),
            counted: format_units(w.counted, decimals),
            left: format_units(w.left, decimals),
        }
    }
}

impl BudgetView {
    /// `windows`: what the store read for each asset with a rolling window; `caps`: chain -> (cap, spent) in wei.
    pub fn new(
        policy: &Policy,
        windows: &BTreeMap<String, decision::Windows>,
        caps: impl IntoIterator<Item = (String, decision::Window)>,
        assets: &asset::Registry,
    ) -> Self {
        let limits = policy
            .limits
            .iter()
            .filter_map(|(key, limits)| {
                let w = windows.get(key)?;
                let decimals = assets.limit_key(key).map_or(18, |(_, decimals)| decimals);
                let b = decision::budget(limits, *w);
                Some((
                    key.clone(),
                    AssetBudgetView {
                        per_day: b.per_day.map(|w| WindowView::new(w, decimals)),
                        per_week: b.per_week.map(|w| WindowView::new(w, decimals)),
                    },
                ))
            })
            .collect();
        BudgetView {
            limits,
            caps: caps.into_iter().map(|(c, w)| (c, WindowView::new(w, 18))).collect(),
        }
    }
}
