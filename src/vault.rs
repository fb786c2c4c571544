//! Key custody: secp256k1 keys generated from the OS RNG, kept only as AES-256-GCM ciphertext bound to their agent.

use std::path::Path;

use aes_gcm::aead::{Aead, KeyInit, Payload};
use aes_gcm::{Aes256Gcm, Nonce};
use alloy::primitives::Address;
use alloy::signers::local::PrivateKeySigner;
use rand_core::{OsRng, RngCore};
use secrecy::ExposeSecret;
use uuid::Uuid;
use zeroize::Zeroizing;

use crate::config::{EncryptionKey, parse_encryption_key};

/// The version of the master key that new ciphertexts are written under.
pub const CURRENT_KEY_VERSION: i32 = 1;
const KEY_FILE: &str = "encryption.key";

/// A wallet key as stored: ciphertext and nonce, never the plaintext.
#[derive(Clone, PartialEq, Eq)]
pub struct EncryptedKey {
    pub address: Address,
    pub ciphertext: Vec<u8>,
    pub nonce: Vec<u8>,
    pub key_version: i32,
}

impl std::fmt::Debug for EncryptedKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("EncryptedKey")
            .field("address", &self.address)
            .field("key_version", &self.key_version)
            .finish_non_exhaustive()
    }
}

/// Why a key could not be produced or opened. Never carries key material.
#[derive(Debug, thiserror::Error)]
pub enum VaultError {
    #[error("the wallet key could not be decrypted (wrong ENCRYPTION_KEY or tampered record)")]
    Decrypt,
    #[error("the stored key version {0} is not known to this instance")]
    UnknownVersion(i32),
    #[error("key file: {0}")]
    KeyFile(String),
}

/// Encrypts and decrypts agents' wallet keys under the master key.
pub struct Vault {
    cipher: Aes256Gcm,
}

impl std::fmt::Debug for Vault {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Vault(..)")
    }
}

impl Vault {
    pub fn new(key: &EncryptionKey) -> Self {
        Vault {
            cipher: Aes256Gcm::new(key.expose_secret().into()),
        }
    }

    /// Generates a fresh key for an agent and returns its encrypted form.
    pub fn generate(&self, agent_id: Uuid) -> EncryptedKey {
        loop {
            let mut secret = Zeroizing::new([0u8; 32]);
            OsRng.fill_bytes(secret.as_mut());
            // About 1 in 2^128 byte strings is not a valid scalar; draw again in that case.
            if let Ok(signer) = PrivateKeySigner::from_slice(secret.as_ref()) {
                return self.seal(agent_id, signer.address(), &secret);
            }
        }
    }

    fn seal(&self, agent_id: Uuid, address: Address, secret: &[u8; 32]) -> EncryptedKey {
        let mut nonce = [0u8; 12];
        OsRng.fill_bytes(&mut nonce);
        let aad = associated_data(agent_id);
        let ciphertext = self
            .cipher
            .encrypt(Nonce::from_slice(&nonce), Payload { msg: secret, aad: &aad })
            .expect("AES-GCM encryption of 32 bytes cannot fail");
        EncryptedKey {
            address,
            ciphertext,
            nonce: nonce.to_vec(),
            key_version: CURRENT_KEY_VERSION,
        }
    }

    /// Decrypts a key into zeroizing memory. Keep the result only as long as the signing takes.
    pub fn open(&self, agent_id: Uuid, key: &EncryptedKey) -> Result<PrivateKeySigner, VaultError> {
        if key.key_version != CURRENT_KEY_VERSION {
            return Err(VaultError::UnknownVersion(key.key_version));
        }
        if key.nonce.len() != 12 {
            return Err(VaultError::Decrypt);
        }
        let aad = associated_data(agent_id);
        let plain = Zeroizing::new(
            self.cipher
                .decrypt(
                    Nonce::from_slice(&key.nonce),
                    Payload {
                        msg: &key.ciphertext,
                        aad: &aad,
                    },
                )
                .map_err(|_| VaultError::Decrypt)?,
        );
        let signer = PrivateKeySigner::from_slice(&plain).map_err(|_| VaultError::Decrypt)?;
        if signer.address() != key.address {
            return Err(VaultError::Decrypt);
        }
        Ok(signer)
    }
}

fn associated_data(agent_id: Uuid) -> Vec<u8> {
    format!("agentd:wallet-key:{agent_id}").into_bytes()
}

/// Reads the development key file in `dir`, creating it (mode 0600) with a random key on first start.
pub fn load_or_create_key_file(dir: &Path) -> Result<EncryptionKey, VaultError> {
    let path = dir.join(KEY_FILE);
    let io = |e: std::io::Error| VaultError::KeyFile(format!("{}: {e}", path.display()));
    if path.exists() {
        let text = Zeroizing::new(std::fs::read_to_string(&path).map_err(io)?);
        return parse_encryption_key(&text)
            .map_err(|_| VaultError::KeyFile(format!("{} is not a valid key", path.display())));
    }
    std::fs::create_dir_all(dir).map_err(io)?;
    let mut bytes = Zeroizing::new([0u8; 32]);
    OsRng.fill_bytes(bytes.as_mut());
    let text = Zeroizing::new(alloy::hex::encode(bytes.as_ref()));
    write_private_file(&path, text.as_bytes()).map_err(io)?;
    tracing::warn!(path = %path.display(), "generated a development encryption key; set ENCRYPTION_KEY in production");
    parse_encryption_key(&text).map_err(|_| VaultError::KeyFile("generated key is invalid".into()))
}

#[cfg(unix)]
fn write_private_file(path: &Path, contents: &[u8]) -> std::io::Result<()> {
    use std::io::Write;
    use std::os::unix::fs::OpenOptionsExt;
    let mut file = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(path)?;
    file.write_all(contents)?;
    file.sync_all()
}

#[cfg(not(unix))]
fn write_private_file(path: &Path, contents: &[u8]) -> std::io::Result<()> {
    std::fs::write(path, contents)
}

#[cfg(test)]
mod tests {
    use super::*;
    use secrecy::SecretBox;

    fn vault(byte: u8) -> Vault {
        Vault::new(&SecretBox::new(Box::new([byte; 32])))
    }

    #[test]
    fn a_sealed_key_opens_only_for_its_agent_and_master_key() {
        let v = vault(7);
        let agent = Uuid::new_v4();
        let key = v.generate(agent);
        assert_eq!(v.open(agent, &key).unwrap().address(), key.address);
        assert!(v.open(Uuid::new_v4(), &key).is_err());
        assert!(vault(8).open(agent, &key).is_err());
        let mut tampered = key.clone();
        tampered.ciphertext[0] ^= 1;
        assert!(v.open(agent, &tampered).is_err());
    }

    #[test]
    fn ciphertexts_use_fresh_nonces() {
        let v = vault(1);
        let agent = Uuid::new_v4();
        let (a, b) = (v.generate(agent), v.generate(agent));
        assert_ne!(a.nonce, b.nonce);
        assert_ne!(a.address, b.address);
        assert_eq!(a.ciphertext.len(), 32 + 16);
    }
}
