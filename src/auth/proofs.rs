//! Proofs of ownership (docs/api.md §4 and §10): a token reissued against the current token or an EIP-191 wallet
//! signature of a reissue challenge, and an owner session opened by a signed Sign-In with Ethereum challenge. A
//! failing proof leaves its challenge unused; a holding one uses it up in the same store step that swaps the token
//! or stores the session.

use alloy::primitives::{Address, Signature};
use chrono::{TimeZone, Utc};

use super::{Actor, Authenticator};
use crate::domain::agent::Agent;
use crate::domain::audit::Detail;
use crate::domain::audit::detail::{OwnerSessionOpened, Proof, TokenReissued};
use crate::domain::chain as registry;
use crate::domain::siwe::{self, SiweMessage};
use crate::domain::{challenge, token};
use crate::store::{AuditEvent, OwnerSessionRecord, ReissueProof, StoreError};

/// Why a proof of ownership is refused. Each maps to one API error.
#[derive(Debug, thiserror::Error)]
pub enum ProofError {
    /// The proof does not hold (wrong signer, unknown or used challenge, another agent's): `invalid_proof`.
    #[error("the proof does not hold")]
    Invalid,
    #[error("the challenge expired")]
    ChallengeExpired,
    /// The signed message is not of a challenge's shape; says which.
    #[error("{0}")]
    MalformedChallenge(String),
    /// The wallet-signature proof names a chain the registry does not know.
    #[error("unknown chain")]
    UnknownChain,
    #[error("storage error: {0}")]
    Store(#[from] StoreError),
}

/// A reissue proof, as the request gave it.
#[derive(Debug, Clone, Copy)]
pub enum ReissueWith<'a> {
    CurrentToken {
        token: &'a str,
    },
    WalletSignature {
        chain: &'a str,
        message: &'a str,
        signature: &'a str,
        public_key: Option<&'a str>,
    },
}

/// Who proved a reissue: the agent (its token or its wallet) or an owner wallet; the wallet's chain and address.
#[derive(Debug, Clone)]
pub struct Reissued {
    pub actor: Actor,
    pub signer: Option<(String, Address)>,
}

impl Authenticator {
    /// Checks `proof` for `agent` and, when it holds, makes `new_hash` the agent's token (the previous one dies);
    /// a challenge is used up in the same step, and the `token_reissued` audit entry (naming the proof and
    /// `client`, the caller's address) is written in that transaction too. `challenge_prefix` is the deployment's
    /// (`CHALLENGE_PREFIX`).
    pub async fn reissue(
        &self,
        agent: &Agent,
        proof: ReissueWith<'_>,
        new_hash: &str,
        challenge_prefix: &str,
        client: String,
    ) -> Result<Reissued, ProofError> {
        let (hash, nonce, reissued);
        let stored_proof = match proof {
            ReissueWith::CurrentToken { token } => {
                hash = token::hash(token);
                reissued = Reissued {
                    actor: Actor::Agent,
                    signer: None,
                };
                ReissueProof::CurrentToken { token_hash: &hash }
            }
            ReissueWith::WalletSignature {
                chain,
                message,
                signature,
                public_key,
            } => {
                let signer;
                (nonce, signer) = self
                    .verify_wallet_proof(agent, chain, message, signature, public_key, challenge_prefix)
                    .await?;
                let actor = if agent.wallet_addresses.get(chain) == Some(&signer) {
                    Actor::Agent
                } else {
                    Actor::Owner
                };
                reissued = Reissued {
                    actor,
                    signer: Some((chain.to_string(), signer)),
                };
                ReissueProof::Challenge { nonce: &nonce }
            }
        };
        let proof = match &reissued.signer {
            None => Proof::CurrentToken,
            Some((chain, signer)) => Proof::WalletSignature {
                chain: chain.clone(),
                signer: signer.to_checksum(None),
            },
        };
        let detail = Detail::TokenReissued(TokenReissued { proof, client });
        let event = AuditEvent::new(agent.id, reissued.actor, detail);
        if !self
            .store
            .reissue_token(agent.id, stored_proof, new_hash, &event)
            .await?
        {
            return Err(ProofError::Invalid);
        }
        Ok(reissued)
    }

    /// Checks a wallet-signature proof without consuming its challenge; returns the nonce and the signer.
    async fn verify_wallet_proof(
        &self,
        agent: &Agent,
        chain: &str,
        message: &str,
        signature: &str,
        public_key: Option<&str>,
        challenge_prefix: &str,
    ) -> Result<(String, Address), ProofError> {
        if registry::find(chain).is_none() {
            return Err(ProofError::UnknownChain);
        }
        let parsed = challenge::parse(challenge_prefix, message).ok_or_else(|| {
            ProofError::MalformedChallenge(format!(
                "the message must have the form {challenge_prefix}:reissue:<agent_id>:<nonce>:<expires_at>"
            ))
        })?;
        if parsed.agent_id != agent.id {
            return Err(ProofError::Invalid);
        }
        let now = self.clock.now();
        if Utc
            .timestamp_opt(parsed.expires_at_unix, 0)
            .single()
            .is_none_or(|t| t <= now)
        {
            return Err(ProofError::ChallengeExpired);
        }
        let stored = self
            .store
            .get_challenge(&parsed.nonce)
            .await?
            .ok_or(ProofError::Invalid)?;
        if stored.agent_id != agent.id || stored.message != message {
            return Err(ProofError::Invalid);
        }
        if stored.expires_at <= now {
            return Err(ProofError::ChallengeExpired);
        }
        if stored.used {
            return Err(ProofError::Invalid);
        }
        let signer = recover_signer(message, signature, public_key).ok_or(ProofError::Invalid)?;
        let recognised = [agent.wallet_addresses.get(chain), agent.owner_addresses.get(chain)];
        if !recognised.into_iter().flatten().any(|a| *a == signer) {
            return Err(ProofError::Invalid);
        }
        Ok((parsed.nonce, signer))
    }

    /// Checks an owner challenge signed for `chain` and, when it holds, uses it up and stores the session (whose
    /// token has the hash `token_hash`) in one step, audited with `client`. A failing proof leaves the challenge unused.
    pub async fn open_owner_session(
        &self,
        agent: &Agent,
        chain: &str,
        message: &str,
        signature: &str,
        token_hash: String,
        client: String,
    ) -> Result<OwnerSessionRecord, ProofError> {
        let parsed = SiweMessage::parse(message).ok_or_else(|| {
            ProofError::MalformedChallenge(
                "the message must be the Sign-In with Ethereum (EIP-4361) message of an owner challenge".into(),
            )
        })?;
        let now = self.clock.now();
        // As for a reissue: the message's own expiry first, so that a challenge expired long enough to be purged is
        // still answered as expired rather than unknown.
        if parsed.expiration_time.is_some_and(|t| t <= now) {
            return Err(ProofError::ChallengeExpired);
        }
        let stored = self
            .store
            .get_owner_challenge(&parsed.nonce)
            .await?
            .filter(|c| c.agent_id == agent.id && c.message == message && c.chain == chain)
            .ok_or(ProofError::Invalid)?;
        if stored.expires_at <= now {
            return Err(ProofError::ChallengeExpired);
        }
        if stored.used {
            return Err(ProofError::Invalid);
        }
        let signer = recover_signer(message, signature, None).ok_or(ProofError::Invalid)?;
        if signer != stored.address || !agent.owner_addresses.values().any(|owner| *owner == signer) {
            return Err(ProofError::Invalid);
        }
        // The chain the session is tied to: the challenge's when the signer owns the agent there, else the one it owns.
        let owned_on = match agent.owner_addresses.get(chain) {
            Some(owner) if *owner == signer => chain.to_string(),
            _ => agent
                .owner_addresses
                .iter()
                .find(|(_, owner)| **owner == signer)
                .map(|(chain, _)| chain.clone())
                .unwrap_or_else(|| chain.to_string()),
        };
        let session = OwnerSessionRecord {
            token_hash,
            agent_id: agent.id,
            address: signer,
            chain: Some(owned_on),
            expires_at: now + chrono::Duration::seconds(siwe::SESSION_LIFETIME_SECS),
        };
        let detail = Detail::OwnerSessionOpened(OwnerSessionOpened {
            address: signer.to_checksum(None),
            chain: chain.to_string(),
            expires_at: session.expires_at,
            client,
        });
        let event = AuditEvent::new(agent.id, Actor::Owner, detail);
        if !self.store.open_owner_session(&stored.nonce, &session, &event).await? {
            return Err(ProofError::Invalid);
        }
        Ok(session)
    }
}

/// Recovers the EIP-191 signer; a non-empty public key must belong to that signer.
fn recover_signer(message: &str, signature: &str, public_key: Option<&str>) -> Option<Address> {
    let bytes = alloy::hex::decode(signature.trim()).ok()?;
    if bytes.len() != 65 {
        return None;
    }
    let signature = Signature::try_from(bytes.as_slice()).ok()?;
    let signer = signature.recover_address_from_msg(message.as_bytes()).ok()?;
    match public_key.map(str::trim).filter(|k| !k.is_empty()) {
        None => Some(signer),
        Some(key) => {
            let key = alloy::hex::decode(key).ok()?;
            let key = alloy::signers::k256::ecdsa::VerifyingKey::from_sec1_bytes(&key).ok()?;
            (Address::from_public_key(&key) == signer).then_some(signer)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use alloy::signers::SignerSync;
    use alloy::signers::local::PrivateKeySigner;
    use uuid::Uuid;

    #[test]
    fn the_signer_of_a_personal_sign_message_is_recovered() {
        let key = PrivateKeySigner::random();
        let message = format!("agentd:reissue:{}:ab:1", Uuid::new_v4());
        let sig = key.sign_message_sync(message.as_bytes()).unwrap();
        let hex = format!("0x{}", alloy::hex::encode(sig.as_bytes()));
        assert_eq!(recover_signer(&message, &hex, None), Some(key.address()));
        assert_eq!(recover_signer(&message, &hex, Some("")), Some(key.address()));
        let pubkey = alloy::hex::encode(key.credential().verifying_key().to_encoded_point(false).as_bytes());
        assert_eq!(recover_signer(&message, &hex, Some(&pubkey)), Some(key.address()));
        let other = PrivateKeySigner::random();
        let other_pub = alloy::hex::encode(other.credential().verifying_key().to_encoded_point(true).as_bytes());
        assert_eq!(recover_signer(&message, &hex, Some(&other_pub)), None);
        assert_ne!(recover_signer("something else", &hex, None), Some(key.address()));
        assert_eq!(recover_signer(&message, "0x1234", None), None);
    }
}
