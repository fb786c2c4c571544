//! Who may do what: access tokens, owner authority, token reissue, the limits of those endpoints, and the audit log
//! (docs/api.md §2, §4, §10).

mod access_tokens;
pub mod audit;
pub mod owners;
mod rate_limits;
mod reissue;
