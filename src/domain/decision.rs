//! Whether money may move: one pure function, `decide`, over the facts the store reads inside the reserving
//! transaction (the cap and what counts against it, balances and what is held of them, the policy and its windows,
//! a waiting transfer being approved, the nonce counter) and the request. Its answer is applied by the store in that
//! same transaction, so the rules hold under concurrent requests. Every rule of §8, §11, §13, §14 and §16 that
//! decides a reservation, a nonce fill or a fee bump lives here, with the arithmetic of its boundaries.

use alloy::primitives::{Address, U256};
use chrono::{DateTime, Utc};

use super::policy::{ApprovalStatus, Holds, Policy, PolicyRule, Proposed, Verdict};

/// What is asked: one outflow of an asset, and what it holds against the cap until it settles.
#[derive(Debug, Clone)]
pub struct Request<'a> {
    /// The policy's asset key (`base:ETH`).
    pub asset_key: &'a str,
    pub to: Address,
    /// In base units of the asset.
    pub value: U256,
    /// What it holds against the cap (native units): value and fee room, none for an x402 payment.
    pub reserved: U256,
    /// The native coin the wallet must hold for it (amount and one maximum fee), when that was read.
    pub native_needed: Option<U256>,
    /// The node's pending nonce, used when the store counts none yet (or counts behind the node).
    pub node_nonce: Option<u64>,
    /// An x402 payment (§16): an authorization with its own random nonce, no native cost.
    pub payment: Option<PaymentSite<'a>>,
    /// A contract call (§18): judged by the `calls` rules and the unlimited-approval guard, and counted by what
    /// its simulation showed.
    pub call: Option<CallSite<'a>>,
}

/// What a contract call brings to the decision (§18).
#[derive(Debug, Clone, Copy)]
pub struct CallSite<'a> {
    /// The call, or the typed data, as the `calls` rules see it.
    pub subject: Subject<'a>,
    /// The rule that refuses it whatever the `calls` rules say (`delegation_signature`, `permit_not_understood`,
    /// `call_not_understood`), worked out from what it is.
    pub forbidden: Option<PolicyRule>,
    /// Whether it grants an unlimited allowance (by its decoded arguments or its simulated approvals).
    pub unlimited: bool,
    /// Whether the agent is guarded (an unguarded agent's calls are allowed when no rule decides).
    pub guarded: bool,
    /// What it counts against the assets' limits: its native value, each simulated token outflow and each
    /// allowance it grants, with the party the recipient rules judge.
    pub counts: &'a [Counted],
    /// Every address that receives coin or tokens anywhere in it, and every spender it names (§18:
    /// `blocked_recipients` sees them all).
    pub receivers: &'a [Address],
    /// Set when its selector is none the service decodes into counts (§18 `call_not_understood`).
    pub opaque: Option<&'a Opaque>,
}

/// Where a call whose selector the service does not decode into counts goes: refused at Permit2 always, at a token
/// when the policy's `limits` name its asset (§18 `call_not_understood`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Opaque {
    Permit2,
    /// Any other contract, by the asset key it has as a token.
    Contract {
        asset_key: String,
    },
}

/// What the `calls` rules judge: a contract call, or EIP-712 typed data to sign (which has no nonce).
#[derive(Debug, Clone, Copy)]
pub enum Subject<'a> {
    Call(super::call::CallFacts<'a>),
    TypedData(super::call::typed::TypedFacts<'a>),
}

impl Subject<'_> {
    /// Whether it is a transaction of the wallet (a nonce).
    pub fn on_chain(&self) -> bool {
        matches!(self, Subject::Call(_))
    }
}

/// One amount a call counts against an asset's limits (`CallSite::counts`), as the call's ledger counts them.
pub use super::call::ledger::Counted;

/// Where an x402 payment's request goes, for the host rule (`None`: the URL names no host, never allowed).
#[derive(Debug, Clone, Copy)]
pub struct PaymentSite<'a> {
    pub host: Option<(&'a str, u16)>,
}

/// A balance as read on chain and what the agent's open outflows may still take of it (a balance read does not show
/// them yet).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Funds {
    pub balance: U256,
    pub held: U256,
}

impl Funds {
    pub fn available(&self) -> U256 {
        self.balance.saturating_sub(self.held)
    }
}

/// Value of the asset's transfers in the rolling windows (sent ones and unexpired waiting ones), this one excluded.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Windows {
    pub day: U256,
    pub week: U256,
}

/// What besides the cap and the balances decides.
#[derive(Debug, Clone)]
pub enum Gate {
    /// Already decided (a retry of an approved transfer after a nonce resynchronisation).
    Decided,
    /// An owner's sweep of the whole balance to the owner (§20): neither the cap nor the policy applies (they guard
    /// the agent, not its owner), and an inactive agent may be swept; the funds and the nonce are judged as always.
    /// `owners`: the agent's owner addresses, as this transaction sees them, when the sweep must go to one (an owner
    /// session's); `None` with the admin token, which sweeps to any address.
    Sweep { owners: Option<Vec<Address>> },
    /// An owner approved the waiting transfer: as found in this transaction.
    Approval {
        status: ApprovalStatus,
        expired: bool,
        /// What it held while waiting; given back as the new reservation is taken.
        held: U256,
    },
    /// The agent's policy, with the windows and recipient history as this transaction sees them.
    Policy {
        policy: Box<Policy>,
        windows: Windows,
        paid_before: bool,
    },
}

/// Whether whoever asked may still move the agent's money, as this transaction sees it (§15): an agent deleted or a
/// token reissued since the request was authenticated moves nothing.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Standing {
    pub agent_active: bool,
    /// The agent token the request came with is still live (`true` when it came with none: an owner's approval).
    pub token_current: bool,
    /// The `Idempotency-Key` claim the request runs under is still its own (`true` without a key): a claim taken over
    /// after its lease ran out moves nothing (§12).
    pub claim_held: bool,
}

/// Everything the store read under the agent's lock.
#[derive(Debug, Clone)]
pub struct Facts {
    pub standing: Standing,
    pub cap: U256,
    /// What counts against the cap on the chain: reservations of open transfers, costs of settled ones.
    pub spent: U256,
    /// The token moved and what the agent's token transfers on their way and unused x402 authorizations hold of it
    /// (a token outflow whose balance was read).
    pub tokens: Option<Funds>,
    /// The native coin and what the agent's open transfers on the chain hold of it (when its balance was read).
    pub native: Option<Funds>,
    /// For a call: the windows of each of its counts' assets and whether their party was paid before, in the order
    /// of `CallSite::counts`.
    pub call_windows: Vec<(Windows, bool)>,
    pub gate: Gate,
    /// The store's next nonce for (agent, chain), if it counts one.
    pub stored_nonce: Option<u64>,
    /// A redemption of an on-chain delegation (§21): what the chain's caveats leave this period (`balance`, read at
    /// the latest block) and what this service's redemptions of it that block has not included hold.
    pub delegation: Option<Funds>,
}

/// Why nothing moves.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Refusal {
    /// The agent was deleted after the request was authenticated.
    AgentInactive,
    /// The request's agent token was reissued (revoked) after it was authenticated.
    TokenRevoked,
    /// The request's idempotency claim was taken over by a repeat (this request stopped past its lease).
    ClaimLost,
    /// `spent` as the check saw it (less what an approved transfer gives back).
    CapExceeded {
        cap: U256,
        spent: U256,
    },
    PolicyDenied(PolicyRule),
    /// A contract call the `calls` rules refuse (`policy_denied`, rule `call_denied`), with why in words: the rule
    /// that denies it, or the rule and condition that did not allow it and the value the call had (§18).
    CallDenied(String),
    InsufficientTokens {
        available: U256,
    },
    InsufficientFunds {
        available: U256,
    },
    /// An approval of a transfer no longer waiting (`Expired` also when past `expires_at`).
    NotAwaiting(ApprovalStatus),
    /// An owner session's sweep to an address that is none of the agent's owner addresses (§20).
    OwnerAddressRequired,
    /// More than what the delegation's caveats leave this period, less this service's redemptions the chain has not
    /// counted yet (§21 `delegation_limit`).
    DelegationLimit {
        available: U256,
    },
    /// A transfer over one of its asset's limits (`per_transfer`, `per_day`, `per_week`: `policy_denied` with that
    /// rule), with the figures the decision used: the limit, what its window had counted before it (0 for
    /// `per_transfer`) and what it asked.
    OverLimit {
        rule: PolicyRule,
        limit: U256,
        counted: U256,
        asked: U256,
        /// For a call or typed data, the policy's key of the asset whose counts broke it (`base:USDC`, or
        /// `base:<token address>` in base units); `None` for a transfer, whose asset is the request's.
        asset: Option<String>,
    },
}

impl Refusal {
    /// An `OverLimit` refusal of the asset `asset_key` (a call's count); any other refusal as it is.
    fn of_asset(self, asset_key: &str) -> Refusal {
        match self {
            Refusal::OverLimit {
                rule,
                limit,
                counted,
                asked,
                ..
            } => Refusal::OverLimit {
                rule,
                limit,
                counted,
                asked,
                asset: Some(asset_key.to_string()),
            },
            other => other,
        }
    }
}

/// What the store does.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Decision {
    /// Sign at `nonce` (`None`: an x402 authorization, which uses no nonce of the agent's), record it, count
    /// `reserved` against the cap and give back `release` (what an approved transfer held while waiting).
    Reserve {
        nonce: Option<u64>,
        release: U256,
    },
    /// Store it waiting for an owner's approval for `ttl_secs`, holding its reservation, unsigned; `holds` names
    /// the rules that ask for the approval.
    Hold {
        ttl_secs: u64,
        holds: Holds,
    },
    Refuse(Refusal),
}

/// What a transfer costs the wallet and the cap (§8, §13, §14), from the native coin it moves and one maximum fee
/// (gas limit × `maxFeePerGas`, plus the L1 fee estimate on OP-stack chains).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Cost {
    /// What the wallet must hold: the native value and one maximum fee.
    pub needed: U256,
    /// What it holds against the cap until it settles: the native value and twice the maximum fee, room for fee
    /// bumps.
    pub reserved: U256,
}

impl Cost {
    pub fn of(native_value: U256, max_fee: U256) -> Cost {
        let needed = native_value.saturating_add(max_fee);
        Cost {
            needed,
            reserved: needed.saturating_add(max_fee),
        }
    }
}

/// Whether `more` fits under `cap` on top of `spent`: a total equal to the cap passes.
/// A sum past `U256::MAX` never fits (saturating would let it pass a cap of `U256::MAX`).
pub fn fits(cap: U256, spent: U256, more: U256) -> bool {
    spent.checked_add(more).is_some_and(|total| total <= cap)
}

/// What counts against the cap after adding `add` and giving back `sub` (never below zero).
pub fn spent_after(spent: U256, add: U256, sub: U256) -> U256 {
    spent.saturating_add(add).saturating_sub(sub)
}

/// The one decision of a reservation. Order: a payment on a chain whose cap is 0; the token funds; the native funds;
/// the gate (policy or approval; a transfer held for approval must fit the cap as it is); the cap; the nonce.
/// Whether a sweep may go to `to`: one of `owners` (an owner session's sweep), or anywhere (`None`: the admin's).
pub fn sweeps_to(to: Address, owners: Option<&[Address]>) -> bool {
    owners.is_none_or(|owners| owners.contains(&to))
}

pub fn decide(r: &Request<'_>, f: &Facts) -> Decision {
    let refuse = Decision::Refuse;
    let sweep = matches!(f.gate, Gate::Sweep { .. });
    if let Gate::Sweep { owners } = &f.gate
        && !sweeps_to(r.to, owners.as_deref())
    {
        return refuse(Refusal::OwnerAddressRequired);
    }
    if !f.standing.agent_active && !sweep {
        return refuse(Refusal::AgentInactive);
    }
    if !f.standing.token_current {
        return refuse(Refusal::TokenRevoked);
    }
    if !f.standing.claim_held {
        return refuse(Refusal::ClaimLost);
    }
    // What the delegation leaves must hold the amount, so that no number of concurrent redemptions on any number of
    // instances sends what the chain would refuse (§21).
    if let Some(delegation) = f.delegation
        && delegation.available() < r.value
    {
        return refuse(Refusal::DelegationLimit {
            available: delegation.available(),
        });
    }
    // An x402 payment costs the cap no native coin, but an agent whose cap on the chain is 0 pays nothing there.
    if r.payment.is_some() && f.cap.is_zero() {
        return refuse(Refusal::CapExceeded {
            cap: f.cap,
            spent: f.spent,
        });
    }
    if let Some(tokens) = f.tokens
        && tokens.available() < r.value
    {
        return refuse(Refusal::InsufficientTokens {
            available: tokens.available(),
        });
    }
    // A call's funds are its last check (§18: after the rules, the limits and the cap); a transfer's come first.
    let short = match (f.native, r.native_needed) {
        (Some(native), Some(needed)) if native.available() < needed => Some(Refusal::InsufficientFunds {
            available: native.available(),
        }),
        _ => None,
    };
    if let (Some(refusal), None) = (&short, r.call) {
        return refuse(refusal.clone());
    }
    let release = match &f.gate {
        Gate::Decided | Gate::Sweep { .. } => U256::ZERO,
        Gate::Approval { status, .. } if *status != ApprovalStatus::AwaitingApproval => {
            return refuse(Refusal::NotAwaiting(*status));
        }
        Gate::Approval { expired: true, .. } => return refuse(Refusal::NotAwaiting(ApprovalStatus::Expired)),
        Gate::Approval { held, .. } => *held,
        Gate::Policy {
            policy,
            windows,
            paid_before,
        } => match match r.call {
            Some(call) => call_verdict(&call, policy, &f.call_windows),
            None => verdict(r, policy, *windows, *paid_before),
        } {
            Verdict::Allow => U256::ZERO,
            Verdict::Deny(rule) if r.call.is_none() => return refuse(denial(r, policy, *windows, rule)),
            Verdict::Deny(rule) => return refuse(call_denial(r, policy, &f.call_windows, rule)),
            Verdict::NeedsApproval(_) if !fits(f.cap, f.spent, r.reserved) => {
                return refuse(Refusal::CapExceeded {
                    cap: f.cap,
                    spent: f.spent,
                });
            }
            Verdict::NeedsApproval(holds) => {
                if let Some(refusal) = short {
                    return refuse(refusal);
                }
                return Decision::Hold {
                    ttl_secs: policy.approval_ttl_secs,
                    holds,
                };
            }
        },
    };
    // An approved transfer gives back what it held while waiting as it takes its reservation at today's fees.
    let spent = f.spent.saturating_sub(release);
    if !sweep && !fits(f.cap, spent, r.reserved) {
        return refuse(Refusal::CapExceeded { cap: f.cap, spent });
    }
    if let Some(refusal) = short {
        return refuse(refusal);
    }
    let off_chain = r.payment.is_some() || r.call.is_some_and(|c| !c.subject.on_chain());
    let nonce = match off_chain {
        true => None,
        false => Some(f.stored_nonce.unwrap_or(0).max(r.node_nonce.unwrap_or(0))),
    };
    Decision::Reserve { nonce, release }
}

/// A call's refusal by `rule`: in words when the `calls` rules refused a contract call or typed data, with the
/// figures of the limit and the asset of the count that broke it when it broke one.
fn call_denial(r: &Request<'_>, policy: &Policy, windows: &[(Windows, bool)], rule: PolicyRule) -> Refusal {
    let Some(call) = r.call.as_ref() else {
        return Refusal::PolicyDenied(rule);
    };
    match (&call.subject, rule) {
        (Subject::Call(facts), PolicyRule::CallDenied) => Refusal::CallDenied(super::call::policy::denial(
            policy.calls.as_deref(),
            facts,
            call.guarded,
        )),
        (Subject::TypedData(facts), PolicyRule::CallDenied) => {
            Refusal::CallDenied(super::call::policy::typed_denial(policy.calls.as_deref(), facts))
        }
        (_, PolicyRule::PerTransfer | PolicyRule::PerDay | PolicyRule::PerWeek) => counts_judged(call, policy, windows)
            .find(|j| j.verdict == Verdict::Deny(rule))
            .and_then(|j| {
                let asset = &call.counts[j.index].asset_key;
                over_limit(policy, asset, j.windows, rule, j.sum).map(|refusal| refusal.of_asset(asset))
            })
            .unwrap_or(Refusal::PolicyDenied(rule)),
        _ => Refusal::PolicyDenied(rule),
    }
}

/// A transfer's refusal by `rule`, with the figures of the limit it broke when it broke one.
fn denial(r: &Request<'_>, policy: &Policy, windows: Windows, rule: PolicyRule) -> Refusal {
    over_limit(policy, r.asset_key, windows, rule, r.value).unwrap_or(Refusal::PolicyDenied(rule))
}

/// `asked` of `asset_key` over the limit `rule` names, with the limit and what its window had counted (0 for
/// `per_transfer`); `None` when `rule` is no limit the policy sets for the asset.
fn over_limit(policy: &Policy, asset_key: &str, windows: Windows, rule: PolicyRule, asked: U256) -> Option<Refusal> {
    let limits = policy.limits.get(asset_key);
    let (limit, counted) = match rule {
        PolicyRule::PerTransfer => (limits.and_then(|l| l.per_transfer), U256::ZERO),
        PolicyRule::PerDay => (limits.and_then(|l| l.per_day), windows.day),
        PolicyRule::PerWeek => (limits.and_then(|l| l.per_week), windows.week),
        _ => (None, U256::ZERO),
    };
    Some(Refusal::OverLimit {
        rule,
        limit: limit?,
        counted,
        asked,
        asset: None,
    })
}

/// One rolling window of an asset's limits (or a chain's spending cap) as the decision counts it: the limit, what
/// it has counted, and what is left of it (never below zero). A transfer of up to `left` fits it; more does not.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Window {
    pub limit: U256,
    pub counted: U256,
    pub left: U256,
}

impl Window {
    pub fn of(limit: U256, counted: U256) -> Window {
        Window {
            limit,
            counted,
            left: limit.saturating_sub(counted),
        }
    }
}

/// What each window of an asset's limits has counted and has left: the `windows` the store read for the asset
/// (the same read the decision takes) against `limits`; `None` where the policy sets no such window.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Budget {
    pub per_day: Option<Window>,
    pub per_week: Option<Window>,
}

pub fn budget(limits: &crate::domain::policy::AssetLimits, windows: Windows) -> Budget {
    Budget {
        per_day: limits.per_day.map(|l| Window::of(l, windows.day)),
        per_week: limits.per_week.map(|l| Window::of(l, windows.week)),
    }
}

/// The policy's verdict, the host rule of a payment first (the policy may have changed since its fetch began).
fn verdict(r: &Request<'_>, policy: &Policy, windows: Windows, paid_before: bool) -> Verdict {
    if let Some(site) = r.payment
        && !site.host.is_some_and(|(host, port)| policy.allows_host(host, port))
    {
        return Verdict::Deny(PolicyRule::HostNotAllowed);
    }
    policy.evaluate(&Proposed {
        asset_key: r.asset_key,
        to: r.to,
        value: r.value,
        day_total: windows.day,
        week_total: windows.week,
        paid_before,
    })
}

/// The verdict on a call, in §18's order: what it is forbidden to be whatever the rules, the unlimited-approval
/// guard, the `calls` rules, then for each count the recipient rules and the asset's limits. Several counts of one
/// asset are judged as their sum (`per_transfer`, `approval_above` and the windows see it), each with its own party
/// for the recipient rules. `allow` by a rule never lifts the limits; any `approve` holds it.
pub fn call_verdict(call: &CallSite<'_>, policy: &Policy, windows: &[(Windows, bool)]) -> Verdict {
    use super::call::CallVerdict;
    if let Some(rule) = call.forbidden {
        return Verdict::Deny(rule);
    }
    match call.opaque {
        Some(Opaque::Permit2) => return Verdict::Deny(PolicyRule::CallNotUnderstood),
        Some(Opaque::Contract { asset_key }) if policy.limits.contains_key(asset_key) => {
            return Verdict::Deny(PolicyRule::CallNotUnderstood);
        }
        _ => {}
    }
    if call.unlimited && !policy.allows_unlimited_approvals() {
        return Verdict::Deny(PolicyRule::UnlimitedApproval);
    }
    let judged = match &call.subject {
        Subject::Call(facts) => policy.judge_call(facts, call.guarded),
        Subject::TypedData(facts) => policy.judge_typed(facts),
    };
    let mut holds = match judged {
        (CallVerdict::Deny, _) => return Verdict::Deny(PolicyRule::CallDenied),
        (CallVerdict::Approve, by) => Holds {
            call: by,
            ..Holds::default()
        },
        (CallVerdict::Allow, _) => Holds::default(),
    };
    if call.receivers.iter().any(|r| policy.blocked_recipients.contains(r)) {
        return Verdict::Deny(PolicyRule::RecipientBlocked);
    }
    for judged in counts_judged(call, policy, windows) {
        match judged.verdict {
            Verdict::Deny(rule) => return Verdict::Deny(rule),
            Verdict::NeedsApproval(more) => {
                holds = holds.and(Holds {
                    above_count: more.above.map(|_| judged.index),
                    ..more
                })
            }
            Verdict::Allow => {}
        }
    }
    match holds.any() {
        true => Verdict::NeedsApproval(holds),
        false => Verdict::Allow,
    }
}

/// One count of a call as the asset's rules judged it: the sum of its asset's counts and the windows read for it.
struct CountJudged {
    index: usize,
    sum: U256,
    windows: Windows,
    verdict: Verdict,
}

/// Each count of a call judged by the recipient rules and its asset's limits, in order (§18: several counts of one
/// asset are judged as their sum, each with its own party).
fn counts_judged<'c>(
    call: &'c CallSite<'_>,
    policy: &'c Policy,
    windows: &'c [(Windows, bool)],
) -> impl Iterator<Item = CountJudged> + 'c {
    call.counts.iter().enumerate().map(move |(index, count)| {
        let (w, paid_before) = windows.get(index).copied().unwrap_or_default();
        let sum = call
            .counts
            .iter()
            .filter(|c| c.asset_key == count.asset_key)
            .fold(U256::ZERO, |total, c| total.saturating_add(c.value));
        let verdict = policy.evaluate(&Proposed {
            asset_key: &count.asset_key,
            to: count.party,
            value: sum,
            day_total: w.day,
            week_total: w.week,
            paid_before,
        });
        CountJudged {
            index,
            sum,
            windows: w,
            verdict,
        }
    })
}

/// The start of the week window ending at `now`: older transfers never count.
pub fn week_ago(now: DateTime<Utc>) -> DateTime<Utc> {
    now - chrono::Duration::days(7)
}

/// Sums `(value, created_at)` of the asset's transfers into the windows ending at `now` (strictly inside them).
pub fn windows(rows: &[(U256, DateTime<Utc>)], now: DateTime<Utc>) -> Windows {
    let day_ago = now - chrono::Duration::hours(24);
    let mut totals = Windows::default();
    for (value, at) in rows.iter().filter(|(_, at)| *at > week_ago(now)) {
        totals.week = totals.week.saturating_add(*value);
        if *at > day_ago {
            totals.day = totals.day.saturating_add(*value);
        }
    }
    totals
}

/// What a replacement attempt (a fee bump or a cancel, §14) does to its transfer's reservation.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Growth {
    /// The reservation covers the new attempt.
    Covered,
    /// It grows by `extra`, which fits the cap.
    Grow { extra: U256 },
    /// It would have to grow and may not (a fee bump stays inside what was reserved).
    NotCovered,
    /// It would have to grow, and the cap cannot hold the excess.
    CapExceeded,
}

/// How a reservation of `reserved` meets an attempt that `needed`; `may_grow` for a cancel (which must land).
pub fn growth(reserved: U256, needed: U256, may_grow: bool, cap: U256, spent: U256) -> Growth {
    if needed <= reserved {
        return Growth::Covered;
    }
    if !may_grow {
        return Growth::NotCovered;
    }
    let extra = needed - reserved;
    match fits(cap, spent, extra) {
        true => Growth::Grow { extra },
        false => Growth::CapExceeded,
    }
}

/// How the fee of a send that fills a transfer's nonce is counted (§14): out of what the transfer held, and only the
/// excess (fees rose that much) anew against the cap.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FillCost {
    /// Moved from the transfer's reservation to the fill's.
    pub moved: U256,
    /// New against the cap.
    pub extra: U256,
    /// What the transfer still holds.
    pub left: U256,
}

/// The fill of a nonce whose transfer holds `held`, at a fee of `fee`; `None` when the excess does not fit the cap.
pub fn fill_cost(held: U256, fee: U256, cap: U256, spent: U256) -> Option<FillCost> {
    let moved = held.min(fee);
    let extra = fee - moved;
    (extra.is_zero() || fits(cap, spent, extra)).then_some(FillCost {
        moved,
        extra,
        left: held - moved,
    })
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use super::*;
    use crate::domain::policy::AssetLimits;

    const KEY: &str = "base:ETH";

    fn wei(n: u64) -> U256 {
        U256::from(n)
    }

    fn to() -> Address {
        Address::repeat_byte(0x33)
    }

    fn request(value: u64, reserved: u64) -> Request<'static> {
        Request {
            asset_key: KEY,
            to: to(),
            value: wei(value),
            reserved: wei(reserved),
            native_needed: None,
            node_nonce: None,
            payment: None,
            call: None,
        }
    }

    fn facts(cap: u64, spent: u64, gate: Gate) -> Facts {
        Facts {
            standing: Standing {
                agent_active: true,
                token_current: true,
                claim_held: true,
            },
            cap: wei(cap),
            spent: wei(spent),
            tokens: None,
            native: None,
            gate,
            stored_nonce: None,
            call_windows: Vec::new(),
            delegation: None,
        }
    }

    fn reserve(nonce: Option<u64>, release: u64) -> Decision {
        Decision::Reserve {
            nonce,
            release: wei(release),
        }
    }

    fn cap_exceeded(cap: u64, spent: u64) -> Decision {
        Decision::Refuse(Refusal::CapExceeded {
            cap: wei(cap),
            spent: wei(spent),
        })
    }

    fn denied(rule: PolicyRule) -> Decision {
        Decision::Refuse(Refusal::PolicyDenied(rule))
    }

    fn over(rule: PolicyRule, limit: u64, counted: u64, asked: u64) -> Decision {
        Decision::Refuse(Refusal::OverLimit {
            rule,
            limit: wei(limit),
            counted: wei(counted),
            asked: wei(asked),
            asset: None,
        })
    }

    #[test]
    fn a_budget_leaves_what_the_next_decision_allows_and_not_one_unit_more() {
        let limits = AssetLimits {
            per_day: Some(wei(30)),
            per_week: Some(wei(50)),
            ..AssetLimits::default()
        };
        let policy = limited(limits.clone());
        for (day, week) in [(0, 0), (12, 12), (12, 40), (29, 45), (30, 50), (31, 60)] {
            let w = Windows {
                day: wei(day),
                week: wei(week),
            };
            let b = budget(&limits, w);
            let (d, wk) = (b.per_day.expect("a day window"), b.per_week.expect("a week window"));
            assert_eq!((d.limit, d.counted), (wei(30), wei(day)));
            assert_eq!((wk.limit, wk.counted), (wei(50), wei(week)));
            let left = d.left.min(wk.left);
            let f = facts(u64::MAX, 0, policy_gate(&policy, day, week, true));
            let at = |v: U256| {
                decide(
                    &Request {
                        value: v,
                        ..request(0, 1)
                    },
                    &f,
                )
            };
            if !left.is_zero() {
                assert_eq!(at(left), reserve(Some(0), 0), "day {day}, week {week}");
            }
            assert!(
                matches!(at(left + wei(1)), Decision::Refuse(Refusal::OverLimit { .. })),
                "day {day}, week {week}"
            );
        }
        assert_eq!(budget(&AssetLimits::default(), Windows::default()), Budget::default());
    }

    fn policy_gate(policy: &Policy, day: u64, week: u64, paid_before: bool) -> Gate {
        Gate::Policy {
            policy: Box::new(policy.clone()),
            windows: Windows {
                day: wei(day),
                week: wei(week),
            },
            paid_before,
        }
    }

    fn limited(limits: AssetLimits) -> Policy {
        Policy {
            limits: BTreeMap::from([(KEY.to_string(), limits)]),
            ..Policy::default()
        }
    }

    #[test]
    fn the_cap_holds_reservations_up_to_and_including_it() {
        // (cap, spent, reserved, expected)
        let cases = [
            (100, 0, 100, reserve(Some(0), 0)),
            (100, 0, 101, cap_exceeded(100, 0)),
            (100, 60, 40, reserve(Some(0), 0)),
            (100, 60, 41, cap_exceeded(100, 60)),
            (0, 0, 0, reserve(Some(0), 0)),
            (0, 0, 1, cap_exceeded(0, 0)),
            (100, 150, 0, cap_exceeded(100, 150)),
        ];
        for (cap, spent, reserved, expected) in cases {
            let got = decide(&request(1, reserved), &facts(cap, spent, Gate::Decided));
            assert_eq!(got, expected, "cap {cap}, spent {spent}, reserved {reserved}");
        }
    }

    #[test]
    fn a_sweep_skips_the_cap_the_policy_and_the_inactivity_but_not_the_funds_or_the_nonce() {
        let inactive = Standing {
            agent_active: false,
            token_current: true,
            claim_held: true,
        };
        let swept = Facts {
            standing: inactive,
            stored_nonce: Some(4),
            ..facts(1, 50, Gate::Sweep { owners: None })
        };
        assert_eq!(decide(&request(1_000, 1_200), &swept), reserve(Some(4), 0));
        // The same request as the agent's own transfer is refused by the cap, and on an inactive agent at all.
        let as_agent = Facts {
            gate: Gate::Decided,
            ..swept.clone()
        };
        assert_eq!(
            decide(&request(1_000, 1_200), &as_agent),
            Decision::Refuse(Refusal::AgentInactive)
        );
        let as_agent = Facts {
            standing: Standing {
                agent_active: true,
                ..inactive
            },
            ..as_agent
        };
        assert_eq!(decide(&request(1_000, 1_200), &as_agent), cap_exceeded(1, 50));
        // The funds still decide: the balance less what the agent's transfers on their way hold.
        let short = Facts {
            native: Some(Funds {
                balance: wei(1_100),
                held: wei(200),
            }),
            ..swept.clone()
        };
        let r = Request {
            native_needed: Some(wei(1_100)),
            ..request(1_000, 1_200)
        };
        assert_eq!(
            decide(&r, &short),
            Decision::Refuse(Refusal::InsufficientFunds { available: wei(900) })
        );
        // A revoked token still moves nothing (a sweep carries none: its standing is the owner's).
        let revoked = Facts {
            standing: Standing {
                token_current: false,
                ..inactive
            },
            ..swept.clone()
        };
        assert_eq!(
            decide(&request(1_000, 1_200), &revoked),
            Decision::Refuse(Refusal::TokenRevoked)
        );
    }

    #[test]
    fn an_owner_sessions_sweep_goes_only_to_an_owner_address_and_the_admins_anywhere() {
        let r = request(1_000, 1_200);
        let owner = r.to;
        let stranger = Address::repeat_byte(0x77);
        assert_ne!(owner, stranger);
        let to_owners = |owners: &[Address]| {
            decide(
                &r,
                &Facts {
                    stored_nonce: Some(2),
                    ..facts(
                        1,
                        50,
                        Gate::Sweep {
                            owners: Some(owners.to_vec()),
                        },
                    )
                },
            )
        };
        assert_eq!(to_owners(&[stranger, owner]), reserve(Some(2), 0));
        assert_eq!(to_owners(&[stranger]), Decision::Refuse(Refusal::OwnerAddressRequired));
        assert_eq!(to_owners(&[]), Decision::Refuse(Refusal::OwnerAddressRequired));
        let anywhere = Facts {
            stored_nonce: Some(2),
            ..facts(1, 50, Gate::Sweep { owners: None })
        };
        assert_eq!(decide(&r, &anywhere), reserve(Some(2), 0));
        assert!(sweeps_to(stranger, None) && !sweeps_to(stranger, Some(&[owner])));
    }

    #[test]
    fn the_cap_does_not_overflow_near_the_top_of_u256() {
        let r = Request {
            reserved: U256::MAX,
            ..request(1, 0)
        };
        let f = Facts {
            cap: U256::MAX,
            spent: wei(1),
            ..facts(0, 0, Gate::Decided)
        };
        assert_eq!(
            decide(&r, &f),
            Decision::Refuse(Refusal::CapExceeded {
                cap: U256::MAX,
                spent: wei(1)
            })
        );
        assert_eq!(decide(&r, &Facts { spent: U256::ZERO, ..f }), reserve(Some(0), 0));
    }

    #[test]
    fn the_nonce_is_the_stored_count_or_the_nodes_whichever_is_higher() {
        // (stored, node, expected)
        let cases = [
            (None, None, 0),
            (Some(5), None, 5),
            (None, Some(7), 7),
            (Some(5), Some(3), 5),
            (Some(5), Some(9), 9),
        ];
        for (stored, node, expected) in cases {
            let r = Request {
                node_nonce: node,
                ..request(1, 1)
            };
            let f = Facts {
                stored_nonce: stored,
                ..facts(10, 0, Gate::Decided)
            };
            assert_eq!(
                decide(&r, &f),
                reserve(Some(expected), 0),
                "stored {stored:?}, node {node:?}"
            );
        }
    }

    #[test]
    fn token_funds_are_the_balance_less_unused_authorizations() {
        // (balance, held, value, expected)
        let cases = [
            (100, 0, 100, reserve(Some(0), 0)),
            (
                100,
                0,
                101,
                Decision::Refuse(Refusal::InsufficientTokens { available: wei(100) }),
            ),
            (100, 30, 70, reserve(Some(0), 0)),
            (
                100,
                30,
                71,
                Decision::Refuse(Refusal::InsufficientTokens { available: wei(70) }),
            ),
            (
                100,
                130,
                1,
                Decision::Refuse(Refusal::InsufficientTokens { available: wei(0) }),
            ),
        ];
        for (balance, held, value, expected) in cases {
            let f = Facts {
                tokens: Some(Funds {
                    balance: wei(balance),
                    held: wei(held),
                }),
                ..facts(10, 0, Gate::Decided)
            };
            assert_eq!(
                decide(&request(value, 2), &f),
                expected,
                "balance {balance}, held {held}, value {value}"
            );
        }
    }

    #[test]
    fn native_funds_are_the_balance_less_what_open_transfers_hold() {
        // (balance, held, needed, expected)
        let cases = [
            (100, 0, 100, reserve(Some(0), 0)),
            (
                100,
                0,
                101,
                Decision::Refuse(Refusal::InsufficientFunds { available: wei(100) }),
            ),
            (100, 40, 60, reserve(Some(0), 0)),
            (
                100,
                40,
                61,
                Decision::Refuse(Refusal::InsufficientFunds { available: wei(60) }),
            ),
        ];
        for (balance, held, needed, expected) in cases {
            let r = Request {
                native_needed: Some(wei(needed)),
                ..request(1, 1)
            };
            let f = Facts {
                native: Some(Funds {
                    balance: wei(balance),
                    held: wei(held),
                }),
                ..facts(1_000, 0, Gate::Decided)
            };
            assert_eq!(
                decide(&r, &f),
                expected,
                "balance {balance}, held {held}, needed {needed}"
            );
        }
    }

    #[test]
    fn funds_are_checked_before_the_policy_and_the_cap() {
        let blocked = Policy {
            blocked_recipients: vec![to()],
            ..Policy::default()
        };
        let f = Facts {
            tokens: Some(Funds {
                balance: wei(1),
                held: U256::ZERO,
            }),
            ..facts(0, 5, policy_gate(&blocked, 0, 0, true))
        };
        assert_eq!(
            decide(&request(2, 10), &f),
            Decision::Refuse(Refusal::InsufficientTokens { available: wei(1) })
        );
        let f = Facts {
            tokens: None,
            native: Some(Funds::default()),
            ..f
        };
        let r = Request {
            native_needed: Some(wei(1)),
            ..request(2, 10)
        };
        assert_eq!(
            decide(&r, &f),
            Decision::Refuse(Refusal::InsufficientFunds { available: wei(0) })
        );
    }

    #[test]
    fn every_policy_rule_refuses_with_its_name_and_passes_at_its_limit() {
        let limits = limited(AssetLimits {
            per_transfer: Some(wei(10)),
            per_day: Some(wei(30)),
            per_week: Some(wei(50)),
            approval_above: None,
        });
        let blocked = Policy {
            blocked_recipients: vec![to()],
            ..Policy::default()
        };
        let allowed_other = Policy {
            allowed_recipients: Some(vec![Address::repeat_byte(0x44)]),
            ..Policy::default()
        };
        let other_asset = Policy {
            limits: BTreeMap::from([("base:USDC".to_string(), AssetLimits::default())]),
            ..Policy::default()
        };
        // (policy, value, day, week, expected)
        let cases: [(&Policy, u64, u64, u64, Decision); 11] = [
            (&limits, 10, 0, 0, reserve(Some(0), 0)),
            (&limits, 11, 0, 0, over(PolicyRule::PerTransfer, 10, 0, 11)),
            (&limits, 10, 20, 20, reserve(Some(0), 0)),
            (&limits, 10, 21, 21, over(PolicyRule::PerDay, 30, 21, 10)),
            (&limits, 10, 0, 40, reserve(Some(0), 0)),
            (&limits, 10, 0, 41, over(PolicyRule::PerWeek, 50, 41, 10)),
            (&blocked, 1, 0, 0, denied(PolicyRule::RecipientBlocked)),
            (&allowed_other, 1, 0, 0, denied(PolicyRule::RecipientNotAllowed)),
            (&other_asset, 1, 0, 0, denied(PolicyRule::AssetNotAllowed)),
            (&Policy::default(), u64::MAX, u64::MAX, u64::MAX, reserve(Some(0), 0)),
            // Windows count values only: fees (in `reserved`) never enter them.
            (&limits, 10, 20, 40, reserve(Some(0), 0)),
        ];
        for (i, (policy, value, day, week, expected)) in cases.into_iter().enumerate() {
            let f = facts(u64::MAX, 0, policy_gate(policy, day, week, true));
            assert_eq!(decide(&request(value, 1_000), &f), expected, "case {i}");
        }
    }

    #[test]
    fn a_policy_refusal_comes_before_the_cap() {
        let limits = limited(AssetLimits {
            per_transfer: Some(wei(1)),
            ..AssetLimits::default()
        });
        let f = facts(0, 0, policy_gate(&limits, 0, 0, true));
        assert_eq!(decide(&request(2, 10), &f), over(PolicyRule::PerTransfer, 1, 0, 2));
    }

    #[test]
    fn approval_above_is_strict_and_a_held_transfer_must_fit_the_cap() {
        let policy = Policy {
            approval_ttl_secs: 60,
            ..limited(AssetLimits {
                approval_above: Some(wei(5)),
                ..AssetLimits::default()
            })
        };
        let hold = Decision::Hold {
            ttl_secs: 60,
            holds: Holds {
                approval_above: true,
                above: Some(wei(5)),
                ..Holds::default()
            },
        };
        // (value, cap, spent, reserved, expected)
        let cases = [
            (5, 100, 0, 50, reserve(Some(0), 0)),
            (6, 100, 0, 50, hold.clone()),
            (6, 100, 50, 50, hold),
            (6, 100, 51, 50, cap_exceeded(100, 51)),
        ];
        for (value, cap, spent, reserved, expected) in cases {
            let f = facts(cap, spent, policy_gate(&policy, 0, 0, true));
            assert_eq!(
                decide(&request(value, reserved), &f),
                expected,
                "value {value}, spent {spent}"
            );
        }
    }

    #[test]
    fn a_new_recipient_waits_only_when_the_policy_asks() {
        let asks = Policy {
            approve_new_recipients: true,
            ..Policy::default()
        };
        let hold = Decision::Hold {
            ttl_secs: asks.approval_ttl_secs,
            holds: Holds {
                new_recipient: true,
                ..Holds::default()
            },
        };
        let cases = [
            (&asks, false, hold),
            (&asks, true, reserve(Some(0), 0)),
            (&Policy::default(), false, reserve(Some(0), 0)),
        ];
        for (policy, paid_before, expected) in cases {
            let f = facts(100, 0, policy_gate(policy, 0, 0, paid_before));
            assert_eq!(decide(&request(1, 1), &f), expected, "paid before: {paid_before}");
        }
    }

    #[test]
    fn an_approval_gives_back_what_it_held_as_it_takes_its_reservation() {
        let approval = |status, expired, held| Gate::Approval {
            status,
            expired,
            held: wei(held),
        };
        let waiting = ApprovalStatus::AwaitingApproval;
        // (status, expired, held, cap, spent, reserved, expected)
        let cases = [
            (waiting, false, 30, 100, 100, 30, reserve(Some(0), 30)),
            (waiting, false, 30, 100, 100, 31, cap_exceeded(100, 70)),
            (waiting, false, 30, 100, 20, 100, reserve(Some(0), 30)),
            (
                waiting,
                true,
                30,
                100,
                30,
                1,
                Decision::Refuse(Refusal::NotAwaiting(ApprovalStatus::Expired)),
            ),
            (
                ApprovalStatus::Rejected,
                false,
                30,
                100,
                30,
                1,
                Decision::Refuse(Refusal::NotAwaiting(ApprovalStatus::Rejected)),
            ),
            (
                ApprovalStatus::Approved,
                true,
                30,
                100,
                30,
                1,
                Decision::Refuse(Refusal::NotAwaiting(ApprovalStatus::Approved)),
            ),
        ];
        for (status, expired, held, cap, spent, reserved, expected) in cases {
            let f = facts(cap, spent, approval(status, expired, held));
            assert_eq!(
                decide(&request(1, reserved), &f),
                expected,
                "{status:?} expired {expired}, held {held}, spent {spent}, reserved {reserved}"
            );
        }
    }

    fn payment<'a>(host: Option<(&'a str, u16)>) -> Request<'a> {
        Request {
            payment: Some(PaymentSite { host }),
            reserved: U256::ZERO,
            ..request(5, 0)
        }
    }

    #[test]
    fn a_payment_uses_no_nonce_and_costs_the_cap_nothing_but_needs_a_cap_above_zero() {
        let open = Policy::default();
        let cases = [
            (1, 1, reserve(None, 0)),
            // Already over the cap (it was lowered): nothing more, not even a payment that costs it nothing.
            (1, 2, cap_exceeded(1, 2)),
            (0, 0, cap_exceeded(0, 0)),
        ];
        for (cap, spent, expected) in cases {
            let f = Facts {
                stored_nonce: Some(4),
                ..facts(cap, spent, policy_gate(&open, 0, 0, true))
            };
            assert_eq!(
                decide(&payment(Some(("api.example.com", 443))), &f),
                expected,
                "cap {cap}"
            );
        }
        // The cap-zero rule comes first, before the token funds.
        let f = Facts {
            tokens: Some(Funds::default()),
            ..facts(0, 0, Gate::Decided)
        };
        assert_eq!(decide(&payment(None), &f), cap_exceeded(0, 0));
    }

    #[test]
    fn a_payment_goes_only_to_allowed_hosts_and_its_value_counts_in_the_windows() {
        let hosts = Policy {
            allowed_hosts: Some(vec!["api.example.com".into(), "pay.example.org:8443".into()]),
            ..limited(AssetLimits {
                per_day: Some(wei(10)),
                ..AssetLimits::default()
            })
        };
        // (host, day total, expected)
        let cases = [
            (Some(("API.example.com", 443)), 5, reserve(None, 0)),
            (Some(("api.example.com", 443)), 6, over(PolicyRule::PerDay, 10, 6, 5)),
            (Some(("pay.example.org", 8443)), 0, reserve(None, 0)),
            (Some(("pay.example.org", 443)), 0, denied(PolicyRule::HostNotAllowed)),
            (Some(("evil.example.com", 443)), 0, denied(PolicyRule::HostNotAllowed)),
            (None, 0, denied(PolicyRule::HostNotAllowed)),
        ];
        for (host, day, expected) in cases {
            let f = facts(1, 0, policy_gate(&hosts, day, day, true));
            assert_eq!(decide(&payment(host), &f), expected, "{host:?}, day {day}");
        }
        // Without a host no policy lets a payment through, even the default one.
        let open = Policy::default();
        let f = facts(1, 0, policy_gate(&open, 0, 0, true));
        assert_eq!(decide(&payment(None), &f), denied(PolicyRule::HostNotAllowed));
    }

    #[test]
    fn windows_count_the_last_day_and_week_strictly() {
        let now = DateTime::from_timestamp(1_000_000_000, 0).expect("a time");
        let hours = |h: i64| now - chrono::Duration::hours(h);
        let rows = [
            (wei(1), hours(1)),
            (wei(2), hours(24)),
            (wei(4), hours(23)),
            (wei(8), hours(24 * 7)),
            (wei(16), hours(24 * 7 - 1)),
            (wei(32), hours(24 * 8)),
        ];
        assert_eq!(
            windows(&rows, now),
            Windows {
                day: wei(1 + 4),
                week: wei(1 + 2 + 4 + 16)
            }
        );
        assert_eq!(windows(&[], now), Windows::default());
        assert_eq!(week_ago(now), hours(24 * 7));
    }

    #[test]
    fn a_fill_takes_its_fee_from_what_the_transfer_held_and_only_the_excess_from_the_cap() {
        let cost = |moved, extra, left| {
            Some(FillCost {
                moved: wei(moved),
                extra: wei(extra),
                left: wei(left),
            })
        };
        // (held, fee, cap, spent, expected)
        let cases = [
            (100, 30, 0, 500, cost(30, 0, 70)),
            (100, 100, 0, 500, cost(100, 0, 0)),
            (100, 130, 530, 500, cost(100, 30, 0)),
            (100, 131, 530, 500, None),
            (0, 10, 10, 0, cost(0, 10, 0)),
        ];
        for (held, fee, cap, spent, expected) in cases {
            assert_eq!(
                fill_cost(wei(held), wei(fee), wei(cap), wei(spent)),
                expected,
                "held {held}, fee {fee}, cap {cap}, spent {spent}"
            );
        }
    }

    #[test]
    fn a_transfer_reserves_its_value_and_twice_its_maximum_fee_and_needs_one() {
        assert_eq!(
            Cost::of(wei(100), wei(7)),
            Cost {
                needed: wei(107),
                reserved: wei(114)
            }
        );
        // A token transfer moves no native coin: it needs one fee and reserves two.
        assert_eq!(
            Cost::of(U256::ZERO, wei(7)),
            Cost {
                needed: wei(7),
                reserved: wei(14)
            }
        );
        assert_eq!(Cost::of(U256::MAX, wei(1)).reserved, U256::MAX);
    }

    #[test]
    fn a_replacement_stays_inside_its_reservation_unless_it_may_grow_within_the_cap() {
        // (reserved, needed, may grow, cap, spent, expected)
        let cases = [
            (100, 100, false, 0, 500, Growth::Covered),
            (100, 101, false, 1_000, 0, Growth::NotCovered),
            (100, 130, true, 530, 500, Growth::Grow { extra: wei(30) }),
            (100, 131, true, 530, 500, Growth::CapExceeded),
            (100, 50, true, 0, 500, Growth::Covered),
        ];
        for (reserved, needed, may_grow, cap, spent, expected) in cases {
            assert_eq!(
                growth(wei(reserved), wei(needed), may_grow, wei(cap), wei(spent)),
                expected,
                "reserved {reserved}, needed {needed}, may grow {may_grow}"
            );
        }
    }

    #[test]
    fn spending_moves_by_what_is_added_and_given_back_never_below_zero() {
        assert_eq!(spent_after(wei(10), wei(5), wei(3)), wei(12));
        assert_eq!(spent_after(wei(10), wei(0), wei(30)), wei(0));
        assert_eq!(spent_after(U256::MAX, wei(1), wei(0)), U256::MAX);
        assert!(fits(wei(10), wei(4), wei(6)));
        assert!(!fits(wei(10), wei(4), wei(7)));
        assert!(!fits(U256::MAX, wei(1), U256::MAX));
    }

    #[test]
    fn a_deleted_agent_a_reissued_token_or_a_lost_claim_moves_nothing_whatever_else_would_allow() {
        let open = Policy::default();
        for (agent_active, token_current, claim_held, want) in [
            (false, true, true, Some(Refusal::AgentInactive)),
            (true, false, true, Some(Refusal::TokenRevoked)),
            (true, true, false, Some(Refusal::ClaimLost)),
            (false, false, false, Some(Refusal::AgentInactive)),
            (true, false, false, Some(Refusal::TokenRevoked)),
            (true, true, true, None),
        ] {
            for gate in [Gate::Decided, policy_gate(&open, 0, 0, true)] {
                let f = Facts {
                    standing: Standing {
                        agent_active,
                        token_current,
                        claim_held,
                    },
                    ..facts(10, 0, gate)
                };
                let got = decide(&request(1, 1), &f);
                match want.clone() {
                    Some(refusal) => assert_eq!(got, Decision::Refuse(refusal)),
                    None => assert!(matches!(got, Decision::Reserve { .. }), "{got:?}"),
                }
            }
        }
    }

    /// A call of `data` to `to()` counting `counts`, by a guarded or unguarded agent.
    fn call_site<'a>(data: &'a [u8], counts: &'a [Counted], unlimited: bool, guarded: bool) -> CallSite<'a> {
        CallSite {
            subject: Subject::Call(crate::domain::call::CallFacts {
                chain: "base",
                to: to(),
                calldata: data,
                value_wei: U256::ZERO,
                agent: Address::repeat_byte(0x11),
            }),
            forbidden: None,
            unlimited,
            guarded,
            counts,
            receivers: &[],
            opaque: None,
        }
    }

    #[test]
    fn a_call_is_judged_by_the_guard_the_rules_then_each_asset_it_counts() {
        let data = [0x09, 0x5e, 0xa7, 0xb3];
        let usdc = |value: u64| Counted {
            asset_key: "base:USDC".into(),
            value: wei(value),
            party: to(),
        };
        let allow_calls = || {
            let calls = crate::domain::call::CallsPolicy::try_from(serde_json::json!({"default": "allow"})).unwrap();
            Some(Box::new(calls))
        };
        let open = Policy {
            calls: allow_calls(),
            ..Policy::default()
        };
        let mut limited = Policy {
            calls: allow_calls(),
            ..Policy::default()
        };
        limited.limits.insert(
            "base:USDC".into(),
            super::super::policy::AssetLimits {
                per_day: Some(wei(10)),
                approval_above: Some(wei(5)),
                ..Default::default()
            },
        );
        // The second rule holds every call; an amount above approval_above holds it as well.
        let mut approving = limited.clone();
        approving.calls = Some(Box::new(
            crate::domain::call::CallsPolicy::try_from(serde_json::json!({"rules": [
                {"chain": "base", "to": "*", "function": "transfer(address,uint256)", "action": "deny"},
                {"chain": "*", "to": "*", "function": "*", "action": "approve"},
            ]}))
            .unwrap(),
        ));
        let none = Policy::default();
        let daily = |day: u64| {
            [(
                Windows {
                    day: wei(day),
                    week: wei(day),
                },
                true,
            )]
        };
        // (name, policy, grants unlimited, guarded, counts, windows of the count, verdict)
        type Case<'p> = (
            &'static str,
            &'p Policy,
            bool,
            bool,
            Vec<Counted>,
            [(Windows, bool); 1],
            Verdict,
        );
        let cases: Vec<Case<'_>> = vec![
            (
                "unlimited refused first",
                &open,
                true,
                true,
                vec![usdc(1)],
                daily(0),
                Verdict::Deny(PolicyRule::UnlimitedApproval),
            ),
            (
                "no calls on a guarded agent",
                &none,
                false,
                true,
                vec![usdc(1)],
                daily(0),
                Verdict::Deny(PolicyRule::CallDenied),
            ),
            (
                "no calls on an unguarded agent",
                &none,
                false,
                false,
                vec![usdc(1)],
                daily(0),
                Verdict::Allow,
            ),
            (
                "within the day",
                &limited,
                false,
                true,
                vec![usdc(4)],
                daily(6),
                Verdict::Allow,
            ),
            (
                "past the day with what was counted",
                &limited,
                false,
                true,
                vec![usdc(5)],
                daily(6),
                Verdict::Deny(PolicyRule::PerDay),
            ),
            (
                "above approval_above",
                &limited,
                false,
                true,
                vec![usdc(6)],
                daily(0),
                Verdict::NeedsApproval(Holds {
                    approval_above: true,
                    above: Some(wei(5)),
                    above_count: Some(0),
                    ..Holds::default()
                }),
            ),
            (
                "held by a rule of calls and by approval_above",
                &approving,
                false,
                true,
                vec![usdc(6)],
                daily(0),
                Verdict::NeedsApproval(Holds {
                    approval_above: true,
                    call: Some(crate::domain::call::CallRuleRef::Rule(1)),
                    above: Some(wei(5)),
                    above_count: Some(0),
                    ..Holds::default()
                }),
            ),
        ];
        for (name, policy, unlimited, guarded, counts, windows, want) in cases {
            let site = call_site(&data, &counts, unlimited, guarded);
            assert_eq!(call_verdict(&site, policy, &windows), want, "{name}");
        }
    }
}
