//! Structured logs with `tracing`: human-readable by default, JSON lines when `LOG_FORMAT=json`.

use tracing_subscriber::EnvFilter;

/// Installs the global subscriber (`RUST_LOG` filters; default `info`). Logs go to stdout.
pub fn init(json: bool) {
    let filter = EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new("info,sqlx=warn"));
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_target(true)
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stdout()));
    let result = if json {
        builder.json().flatten_event(true).try_init()
    } else {
        builder.try_init()
    };
    let _ = result;
}
