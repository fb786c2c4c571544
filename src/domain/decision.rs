//! Whether money may move: one pure function, `decide`, over the facts the store reads inside the reserving
//! transaction (the cap and what counts against it, balances and what is held of them, the policy and its windows,
//! a waiting transfer being approved, the nonce counter) and the request. Its answer is applied by the store in that
//! same transaction, so the rules hold under concurrent requests. Every rule of §8, §11, §13, §14 and §16 that
//! decides a reservation, a nonce fill or a fee bump lives here, with the arithmetic of its boundaries: the cap's
//! (`cost`), a replacement's and a fill's (`replacement`), the rolling windows of a policy's limits (`windows`), and
//! the verdict on a contract call or typed data (`calls`).

use alloy::primitives::{Address, U256};

use super::policy::{ApprovalStatus, Holds, Policy, PolicyRule, Proposed, Verdict};

mod calls;
mod cost;
mod replacement;
mod windows;

pub use calls::call_verdict;
pub use cost::{Cost, fits, spent_after};
pub use replacement::{FillCost, Growth, fill_cost, growth};
pub use windows::{Budget, Window, Windows, budget, week_ago, windows};

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
    /// A user operation the operator's sponsorship pays the gas of (§22): its maximum cost and whether the
    /// paymaster trusts the sponsor as signer and bundler and the sponsor can pay the bundle, as read before.
    pub sponsored: Option<SponsoredSite>,
}

/// What a sponsored outflow brings to the decision (§22).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SponsoredSite {
    /// Every gas limit of the operation, the paymaster's included, times its `maxFeePerGas`.
    pub max_cost: U256,
    /// The paymaster's `signers(sponsor)` and `isBundlerAllowed(sponsor)`, and the sponsor's balance covering the
    /// bundle's gas, as read before.
    pub ready: bool,
}

/// What the store read of a sponsorship under the agent's lock (§22).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct SponsorFacts {
    /// The operator's daily budget for the agent on the chain (0: none, or ended).
    pub per_day: U256,
    /// What the sponsorship paid or holds over the last 24 hours.
    pub counted: U256,
    /// The paymaster's deposit at the latest block, and what this service's unsettled operations hold of it.
    pub deposit: Funds,
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
    /// A batch of calls (§22), each judged on its own.
    Batch(super::call::batch::BatchFacts<'a>),
}

impl Subject<'_> {
    /// Whether it is a transaction of the wallet (a nonce).
    pub fn on_chain(&self) -> bool {
        matches!(self, Subject::Call(_) | Subject::Batch(_))
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
    /// A sponsored outflow (§22): the agent's sponsorship on the chain and the paymaster's deposit.
    pub sponsorship: Option<SponsorFacts>,
    /// The wallet's nonce the agent's EIP-7702 authorization takes, when a sponsored operation of the agent not yet
    /// settled carries one that the chain has not shown used (§22): no transaction of the wallet is signed then.
    pub designation: Option<u64>,
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
    /// A transaction of the wallet while the designation of the agent's account, whose authorization takes the
    /// wallet's `nonce`, is unmined (§22): signed now, it would take that nonce too, and one of the two would leave
    /// the wallet's sequence a gap or a transaction that never lands.
    DesignationUnmined {
        nonce: u64,
    },
    /// More gas than the agent's sponsorship has left of its `per_day` (§22 `sponsorship_limit`).
    SponsorshipLimit {
        left: U256,
    },
    /// The paymaster does not trust the sponsor or does not allow it as bundler, its deposit less what this service
    /// holds of it cannot cover the operation, or the sponsor cannot pay the bundle (§22 `sponsor_unfunded`).
    SponsorUnfunded,
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

/// Whether a sweep may go to `to`: one of `owners` (an owner session's sweep), or anywhere (`None`: the admin's).
pub fn sweeps_to(to: Address, owners: Option<&[Address]>) -> bool {
    owners.is_none_or(|owners| owners.contains(&to))
}

/// The one decision of a reservation. Order: where a sweep goes; the standing of whoever asked; what a delegation
/// leaves; a payment on a chain whose cap is 0; the token funds; the native funds (a call's come last, after the
/// cap); the gate (policy or approval; a transfer held for approval must fit the cap as it is); the cap (not for a
/// sweep); the nonce (none of the wallet's while a sponsored designation of the account is unmined).
pub fn decide(r: &Request<'_>, f: &Facts) -> Decision {
    let refuse = Decision::Refuse;
    let sweep = matches!(f.gate, Gate::Sweep { .. });
    if let Some(refusal) = refusal_before_gate(r, f, sweep) {
        return refuse(refusal);
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
            Verdict::Deny(rule) => return refuse(calls::call_denial(r, policy, &f.call_windows, rule)),
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
    if let Some(sponsored) = &r.sponsored
        && let Some(refusal) = sponsorship(f, sponsored)
    {
        return refuse(refusal);
    }
    let off_chain = r.payment.is_some() || r.call.is_some_and(|c| !c.subject.on_chain());
    let nonce = match off_chain {
        true => None,
        false => Some(f.stored_nonce.unwrap_or(0).max(r.node_nonce.unwrap_or(0))),
    };
    // The wallet's next nonce is the authorization's until it lands (§22): none of the wallet's own is signed.
    if let (Some(_), None, Some(nonce)) = (nonce, &r.sponsored, f.designation) {
        return refuse(Refusal::DesignationUnmined { nonce });
    }
    Decision::Reserve { nonce, release }
}

/// The refusals `decide` takes before the gate, in its order: where a sweep goes; the standing of whoever asked;
/// what a delegation leaves; a payment on a chain whose cap is 0; the token funds.
fn refusal_before_gate(r: &Request<'_>, f: &Facts, sweep: bool) -> Option<Refusal> {
    if let Gate::Sweep { owners } = &f.gate
        && !sweeps_to(r.to, owners.as_deref())
    {
        return Some(Refusal::OwnerAddressRequired);
    }
    if !f.standing.agent_active && !sweep {
        return Some(Refusal::AgentInactive);
    }
    if !f.standing.token_current {
        return Some(Refusal::TokenRevoked);
    }
    if !f.standing.claim_held {
        return Some(Refusal::ClaimLost);
    }
    // What the delegation leaves must hold the amount, so that no number of concurrent redemptions on any number of
    // instances sends what the chain would refuse (§21).
    if let Some(delegation) = f.delegation
        && delegation.available() < r.value
    {
        return Some(Refusal::DelegationLimit {
            available: delegation.available(),
        });
    }
    // An x402 payment costs the cap no native coin, but an agent whose cap on the chain is 0 pays nothing there.
    if r.payment.is_some() && f.cap.is_zero() {
        return Some(Refusal::CapExceeded {
            cap: f.cap,
            spent: f.spent,
        });
    }
    if let Some(tokens) = f.tokens
        && tokens.available() < r.value
    {
        return Some(Refusal::InsufficientTokens {
            available: tokens.available(),
        });
    }
    None
}

/// A sponsored outflow's checks, in the same step as the cap (§22): a cap of 0 moves nothing whoever pays; then
/// what the sponsorship has left of its `per_day`; then whether the sponsor and the paymaster's deposit (less what
/// this service's unsettled operations hold of it) can pay it.
fn sponsorship(f: &Facts, sponsored: &SponsoredSite) -> Option<Refusal> {
    if f.cap.is_zero() {
        return Some(Refusal::CapExceeded {
            cap: f.cap,
            spent: f.spent,
        });
    }
    let facts = f.sponsorship.unwrap_or_default();
    let left = facts.per_day.saturating_sub(facts.counted);
    if sponsored.max_cost > left || facts.per_day.is_zero() {
        return Some(Refusal::SponsorshipLimit { left });
    }
    if !sponsored.ready || facts.deposit.available() < sponsored.max_cost {
        return Some(Refusal::SponsorUnfunded);
    }
    None
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

#[cfg(test)]
mod tests;
