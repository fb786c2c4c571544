//! The `mcp` section: the MCP server's Streamable HTTP transport.

use std::time::Duration;

use super::vars::Vars;
use super::{ConfigError, invalid};

#[derive(Debug, Clone)]
pub struct McpConfig {
    /// `MCP_HTTP_SESSIONS` (default true): an `initialize` from a client that accepts event streams opens a session
    /// (`Mcp-Session-Id`) held in this instance's memory. False: every request is answered on its own (JSON), so
    /// instances behind a load balancer without stickiness all answer every client (no elicitation then).
    pub http_sessions: bool,
    /// `MCP_SESSION_IDLE_SECS` (default 600): a session unused this long is closed.
    pub session_idle: Duration,
    /// `MCP_MAX_SESSIONS_PER_AGENT` (default 16): open sessions per agent on this instance; opening one more closes
    /// the least recently used.
    pub max_sessions_per_agent: usize,
}

impl McpConfig {
    pub(super) fn read(vars: &Vars) -> Result<Self, ConfigError> {
        Ok(McpConfig {
            http_sessions: vars.flag("MCP_HTTP_SESSIONS", true)?,
            session_idle: match vars.number("MCP_SESSION_IDLE_SECS", 600u64)? {
                0 => return Err(invalid("MCP_SESSION_IDLE_SECS", "must be at least 1")),
                secs => Duration::from_secs(secs),
            },
            max_sessions_per_agent: match vars.number("MCP_MAX_SESSIONS_PER_AGENT", 16usize)? {
                0 => return Err(invalid("MCP_MAX_SESSIONS_PER_AGENT", "must be at least 1")),
                n => n,
            },
        })
    }
}
