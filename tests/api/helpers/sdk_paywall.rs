//! The official x402 Python SDK's paid resource (`tests/x402/sdk_paywall.py`: its Flask middleware and its own
//! facilitator settling on a test node), run from the virtual environment `scripts/test.sh` installs it in
//! (`~/.cache/agentd-x402-venv`, PyPI `x402[evm,flask,requests]==2.25.0`). Stopped when dropped.
#![allow(dead_code)] // Each test file uses a different part of this helper.

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::Duration;

/// The virtual environment's Python.
pub fn python() -> PathBuf {
    let home = std::env::var("HOME").expect("HOME is set");
    Path::new(&home).join(".cache/agentd-x402-venv/bin/python")
}

pub struct SdkPaywall {
    child: Child,
    /// `http://127.0.0.1:<port>`
    pub base: String,
}

impl SdkPaywall {
    /// Starts the SDK's resource server for `GET /weather` at `price` (e.g. `$0.01`, USDC on base), paying `pay_to`,
    /// with a facilitator holding `facilitator_key` that settles on `rpc_url`.
    pub fn start(rpc_url: &str, facilitator_key: &str, pay_to: &str, price: &str) -> SdkPaywall {
        let python = python();
        assert!(
            python.exists(),
            "the x402 Python SDK is not installed at {} (scripts/test.sh installs it)",
            python.display()
        );
        let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/x402/sdk_paywall.py");
        let mut child = Command::new(&python)
            .arg(script)
            .args([rpc_url, facilitator_key, pay_to, price])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap_or_else(|e| panic!("could not start {}: {e}", python.display()));
        let stdout = child.stdout.take().expect("stdout is piped");
        let (tx, rx) = mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { break };
                if let Some(port) = line.trim().strip_prefix("listening on ") {
                    let _ = tx.send(port.to_owned());
                }
            }
        });
        let port = match rx.recv_timeout(Duration::from_secs(60)) {
            Ok(port) => port,
            Err(_) => {
                let _ = child.kill();
                let _ = child.wait();
                panic!("the SDK paywall did not start within 60 s");
            }
        };
        SdkPaywall {
            child,
            base: format!("http://127.0.0.1:{port}"),
        }
    }

    pub fn url(&self, path: &str) -> String {
        format!("{}{path}", self.base)
    }
}

impl Drop for SdkPaywall {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
