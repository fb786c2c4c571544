//! Fixed vectors for the pure parts of user operations. Each expected value was computed independently with
//! foundry's `cast` (`cast abi-encode`, `cast keccak`, `cast calldata`, `cast concat-hex`) from the same fields, and
//! the digests agree with the deployed EntryPoint v0.7, `EIP7702StatelessDeleGator` and `SingletonPaymaster` v0.7
//! (`tests/api/sponsored/parts.rs`).

use alloy::primitives::{Address, B256, Bytes, Log, LogData, U256, address, b256, bytes, keccak256};
use alloy::signers::SignerSync;
use alloy::signers::local::PrivateKeySigner;
use alloy::sol_types::SolCall;

use super::*;

const SENDER: Address = address!("0x70997970C51812dc3A010C7d01b50e0d17dc79C8");
const TOKEN: Address = address!("0x833589fCD6eDb6E08f4c7C32D4f71b54bdA02913");
const TO: Address = address!("0x00000000000000000000000000000000000000a1");
const PAYMASTER: Address = address!("0x5FbDB2315678afecb367f032d93F642f64180aa3");
const ENTRY_POINT: Address = address!("0x0000000071727De22E5E9d8BAf0edAc6f37da032");
const CHAIN_ID: u64 = 8453;
const GWEI: u128 = 1_000_000_000;

alloy::sol! {
    function transfer(address to, uint256 amount) external returns (bool);
}

fn token_transfer(to: Address, amount: u64) -> Vec<u8> {
    transferCall {
        to,
        amount: U256::from(amount),
    }
    .abi_encode()
}

fn approval() -> PaymasterApproval {
    PaymasterApproval {
        paymaster: PAYMASTER,
        verification_gas_limit: 100_000,
        valid_until: 1_700_000_600,
        valid_after: 0,
    }
}

/// nonce 7, a 1 USDC transfer in single mode, limits 150k/100k, pre-verification 50k, fees 1/2 gwei, the
/// paymaster's unsigned approval.
fn operation() -> PackedUserOperation {
    PackedUserOperation {
        sender: SENDER,
        nonce: U256::from(7),
        initCode: Bytes::new(),
        callData: execute_single(TOKEN, U256::ZERO, &token_transfer(TO, 1_000_000)),
        accountGasLimits: account_gas_limits(150_000, 100_000),
        preVerificationGas: U256::from(50_000),
        gasFees: gas_fees(GWEI, 2 * GWEI),
        paymasterAndData: unsigned_paymaster_and_data(&approval()).unwrap(),
        signature: Bytes::new(),
    }
}

#[test]
fn the_packed_words_put_the_first_value_high() {
    assert_eq!(
        account_gas_limits(150_000, 100_000),
        b256!("0x000000000000000000000000000249f0000000000000000000000000000186a0")
    );
    assert_eq!(
        gas_fees(GWEI, 2 * GWEI),
        b256!("0x0000000000000000000000003b9aca0000000000000000000000000077359400")
    );
    assert_eq!(unpack_pair(pack_pair(u128::MAX, 1)), (u128::MAX, 1));
}

#[test]
fn execute_calldata_in_single_and_batch_mode() {
    let single = execute_single(TOKEN, U256::ZERO, &token_transfer(TO, 1_000_000));
    assert_eq!(
        single,
        bytes!(
            "0xe9ae5c53000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000400000000000000000000000000000000000000000000000000000000000000078833589fcd6edb6e08f4c7c32d4f71b54bda029130000000000000000000000000000000000000000000000000000000000000000a9059cbb00000000000000000000000000000000000000000000000000000000000000a100000000000000000000000000000000000000000000000000000000000f42400000000000000000"
        )
    );
    let batch = execute_batch(&[
        Execution {
            target: TOKEN,
            value: U256::ZERO,
            callData: token_transfer(TO, 1_000_000).into(),
        },
        Execution {
            target: TO,
            value: U256::from(5),
            callData: Bytes::new(),
        },
    ]);
    assert_eq!(
        batch,
        bytes!(
            "0xe9ae5c530100000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000004000000000000000000000000000000000000000000000000000000000000001e00000000000000000000000000000000000000000000000000000000000000020000000000000000000000000000000000000000000000000000000000000000200000000000000000000000000000000000000000000000000000000000000400000000000000000000000000000000000000000000000000000000000000120000000000000000000000000833589fcd6edb6e08f4c7c32d4f71b54bda02913000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000600000000000000000000000000000000000000000000000000000000000000044a9059cbb00000000000000000000000000000000000000000000000000000000000000a100000000000000000000000000000000000000000000000000000000000f42400000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000a1000000000000000000000000000000000000000000000000000000000000000500000000000000000000000000000000000000000000000000000000000000600000000000000000000000000000000000000000000000000000000000000000"
        )
    );
    assert_eq!(BATCH_MODE[0], 1);
    assert!(BATCH_MODE[1..].iter().all(|b| *b == 0));
    assert_eq!(SINGLE_MODE, B256::ZERO);
}

#[test]
fn the_unsigned_paymaster_data_is_65_bytes_in_verifying_mode() {
    let data = unsigned_paymaster_and_data(&approval()).unwrap();
    assert_eq!(
        data,
        bytes!(
            "0x5FbDB2315678afecb367f032d93F642f64180aa3000000000000000000000000000186a0000000000000000000000000000000000000006553f358000000000000"
        )
    );
    assert_eq!(data.len(), PAYMASTER_SIGNED_LENGTH);
    let fields = paymaster_fields(&data).unwrap();
    assert_eq!(fields.paymaster, PAYMASTER);
    assert_eq!(fields.verification_gas_limit, 100_000);
    assert_eq!(fields.post_op_gas_limit, 0);
    assert_eq!(fields.mode_byte, 0);
    assert_eq!((fields.valid_until, fields.valid_after), (1_700_000_600, 0));
    assert!(fields.signature.is_empty());
    assert_eq!(paymaster_fields(&data[..64]), None);

    let mut late = approval();
    late.valid_until = MAX_UINT48 + 1;
    assert_eq!(
        unsigned_paymaster_and_data(&late),
        Err(UserOpError::TimeOutOfRange(MAX_UINT48 + 1))
    );
    late.valid_until = MAX_UINT48;
    let data = unsigned_paymaster_and_data(&late).unwrap();
    assert_eq!(paymaster_fields(&data).unwrap().valid_until, MAX_UINT48);
}

#[test]
fn the_entry_points_user_op_hash() {
    let op = operation();
    assert_eq!(
        user_op_hash(&op, ENTRY_POINT, CHAIN_ID),
        b256!("0xd1ccab464f911ea4449c9c35a4ad5b5029b92df42ba8462283fd17741e525499")
    );
    // The signature is not covered; the chain and the EntryPoint are.
    let mut signed = op.clone();
    signed.signature = Bytes::from(vec![1; 65]);
    assert_eq!(
        user_op_hash(&signed, ENTRY_POINT, CHAIN_ID),
        user_op_hash(&op, ENTRY_POINT, CHAIN_ID)
    );
    assert_ne!(
        user_op_hash(&op, ENTRY_POINT, 1),
        user_op_hash(&op, ENTRY_POINT, CHAIN_ID)
    );
    assert_ne!(
        user_op_hash(&op, PAYMASTER, CHAIN_ID),
        user_op_hash(&op, ENTRY_POINT, CHAIN_ID)
    );
}

#[test]
fn the_accounts_typed_data_hash() {
    let op = operation();
    let typehash = keccak256(
        "PackedUserOperation(address sender,uint256 nonce,bytes initCode,bytes callData,bytes32 accountGasLimits,\
         uint256 preVerificationGas,bytes32 gasFees,bytes paymasterAndData,address entryPoint)",
    );
    assert_eq!(
        typehash,
        b256!("0xbc37962d8bd1d319c95199bdfda6d3f92baa8903a61b32d5f4ec1f4b36a3bc18")
    );
    assert_eq!(typed_operation(&op, ENTRY_POINT).eip712_type_hash(), typehash);
    assert_eq!(
        account_struct_hash(&op, ENTRY_POINT),
        b256!("0x0eb7d8e6c6a4de1a1f356e2c5befb3e2b12a349870b03ec6438280a752bc67f9")
    );
    assert_eq!(
        account_domain(CHAIN_ID, SENDER).hash_struct(),
        b256!("0x919562748bda12807aee5e62136ca8283ef6746f26ab23f8e1762c20e434dcaf")
    );
    assert_eq!(
        account_digest(&op, ENTRY_POINT, CHAIN_ID),
        b256!("0x65cde5d9253f3240ae7988d7ca5cb17b2f6c1b3d69dce6feb252904ff8e47914")
    );
    // The whole paymasterAndData is covered, the account's own signature is not.
    let mut other = op.clone();
    other.paymasterAndData = [op.paymasterAndData.to_vec(), vec![7; 65]].concat().into();
    assert_ne!(
        account_digest(&other, ENTRY_POINT, CHAIN_ID),
        account_digest(&op, ENTRY_POINT, CHAIN_ID)
    );
    let mut signed = op.clone();
    signed.signature = Bytes::from(vec![1; 65]);
    assert_eq!(
        account_digest(&signed, ENTRY_POINT, CHAIN_ID),
        account_digest(&op, ENTRY_POINT, CHAIN_ID)
    );
}

#[test]
fn the_paymasters_hash_covers_its_65_signed_bytes_only() {
    let op = operation();
    let expected = b256!("0x92dc29271ad2a699ad908263428d8c3e8b3a95056c0da34435947763fdfa514b");
    assert_eq!(paymaster_hash(&op, CHAIN_ID), Ok(expected));
    assert_eq!(
        paymaster_digest(&op, CHAIN_ID),
        Ok(b256!(
            "0x0db8a84b5bc633dbab63c888f4a990bcab76fe5de0aeb6dd6e8eb087273de78a"
        ))
    );
    // Its signature and the account's do not count; the validity window does.
    let mut signed = op.clone();
    signed.paymasterAndData = [op.paymasterAndData.to_vec(), vec![9; 65]].concat().into();
    signed.signature = Bytes::from(vec![1; 65]);
    assert_eq!(paymaster_hash(&signed, CHAIN_ID), Ok(expected));
    let mut later = approval();
    later.valid_until += 1;
    let mut moved = op.clone();
    moved.paymasterAndData = unsigned_paymaster_and_data(&later).unwrap();
    assert_ne!(paymaster_hash(&moved, CHAIN_ID), Ok(expected));
    let mut short = op;
    short.paymasterAndData = Bytes::from(vec![0; 64]);
    assert_eq!(
        paymaster_hash(&short, CHAIN_ID),
        Err(UserOpError::PaymasterDataLength(64))
    );
}

#[test]
fn signatures_attach_in_order_and_recover_their_signers() {
    let paymaster_signer = PrivateKeySigner::random();
    let account = PrivateKeySigner::random();
    let mut op = operation();
    op.sender = account.address();
    let digest = paymaster_digest(&op, CHAIN_ID).unwrap();
    let approval_signature = paymaster_signer.sign_hash_sync(&digest).unwrap();
    // The same as a personal_sign of the hash's 32 bytes.
    let personal = paymaster_signer
        .sign_message_sync(paymaster_hash(&op, CHAIN_ID).unwrap().as_slice())
        .unwrap();
    assert_eq!(approval_signature, personal);
    attach_paymaster_signature(&mut op, &approval_signature).unwrap();
    assert_eq!(op.paymasterAndData.len(), PAYMASTER_SIGNED_LENGTH + 65);
    let fields = paymaster_fields(&op.paymasterAndData).unwrap();
    assert_eq!(fields.signature.as_ref(), approval_signature.as_bytes().as_slice());
    assert_eq!(
        approval_signature
            .recover_address_from_prehash(&paymaster_digest(&op, CHAIN_ID).unwrap())
            .ok(),
        Some(paymaster_signer.address())
    );
    // Twice is refused: the data is no longer unsigned.
    assert_eq!(
        attach_paymaster_signature(&mut op, &approval_signature),
        Err(UserOpError::PaymasterDataLength(PAYMASTER_SIGNED_LENGTH + 65))
    );
    let account_signature = account
        .sign_hash_sync(&account_digest(&op, ENTRY_POINT, CHAIN_ID))
        .unwrap();
    attach_account_signature(&mut op, &account_signature);
    assert_eq!(op.signature.len(), 65);
    assert_eq!(
        account_signature
            .recover_address_from_prehash(&account_digest(&op, ENTRY_POINT, CHAIN_ID))
            .ok(),
        Some(account.address())
    );
}

#[test]
fn the_maximum_cost_counts_every_limit_at_the_max_fee() {
    let op = operation();
    // (150k + 100k + 100k paymaster + 0 postOp + 50k) × 2 gwei.
    assert_eq!(max_cost(&op), U256::from(400_000u128 * 2 * GWEI));
    let mut bare = op;
    bare.paymasterAndData = Bytes::new();
    assert_eq!(max_cost(&bare), U256::from(300_000u128 * 2 * GWEI));
}

#[test]
fn entry_point_calldata_and_answers() {
    let mut op = operation();
    op.signature = bytes!("0x1234");
    let beneficiary = address!("0x00000000000000000000000000000000000000c4");
    let call = handle_ops_call(std::slice::from_ref(&op), beneficiary);
    assert_eq!(call.len(), 932);
    assert_eq!(
        keccak256(&call),
        b256!("0xaa37c17ab95142fc884246e2887fc4d733f9a0a47f22117c83b5341cb9cbda5e")
    );
    let decoded = IEntryPoint::handleOpsCall::abi_decode(&call).unwrap();
    assert_eq!((decoded.ops, decoded.beneficiary), (vec![op.clone()], beneficiary));
    assert_eq!(
        get_nonce_call(SENDER, U192::ZERO),
        bytes!(
            "0x35567e1a00000000000000000000000070997970c51812dc3a010c7d01b50e0d17dc79c80000000000000000000000000000000000000000000000000000000000000000"
        )
    );
    assert_eq!(uint_answer(&U256::from(9).abi_encode()), Some(U256::from(9)));
    assert_eq!(uint_answer(&[1, 2]), None);
    let hash = B256::repeat_byte(3);
    assert_eq!(word_answer(&hash.abi_encode()), Some(hash));
    assert_eq!(address_answer(&PAYMASTER.abi_encode()), Some(PAYMASTER));
    assert_eq!(bool_answer(&true.abi_encode()), Some(true));
    assert_eq!(
        get_user_op_hash_call(&op)[..4],
        IEntryPoint::getUserOpHashCall::SELECTOR
    );
    assert_eq!(deposit_call(PAYMASTER)[..4], [0x70, 0xa0, 0x82, 0x31]);
}

fn log(address: Address, topics: Vec<B256>, data: Vec<u8>) -> Log {
    Log {
        address,
        data: LogData::new(topics, data.into()).unwrap(),
    }
}

#[test]
fn user_operation_events_are_read_from_the_entry_point_only() {
    let user_op_hash = B256::repeat_byte(0xaa);
    let topics = vec![
        IEntryPoint::UserOperationEvent::SIGNATURE_HASH,
        user_op_hash,
        SENDER.into_word(),
        PAYMASTER.into_word(),
    ];
    let data = (U256::from(7), true, U256::from(123_456), U256::from(61_728)).abi_encode_params();
    let emitted = log(ENTRY_POINT, topics.clone(), data.clone());
    let event = user_operation_event(ENTRY_POINT, &emitted).unwrap();
    assert_eq!(event.userOpHash, user_op_hash);
    assert_eq!((event.sender, event.paymaster), (SENDER, PAYMASTER));
    assert_eq!(event.nonce, U256::from(7));
    assert!(event.success);
    assert_eq!(event.actualGasCost, U256::from(123_456));
    assert_eq!(event.actualGasUsed, U256::from(61_728));
    // The same log from another contract, or another event of the EntryPoint, is not one.
    assert_eq!(
        user_operation_event(ENTRY_POINT, &log(PAYMASTER, topics, data.clone())),
        None
    );
    let other = vec![
        IEntryPoint::UserOperationRevertReason::SIGNATURE_HASH,
        user_op_hash,
        SENDER.into_word(),
    ];
    assert_eq!(user_operation_event(ENTRY_POINT, &log(ENTRY_POINT, other, data)), None);
}

#[test]
fn the_signers_the_paymasters_logs_leave() {
    let (a, b) = (address!("0x00000000000000000000000000000000000000a1"), SENDER);
    let added = |s: Address| {
        log(
            PAYMASTER,
            vec![ISingletonPaymaster::SignerAdded::SIGNATURE_HASH],
            s.abi_encode(),
        )
    };
    let removed = |s: Address| {
        log(
            PAYMASTER,
            vec![ISingletonPaymaster::SignerRemoved::SIGNATURE_HASH],
            s.abi_encode(),
        )
    };
    assert_eq!(
        ISingletonPaymaster::SignerAdded::SIGNATURE_HASH,
        b256!("0x47d1c22a25bb3a5d4e481b9b1e6944c2eade3181a0a20b495ed61d35b5323f24")
    );
    let elsewhere = log(
        ENTRY_POINT,
        vec![ISingletonPaymaster::SignerAdded::SIGNATURE_HASH],
        b.abi_encode(),
    );
    let logs = [
        added(a),
        added(b),
        removed(a),
        elsewhere,
        added(a),
        removed(a),
        added(b),
    ];
    assert_eq!(signer_change(PAYMASTER, &logs[0]), Some((a, true)));
    assert_eq!(signer_change(PAYMASTER, &logs[2]), Some((a, false)));
    assert_eq!(signer_change(PAYMASTER, &logs[3]), None);
    assert_eq!(logged_signers(PAYMASTER, &logs), BTreeSet::from([b]));
    assert_eq!(logged_signers(PAYMASTER, &logs[..2]), BTreeSet::from([a, b]));
}

#[test]
fn failed_ops_name_the_operation_and_the_reason() {
    let plain = IEntryPoint::FailedOp {
        opIndex: U256::from(1),
        reason: "AA34 signature error".into(),
    }
    .abi_encode();
    assert_eq!(
        failed_op(&plain),
        Some((U256::from(1), "AA34 signature error".to_string(), Bytes::new()))
    );
    let inner = ISingletonPaymaster::BundlerNotAllowed { bundler: SENDER }.abi_encode();
    let with_revert = IEntryPoint::FailedOpWithRevert {
        opIndex: U256::ZERO,
        reason: "AA33 reverted".into(),
        inner: inner.clone().into(),
    }
    .abi_encode();
    assert_eq!(
        failed_op(&with_revert),
        Some((U256::ZERO, "AA33 reverted".to_string(), inner.into()))
    );
    assert_eq!(failed_op(&[0x08, 0xc3, 0x79, 0xa0]), None);
}

#[test]
fn account_reads() {
    let answer = IDeleGator::eip712DomainCall::abi_encode_returns(&IDeleGator::eip712DomainReturn {
        fields: alloy::primitives::FixedBytes([0x0f]),
        name: ACCOUNT_DOMAIN_NAME.into(),
        version: ACCOUNT_DOMAIN_VERSION.into(),
        chainId: U256::from(CHAIN_ID),
        verifyingContract: SENDER,
        salt: B256::ZERO,
        extensions: Vec::new(),
    });
    assert_eq!(
        eip712_domain_answer(&answer),
        Some(("EIP7702StatelessDeleGator".to_string(), "1".to_string()))
    );
    assert_eq!(eip712_domain_call()[..], [0x84, 0xb0, 0x19, 0x6e]);
    assert_eq!(entry_point_call()[..], [0xb0, 0xd6, 0x91, 0xfe]);
    assert_eq!(signers_call(SENDER)[..4], [0x73, 0x6c, 0x0d, 0x5b]);
    assert_eq!(is_bundler_allowed_call(SENDER)[..4], [0x40, 0x31, 0xc2, 0x0e]);
    assert_eq!(paymaster_get_hash_call(&operation())[..4], [0x63, 0xb2, 0x41, 0xaa]);
    assert_eq!(delegation_manager_call().len(), 4);
    assert_eq!(
        account_digest_call(&operation())[..4],
        IDeleGator::getPackedUserOperationTypedDataHashCall::SELECTOR
    );
}
