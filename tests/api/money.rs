//! Money: transfers through the API and the chat, tokens, the owner's sweep, approvals and policies, idempotency,
//! the chain client, fees, and what happens to a transfer that does not land or whose process dies.

mod approvals;
mod chain_client;
mod confirmations;
pub mod fee_preview;
mod idempotency;
mod idempotency_recovery;
mod l1_fee;
mod nonce_gaps;
pub mod policy;
mod slow_node;
mod standing;
mod stuck_transfers;
mod sweep;
mod tokens;
mod transfer_concurrency;
mod transfer_recovery;
mod transfers;
pub mod transfers_api;
