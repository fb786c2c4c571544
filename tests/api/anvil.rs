//! Test helper: a throwaway local EVM node (anvil from `test-tools/`, `npm ci --prefix test-tools`), killed on drop.
#![allow(dead_code)] // Each test file uses a different part of this helper.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use alloy::primitives::{Address, TxHash, U256};
use alloy::providers::{Provider, RootProvider};
use alloy::rpc::types::TransactionReceipt;

/// How long anvil may take to start listening and answer (it usually needs about 0.1 s).
const START_TIMEOUT: Duration = Duration::from_secs(10);
/// Pause between readiness probes.
const POLL_EVERY: Duration = Duration::from_millis(20);

/// A running anvil process on 127.0.0.1 with a port of its own.
pub struct Anvil {
    child: Child,
    url: String,
    port: u16,
    provider: RootProvider,
}

impl Anvil {
    /// The first of anvil's default, pre-funded (10000 ETH) development accounts.
    pub const DEV_ADDRESS: &'static str = "0xf39Fd6e51aad88F6F4ce6aB8827279cffFb92266";
    /// Its private key: a public test key, for tests only.
    pub const DEV_PRIVATE_KEY: &'static str = "0xac0974bec39a17e36ba4a6b4d238ff944bacb478cbed5efcae784d7bf4f2ff80";

    /// Starts anvil serving `chain_id` (automine: a sent transaction is mined at once).
    pub fn start(chain_id: u64) -> Anvil {
        Anvil::start_with(chain_id, &[])
    }

    /// Starts anvil with extra command-line options, e.g. `&["--base-fee", "5000000000"]` to give
    /// two chains different fees, or `&["--block-time", "1"]`.
    pub fn start_with(chain_id: u64, extra_args: &[&str]) -> Anvil {
        let bin = anvil_path();
        let chain_id_arg = chain_id.to_string();
        // Port 0 lets anvil pick a free port itself (no race between parallel tests); it then
        // prints `Listening on 127.0.0.1:PORT`, which is why `--silent` is not used. A `--port`
        // among the extra options (to restart a node on the same port) replaces it.
        let own_port = extra_args.iter().any(|a| *a == "--port" || *a == "-p");
        let port_args: &[&str] = if own_port { &[] } else { &["--port", "0"] };
        let mut child = Command::new(&bin)
            .args(["--host", "127.0.0.1", "--chain-id", &chain_id_arg])
            .args(port_args)
            .args(extra_args)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap_or_else(|e| panic!("could not start {}: {e}", bin.display()));
        let stdout = child.stdout.take().expect("anvil stdout is piped");
        let (address_tx, address_rx) = mpsc::channel();
        // Keeps draining stdout after the address line: anvil logs every call, and a full pipe
        // would block it.
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { break };
                if let Some(address) = line.trim().strip_prefix("Listening on ") {
                    let _ = address_tx.send(address.trim().to_owned());
                }
            }
        });
        let address = match address_rx.recv_timeout(START_TIMEOUT) {
            Ok(address) => address,
            Err(_) => {
                let _ = child.kill();
                let _ = child.wait();
                panic!("anvil did not report its address within {START_TIMEOUT:?} (args: {extra_args:?})");
            }
        };
        let port = address
            .rsplit(':')
            .next()
            .and_then(|p| p.parse().ok())
            .expect("anvil address has a port");
        let url = format!("http://127.0.0.1:{port}");
        let mut anvil = Anvil {
            provider: RootProvider::new_http(url.parse().expect("valid url")),
            child,
            url,
            port,
        };
        anvil.wait_until_ready(chain_id);
        anvil
    }

    /// The node's JSON-RPC URL, `http://127.0.0.1:PORT`.
    pub fn url(&self) -> &str {
        &self.url
    }

    pub fn port(&self) -> u16 {
        self.port
    }

    /// The node's process id (the benchmarks read its processor time from `/proc`).
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// An alloy provider talking to this node directly (not through agentd's client).
    pub fn provider(&self) -> &RootProvider {
        &self.provider
    }

    /// Sets the native balance of `address` (anvil_setBalance).
    pub async fn set_balance(&self, address: Address, wei: U256) {
        let _: serde_json::Value = self
            .provider
            .raw_request("anvil_setBalance".into(), (address, wei))
            .await
            .expect("anvil_setBalance");
    }

    /// Mines `blocks` empty blocks at once (anvil_mine).
    /// `anvil_setCode`: `code` at `address` (an EIP-7702 designation is `0xef0100 ‖ target`).
    pub async fn set_code(&self, address: Address, code: alloy::primitives::Bytes) {
        let _: serde_json::Value = self
            .provider()
            .raw_request("anvil_setCode".into(), (address, code))
            .await
            .expect("anvil_setCode");
    }

    pub async fn mine(&self, blocks: u64) {
        let _: serde_json::Value = self
            .provider
            .raw_request("anvil_mine".into(), (U256::from(blocks),))
            .await
            .expect("anvil_mine");
    }

    /// Turns mining on each transaction on or off (evm_setAutomine); off keeps sent transactions pending.
    pub async fn set_automine(&self, enabled: bool) {
        let _: serde_json::Value = self
            .provider
            .raw_request("evm_setAutomine".into(), (enabled,))
            .await
            .expect("evm_setAutomine");
    }

    /// Removes a pending transaction from the node's pool (anvil_dropTransaction): the node forgets it.
    pub async fn drop_transaction(&self, hash: TxHash) {
        let _: serde_json::Value = self
            .provider
            .raw_request("anvil_dropTransaction".into(), (hash,))
            .await
            .expect("anvil_dropTransaction");
    }

    /// The native balance of `address` at the latest block.
    pub async fn balance(&self, address: Address) -> U256 {
        self.provider.get_balance(address).await.expect("eth_getBalance")
    }

    /// The mined transaction count of `address`, read at once (for loops that wait for a count; an assertion
    /// reads [`Anvil::nonce`]).
    pub async fn mined_nonce(&self, address: Address) -> u64 {
        self.provider
            .get_transaction_count(address)
            .await
            .expect("eth_getTransactionCount")
    }

    /// The nonce of `address` once the node has mined what it holds for it in its pool: anvil's automine answers
    /// `eth_sendRawTransaction` before the block is sealed, so a read right after a send can miss it. Waits (up to
    /// 10 s) until the mined and the pending counts agree.
    pub async fn nonce(&self, address: Address) -> u64 {
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            let mined = self.mined_nonce(address).await;
            let pending = self
                .provider
                .get_transaction_count(address)
                .pending()
                .await
                .expect("eth_getTransactionCount(pending)");
            if mined == pending || Instant::now() > deadline {
                return mined;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    /// The receipt of a transaction, waiting up to 15 s for it to be mined (panics when it has none by then). A
    /// transfer is answered once broadcast, but a broadcast the node did not acknowledge in time (a loaded machine)
    /// is answered as well and sent again by the watcher: its receipt comes a little later.
    pub async fn receipt(&self, hash: TxHash) -> TransactionReceipt {
        let deadline = Instant::now() + Duration::from_secs(15);
        loop {
            let receipt = self
                .provider
                .get_transaction_receipt(hash)
                .await
                .expect("eth_getTransactionReceipt");
            match receipt {
                Some(receipt) => return receipt,
                None if Instant::now() < deadline => {
                    tokio::time::sleep(Duration::from_millis(50)).await;
                }
                None => panic!("{hash} has no receipt after 15 s"),
            }
        }
    }

    pub async fn block_number(&self) -> u64 {
        self.provider.get_block_number().await.expect("eth_blockNumber")
    }

    /// Polls `eth_chainId` (blocking, so `start` works with or without a runtime) until the node
    /// answers with `chain_id`.
    fn wait_until_ready(&mut self, chain_id: u64) {
        let expected = format!("\"0x{chain_id:x}\"");
        let deadline = Instant::now() + START_TIMEOUT;
        loop {
            if let Some(body) = post_blocking(
                self.port,
                r#"{"jsonrpc":"2.0","id":1,"method":"eth_chainId","params":[]}"#,
            ) && body.contains(&expected)
            {
                return;
            }
            if Instant::now() > deadline {
                let _ = self.child.kill();
                panic!(
                    "anvil on port {} did not answer eth_chainId = {chain_id} in time",
                    self.port
                );
            }
            std::thread::sleep(POLL_EVERY);
        }
    }
}

impl Drop for Anvil {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// `test-tools/node_modules/.bin/anvil`, or a panic that says how to install it.
fn anvil_path() -> PathBuf {
    let bin = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("test-tools/node_modules/.bin/anvil");
    assert!(
        bin.exists(),
        "anvil is not installed at {}: run `npm ci --prefix test-tools` in the repository root first",
        bin.display()
    );
    bin
}

/// One HTTP/1.1 POST to 127.0.0.1:`port`; the response body when it came back, `None` otherwise.
fn post_blocking(port: u16, body: &str) -> Option<String> {
    let mut stream = TcpStream::connect(("127.0.0.1", port)).ok()?;
    stream.set_read_timeout(Some(Duration::from_secs(1))).ok()?;
    let request = format!(
        "POST / HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    );
    stream.write_all(request.as_bytes()).ok()?;
    let mut response = String::new();
    stream.read_to_string(&mut response).ok()?;
    response.split_once("\r\n\r\n").map(|(_, body)| body.to_owned())
}
