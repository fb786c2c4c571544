//! An x402 payment (§16): an EIP-3009 authorization, signed off chain and delivered by the paid request.

use alloy::primitives::Address;

use super::Quote;
use crate::chain::Node;
use crate::domain::asset::Asset;
use crate::domain::transaction::X402Record;
use crate::signer::{SignerError, WalletSigner};
use crate::store::SignedTx;
use crate::transfers::TransferError;
use crate::x402::Choice;
use crate::x402::wire::PaymentRequired;

/// What an x402 authorization is signed from.
pub(in crate::transfers) struct PaymentDraft<'a> {
    pub required: &'a PaymentRequired,
    pub choice: &'a Choice,
    pub authorization: crate::x402::Authorization,
    pub record: X402Record,
    pub token: Asset,
}

/// No native coin moves (the facilitator pays the gas): the token balance, which the reservation holds the
/// payment against less other unused authorizations.
pub(super) async fn quote(client: &dyn Node, p: &PaymentDraft<'_>, from: Address) -> Result<Quote, TransferError> {
    Ok(Quote {
        token_balance: Some(client.token_balance(from, &p.token).await?),
        ..Quote::none()
    })
}

/// The EIP-3009 authorization, signed: the payment document the paid request carries (no transaction of the
/// agent's: the settlement, once known, is the payee's).
pub(super) fn sign(signer: &dyn WalletSigner, p: &PaymentDraft<'_>) -> Result<SignedTx, SignerError> {
    crate::x402::sign_payment(signer, p.required, p.choice, &p.authorization)
        .map(|signed| SignedTx {
            raw: signed.header_value.into_bytes(),
            hash: String::new(),
        })
        .map_err(|e| match e {
            crate::x402::SignError::Signer(e) => e,
            other => SignerError::Key(other.to_string()),
        })
}
