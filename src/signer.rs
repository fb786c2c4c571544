//! The signer seam (§20): every signature an agent makes — a transaction's signature hash, an x402 EIP-3009
//! authorization's or an EIP-712 message's digest — is asked of a `WalletSigner`, whatever holds the key: the local
//! vault (a key decrypted under `ENCRYPTION_KEY` for the signing only) or a PKCS#11 token (the key never leaves it).
//! Nothing above this module knows which. `Keys` picks the backend from each stored key's scheme, so a database
//! may hold both kinds while `agentd keys import-to-pkcs11` moves keys into the token.

use std::sync::Arc;

use alloy::primitives::{Address, B256, Signature};
use alloy::signers::SignerSync;
use alloy::signers::local::PrivateKeySigner;
use uuid::Uuid;

use crate::vault::{EncryptedKey, KeyScheme, Vault};

pub mod pkcs11;

pub use pkcs11::{Imported, Pkcs11Config, Token};

/// Why a signature was not made. Never carries key material or a PIN.
#[derive(Debug, thiserror::Error)]
pub enum SignerError {
    /// The key store cannot sign now (a token that does not answer, a session lost): nothing was signed, try later.
    #[error("the key store cannot sign now: {0}")]
    Unavailable(String),
    /// The key cannot be used (a ciphertext that does not open, a key object missing or of the wrong address).
    #[error("the wallet key cannot be used: {0}")]
    Key(String),
}

impl SignerError {
    pub fn is_unavailable(&self) -> bool {
        matches!(self, SignerError::Unavailable(_))
    }
}

/// One agent's key, wherever it lives: its address and signatures of 32-byte digests (`s` low, the recovery id
/// set), as alloy's local signer makes them. Signing is synchronous and may block (a token answers over a bus or a
/// network); it is never asked inside a database transaction (see `transfers::send`).
pub trait WalletSigner: Send + Sync {
    fn address(&self) -> Address;
    fn sign_hash(&self, hash: &B256) -> Result<Signature, SignerError>;
    /// Whether it signs in this process's memory, in microseconds, so that a signature may be made inside a
    /// database transaction without holding it noticeably longer (group commit signs a round's sends so). A token's
    /// signer (which may take tens of milliseconds, or fail) signs outside every transaction.
    fn in_memory(&self) -> bool {
        false
    }
}

/// A key decrypted from the vault (held only as long as the send that opened it).
impl WalletSigner for PrivateKeySigner {
    fn address(&self) -> Address {
        PrivateKeySigner::address(self)
    }

    fn sign_hash(&self, hash: &B256) -> Result<Signature, SignerError> {
        self.sign_hash_sync(hash).map_err(|e| SignerError::Key(e.to_string()))
    }

    fn in_memory(&self) -> bool {
        true
    }
}

/// The key backends of a process: the vault always (local keys, and everything else `ENCRYPTION_KEY` seals), the
/// token when `KEY_BACKEND=pkcs11`. New agents' keys go where `KEY_BACKEND` says.
pub struct Keys {
    vault: Arc<Vault>,
    token: Option<Arc<Token>>,
}

impl std::fmt::Debug for Keys {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Keys")
            .field("vault", &self.vault)
            .field("pkcs11", &self.token.is_some())
            .finish()
    }
}

impl Keys {
    pub fn new(vault: Arc<Vault>, token: Option<Arc<Token>>) -> Self {
        Keys { vault, token }
    }

    /// The token, when `KEY_BACKEND=pkcs11`.
    pub fn token(&self) -> Option<&Arc<Token>> {
        self.token.as_ref()
    }

    /// A fresh key for a new agent: generated inside the token (its record holds no key material) or by the vault.
    /// Blocking when it asks the token: call it off the async workers.
    pub fn generate(&self, agent_id: Uuid) -> Result<EncryptedKey, SignerError> {
        match &self.token {
            Some(token) => {
                let address = token.generate(agent_id)?;
                Ok(EncryptedKey::in_token(address, self.vault.version()))
            }
            None => Ok(self.vault.generate(agent_id)),
        }
    }

    /// The signer of `agent_id`'s stored key. A token key is not touched until it signs.
    pub fn open(&self, agent_id: Uuid, key: &EncryptedKey) -> Result<Arc<dyn WalletSigner>, SignerError> {
        match key.scheme {
            KeyScheme::Local => self
                .vault
                .open(agent_id, key)
                .map(|signer| Arc::new(signer) as Arc<dyn WalletSigner>)
                .map_err(|e| SignerError::Key(e.to_string())),
            KeyScheme::Pkcs11 => match &self.token {
                Some(token) => Ok(Arc::new(token.signer(agent_id, key.address))),
                None => Err(SignerError::Key(format!(
                    "agent {agent_id}'s key is in a PKCS#11 token but KEY_BACKEND is not pkcs11"
                ))),
            },
        }
    }
}

/// `signature` (r, s as the token gave them) made low-s with the recovery id that recovers `address` from `hash`.
pub fn recoverable(hash: &B256, r: &[u8], s: &[u8], address: Address) -> Result<Signature, SignerError> {
    use alloy::primitives::U256;
    if r.len() != 32 || s.len() != 32 {
        return Err(SignerError::Key("the signature is not 64 bytes".into()));
    }
    let (r, s) = (U256::from_be_slice(r), U256::from_be_slice(s));
    let unnormalised = Signature::new(r, s, false);
    let low = unnormalised.normalize_s().unwrap_or(unnormalised);
    for parity in [false, true] {
        let candidate = low.with_parity(parity);
        if candidate.recover_address_from_prehash(hash).ok() == Some(address) {
            return Ok(candidate);
        }
    }
    Err(SignerError::Key(
        "the token's signature does not recover the agent's address".into(),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_high_s_signature_is_made_low_and_given_the_recovery_id_of_its_key() {
        let key = PrivateKeySigner::random();
        let hash = B256::repeat_byte(7);
        let expected = key.sign_hash_sync(&hash).unwrap();
        let (r, s) = (expected.r(), expected.s());
        // The same signature with s = n - s (high), as an HSM may answer.
        let n = alloy::primitives::U256::from_str_radix(
            "fffffffffffffffffffffffffffffffebaaedce6af48a03bbfd25e8cd0364141",
            16,
        )
        .unwrap();
        for s in [s, n - s] {
            let made = recoverable(&hash, &r.to_be_bytes::<32>(), &s.to_be_bytes::<32>(), key.address()).unwrap();
            assert_eq!(made, expected);
        }
        let other = PrivateKeySigner::random().address();
        assert!(recoverable(&hash, &r.to_be_bytes::<32>(), &s.to_be_bytes::<32>(), other).is_err());
    }

    #[test]
    fn the_local_signer_signs_as_alloys() {
        let key = PrivateKeySigner::random();
        let hash = B256::repeat_byte(1);
        let local: &dyn WalletSigner = &key;
        assert_eq!(local.sign_hash(&hash).unwrap(), key.sign_hash_sync(&hash).unwrap());
        assert_eq!(local.address(), key.address());
    }
}
