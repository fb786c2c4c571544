//! The verdict on a contract call or typed data to sign (§18), and its refusal in words.

use alloy::primitives::U256;

use super::{CallSite, Opaque, Refusal, Request, Subject, Windows, over_limit};
use crate::domain::call::{self, CallVerdict};
use crate::domain::policy::{Holds, Policy, PolicyRule, Proposed, Verdict};

/// The verdict on a call, in §18's order: what it is forbidden to be whatever the rules, the unlimited-approval
/// guard, the `calls` rules, then for each count the recipient rules and the asset's limits. Several counts of one
/// asset are judged as their sum (`per_transfer`, `approval_above` and the windows see it), each with its own party
/// for the recipient rules. `allow` by a rule never lifts the limits; any `approve` holds it.
pub fn call_verdict(call: &CallSite<'_>, policy: &Policy, windows: &[(Windows, bool)]) -> Verdict {
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
        Subject::Batch(batch) => {
            let (verdict, by, _) = batch.judge(policy.calls.as_deref(), call.guarded);
            (verdict, by)
        }
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

/// A call's refusal by `rule`: in words when the `calls` rules refused a contract call or typed data, with the
/// figures of the limit and the asset of the count that broke it when it broke one.
pub(super) fn call_denial(r: &Request<'_>, policy: &Policy, windows: &[(Windows, bool)], rule: PolicyRule) -> Refusal {
    let Some(call) = r.call.as_ref() else {
        return Refusal::PolicyDenied(rule);
    };
    match (&call.subject, rule) {
        (Subject::Call(facts), PolicyRule::CallDenied) => {
            Refusal::CallDenied(call::policy::denial(policy.calls.as_deref(), facts, call.guarded))
        }
        (Subject::TypedData(facts), PolicyRule::CallDenied) => {
            Refusal::CallDenied(call::policy::typed_denial(policy.calls.as_deref(), facts))
        }
        (Subject::Batch(batch), PolicyRule::CallDenied) => {
            Refusal::CallDenied(batch.denial(policy.calls.as_deref(), call.guarded).map_or_else(
                || "no rule allows it".to_string(),
                |(i, why)| format!("call {i}: {why}"),
            ))
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
