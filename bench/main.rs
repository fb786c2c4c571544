//! Hand-run benchmarks of agentd: `cargo bench --bench agentd [-- SECTION...]`, sections `http`, `wrk`, `turn`, `sends`,
//! `stream`, `x402`, `watcher`, `calls`, `webhooks`, `signing`, `delegation`, `sponsored`, `sell` (all when none is named). Each section prints a small table of figures and the ratio or target it is
//! judged by; nothing here asserts timings. The sections that need a chain start their own anvil
//! (`npm ci --prefix test-tools` installs it).

#[path = "../tests/api/anvil.rs"]
mod anvil;
mod calls;
mod common;
mod delegation;
#[path = "../tests/api/helpers/delegation_framework.rs"]
mod delegation_framework;
/// What the test suite's helpers find under `crate::helpers`.
mod helpers {
    pub(crate) use super::delegation_framework;
    pub(crate) use super::solidity;

    pub fn parse_private_key(key: &str) -> alloy::signers::local::PrivateKeySigner {
        key.trim_start_matches("0x")
            .parse()
            .unwrap_or_else(|e| panic!("a secp256k1 key in hex: {e}"))
    }
}
mod http;
#[path = "../tests/api/helpers/paymaster.rs"]
mod paymaster;
#[path = "../tests/api/helpers/paywall.rs"]
mod paywall;
mod sell;
mod sends;
mod server;
mod signing;
#[path = "../tests/api/helpers/solidity.rs"]
mod solidity;
mod sponsored;
mod stream;
mod turn;
mod watcher;
mod webhooks;
mod x402;

use std::time::Instant;

const SECTIONS: [&str; 13] = [
    "http",
    "wrk",
    "turn",
    "sends",
    "stream",
    "x402",
    "watcher",
    "calls",
    "webhooks",
    "signing",
    "delegation",
    "sponsored",
    "sell",
];

/// The binary's allocator (src/main.rs), so that the in-process figures are the service's.
#[cfg(not(target_env = "msvc"))]
#[global_allocator]
static ALLOCATOR: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;

fn main() {
    // `cargo bench` passes `--bench`; anything starting with `-` is a harness flag, not a section.
    let mut selected: Vec<String> = std::env::args().skip(1).filter(|a| !a.starts_with('-')).collect();
    if let Some(unknown) = selected.iter().find(|s| !SECTIONS.contains(&s.as_str())) {
        eprintln!("unknown section `{unknown}`; sections: {}", SECTIONS.join(", "));
        std::process::exit(2);
    }
    if selected.is_empty() {
        selected = SECTIONS.iter().map(|s| s.to_string()).collect();
    }
    // BENCH_LOG=<filter> (say `warn`): the in-process apps' logs on stderr, to see what a run's figures do not.
    if let Ok(filter) = std::env::var("BENCH_LOG") {
        tracing_subscriber::fmt()
            .with_env_filter(tracing_subscriber::EnvFilter::new(filter))
            .with_writer(std::io::stderr)
            .init();
    }
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("tokio runtime");
    let started = Instant::now();
    println!(
        "agentd benchmarks on {} cores (client, server and anvil share them)",
        std::thread::available_parallelism().map_or(0, |n| n.get())
    );
    for section in SECTIONS.iter().filter(|s| selected.iter().any(|x| x == *s)) {
        println!("\n== {section} ==");
        let section_started = Instant::now();
        runtime.block_on(async {
            match *section {
                "http" => http::run().await,
                "wrk" => http::run_wrk().await,
                "turn" => turn::run().await,
                "sends" => sends::run().await,
                "x402" => x402::run().await,
                "watcher" => watcher::run().await,
                "calls" => calls::run().await,
                "webhooks" => webhooks::run().await,
                "signing" => signing::run().await,
                "delegation" => delegation::run().await,
                "sponsored" => sponsored::run().await,
                "sell" => sell::run().await,
                _ => stream::run().await,
            }
        });
        println!("({section}: {:.1} s)", section_started.elapsed().as_secs_f64());
    }
    println!("\ntotal {:.1} s", started.elapsed().as_secs_f64());
    // Streams and servers still held by spawned tasks end with the process.
    runtime.shutdown_background();
}
