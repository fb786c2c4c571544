use super::*;
use serde_json::json;

const TOKEN: Address = Address::repeat_byte(0x70);
const SPENDER: Address = Address::repeat_byte(0x5e);
const OWNER: Address = Address::repeat_byte(0xa1);

fn domain_types() -> Value {
    json!([
        {"name": "name", "type": "string"}, {"name": "version", "type": "string"},
        {"name": "chainId", "type": "uint256"}, {"name": "verifyingContract", "type": "address"}])
}

fn with(primary: &str, types: Value, message: Value, verifying: Address) -> Value {
    let mut all = json!({ "EIP712Domain": domain_types() });
    if let (Some(all), Some(types)) = (all.as_object_mut(), types.as_object()) {
        all.extend(types.clone());
    }
    json!({"types": all, "primaryType": primary,
        "domain": {"name": "USD Coin", "version": "2", "chainId": 8453, "verifyingContract": verifying.to_string()},
        "message": message})
}

fn eip2612_types() -> Value {
    json!({"Permit": [
        {"name": "owner", "type": "address"}, {"name": "spender", "type": "address"},
        {"name": "value", "type": "uint256"}, {"name": "nonce", "type": "uint256"},
        {"name": "deadline", "type": "uint256"}]})
}

fn dai_types() -> Value {
    json!({"Permit": [
        {"name": "holder", "type": "address"}, {"name": "spender", "type": "address"},
        {"name": "nonce", "type": "uint256"}, {"name": "expiry", "type": "uint256"},
        {"name": "allowed", "type": "bool"}]})
}

fn eip2612(value: Value) -> Value {
    with(
        "Permit",
        eip2612_types(),
        json!({"owner": OWNER.to_string(), "spender": SPENDER.to_string(), "value": value, "nonce": "0",
            "deadline": "99999999999"}),
        TOKEN,
    )
}

fn dai(allowed: Value) -> Value {
    with(
        "Permit",
        dai_types(),
        json!({"holder": OWNER.to_string(), "spender": SPENDER.to_string(), "nonce": 0, "expiry": 0,
            "allowed": allowed}),
        TOKEN,
    )
}

fn permit2_types() -> Value {
    json!({"PermitDetails": [{"name": "token", "type": "address"}, {"name": "amount", "type": "uint160"},
            {"name": "expiration", "type": "uint48"}, {"name": "nonce", "type": "uint48"}],
        "PermitSingle": [{"name": "details", "type": "PermitDetails"},
            {"name": "spender", "type": "address"}, {"name": "sigDeadline", "type": "uint256"}],
        "PermitBatch": [{"name": "details", "type": "PermitDetails[]"},
            {"name": "spender", "type": "address"}, {"name": "sigDeadline", "type": "uint256"}],
        "TokenPermissions": [{"name": "token", "type": "address"}, {"name": "amount", "type": "uint256"}],
        "PermitBatchTransferFrom": [{"name": "permitted", "type": "TokenPermissions[]"},
            {"name": "spender", "type": "address"}, {"name": "nonce", "type": "uint256"},
            {"name": "deadline", "type": "uint256"}],
        "PermitWitnessTransferFrom": [{"name": "permitted", "type": "TokenPermissions"},
            {"name": "spender", "type": "address"}, {"name": "nonce", "type": "uint256"},
            {"name": "deadline", "type": "uint256"}, {"name": "witness", "type": "ExclusiveDutchOrder"}],
        "ExclusiveDutchOrder": [{"name": "info", "type": "string"}, {"name": "outputAmount", "type": "uint256"}]})
}

fn amounts(typed: &Typed) -> Vec<U256> {
    typed.grants.iter().map(|g| g.amount).collect()
}

#[test]
fn a_permit_is_tied_to_its_chain_and_grants_an_allowance_of_the_token_that_verifies_it() {
    let typed = parse(&eip2612(json!("250000000")), 8453).expect("valid");
    assert_eq!(
        typed.grants.clone(),
        vec![TypedGrant {
            token: TOKEN,
            spender: SPENDER,
            amount: U256::from(250_000_000u64),
            unlimited: false,
            kind: GrantKind::TokenAllowance,
            holder: TOKEN,
        }]
    );
    assert_eq!(typed.form, Form::Eip2612);
    assert!(!typed.grants_unlimited());
    assert_eq!(typed.digest, typed.data.eip712_signing_hash().expect("hash"));
    assert_eq!(
        parse(&eip2612(json!("1")), 1).expect_err("other chain"),
        TypedError::WrongChain {
            found: U256::from(8453),
            expected: 1
        }
    );
    let mut no_chain = eip2612(json!("1"));
    no_chain["domain"].as_object_mut().expect("object").remove("chainId");
    assert_eq!(parse(&no_chain, 8453).expect_err("no chain"), TypedError::NoChainId);
    assert!(
        parse(&eip2612(json!(U256::MAX.to_string())), 8453)
            .expect("valid")
            .grants_unlimited()
    );
    assert!(matches!(
        parse(&json!({"types": {}}), 8453),
        Err(TypedError::Malformed(_))
    ));
}

#[test]
fn a_permit_is_read_as_the_digest_encodes_it_however_its_integers_are_spelled() {
    // The review's critical case: each of these was counted 0 (or small) and signed as what the digest says.
    let million = U256::from(1_000_000_000u64);
    for spelled in [
        json!("0x3b9aca00"),
        json!("1_000_000_000"),
        json!(1_000_000_000u64),
        json!("0o7346545000"),
    ] {
        let typed = parse(&eip2612(spelled.clone()), 8453).expect("alloy reads it");
        assert_eq!(amounts(&typed), vec![million], "{spelled}");
        assert_eq!(
            typed.facts(OWNER).operand(false, "value"),
            Some(Operand::Uint(million)),
            "{spelled}"
        );
    }
    let max_hex = format!("0x{}", "f".repeat(64));
    assert!(parse(&eip2612(json!(max_hex)), 8453).expect("valid").grants_unlimited());
    // A value alloy cannot read is refused before any rule reads it.
    assert!(matches!(
        parse(&eip2612(json!("ten")), 8453),
        Err(TypedError::Malformed(_))
    ));
    assert!(matches!(
        parse(&eip2612(json!(1.5)), 8453),
        Err(TypedError::Malformed(_))
    ));
}

#[test]
fn undeclared_keys_are_refused_at_any_depth_and_the_form_is_the_declared_one() {
    // Decimal MAX with an undeclared `allowed: false`: was read as DAI's "nothing", signed as unlimited.
    let mut sneaky = eip2612(json!(U256::MAX.to_string()));
    sneaky["message"]["allowed"] = json!(false);
    assert_eq!(
        parse(&sneaky, 8453).expect_err("undeclared"),
        TypedError::Undeclared("message.allowed".into())
    );
    let mut nested = with(
        "PermitSingle",
        permit2_types(),
        json!({"details": {"token": TOKEN.to_string(), "amount": "5", "expiration": 1, "nonce": 0, "extra": 1},
            "spender": SPENDER.to_string(), "sigDeadline": "1"}),
        PERMIT2,
    );
    assert_eq!(
        parse(&nested, 8453).expect_err("undeclared"),
        TypedError::Undeclared("message.details.extra".into())
    );
    nested["message"]["details"]
        .as_object_mut()
        .expect("object")
        .remove("extra");
    assert_eq!(amounts(&parse(&nested, 8453).expect("valid")), vec![U256::from(5)]);
    let mut domain = eip2612(json!("1"));
    domain["domain"]["chain_id"] = json!(1);
    assert_eq!(
        parse(&domain, 8453).expect_err("undeclared"),
        TypedError::Undeclared("domain.chain_id".into())
    );
    // DAI's `allowed` as the string "true" is true, as the digest encodes it.
    let dai_true = parse(&dai(json!("true")), 8453).expect("valid");
    assert_eq!(dai_true.form, Form::Dai);
    assert!(dai_true.grants_unlimited());
    let dai_false = parse(&dai(json!(false)), 8453).expect("valid");
    assert!(!dai_false.grants_unlimited());
    assert_eq!(amounts(&dai_false), vec![U256::ZERO]);
    // A permit whose token cannot be known is refused, not "grants nothing".
    let mut no_token = eip2612(json!("5"));
    no_token["domain"]
        .as_object_mut()
        .expect("object")
        .remove("verifyingContract");
    assert!(matches!(parse(&no_token, 8453), Err(TypedError::Unreadable(_))));
}

#[test]
fn permit2_forms_witnesses_included_are_decoded_and_the_rest_is_forbidden() {
    let batch = with(
        "PermitBatchTransferFrom",
        permit2_types(),
        json!({"permitted": [{"token": TOKEN.to_string(), "amount": "100"}, {"token": TOKEN.to_string(), "amount": "0x64"}],
            "spender": SPENDER.to_string(), "nonce": "1", "deadline": "1"}),
        PERMIT2,
    );
    let typed = parse(&batch, 8453).expect("valid");
    assert_eq!(typed.form, Form::Permit2Transfer { batch: true });
    assert_eq!(amounts(&typed), vec![U256::from(100), U256::from(100)]);
    assert!(typed.grants.iter().all(TypedGrant::is_transfer));
    let witness = with(
        "PermitWitnessTransferFrom",
        permit2_types(),
        json!({"permitted": {"token": TOKEN.to_string(), "amount": "900000000"},
            "spender": SPENDER.to_string(), "nonce": "1", "deadline": "1",
            "witness": {"info": "order", "outputAmount": "1"}}),
        PERMIT2,
    );
    let typed = parse(&witness, 8453).expect("valid");
    assert_eq!(typed.form, Form::Permit2Transfer { batch: false });
    assert_eq!(amounts(&typed), vec![U256::from(900_000_000u64)]);
    assert_eq!(typed.forbidden(&[], OWNER), None);
    // A Permit2 allowance of 2^159 is unlimited.
    let single = with(
        "PermitSingle",
        permit2_types(),
        json!({"details": {"token": TOKEN.to_string(), "amount": (U256::from(1u8) << 159usize).to_string(),
            "expiration": 1, "nonce": 0}, "spender": SPENDER.to_string(), "sigDeadline": "1"}),
        PERMIT2,
    );
    let typed = parse(&single, 8453).expect("valid");
    assert!(typed.grants_unlimited());
    assert_eq!(typed.grants.clone()[0].kind, GrantKind::Permit2Allowance);
    // Typed data of Permit2's domain, or named Permit…, that is none of these: refused whatever the rules.
    let unknown = with(
        "Order",
        json!({"Order": [{"name": "amount", "type": "uint256"}]}),
        json!({"amount": "1"}),
        PERMIT2,
    );
    assert_eq!(
        parse(&unknown, 8453).expect("valid").forbidden(&[], OWNER),
        Some(Forbidden::PermitNotUnderstood)
    );
    let odd_permit = with(
        "PermitAll",
        json!({"PermitAll": [{"name": "spender", "type": "address"}]}),
        json!({"spender": SPENDER.to_string()}),
        TOKEN,
    );
    assert_eq!(
        parse(&odd_permit, 8453).expect("valid").forbidden(&[], OWNER),
        Some(Forbidden::PermitNotUnderstood)
    );
    let plain = with(
        "Mail",
        json!({"Mail": [{"name": "contents", "type": "string"}]}),
        json!({"contents": "hello"}),
        TOKEN,
    );
    assert_eq!(parse(&plain, 8453).expect("valid").forbidden(&[], OWNER), None);
    assert_eq!(
        parse(&plain, 8453).expect("valid").forbidden(&[TOKEN], OWNER),
        Some(Forbidden::DelegationSignature),
        "a domain a DelegationManager verifies"
    );
}

#[test]
fn a_delegation_of_the_framework_is_forbidden_whatever_its_name_for_the_rules() {
    let delegation = with(
        "Delegation",
        json!({"Delegation": [{"name": "delegate", "type": "address"}, {"name": "delegator", "type": "address"},
                {"name": "authority", "type": "bytes32"}, {"name": "caveats", "type": "Caveat[]"},
                {"name": "salt", "type": "uint256"}],
            "Caveat": [{"name": "enforcer", "type": "address"}, {"name": "terms", "type": "bytes"}]}),
        json!({"delegate": SPENDER.to_string(), "delegator": OWNER.to_string(),
            "authority": format!("0x{}", "f".repeat(64)), "caveats": [], "salt": "1"}),
        TOKEN,
    );
    let typed = parse(&delegation, 8453).expect("valid");
    assert_eq!(typed.form, Form::Delegation);
    assert_eq!(typed.forbidden(&[], OWNER), Some(Forbidden::DelegationSignature));
}

#[test]
fn typed_data_the_agents_own_account_would_honour_is_forbidden_whatever_its_name_for_the_rules() {
    let mail = |verifying: Address, extra: Value| {
        let mut types = json!({"Mail": [{"name": "contents", "type": "string"}]});
        if let (Some(all), Some(extra)) = (types.as_object_mut(), extra.as_object()) {
            all.extend(extra.clone());
        }
        parse(&with("Mail", types, json!({"contents": "hello"}), verifying), 8453).expect("valid")
    };
    // The agent's own address as the verifying contract: its account (EIP-7702) would take the signature as its own.
    let own = mail(OWNER, json!({}));
    assert_eq!(own.forbidden(&[], OWNER), Some(Forbidden::DelegationSignature));
    assert_eq!(
        own.forbidden(&[], SPENDER),
        None,
        "another agent's address is no account of this one"
    );
    // A `PackedUserOperation` declared, primary or not: an operation its account would execute, with any paymaster.
    let packed = json!({"PackedUserOperation": [{"name": "sender", "type": "address"},
        {"name": "nonce", "type": "uint256"}, {"name": "callData", "type": "bytes"}]});
    let beside = mail(TOKEN, packed.clone());
    assert_eq!(beside.forbidden(&[], OWNER), Some(Forbidden::DelegationSignature));
    let operation = parse(
        &with(
            "PackedUserOperation",
            packed,
            json!({"sender": OWNER.to_string(), "nonce": "0", "callData": "0x"}),
            TOKEN,
        ),
        8453,
    )
    .expect("valid");
    assert_eq!(operation.forbidden(&[], OWNER), Some(Forbidden::DelegationSignature));
    // It is decided before a permit not understood, as a delegation is.
    let permit2_own = mail(
        PERMIT2,
        json!({"PackedUserOperation": [{"name": "sender", "type": "address"}]}),
    );
    assert_eq!(permit2_own.forbidden(&[], OWNER), Some(Forbidden::DelegationSignature));
    assert_eq!(mail(TOKEN, json!({})).forbidden(&[], OWNER), None);
}

/// A chain of `n` struct types, each holding the next.
fn chain_of_types(n: usize) -> Value {
    let mut types = serde_json::Map::new();
    types.insert("EIP712Domain".into(), json!([{"name": "chainId", "type": "uint256"}]));
    for i in 0..n {
        let next = if i + 1 == n {
            "uint256".to_string()
        } else {
            format!("T{}", i + 1)
        };
        types.insert(format!("T{i}"), json!([{"name": "x", "type": next}]));
    }
    let mut message = json!(1);
    for _ in 0..n {
        message = json!({ "x": message });
    }
    json!({"types": types, "primaryType": "T0", "domain": {"chainId": 8453}, "message": message})
}

#[test]
fn sizes_past_the_bounds_are_refused_before_alloy_reads_them() {
    assert!(parse(&chain_of_types(16), 8453).is_ok(), "16 nested structs");
    assert!(matches!(parse(&chain_of_types(17), 8453), Err(TypedError::TooLarge(_))));
    // The review's case: ~1,400 chained struct types overflowed a worker's stack in alloy's resolver.
    assert!(matches!(
        parse(&chain_of_types(1400), 8453),
        Err(TypedError::TooLarge(_))
    ));
    // A type that contains itself never settles.
    let recursive = json!({"types": {"EIP712Domain": [{"name": "chainId", "type": "uint256"}],
        "Node": [{"name": "children", "type": "Node[]"}]},
        "primaryType": "Node", "domain": {"chainId": 8453}, "message": {"children": []}});
    assert!(matches!(parse(&recursive, 8453), Err(TypedError::TooLarge(_))));
    let deep_array = json!({"types": {"EIP712Domain": [{"name": "chainId", "type": "uint256"}],
        "A": [{"name": "x", "type": format!("uint256{}", "[]".repeat(17))}]},
        "primaryType": "A", "domain": {"chainId": 8453}, "message": {"x": []}});
    assert!(matches!(parse(&deep_array, 8453), Err(TypedError::TooLarge(_))));
    let many = json!({"types": {"EIP712Domain": [{"name": "chainId", "type": "uint256"}],
        "A": [{"name": "x", "type": "uint256[]"}]},
        "primaryType": "A", "domain": {"chainId": 8453}, "message": {"x": vec!["1"; 1100]}});
    assert!(matches!(parse(&many, 8453), Err(TypedError::TooLarge(_))));
    // Typed data written as a JSON string is read as the object it holds, bounds included.
    let text = Value::String(chain_of_types(100).to_string());
    assert!(matches!(parse(&text, 8453), Err(TypedError::TooLarge(_))));
    let text = Value::String(eip2612(json!("7")).to_string());
    assert_eq!(amounts(&parse(&text, 8453).expect("valid")), vec![U256::from(7)]);
}

#[test]
fn rules_read_the_domain_and_message_as_hashed() {
    let typed = parse(
        &with(
            "PermitSingle",
            permit2_types(),
            json!({"details": {"token": TOKEN.to_string(), "amount": "0x05", "expiration": 1, "nonce": 0},
                "spender": SPENDER.to_string(), "sigDeadline": "1"}),
            PERMIT2,
        ),
        8453,
    )
    .expect("valid");
    let facts = typed.facts(OWNER);
    assert_eq!(
        facts.operand(false, "details.amount"),
        Some(Operand::Uint(U256::from(5)))
    );
    assert_eq!(facts.operand(false, "spender"), Some(Operand::Address(SPENDER)));
    assert_eq!(facts.operand(true, "chainId"), Some(Operand::Uint(U256::from(8453))));
    assert_eq!(
        facts.operand(true, "verifyingContract"),
        Some(Operand::Address(PERMIT2))
    );
    assert_eq!(facts.operand(true, "version"), Some(Operand::Uint(U256::from(2))));
    assert_eq!(facts.operand(false, "details.missing"), None);
    assert_eq!(facts.operand(false, "details"), None);
}

mod property {
    //! Whatever the spelling of its integers and booleans, the keys added and the nesting, what the policy reads
    //! of typed data is what its digest encodes, and nothing panics.
    use super::*;
    use proptest::prelude::*;

    /// One integer, spelled as alloy's coercion reads it.
    fn spelled(value: u64, how: u8) -> Value {
        match how % 5 {
            0 => json!(value.to_string()),
            1 => json!(format!("{value:#x}")),
            2 => json!(format!("{value:#o}")),
            3 => json!(value),
            _ => {
                let digits = value.to_string();
                let mut with_underscores = String::new();
                for (i, c) in digits.chars().enumerate() {
                    if i > 0 && (digits.len() - i).is_multiple_of(3) {
                        with_underscores.push('_');
                    }
                    with_underscores.push(c);
                }
                json!(with_underscores)
            }
        }
    }

    proptest! {
        #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

        #[test]
        fn the_amount_read_is_the_amount_hashed(value in any::<u64>(), how in any::<u8>()) {
            let typed = parse(&eip2612(spelled(value, how)), 8453).expect("alloy reads every spelling");
            let canonical = parse(&eip2612(json!(value.to_string())), 8453).expect("valid");
            prop_assert_eq!(typed.digest, canonical.digest);
            prop_assert_eq!(amounts(&typed), vec![U256::from(value)]);
            prop_assert_eq!(typed.facts(OWNER).operand(false, "value"), Some(Operand::Uint(U256::from(value))));
        }

        #[test]
        fn a_boolean_read_is_the_boolean_hashed(allowed in any::<bool>(), as_text in any::<bool>()) {
            let written = if as_text { json!(allowed.to_string()) } else { json!(allowed) };
            let typed = parse(&dai(written), 8453).expect("valid");
            let canonical = parse(&dai(json!(allowed)), 8453).expect("valid");
            prop_assert_eq!(typed.digest, canonical.digest);
            prop_assert_eq!(typed.grants_unlimited(), allowed);
            prop_assert_eq!(typed.facts(OWNER).operand(false, "allowed"), Some(Operand::Bool(allowed)));
        }

        #[test]
        fn an_undeclared_key_anywhere_is_refused(key in "[a-z]{1,12}", depth in 0usize..3, value in any::<u64>()) {
            let mut json = with(
                "PermitSingle",
                permit2_types(),
                json!({"details": {"token": TOKEN.to_string(), "amount": "5", "expiration": 1, "nonce": 0},
                    "spender": SPENDER.to_string(), "sigDeadline": "1"}),
                PERMIT2,
            );
            let declared = ["details", "spender", "sigDeadline", "token", "amount", "expiration", "nonce"];
            prop_assume!(!declared.contains(&key.as_str()));
            let target = match depth {
                0 => &mut json["message"],
                _ => &mut json["message"]["details"],
            };
            target[key.as_str()] = json!(value);
            prop_assert!(matches!(parse(&json, 8453), Err(TypedError::Undeclared(_))));
        }

        #[test]
        fn any_json_is_answered_without_a_panic(
            types in prop::collection::vec(("[A-Z][a-z]{0,3}", prop::collection::vec(("[a-z]{1,3}", "(uint256|address|bool|string|[A-Z][a-z]{0,3})(\\[\\]){0,3}"), 0..4)), 0..80),
            primary in "[A-Z][a-z]{0,3}",
            depth in 0usize..40,
        ) {
            let mut map = serde_json::Map::new();
            for (name, fields) in &types {
                let fields: Vec<Value> = fields.iter().map(|(n, t)| json!({"name": n, "type": t})).collect();
                map.insert(name.clone(), Value::Array(fields));
            }
            let mut message = json!("1");
            for i in 0..depth {
                message = if i % 2 == 0 { json!({ "a": message }) } else { json!([message]) };
            }
            let json = json!({"types": map, "primaryType": primary, "domain": {"chainId": 8453}, "message": message});
            // Whatever it answers, it answers.
            let _ = parse(&json, 8453);
        }
    }
}
