//! An EIP-712 signature (§18 `sign-typed-data`): its digest signed, nothing sent.

use super::Quote;
use crate::domain::transaction::SignatureRecord;
use crate::signer::{SignerError, WalletSigner};
use crate::store::SignedTx;

/// What a typed-data signature is made from: its record and what its reservation judges (none when an owner
/// approved it).
pub(in crate::transfers) struct TypedDraft {
    pub record: SignatureRecord,
    pub check: Option<crate::store::CallCheck>,
}

impl TypedDraft {
    /// A held signature's draft once an owner approved it: its stored record, and `check`, what its message grants
    /// read again (written to the allowance ledger only as it is signed, §18).
    pub(in crate::transfers) fn from_held(record: &SignatureRecord, check: crate::store::CallCheck) -> Self {
        TypedDraft {
            record: record.clone(),
            check: Some(check),
        }
    }
}

/// Nothing is sent: no gas, no balance to hold.
pub(super) fn quote() -> Quote {
    Quote::none()
}

/// The message's EIP-712 digest, signed: the signature handed to the caller.
pub(super) fn sign(signer: &dyn WalletSigner, t: &TypedDraft) -> Result<SignedTx, SignerError> {
    signer.sign_hash(&t.record.digest).map(|signature| SignedTx {
        raw: signature.as_bytes().to_vec(),
        hash: String::new(),
    })
}
