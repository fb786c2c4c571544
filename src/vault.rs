//! Key custody: secp256k1 keys generated from the OS RNG, kept only as AES-256-GCM ciphertext bound to their agent,
//! and the key check that tells whether a master key is the one the stored keys were written under.

use std::path::Path;

use aes_gcm::aead::{Aead, KeyInit, Payload};
use aes_gcm::{Aes256Gcm, Nonce};
use alloy::primitives::Address;
use alloy::signers::local::PrivateKeySigner;
use rand_core::{OsRng, RngCore};
use secrecy::ExposeSecret;
use uuid::Uuid;
use zeroize::{Zeroize, Zeroizing};

use crate::config::{EncryptionKey, parse_encryption_key};
use crate::domain::audit::AuditKey;
use crate::domain::transaction::SealedRequest;

/// The version of the first master key of a database; each `agentd rotate-key` moves to the next.
pub const FIRST_KEY_VERSION: i32 = 1;
const KEY_FILE: &str = "encryption.key";
/// What the key check encrypts: any fixed text does, the AES-GCM tag is what proves the key.
const KEY_CHECK_TEXT: &[u8] = b"agentd master key check";

/// Where a wallet key lives (the `scheme` column of `wallet_keys`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum KeyScheme {
    /// Encrypted under the master key in the database (`secp256k1`).
    Local,
    /// Inside the PKCS#11 token, labelled with the agent id (`pkcs11`): the record holds no key material (§20).
    Pkcs11,
}

impl KeyScheme {
    pub fn as_str(self) -> &'static str {
        match self {
            KeyScheme::Local => "secp256k1",
            KeyScheme::Pkcs11 => "pkcs11",
        }
    }

    pub fn parse(text: &str) -> Option<Self> {
        match text {
            "secp256k1" => Some(KeyScheme::Local),
            "pkcs11" => Some(KeyScheme::Pkcs11),
            _ => None,
        }
    }
}

/// A wallet key as stored: ciphertext and nonce, never the plaintext; for a key in a token, only its address.
#[derive(Clone, PartialEq, Eq)]
pub struct EncryptedKey {
    pub address: Address,
    pub ciphertext: Vec<u8>,
    pub nonce: Vec<u8>,
    pub key_version: i32,
    pub scheme: KeyScheme,
}

impl EncryptedKey {
    /// The record of a key generated in a PKCS#11 token: its address, no key material.
    pub fn in_token(address: Address, key_version: i32) -> Self {
        EncryptedKey {
            address,
            ciphertext: Vec::new(),
            nonce: Vec::new(),
            key_version,
            scheme: KeyScheme::Pkcs11,
        }
    }
}

impl std::fmt::Debug for EncryptedKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("EncryptedKey")
            .field("address", &self.address)
            .field("key_version", &self.key_version)
            .field("scheme", &self.scheme)
            .finish_non_exhaustive()
    }
}

/// A short ciphertext under the master key of one version, stored beside the wallet keys: a key that opens it is
/// the database's key. Holds nothing secret.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KeyCheck {
    pub key_version: i32,
    pub ciphertext: Vec<u8>,
    pub nonce: Vec<u8>,
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
    #[error("the wallet key is in a PKCS#11 token, not in the database")]
    InToken,
}

/// Encrypts and decrypts agents' wallet keys under the master key of one key version.
pub struct Vault {
    cipher: Aes256Gcm,
    version: i32,
}

impl std::fmt::Debug for Vault {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Vault(version {}, ..)", self.version)
    }
}

impl Vault {
    /// The vault of `key`, which is (or will be) the database's key of `version`.
    pub fn new(key: &EncryptionKey, version: i32) -> Self {
        Vault {
            cipher: Aes256Gcm::new(key.expose_secret().into()),
            version,
        }
    }

    /// The key version this vault writes and reads.
    pub fn version(&self) -> i32 {
        self.version
    }

    /// Generates a fresh key for an agent and returns its encrypted form.
    pub fn generate(&self, agent_id: Uuid) -> EncryptedKey {
        loop {
            let mut secret = Zeroizing::new([0u8; 32]);
            OsRng.fill_bytes(secret.as_mut());
            // About 1 in 2^128 byte strings is not a valid scalar; draw again in that case.
            if let Ok(signer) = PrivateKeySigner::from_slice(secret.as_ref()) {
                return self.seal(agent_id, signer.address(), secret.as_ref());
            }
        }
    }

    fn seal(&self, agent_id: Uuid, address: Address, secret: &[u8]) -> EncryptedKey {
        let (ciphertext, nonce) = self.encrypt(secret, &associated_data(agent_id));
        EncryptedKey {
            address,
            ciphertext,
            nonce,
            key_version: self.version,
            scheme: KeyScheme::Local,
        }
    }

    fn encrypt(&self, msg: &[u8], aad: &[u8]) -> (Vec<u8>, Vec<u8>) {
        let mut nonce = [0u8; 12];
        OsRng.fill_bytes(&mut nonce);
        let ciphertext = self
            .cipher
            .encrypt(Nonce::from_slice(&nonce), Payload { msg, aad })
            .expect("AES-GCM encryption of a short message cannot fail");
        (ciphertext, nonce.to_vec())
    }

    fn decrypt(&self, ciphertext: &[u8], nonce: &[u8], aad: &[u8]) -> Result<Zeroizing<Vec<u8>>, VaultError> {
        if nonce.len() != 12 {
            return Err(VaultError::Decrypt);
        }
        let payload = Payload { msg: ciphertext, aad };
        let plain = self
            .cipher
            .decrypt(Nonce::from_slice(nonce), payload)
            .map_err(|_| VaultError::Decrypt)?;
        Ok(Zeroizing::new(plain))
    }

    /// Decrypts a key into zeroizing memory. Keep the result only as long as the signing takes.
    pub fn open(&self, agent_id: Uuid, key: &EncryptedKey) -> Result<PrivateKeySigner, VaultError> {
        if key.scheme != KeyScheme::Local {
            return Err(VaultError::InToken);
        }
        if key.key_version != self.version {
            return Err(VaultError::UnknownVersion(key.key_version));
        }
        let plain = self.decrypt(&key.ciphertext, &key.nonce, &associated_data(agent_id))?;
        let signer = PrivateKeySigner::from_slice(&plain).map_err(|_| VaultError::Decrypt)?;
        if signer.address() != key.address {
            return Err(VaultError::Decrypt);
        }
        Ok(signer)
    }

    /// The 32-byte scalar of a local key, in zeroizing memory, after checking that it still derives its address:
    /// for `agentd keys import-to-pkcs11`, which hands it to the token once and drops it.
    pub fn open_secret(&self, agent_id: Uuid, key: &EncryptedKey) -> Result<Zeroizing<Vec<u8>>, VaultError> {
        self.open(agent_id, key)?;
        self.decrypt(&key.ciphertext, &key.nonce, &associated_data(agent_id))
    }

    /// The same wallet key, opened by `from` (the previous master key) and sealed under this vault's key and version.
    pub fn reseal(&self, from: &Vault, agent_id: Uuid, key: &EncryptedKey) -> Result<EncryptedKey, VaultError> {
        // Opening checks the version and that the key still derives its address; then the plaintext moves over.
        from.open(agent_id, key)?;
        let secret = from.decrypt(&key.ciphertext, &key.nonce, &associated_data(agent_id))?;
        Ok(self.seal(agent_id, key.address, &secret))
    }

    /// A new key check for this vault's key and version.
    pub fn key_check(&self) -> KeyCheck {
        let (ciphertext, nonce) = self.encrypt(KEY_CHECK_TEXT, &check_associated_data(self.version));
        KeyCheck {
            key_version: self.version,
            ciphertext,
            nonce,
        }
    }

    /// Whether `check` was written under this vault's key (for the check's version).
    pub fn opens(&self, check: &KeyCheck) -> bool {
        self.decrypt(
            &check.ciphertext,
            &check.nonce,
            &check_associated_data(check.key_version),
        )
        .is_ok_and(|plain| plain.as_slice() == KEY_CHECK_TEXT)
    }
}

/// The audit chain's key as stored: encrypted under the master key of `key_version`, with the entry it applies from
/// inside the ciphertext (so that nobody who lacks the master key can move where the keyed chain starts).
#[derive(Clone, PartialEq, Eq)]
pub struct SealedAuditKey {
    pub key_version: i32,
    pub ciphertext: Vec<u8>,
    pub nonce: Vec<u8>,
}

impl std::fmt::Debug for SealedAuditKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "SealedAuditKey(version {}, ..)", self.key_version)
    }
}

const AUDIT_KEY_AD: &[u8] = b"agentd:audit-key";

impl Vault {
    /// A fresh random audit key for a chain keyed from entry `keyed_from`, sealed under this vault's key.
    pub fn generate_audit_key(&self, keyed_from: i64) -> SealedAuditKey {
        let mut plain = Zeroizing::new([0u8; 40]);
        OsRng.fill_bytes(&mut plain[..32]);
        plain[32..].copy_from_slice(&keyed_from.to_be_bytes());
        let (ciphertext, nonce) = self.encrypt(plain.as_ref(), AUDIT_KEY_AD);
        SealedAuditKey {
            key_version: self.version,
            ciphertext,
            nonce,
        }
    }

    /// The audit key, opened.
    pub fn open_audit_key(&self, sealed: &SealedAuditKey) -> Result<AuditKey, VaultError> {
        if sealed.key_version != self.version {
            return Err(VaultError::UnknownVersion(sealed.key_version));
        }
        let plain = self.decrypt(&sealed.ciphertext, &sealed.nonce, AUDIT_KEY_AD)?;
        if plain.len() != 40 {
            return Err(VaultError::Decrypt);
        }
        let mut key = [0u8; 32];
        key.copy_from_slice(&plain[..32]);
        let keyed_from = i64::from_be_bytes(plain[32..].try_into().map_err(|_| VaultError::Decrypt)?);
        let opened = AuditKey::new(key, keyed_from);
        key.zeroize();
        Ok(opened)
    }

    /// The same audit key, opened by `from` (the previous master key) and sealed under this vault's key and version.
    pub fn reseal_audit_key(&self, from: &Vault, sealed: &SealedAuditKey) -> Result<SealedAuditKey, VaultError> {
        if sealed.key_version != from.version {
            return Err(VaultError::UnknownVersion(sealed.key_version));
        }
        let plain = from.decrypt(&sealed.ciphertext, &sealed.nonce, AUDIT_KEY_AD)?;
        let (ciphertext, nonce) = self.encrypt(&plain, AUDIT_KEY_AD);
        Ok(SealedAuditKey {
            key_version: self.version,
            ciphertext,
            nonce,
        })
    }
}

impl Vault {
    /// Encrypts a waiting payment's request (`plain`), bound to the payment's id.
    pub fn seal_request(&self, payment_id: Uuid, plain: &[u8]) -> SealedRequest {
        let (ciphertext, nonce) = self.encrypt(plain, &request_associated_data(payment_id));
        SealedRequest {
            key_version: self.version,
            nonce: alloy::hex::encode_prefixed(nonce),
            ciphertext: alloy::hex::encode_prefixed(ciphertext),
        }
    }

    /// The request sealed for `payment_id`, decrypted.
    pub fn open_request(&self, payment_id: Uuid, sealed: &SealedRequest) -> Result<Zeroizing<Vec<u8>>, VaultError> {
        if sealed.key_version != self.version {
            return Err(VaultError::UnknownVersion(sealed.key_version));
        }
        let nonce = alloy::hex::decode(&sealed.nonce).map_err(|_| VaultError::Decrypt)?;
        let ciphertext = alloy::hex::decode(&sealed.ciphertext).map_err(|_| VaultError::Decrypt)?;
        self.decrypt(&ciphertext, &nonce, &request_associated_data(payment_id))
    }

    /// The same request, opened by `from` (the previous master key) and sealed under this vault's key and version.
    pub fn reseal_request(
        &self,
        from: &Vault,
        payment_id: Uuid,
        sealed: &SealedRequest,
    ) -> Result<SealedRequest, VaultError> {
        let plain = from.open_request(payment_id, sealed)?;
        Ok(self.seal_request(payment_id, &plain))
    }
}

/// A webhook endpoint's signing secret as stored (§19): encrypted under the master key of `key_version`, bound to
/// the endpoint's id.
#[derive(Clone, PartialEq, Eq)]
pub struct SealedSecret {
    pub key_version: i32,
    pub ciphertext: Vec<u8>,
    pub nonce: Vec<u8>,
}

impl std::fmt::Debug for SealedSecret {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "SealedSecret(version {}, ..)", self.key_version)
    }
}

impl Vault {
    /// Encrypts webhook `id`'s secret bytes.
    pub fn seal_webhook_secret(&self, id: Uuid, secret: &[u8]) -> SealedSecret {
        let (ciphertext, nonce) = self.encrypt(secret, &webhook_associated_data(id));
        SealedSecret {
            key_version: self.version,
            ciphertext,
            nonce,
        }
    }

    /// Webhook `id`'s secret bytes, decrypted.
    pub fn open_webhook_secret(&self, id: Uuid, sealed: &SealedSecret) -> Result<Zeroizing<Vec<u8>>, VaultError> {
        if sealed.key_version != self.version {
            return Err(VaultError::UnknownVersion(sealed.key_version));
        }
        self.decrypt(&sealed.ciphertext, &sealed.nonce, &webhook_associated_data(id))
    }

    /// The same secret, opened by `from` (the previous master key) and sealed under this vault's key and version.
    pub fn reseal_webhook_secret(
        &self,
        from: &Vault,
        id: Uuid,
        sealed: &SealedSecret,
    ) -> Result<SealedSecret, VaultError> {
        let plain = from.open_webhook_secret(id, sealed)?;
        Ok(self.seal_webhook_secret(id, &plain))
    }
}

/// Bytes of the key version at the start of sealed offer headers.
const OFFER_VERSION_LEN: usize = 4;
/// Bytes of the AES-GCM nonce after it.
const OFFER_NONCE_LEN: usize = 12;

impl Vault {
    /// Encrypts offer `id`'s upstream headers (§23, the plain JSON object of names and values) as one stored value:
    /// the key version (4 bytes, big-endian), the 12-byte nonce, then the ciphertext, bound to the offer's id.
    pub fn seal_offer_headers(&self, id: Uuid, plain: &[u8]) -> Vec<u8> {
        let (ciphertext, nonce) = self.encrypt(plain, &offer_associated_data(id));
        let mut sealed = Vec::with_capacity(OFFER_VERSION_LEN + OFFER_NONCE_LEN + ciphertext.len());
        sealed.extend_from_slice(&self.version.to_be_bytes());
        sealed.extend_from_slice(&nonce);
        sealed.extend_from_slice(&ciphertext);
        sealed
    }

    /// Offer `id`'s headers as sealed by `seal_offer_headers`, decrypted.
    pub fn open_offer_headers(&self, id: Uuid, sealed: &[u8]) -> Result<Zeroizing<Vec<u8>>, VaultError> {
        if sealed.len() < OFFER_VERSION_LEN + OFFER_NONCE_LEN {
            return Err(VaultError::Decrypt);
        }
        let (version, rest) = sealed.split_at(OFFER_VERSION_LEN);
        let version = i32::from_be_bytes(version.try_into().map_err(|_| VaultError::Decrypt)?);
        if version != self.version {
            return Err(VaultError::UnknownVersion(version));
        }
        let (nonce, ciphertext) = rest.split_at(OFFER_NONCE_LEN);
        self.decrypt(ciphertext, nonce, &offer_associated_data(id))
    }

    /// The same headers, opened by `from` (the previous master key) and sealed under this vault's key and version.
    pub fn reseal_offer_headers(&self, from: &Vault, id: Uuid, sealed: &[u8]) -> Result<Vec<u8>, VaultError> {
        let plain = from.open_offer_headers(id, sealed)?;
        Ok(self.seal_offer_headers(id, &plain))
    }
}

fn offer_associated_data(id: Uuid) -> Vec<u8> {
    format!("agentd:offer-headers:{id}").into_bytes()
}

fn webhook_associated_data(id: Uuid) -> Vec<u8> {
    format!("agentd:webhook-secret:{id}").into_bytes()
}

fn request_associated_data(payment_id: Uuid) -> Vec<u8> {
    format!("agentd:x402-request:{payment_id}").into_bytes()
}

fn check_associated_data(version: i32) -> Vec<u8> {
    format!("agentd:key-check:{version}").into_bytes()
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
        Vault::new(&SecretBox::new(Box::new([byte; 32])), FIRST_KEY_VERSION)
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
    fn a_sealed_request_opens_only_for_its_payment_and_key_and_moves_to_the_next_key() {
        let v = vault(7);
        let payment = Uuid::new_v4();
        let plain = br#"{"url":"https://api.example/data?api_key=secret"}"#;
        let sealed = v.seal_request(payment, plain);
        assert!(!sealed.ciphertext.contains("secret") && !format!("{sealed:?}").contains(&sealed.ciphertext));
        assert_eq!(v.open_request(payment, &sealed).unwrap().as_slice(), plain);
        assert!(v.open_request(Uuid::new_v4(), &sealed).is_err());
        assert!(vault(8).open_request(payment, &sealed).is_err());
        let next = Vault::new(&SecretBox::new(Box::new([9; 32])), FIRST_KEY_VERSION + 1);
        let moved = next.reseal_request(&v, payment, &sealed).unwrap();
        assert_eq!(moved.key_version, FIRST_KEY_VERSION + 1);
        assert_eq!(next.open_request(payment, &moved).unwrap().as_slice(), plain);
    }

    #[test]
    fn sealed_offer_headers_open_only_for_their_offer_and_key_and_move_to_the_next_key() {
        let v = vault(7);
        let offer = Uuid::new_v4();
        let plain = br#"{"x-api-key":"upstream-secret"}"#;
        let sealed = v.seal_offer_headers(offer, plain);
        assert!(!sealed.windows(15).any(|w| w == b"upstream-secret"));
        assert_eq!(v.open_offer_headers(offer, &sealed).unwrap().as_slice(), plain);
        assert!(v.open_offer_headers(Uuid::new_v4(), &sealed).is_err());
        assert!(vault(8).open_offer_headers(offer, &sealed).is_err());
        assert!(v.open_offer_headers(offer, &sealed[..10]).is_err());
        let next = Vault::new(&SecretBox::new(Box::new([9; 32])), FIRST_KEY_VERSION + 1);
        let moved = next.reseal_offer_headers(&v, offer, &sealed).unwrap();
        assert!(matches!(
            v.open_offer_headers(offer, &moved),
            Err(VaultError::UnknownVersion(_))
        ));
        assert_eq!(next.open_offer_headers(offer, &moved).unwrap().as_slice(), plain);
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

    #[test]
    fn a_key_check_opens_only_under_its_key_and_version() {
        let check = vault(3).key_check();
        assert!(vault(3).opens(&check));
        assert!(!vault(4).opens(&check));
        let mut relabelled = check.clone();
        relabelled.key_version += 1;
        assert!(!vault(3).opens(&relabelled), "the version is bound to the ciphertext");
    }

    #[test]
    fn a_resealed_key_opens_under_the_new_key_and_version_only() {
        let (old, new) = (vault(5), Vault::new(&SecretBox::new(Box::new([6; 32])), 2));
        let agent = Uuid::new_v4();
        let key = old.generate(agent);
        let resealed = new.reseal(&old, agent, &key).unwrap();
        assert_eq!(resealed.key_version, 2);
        assert_eq!(new.open(agent, &resealed).unwrap().address(), key.address);
        assert!(old.open(agent, &resealed).is_err());
        assert!(
            new.reseal(&new, agent, &key).is_err(),
            "a key not under `from` is refused"
        );
    }
}
