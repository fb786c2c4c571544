//! Views of owner authority: the Sign-In with Ethereum challenge and the owner session it opens.

use chrono::{DateTime, Utc};
use serde::Serialize;
use utoipa::ToSchema;

/// An EIP-4361 message to sign with an owner wallet (single use, 5 minutes).
#[derive(Debug, Serialize, ToSchema)]
pub struct OwnerChallengeView {
    /// The exact text to sign (EIP-191 `personal_sign`).
    pub message: String,
    pub nonce: String,
    pub expires_at: DateTime<Utc>,
}

/// An owner session: send `owner_token` as `X-Owner-Token` (15 minutes).
#[derive(Serialize, ToSchema)]
pub struct OwnerSessionView {
    /// `own_` + 43 base64url characters; shown once, only its hash is stored.
    pub owner_token: String,
    pub expires_at: DateTime<Utc>,
}
