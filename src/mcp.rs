//! The Model Context Protocol server of one agent, on `rmcp` (the official Rust SDK), over the tool registry
//! (`crate::tools`): the same tools, capability checks, cap, policy and approvals as chat, each call audited
//! (`mcp_tool_call`, actor `mcp`).
//!
//! `agentd mcp` speaks MCP over stdio (newline-delimited JSON-RPC on stdin/stdout, logs on stderr only) for the
//! agent whose access token is in `AGENTD_ACCESS_TOKEN`; it refuses to start without a live token of an active
//! agent and stops when stdin closes. It runs no confirmation watcher: a transfer it sends is stored as `pending`
//! in the shared database and settled by the watcher of the `agentd serve` instance using the same database.
//!
//! `POST /mcp` on the HTTP server (`http::mcp`) is the Streamable HTTP transport (`streamable`).

pub mod approval;
pub mod catalog;
pub mod server;
pub mod sessions;
pub mod streamable;
pub mod tasks;

use anyhow::Context;
use rmcp::ServiceExt;
use secrecy::{ExposeSecret, SecretString};

use crate::config::Config;
pub use server::{AgentServer, McpCaller, UNAUTHORIZED};

/// The environment variable holding the agent's access token.
pub const TOKEN_VAR: &str = "AGENTD_ACCESS_TOKEN";

/// Installs a log subscriber writing to stderr (stdout carries only protocol messages), with the filter of `serve`
/// (RPC URLs, which may hold provider keys, stay out of the logs).
pub fn init_logging(json: bool) {
    let builder = tracing_subscriber::fmt()
        .with_env_filter(crate::telemetry::filter())
        .with_target(true)
        .with_writer(std::io::stderr)
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()));
    let _ = if json {
        builder.json().flatten_event(true).try_init()
    } else {
        builder.try_init()
    };
}

/// Runs the stdio server until stdin closes. Errors (a missing or refused token, a database that cannot be opened)
/// are returned before anything is read.
pub async fn run_stdio(config: Config) -> anyhow::Result<()> {
    let token = std::env::var(TOKEN_VAR)
        .ok()
        .map(SecretString::from)
        .filter(|t| !t.expose_secret().trim().is_empty())
        .with_context(|| format!("{TOKEN_VAR} is not set: give the agent's access token in it"))?;
    // The sender keeps `state.shutdown` open for as long as the server runs.
    let built = crate::state::build_state(config).await?;
    let state = built.state;
    let (session, agent) = state
        .auth
        .open_session(token.expose_secret())
        .await
        .map_err(|e| anyhow::anyhow!("{TOKEN_VAR} is refused: {e} ({})", e.code()))?;
    drop(token);
    tracing::info!(agent_id = %agent.id, agent = %agent.name, "MCP server ready on stdio");
    let caller = McpCaller { session, owner: None };
    let running = AgentServer::stdio(state, caller)
        .serve(rmcp::transport::stdio())
        .await
        .context("the MCP session could not start")?;
    let reason = running.waiting().await?;
    tracing::info!(?reason, "stdin closed; MCP server stopped");
    drop(built.stop);
    Ok(())
}
