//! The policy body (docs/api.md §11): amounts as decimal strings in whole units of each asset.

use std::collections::BTreeMap;

use alloy::primitives::U256;
use serde::Serialize;
use utoipa::ToSchema;
use uuid::Uuid;

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
    /// (Added beside the contract's fields.) One entry per limit of each active on-chain delegation (§21), beside the
    /// policy's windows, so that no client adds them up itself.
    pub delegations: Vec<DelegationBudgetView>,
    /// The operator's gas sponsorship on each chain it set one on (§22), as `GET …/sponsorship` shows it.
    pub sponsorships: Vec<super::sponsorship::SponsorshipView>,
}

/// One limit of an active delegation (§21) and what a send through it may take now. Amounts in the units of
/// `GET …/delegations`' `available` (whole units of a registry asset, base units otherwise).
#[derive(Debug, Serialize, ToSchema)]
pub struct DelegationBudgetView {
    pub delegation_id: Uuid,
    pub chain: String,
    /// EIP-55 address of the owner's account the money leaves.
    pub delegator: String,
    /// As the delegation's limit names it (`base:USDC`), the policy's key for that asset.
    pub asset: String,
    /// The limit per period (or in all).
    pub amount: String,
    pub period_seconds: Option<u64>,
    /// What the delegation leaves now, as `GET …/delegations` shows it; `null` when the node did not answer.
    pub available: Option<String>,
    /// What a delegated send of the asset may take now: the smallest of `available`, the asset's `per_transfer` and
    /// what its `per_day` and `per_week` windows have left (they count delegated amounts with the agent's own, §21).
    /// `null` with `available`. The gas is the agent's, counted against the spending cap.
    pub spendable: Option<String>,
    /// Which figure sets `spendable`: `delegation`, `per_transfer`, `per_day` or `per_week`.
    pub bound_by: Option<&'static str>,
}

/// What a send through a delegation may take now, and which limit sets it: the delegation's `available`, unless the
/// asset's `per_transfer` or a window's `left` is smaller (ties go to the delegation).
pub fn spendable(
    available: U256,
    limits: Option<&AssetLimits>,
    windows: Option<decision::Windows>,
) -> (U256, &'static str) {
    let mut least = (available, "delegation");
    let Some(limits) = limits else { return least };
    let budget = windows.map(|w| decision::budget(limits, w));
    let candidates = [
        (limits.per_transfer, "per_transfer"),
        (budget.as_ref().and_then(|b| b.per_day).map(|w| w.left), "per_day"),
        (budget.as_ref().and_then(|b| b.per_week).map(|w| w.left), "per_week"),
    ];
    for (figure, rule) in candidates {
        if let Some(figure) = figure
            && figure < least.0
        {
            least = (figure, rule);
        }
    }
    least
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
            delegations: Vec::new(),
            sponsorships: Vec::new(),
        }
    }

    /// With each limit of the active delegations in `described`, beside the windows of `policy`.
    pub fn with_delegations(
        mut self,
        described: &[crate::delegations::Described],
        policy: &Policy,
        windows: &BTreeMap<String, decision::Windows>,
        assets: &asset::Registry,
    ) -> Self {
        for d in described
            .iter()
            .filter(|d| d.status == crate::domain::delegation::Status::Active)
        {
            let view = crate::delegations::view::DelegationView::new(d, assets);
            for ((_, left), limit) in d.limits.iter().zip(view.limits) {
                let decimals = assets.limit_key(&limit.asset).map_or(0, |(_, decimals)| decimals);
                let key = policy.limits.keys().find(|k| k.eq_ignore_ascii_case(&limit.asset));
                let can = left.as_ref().map(|left| {
                    spendable(
                        left.shown,
                        key.and_then(|k| policy.limits.get(k)),
                        key.and_then(|k| windows.get(k)).copied(),
                    )
                });
                self.delegations.push(DelegationBudgetView {
                    delegation_id: d.record.id,
                    chain: d.record.chain.clone(),
                    delegator: d.record.delegator.to_checksum(None),
                    asset: limit.asset,
                    amount: limit.amount,
                    period_seconds: limit.period_seconds,
                    available: limit.available,
                    spendable: can.map(|(figure, _)| format_units(figure, decimals)),
                    bound_by: can.map(|(_, rule)| rule),
                });
            }
        }
        self
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn limits(per_transfer: Option<u64>, per_day: Option<u64>) -> AssetLimits {
        AssetLimits {
            per_transfer: per_transfer.map(U256::from),
            per_day: per_day.map(U256::from),
            ..Default::default()
        }
    }

    #[test]
    fn a_delegated_send_may_take_the_least_of_the_delegation_and_the_policy() {
        let six = U256::from(6);
        assert_eq!(spendable(six, None, None), (six, "delegation"));
        // The agent's own day counted 9 of 10: 1 left, below the 6 the delegation leaves.
        let windows = decision::Windows {
            day: U256::from(9),
            ..Default::default()
        };
        assert_eq!(
            spendable(six, Some(&limits(None, Some(10))), Some(windows)),
            (U256::from(1), "per_day")
        );
        assert_eq!(
            spendable(
                six,
                Some(&limits(Some(2), Some(10))),
                Some(decision::Windows::default())
            ),
            (U256::from(2), "per_transfer")
        );
        // A tie goes to the delegation.
        assert_eq!(spendable(six, Some(&limits(Some(6), None)), None), (six, "delegation"));
    }
}
