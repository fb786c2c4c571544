//! The calldata of the framework's functions agentd calls, and the reading of their answers: the redemption the
//! money path signs, and the reads around it (whether a delegation is disabled, a smart account's signature check,
//! what is left of a limit).

use alloy::primitives::{Address, B256, Bytes, U256};
use alloy::sol_types::{SolCall, SolValue};

use super::{
    AvailableRead, Delegation, ERC1271_MAGIC, IDelegationManager, IERC1271, IPeriodTransferEnforcer, ISpentMapEnforcer,
    Limit, SINGLE_CALL_MODE,
};

/// The execution a redemption performs, as ERC-7579 single-call `executionCalldata`: `target(20) ‖ value(32) ‖
/// calldata` packed.
pub fn execution(target: Address, value: U256, calldata: &[u8]) -> Bytes {
    let mut out = Vec::with_capacity(52 + calldata.len());
    out.extend_from_slice(target.as_slice());
    out.extend_from_slice(&value.to_be_bytes::<32>());
    out.extend_from_slice(calldata);
    out.into()
}

/// The manager's `redeemDelegations` calldata redeeming `delegation` (a root delegation: the chain is the
/// delegation alone) for one call of `target` with `value` and `calldata`, in single-call mode. A token transfer is
/// the token's `transfer(to, amount)` with no value; a native send is a call of `to` with `value` and no calldata.
pub fn redemption(delegation: &Delegation, target: Address, value: U256, calldata: &[u8]) -> Bytes {
    let context = vec![delegation.abi()].abi_encode();
    IDelegationManager::redeemDelegationsCall {
        permissionContexts: vec![context.into()],
        modes: vec![SINGLE_CALL_MODE],
        executionCallDatas: vec![execution(target, value, calldata)],
    }
    .abi_encode()
    .into()
}

/// `disabledDelegations(hash)` calldata.
pub fn disabled_call(hash: B256) -> Bytes {
    IDelegationManager::disabledDelegationsCall { delegationHash: hash }
        .abi_encode()
        .into()
}

/// Reads `disabledDelegations`'s answer.
pub fn disabled_answer(out: &[u8]) -> Option<bool> {
    IDelegationManager::disabledDelegationsCall::abi_decode_returns(out).ok()
}

/// `isValidSignature(digest, signature)` calldata, as the manager asks the delegator.
pub fn is_valid_signature_call(digest: B256, signature: &Bytes) -> Bytes {
    IERC1271::isValidSignatureCall {
        hash: digest,
        signature: signature.clone(),
    }
    .abi_encode()
    .into()
}

/// Whether an `isValidSignature` answer is the ERC-1271 magic value.
pub fn is_valid_signature_answer(out: &[u8]) -> bool {
    IERC1271::isValidSignatureCall::abi_decode_returns(out).is_ok_and(|magic| magic.0 == ERC1271_MAGIC)
}

/// The calldata reading what is left of `limit` of the delegation `hash` under `manager`, with the caveat's terms.
pub fn available_call(limit: &Limit, hash: B256, manager: Address, terms: &Bytes) -> Bytes {
    match limit.read {
        AvailableRead::GetAvailableAmount => IPeriodTransferEnforcer::getAvailableAmountCall {
            delegationHash: hash,
            delegationManager: manager,
            terms: terms.clone(),
        }
        .abi_encode()
        .into(),
        AvailableRead::SpentMap => ISpentMapEnforcer::spentMapCall {
            delegationManager: manager,
            delegationHash: hash,
        }
        .abi_encode()
        .into(),
    }
}

/// The figure `available_call`'s answer gives: the enforcer's available amount, or the amount less what it spent.
pub fn available_answer(limit: &Limit, out: &[u8]) -> Option<U256> {
    match limit.read {
        AvailableRead::GetAvailableAmount => IPeriodTransferEnforcer::getAvailableAmountCall::abi_decode_returns(out)
            .ok()
            .map(|r| r.availableAmount),
        AvailableRead::SpentMap => ISpentMapEnforcer::spentMapCall::abi_decode_returns(out)
            .ok()
            .map(|spent| limit.amount.saturating_sub(spent)),
    }
}
