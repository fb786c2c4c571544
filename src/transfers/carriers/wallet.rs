//! The agent's wallet as carrier: an EIP-1559 transaction with the chain's id, signed at the wallet's nonce the
//! reservation named and broadcast by agentd; it settles by its receipt (`watcher`).

use alloy::consensus::{SignableTransaction, TxEip1559, TxEnvelope};
use alloy::eips::eip2718::Encodable2718;
use alloy::primitives::TxKind;

use crate::domain::chain::ChainInfo;
use crate::domain::transaction::Body;
use crate::signer::{SignerError, WalletSigner};
use crate::store::{SignedTx, TransferRequest};

/// Signs `request` at `nonce` (EIP-1559 with the chain's id): the raw bytes and hash to store before broadcast.
pub(in crate::transfers) fn sign_transfer(
    signer: &dyn WalletSigner,
    chain: &ChainInfo,
    request: &TransferRequest,
    priority_fee: u128,
    nonce: u64,
) -> Result<SignedTx, SignerError> {
    let (to, value, input) = match &request.body {
        Body::Transaction(t) => t.action.execution(request.to, request.value_wei, request.token),
        Body::Authorization(_) | Body::Signature(_) => {
            return Err(SignerError::Key(
                "an authorization or a signature is no transaction".into(),
            ));
        }
    };
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

/// Signs an EIP-1559 transaction (its signature hash, through the signer seam): the raw bytes and hash to store
/// before broadcast.
pub(in crate::transfers) fn sign_eip1559(signer: &dyn WalletSigner, tx: TxEip1559) -> Result<SignedTx, SignerError> {
    let signature = signer.sign_hash(&tx.signature_hash())?;
    let envelope = TxEnvelope::from(tx.into_signed(signature));
    Ok(SignedTx {
        hash: envelope.tx_hash().to_string(),
        raw: envelope.encoded_2718(),
    })
}
