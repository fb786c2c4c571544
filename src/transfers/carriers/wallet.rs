//! The agent's wallet as carrier: an EIP-1559 transaction with the chain's id, signed at the wallet's nonce the
//! reservation named and broadcast by agentd; it settles by its receipt (`watcher`). A wallet-paid batch from an
//! agent still an EOA (§22) is a type-4 transaction to the agent's own address instead, carrying the agent key's
//! EIP-7702 authorization of the account implementation at the next nonce: it uses two nonces of the wallet
//! (`domain::transaction::wallet_nonces`), and its replacements and fills carry the same authorization.

use alloy::consensus::{SignableTransaction, TxEip1559, TxEip7702, TxEnvelope, TypedTransaction};
use alloy::eips::eip2718::{Decodable2718, Encodable2718};
use alloy::eips::eip7702::{Authorization, SignedAuthorization};
use alloy::primitives::{Address, Bytes, TxKind, U256};

use crate::domain::chain::ChainInfo;
use crate::domain::transaction::Body;
use crate::signer::{SignerError, WalletSigner};
use crate::store::{SignedTx, TransferRequest};

/// What an EIP-7702 authorization adds to the gas of the transaction that carries it (`PER_EMPTY_ACCOUNT_COST`:
/// the part refunded when the account exists is still needed up front).
pub(in crate::transfers) const AUTHORIZATION_GAS: u64 = 25_000;

/// What `request` executes: the target, value and input of its action.
fn execution(request: &TransferRequest) -> Result<(Address, U256, Bytes), SignerError> {
    match &request.body {
        Body::Transaction(t) => Ok(t.action.execution(request.to, request.value_wei, request.token)),
        Body::Authorization(_) | Body::Signature(_) => Err(SignerError::Key(
            "an authorization or a signature is no transaction".into(),
        )),
    }
}

/// Signs `request` at `nonce` (EIP-1559 with the chain's id): the raw bytes and hash to store before broadcast.
pub(in crate::transfers) fn sign_transfer(
    signer: &dyn WalletSigner,
    chain: &ChainInfo,
    request: &TransferRequest,
    priority_fee: u128,
    nonce: u64,
) -> Result<SignedTx, SignerError> {
    let (to, value, input) = execution(request)?;
    let (gas_limit, max_fee_per_gas) = request.body.fees();
    let tx = TxEip1559 {
        chain_id: chain.chain_id,
        nonce,
        gas_limit,
        max_fee_per_gas,
        max_priority_fee_per_gas: priority_fee.min(max_fee_per_gas),
        to: TxKind::Call(to),
        value,
        input,
        ..Default::default()
    };
    sign_eip1559(signer, tx)
}

/// Signs `request` at `nonce` as a type-4 transaction that designates `implementation` at the agent's own address
/// (§22): the agent key's EIP-7702 authorization of it, with the chain's own id and at `nonce + 1` (the sender's
/// nonce is incremented before the authorization list is processed), carried by the transaction the agent sends to
/// itself. The implementation is the chain's configured one (`Transfers::batch_implementation`): agentd signs an
/// authorization for no other address, and only in a transaction of the agent's own to itself.
pub(in crate::transfers) fn sign_designating(
    signer: &dyn WalletSigner,
    chain: &ChainInfo,
    request: &TransferRequest,
    (priority_fee, nonce): (u128, u64),
    implementation: Address,
) -> Result<SignedTx, SignerError> {
    let (to, value, input) = execution(request)?;
    if to != request.from {
        return Err(SignerError::Key(
            "a designation is carried only by a transaction of the agent to its own address".into(),
        ));
    }
    let authorization = Authorization {
        chain_id: U256::from(chain.chain_id),
        address: implementation,
        nonce: nonce + 1,
    };
    let signature = signer.sign_hash(&authorization.signature_hash())?;
    let (gas_limit, max_fee_per_gas) = request.body.fees();
    let tx = TxEip7702 {
        chain_id: chain.chain_id,
        nonce,
        gas_limit,
        max_fee_per_gas,
        max_priority_fee_per_gas: priority_fee.min(max_fee_per_gas),
        to,
        value,
        access_list: Default::default(),
        authorization_list: vec![authorization.into_signed(signature)],
        input,
    };
    sign_typed(signer, tx.into())
}

/// Signs an EIP-1559 transaction (its signature hash, through the signer seam): the raw bytes and hash to store
/// before broadcast.
pub(in crate::transfers) fn sign_eip1559(signer: &dyn WalletSigner, tx: TxEip1559) -> Result<SignedTx, SignerError> {
    sign_typed(signer, tx.into())
}

/// Signs a transaction of any type (its signature hash, through the signer seam): the raw bytes and hash to store
/// before broadcast.
pub(in crate::transfers) fn sign_typed(
    signer: &dyn WalletSigner,
    tx: TypedTransaction,
) -> Result<SignedTx, SignerError> {
    let signature = signer.sign_hash(&tx.signature_hash())?;
    let envelope: TxEnvelope = tx.into_envelope(signature);
    Ok(SignedTx {
        hash: envelope.tx_hash().to_string(),
        raw: envelope.encoded_2718(),
    })
}

/// The EIP-7702 authorizations a stored transaction of the wallet carries (none for an EIP-1559 one): a replacement
/// or a fill of its nonce carries them again, so that it uses the same nonces (their signatures are reused, nothing
/// new is signed).
pub(in crate::transfers) fn carried(raw: &[u8]) -> Vec<SignedAuthorization> {
    match TxEnvelope::decode_2718_exact(raw) {
        Ok(TxEnvelope::Eip7702(signed)) => signed.tx().authorization_list.clone(),
        _ => Vec::new(),
    }
}

/// A zero-value send of the agent's wallet to itself at `nonce` (a cancel or a fill), carrying `authorizations`
/// when the transaction whose nonce it takes carried some (a type-4 one then, `gas_limit` with their gas).
pub(in crate::transfers) fn self_send(
    chain: &ChainInfo,
    from: Address,
    (nonce, gas_limit): (u64, u64),
    (max_fee_per_gas, priority_fee): (u128, u128),
    authorizations: Vec<SignedAuthorization>,
) -> TypedTransaction {
    let max_priority_fee_per_gas = priority_fee.min(max_fee_per_gas);
    match authorizations.is_empty() {
        true => TxEip1559 {
            chain_id: chain.chain_id,
            nonce,
            gas_limit,
            max_fee_per_gas,
            max_priority_fee_per_gas,
            to: TxKind::Call(from),
            value: U256::ZERO,
            input: Bytes::new(),
            ..Default::default()
        }
        .into(),
        false => TxEip7702 {
            chain_id: chain.chain_id,
            nonce,
            gas_limit,
            max_fee_per_gas,
            max_priority_fee_per_gas,
            to: from,
            value: U256::ZERO,
            access_list: Default::default(),
            authorization_list: authorizations,
            input: Bytes::new(),
        }
        .into(),
    }
}
