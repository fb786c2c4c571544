//! A Model Context Protocol server exposing the tool registry (`crate::tools`) for one agent.
//!
//! `agentd mcp` speaks MCP over stdio: newline-delimited JSON-RPC 2.0 on stdin/stdout, logs on stderr only. The
//! agent is the one whose access token is in `AGENTD_ACCESS_TOKEN`; the process refuses to start without a live
//! token of an active agent. Tool calls run through the same tool registry as chat, so the capability checks and the
//! spending cap are the same as in chat, and each call is written to the audit table (`mcp_tool_call`).
//!
//! This process runs no confirmation watcher: a transfer it sends is stored as `pending` in the shared database and
//! settled by the watcher of the `agentd serve` instance using the same database.
//!
//! `POST /mcp` on the HTTP server (route `http::mcp`) answers the same requests, one JSON-RPC message per request.

pub mod protocol;
pub mod session;

use std::sync::Arc;

use anyhow::Context;
use secrecy::{ExposeSecret, SecretString};
use tokio::io::{AsyncBufReadExt, AsyncRead, AsyncWrite, AsyncWriteExt, BufReader};
use tokio::sync::mpsc;
use tokio::task::JoinSet;

use crate::config::Config;
use crate::state::AppState;
pub use protocol::Dispatcher;
pub use session::{Session, SessionError};

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
    let (state, _stop) = build_state(config).await?;
    let (session, agent) = Session::authenticate(&state, token.expose_secret())
        .await
        .map_err(|e| anyhow::anyhow!("{TOKEN_VAR} is refused: {e} ({})", e.code()))?;
    drop(token);
    tracing::info!(agent_id = %agent.id, agent = %agent.name, "MCP server ready on stdio");
    let dispatcher = Arc::new(Dispatcher::new(state, session, "stdio"));
    serve(dispatcher, tokio::io::stdin(), tokio::io::stdout()).await?;
    tracing::info!("stdin closed; MCP server stopped");
    Ok(())
}

/// The state the tools need, without a listener or workers. The sender keeps `state.shutdown` open.
async fn build_state(config: Config) -> anyhow::Result<(AppState, tokio::sync::watch::Sender<bool>)> {
    let built = crate::state::build_state(config).await?;
    Ok((built.state, built.stop))
}

/// Reads newline-delimited JSON-RPC messages from `input` and writes one line per reply to `output`. Requests are
/// handled concurrently (a slow transfer does not hold up a `ping`); at end of input the ones in flight finish first.
pub async fn serve<R, W>(dispatcher: Arc<Dispatcher>, input: R, mut output: W) -> std::io::Result<()>
where
    R: AsyncRead + Unpin,
    W: AsyncWrite + Unpin + Send + 'static,
{
    let (reply_tx, mut reply_rx) = mpsc::unbounded_channel::<String>();
    let writer = tokio::spawn(async move {
        while let Some(line) = reply_rx.recv().await {
            output.write_all(line.as_bytes()).await?;
            output.write_all(b"\n").await?;
            output.flush().await?;
        }
        Ok::<_, std::io::Error>(())
    });
    let mut reader = BufReader::new(input);
    let mut tasks = JoinSet::new();
    let mut line = Vec::new();
    loop {
        line.clear();
        if reader.read_until(b'\n', &mut line).await? == 0 {
            break;
        }
        if line.iter().all(u8::is_ascii_whitespace) {
            continue;
        }
        let (dispatcher, reply_tx, message) = (dispatcher.clone(), reply_tx.clone(), std::mem::take(&mut line));
        tasks.spawn(async move {
            if let Some(reply) = dispatcher.handle_text(&message).await {
                let _ = reply_tx.send(reply.to_string());
            }
        });
        // Reaps finished tasks so that a long session does not accumulate them.
        while tasks.try_join_next().is_some() {}
    }
    while tasks.join_next().await.is_some() {}
    drop(reply_tx);
    writer.await.map_err(std::io::Error::other)?
}
