//! Keys in a PKCS#11 token (§20), on `cryptoki`: a secp256k1 key pair generated inside the token for each new
//! agent (the private key sensitive and never extractable, both objects labelled with the agent id and carrying its
//! 16 bytes as `CKA_ID`), signatures by `CKM_ECDSA` over the 32-byte digest (r‖s; the service makes `s` low and finds
//! the recovery id from the known address). Sessions are pooled: one is taken per call and given back, a session
//! that failed is dropped (the next call opens a new one and logs in again).
//!
//! A module is loaded and initialised once per process (`C_Initialize` is process-wide). When the token fails (a
//! session lost, a device gone, a key object no longer found), the next call re-initialises the module
//! (`C_Finalize`, `C_Initialize`), finds the token by its label again and logs in: a token that comes back is used
//! again without a restart, and until it does every signature is refused as unavailable (503).

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, OnceLock, PoisonError, RwLock};

use alloy::primitives::{Address, B256, Signature};
use cryptoki::context::{CInitializeArgs, CInitializeFlags, Pkcs11};
use cryptoki::error::{Error as CkError, RvError};
use cryptoki::mechanism::Mechanism;
use cryptoki::object::{Attribute, AttributeType, KeyType, ObjectClass, ObjectHandle};
use cryptoki::session::{Session, UserType};
use cryptoki::slot::Slot;
use secrecy::SecretString;
use uuid::Uuid;

use super::{SignerError, WalletSigner, recoverable};

/// The DER encoding of the secp256k1 curve's OID (1.3.132.0.10), as `CKA_EC_PARAMS` names it.
pub const SECP256K1_OID: [u8; 7] = [0x06, 0x05, 0x2b, 0x81, 0x04, 0x00, 0x0a];

pub use crate::config::Pkcs11Config;

/// Why the token cannot be used at start: the server refuses to start (§20). Names no PIN.
#[derive(Debug, thiserror::Error)]
pub enum TokenError {
    #[error("PKCS11_MODULE {module} cannot be loaded: {reason}")]
    Module { module: String, reason: String },
    #[error("no PKCS#11 token labelled {0:?} (PKCS11_TOKEN_LABEL) in any slot of the module")]
    NoToken(String),
    #[error("PKCS11_PIN is not the user PIN of token {0:?}")]
    WrongPin(String),
    #[error("the user PIN of token {0:?} is locked")]
    PinLocked(String),
    #[error("the key object of active agent {agent_id} ({address}) is missing from token {label:?}")]
    KeyMissing {
        agent_id: Uuid,
        address: Address,
        label: String,
    },
    #[error("PKCS#11 token {label:?}: {reason}")]
    Token { label: String, reason: String },
}

/// The process's loaded modules, by path: initialised once, kept for the process's life.
fn context(module: &Path) -> Result<Pkcs11, TokenError> {
    static CONTEXTS: OnceLock<Mutex<HashMap<PathBuf, Pkcs11>>> = OnceLock::new();
    let mut contexts = CONTEXTS
        .get_or_init(Default::default)
        .lock()
        .unwrap_or_else(PoisonError::into_inner);
    if let Some(ctx) = contexts.get(module) {
        return Ok(ctx.clone());
    }
    let failed = |reason: String| TokenError::Module {
        module: module.display().to_string(),
        reason,
    };
    let ctx = Pkcs11::new(module).map_err(|e| failed(e.to_string()))?;
    initialize(&ctx).map_err(|e| failed(short(&e)))?;
    contexts.insert(module.to_path_buf(), ctx.clone());
    Ok(ctx)
}

fn initialize(ctx: &Pkcs11) -> Result<(), CkError> {
    match ctx.initialize(CInitializeArgs::new(CInitializeFlags::OS_LOCKING_OK)) {
        Ok(()) | Err(CkError::Pkcs11(RvError::CryptokiAlreadyInitialized, _)) => Ok(()),
        Err(e) => Err(e),
    }
}

/// The slot whose token has `label`.
fn find_slot(ctx: &Pkcs11, label: &str) -> Result<Option<Slot>, CkError> {
    for slot in ctx.get_slots_with_token()? {
        if ctx.get_token_info(slot)?.label().trim_end() == label {
            return Ok(Some(slot));
        }
    }
    Ok(None)
}

/// Runs `f`, which blocks on the token, so that the async runtime's other tasks go on meanwhile (a network HSM
/// answers in tens of milliseconds): on a worker of a multi-threaded runtime, the worker's other tasks move.
fn blocking<T>(f: impl FnOnce() -> T) -> T {
    use tokio::runtime::{Handle, RuntimeFlavor};
    match Handle::try_current().map(|handle| handle.runtime_flavor()) {
        Ok(RuntimeFlavor::MultiThread) => tokio::task::block_in_place(f),
        _ => f(),
    }
}

/// A cryptoki error in a line: the return value's name and the function, not the spec's paragraph.
fn short(e: &CkError) -> String {
    match e {
        CkError::Pkcs11(rv, function) => format!("{rv:?} in {function:?}"),
        other => other.to_string(),
    }
}

/// A token the service signs with, logged in with the user PIN.
pub struct Token {
    ctx: Pkcs11,
    /// The token's slot. Every call holds it for reading; `reopen` writes it, once the calls in flight are done.
    slot: RwLock<Slot>,
    /// The token failed: the next call re-initialises the module and finds the token again first.
    failed: AtomicBool,
    label: String,
    pin: SecretString,
    /// Sessions not in use. A `Session` is `Send` but not `Sync`: each is used by one call at a time.
    sessions: Mutex<Vec<Session>>,
    /// Private key handles found, by agent (valid for the process's application; cleared with a failed session).
    handles: Mutex<HashMap<Uuid, ObjectHandle>>,
}

impl std::fmt::Debug for Token {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Token({:?})", self.label)
    }
}

impl Token {
    /// Loads the module, finds the token by label and logs in: any failure refuses the start.
    pub fn open(config: &Pkcs11Config) -> Result<Token, TokenError> {
        let ctx = context(&config.module)?;
        let label = config.token_label.clone();
        let token_error = |e: CkError| TokenError::Token {
            label: label.clone(),
            reason: short(&e),
        };
        let slot = find_slot(&ctx, &label)
            .map_err(token_error)?
            .ok_or_else(|| TokenError::NoToken(label.clone()))?;
        let token = Token {
            ctx,
            slot: RwLock::new(slot),
            failed: AtomicBool::new(false),
            label: label.clone(),
            pin: config.pin.clone(),
            sessions: Mutex::default(),
            handles: Mutex::default(),
        };
        let session = token.ctx.open_rw_session(slot).map_err(token_error)?;
        match session.login(UserType::User, Some(&token.pin)) {
            Ok(()) | Err(CkError::Pkcs11(RvError::UserAlreadyLoggedIn, _)) => {}
            Err(CkError::Pkcs11(RvError::PinIncorrect | RvError::PinLenRange | RvError::PinInvalid, _)) => {
                return Err(TokenError::WrongPin(label));
            }
            Err(CkError::Pkcs11(RvError::PinLocked, _)) => return Err(TokenError::PinLocked(label)),
            Err(e) => return Err(token_error(e)),
        }
        token.give_back(session);
        Ok(token)
    }

    /// The token's label.
    pub fn label(&self) -> &str {
        &self.label
    }

    /// Runs `f` on a pooled session (a new one, logged in, when none is free), after re-opening the token if it
    /// failed. A failed call drops the handles found so far, and its session when the session (or the token) is
    /// what failed; the token is then re-opened by the next call.
    fn with_session<T>(&self, f: impl FnOnce(&Session) -> Result<T, CkError>) -> Result<T, SignerError> {
        if self.failed.load(Ordering::Acquire) {
            self.reopen()?;
        }
        let slot = self.slot.read().unwrap_or_else(PoisonError::into_inner);
        let pooled = self.sessions.lock().unwrap_or_else(PoisonError::into_inner).pop();
        let session = match pooled {
            Some(session) => session,
            None => self.new_session(*slot).map_err(|e| self.failure(&e))?,
        };
        match f(&session) {
            Ok(value) => {
                self.give_back(session);
                Ok(value)
            }
            Err(e) => {
                // Whatever failed, the next call opens the token afresh (a stale object handle is as much a sign of
                // a token that went away and came back as a lost session); the session is kept for the pool unless
                // it is what failed.
                if !session_lost(&e) {
                    self.give_back(session);
                }
                Err(self.failure(&e))
            }
        }
    }

    /// Marks the token failed: the next call re-opens it.
    fn mark_failed(&self) {
        self.failed.store(true, Ordering::Release);
    }

    fn failure(&self, e: &CkError) -> SignerError {
        self.mark_failed();
        self.unavailable(e)
    }

    /// Re-initialises the module, finds the token by its label (its slot may have changed) and logs in, once every
    /// call in flight is done. The pooled sessions are closed first. Unavailable while the token is not back.
    fn reopen(&self) -> Result<(), SignerError> {
        let mut slot = self.slot.write().unwrap_or_else(PoisonError::into_inner);
        if !self.failed.load(Ordering::Acquire) {
            return Ok(()); // another call re-opened it meanwhile
        }
        self.sessions.lock().unwrap_or_else(PoisonError::into_inner).clear();
        self.handles.lock().unwrap_or_else(PoisonError::into_inner).clear();
        if let Err(e) = self.ctx.clone().finalize() {
            tracing::warn!(token = %self.label, error = %short(&e), "C_Finalize failed; initialising again anyway");
        }
        initialize(&self.ctx).map_err(|e| self.unavailable(&e))?;
        *slot = find_slot(&self.ctx, &self.label)
            .map_err(|e| self.unavailable(&e))?
            .ok_or_else(|| SignerError::Unavailable(format!("no PKCS#11 token labelled {:?} now", self.label)))?;
        let session = self.new_session(*slot).map_err(|e| self.unavailable(&e))?;
        self.give_back(session);
        self.failed.store(false, Ordering::Release);
        tracing::info!(token = %self.label, "the PKCS#11 token was opened again");
        Ok(())
    }

    fn new_session(&self, slot: Slot) -> Result<Session, CkError> {
        let session = self.ctx.open_rw_session(slot)?;
        match session.login(UserType::User, Some(&self.pin)) {
            Ok(()) | Err(CkError::Pkcs11(RvError::UserAlreadyLoggedIn, _)) => Ok(session),
            Err(e) => Err(e),
        }
    }

    fn give_back(&self, session: Session) {
        let mut sessions = self.sessions.lock().unwrap_or_else(PoisonError::into_inner);
        if sessions.len() < 16 {
            sessions.push(session);
        }
    }

    fn unavailable(&self, e: &CkError) -> SignerError {
        tracing::error!(token = %self.label, error = %short(e), "the PKCS#11 token failed");
        SignerError::Unavailable(format!("PKCS#11 token {:?}: {}", self.label, short(e)))
    }

    /// Generates agent `agent_id`'s key pair in the token and returns its address. Blocking.
    pub fn generate(&self, agent_id: Uuid) -> Result<Address, SignerError> {
        let id = agent_id.as_bytes().to_vec();
        let label = agent_id.to_string().into_bytes();
        let public = [
            Attribute::Token(true),
            Attribute::Private(false),
            Attribute::Verify(true),
            Attribute::EcParams(SECP256K1_OID.to_vec()),
            Attribute::Label(label.clone()),
            Attribute::Id(id.clone()),
        ];
        let private = [
            Attribute::Token(true),
            Attribute::Private(true),
            Attribute::Sensitive(true),
            Attribute::Extractable(false),
            Attribute::Sign(true),
            Attribute::Label(label),
            Attribute::Id(id),
        ];
        let point = self.with_session(|session| {
            let (public, private) = session.generate_key_pair(&Mechanism::EccKeyPairGen, &public, &private)?;
            let point = ec_point(session, public)?;
            self.handles
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .insert(agent_id, private);
            Ok(point)
        })?;
        address_of_point(&point)
            .ok_or_else(|| SignerError::Key("the token's public key is not an uncompressed secp256k1 point".into()))
    }

    /// The address of agent `agent_id`'s key pair in the token: `None` when its private key or public key object is
    /// missing. Blocking.
    pub fn key_address(&self, agent_id: Uuid) -> Result<Option<Address>, SignerError> {
        let point = self.with_session(|session| {
            if find(session, ObjectClass::PRIVATE_KEY, agent_id)?.is_none() {
                return Ok(None);
            }
            match find(session, ObjectClass::PUBLIC_KEY, agent_id)? {
                Some(public) => ec_point(session, public).map(Some),
                None => Ok(None),
            }
        })?;
        Ok(point.as_deref().and_then(address_of_point))
    }

    /// Signs `hash` with agent `agent_id`'s key: `CKM_ECDSA` over the digest, made low-s and recoverable to
    /// `address`. Blocking.
    /// A token that fails is opened afresh and asked once more within the same call, so that a session or a
    /// connection lost since the last signature costs no refusal.
    pub fn sign(&self, agent_id: Uuid, address: Address, hash: &B256) -> Result<Signature, SignerError> {
        match self.sign_once(agent_id, address, hash) {
            Err(SignerError::Unavailable(_)) => self.sign_once(agent_id, address, hash),
            done => done,
        }
    }

    fn sign_once(&self, agent_id: Uuid, address: Address, hash: &B256) -> Result<Signature, SignerError> {
        let signed = self.with_session(|session| {
            // Read here, after any re-opening (which forgets the handles found before it).
            let cached = self
                .handles
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .get(&agent_id)
                .copied();
            let key = match cached {
                Some(key) => Some(key),
                None => find(session, ObjectClass::PRIVATE_KEY, agent_id)?,
            };
            let Some(key) = key else { return Ok(None) };
            let signature = session.sign(&Mechanism::Ecdsa, key, hash.as_slice())?;
            Ok(Some((key, signature)))
        })?;
        // The start found every active agent's object: one missing now is the token's failure (503), not the key's;
        // the next call opens the token afresh.
        let Some((key, signature)) = signed else {
            self.mark_failed();
            return Err(SignerError::Unavailable(format!(
                "agent {agent_id}'s key object is missing from token {:?}",
                self.label
            )));
        };
        if signature.len() != 64 {
            return Err(SignerError::Key(format!(
                "the token answered a {}-byte ECDSA signature (64 expected)",
                signature.len()
            )));
        }
        let made = recoverable(hash, &signature[..32], &signature[32..], address)?;
        self.handles
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .insert(agent_id, key);
        Ok(made)
    }

    /// Puts agent `agent_id`'s existing key (`secret`, its 32-byte scalar) into the token as the objects `generate`
    /// makes: a private key object, sensitive and never extractable, and its public key object, both labelled with
    /// the agent id and carrying its 16 bytes as `CKA_ID`. An object already there (a run that stopped half-way) is
    /// kept, not made twice. Then checks that the pair is `address`'s and signs a test digest with it: only an `Ok`
    /// means the key can leave the database. Blocking; `secret` is not kept (the copy handed to the module is
    /// zeroized).
    pub fn import(&self, agent_id: Uuid, secret: &[u8], address: Address) -> Result<Imported, SignerError> {
        use zeroize::Zeroize;
        let signer = alloy::signers::local::PrivateKeySigner::from_slice(secret)
            .map_err(|_| SignerError::Key("the stored key is not a secp256k1 scalar".into()))?;
        if signer.address() != address {
            return Err(SignerError::Key(
                "the stored key is not the key of the agent's address".into(),
            ));
        }
        let uncompressed = signer.credential().verifying_key().to_encoded_point(false);
        // CKA_EC_POINT is the DER OCTET STRING of the uncompressed point.
        let mut point = vec![0x04, 0x41];
        point.extend_from_slice(uncompressed.as_bytes());
        drop(signer);
        let id = agent_id.as_bytes().to_vec();
        let label = agent_id.to_string().into_bytes();
        let public = [
            Attribute::Class(ObjectClass::PUBLIC_KEY),
            Attribute::KeyType(KeyType::EC),
            Attribute::Token(true),
            Attribute::Private(false),
            Attribute::Verify(true),
            Attribute::EcParams(SECP256K1_OID.to_vec()),
            Attribute::EcPoint(point),
            Attribute::Label(label.clone()),
            Attribute::Id(id.clone()),
        ];
        let mut private = [
            Attribute::Class(ObjectClass::PRIVATE_KEY),
            Attribute::KeyType(KeyType::EC),
            Attribute::Token(true),
            Attribute::Private(true),
            Attribute::Sensitive(true),
            Attribute::Extractable(false),
            Attribute::Sign(true),
            Attribute::EcParams(SECP256K1_OID.to_vec()),
            Attribute::Value(secret.to_vec()),
            Attribute::Label(label),
            Attribute::Id(id),
        ];
        let created = self.with_session(|session| {
            let mut created = false;
            if find(session, ObjectClass::PRIVATE_KEY, agent_id)?.is_none() {
                session.create_object(&private)?;
                created = true;
            }
            if find(session, ObjectClass::PUBLIC_KEY, agent_id)?.is_none() {
                session.create_object(&public)?;
                created = true;
            }
            Ok(created)
        });
        for attribute in &mut private {
            if let Attribute::Value(value) = attribute {
                value.zeroize();
            }
        }
        let created = created?;
        if self.key_address(agent_id)? != Some(address) {
            return Err(SignerError::Key(format!(
                "the key object in token {:?} labelled {agent_id} is not the key of {address}",
                self.label
            )));
        }
        let digest = alloy::primitives::keccak256(format!("agentd import-to-pkcs11 check {agent_id}"));
        let signature = self.sign(agent_id, address, &digest)?;
        if signature.recover_address_from_prehash(&digest).ok() != Some(address) {
            return Err(SignerError::Key(format!(
                "the token's signature with agent {agent_id}'s key does not recover {address}"
            )));
        }
        Ok(if created {
            Imported::Created
        } else {
            Imported::AlreadyThere
        })
    }

    /// Agent `agent_id`'s signer; the token is asked nothing until it signs.
    pub fn signer(self: &Arc<Self>, agent_id: Uuid, address: Address) -> TokenSigner {
        TokenSigner {
            token: self.clone(),
            agent_id,
            address,
        }
    }

    /// Refuses the start when an active agent's key object is missing or is not the key of its address (§20).
    pub fn check_keys(&self, keys: &[(Uuid, Address)]) -> Result<(), TokenError> {
        for &(agent_id, address) in keys {
            let found = self.key_address(agent_id).map_err(|e| TokenError::Token {
                label: self.label.clone(),
                reason: e.to_string(),
            })?;
            if found != Some(address) {
                return Err(TokenError::KeyMissing {
                    agent_id,
                    address,
                    label: self.label.clone(),
                });
            }
        }
        Ok(())
    }
}

/// What `Token::import` found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Imported {
    /// The key's objects were made in the token now.
    Created,
    /// The token held them already (from an earlier run); they are the key of the address and sign.
    AlreadyThere,
}

/// Whether `e` means the session (or the token behind it) is gone, so that it must not be used again.
fn session_lost(e: &CkError) -> bool {
    !matches!(
        e,
        CkError::Pkcs11(
            RvError::ObjectHandleInvalid
                | RvError::KeyHandleInvalid
                | RvError::FunctionFailed
                | RvError::GeneralError
                | RvError::OperationActive
                | RvError::DataLenRange
                | RvError::DataInvalid,
            _
        )
    )
}

/// The one object of `class` whose `CKA_ID` is the agent id.
fn find(session: &Session, class: ObjectClass, agent_id: Uuid) -> Result<Option<ObjectHandle>, CkError> {
    let template = [
        Attribute::Class(class),
        Attribute::KeyType(KeyType::EC),
        Attribute::Id(agent_id.as_bytes().to_vec()),
    ];
    Ok(session.find_objects(&template)?.into_iter().next())
}

fn ec_point(session: &Session, public: ObjectHandle) -> Result<Vec<u8>, CkError> {
    let attributes = session.get_attributes(public, &[AttributeType::EcPoint])?;
    Ok(attributes
        .into_iter()
        .find_map(|a| match a {
            Attribute::EcPoint(point) => Some(point),
            _ => None,
        })
        .unwrap_or_default())
}

/// The address of a `CKA_EC_POINT`: an uncompressed point, DER-wrapped in an OCTET STRING (as the standard says)
/// or bare (as some modules answer).
pub fn address_of_point(point: &[u8]) -> Option<Address> {
    let raw = match point {
        [0x04, 0x41, rest @ ..] if rest.len() == 65 => rest,
        _ if point.len() == 65 => point,
        _ => return None,
    };
    (raw[0] == 0x04).then(|| Address::from_raw_public_key(&raw[1..]))
}

/// One agent's key in the token.
pub struct TokenSigner {
    token: Arc<Token>,
    agent_id: Uuid,
    address: Address,
}

impl WalletSigner for TokenSigner {
    fn address(&self) -> Address {
        self.address
    }

    fn sign_hash(&self, hash: &B256) -> Result<Signature, SignerError> {
        blocking(|| self.token.sign(self.agent_id, self.address, hash))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_ec_point_is_read_wrapped_or_bare() {
        let key = alloy::signers::local::PrivateKeySigner::random();
        let point = key.credential().verifying_key().to_encoded_point(false);
        let bare = point.as_bytes().to_vec();
        let mut wrapped = vec![0x04, 0x41];
        wrapped.extend_from_slice(&bare);
        assert_eq!(address_of_point(&bare), Some(key.address()));
        assert_eq!(address_of_point(&wrapped), Some(key.address()));
        assert_eq!(address_of_point(&bare[..33]), None);
    }
}
