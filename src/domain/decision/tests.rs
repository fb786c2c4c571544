//! `decide`, rule by rule, on the boundaries of each.

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
        sponsored: None,
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
        sponsorship: None,
        designation: None,
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
fn no_wallet_nonce_is_named_while_a_sponsored_designation_of_the_account_is_unmined() {
    let designating = Facts {
        designation: Some(3),
        stored_nonce: Some(3),
        ..facts(10, 0, Gate::Decided)
    };
    // A transaction of the wallet: refused, nothing signed, whatever the node counts.
    let unmined = Decision::Refuse(Refusal::DesignationUnmined { nonce: 3 });
    assert_eq!(decide(&request(1, 1), &designating), unmined);
    let r = Request {
        node_nonce: Some(3),
        ..request(1, 1)
    };
    assert_eq!(decide(&r, &designating), unmined);
    // Another refusal comes first: this one only says "later" to what would be signed now.
    assert_eq!(decide(&request(1, 11), &designating), cap_exceeded(10, 0));
    // One held for approval signs nothing yet (it is decided again once approved).
    let policy = Policy {
        approval_ttl_secs: 60,
        ..limited(AssetLimits {
            approval_above: Some(wei(5)),
            ..AssetLimits::default()
        })
    };
    let held = Facts {
        gate: policy_gate(&policy, 0, 0, true),
        ..designating.clone()
    };
    assert!(matches!(decide(&request(6, 1), &held), Decision::Hold { .. }));
    // An x402 authorization uses no nonce of the wallet's, a sponsored operation the EntryPoint's: both go.
    assert_eq!(decide(&payment(None), &designating), reserve(None, 0));
    let sponsored = Request {
        sponsored: Some(SponsoredSite {
            max_cost: wei(1),
            ready: true,
        }),
        ..request(1, 1)
    };
    let sponsorship = Facts {
        sponsorship: Some(SponsorFacts {
            per_day: wei(5),
            counted: U256::ZERO,
            deposit: Funds {
                balance: wei(5),
                held: U256::ZERO,
            },
        }),
        ..designating.clone()
    };
    assert_eq!(decide(&sponsored, &sponsorship), reserve(Some(3), 0));
    // None unmined: the wallet's next nonce as always.
    let landed = Facts {
        designation: None,
        stored_nonce: Some(4),
        ..designating
    };
    assert_eq!(decide(&request(1, 1), &landed), reserve(Some(4), 0));
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
