use super::*;
use crate::domain::call::condition::ConditionError;
use crate::domain::call::request::{CallInput, encode};
use serde_json::json;

const AGENT: Address = Address::repeat_byte(0xa1);
const TOKEN: Address = Address::repeat_byte(0x05);
const ROUTER: Address = Address::repeat_byte(0x70);
const OTHER: Address = Address::repeat_byte(0x99);

fn policy(json: Value) -> CallsPolicy {
    CallsPolicy::try_from(json).expect("valid calls policy")
}

fn problems(json: Value) -> Vec<(String, CallsProblem)> {
    let InvalidCallsPolicy(list) = CallsPolicy::try_from(json).expect_err("refused");
    list.into_iter().map(|e| (e.path, e.problem)).collect()
}

fn calldata(signature: &str, args: Value) -> Vec<u8> {
    let args = args.as_array().cloned().unwrap_or_default();
    encode(CallInput::Function { signature, args: &args })
        .expect(signature)
        .calldata
        .to_vec()
}

fn facts<'a>(chain: &'a str, to: Address, calldata: &'a [u8], value_wei: u128) -> CallFacts<'a> {
    CallFacts {
        chain,
        to,
        calldata,
        value_wei: U256::from(value_wei),
        agent: AGENT,
    }
}

fn approve(spender: Address, amount: &str) -> Vec<u8> {
    calldata("approve(address,uint256)", json!([spender.to_string(), amount]))
}

#[test]
fn the_contract_example_reads_and_judges() {
    let p = policy(json!({
        "default": "deny",
        "rules": [
            {"chain": "base", "to": TOKEN.to_string(), "function": "approve(address,uint256)",
             "args": {"0": {"in": [ROUTER.to_string()]}, "1": {"lte": "100000000"}}, "action": "allow"},
            {"chain": "base", "to": ROUTER.to_string(), "function": "deposit(uint256)", "value": {"eq": "0"}, "action": "allow"},
            {"chain": "*", "to": "*", "function": "*", "action": "approve"}
        ],
        "allow_unlimited_approvals": false
    }));
    let deposit = calldata("deposit(uint256)", json!(["5"]));
    let cases = [
        (
            "within the rule",
            "base",
            TOKEN,
            approve(ROUTER, "100000000"),
            0,
            CallVerdict::Allow,
        ),
        (
            "amount one above",
            "base",
            TOKEN,
            approve(ROUTER, "100000001"),
            0,
            CallVerdict::Approve,
        ),
        (
            "another spender",
            "base",
            TOKEN,
            approve(OTHER, "1"),
            0,
            CallVerdict::Approve,
        ),
        (
            "another chain",
            "ethereum",
            TOKEN,
            approve(ROUTER, "1"),
            0,
            CallVerdict::Approve,
        ),
        (
            "chain in capitals",
            "BASE",
            TOKEN,
            approve(ROUTER, "1"),
            0,
            CallVerdict::Allow,
        ),
        (
            "another contract",
            "base",
            OTHER,
            approve(ROUTER, "1"),
            0,
            CallVerdict::Approve,
        ),
        (
            "deposit without value",
            "base",
            ROUTER,
            deposit.clone(),
            0,
            CallVerdict::Allow,
        ),
        ("deposit with 1 wei", "base", ROUTER, deposit, 1, CallVerdict::Approve),
    ];
    for (name, chain, to, data, value, expected) in cases {
        assert_eq!(p.judge(&facts(chain, to, &data, value), true), expected, "{name}");
    }
    assert!(p.has_approval_rules());
}

#[test]
fn the_first_matching_rule_decides_then_the_default_then_guarding() {
    let data = approve(ROUTER, "1");
    let call = facts("base", TOKEN, &data, 0);
    let rule =
        |action: &str| json!({"chain": "*", "to": "*", "function": "approve(address,uint256)", "action": action});
    let cases = [
        (json!({"rules": [rule("deny"), rule("allow")]}), true, CallVerdict::Deny),
        (
            json!({"rules": [rule("allow"), rule("deny")]}),
            true,
            CallVerdict::Allow,
        ),
        (json!({"rules": [], "default": "allow"}), true, CallVerdict::Allow),
        (json!({"rules": [], "default": "approve"}), false, CallVerdict::Approve),
        (json!({"rules": []}), true, CallVerdict::Deny),
        (json!({"rules": []}), false, CallVerdict::Allow),
        (
            json!({"rules": [{"chain": "*", "to": "*", "function": "transfer(address,uint256)", "action": "allow"}]}),
            true,
            CallVerdict::Deny,
        ),
    ];
    for (json, guarded, expected) in cases {
        assert_eq!(
            policy(json.clone()).judge(&call, guarded),
            expected,
            "{json} guarded={guarded}"
        );
    }
    assert_eq!(judge(None, &call, true), CallVerdict::Deny);
    assert_eq!(judge(None, &call, false), CallVerdict::Allow);
}

#[test]
fn functions_match_the_selector_sent_however_the_rule_spells_them() {
    let p = policy(json!({"rules": [
        {"chain": "*", "to": "*", "function": "function approve(address spender, uint amount)",
         "args": {"spender": {"eq": "$agent"}}, "action": "allow"}
    ]}));
    let to_agent = approve(AGENT, "1");
    let to_other = approve(OTHER, "1");
    assert_eq!(p.judge(&facts("base", TOKEN, &to_agent, 0), true), CallVerdict::Allow);
    assert_eq!(p.judge(&facts("base", TOKEN, &to_other, 0), true), CallVerdict::Deny);
    // Calldata with the selector but arguments that do not decode matches no rule with argument conditions.
    let short = &to_agent[..4 + 32];
    assert_eq!(p.judge(&facts("base", TOKEN, short, 0), true), CallVerdict::Deny);
    // A plain value send (no selector) only meets "*".
    assert_eq!(p.judge(&facts("base", TOKEN, &[], 1), true), CallVerdict::Deny);
    let any = policy(
        json!({"rules": [{"chain": "*", "to": "*", "function": "*", "value": {"lte": "1"}, "action": "allow"}]}),
    );
    assert_eq!(
        any.judge(&facts("base", TOKEN, &[], 1_000_000_000_000_000_000), true),
        CallVerdict::Allow
    );
    assert_eq!(
        any.judge(&facts("base", TOKEN, &[], 1_000_000_000_000_000_001), true),
        CallVerdict::Deny
    );
}

#[test]
fn argument_names_come_from_the_policy_abi_of_that_contract() {
    let key = format!("base:{ROUTER:#x}");
    let p = policy(json!({
        "abis": {key: [{"type": "function", "name": "swapExactETHForTokens", "stateMutability": "payable",
            "inputs": [{"name": "amountOutMin", "type": "uint256"}, {"name": "path", "type": "address[]"},
                       {"name": "to", "type": "address"}, {"name": "deadline", "type": "uint256"}],
            "outputs": []}]},
        "rules": [{"chain": "base", "to": ROUTER.to_string(),
                   "function": "swapExactETHForTokens(uint256,address[],address,uint256)",
                   "args": {"to": {"eq": "$agent"}, "amountOutMin": {"gt": 0}}, "action": "allow"}]
    }));
    let swap = |to: Address, min: &str| {
        calldata(
            "swapExactETHForTokens(uint256,address[],address,uint256)",
            json!([min, [TOKEN.to_string()], to.to_string(), "1"]),
        )
    };
    assert_eq!(
        p.judge(&facts("base", ROUTER, &swap(AGENT, "1"), 5), true),
        CallVerdict::Allow
    );
    assert_eq!(
        p.judge(&facts("base", ROUTER, &swap(OTHER, "1"), 5), true),
        CallVerdict::Deny
    );
    assert_eq!(
        p.judge(&facts("base", ROUTER, &swap(AGENT, "0"), 5), true),
        CallVerdict::Deny
    );
    assert!(p.abi_for("BASE", ROUTER).is_some());
    assert!(p.abi_for("base", TOKEN).is_none());
    assert!(!p.has_approval_rules());
}

#[test]
fn invalid_policies_name_every_problem() {
    let f = "approve(address,uint256)";
    let cases: Vec<(Value, Vec<(&str, CallsProblem)>)> = vec![
        (
            json!({"rules": [{"chain": "*", "to": "*", "function": "approve(adress)", "action": "allow"}]}),
            vec![("rules[0].function", CallsProblem::UnparsableFunction(String::new()))],
        ),
        (
            json!({"rules": [{"chain": "*", "to": "*", "function": f, "args": {"2": {"eq": "1"}}, "action": "allow"}]}),
            vec![("rules[0].args.2", CallsProblem::UnknownArgument("2".into()))],
        ),
        (
            json!({"rules": [{"chain": "*", "to": "*", "function": f, "args": {"spender": {"eq": "1"}}, "action": "allow"}]}),
            vec![("rules[0].args.spender", CallsProblem::UnknownArgument("spender".into()))],
        ),
        (
            json!({"rules": [{"chain": "*", "to": "*", "function": "*", "args": {"0": {"eq": "1"}}, "action": "allow"}]}),
            vec![("rules[0].args.0", CallsProblem::ArgsNeedAFunction)],
        ),
        (
            json!({"rules": [{"chain": "*", "to": "*", "function": f, "args": {"1": {"about": "1"}}, "action": "allow"}]}),
            vec![(
                "rules[0].args.1",
                ConditionError::UnknownOperator("about".into()).into(),
            )],
        ),
        (
            json!({"rules": [{"chain": "*", "to": "*", "function": f, "args": {"0": {"eq": "0x12"}}, "action": "allow"}]}),
            vec![(
                "rules[0].args.0",
                ConditionError::Malformed {
                    op: "eq".into(),
                    expected: "",
                }
                .into(),
            )],
        ),
        (
            json!({"rules": [{"chain": "*", "to": "*", "function": "f(uint256[])", "args": {"0": {"eq": "1"}}, "action": "allow"}]}),
            vec![("rules[0].args.0", CallsProblem::NotComparable("uint256[]".into()))],
        ),
        (
            json!({"rules": [{"chain": "", "to": "0x12", "function": "*", "value": {"lte": "x"}, "action": "allow"}]}),
            vec![
                ("rules[0].chain", CallsProblem::EmptyChain),
                ("rules[0].to", CallsProblem::MalformedAddress),
                (
                    "rules[0].value",
                    ConditionError::Malformed {
                        op: "lte".into(),
                        expected: "",
                    }
                    .into(),
                ),
            ],
        ),
        (
            json!({"rules": [{"chain": "*", "to": "*", "function": "*", "action": "maybe"}]}),
            vec![("rules[0]", CallsProblem::Shape(String::new()))],
        ),
        (
            json!({"rules": [{"chain": "*", "to": "*", "function": "*", "action": "allow", "extra": 1}]}),
            vec![("rules[0]", CallsProblem::Shape(String::new()))],
        ),
        (
            json!({"rules": [{"typed_data": {"primary_type": " ", "message": {"value": {"lte": true}}}, "action": "deny"}]}),
            vec![
                ("rules[0].typed_data.primary_type", CallsProblem::EmptyPrimaryType),
                (
                    "rules[0].typed_data.message.value",
                    ConditionError::NotOrdered { op: "lte".into() }.into(),
                ),
            ],
        ),
        (
            json!({"abis": {"base": [], "base:0x12": [], "base:0x0000000000000000000000000000000000000001": [{"type": "nope"}]}}),
            vec![
                ("abis.base", CallsProblem::AbiKey),
                (
                    "abis.base:0x0000000000000000000000000000000000000001",
                    CallsProblem::Abi(String::new()),
                ),
                ("abis.base:0x12", CallsProblem::AbiKey),
            ],
        ),
        (
            json!({"rulez": []}),
            vec![("calls", CallsProblem::Shape(String::new()))],
        ),
    ];
    // Messages carry the parser's words; compare the variant and, for the rest, the value.
    let same = |a: &CallsProblem, b: &CallsProblem| match (a, b) {
        (CallsProblem::UnparsableFunction(_), CallsProblem::UnparsableFunction(_))
        | (CallsProblem::Shape(_), CallsProblem::Shape(_))
        | (CallsProblem::Abi(_), CallsProblem::Abi(_)) => true,
        (
            CallsProblem::Condition(ConditionError::Malformed { op: x, .. }),
            CallsProblem::Condition(ConditionError::Malformed { op: y, .. }),
        ) => x == y,
        _ => a == b,
    };
    for (json, expected) in cases {
        let got = problems(json.clone());
        assert_eq!(got.len(), expected.len(), "{json}: {got:?}");
        for ((path, problem), (want_path, want)) in got.iter().zip(&expected) {
            assert_eq!(path, want_path, "{json}");
            assert!(same(problem, want), "{json}: {problem:?}");
        }
    }
}

#[test]
fn a_policy_is_written_back_as_read() {
    let input = json!({
        "default": "deny",
        "rules": [
            {"chain": "Base", "to": format!("{TOKEN:#x}"), "function": "approve(address spender,uint256)",
             "args": {"spender": {"in": ["$agent"]}, "1": {"lte": 100}}, "value": {"eq": "0.0"}, "action": "allow"},
            {"typed_data": {"domain": {"chainId": {"eq": 8453}}, "primary_type": "Permit",
                            "message": {"spender": {"eq": ROUTER.to_string()}}}, "action": "approve"},
            {"chain": "*", "to": "*", "function": "*", "action": "approve"}
        ],
        "abis": {format!("BASE:{}", ROUTER.to_checksum(None)): [{"type": "error", "name": "Nope", "inputs": []}]},
        "allow_unlimited_approvals": true
    });
    let read = policy(input);
    let written = Value::from(read.clone());
    assert_eq!(
        written,
        json!({
            "default": "deny",
            "rules": [
                {"chain": "base", "to": TOKEN.to_checksum(None), "function": "approve(address spender,uint256)",
                 "args": {"1": {"lte": "100"}, "spender": {"in": ["$agent"]}}, "value": {"eq": "0"}, "action": "allow"},
                {"typed_data": {"domain": {"chainId": {"eq": "8453"}}, "primary_type": "Permit",
                                "message": {"spender": {"eq": ROUTER.to_checksum(None)}}}, "action": "approve"},
                {"chain": "*", "to": "*", "function": "*", "action": "approve"}
            ],
            "abis": {format!("base:{ROUTER:#x}"): [{"type": "error", "name": "Nope", "inputs": []}]},
            "allow_unlimited_approvals": true
        })
    );
    assert_eq!(policy(written), read);
    // Through serde, as the store keeps it.
    let text = serde_json::to_string(&read).expect("serialises");
    assert_eq!(serde_json::from_str::<CallsPolicy>(&text).expect("reads"), read);
    assert!(serde_json::from_str::<CallsPolicy>(r#"{"default": "sometimes"}"#).is_err());
}

#[test]
fn typed_data_rules_never_decide_calls() {
    let p = policy(json!({"rules": [{"typed_data": {"primary_type": "Permit"}, "action": "allow"}]}));
    let data = approve(ROUTER, "1");
    assert_eq!(p.judge(&facts("base", TOKEN, &data, 0), true), CallVerdict::Deny);
    assert!(matches!(&p.rules[0], Rule::TypedData(r) if r.primary_type == "Permit"));
}

#[test]
fn a_refusal_names_the_rule_and_the_condition_that_failed() {
    let p = policy(json!({
        "default": "deny",
        "rules": [
            {"chain": "base", "to": TOKEN.to_string(), "function": "transfer(address,uint256)", "action": "allow"},
            {"chain": "base", "to": TOKEN.to_string(), "function": "approve(address spender,uint256 amount)",
             "args": {"0": {"in": [ROUTER.to_string()]}, "amount": {"gte": "1", "lte": "100"}}, "action": "allow"},
            {"chain": "base", "to": ROUTER.to_string(), "function": "deposit()", "value": {"eq": "0"}, "action": "allow"},
            {"chain": "*", "to": "*", "function": "withdraw(uint256)", "action": "deny"}
        ]
    }));
    let on = |data: &[u8], to: Address, value: u128| p.denial(&facts("base", to, data, value), true);
    let approve_rule = format!("rule 2 (approve(address,uint256) on {})", TOKEN.to_checksum(None));
    assert_eq!(
        on(&approve(OTHER, "1"), TOKEN, 0),
        format!(
            "{approve_rule} did not allow it: argument 0 (spender) must be in [{}]; it was {}",
            ROUTER.to_checksum(None),
            OTHER.to_checksum(None)
        )
    );
    assert_eq!(
        on(&approve(ROUTER, "101"), TOKEN, 0),
        format!("{approve_rule} did not allow it: argument 1 (amount) must be at most 100; it was 101")
    );
    assert_eq!(
        on(&approve(ROUTER, "0"), TOKEN, 0),
        format!("{approve_rule} did not allow it: argument 1 (amount) must be at least 1; it was 0")
    );
    let short = approve(ROUTER, "1");
    assert_eq!(
        on(&short[..4 + 32], TOKEN, 0),
        format!("{approve_rule} did not allow it: its arguments do not decode as approve(address,uint256)")
    );
    assert_eq!(
        on(&calldata("deposit()", json!([])), ROUTER, 1),
        format!(
            "rule 3 (deposit() on {}) did not allow it: value must be 0; it was 0.000000000000000001",
            ROUTER.to_checksum(None)
        )
    );
    assert_eq!(
        on(&calldata("withdraw(uint256)", json!(["1"])), ROUTER, 0),
        "rule 4 (withdraw(uint256) on any contract) denies it"
    );
    assert_eq!(
        on(&calldata("mint(uint256)", json!(["1"])), TOKEN, 0),
        "no rule matches it, and calls.default is deny"
    );
    let unruled = policy(json!({"rules": [
        {"chain": "*", "to": "*", "function": "approve(address,uint256)", "args": {"0": {"eq": "$agent"}}, "action": "allow"}
    ]}));
    assert_eq!(
        unruled.denial(&facts("base", TOKEN, &approve(OTHER, "1"), 0), true),
        format!(
            "rule 1 (approve(address,uint256) on any contract) did not allow it: argument 0 must be $agent ({}); it was {}",
            AGENT.to_checksum(None),
            OTHER.to_checksum(None)
        )
    );
    assert_eq!(
        unruled.denial(&facts("base", TOKEN, &calldata("mint(uint256)", json!(["1"])), 0), true),
        "no rule matches it, and a guarded agent's calls are refused unless a rule allows them"
    );
}
