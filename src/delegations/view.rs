//! Views of on-chain delegations (§21), as the HTTP API and the `list_delegations` tool show them: the delegation with its caveats decoded, its limits with what is available
//! now, its window and status.

use chrono::{DateTime, Utc};
use serde::Serialize;
use utoipa::ToSchema;
use uuid::Uuid;

use crate::delegations::Described;
use crate::domain::amount::format_units;
use crate::domain::asset::{Asset, Registry};
use crate::domain::delegation::{LimitAsset, Terms};

/// A registered delegation.
#[derive(Debug, Serialize, ToSchema)]
pub struct DelegationView {
    pub id: Uuid,
    pub chain: String,
    /// The delegation's hash as the DelegationManager computes it (`getDelegationHash`).
    pub hash: String,
    pub delegator: String,
    /// The agent's wallet on `chain`.
    pub delegate: String,
    /// The delegation as signed, beside `delegator`, `delegate` and the caveats' `enforcer` and `terms`: its
    /// `authority` (0x, 32 bytes), `salt` (decimal) and the delegator's `signature` (0x). With them a client builds
    /// the revoking call, `disableDelegation(delegation)` on the DelegationManager, for any delegation, however it
    /// was registered. (Only the delegate, the agent's own wallet, can redeem it.)
    pub authority: String,
    pub salt: String,
    pub signature: String,
    pub caveats: Vec<CaveatView>,
    pub limits: Vec<LimitView>,
    /// Contracts the `allowed_targets` caveats let the agent call; `null` without such a caveat.
    pub targets: Option<Vec<String>>,
    /// Selectors the `allowed_methods` caveats let through; `null` without such a caveat.
    pub methods: Option<Vec<String>>,
    /// Unix seconds: the `timestamp` caveat's lower threshold (usable strictly after it).
    pub not_before: Option<u64>,
    /// Unix seconds: the `timestamp` caveat's upper threshold (usable strictly before it).
    pub expires_at: Option<u64>,
    /// `active`, `revoked` (disabled on chain), `expired` (past the `timestamp` caveat) or `removed`.
    pub status: String,
    pub created_at: DateTime<Utc>,
    /// When the revocation on chain was noticed.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub revoked_at: Option<DateTime<Utc>>,
}

/// One caveat: its enforcer, `kind` (the configuration name, `unknown` for an enforcer no longer configured), its
/// terms as signed, and the fields its enforcer reads from them (amounts in base units, times in unix seconds).
#[derive(Debug, Serialize, ToSchema)]
pub struct CaveatView {
    pub enforcer: String,
    pub kind: String,
    pub terms: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub token: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub amount: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub period_seconds: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub start: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub calldata: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub targets: Option<Vec<String>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub methods: Option<Vec<String>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub value: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub after: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub before: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub limit: Option<String>,
}

/// What one amount caveat lets the agent take.
#[derive(Debug, Serialize, ToSchema)]
pub struct LimitView {
    /// As in §18's `changes`: `<chain>:<SYMBOL>` for the native coin and registry tokens, `<chain>:<address>`
    /// (lower-case) for any other token.
    pub asset: String,
    /// The token's contract, for a token.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub token: Option<String>,
    /// Per period (or in all, without a period): whole units of a registry asset, base units otherwise.
    pub amount: String,
    /// `null`: the amount counts over the delegation's life (`*_transfer_amount`).
    pub period_seconds: Option<u64>,
    pub start: Option<u64>,
    /// What is left now, read at the latest block, in `amount`'s units; `null` when the delegation is not active
    /// or the node did not answer.
    pub available: Option<String>,
}

fn hex(bytes: &[u8]) -> String {
    format!("0x{}", alloy::hex::encode(bytes))
}

impl DelegationView {
    pub fn new(d: &Described, tokens: &Registry) -> Self {
        let known: Vec<Terms> = d.terms.iter().flatten().cloned().collect();
        let chain = crate::domain::chain::find(&d.record.chain);
        let units = |asset: &LimitAsset| -> (String, Option<String>, u8) {
            let Some(chain) = chain else {
                return (d.record.chain.clone(), None, 0);
            };
            match asset {
                LimitAsset::Native => (Asset::native(chain).key(), None, chain.decimals),
                LimitAsset::Token(address) => match tokens.find(chain, &address.to_checksum(None)) {
                    Some(asset) => (asset.key(), Some(address.to_checksum(None)), asset.decimals),
                    None => (
                        format!("{}:{address:#x}", chain.name),
                        Some(address.to_checksum(None)),
                        0,
                    ),
                },
            }
        };
        let limits = d
            .limits
            .iter()
            .map(|(limit, available)| {
                let (asset, token, decimals) = units(&limit.asset);
                LimitView {
                    asset,
                    token,
                    amount: format_units(limit.amount, decimals),
                    period_seconds: limit.period_seconds,
                    start: limit.start,
                    available: available.map(|a| format_units(a.shown, decimals)),
                }
            })
            .collect();
        DelegationView {
            id: d.record.id,
            chain: d.record.chain.clone(),
            hash: format!("{:#x}", d.record.hash),
            delegator: d.delegation.delegator.to_checksum(None),
            delegate: d.delegation.delegate.to_checksum(None),
            authority: format!("{:#x}", d.delegation.authority),
            salt: d.delegation.salt.to_string(),
            signature: hex(&d.delegation.signature),
            caveats: d
                .delegation
                .caveats
                .iter()
                .zip(&d.terms)
                .map(|(c, t)| CaveatView::new(c.enforcer, &c.terms, t.as_ref()))
                .collect(),
            limits,
            targets: crate::domain::delegation::targets(&known)
                .map(|t| t.iter().map(|a| a.to_checksum(None)).collect()),
            methods: crate::domain::delegation::methods(&known).map(|m| m.iter().map(|s| hex(s.as_slice())).collect()),
            not_before: d.not_before,
            expires_at: d.expires_at,
            status: d.status.as_str().to_string(),
            created_at: d.record.created_at,
            revoked_at: d.record.revoked_at,
        }
    }
}

impl CaveatView {
    fn new(enforcer: alloy::primitives::Address, terms: &[u8], decoded: Option<&Terms>) -> Self {
        let mut view = CaveatView {
            enforcer: enforcer.to_checksum(None),
            kind: decoded.map_or("unknown", |t| t.kind().name()).to_string(),
            terms: hex(terms),
            token: None,
            amount: None,
            period_seconds: None,
            start: None,
            calldata: None,
            targets: None,
            methods: None,
            value: None,
            after: None,
            before: None,
            limit: None,
        };
        match decoded {
            Some(Terms::Erc20PeriodTransfer {
                token,
                amount,
                period,
                start,
            }) => {
                view.token = Some(token.to_checksum(None));
                view.amount = Some(amount.to_string());
                view.period_seconds = Some(*period);
                view.start = Some(*start);
            }
            Some(Terms::NativeTokenPeriodTransfer { amount, period, start }) => {
                view.amount = Some(amount.to_string());
                view.period_seconds = Some(*period);
                view.start = Some(*start);
            }
            Some(Terms::Erc20TransferAmount { token, amount }) => {
                view.token = Some(token.to_checksum(None));
                view.amount = Some(amount.to_string());
            }
            Some(Terms::NativeTokenTransferAmount { amount }) => view.amount = Some(amount.to_string()),
            Some(Terms::ExactCalldata { calldata }) => view.calldata = Some(hex(calldata)),
            Some(Terms::AllowedTargets { targets }) => {
                view.targets = Some(targets.iter().map(|a| a.to_checksum(None)).collect());
            }
            Some(Terms::AllowedMethods { methods }) => {
                view.methods = Some(methods.iter().map(|m| hex(m.as_slice())).collect());
            }
            Some(Terms::ValueLte { value }) => view.value = Some(value.to_string()),
            Some(Terms::Timestamp { after, before }) => {
                view.after = Some(*after);
                view.before = Some(*before);
            }
            Some(Terms::LimitedCalls { limit }) => view.limit = Some(limit.to_string()),
            None => {}
        }
        view
    }
}
