//! agentd: a self-hostable service that gives AI agents their own crypto wallets and lets people chat with them.
#![forbid(unsafe_code)]

/// Startup: open the store, build the state, bind the listener, run until a shutdown signal.
pub mod app;
/// Chain registry and JSON-RPC access.
pub mod chain;
/// The chat engine: turn runner and tools.
pub mod chat;
/// Typed configuration from the environment.
pub mod config;
/// The confirmation watcher.
pub mod confirmations;
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
/// Fixed-window rate limits.
pub mod rate_limit;
/// Shared handler state.
pub mod state;
/// SQLite and PostgreSQL persistence.
pub mod store;
/// Logging setup.
pub mod telemetry;
/// Native transfers: cap, nonce, sign, store, broadcast.
pub mod transfers;
/// Wallet key custody.
pub mod vault;
