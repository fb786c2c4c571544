//! The HTTP API integration tests: one binary, one module per resource, all sharing the `helpers` harness.

mod agents;
mod anvil;
mod auth;
mod chain_client;
mod chains;
mod errors;
mod export_key;
mod health;
mod helpers;
mod reissue;
mod secrets;
