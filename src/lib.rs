//! agentd: a self-hostable service that gives AI agents their own crypto wallets and lets people chat with them.
#![forbid(unsafe_code)]
// Standard output carries the MCP stdio protocol: nothing in the library may print to it.
#![deny(clippy::print_stdout)]

/// Startup: open the store, build the state, bind the listener, run until a shutdown signal.
pub mod app;
/// Authentication: agent tokens, sessions and the admin token, checked in one place.
pub mod auth;
/// A batcher: items handled in rounds of the owner's work (group commit's queue).
pub mod batch;
/// Chain registry and JSON-RPC access.
pub mod chain;
/// The chat engine: the turn runner.
pub mod chat;
/// Typed configuration from the environment.
pub mod config;
/// The master-key check at start and key rotation.
pub mod custody;
/// On-chain delegations the owner grants an agent (§21): registration, limits, revocation.
pub mod delegations;
/// Plain domain types and rules.
pub mod domain;
/// The live event bus, fed by the store.
pub mod events;
/// The HTTP API.
pub mod http;
/// Language-model providers.
pub mod llm;
/// The Model Context Protocol server (stdio and `POST /mcp`).
pub mod mcp;
/// Prometheus metrics.
pub mod metrics;
pub mod net;
/// What agents sell over x402 (§23): offers created, listed and closed, with their views and the agent's income.
pub mod offers;
/// Rate limits in bounded tables, keyed by client address or agent id.
pub mod rate_limit;
/// Agents that earn (§23): payments to an agent checked, held, settled and served; its own x402 facilitator.
pub mod sell;
/// Wallet key custody.
pub mod signer;
/// Gas the operator sponsors (§22): the sponsorable chains, their sponsor keys, the bundles.
pub mod sponsor;
/// Shared handler state.
pub mod state;
/// SQLite and PostgreSQL persistence.
pub mod store;
/// Logging setup.
pub mod telemetry;
/// The tool registry shared by chat and MCP: definitions, schemas, capability checks, handlers.
pub mod tools;
/// The transfer service: cap, nonce, sign, store, broadcast.
pub mod transfers;
pub mod vault;
/// The confirmation watcher.
pub mod watcher;
/// The webhook delivery worker.
pub mod webhooks;
/// x402: reading a 402's price list, choosing and signing a payment, the guarded fetch.
pub mod x402;
