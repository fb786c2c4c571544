//! The HTTP API integration tests: one binary, one module per resource, all sharing the `helpers` harness.

mod agents;
mod anvil;
mod architecture;
mod auth;
mod chain_client;
mod chains;
mod chat;
mod chat_stream;
mod confirmations;
mod conversations;
mod errors;
mod export_key;
mod health;
mod helpers;
mod mcp;
mod metrics;
mod openai_chat;
mod openapi;
mod reissue;
mod secrets;
mod store;
mod transfer_concurrency;
mod transfer_recovery;
mod transfers;
mod wallets;
