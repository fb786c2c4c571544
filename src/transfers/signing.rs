//! Signing: the agent's signer opened (§20), and the encoding an L1 fee is estimated on. What a carrier signs is the carrier's (`carriers`).

use std::sync::Arc;

use alloy::consensus::{SignableTransaction, TxEip1559};
use alloy::primitives::{Address, Bytes, TxKind, U256};
use uuid::Uuid;

use super::{TransferError, Transfers, store_error};
use crate::domain::chain::ChainInfo;
use crate::signer::{SignerError, WalletSigner};

impl Transfers {
    /// The agent's signer (§20): its vault key opened, or its key in the token (asked nothing until it signs).
    pub(super) async fn signer(&self, agent_id: Uuid) -> Result<Arc<dyn WalletSigner>, TransferError> {
        let key = self.store.wallet_key(agent_id).await.map_err(store_error)?;
        self.keys.open(agent_id, &key).map_err(|e| signer_error(agent_id, e))
    }
}

/// What a signer's failure is to the caller: a token that does not answer is 503 `signer_unavailable` (nothing
/// recorded, try again), a key that cannot be used an internal error.
pub(crate) fn signer_error(agent_id: Uuid, e: SignerError) -> TransferError {
    tracing::error!(%agent_id, error = %e, "the wallet key could not sign");
    match e {
        SignerError::Unavailable(_) => TransferError::SignerUnavailable,
        SignerError::Key(_) => TransferError::KeyUnavailable,
    }
}

/// The unsigned encoding the L1 fee of a transfer to `to` of `value` is estimated on, before its gas, fees and nonce
/// are known: those fields take values at least as long as the real ones, so the estimate does not fall short.
pub(crate) fn l1_probe(chain: &ChainInfo, to: Address, value: U256, input: Bytes) -> Vec<u8> {
    TxEip1559 {
        chain_id: chain.chain_id,
        nonce: u64::from(u32::MAX),
        gas_limit: 30_000_000,
        max_fee_per_gas: 1_000 * crate::chain::GWEI,
        max_priority_fee_per_gas: 1_000 * crate::chain::GWEI,
        to: TxKind::Call(to),
        value,
        input,
        ..Default::default()
    }
    .encoded_for_signing()
}
