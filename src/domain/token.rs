//! Access tokens: `agt_` + 32 random bytes in base64url (owner session tokens the same with `own_`, facilitator
//! tokens with `fac_`); only their SHA-256 is ever stored.

use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use rand_core::{OsRng, RngCore};
use secrecy::{ExposeSecret, SecretString};
use sha2::{Digest, Sha256};

const PREFIX: &str = "agt_";
/// Owner session tokens (`X-Owner-Token`).
pub const OWNER_PREFIX: &str = "own_";
/// Facilitator tokens (§23: `Authorization: Bearer` on an agent's own x402 facilitator endpoints).
pub const FACILITATOR_PREFIX: &str = "fac_";
/// How much of a facilitator token is kept in the clear to tell tokens apart: its prefix and 8 of its 43 random
/// characters (48 of its 256 bits).
pub const FACILITATOR_SHOWN_CHARS: usize = FACILITATOR_PREFIX.len() + 8;

/// A freshly minted token (plaintext, shown once) and the hash that is stored.
pub struct IssuedToken {
    pub plaintext: SecretString,
    pub hash: String,
}

/// Mints a token from 32 bytes of the OS random number generator.
pub fn issue() -> IssuedToken {
    issue_prefixed(PREFIX)
}

/// Mints a token with another prefix (owner sessions).
pub fn issue_prefixed(prefix: &str) -> IssuedToken {
    let mut bytes = zeroize::Zeroizing::new([0u8; 32]);
    OsRng.fill_bytes(bytes.as_mut());
    let plaintext = format!("{prefix}{}", URL_SAFE_NO_PAD.encode(bytes.as_ref()));
    let hash = hash(&plaintext);
    IssuedToken {
        plaintext: SecretString::from(plaintext),
        hash,
    }
}

/// The stored form of a token: lower-case hex SHA-256 of its text.
pub fn hash(token: &str) -> String {
    alloy::hex::encode(Sha256::digest(token.as_bytes()))
}

/// Whether a string has the shape of an access token (cheap pre-check before any lookup).
pub fn is_well_formed(token: &str) -> bool {
    is_well_formed_prefixed(token, PREFIX)
}

/// As `is_well_formed`, for a token with another prefix.
pub fn is_well_formed_prefixed(token: &str, prefix: &str) -> bool {
    token.strip_prefix(prefix).is_some_and(|rest| {
        rest.len() >= 43
            && rest.len() <= 128
            && rest
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
    })
}

impl IssuedToken {
    pub fn expose(&self) -> &str {
        self.plaintext.expose_secret()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tokens_have_the_contract_shape_and_differ() {
        let a = issue();
        let b = issue();
        assert!(a.expose().starts_with("agt_"));
        assert_eq!(a.expose().len(), 4 + 43);
        assert!(is_well_formed(a.expose()));
        assert_ne!(a.expose(), b.expose());
        assert_eq!(a.hash, hash(a.expose()));
        assert_eq!(a.hash.len(), 64);
    }

    #[test]
    fn malformed_tokens_are_recognised() {
        assert!(!is_well_formed("agt_short"));
        assert!(!is_well_formed(&format!("xyz_{}", "a".repeat(43))));
        assert!(!is_well_formed(&format!("agt_{}!", "a".repeat(43))));
    }
}
