//! A JSON-RPC proxy in front of anvil that behaves like an OP-stack node as far as the L1 data fee goes (anvil charges
//! none, even with `--network optimism`): receipts gain `l1Fee` (a fixed price per byte of the signed transaction),
//! which the proxy also takes from the sender's balance (`anvil_setBalance`) the first time the receipt is read, and
//! `eth_call`s to the GasPriceOracle predeploy answer `getL1Fee(bytes)` as the real one does (the unsigned encoding
//! plus 68 bytes for the signature), at the same price.
#![allow(dead_code)] // Not every test reads every figure.

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex};

use alloy::primitives::{Address, Bytes, U256, address};
use alloy::sol_types::SolCall;
use axum::Json;
use axum::extract::State;
use serde_json::{Value, json};

/// The GasPriceOracle predeploy of OP-stack chains.
pub const GAS_PRICE_ORACLE: Address = address!("0x420000000000000000000000000000000000000F");

/// What the proxy charges per byte of a transaction's encoding, in wei (0.000001 ETH: the L1 fee of a plain
/// transfer then outweighs its L2 gas on anvil, as on base).
pub const WEI_PER_BYTE: u64 = 1_000_000_000_000;

alloy::sol! {
    function getL1Fee(bytes _data) external view returns (uint256);
}

#[derive(Clone)]
struct Proxy {
    client: reqwest::Client,
    upstream: String,
    /// The L1 fee of each transaction sent through the proxy, by lower-case hash.
    fees: Arc<Mutex<HashMap<String, U256>>>,
    /// Hashes whose L1 fee was already taken from the sender.
    charged: Arc<Mutex<HashSet<String>>>,
}

/// A running proxy; it stops with the test's runtime.
pub struct L1Proxy {
    url: String,
    fees: Arc<Mutex<HashMap<String, U256>>>,
}

impl L1Proxy {
    pub async fn start(upstream: &str) -> L1Proxy {
        let proxy = Proxy {
            client: reqwest::Client::new(),
            upstream: upstream.to_string(),
            fees: Arc::default(),
            charged: Arc::default(),
        };
        let fees = proxy.fees.clone();
        let router = axum::Router::new()
            .route("/", axum::routing::post(handle))
            .with_state(proxy);
        let url = super::relay::serve(router).await;
        L1Proxy { url, fees }
    }

    /// The URL to give the service as `RPC_URL_<CHAIN>`.
    pub fn url(&self) -> &str {
        &self.url
    }

    /// The L1 fee the proxy reports (and charges) for a transaction it relayed.
    pub fn l1_fee(&self, hash: &str) -> U256 {
        self.fees
            .lock()
            .unwrap()
            .get(&hash.to_lowercase())
            .copied()
            .unwrap_or_else(|| panic!("{hash} went through the proxy"))
    }
}

fn per_byte(bytes: usize) -> U256 {
    U256::from(bytes) * U256::from(WEI_PER_BYTE)
}

async fn handle(State(proxy): State<Proxy>, Json(request): Json<Value>) -> Json<Value> {
    match request {
        Value::Array(batch) => {
            let mut answers = Vec::with_capacity(batch.len());
            for call in batch {
                answers.push(one(&proxy, call).await);
            }
            Json(Value::Array(answers))
        }
        call => Json(one(&proxy, call).await),
    }
}

async fn one(proxy: &Proxy, call: Value) -> Value {
    let method = call["method"].as_str().unwrap_or_default().to_string();
    if method == "eth_call"
        && let Some(answer) = oracle_answer(&call)
    {
        return answer;
    }
    let mut answer = forward(proxy, &call).await;
    match method.as_str() {
        "eth_sendRawTransaction" => {
            if let (Some(hash), Some(raw)) = (answer["result"].as_str(), call["params"][0].as_str()) {
                let len = raw.trim_start_matches("0x").len() / 2;
                proxy.fees.lock().unwrap().insert(hash.to_lowercase(), per_byte(len));
            }
        }
        "eth_getTransactionReceipt" if answer["result"].is_object() => {
            let hash = answer["result"]["transactionHash"]
                .as_str()
                .unwrap_or_default()
                .to_lowercase();
            let fee = proxy.fees.lock().unwrap().get(&hash).copied().unwrap_or_default();
            answer["result"]["l1Fee"] = json!(format!("{fee:#x}"));
            let first = proxy.charged.lock().unwrap().insert(hash);
            if first && !fee.is_zero() {
                let from = answer["result"]["from"].as_str().unwrap_or_default().to_string();
                charge(proxy, &from, fee).await;
            }
        }
        _ => {}
    }
    answer
}

/// `getL1Fee(bytes)` on the oracle's address: (length + 68) × the price per byte.
fn oracle_answer(call: &Value) -> Option<Value> {
    let tx = &call["params"][0];
    let to: Address = tx["to"].as_str()?.parse().ok()?;
    if to != GAS_PRICE_ORACLE {
        return None;
    }
    let input = tx["input"].as_str().or_else(|| tx["data"].as_str())?;
    let input: Bytes = input.parse().ok()?;
    let decoded = getL1FeeCall::abi_decode(&input).ok()?;
    let fee = per_byte(decoded._data.len() + 68);
    let result = Bytes::from(getL1FeeCall::abi_encode_returns(&fee));
    Some(json!({"jsonrpc": "2.0", "id": call["id"], "result": result}))
}

/// Takes `fee` from `from`'s balance on the node, as an OP-stack chain does with the L1 data fee.
async fn charge(proxy: &Proxy, from: &str, fee: U256) {
    let balance = forward(
        proxy,
        &json!({"jsonrpc": "2.0", "id": 1, "method": "eth_getBalance", "params": [from, "latest"]}),
    )
    .await;
    let balance: U256 = balance["result"]
        .as_str()
        .and_then(|b| b.parse().ok())
        .expect("a balance");
    let next = format!("{:#x}", balance - fee);
    forward(
        proxy,
        &json!({"jsonrpc": "2.0", "id": 1, "method": "anvil_setBalance", "params": [from, next]}),
    )
    .await;
}

async fn forward(proxy: &Proxy, call: &Value) -> Value {
    proxy
        .client
        .post(&proxy.upstream)
        .json(call)
        .send()
        .await
        .expect("anvil answers")
        .json()
        .await
        .expect("anvil answers JSON")
}
