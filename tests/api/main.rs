//! The HTTP API integration tests: one binary, one folder per area, all sharing the `helpers` harness and `anvil`.

mod agents;
mod anvil;
mod auth;
mod calls;
mod chat;
mod delegations;
mod facilitator;
mod helpers;
mod keys;
mod mcp;
mod money;
mod offers;
mod service;
mod sponsored;
mod store;
mod webhooks;
mod x402;
