//! ERC-4337 v0.7 user operations (§22) without I/O: the packed operation and its two packed words, the three
//! digests agentd computes itself before anything is signed — the EntryPoint's `userOpHash`, the account's EIP-712
//! hash as `EIP7702StatelessDeleGator` computes it, and the approval hash of Pimlico's `SingletonPaymaster` v0.7 in
//! verifying mode — the paymaster's `paymasterAndData`, the account's ERC-7579 `execute` calldata (single and batch),
//! the EntryPoint's `handleOps` calldata, and the calldata and answers of the reads around them (nonces, deposits,
//! the paymaster's signers and bundler allowlist, the account's configuration) and the logs they leave.
//!
//! Each digest is checked against the deployed contracts in `tests/api/sponsored/parts.rs`. Signing order: the
//! paymaster's hash covers neither its own signature nor the account's, the account's hash covers the whole
//! `paymasterAndData` (the paymaster's signature included); so the paymaster signs first, then the account.

use std::collections::BTreeSet;

use alloy::primitives::aliases::U192;
use alloy::primitives::{Address, B256, Bytes, Log, Signature, U256, eip191_hash_message, keccak256};
use alloy::sol_types::{Eip712Domain, SolCall, SolError, SolEvent, SolStruct, SolValue};

use crate::domain::delegation::{SINGLE_CALL_MODE, execution};

alloy::sol! {
    /// EntryPoint v0.7's user operation as it travels (`PackedUserOperation`): `accountGasLimits` is
    /// `verificationGasLimit(16) ‖ callGasLimit(16)`, `gasFees` is `maxPriorityFeePerGas(16) ‖ maxFeePerGas(16)`.
    #[derive(Debug, Default, PartialEq, Eq)]
    struct PackedUserOperation {
        address sender;
        uint256 nonce;
        bytes initCode;
        bytes callData;
        bytes32 accountGasLimits;
        uint256 preVerificationGas;
        bytes32 gasFees;
        bytes paymasterAndData;
        bytes signature;
    }

    /// One call of an ERC-7579 batch (`Execution` of the account's ABI).
    #[derive(Debug, Default, PartialEq, Eq)]
    struct Execution {
        address target;
        uint256 value;
        bytes callData;
    }

    /// The EntryPoint v0.7 parts agentd uses (ABI of npm `@metamask/delegation-abis` 2.0.0's `EntryPoint`).
    #[derive(Debug, PartialEq, Eq)]
    interface IEntryPoint {
        function handleOps(PackedUserOperation[] ops, address beneficiary) external;
        function getUserOpHash(PackedUserOperation userOp) external view returns (bytes32);
        function getNonce(address sender, uint192 key) external view returns (uint256 nonce);
        function balanceOf(address account) external view returns (uint256);
        event UserOperationEvent(bytes32 indexed userOpHash, address indexed sender, address indexed paymaster,
            uint256 nonce, bool success, uint256 actualGasCost, uint256 actualGasUsed);
        event UserOperationRevertReason(bytes32 indexed userOpHash, address indexed sender, uint256 nonce,
            bytes revertReason);
        error FailedOp(uint256 opIndex, string reason);
        error FailedOpWithRevert(uint256 opIndex, string reason, bytes inner);
    }

    /// Pimlico's `SingletonPaymaster` v0.7 as npm `@pimlico/mock-paymaster` 0.0.7's creation code deploys it
    /// (read from that code: the package's `singletonPaymaster07Abi` is an older contract without a manager or
    /// a bundler allowlist). `SignerAdded`/`SignerRemoved` carry the address in their data (not indexed); the
    /// constructor's signers emit neither.
    #[derive(Debug, PartialEq, Eq)]
    interface ISingletonPaymaster {
        function entryPoint() external view returns (address);
        function signers(address account) external view returns (bool isValidSigner);
        function isBundlerAllowed(address bundler) external view returns (bool);
        function getHash(uint8 mode, PackedUserOperation userOp) external view returns (bytes32);
        event SignerAdded(address signer);
        event SignerRemoved(address signer);
        error BundlerNotAllowed(address bundler);
    }

    /// The parts of `EIP7702StatelessDeleGator` (the account implementation) agentd reads and calls.
    #[derive(Debug, PartialEq, Eq)]
    interface IDeleGator {
        function execute(bytes32 mode, bytes executionCalldata) external payable;
        function entryPoint() external view returns (address);
        function delegationManager() external view returns (address);
        function eip712Domain() external view returns (bytes1 fields, string name, string version, uint256 chainId,
            address verifyingContract, bytes32 salt, uint256[] extensions);
        function getPackedUserOperationTypedDataHash(PackedUserOperation userOp) external view returns (bytes32);
    }
}

/// The operation as the account hashes it (EIP-712): the signature left out, the EntryPoint added.
mod typed {
    alloy::sol! {
        struct PackedUserOperation {
            address sender;
            uint256 nonce;
            bytes initCode;
            bytes callData;
            bytes32 accountGasLimits;
            uint256 preVerificationGas;
            bytes32 gasFees;
            bytes paymasterAndData;
            address entryPoint;
        }
    }
}

/// The account's EIP-712 domain name and version (`eip712Domain()` of `EIP7702StatelessDeleGator`).
pub const ACCOUNT_DOMAIN_NAME: &str = "EIP7702StatelessDeleGator";
pub const ACCOUNT_DOMAIN_VERSION: &str = "1";

/// ERC-7579 execution modes, exec type `0x00` (revert on failure): one call, and a batch (`0x01` then 31 zeros).
pub const SINGLE_MODE: B256 = SINGLE_CALL_MODE;
pub const BATCH_MODE: B256 = B256::new({
    let mut mode = [0u8; 32];
    mode[0] = 1;
    mode
});

/// The paymaster's verifying mode (`mode << 1 | allowAllBundlers` with both 0: its bundler allowlist applies).
pub const VERIFYING_MODE: u8 = 0;
/// `paymaster(20) ‖ verificationGasLimit(16) ‖ postOpGasLimit(16)`, then the paymaster's own data.
pub const PAYMASTER_DATA_OFFSET: usize = 52;
/// What the paymaster's hash covers of `paymasterAndData` in verifying mode: the offset, the mode byte, and
/// `validUntil(6) ‖ validAfter(6)`; its signature follows.
pub const PAYMASTER_SIGNED_LENGTH: usize = PAYMASTER_DATA_OFFSET + 1 + 12;
/// The largest `validUntil`/`validAfter` (`uint48`).
pub const MAX_UINT48: u64 = (1 << 48) - 1;

/// What a piece of an operation cannot be built from.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum UserOpError {
    #[error("a paymaster validity time beyond uint48: {0}")]
    TimeOutOfRange(u64),
    #[error("paymasterAndData is {0} bytes where {PAYMASTER_SIGNED_LENGTH} (unsigned) were expected")]
    PaymasterDataLength(usize),
}

/// Two 16-byte values packed into one word, `high ‖ low` (how v0.7 packs gas limits and fees).
pub fn pack_pair(high: u128, low: u128) -> B256 {
    let mut word = [0u8; 32];
    word[..16].copy_from_slice(&high.to_be_bytes());
    word[16..].copy_from_slice(&low.to_be_bytes());
    B256::new(word)
}

/// The two 16-byte values of a packed word, `(high, low)`.
pub fn unpack_pair(word: B256) -> (u128, u128) {
    let high = u128::from_be_bytes(word[..16].try_into().expect("16 bytes"));
    let low = u128::from_be_bytes(word[16..].try_into().expect("16 bytes"));
    (high, low)
}

/// `accountGasLimits`: `verificationGasLimit ‖ callGasLimit`.
pub fn account_gas_limits(verification_gas_limit: u128, call_gas_limit: u128) -> B256 {
    pack_pair(verification_gas_limit, call_gas_limit)
}

/// `gasFees`: `maxPriorityFeePerGas ‖ maxFeePerGas`.
pub fn gas_fees(max_priority_fee_per_gas: u128, max_fee_per_gas: u128) -> B256 {
    pack_pair(max_priority_fee_per_gas, max_fee_per_gas)
}

/// The most the operation can cost its payer, as the EntryPoint v0.7 requires it up front: every gas limit
/// (verification, call, the paymaster's verification and postOp) plus `preVerificationGas`, times `maxFeePerGas`.
pub fn max_cost(op: &PackedUserOperation) -> U256 {
    let (_, max_fee) = unpack_pair(op.gasFees);
    total_gas(op) * U256::from(max_fee)
}

/// Every gas limit of the operation (verification, call, the paymaster's verification and postOp) plus its
/// `preVerificationGas`: the gas the EntryPoint v0.7 has it prefund (`_getRequiredPrefund`).
pub fn total_gas(op: &PackedUserOperation) -> U256 {
    let (verification, call) = unpack_pair(op.accountGasLimits);
    let (paymaster_verification, post_op) = match paymaster_fields(&op.paymasterAndData) {
        Some(fields) => (fields.verification_gas_limit, fields.post_op_gas_limit),
        None => (0, 0),
    };
    U256::from(verification)
        + U256::from(call)
        + U256::from(paymaster_verification)
        + U256::from(post_op)
        + op.preVerificationGas
}

/// The EntryPoint v0.7's `getUserOpHash`: `keccak256(abi.encode(keccak256(abi.encode(sender, nonce,
/// keccak(initCode), keccak(callData), accountGasLimits, preVerificationGas, gasFees, keccak(paymasterAndData))),
/// entryPoint, chainId))`. The signature is not covered.
pub fn user_op_hash(op: &PackedUserOperation, entry_point: Address, chain_id: u64) -> B256 {
    let packed = (
        op.sender,
        op.nonce,
        keccak256(&op.initCode),
        keccak256(&op.callData),
        op.accountGasLimits,
        op.preVerificationGas,
        op.gasFees,
        keccak256(&op.paymasterAndData),
    );
    let inner = keccak256(packed.abi_encode_params());
    keccak256((inner, entry_point, U256::from(chain_id)).abi_encode_params())
}

/// The account's EIP-712 domain: `EIP7702StatelessDeleGator`, version 1, with the account's own address (the
/// EIP-7702 designated EOA) as `verifyingContract`.
pub fn account_domain(chain_id: u64, account: Address) -> Eip712Domain {
    alloy::sol_types::eip712_domain! {
        name: ACCOUNT_DOMAIN_NAME,
        version: ACCOUNT_DOMAIN_VERSION,
        chain_id: chain_id,
        verifying_contract: account,
    }
}

/// The operation as the account's EIP-712 struct (`PACKED_USER_OP_TYPEHASH`'s fields).
fn typed_operation(op: &PackedUserOperation, entry_point: Address) -> typed::PackedUserOperation {
    typed::PackedUserOperation {
        sender: op.sender,
        nonce: op.nonce,
        initCode: op.initCode.clone(),
        callData: op.callData.clone(),
        accountGasLimits: op.accountGasLimits,
        preVerificationGas: op.preVerificationGas,
        gasFees: op.gasFees,
        paymasterAndData: op.paymasterAndData.clone(),
        entryPoint: entry_point,
    }
}

/// The account's `getPackedUserOperationHash`: the EIP-712 struct hash of the operation with `entry_point`.
pub fn account_struct_hash(op: &PackedUserOperation, entry_point: Address) -> B256 {
    typed_operation(op, entry_point).eip712_hash_struct()
}

/// What the account's key signs (`getPackedUserOperationTypedDataHash`): the EIP-712 digest of the operation
/// under the domain of the account at `op.sender` on `chain_id`. Covers the whole `paymasterAndData`.
pub fn account_digest(op: &PackedUserOperation, entry_point: Address, chain_id: u64) -> B256 {
    typed_operation(op, entry_point).eip712_signing_hash(&account_domain(chain_id, op.sender))
}

/// Puts the account key's signature (65 bytes, `r ‖ s ‖ v`) on the operation.
pub fn attach_account_signature(op: &mut PackedUserOperation, signature: &Signature) {
    op.signature = Bytes::from(signature.as_bytes().to_vec());
}

/// What the paymaster's approval states in verifying mode: the fields of `paymasterAndData` before its signature
/// (the postOp gas limit is always 0: verifying mode has no postOp).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PaymasterApproval {
    pub paymaster: Address,
    pub verification_gas_limit: u128,
    /// Unix seconds after which the operation is refused (0: never); at most `MAX_UINT48`.
    pub valid_until: u64,
    /// Unix seconds before which the operation is refused; at most `MAX_UINT48`.
    pub valid_after: u64,
}

/// The unsigned `paymasterAndData` of `approval` (65 bytes): `paymaster ‖ verificationGasLimit ‖ postOpGasLimit
/// (0) ‖ 0x00 (verifying mode, bundler allowlist on) ‖ validUntil(6) ‖ validAfter(6)`.
pub fn unsigned_paymaster_and_data(approval: &PaymasterApproval) -> Result<Bytes, UserOpError> {
    let mut out = Vec::with_capacity(PAYMASTER_SIGNED_LENGTH + 65);
    out.extend_from_slice(approval.paymaster.as_slice());
    out.extend_from_slice(&approval.verification_gas_limit.to_be_bytes());
    out.extend_from_slice(&0u128.to_be_bytes());
    out.push(VERIFYING_MODE << 1);
    for time in [approval.valid_until, approval.valid_after] {
        if time > MAX_UINT48 {
            return Err(UserOpError::TimeOutOfRange(time));
        }
        out.extend_from_slice(&time.to_be_bytes()[2..]);
    }
    Ok(out.into())
}

/// `SingletonPaymaster` v0.7's `getHash(0, op)`: `keccak256(abi.encode(keccak256(abi.encode(sender, nonce,
/// accountGasLimits, preVerificationGas, gasFees, keccak(initCode), keccak(callData), keccak(paymasterAndData[:65]))),
/// chainId))`. Only the first 65 bytes of `paymasterAndData` count (its signature and the account's do not).
pub fn paymaster_hash(op: &PackedUserOperation, chain_id: u64) -> Result<B256, UserOpError> {
    let data = &op.paymasterAndData;
    if data.len() < PAYMASTER_SIGNED_LENGTH {
        return Err(UserOpError::PaymasterDataLength(data.len()));
    }
    let packed = (
        op.sender,
        op.nonce,
        op.accountGasLimits,
        op.preVerificationGas,
        op.gasFees,
        keccak256(&op.initCode),
        keccak256(&op.callData),
        keccak256(&data[..PAYMASTER_SIGNED_LENGTH]),
    );
    let inner = keccak256(packed.abi_encode_params());
    Ok(keccak256((inner, U256::from(chain_id)).abi_encode_params()))
}

/// What the paymaster's signer signs: the EIP-191 (`personal_sign`) digest of `paymaster_hash`'s 32 bytes, as the
/// paymaster recovers it (`toEthSignedMessageHash`).
pub fn paymaster_digest(op: &PackedUserOperation, chain_id: u64) -> Result<B256, UserOpError> {
    Ok(eip191_hash_message(paymaster_hash(op, chain_id)?))
}

/// Appends the paymaster signer's signature (65 bytes) to the operation's unsigned `paymasterAndData`.
pub fn attach_paymaster_signature(op: &mut PackedUserOperation, signature: &Signature) -> Result<(), UserOpError> {
    if op.paymasterAndData.len() != PAYMASTER_SIGNED_LENGTH {
        return Err(UserOpError::PaymasterDataLength(op.paymasterAndData.len()));
    }
    let signed = [op.paymasterAndData.as_ref(), &signature.as_bytes()].concat();
    op.paymasterAndData = signed.into();
    Ok(())
}

/// `paymasterAndData` read back in verifying mode.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PaymasterFields {
    pub paymaster: Address,
    pub verification_gas_limit: u128,
    pub post_op_gas_limit: u128,
    /// `mode << 1 | allowAllBundlers`.
    pub mode_byte: u8,
    pub valid_until: u64,
    pub valid_after: u64,
    /// What follows the signed part (the signature, when attached).
    pub signature: Bytes,
}

/// The fields of `paymasterAndData` (at least the 65 signed bytes), or `None` when it is shorter.
pub fn paymaster_fields(data: &[u8]) -> Option<PaymasterFields> {
    if data.len() < PAYMASTER_SIGNED_LENGTH {
        return None;
    }
    let u128_at = |at: usize| u128::from_be_bytes(data[at..at + 16].try_into().expect("16 bytes"));
    let u48_at = |at: usize| {
        let mut word = [0u8; 8];
        word[2..].copy_from_slice(&data[at..at + 6]);
        u64::from_be_bytes(word)
    };
    Some(PaymasterFields {
        paymaster: Address::from_slice(&data[..20]),
        verification_gas_limit: u128_at(20),
        post_op_gas_limit: u128_at(36),
        mode_byte: data[PAYMASTER_DATA_OFFSET],
        valid_until: u48_at(PAYMASTER_DATA_OFFSET + 1),
        valid_after: u48_at(PAYMASTER_DATA_OFFSET + 7),
        signature: Bytes::copy_from_slice(&data[PAYMASTER_SIGNED_LENGTH..]),
    })
}

/// The account's `execute(SINGLE_MODE, target ‖ value ‖ calldata)`: one call, reverting on failure.
pub fn execute_single(target: Address, value: U256, calldata: &[u8]) -> Bytes {
    IDeleGator::executeCall {
        mode: SINGLE_MODE,
        executionCalldata: execution(target, value, calldata),
    }
    .abi_encode()
    .into()
}

/// The account's `execute(BATCH_MODE, abi.encode(Execution[]))`: the calls in order, all or nothing.
pub fn execute_batch(calls: &[Execution]) -> Bytes {
    IDeleGator::executeCall {
        mode: BATCH_MODE,
        executionCalldata: calls.to_vec().abi_encode().into(),
    }
    .abi_encode()
    .into()
}

/// The EntryPoint's `handleOps(ops, beneficiary)` calldata (the beneficiary receives what the operations pay).
pub fn handle_ops_call(ops: &[PackedUserOperation], beneficiary: Address) -> Bytes {
    IEntryPoint::handleOpsCall {
        ops: ops.to_vec(),
        beneficiary,
    }
    .abi_encode()
    .into()
}

/// The EntryPoint's `getUserOpHash(op)` calldata (its answer reads with `word_answer`).
pub fn get_user_op_hash_call(op: &PackedUserOperation) -> Bytes {
    IEntryPoint::getUserOpHashCall { userOp: op.clone() }
        .abi_encode()
        .into()
}

/// The EntryPoint's `getNonce(sender, key)` calldata: the next nonce of `sender`'s sequence `key`.
pub fn get_nonce_call(sender: Address, key: U192) -> Bytes {
    IEntryPoint::getNonceCall { sender, key }.abi_encode().into()
}

/// The EntryPoint's `balanceOf(account)` calldata: `account`'s deposit (a paymaster's is what it can pay).
pub fn deposit_call(account: Address) -> Bytes {
    IEntryPoint::balanceOfCall { account }.abi_encode().into()
}

/// A `uint256` answer (`getNonce`, `balanceOf`).
pub fn uint_answer(out: &[u8]) -> Option<U256> {
    U256::abi_decode(out).ok()
}

/// A `bytes32` answer (`getUserOpHash`, `getHash`, `getPackedUserOperationTypedDataHash`).
pub fn word_answer(out: &[u8]) -> Option<B256> {
    B256::abi_decode(out).ok()
}

/// An `address` answer (`entryPoint()`, `delegationManager()`).
pub fn address_answer(out: &[u8]) -> Option<Address> {
    Address::abi_decode(out).ok()
}

/// A `bool` answer (`signers`, `isBundlerAllowed`).
pub fn bool_answer(out: &[u8]) -> Option<bool> {
    bool::abi_decode(out).ok()
}

/// The `UserOperationEvent` of `log` when the EntryPoint at `entry_point` emitted it.
pub fn user_operation_event(entry_point: Address, log: &Log) -> Option<IEntryPoint::UserOperationEvent> {
    if log.address != entry_point {
        return None;
    }
    IEntryPoint::UserOperationEvent::decode_log_data(&log.data).ok()
}

/// Why the EntryPoint refused a bundle (`FailedOp` / `FailedOpWithRevert` revert data): the operation's index in
/// the bundle, the EntryPoint's reason (`"AA34 signature error"`, …) and the inner revert data (empty for
/// `FailedOp`).
pub fn failed_op(revert: &[u8]) -> Option<(U256, String, Bytes)> {
    if let Ok(e) = IEntryPoint::FailedOp::abi_decode(revert) {
        return Some((e.opIndex, e.reason, Bytes::new()));
    }
    let e = IEntryPoint::FailedOpWithRevert::abi_decode(revert).ok()?;
    Some((e.opIndex, e.reason, e.inner))
}

/// The paymaster's and the account's `entryPoint()` calldata.
pub fn entry_point_call() -> Bytes {
    ISingletonPaymaster::entryPointCall {}.abi_encode().into()
}

/// The paymaster's `signers(account)` calldata: whether it trusts `account`'s approvals.
pub fn signers_call(account: Address) -> Bytes {
    ISingletonPaymaster::signersCall { account }.abi_encode().into()
}

/// The paymaster's `isBundlerAllowed(bundler)` calldata: whether a bundle sent by `bundler` may use it.
pub fn is_bundler_allowed_call(bundler: Address) -> Bytes {
    ISingletonPaymaster::isBundlerAllowedCall { bundler }
        .abi_encode()
        .into()
}

/// The paymaster's `getHash(0, op)` calldata (verifying mode), to compare with `paymaster_hash`.
pub fn paymaster_get_hash_call(op: &PackedUserOperation) -> Bytes {
    ISingletonPaymaster::getHashCall {
        mode: VERIFYING_MODE,
        userOp: op.clone(),
    }
    .abi_encode()
    .into()
}

/// A signer change logged by the paymaster at `paymaster`: `(signer, true)` for `SignerAdded`, `false` for
/// `SignerRemoved`.
pub fn signer_change(paymaster: Address, log: &Log) -> Option<(Address, bool)> {
    if log.address != paymaster {
        return None;
    }
    match log.topics().first()? {
        t if *t == ISingletonPaymaster::SignerAdded::SIGNATURE_HASH => {
            let e = ISingletonPaymaster::SignerAdded::decode_log_data(&log.data).ok()?;
            Some((e.signer, true))
        }
        t if *t == ISingletonPaymaster::SignerRemoved::SIGNATURE_HASH => {
            let e = ISingletonPaymaster::SignerRemoved::decode_log_data(&log.data).ok()?;
            Some((e.signer, false))
        }
        _ => None,
    }
}

/// The signers the paymaster's `SignerAdded`/`SignerRemoved` logs leave trusted, the logs in chain order. Signers
/// its constructor was given log neither, so they are not among them.
pub fn logged_signers<'a>(paymaster: Address, logs: impl IntoIterator<Item = &'a Log>) -> BTreeSet<Address> {
    let mut signers = BTreeSet::new();
    for (signer, added) in logs.into_iter().filter_map(|log| signer_change(paymaster, log)) {
        if added {
            signers.insert(signer);
        } else {
            signers.remove(&signer);
        }
    }
    signers
}

/// The account implementation's `delegationManager()` calldata.
pub fn delegation_manager_call() -> Bytes {
    IDeleGator::delegationManagerCall {}.abi_encode().into()
}

/// The account implementation's `eip712Domain()` calldata (ERC-5267).
pub fn eip712_domain_call() -> Bytes {
    IDeleGator::eip712DomainCall {}.abi_encode().into()
}

/// The `(name, version)` of an `eip712Domain()` answer.
pub fn eip712_domain_answer(out: &[u8]) -> Option<(String, String)> {
    let domain = IDeleGator::eip712DomainCall::abi_decode_returns(out).ok()?;
    Some((domain.name, domain.version))
}

/// The account's `getPackedUserOperationTypedDataHash(op)` calldata, to compare with `account_digest`.
pub fn account_digest_call(op: &PackedUserOperation) -> Bytes {
    IDeleGator::getPackedUserOperationTypedDataHashCall { userOp: op.clone() }
        .abi_encode()
        .into()
}

#[cfg(test)]
mod tests;
