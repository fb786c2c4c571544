//! A paid HTTP resource written for the test suite (axum on 127.0.0.1), speaking x402 as the official SDKs do:
//! protocol v2 (402 with `PAYMENT-REQUIRED`, payment in `PAYMENT-SIGNATURE`, settlement in `PAYMENT-RESPONSE`) or
//! v1 (requirements in the 402's JSON body, `X-PAYMENT`, `X-PAYMENT-RESPONSE`). It verifies a payment itself — the
//! `accepted` entry is one it offered, unchanged; `to`, `value` and the time window match; the EIP-712 signature
//! recovers to `from` (with its own `sol!` types, not the service's) — and settles it by calling
//! `transferWithAuthorization` on the node from its own facilitator account. Every request is recorded.
//!
//! Paths: `/paid` (the paywall), `/free`, `/slow` (answers after `slow`), `/redirect` (302 to `/paid`),
//! `/large/{bytes}`, `/echo` (the request's method, headers and body as JSON).
#![allow(dead_code)] // Each test file uses a different part of this helper.

use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use alloy::primitives::{Address, B256, Bytes, Signature, TxHash, U256};
use alloy::providers::{Provider, RootProvider};
use alloy::sol_types::{SolCall, SolStruct, eip712_domain};
use axum::Router;
use axum::extract::{Path, State};
use axum::http::{HeaderMap, Method, StatusCode, Uri, header};
use axum::response::{IntoResponse, Response};
use axum::routing::{any, get};
use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use serde_json::{Value, json};
use tokio::task::JoinHandle;

use super::solidity::Eip3009Token;

alloy::sol! {
    /// EIP-3009's typed data, written out here so the paywall checks signatures independently of the service.
    struct TransferWithAuthorization {
        address from;
        address to;
        uint256 value;
        uint256 validAfter;
        uint256 validBefore;
        bytes32 nonce;
    }
}

/// How the paywall behaves.
#[derive(Debug, Clone)]
pub struct PaywallSetup {
    /// 1 or 2.
    pub version: u8,
    /// The `accepts` entries offered (see `entry_v2` / `entry_v1`), in order.
    pub accepts: Vec<Value>,
    /// The node settlements go to, and the chain id a v1 network name stands for.
    pub rpc_url: String,
    pub chain_id: u64,
    /// An account the node holds unlocked (one of anvil's development accounts) that pays the settlement gas.
    pub facilitator: Address,
    /// `false`: verify, then answer 402 again with an `error` as if settlement had failed (nothing on chain).
    pub settles: bool,
    /// How long `/slow` takes.
    pub slow: Duration,
    /// How long a settled paid request waits before it is answered (a crash test kills the payer meanwhile).
    pub answer_after_settling: Duration,
}

impl PaywallSetup {
    pub fn new(version: u8, accepts: Vec<Value>, rpc_url: &str, chain_id: u64) -> Self {
        PaywallSetup {
            version,
            accepts,
            rpc_url: rpc_url.to_owned(),
            chain_id,
            // anvil's second development account.
            facilitator: "0x70997970C51812dc3A010C7d01b50e0d17dc79C8".parse().unwrap(),
            settles: true,
            slow: Duration::from_secs(5),
            answer_after_settling: Duration::ZERO,
        }
    }
}

/// A v2 `accepts` entry for the `exact` scheme.
pub fn entry_v2(chain_id: u64, asset: Address, amount: u64, pay_to: Address, name: &str, version: &str) -> Value {
    json!({"scheme": "exact", "network": format!("eip155:{chain_id}"), "amount": amount.to_string(),
           "asset": asset.to_checksum(None), "payTo": pay_to.to_checksum(None), "maxTimeoutSeconds": 300,
           "extra": {"name": name, "version": version}})
}

/// A v1 `accepts` entry for the `exact` scheme on a named network.
pub fn entry_v1(network: &str, asset: Address, amount: u64, pay_to: Address, name: &str, version: &str) -> Value {
    json!({"scheme": "exact", "network": network, "maxAmountRequired": amount.to_string(),
           "resource": "http://127.0.0.1/paid", "description": "a paid test resource", "mimeType": "text/plain",
           "payTo": pay_to.to_checksum(None), "maxTimeoutSeconds": 300, "asset": asset.to_checksum(None),
           "extra": {"name": name, "version": version}})
}

/// A request the paywall received.
#[derive(Debug, Clone)]
pub struct Seen {
    pub method: String,
    pub path: String,
    pub query: Option<String>,
    /// Lower-case names.
    pub headers: Vec<(String, String)>,
}

impl Seen {
    pub fn header(&self, name: &str) -> Option<&str> {
        let name = name.to_ascii_lowercase();
        self.headers.iter().find(|(k, _)| *k == name).map(|(_, v)| v.as_str())
    }
}

/// A payment the paywall verified (and settled, when it settles).
#[derive(Debug, Clone)]
pub struct Verified {
    pub document: Value,
    pub from: Address,
    pub nonce: B256,
    pub settlement: Option<TxHash>,
}

struct Shared {
    setup: PaywallSetup,
    provider: RootProvider,
    seen: Mutex<Vec<Seen>>,
    /// Requests to `/paid` that carried a payment header.
    paid_requests: Mutex<usize>,
    verified: Mutex<Vec<Verified>>,
    /// The facilitator account sends one settlement at a time: anvil picks the nonce of `eth_sendTransaction`
    /// from its pending state, and two sends from one account at the same moment get the same nonce (one of them
    /// then fails with "nonce too low" or "transaction already imported").
    sending: tokio::sync::Mutex<()>,
}

/// The running paywall; stops when dropped.
pub struct Paywall {
    /// `http://127.0.0.1:<port>`
    pub base: String,
    shared: Arc<Shared>,
    task: JoinHandle<()>,
}

impl Paywall {
    pub async fn start(setup: PaywallSetup) -> Paywall {
        let shared = Arc::new(Shared {
            provider: RootProvider::new_http(setup.rpc_url.parse().expect("the node URL")),
            setup,
            seen: Mutex::new(Vec::new()),
            paid_requests: Mutex::new(0),
            verified: Mutex::new(Vec::new()),
            sending: tokio::sync::Mutex::new(()),
        });
        let router = Router::new()
            .route("/paid", any(paid))
            .route("/free", any(free))
            .route("/slow", any(slow))
            .route("/redirect", any(redirect))
            .route("/large/{bytes}", get(large))
            .route("/echo", any(echo))
            .with_state(shared.clone());
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind the paywall");
        let addr = listener.local_addr().expect("local address");
        let task = tokio::spawn(async move {
            let _ = axum::serve(listener, router).await;
        });
        Paywall {
            base: format!("http://{addr}"),
            shared,
            task,
        }
    }

    pub fn url(&self, path: &str) -> String {
        format!("{}{path}", self.base)
    }

    /// Every request received, in order.
    pub fn seen(&self) -> Vec<Seen> {
        self.shared.seen.lock().unwrap().clone()
    }

    /// Requests to `/paid` that carried a payment header.
    pub fn paid_requests(&self) -> usize {
        *self.shared.paid_requests.lock().unwrap()
    }

    /// Payments that passed verification (with their settlement transaction when settled).
    pub fn verified(&self) -> Vec<Verified> {
        self.shared.verified.lock().unwrap().clone()
    }
}

impl Drop for Paywall {
    fn drop(&mut self) {
        self.task.abort();
    }
}

fn record(shared: &Shared, method: &Method, uri: &Uri, headers: &HeaderMap) {
    shared.seen.lock().unwrap().push(Seen {
        method: method.to_string(),
        path: uri.path().to_owned(),
        query: uri.query().map(str::to_owned),
        headers: headers
            .iter()
            .map(|(k, v)| {
                (
                    k.as_str().to_owned(),
                    String::from_utf8_lossy(v.as_bytes()).into_owned(),
                )
            })
            .collect(),
    });
}

async fn free(State(shared): State<Arc<Shared>>, method: Method, uri: Uri, headers: HeaderMap) -> Response {
    record(&shared, &method, &uri, &headers);
    (StatusCode::OK, "free content").into_response()
}

async fn slow(State(shared): State<Arc<Shared>>, method: Method, uri: Uri, headers: HeaderMap) -> Response {
    record(&shared, &method, &uri, &headers);
    tokio::time::sleep(shared.setup.slow).await;
    (StatusCode::OK, "slow content").into_response()
}

async fn redirect(State(shared): State<Arc<Shared>>, method: Method, uri: Uri, headers: HeaderMap) -> Response {
    record(&shared, &method, &uri, &headers);
    (StatusCode::FOUND, [(header::LOCATION, "/paid")], "see /paid").into_response()
}

async fn large(
    State(shared): State<Arc<Shared>>,
    Path(bytes): Path<usize>,
    method: Method,
    uri: Uri,
    headers: HeaderMap,
) -> Response {
    record(&shared, &method, &uri, &headers);
    (StatusCode::OK, "a".repeat(bytes)).into_response()
}

async fn echo(
    State(shared): State<Arc<Shared>>,
    method: Method,
    uri: Uri,
    headers: HeaderMap,
    body: String,
) -> Response {
    record(&shared, &method, &uri, &headers);
    let headers: serde_json::Map<String, Value> = headers
        .iter()
        .map(|(k, v)| {
            (
                k.as_str().to_owned(),
                Value::from(String::from_utf8_lossy(v.as_bytes())),
            )
        })
        .collect();
    let answer = json!({"method": method.as_str(), "headers": headers, "body": body});
    (StatusCode::OK, [("X-Mixed-Case", "Yes")], axum::Json(answer)).into_response()
}

fn now() -> u64 {
    SystemTime::now().duration_since(UNIX_EPOCH).unwrap().as_secs()
}

/// The 402 carrying the price list (`error` when a payment was refused).
fn payment_required(setup: &PaywallSetup, error: &str) -> Response {
    match setup.version {
        2 => {
            let document = json!({"x402Version": 2, "error": error,
                "resource": {"url": "http://127.0.0.1/paid", "description": "a paid test resource",
                             "mimeType": "text/plain"},
                "accepts": setup.accepts});
            let encoded = STANDARD.encode(document.to_string());
            (
                StatusCode::PAYMENT_REQUIRED,
                [("PAYMENT-REQUIRED", encoded)],
                axum::Json(json!({})),
            )
                .into_response()
        }
        _ => {
            let document = json!({"x402Version": 1, "error": error, "accepts": setup.accepts});
            (StatusCode::PAYMENT_REQUIRED, axum::Json(document)).into_response()
        }
    }
}

async fn paid(State(shared): State<Arc<Shared>>, method: Method, uri: Uri, headers: HeaderMap) -> Response {
    record(&shared, &method, &uri, &headers);
    let setup = &shared.setup;
    let (payment_header, response_header) = match setup.version {
        2 => ("payment-signature", "PAYMENT-RESPONSE"),
        _ => ("x-payment", "X-PAYMENT-RESPONSE"),
    };
    let Some(payment) = headers.get(payment_header).and_then(|v| v.to_str().ok()) else {
        let missing = if setup.version == 2 {
            "PAYMENT-SIGNATURE"
        } else {
            "X-PAYMENT"
        };
        return payment_required(setup, &format!("{missing} header is required"));
    };
    *shared.paid_requests.lock().unwrap() += 1;
    let (document, entry, terms, signature) = match verify(setup, payment) {
        Ok(verified) => verified,
        Err(reason) => return payment_required(setup, reason),
    };
    let mut verified = Verified {
        document,
        from: terms.from,
        nonce: terms.nonce,
        settlement: None,
    };
    if !setup.settles {
        shared.verified.lock().unwrap().push(verified);
        return payment_required(setup, "settlement failed: the facilitator is unavailable");
    }
    let asset: Address = entry["asset"].as_str().unwrap().parse().unwrap();
    let call = Eip3009Token::transferWithAuthorizationCall {
        from: terms.from,
        to: terms.to,
        value: terms.value,
        validAfter: terms.validAfter,
        validBefore: terms.validBefore,
        nonce: terms.nonce,
        signature: signature.as_bytes().to_vec().into(),
    };
    let hash = match settle(&shared, asset, call.abi_encode().into()).await {
        Ok(hash) => hash,
        Err(reason) => return payment_required(setup, &reason),
    };
    verified.settlement = Some(hash);
    shared.verified.lock().unwrap().push(verified);
    tokio::time::sleep(setup.answer_after_settling).await;
    let network = entry["network"].clone();
    let answer = json!({"success": true, "transaction": hash, "network": network,
                        "payer": terms.from.to_checksum(None)});
    let encoded = STANDARD.encode(answer.to_string());
    (StatusCode::OK, [(response_header, encoded)], "paid content").into_response()
}

/// The payment document, the entry it pays, its terms and signature; or the reason it is refused.
fn verify(
    setup: &PaywallSetup,
    header: &str,
) -> Result<(Value, Value, TransferWithAuthorization, Signature), &'static str> {
    let document: Value = STANDARD
        .decode(header)
        .ok()
        .and_then(|bytes| serde_json::from_slice(&bytes).ok())
        .ok_or("invalid_payload")?;
    if document["x402Version"] != json!(setup.version) {
        return Err("invalid_x402_version");
    }
    let entry = match setup.version {
        2 => setup
            .accepts
            .iter()
            .find(|offered| **offered == document["accepted"])
            .ok_or("accepted_requirements_mismatch")?,
        _ => setup
            .accepts
            .iter()
            .find(|offered| offered["scheme"] == document["scheme"] && offered["network"] == document["network"])
            .ok_or("unsupported_scheme")?,
    };
    let auth = &document["payload"]["authorization"];
    let text = |key: &str| auth[key].as_str().ok_or("invalid_payload");
    let number = |key: &str| -> Result<U256, &'static str> {
        U256::from_str_radix(text(key)?, 10).map_err(|_| "invalid_payload")
    };
    let terms = TransferWithAuthorization {
        from: text("from")?.parse().map_err(|_| "invalid_payload")?,
        to: text("to")?.parse().map_err(|_| "invalid_payload")?,
        value: number("value")?,
        validAfter: number("validAfter")?,
        validBefore: number("validBefore")?,
        nonce: text("nonce")?.parse().map_err(|_| "invalid_payload")?,
    };
    let pay_to: Address = entry["payTo"].as_str().unwrap().parse().unwrap();
    let amount_key = if setup.version == 2 {
        "amount"
    } else {
        "maxAmountRequired"
    };
    let amount = U256::from_str_radix(entry[amount_key].as_str().unwrap(), 10).unwrap();
    if terms.to != pay_to {
        return Err("invalid_exact_evm_payload_recipient_mismatch");
    }
    if terms.value != amount {
        return Err("invalid_exact_evm_payload_authorization_value");
    }
    let now = U256::from(now());
    let longest = U256::from(entry["maxTimeoutSeconds"].as_u64().unwrap() + 5);
    if terms.validAfter > now || terms.validBefore <= now || terms.validBefore > now + longest {
        return Err("invalid_exact_evm_payload_authorization_valid_before");
    }
    let chain_id = match entry["network"].as_str().unwrap().strip_prefix("eip155:") {
        Some(id) => id.parse::<u64>().unwrap(),
        None => setup.chain_id,
    };
    let domain = eip712_domain! {
        name: entry["extra"]["name"].as_str().unwrap().to_owned(),
        version: entry["extra"]["version"].as_str().unwrap().to_owned(),
        chain_id: chain_id,
        verifying_contract: entry["asset"].as_str().unwrap().parse::<Address>().unwrap(),
    };
    let signature: Signature = document["payload"]["signature"]
        .as_str()
        .and_then(|s| s.parse().ok())
        .ok_or("invalid_exact_evm_payload_signature")?;
    let recovered = signature
        .recover_address_from_prehash(&terms.eip712_signing_hash(&domain))
        .map_err(|_| "invalid_exact_evm_payload_signature")?;
    if recovered != terms.from {
        return Err("invalid_exact_evm_payload_signature");
    }
    Ok((document.clone(), entry.clone(), terms, signature))
}

/// Sends the settlement from the facilitator account; its hash once mined successfully, or why not.
async fn settle(shared: &Shared, token: Address, data: Bytes) -> Result<TxHash, String> {
    let provider = &shared.provider;
    let request = json!({"from": shared.setup.facilitator, "to": token, "data": data, "gas": "0x7a120"});
    let hash: TxHash = {
        let _turn = shared.sending.lock().await;
        provider
            .raw_request("eth_sendTransaction".into(), (request,))
            .await
            .map_err(|e| format!("settlement not sent: {e}"))?
    };
    // Polled every 2 ms (for up to 10 s): anvil mines a transaction right after accepting it, and the benchmark
    // (bench/x402.rs) counts this wait as the paywall's own time.
    for _ in 0..5000 {
        let receipt = provider
            .get_transaction_receipt(hash)
            .await
            .map_err(|e| format!("settlement receipt unreadable: {e}"))?;
        if let Some(receipt) = receipt {
            return if receipt.status() {
                Ok(hash)
            } else {
                Err("settlement reverted".into())
            };
        }
        tokio::time::sleep(Duration::from_millis(2)).await;
    }
    Err("settlement not mined within 10 s".into())
}
