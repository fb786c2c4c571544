//! The master key and the database agree: the key check at start (a key the wallet keys were not written under is
//! refused, so a database never ends up split across two keys) and `agentd rotate-key`, which moves every wallet key
//! to a new master key in one transaction.

use secrecy::ExposeSecret;
use subtle::ConstantTimeEq;

use crate::config::EncryptionKey;
use crate::domain::audit::AuditKey;
use crate::domain::transaction::SealedRequest;
use crate::store::{Resealers, Store, StoreError};
use crate::vault::{EncryptedKey, FIRST_KEY_VERSION, KeyCheck, SealedAuditKey, SealedSecret, Vault};

/// Why the key was refused or the rotation did not happen. Never carries key material.
#[derive(Debug, thiserror::Error)]
pub enum CustodyError {
    #[error(
        "ENCRYPTION_KEY is not the key this database's wallet keys were written with; start with that key \
         (after `agentd rotate-key`, the new one)"
    )]
    WrongKey,
    #[error("the new key is the current key: nothing to rotate")]
    SameKey,
    #[error("the database's key check changed while rotating (another rotate-key?): nothing was changed; run it again")]
    Changed,
    #[error("the audit key does not open under ENCRYPTION_KEY: the audit_key row was altered")]
    AuditKey,
    #[error(transparent)]
    Store(#[from] StoreError),
}

/// What `rotate_key` did.
#[derive(Debug, PartialEq, Eq)]
pub enum Rotation {
    /// Every wallet key (`keys` of them) is now under the new key, as `key_version`.
    Rotated { keys: usize, key_version: i32 },
    /// The database was already under the new key (a run after a completed rotation): nothing to do.
    AlreadyDone { key_version: i32 },
}

/// The vault of `key` if it is the database's key. A database without a key check gets one: written under `key`
/// when the database holds no wallet key yet, or once a stored wallet key opens under `key` (databases written
/// before the check existed).
pub async fn open_vault(store: &dyn Store, key: &EncryptionKey) -> Result<Vault, CustodyError> {
    Ok(verified(store, key).await?.0)
}

async fn verified(store: &dyn Store, key: &EncryptionKey) -> Result<(Vault, KeyCheck), CustodyError> {
    if let Some(check) = store.key_check().await? {
        return opened(key, check);
    }
    let version = match store.any_wallet_key().await? {
        Some((agent_id, wallet_key)) => {
            let vault = Vault::new(key, wallet_key.key_version);
            vault.open(agent_id, &wallet_key).map_err(|_| CustodyError::WrongKey)?;
            tracing::info!(
                key_version = wallet_key.key_version,
                "a stored wallet key vouched for ENCRYPTION_KEY"
            );
            wallet_key.key_version
        }
        None => FIRST_KEY_VERSION,
    };
    // Another instance starting at the same moment may have stored its check first: this key must open that one.
    let stored = store.init_key_check(&Vault::new(key, version).key_check()).await?;
    opened(key, stored)
}

fn opened(key: &EncryptionKey, check: KeyCheck) -> Result<(Vault, KeyCheck), CustodyError> {
    let vault = Vault::new(key, check.key_version);
    if vault.opens(&check) {
        Ok((vault, check))
    } else {
        Err(CustodyError::WrongKey)
    }
}

/// Re-encrypts every wallet key from `old` (the database's key) to `new` under the next key version, in one
/// transaction with the key check, so that afterwards only `new` starts the service. Safe to run again: a crash
/// leaves everything under `old` (run it again), a completed rotation answers `AlreadyDone`.
pub async fn rotate_key(store: &dyn Store, old: &EncryptionKey, new: &EncryptionKey) -> Result<Rotation, CustodyError> {
    if bool::from(old.expose_secret().ct_eq(new.expose_secret())) {
        return Err(CustodyError::SameKey);
    }
    if let Some(check) = store.key_check().await?
        && Vault::new(new, check.key_version).opens(&check)
    {
        return Ok(Rotation::AlreadyDone {
            key_version: check.key_version,
        });
    }
    let (old_vault, from) = verified(store, old).await?;
    let new_vault = Vault::new(new, from.key_version + 1);
    let to = new_vault.key_check();
    let reseal = |agent_id, key: &EncryptedKey| {
        new_vault
            .reseal(&old_vault, agent_id, key)
            .map_err(|e| format!("agent {agent_id}: {e}"))
    };
    let reseal_audit = |sealed: &SealedAuditKey| {
        new_vault
            .reseal_audit_key(&old_vault, sealed)
            .map_err(|e| format!("the audit key: {e}"))
    };
    let reseal_request = |payment_id, sealed: &SealedRequest| {
        new_vault
            .reseal_request(&old_vault, payment_id, sealed)
            .map_err(|e| format!("the request of waiting payment {payment_id}: {e}"))
    };
    let reseal_webhook = |webhook_id, sealed: &SealedSecret| {
        new_vault
            .reseal_webhook_secret(&old_vault, webhook_id, sealed)
            .map_err(|e| format!("the secret of webhook {webhook_id}: {e}"))
    };
    let reseal_offer = |offer_id, sealed: &[u8]| {
        new_vault
            .reseal_offer_headers(&old_vault, offer_id, sealed)
            .map_err(|e| format!("the headers of offer {offer_id}: {e}"))
    };
    let resealers = Resealers {
        wallet: &reseal,
        audit: &reseal_audit,
        request: &reseal_request,
        webhook: &reseal_webhook,
        offer: &reseal_offer,
    };
    match store.rotate_keys(&from, &to, &resealers).await? {
        Some(keys) => Ok(Rotation::Rotated {
            keys,
            key_version: to.key_version,
        }),
        None => Err(CustodyError::Changed),
    }
}

/// The audit chain's key, opened with `vault`; made first when the database has none and `create` is set (a
/// service's start; `agentd audit verify` only reads).
pub async fn open_audit_key(store: &dyn Store, vault: &Vault, create: bool) -> Result<Option<AuditKey>, CustodyError> {
    let sealed = match store.audit_key().await? {
        Some(sealed) => sealed,
        None if create => {
            store
                .create_audit_key(&|keyed_from| vault.generate_audit_key(keyed_from))
                .await?
        }
        None => return Ok(None),
    };
    vault
        .open_audit_key(&sealed)
        .map(Some)
        .map_err(|_| CustodyError::AuditKey)
}

/// What `agentd keys import-to-pkcs11` did with one agent's key. Names no key material.
#[derive(Debug)]
pub struct KeyImport {
    pub agent_id: uuid::Uuid,
    pub address: alloy::primitives::Address,
    /// `Ok(true)`: the key's objects were made in the token now; `Ok(false)`: they were there from an earlier run.
    /// Either way the database no longer holds the key. `Err`: the key stays in the database, nothing was removed.
    pub outcome: Result<bool, String>,
}

/// `agentd keys import-to-pkcs11` (§20): every wallet key still in the database goes into the token, one agent at a
/// time. A key's ciphertext is removed only once its objects are in the token, are the key of its address and sign;
/// a failure leaves that key where it was and the others go on. Running it again finishes what a stopped run left.
pub async fn import_to_pkcs11(
    store: &dyn Store,
    vault: &Vault,
    token: &crate::signer::Token,
) -> Result<Vec<KeyImport>, CustodyError> {
    let keys = store.local_keys().await?;
    let mut done = Vec::with_capacity(keys.len());
    for (agent_id, key) in keys {
        let outcome = import_one(store, vault, token, agent_id, &key).await;
        done.push(KeyImport {
            agent_id,
            address: key.address,
            outcome,
        });
    }
    Ok(done)
}

async fn import_one(
    store: &dyn Store,
    vault: &Vault,
    token: &crate::signer::Token,
    agent_id: uuid::Uuid,
    key: &EncryptedKey,
) -> Result<bool, String> {
    let imported = {
        // The scalar lives only in this block (zeroized on drop).
        let secret = vault.open_secret(agent_id, key).map_err(|e| e.to_string())?;
        token
            .import(agent_id, &secret, key.address)
            .map_err(|e| e.to_string())?
    };
    if !store
        .move_key_to_token(agent_id, key.address)
        .await
        .map_err(|e| e.to_string())?
    {
        return Err("the key's row changed while it was imported; run the import again".into());
    }
    Ok(imported == crate::signer::Imported::Created)
}
