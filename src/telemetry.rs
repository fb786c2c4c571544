//! Structured logs with `tracing`: human-readable by default, JSON lines when `LOG_FORMAT=json`.

use tracing_subscriber::EnvFilter;

/// The log filter of every command: `RUST_LOG` (default `info`), except that the HTTP client targets stay at info.
/// alloy's HTTP transport logs its URL at debug level, and RPC URLs may carry provider API keys: whatever
/// RUST_LOG asks for, those targets never log below info.
pub fn filter() -> EnvFilter {
    let filter = EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new("info,sqlx=warn"));
    [
        "alloy_transport_http=info",
        "alloy_rpc_client=info",
        "reqwest=info",
        "hyper_util=info",
    ]
    .iter()
    .fold(filter, |f, d| f.add_directive(d.parse().expect("static directive")))
}

/// Installs the global subscriber. Logs go to stdout.
pub fn init(json: bool) {
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter())
        .with_target(true)
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stdout()));
    let result = if json {
        builder.json().flatten_event(true).try_init()
    } else {
        builder.try_init()
    };
    let _ = result;
}
