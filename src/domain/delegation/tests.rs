//! The pure parts of delegations: parsing, terms per enforcer, boundedness, limits, hashes and the redemption's
//! packing. The hashes and terms are also checked against the deployed framework in `tests/api/delegations/framework.rs`.

use alloy::primitives::{Address, B256, Bytes, U256, address};
use alloy::sol_types::SolStruct;
use serde_json::json;

use super::*;

const TOKEN: Address = address!("0x833589fCD6eDb6E08f4c7C32D4f71b54bdA02913");

fn word(n: u64) -> [u8; 32] {
    U256::from(n).to_be_bytes::<32>()
}

fn erc20_period(amount: u64, period: u64, start: u64) -> Vec<u8> {
    [TOKEN.as_slice(), &word(amount), &word(period), &word(start)].concat()
}

fn json_delegation() -> serde_json::Value {
    json!({
        "delegate": "0x00000000000000000000000000000000000000a1",
        "delegator": "0x00000000000000000000000000000000000000b2",
        "authority": format!("0x{}", "ff".repeat(32)),
        "caveats": [{"enforcer": "0x00000000000000000000000000000000000000c3",
                     "terms": format!("0x{}", alloy::hex::encode(erc20_period(5, 86400, 1))), "args": "0x"}],
        "salt": "42",
        "signature": "0x1234",
    })
}

fn parsed(value: serde_json::Value) -> Result<Delegation, FieldError> {
    serde_json::from_value::<DelegationJson>(value)
        .expect("the JSON form")
        .parse()
}

#[test]
fn the_signed_type_is_the_frameworks() {
    assert_eq!(
        signed::Delegation::eip712_encode_type(),
        "Delegation(address delegate,address delegator,bytes32 authority,Caveat[] caveats,uint256 salt)\
         Caveat(address enforcer,bytes terms)"
    );
}

#[test]
fn a_salt_is_a_decimal_or_hex_string_and_0x_alone_is_zero() {
    for (salt, expected) in [
        (json!("42"), 42u64),
        (json!("0x2a"), 42),
        (json!("0x"), 0),
        (json!(7), 7),
    ] {
        let mut d = json_delegation();
        d["salt"] = salt;
        assert_eq!(parsed(d).unwrap().salt, U256::from(expected));
    }
    for salt in [json!("-1"), json!("0xzz"), json!(""), json!(1.5), json!(null)] {
        let mut d = json_delegation();
        d["salt"] = salt;
        assert_eq!(parsed(d).unwrap_err().0, "delegation.salt");
    }
}

#[test]
fn a_malformed_field_is_named() {
    let mut d = json_delegation();
    d["caveats"][0]["terms"] = json!("0x123");
    assert_eq!(parsed(d).unwrap_err().0, "delegation.caveats[0].terms");
    let mut d = json_delegation();
    d["authority"] = json!("0xff");
    assert_eq!(parsed(d).unwrap_err().0, "delegation.authority");
}

#[test]
fn the_hash_leaves_out_signature_and_args_and_spelling() {
    let a = parsed(json_delegation()).unwrap();
    let mut other = json_delegation();
    other["signature"] = json!("0xabcdef");
    other["caveats"][0]["args"] = json!("0x01");
    other["salt"] = json!("0x2A");
    other["delegate"] = json!("0x00000000000000000000000000000000000000A1");
    let b = parsed(other).unwrap();
    assert_eq!(a.hash(), b.hash());
    let mut salted = json_delegation();
    salted["salt"] = json!("43");
    assert_ne!(a.hash(), parsed(salted).unwrap().hash());
    assert!(a.is_root());
}

#[test]
fn terms_are_read_at_each_enforcers_length() {
    assert_eq!(
        Terms::decode(Kind::Erc20PeriodTransfer, &erc20_period(5, 60, 9)).unwrap(),
        Terms::Erc20PeriodTransfer {
            token: TOKEN,
            amount: U256::from(5),
            period: 60,
            start: 9
        }
    );
    assert!(Terms::decode(Kind::Erc20PeriodTransfer, &erc20_period(5, 60, 9)[..115]).is_err());
    assert!(Terms::decode(Kind::Erc20PeriodTransfer, &erc20_period(0, 60, 9)).is_err());
    assert!(Terms::decode(Kind::Erc20PeriodTransfer, &erc20_period(5, 0, 9)).is_err());
    assert!(Terms::decode(Kind::Erc20PeriodTransfer, &erc20_period(5, 60, 0)).is_err());
    let native = [word(7), word(3600), word(100)].concat();
    assert_eq!(
        Terms::decode(Kind::NativeTokenPeriodTransfer, &native).unwrap(),
        Terms::NativeTokenPeriodTransfer {
            amount: U256::from(7),
            period: 3600,
            start: 100
        }
    );
    assert_eq!(
        Terms::decode(Kind::Erc20TransferAmount, &[TOKEN.as_slice(), &word(9)].concat()).unwrap(),
        Terms::Erc20TransferAmount {
            token: TOKEN,
            amount: U256::from(9)
        }
    );
    assert!(Terms::decode(Kind::NativeTokenTransferAmount, &word(1)[..31]).is_err());
    assert_eq!(
        Terms::decode(Kind::ExactCalldata, &[]).unwrap(),
        Terms::ExactCalldata { calldata: Bytes::new() }
    );
    assert!(Terms::decode(Kind::AllowedTargets, &[]).is_err());
    assert!(Terms::decode(Kind::AllowedTargets, &[0u8; 21]).is_err());
    assert_eq!(
        Terms::decode(
            Kind::AllowedTargets,
            &[TOKEN.as_slice(), Address::ZERO.as_slice()].concat()
        )
        .unwrap(),
        Terms::AllowedTargets {
            targets: vec![TOKEN, Address::ZERO]
        }
    );
    assert!(Terms::decode(Kind::AllowedMethods, &[1, 2, 3]).is_err());
    let mut ts = [0u8; 32];
    ts[15] = 10;
    ts[31] = 20;
    assert_eq!(
        Terms::decode(Kind::Timestamp, &ts).unwrap(),
        Terms::Timestamp { after: 10, before: 20 }
    );
    assert!(Terms::decode(Kind::LimitedCalls, &[0u8; 33]).is_err());
}

#[test]
fn a_caveat_of_an_unconfigured_enforcer_or_with_args_is_unknown() {
    let d = parsed(json_delegation()).unwrap();
    let enforcer = d.caveats[0].enforcer;
    assert_eq!(
        decode_caveats(&d, &[(Kind::Erc20PeriodTransfer, Address::ZERO)])
            .unwrap_err()
            .index,
        0
    );
    assert!(decode_caveats(&d, &[(Kind::Erc20PeriodTransfer, enforcer)]).is_ok());
    assert!(decode_caveats(&d, &[(Kind::NativeTokenPeriodTransfer, enforcer)]).is_err());
    let mut with_args = json_delegation();
    with_args["caveats"][0]["args"] = json!("0x01");
    assert!(decode_caveats(&parsed(with_args).unwrap(), &[(Kind::Erc20PeriodTransfer, enforcer)]).is_err());
}

#[test]
fn only_caveats_that_bound_every_execution_are_bounded() {
    let token = Terms::Erc20TransferAmount {
        token: TOKEN,
        amount: U256::from(1),
    };
    let native = Terms::NativeTokenPeriodTransfer {
        amount: U256::from(1),
        period: 60,
        start: 1,
    };
    let plain = Terms::ExactCalldata { calldata: Bytes::new() };
    let pinned = Terms::ExactCalldata {
        calldata: Bytes::from_static(&[0xa9, 0x05, 0x9c, 0xbb]),
    };
    let targets = Terms::AllowedTargets { targets: vec![TOKEN] };
    assert!(is_bounded(std::slice::from_ref(&token)));
    assert!(is_bounded(&[native.clone(), plain.clone()]));
    assert!(
        !is_bounded(std::slice::from_ref(&native)),
        "a native amount alone lets USDC.transfer through"
    );
    assert!(
        !is_bounded(&[native.clone(), pinned]),
        "calldata pinned but not its target"
    );
    assert!(!is_bounded(&[native, targets.clone()]));
    assert!(!is_bounded(&[plain, targets]), "no amount caveat");
    assert!(!is_bounded(&[]));
}

#[test]
fn limits_targets_methods_and_the_window_come_from_the_caveats() {
    let terms = [
        Terms::Erc20PeriodTransfer {
            token: TOKEN,
            amount: U256::from(5),
            period: 86400,
            start: 7,
        },
        Terms::NativeTokenTransferAmount { amount: U256::from(3) },
        Terms::AllowedTargets {
            targets: vec![TOKEN, Address::ZERO],
        },
        Terms::AllowedTargets { targets: vec![TOKEN] },
        Terms::Timestamp { after: 10, before: 50 },
        Terms::Timestamp { after: 20, before: 0 },
    ];
    let limits = limits(&terms);
    assert_eq!(limits.len(), 2);
    assert_eq!(limits[0].asset, LimitAsset::Token(TOKEN));
    assert_eq!((limits[0].period_seconds, limits[0].start), (Some(86400), Some(7)));
    assert_eq!(limits[0].read, AvailableRead::GetAvailableAmount);
    assert_eq!(
        (limits[1].asset, limits[1].caveat, limits[1].read),
        (LimitAsset::Native, 1, AvailableRead::SpentMap)
    );
    assert_eq!(targets(&terms), Some(vec![TOKEN]));
    assert_eq!(methods(&terms), None);
    assert_eq!(window(&terms), (Some(20), Some(50)));
    assert_eq!(Status::Active.at(Some(50), 49), Status::Active);
    assert_eq!(Status::Active.at(Some(50), 50), Status::Expired);
    assert_eq!(Status::Removed.at(Some(50), 60), Status::Removed);
}

#[test]
fn a_spent_map_answer_is_the_amount_less_what_was_spent() {
    let limit = &limits(&[Terms::Erc20TransferAmount {
        token: TOKEN,
        amount: U256::from(10),
    }])[0];
    assert_eq!(available_answer(limit, &word(4)), Some(U256::from(6)));
    assert_eq!(available_answer(limit, &word(14)), Some(U256::ZERO));
    assert_eq!(available(U256::from(6), U256::from(2)), U256::from(4));
    assert_eq!(available(U256::from(1), U256::from(2)), U256::ZERO);
}

#[test]
fn an_execution_is_target_value_and_calldata_packed() {
    let packed = execution(TOKEN, U256::from(1), &[0xaa, 0xbb]);
    assert_eq!(packed.len(), 20 + 32 + 2);
    assert_eq!(&packed[..20], TOKEN.as_slice());
    assert_eq!(packed[51], 1);
    assert_eq!(&packed[52..], &[0xaa, 0xbb]);
    let d = parsed(json_delegation()).unwrap();
    let call = redemption(&d, TOKEN, U256::ZERO, &[]);
    let decoded = IDelegationManager::redeemDelegationsCall::abi_decode(&call).expect("redeemDelegations calldata");
    assert_eq!(decoded.modes, vec![B256::ZERO]);
    let chain = <Vec<IDelegationManager::Delegation>>::abi_decode(&decoded.permissionContexts[0]).unwrap();
    assert_eq!(chain.len(), 1);
    assert_eq!(chain[0].delegator, d.delegator);
    assert_eq!(chain[0].signature, d.signature);
}

#[test]
fn the_default_deployments_cover_every_enforcer_once() {
    let mut seen: Vec<Address> = Kind::ALL.iter().map(|k| deployments::enforcer(*k)).collect();
    seen.sort();
    seen.dedup();
    assert_eq!(seen.len(), Kind::ALL.len());
    for k in Kind::ALL {
        assert_eq!(Kind::from_name(k.name()), Some(k));
    }
}
