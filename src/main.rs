//! The `agentd` binary: `serve` (default) runs the HTTP service, `migrate` applies database migrations, `mcp` serves
//! one agent's tools over the Model Context Protocol on stdio, `openapi` prints the OpenAPI document, `audit verify`
//! checks the audit log's hash chain, `rotate-key` re-encrypts every wallet key under a new master key, `keys import-to-pkcs11` moves the wallet keys
//! into the PKCS#11 token.
#![forbid(unsafe_code)]

use std::process::ExitCode;
use std::time::Duration;

use clap::{Parser, Subcommand};

use agentd::app::App;
use agentd::config::Config;

/// jemalloc: fewer resident pages per connection than glibc's malloc under many long-lived streams.
#[cfg(not(target_env = "msvc"))]
#[global_allocator]
static ALLOCATOR: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;

/// Gives AI agents their own crypto wallets and lets people chat with them.
///
/// Configuration comes from environment variables (and a `.env` file): BIND_ADDR, DATABASE_URL,
/// ENCRYPTION_KEY, APP_ENV, RPC_URL_<CHAIN>, LLM_PROVIDER, ... (see docs/configuration.md).
#[derive(Parser)]
#[command(name = "agentd", version)]
struct Cli {
    #[command(subcommand)]
    command: Option<Command>,
}

#[derive(Subcommand)]
enum Command {
    /// Run the HTTP service (the default): applies migrations, then listens on BIND_ADDR.
    Serve,
    /// Apply the database migrations for DATABASE_URL and exit.
    Migrate,
    /// Serve the agent's tools over MCP on stdin/stdout (token in AGENTD_ACCESS_TOKEN; logs on stderr).
    Mcp,
    /// Print the OpenAPI document (as served at /api/openapi.json) and exit; needs no configuration.
    Openapi,
    /// Re-encrypt every wallet key under a new master key, in one transaction; afterwards only the new key starts
    /// the service. The current key is ENCRYPTION_KEY; the new one NEW_ENCRYPTION_KEY (or NEW_ENCRYPTION_KEY_FILE, or
    /// --new-key). Stop every instance first. Safe to run again: it changes all keys or none.
    RotateKey {
        /// The new key (32 bytes, hex or base64). Prefer NEW_ENCRYPTION_KEY(_FILE): a command line is visible to
        /// other users of the machine.
        #[arg(long, value_name = "KEY")]
        new_key: Option<String>,
    },
    /// Wallet keys.
    Keys {
        #[command(subcommand)]
        command: KeysCommand,
    },
    /// The audit log in DATABASE_URL.
    Audit {
        #[command(subcommand)]
        command: AuditCommand,
    },
}

#[derive(Subcommand)]
enum KeysCommand {
    /// Move every wallet key held in the database into the PKCS#11 token (KEY_BACKEND=pkcs11 and the PKCS11_*
    /// variables) as a non-extractable object; each key's ciphertext is removed only once its object is in the token
    /// and signs. Stop every instance first. Safe to run again: it finishes what an earlier run left.
    ImportToPkcs11,
}

#[derive(Subcommand)]
enum AuditCommand {
    /// Check the log's hash chain and head: exit 0 when intact, 1 naming the first bad entry.
    Verify,
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    if matches!(cli.command, Some(Command::Openapi)) {
        return print_openapi();
    }
    let config = match Config::from_env() {
        Ok(config) => config,
        Err(e) => {
            eprintln!("agentd: configuration error: {e}");
            return ExitCode::from(2);
        }
    };
    if matches!(cli.command, Some(Command::Mcp)) {
        // stdout carries only MCP messages.
        agentd::mcp::init_logging(config.server.json_logs);
    } else {
        agentd::telemetry::init(config.server.json_logs);
    }
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("tokio runtime");
    let result = runtime.block_on(async move {
        match cli.command.unwrap_or(Command::Serve) {
            Command::Migrate => agentd::store::open(&config)
                .await
                .map(|_| tracing::info!("migrations applied")),
            Command::Mcp => agentd::mcp::run_stdio(config).await,
            Command::Audit {
                command: AuditCommand::Verify,
            } => verify_audit(&config).await,
            Command::Keys {
                command: KeysCommand::ImportToPkcs11,
            } => import_to_pkcs11(&config).await,
            Command::RotateKey { new_key } => rotate_key(&config, new_key.as_deref()).await,
            Command::Openapi => unreachable!("answered before the configuration is loaded"),
            Command::Serve => {
                // The handlers are installed before the server starts: a signal while it starts stops it gracefully.
                let stop = shutdown_signal();
                App::build(config).await?.run_until_stopped(stop).await
            }
        }
    });
    runtime.shutdown_timeout(Duration::from_secs(2));
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            tracing::error!("{e:#}");
            eprintln!("agentd: {e:#}");
            ExitCode::FAILURE
        }
    }
}

/// The document `web/openapi.json` is a copy of (the console's TypeScript types are generated from it).
fn print_openapi() -> ExitCode {
    match agentd::http::openapi().to_pretty_json() {
        Ok(text) => {
            println!("{text}");
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("agentd: cannot render the OpenAPI document: {e}");
            ExitCode::FAILURE
        }
    }
}

/// `agentd audit verify`: a broken chain is an error naming the first bad entry (non-zero exit).
async fn verify_audit(config: &Config) -> anyhow::Result<()> {
    let store = agentd::store::open(config).await?;
    let generated;
    let key = match &config.security.encryption_key {
        Some(key) => key,
        None => {
            generated = agentd::vault::load_or_create_key_file(&config.database.data_dir)?;
            &generated
        }
    };
    let vault = agentd::custody::open_vault(store.as_ref(), key).await?;
    let audit_key = agentd::custody::open_audit_key(store.as_ref(), &vault, false).await?;
    match agentd::store::verify_audit(store.as_ref(), audit_key).await? {
        Ok(entries) => {
            println!("audit log intact: {entries} entries");
            Ok(())
        }
        Err(broken) => anyhow::bail!("audit log broken: {broken}"),
    }
}

/// `agentd rotate-key`: the current key must be given explicitly (not the development key file, which would then
/// hold a key the database no longer opens with).
async fn rotate_key(config: &Config, new_key: Option<&str>) -> anyhow::Result<()> {
    use agentd::custody::Rotation;
    let Some(old) = &config.security.encryption_key else {
        anyhow::bail!(
            "rotate-key needs the current key in ENCRYPTION_KEY (in development, the contents of the data \
             directory's encryption.key file)"
        );
    };
    let new = agentd::config::new_encryption_key(new_key)?;
    let store = agentd::store::open(config).await?;
    match agentd::custody::rotate_key(store.as_ref(), old, &new).await? {
        Rotation::Rotated { keys, key_version } => {
            tracing::info!(keys, key_version, "wallet keys re-encrypted under the new key");
            println!(
                "re-encrypted {keys} wallet keys (key version {key_version}); start agentd with the new ENCRYPTION_KEY"
            );
        }
        Rotation::AlreadyDone { key_version } => {
            println!("the database is already under the new key (key version {key_version}); nothing to do");
        }
    }
    Ok(())
}

/// `agentd keys import-to-pkcs11`: one line per key moved (agent id and address, never key material or the PIN)
/// and a summary; an error (non-zero exit) when any key stayed in the database.
async fn import_to_pkcs11(config: &Config) -> anyhow::Result<()> {
    let Some(pkcs11) = &config.security.pkcs11 else {
        anyhow::bail!(
            "keys import-to-pkcs11 needs KEY_BACKEND=pkcs11 and PKCS11_MODULE, PKCS11_TOKEN_LABEL and PKCS11_PIN \
             (or PKCS11_PIN_FILE)"
        );
    };
    let store = agentd::store::open(config).await?;
    let generated;
    let key = match &config.security.encryption_key {
        Some(key) => key,
        None => {
            generated = agentd::vault::load_or_create_key_file(&config.database.data_dir)?;
            &generated
        }
    };
    let vault = agentd::custody::open_vault(store.as_ref(), key).await?;
    let token = agentd::signer::Token::open(pkcs11)?;
    let imports = agentd::custody::import_to_pkcs11(store.as_ref(), &vault, &token).await?;
    let (mut created, mut resumed, mut failed) = (0, 0, 0);
    for import in &imports {
        match &import.outcome {
            Ok(true) => {
                created += 1;
                println!(
                    "imported {} ({}) into token {:?}",
                    import.agent_id,
                    import.address,
                    token.label()
                );
            }
            Ok(false) => {
                resumed += 1;
                println!(
                    "{} ({}): already in token {:?}; removed from the database",
                    import.agent_id,
                    import.address,
                    token.label()
                );
            }
            Err(reason) => {
                failed += 1;
                println!(
                    "FAILED {} ({}): {reason}; its key stays in the database",
                    import.agent_id, import.address
                );
            }
        }
    }
    println!(
        "{} keys moved into token {:?} ({created} imported, {resumed} found there from an earlier run), {failed} failed",
        created + resumed,
        token.label()
    );
    if failed > 0 {
        anyhow::bail!("{failed} wallet keys could not be moved into the token; run the import again once fixed");
    }
    Ok(())
}

/// Resolves on SIGINT or SIGTERM. The handlers are installed when this is called, not when the future is first
/// polled (once the server runs): a signal that arrives in between would otherwise take its default action and end
/// the process at once, cutting its start-up log short.
fn shutdown_signal() -> impl std::future::Future<Output = ()> + Send + 'static {
    #[cfg(unix)]
    let installed = {
        use tokio::signal::unix::{SignalKind, signal};
        (signal(SignalKind::interrupt()), signal(SignalKind::terminate()))
    };
    async move {
        #[cfg(unix)]
        match installed {
            (Ok(mut interrupt), Ok(mut terminate)) => {
                tokio::select! { _ = interrupt.recv() => {}, _ = terminate.recv() => {} }
            }
            _ => {
                let _ = tokio::signal::ctrl_c().await;
            }
        }
        #[cfg(not(unix))]
        let _ = tokio::signal::ctrl_c().await;
        tracing::info!("shutdown signal received; finishing in-flight requests");
    }
}
