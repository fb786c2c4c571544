//! An x402 seller built with the official x402 Python SDK that sells through agentd (`tests/x402/sdk_seller.py`: its
//! Flask middleware and resource server, with the SDK's `HTTPFacilitatorClientSync` pointed at an agent's own
//! facilitator, §23), run from the virtual environment `scripts/install.sh x402` installs it in
//! (`~/.cache/agentd-x402-venv`). Stopped when dropped.
#![allow(dead_code)] // Each test file uses a different part of this helper.

use std::io::{BufRead, BufReader, Read};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex, mpsc};
use std::time::Duration;

use super::sdk_paywall::python;

/// How long the seller may take to start (the SDK imports web3 and asks the facilitator's `/supported` first).
const START_TIMEOUT: Duration = Duration::from_secs(60);

pub struct SdkSeller {
    child: Child,
    /// `http://127.0.0.1:<port>`
    pub base: String,
    stderr: Arc<Mutex<String>>,
}

impl SdkSeller {
    /// Starts the SDK's resource server selling `GET /report` for `price` (e.g. `$0.01`: the network's default USDC)
    /// paid to `pay_to` on `network` (`eip155:<id>`), verified and settled by the facilitator at `facilitator_url`
    /// (`<agentd>/api/agents/{id}/x402`) with `Authorization: Bearer <token>`.
    pub fn start(facilitator_url: &str, token: &str, pay_to: &str, price: &str, network: &str) -> SdkSeller {
        let python = python();
        assert!(
            python.exists(),
            "the x402 Python SDK is not installed at {} (scripts/install.sh x402 installs it)",
            python.display()
        );
        let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/x402/sdk_seller.py");
        let mut child = Command::new(&python)
            .arg(script)
            .args([facilitator_url, token, pay_to, price, network])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap_or_else(|e| panic!("could not start {}: {e}", python.display()));
        // Kept for the panic message: the SDK exits with its reason on stderr when its facilitator is not usable.
        let stderr = Arc::new(Mutex::new(String::new()));
        let mut pipe = child.stderr.take().expect("stderr is piped");
        let kept = stderr.clone();
        std::thread::spawn(move || {
            let mut chunk = [0u8; 4096];
            while let Ok(n) = pipe.read(&mut chunk) {
                if n == 0 {
                    break;
                }
                kept.lock().unwrap().push_str(&String::from_utf8_lossy(&chunk[..n]));
            }
        });
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
        let port = match rx.recv_timeout(START_TIMEOUT) {
            Ok(port) => port,
            Err(_) => {
                let _ = child.kill();
                let _ = child.wait();
                std::thread::sleep(Duration::from_millis(100));
                panic!(
                    "the SDK seller did not start within {START_TIMEOUT:?}; its stderr:\n{}",
                    stderr.lock().unwrap()
                );
            }
        };
        SdkSeller {
            child,
            base: format!("http://127.0.0.1:{port}"),
            stderr,
        }
    }

    pub fn url(&self, path: &str) -> String {
        format!("{}{path}", self.base)
    }

    /// What the seller wrote on stderr so far (the SDK's log of its facilitator's answers), for failure messages.
    pub fn stderr(&self) -> String {
        self.stderr.lock().unwrap().clone()
    }
}

impl Drop for SdkSeller {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
