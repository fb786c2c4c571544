//! Views of token reissue: the challenge to sign and the reissued token.

use chrono::{DateTime, Utc};
use serde::Serialize;
use utoipa::ToSchema;

use super::agents::AgentDetailView;

/// A single-use reissue challenge to sign with `personal_sign`.
#[derive(Debug, Serialize, ToSchema)]
pub struct ChallengeView {
    /// `<prefix>:reissue:<agent_id>:<nonce>:<expires_at_unix>`.
    pub message: String,
    pub nonce: String,
    pub expires_at: DateTime<Utc>,
}

/// A new access token (the previous one is dead) and the agent it belongs to.
#[derive(Debug, Serialize, ToSchema)]
pub struct ReissuedView {
    pub access_token: String,
    pub agent: AgentDetailView,
}
