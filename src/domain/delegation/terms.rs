//! A delegation's caveats: each one's terms read as its enforcer reads them, the rule that together they bound every
//! execution, and what they let through (the limits they set, the targets, methods and time window they allow).

use alloy::primitives::{Address, Bytes, FixedBytes, U256};

use super::{Delegation, Kind};

/// A caveat's terms read as its enforcer reads them (the layouts of the enforcers' `getTermsInfo`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Terms {
    /// `token(20) ‖ periodAmount(32) ‖ periodDuration(32) ‖ startDate(32)`.
    Erc20PeriodTransfer {
        token: Address,
        amount: U256,
        period: u64,
        start: u64,
    },
    /// `periodAmount(32) ‖ periodDuration(32) ‖ startDate(32)`.
    NativeTokenPeriodTransfer { amount: U256, period: u64, start: u64 },
    /// `token(20) ‖ maxTokens(32)`.
    Erc20TransferAmount { token: Address, amount: U256 },
    /// `allowance(32)`.
    NativeTokenTransferAmount { amount: U256 },
    /// The calldata allowed, whole (empty: plain native sends only).
    ExactCalldata { calldata: Bytes },
    /// `address(20)` repeated, at least one.
    AllowedTargets { targets: Vec<Address> },
    /// `bytes4` repeated, at least one.
    AllowedMethods { methods: Vec<FixedBytes<4>> },
    /// `value(32)`: the most an execution may carry.
    ValueLte { value: U256 },
    /// `after(16) ‖ before(16)` (uint128 each, 0 = none; both exclusive).
    Timestamp { after: u64, before: u64 },
    /// `limit(32)`: redemptions in all.
    LimitedCalls { limit: U256 },
}

/// Why a caveat cannot be read: its enforcer is not configured, or its terms are not what the enforcer accepts.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UnknownCaveat {
    pub index: usize,
    pub reason: String,
}

impl Terms {
    pub fn kind(&self) -> Kind {
        match self {
            Terms::Erc20PeriodTransfer { .. } => Kind::Erc20PeriodTransfer,
            Terms::NativeTokenPeriodTransfer { .. } => Kind::NativeTokenPeriodTransfer,
            Terms::Erc20TransferAmount { .. } => Kind::Erc20TransferAmount,
            Terms::NativeTokenTransferAmount { .. } => Kind::NativeTokenTransferAmount,
            Terms::ExactCalldata { .. } => Kind::ExactCalldata,
            Terms::AllowedTargets { .. } => Kind::AllowedTargets,
            Terms::AllowedMethods { .. } => Kind::AllowedMethods,
            Terms::ValueLte { .. } => Kind::ValueLte,
            Terms::Timestamp { .. } => Kind::Timestamp,
            Terms::LimitedCalls { .. } => Kind::LimitedCalls,
        }
    }

    /// Reads `terms` as the enforcer of `kind` does; `Err` with the reason where the enforcer would refuse them (a
    /// wrong length) or could never use them (a period of zero length, amount or start: the enforcer reverts on
    /// its first use), or where a figure does not fit what agentd shows (a timestamp or period beyond u64).
    pub fn decode(kind: Kind, terms: &[u8]) -> Result<Terms, String> {
        let layout = Layout { kind, terms };
        Ok(match kind {
            Kind::Erc20PeriodTransfer => {
                layout.length(116)?;
                let (amount, period, start) = layout.period(20)?;
                Terms::Erc20PeriodTransfer {
                    token: Address::from_slice(&terms[..20]),
                    amount,
                    period,
                    start,
                }
            }
            Kind::NativeTokenPeriodTransfer => {
                layout.length(96)?;
                let (amount, period, start) = layout.period(0)?;
                Terms::NativeTokenPeriodTransfer { amount, period, start }
            }
            Kind::Erc20TransferAmount => {
                layout.length(52)?;
                Terms::Erc20TransferAmount {
                    token: Address::from_slice(&terms[..20]),
                    amount: layout.word(20),
                }
            }
            Kind::NativeTokenTransferAmount => {
                layout.length(32)?;
                Terms::NativeTokenTransferAmount { amount: layout.word(0) }
            }
            Kind::ExactCalldata => Terms::ExactCalldata {
                calldata: Bytes::copy_from_slice(terms),
            },
            Kind::AllowedTargets => {
                if terms.is_empty() || !terms.len().is_multiple_of(20) {
                    return Err("allowed_targets terms must be one or more 20-byte addresses".into());
                }
                Terms::AllowedTargets {
                    targets: terms.chunks(20).map(Address::from_slice).collect(),
                }
            }
            Kind::AllowedMethods => {
                if terms.is_empty() || !terms.len().is_multiple_of(4) {
                    return Err("allowed_methods terms must be one or more 4-byte selectors".into());
                }
                Terms::AllowedMethods {
                    methods: terms.chunks(4).map(FixedBytes::<4>::from_slice).collect(),
                }
            }
            Kind::ValueLte => {
                layout.length(32)?;
                Terms::ValueLte { value: layout.word(0) }
            }
            Kind::Timestamp => {
                layout.length(32)?;
                Terms::Timestamp {
                    after: layout.threshold(0..16, "after")?,
                    before: layout.threshold(16..32, "before")?,
                }
            }
            Kind::LimitedCalls => {
                layout.length(32)?;
                Terms::LimitedCalls { limit: layout.word(0) }
            }
        })
    }
}

/// The terms of one caveat as its enforcer lays them out, read with the checks several layouts share.
struct Layout<'t> {
    kind: Kind,
    terms: &'t [u8],
}

impl Layout<'_> {
    /// The 32-byte word at `at`.
    fn word(&self, at: usize) -> U256 {
        U256::from_be_slice(&self.terms[at..at + 32])
    }

    /// The word at `at`, a number of seconds (a period, a date): it must fit 64 bits.
    fn seconds(&self, at: usize, what: &str) -> Result<u64, String> {
        u64::try_from(self.word(at)).map_err(|_| format!("{} terms: the {what} does not fit 64 bits", self.kind.name()))
    }

    /// The enforcer accepts terms of this length only.
    fn length(&self, expected: usize) -> Result<(), String> {
        if self.terms.len() == expected {
            Ok(())
        } else {
            Err(format!(
                "{} terms must be {expected} bytes, not {}",
                self.kind.name(),
                self.terms.len()
            ))
        }
    }

    /// `periodAmount(32) ‖ periodDuration(32) ‖ startDate(32)` from `at`, none of them zero.
    fn period(&self, at: usize) -> Result<(U256, u64, u64), String> {
        let (amount, period, start) = (
            self.word(at),
            self.seconds(at + 32, "period")?,
            self.seconds(at + 64, "start date")?,
        );
        if amount.is_zero() || period == 0 || start == 0 {
            return Err(format!(
                "{} terms: the period amount, duration and start date must not be zero",
                self.kind.name()
            ));
        }
        Ok((amount, period, start))
    }

    /// A `timestamp` threshold: the uint128 at `range`, which must fit 64 bits.
    fn threshold(&self, range: std::ops::Range<usize>, what: &str) -> Result<u64, String> {
        u64::try_from(U256::from_be_slice(&self.terms[range]))
            .map_err(|_| format!("timestamp terms: the {what} threshold does not fit 64 bits"))
    }
}

/// The configured enforcers of a chain: kind and address.
pub type Enforcers = [(Kind, Address)];

/// The configured enforcers of every chain, by chain name.
pub type EnforcersByChain = Vec<(String, Vec<(Kind, Address)>)>;

/// Decodes every caveat of `delegation` with the enforcers configured on its chain; refuses a caveat whose enforcer
/// is not one of them, whose terms it would not accept, or that carries `args` (the redeemer's input, which agentd
/// would have to supply and cannot mirror).
pub fn decode_caveats(delegation: &Delegation, enforcers: &Enforcers) -> Result<Vec<Terms>, UnknownCaveat> {
    delegation
        .caveats
        .iter()
        .enumerate()
        .map(|(index, caveat)| {
            let refuse = |reason: String| UnknownCaveat { index, reason };
            let kind = enforcers
                .iter()
                .find(|(_, address)| *address == caveat.enforcer)
                .map(|(kind, _)| *kind)
                .ok_or_else(|| refuse(format!("enforcer {} is not a configured enforcer", caveat.enforcer)))?;
            if !caveat.args.is_empty() {
                return Err(refuse("args must be empty (0x)".into()));
            }
            Terms::decode(kind, &caveat.terms).map_err(refuse)
        })
        .collect()
}

/// Two caveats naming one stateful enforcer (§21 `caveat_conflict`), as `(first, second)` caveat indexes; `terms`
/// are the caveats decoded in order (`decode_caveats`), so each caveat's kind is its enforcer's.
pub fn conflicting_caveats(delegation: &Delegation, terms: &[Terms]) -> Option<(usize, usize)> {
    let stateful: Vec<(usize, Address)> = delegation
        .caveats
        .iter()
        .zip(terms)
        .enumerate()
        .filter(|(_, (_, t))| t.kind().is_stateful())
        .map(|(index, (caveat, _))| (index, caveat.enforcer))
        .collect();
    stateful.iter().enumerate().find_map(|(at, (second, enforcer))| {
        stateful[..at]
            .iter()
            .find(|(_, earlier)| earlier == enforcer)
            .map(|(first, _)| (*first, *second))
    })
}

/// Whether the caveats together bound every execution the chain would let through (§21): a token-amount caveat
/// pins its token's `transfer` (its enforcer refuses any other target or function); a native-amount caveat counts
/// only `value` and lets any calldata through, so it bounds only beside `exact_calldata` with empty terms (plain
/// sends). Without an amount caveat nothing bounds the delegation.
pub fn is_bounded(terms: &[Terms]) -> bool {
    let token_amount = terms
        .iter()
        .any(|t| matches!(t, Terms::Erc20PeriodTransfer { .. } | Terms::Erc20TransferAmount { .. }));
    let native_amount = terms.iter().any(|t| {
        matches!(
            t,
            Terms::NativeTokenPeriodTransfer { .. } | Terms::NativeTokenTransferAmount { .. }
        )
    });
    let plain_sends_only = terms
        .iter()
        .any(|t| matches!(t, Terms::ExactCalldata { calldata } if calldata.is_empty()));
    token_amount || (native_amount && plain_sends_only)
}

/// What a limit is counted in.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum LimitAsset {
    Native,
    Token(Address),
}

/// One amount caveat's limit: the amount per period (or in all, without a period) and how its `available` figure
/// is read on chain.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Limit {
    /// The caveat it comes from (its index in `caveats`).
    pub caveat: usize,
    pub asset: LimitAsset,
    pub amount: U256,
    /// `None`: the amount counts over the delegation's whole life (`*_transfer_amount`).
    pub period_seconds: Option<u64>,
    pub start: Option<u64>,
    pub read: AvailableRead,
}

/// How the chain tells what is left of a limit.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AvailableRead {
    /// The enforcer's `getAvailableAmount(hash, manager, terms)`.
    GetAvailableAmount,
    /// The terms' amount less `spentMap(manager, hash)`.
    SpentMap,
}

/// The limits the amount caveats set, in caveat order.
pub fn limits(terms: &[Terms]) -> Vec<Limit> {
    terms
        .iter()
        .enumerate()
        .filter_map(|(caveat, t)| {
            let (asset, amount, period_seconds, start, read) = match t {
                Terms::Erc20PeriodTransfer {
                    token,
                    amount,
                    period,
                    start,
                } => (
                    LimitAsset::Token(*token),
                    *amount,
                    Some(*period),
                    Some(*start),
                    AvailableRead::GetAvailableAmount,
                ),
                Terms::NativeTokenPeriodTransfer { amount, period, start } => (
                    LimitAsset::Native,
                    *amount,
                    Some(*period),
                    Some(*start),
                    AvailableRead::GetAvailableAmount,
                ),
                Terms::Erc20TransferAmount { token, amount } => {
                    (LimitAsset::Token(*token), *amount, None, None, AvailableRead::SpentMap)
                }
                Terms::NativeTokenTransferAmount { amount } => {
                    (LimitAsset::Native, *amount, None, None, AvailableRead::SpentMap)
                }
                _ => return None,
            };
            Some(Limit {
                caveat,
                asset,
                amount,
                period_seconds,
                start,
                read,
            })
        })
        .collect()
}

/// The contracts the `allowed_targets` caveats let the delegate call (all of them must agree: their
/// intersection); `None` without such a caveat.
pub fn targets(terms: &[Terms]) -> Option<Vec<Address>> {
    intersect(terms.iter().filter_map(|t| match t {
        Terms::AllowedTargets { targets } => Some(targets.clone()),
        _ => None,
    }))
}

/// The selectors the `allowed_methods` caveats let through (their intersection); `None` without such a caveat.
pub fn methods(terms: &[Terms]) -> Option<Vec<FixedBytes<4>>> {
    intersect(terms.iter().filter_map(|t| match t {
        Terms::AllowedMethods { methods } => Some(methods.clone()),
        _ => None,
    }))
}

fn intersect<T: PartialEq>(mut lists: impl Iterator<Item = Vec<T>>) -> Option<Vec<T>> {
    let first = lists.next()?;
    Some(lists.fold(first, |acc, next| {
        acc.into_iter().filter(|x| next.contains(x)).collect()
    }))
}

/// The window of the `timestamp` caveats, `(not_before, expires_at)` in unix seconds (the enforcer's thresholds,
/// both exclusive: usable strictly after the first and strictly before the second); the tightest of several.
pub fn window(terms: &[Terms]) -> (Option<u64>, Option<u64>) {
    let mut not_before = None;
    let mut expires_at: Option<u64> = None;
    for t in terms {
        if let Terms::Timestamp { after, before } = t {
            if *after > 0 {
                not_before = Some(not_before.map_or(*after, |n: u64| n.max(*after)));
            }
            if *before > 0 {
                expires_at = Some(expires_at.map_or(*before, |e| e.min(*before)));
            }
        }
    }
    (not_before, expires_at)
}
