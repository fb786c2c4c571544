//! Plain domain types and pure rules, no I/O.

pub mod agent;
pub mod amount;
pub mod asset;
pub mod audit;
pub mod call;
pub mod chain;
pub mod challenge;
pub mod clock;
pub mod decision;
pub mod delegation;
pub mod erc20;
pub mod net;
pub mod outflow;
pub mod policy;
pub mod recipient;
pub mod sale;
pub mod siwe;
pub mod token;
pub mod transaction;
pub mod webhook;

/// The current time at the precision both databases keep (microseconds), so responses match stored values.
pub fn now() -> chrono::DateTime<chrono::Utc> {
    use chrono::SubsecRound;
    chrono::Utc::now().trunc_subsecs(6)
}
