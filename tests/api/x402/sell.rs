//! Selling over x402, settled by agentd (docs/api.md §23), against the REAL official x402 SDKs, unmodified: the
//! Python SDK's buyer (`tests/x402/sdk_buyer.py`: `x402ClientSync` with the exact EVM scheme behind its `requests`
//! adapter), the npm SDK's buyer (`test-tools/x402-buyer.mjs`: `@x402/fetch` with `@x402/evm` and a viem account, an
//! independent second implementation) and the Python SDK's resource server (`tests/x402/sdk_seller.py`: its Flask
//! middleware with `HTTPFacilitatorClientSync` pointed at the agent's own facilitator). The token is a real EIP-3009
//! contract at USDC's base address on anvil. Every test reads what the chain shows — balances, `authorizationState`,
//! the agent's nonce, the settlement's receipt — not only what the service says.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::{Arc, Mutex};
use std::time::{SystemTime, UNIX_EPOCH};

use alloy::primitives::{Address, B256, Bytes, TxHash, U256};
use alloy::providers::Provider;
use alloy::signers::SignerSync;
use alloy::signers::local::PrivateKeySigner;
use alloy::sol_types::{SolCall, SolStruct, eip712_domain};
use axum::Router;
use axum::http::{HeaderMap, StatusCode as AxumStatus};
use axum::response::IntoResponse;
use axum::routing::get;
use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use futures::future::join_all;
use reqwest::{Method, StatusCode};
use serde_json::{Value, json};
use tokio::task::JoinHandle;

use crate::anvil::Anvil;
use crate::helpers::chain::{BASE_CHAIN_ID, funded_agent, node_cost, transfer_app, wallet};
use crate::helpers::sdk_paywall::python;
use crate::helpers::sdk_seller::SdkSeller;
use crate::helpers::solidity::{
    Eip3009Token, USDC_BASE, authorization_state, mint, send_as, token_balance, usdc_on_base,
};
use crate::helpers::{CreatedAgent, TestApp, TestResponse};
use crate::money::policy::{ADMIN, call};

/// The offers' price, 0.01 USDC, in base units.
const PRICE: u64 = 10_000;
/// What the buyer holds at the start, in base units (1 USDC).
const PAYER_FUNDS: u64 = 1_000_000;
const NETWORK: &str = "eip155:8453";
/// What the stored-content offers serve.
const CONTENT: &str = r#"{"answer":42}"#;
/// What the upstream answers on `/data`, and a body of its failure that must never reach a buyer.
const UPSTREAM_BODY: &str = r#"{"forecast":"sunny"}"#;
const UPSTREAM_FAILURE: &str = "upstream internal failure 7f3a";

alloy::sol! {
    /// EIP-3009's typed data, written out here to sign altered payments independently of the service.
    struct TransferWithAuthorization {
        address from;
        address to;
        uint256 value;
        uint256 validAfter;
        uint256 validBefore;
        bytes32 nonce;
    }
}

/// The headers of each request an upstream received (lower-case names), in order.
type Seen = Arc<Mutex<Vec<Vec<(String, String)>>>>;

/// A small local upstream an offer fronts: `/data` answers 200 with JSON, an `ETag` and headers a buyer must not
/// see; `/broken` answers 500. Every request's headers are recorded.
struct Upstream {
    base: String,
    seen: Seen,
    task: JoinHandle<()>,
}

impl Upstream {
    async fn start() -> Upstream {
        let seen: Seen = Arc::default();
        let record = |seen: Seen, headers: &HeaderMap| {
            let headers = headers
                .iter()
                .map(|(k, v)| (k.as_str().to_owned(), v.to_str().unwrap_or_default().to_owned()))
                .collect();
            seen.lock().unwrap().push(headers);
        };
        let (data_seen, broken_seen) = (seen.clone(), seen.clone());
        let router = Router::new()
            .route(
                "/data",
                get(move |headers: HeaderMap| async move {
                    record(data_seen, &headers);
                    (
                        [
                            ("content-type", "application/json"),
                            ("etag", "\"v1\""),
                            ("x-upstream-secret", "hidden"),
                            ("set-cookie", "session=upstream"),
                        ],
                        UPSTREAM_BODY,
                    )
                        .into_response()
                }),
            )
            .route(
                "/broken",
                get(move |headers: HeaderMap| async move {
                    record(broken_seen, &headers);
                    (AxumStatus::INTERNAL_SERVER_ERROR, UPSTREAM_FAILURE).into_response()
                }),
            );
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind the upstream");
        let addr = listener.local_addr().expect("local address");
        let task = tokio::spawn(async move {
            let _ = axum::serve(listener, router).await;
        });
        Upstream {
            base: format!("http://{addr}"),
            seen,
            task,
        }
    }

    fn url(&self, path: &str) -> String {
        format!("{}{path}", self.base)
    }

    /// The headers of every request received, in order.
    fn seen(&self) -> Vec<Vec<(String, String)>> {
        self.seen.lock().unwrap().clone()
    }
}

impl Drop for Upstream {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// An app on anvil as base with `OFFER_ALLOW_PRIVATE` (the upstream is local) and `ADMIN_TOKEN` (owner authority
/// with the admin bearer), a selling agent holding 1 ETH for its settlements' gas, USDC (EIP-3009) at its base
/// address, a buyer holding `PAYER_FUNDS` of it and no ETH, and an upstream.
struct Selling {
    anvil: Anvil,
    app: TestApp,
    agent: CreatedAgent,
    usdc: Address,
    payer: PrivateKeySigner,
    upstream: Upstream,
}

async fn selling() -> Selling {
    selling_with(&[]).await
}

/// `selling` with more app variables.
async fn selling_with(extra: &[(&str, &str)]) -> Selling {
    let anvil = Anvil::start(BASE_CHAIN_ID);
    let mut vars = vec![("OFFER_ALLOW_PRIVATE", "true"), ("ADMIN_TOKEN", ADMIN)];
    vars.extend_from_slice(extra);
    let app = transfer_app(&anvil, &vars).await;
    let agent = funded_agent(&app, &anvil, Some(0.5)).await;
    let usdc = usdc_on_base(&anvil).await;
    let payer = PrivateKeySigner::random();
    mint(&anvil, usdc, payer.address(), U256::from(PAYER_FUNDS)).await;
    Selling {
        anvil,
        app,
        agent,
        usdc,
        payer,
        upstream: Upstream::start().await,
    }
}

impl Selling {
    async fn usdc_of(&self, owner: Address) -> U256 {
        token_balance(&self.anvil, self.usdc, owner).await
    }

    /// `POST …/offers` with owner authority: USDC on base at `PRICE`, `resource` and `extra` fields; insists on 201.
    async fn offer(&self, resource: Value, extra: Value) -> Value {
        let mut body = json!({"chain": "base", "asset": "USDC", "price": "0.01", "description": "a test offer",
            "resource": resource, "gas_per_day": "0.01"});
        for (key, value) in extra.as_object().into_iter().flatten() {
            body[key] = value.clone();
        }
        let path = format!("/api/agents/{}/offers", self.agent.id);
        let (status, offer) = call(&self.app, &self.agent, true, Method::POST, &path, Some(body)).await;
        assert_eq!(status, StatusCode::CREATED, "creating an offer: {offer}");
        let id = offer["id"].as_str().expect("the offer has an id");
        assert_eq!(offer["url"], self.app.url(&format!("/x402/{id}")), "{offer}");
        assert_eq!(offer["pay_to"], wallet(&self.agent).to_checksum(None), "{offer}");
        assert_eq!(offer["status"], "active", "{offer}");
        offer
    }

    async fn content_offer(&self) -> Value {
        self.offer(
            json!({"content": CONTENT, "content_type": "application/json"}),
            json!({}),
        )
        .await
    }

    /// `GET …/income` as the agent.
    async fn income(&self) -> Vec<Value> {
        let path = format!("/api/agents/{}/income", self.agent.id);
        let (status, body) = self
            .app
            .request(Method::GET, &path, Some(&self.agent.token), None)
            .await;
        assert_eq!(status, StatusCode::OK, "income: {body}");
        body["income"]
            .as_array()
            .unwrap_or_else(|| panic!("{{income: [...]}}: {body}"))
            .clone()
    }

    /// Drives the watcher until the income lists `count` records, all with `status`; returns them.
    async fn income_once(&self, count: usize, status: &str) -> Vec<Value> {
        self.app
            .settle_until(async || {
                let income = self.income().await;
                match income.len() == count && income.iter().all(|i| i["status"] == status) {
                    true => Ok(income),
                    false => Err(format!("expected {count} {status} income records, have {income:#?}")),
                }
            })
            .await
    }

    /// Sends `header` as `PAYMENT-SIGNATURE` to `url` (a buyer written by hand, for altered and replayed payments).
    async fn pay_with(&self, url: &str, header: &str) -> TestResponse {
        let builder = self.app.client.get(url).header("PAYMENT-SIGNATURE", header);
        self.app.send(builder).await
    }

    /// The chain after nothing was settled: the agent sent no transaction and holds no USDC, the buyer holds
    /// `payer_funds` and the authorization `nonce` is unused.
    async fn assert_nothing_settled(&self, payer_funds: u64, nonce: B256) {
        let agent = wallet(&self.agent);
        assert_eq!(self.anvil.nonce(agent).await, 0, "the agent sent nothing on chain");
        assert_eq!(self.usdc_of(agent).await, U256::ZERO, "the agent received nothing");
        assert_eq!(self.usdc_of(self.payer.address()).await, U256::from(payer_funds));
        assert!(
            !authorization_state(&self.anvil, self.usdc, self.payer.address(), nonce).await,
            "the authorization is unused on chain"
        );
    }

    /// The settlement transaction `hash` as the node has it: sent by the agent's wallet to the token, succeeded, and
    /// what it cost the agent.
    async fn assert_settled_by_agent(&self, hash: TxHash) -> U256 {
        let receipt = self.anvil.receipt(hash).await;
        assert!(receipt.status(), "the settlement {hash} succeeded");
        assert_eq!(
            receipt.from,
            wallet(&self.agent),
            "the agent's wallet sent the settlement"
        );
        assert_eq!(receipt.to, Some(self.usdc), "the settlement called the token");
        let (cost, _) = node_cost(&self.anvil, hash).await;
        cost
    }
}

fn decode(header: &str) -> Value {
    let bytes = STANDARD
        .decode(header)
        .unwrap_or_else(|e| panic!("{header} is base64: {e}"));
    serde_json::from_slice(&bytes).unwrap_or_else(|e| panic!("{header} is base64 JSON: {e}"))
}

fn encode(document: &Value) -> String {
    STANDARD.encode(document.to_string())
}

fn now() -> u64 {
    SystemTime::now().duration_since(UNIX_EPOCH).unwrap().as_secs()
}

fn key_hex(signer: &PrivateKeySigner) -> String {
    format!("0x{}", alloy::hex::encode(signer.to_bytes()))
}

/// The authorization nonce of a payment document (`PAYMENT-SIGNATURE` decoded).
fn nonce_of(payment: &Value) -> B256 {
    payment["payload"]["authorization"]["nonce"]
        .as_str()
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("a 32-byte nonce in {payment}"))
}

/// The `error` a 402 refusal carries in its `PAYMENT-REQUIRED`.
#[track_caller]
fn refusal(response: &TestResponse) -> String {
    assert_eq!(
        response.status,
        StatusCode::PAYMENT_REQUIRED,
        "a refusal is a 402: {}",
        response.text
    );
    let header = response
        .headers
        .get("payment-required")
        .unwrap_or_else(|| panic!("a refusal carries PAYMENT-REQUIRED: {:?}", response.headers));
    let required = decode(header.to_str().unwrap());
    required["error"]
        .as_str()
        .unwrap_or_else(|| panic!("PAYMENT-REQUIRED names its error: {required}"))
        .to_owned()
}

/// Signs `payment`'s authorization again with `signer` under USDC's domain on base, as a buyer would.
fn sign_again(payment: &mut Value, signer: &PrivateKeySigner) {
    let a = &payment["payload"]["authorization"];
    let text = |field: &str| a[field].as_str().unwrap_or_else(|| panic!("{field} in {a}")).to_owned();
    let message = TransferWithAuthorization {
        from: text("from").parse().unwrap(),
        to: text("to").parse().unwrap(),
        value: text("value").parse().unwrap(),
        validAfter: text("validAfter").parse().unwrap(),
        validBefore: text("validBefore").parse().unwrap(),
        nonce: text("nonce").parse().unwrap(),
    };
    let domain = eip712_domain! {
        name: "USD Coin".to_owned(),
        version: "2".to_owned(),
        chain_id: BASE_CHAIN_ID,
        verifying_contract: USDC_BASE.parse::<Address>().unwrap(),
    };
    let signature = signer
        .sign_hash_sync(&message.eip712_signing_hash(&domain))
        .expect("signing");
    payment["payload"]["signature"] = json!(format!("0x{}", alloy::hex::encode(signature.as_bytes())));
}

/// Runs `program args…` from the repository root and returns the JSON document of its last line of output.
async fn run_json(program: PathBuf, args: Vec<String>) -> Value {
    let shown = format!("{} {}", program.display(), args.join(" "));
    // The buyer talks to the app running on this test's runtime: it must not block that runtime.
    let output = tokio::task::spawn_blocking(move || {
        Command::new(&program)
            .args(&args)
            .current_dir(env!("CARGO_MANIFEST_DIR"))
            .output()
    })
    .await
    .expect("the buyer's thread")
    .unwrap_or_else(|e| panic!("could not run {shown}: {e}"));
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        output.status.success(),
        "{shown} failed ({}):\n{stdout}\n{stderr}",
        output.status
    );
    let last = stdout.lines().last().unwrap_or_default();
    serde_json::from_str(last).unwrap_or_else(|e| panic!("{shown} printed no JSON ({e}):\n{stdout}\n{stderr}"))
}

/// The official Python SDK's buyer: `pay` (the whole exchange) or `sign` (the payment for the 402, not sent).
async fn python_buyer(mode: &str, url: &str, payer: &PrivateKeySigner) -> Value {
    let python = python();
    assert!(
        python.exists(),
        "the x402 Python SDK is not installed at {} (scripts/install.sh x402 installs it)",
        python.display()
    );
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/x402/sdk_buyer.py");
    let args = vec![
        script.display().to_string(),
        mode.to_owned(),
        url.to_owned(),
        key_hex(payer),
        NETWORK.to_owned(),
    ];
    run_json(python, args).await
}

/// The official npm SDK's buyer (`@x402/fetch`): the whole exchange.
async fn npm_buyer(url: &str, payer: &PrivateKeySigner) -> Value {
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("test-tools/x402-buyer.mjs");
    let args = vec![
        script.display().to_string(),
        url.to_owned(),
        key_hex(payer),
        NETWORK.to_owned(),
    ];
    run_json(PathBuf::from("node"), args).await
}

/// Checks a buyer's paid answer (status 200, the settlement in `PAYMENT-RESPONSE`, the headers §23 sets) and returns
/// the settlement transaction and the payment the buyer sent.
#[track_caller]
fn paid(answer: &Value, payer: &PrivateKeySigner) -> (TxHash, Value) {
    assert_eq!(answer["status"], 200, "the buyer was served: {answer}");
    let settled = &answer["payment_response"];
    assert_eq!(settled["success"], true, "{answer}");
    assert_eq!(settled["network"], NETWORK, "{answer}");
    let named: Address = settled["payer"].as_str().unwrap().parse().unwrap();
    assert_eq!(named, payer.address(), "{answer}");
    let transaction = settled["transaction"]
        .as_str()
        .and_then(|t| t.parse().ok())
        .unwrap_or_else(|| panic!("a transaction hash in PAYMENT-RESPONSE: {answer}"));
    let sent = decode(
        answer["payment_signature"]
            .as_str()
            .unwrap_or_else(|| panic!("the buyer sent PAYMENT-SIGNATURE: {answer}")),
    );
    (transaction, sent)
}

/// The headers an offer's paid answer carries (§23): private, nosniff, a sandbox CSP.
#[track_caller]
fn assert_served_headers(answer: &Value) {
    let headers = &answer["headers"];
    assert_eq!(headers["cache-control"], "private", "{answer}");
    assert_eq!(headers["x-content-type-options"], "nosniff", "{answer}");
    let csp = headers["content-security-policy"].as_str().unwrap_or_default();
    assert!(csp.contains("sandbox"), "a sandbox CSP: {answer}");
}

/// Checks an income record against the chain: `amount`, `payer`, `nonce`, `settled`, settled by agentd in `tx`,
/// and its `fee` what the node says the settlement cost.
#[track_caller]
fn assert_income(record: &Value, payer: Address, nonce: B256, tx: TxHash, cost: U256) {
    assert_eq!(record["status"], "settled", "{record}");
    assert_eq!(record["settled_by"], "agentd", "{record}");
    assert_eq!(record["chain"], "base", "{record}");
    assert_eq!(record["asset"], "USDC", "{record}");
    assert_eq!(record["amount"], "0.01", "{record}");
    let named: Address = record["payer"].as_str().unwrap().parse().unwrap();
    assert_eq!(named, payer, "{record}");
    let recorded: B256 = record["nonce"].as_str().unwrap().parse().unwrap();
    assert_eq!(recorded, nonce, "{record}");
    let hash: TxHash = record["tx_hash"].as_str().unwrap().parse().unwrap();
    assert_eq!(hash, tx, "{record}");
    let fee = agentd::domain::amount::parse_units(record["fee"].as_str().unwrap(), 18)
        .unwrap_or_else(|e| panic!("fee is a decimal in ETH: {e:?} {record}"));
    assert_eq!(fee, cost, "the fee is what the node charged: {record}");
    assert!(!record["settled_at"].is_null(), "{record}");
}

#[tokio::test]
async fn the_official_python_client_pays_a_stored_body_and_an_upstream_and_the_chain_shows_the_agent_paid() {
    let s = selling().await;
    let stored = s.content_offer().await;
    let fronted = s.offer(json!({"url": s.upstream.url("/data")}), json!({})).await;

    // What any client reads first: a 402 with the offer's terms, not to be cached.
    let url = stored["url"].as_str().unwrap();
    let unpaid = s.app.send(s.app.client.get(url)).await;
    assert_eq!(unpaid.status, StatusCode::PAYMENT_REQUIRED, "{}", unpaid.text);
    assert_eq!(unpaid.headers["cache-control"], "no-store");
    let required = decode(unpaid.headers["payment-required"].to_str().unwrap());
    assert_eq!(required["x402Version"], 2, "{required}");
    assert_eq!(required["resource"]["url"], url, "{required}");
    assert_eq!(
        required["accepts"],
        json!([{"scheme": "exact", "network": NETWORK, "amount": PRICE.to_string(), "asset": USDC_BASE,
            "payTo": wallet(&s.agent).to_checksum(None), "maxTimeoutSeconds": 300,
            "extra": {"name": "USD Coin", "version": "2"}}]),
        "{required}"
    );

    // The stored body.
    let answer = python_buyer("pay", url, &s.payer).await;
    let (first_tx, first) = paid(&answer, &s.payer);
    assert_eq!(answer["body"], CONTENT, "{answer}");
    assert_eq!(answer["headers"]["content-type"], "application/json", "{answer}");
    assert_served_headers(&answer);
    let first_cost = s.assert_settled_by_agent(first_tx).await;
    assert_eq!(s.usdc_of(wallet(&s.agent)).await, U256::from(PRICE));
    assert!(authorization_state(&s.anvil, s.usdc, s.payer.address(), nonce_of(&first)).await);

    // The upstream: fetched once, with nothing of the buyer's request (`forward` is `[]`), and only its
    // Content-Type, Content-Length, ETag and Last-Modified passed on.
    let answer = python_buyer("pay", fronted["url"].as_str().unwrap(), &s.payer).await;
    let (second_tx, second) = paid(&answer, &s.payer);
    assert_eq!(answer["body"], UPSTREAM_BODY, "{answer}");
    assert_eq!(answer["headers"]["etag"], "\"v1\"", "{answer}");
    assert!(answer["headers"].get("x-upstream-secret").is_none(), "{answer}");
    assert!(answer["headers"].get("set-cookie").is_none(), "{answer}");
    assert_served_headers(&answer);
    let seen = s.upstream.seen();
    assert_eq!(seen.len(), 1, "the upstream was fetched once: {seen:?}");
    assert!(
        !seen[0].iter().any(|(name, _)| name.contains("payment")),
        "no payment header reached the upstream: {seen:?}"
    );
    let second_cost = s.assert_settled_by_agent(second_tx).await;

    // The chain: the agent's wallet holds both prices, the buyer paid them and nothing else, both authorizations
    // are used, and the agent sent exactly the two settlements.
    assert_eq!(s.usdc_of(wallet(&s.agent)).await, U256::from(2 * PRICE));
    assert_eq!(s.usdc_of(s.payer.address()).await, U256::from(PAYER_FUNDS - 2 * PRICE));
    assert!(authorization_state(&s.anvil, s.usdc, s.payer.address(), nonce_of(&second)).await);
    assert_eq!(s.anvil.nonce(wallet(&s.agent)).await, 2);

    let income = s.income_once(2, "settled").await;
    let by_offer = |offer: &Value| {
        income
            .iter()
            .find(|i| i["offer_id"] == offer["id"])
            .unwrap_or_else(|| panic!("an income record of {offer}: {income:#?}"))
            .clone()
    };
    let payer = s.payer.address();
    assert_income(&by_offer(&stored), payer, nonce_of(&first), first_tx, first_cost);
    assert_income(&by_offer(&fronted), payer, nonce_of(&second), second_tx, second_cost);
}

#[tokio::test]
async fn an_official_python_resource_server_sells_through_the_agents_own_facilitator() {
    let s = selling().await;
    let path = format!("/api/agents/{}/facilitator-tokens", s.agent.id);
    let (status, created) = call(&s.app, &s.agent, true, Method::POST, &path, None).await;
    assert_eq!(status, StatusCode::CREATED, "{created}");
    let token = created["token"].as_str().unwrap().to_owned();
    assert!(token.starts_with("fac_"), "{created}");

    // The agent token is not a facilitator token.
    let supported = format!("/api/agents/{}/x402/supported", s.agent.id);
    let (status, body) = s.app.request(Method::GET, &supported, Some(&s.agent.token), None).await;
    assert!(
        status == StatusCode::UNAUTHORIZED || status == StatusCode::FORBIDDEN,
        "{status} {body}"
    );

    let facilitator = s.app.url(&format!("/api/agents/{}/x402", s.agent.id));
    let pay_to = wallet(&s.agent).to_checksum(None);
    let shown_once = token.clone();
    // Started off this test's runtime: the SDK asks the app's `/supported` while it starts.
    let seller = tokio::task::spawn_blocking(move || SdkSeller::start(&facilitator, &token, &pay_to, "$0.01", NETWORK))
        .await
        .expect("the seller starts");

    let answer = python_buyer("pay", &seller.url("/report"), &s.payer).await;
    assert_eq!(
        answer["status"],
        200,
        "{answer}\nthe seller's log:\n{}",
        seller.stderr()
    );
    let (tx, sent) = paid(&answer, &s.payer);
    assert!(
        answer["body"].as_str().unwrap().contains("quarterly numbers"),
        "{answer}"
    );
    assert_eq!(sent["accepted"]["payTo"], wallet(&s.agent).to_checksum(None), "{sent}");

    // agentd settled it from the agent's wallet: the wallet holds the price and the authorization is used.
    let cost = s.assert_settled_by_agent(tx).await;
    assert_eq!(s.usdc_of(wallet(&s.agent)).await, U256::from(PRICE));
    assert_eq!(s.usdc_of(s.payer.address()).await, U256::from(PAYER_FUNDS - PRICE));
    assert!(authorization_state(&s.anvil, s.usdc, s.payer.address(), nonce_of(&sent)).await);
    assert_eq!(s.anvil.nonce(wallet(&s.agent)).await, 1);

    let income = s.income_once(1, "settled").await;
    assert_eq!(income[0]["offer_id"], Value::Null, "{income:#?}");
    assert_income(&income[0], s.payer.address(), nonce_of(&sent), tx, cost);

    // Verify changes nothing; and agentd is no public facilitator: requirements paying anyone else are not valid.
    let made = python_buyer("sign", &seller.url("/report"), &s.payer).await;
    let payment = decode(made["payment_signature"].as_str().unwrap());
    let verify = async |requirements: Value| {
        let body = json!({"x402Version": 2, "paymentPayload": payment, "paymentRequirements": requirements});
        let url = s.app.url(&format!("/api/agents/{}/x402/verify", s.agent.id));
        let response = s
            .app
            .send(s.app.client.post(url).bearer_auth(&shown_once).json(&body))
            .await;
        assert_eq!(response.status, StatusCode::OK, "{}", response.text);
        response.body
    };
    let valid = verify(payment["accepted"].clone()).await;
    assert_eq!(valid["isValid"], true, "{valid}");
    let named: Address = valid["payer"].as_str().unwrap().parse().unwrap();
    assert_eq!(named, s.payer.address(), "{valid}");
    let mut elsewhere = payment["accepted"].clone();
    elsewhere["payTo"] = json!(PrivateKeySigner::random().address().to_checksum(None));
    let refused = verify(elsewhere).await;
    assert_eq!(refused["isValid"], false, "{refused}");
    assert_eq!(refused["invalidReason"], "pay_to_not_agent", "{refused}");
    assert!(!authorization_state(&s.anvil, s.usdc, s.payer.address(), nonce_of(&payment)).await);
    assert_eq!(s.usdc_of(wallet(&s.agent)).await, U256::from(PRICE));
    assert_eq!(s.anvil.nonce(wallet(&s.agent)).await, 1, "verify sent nothing");

    let (status, tokens) = call(&s.app, &s.agent, true, Method::GET, &path, None).await;
    assert_eq!(status, StatusCode::OK, "{tokens}");
    assert!(
        !tokens.to_string().contains(&shown_once),
        "the token is shown once: {tokens}"
    );
    let listed = tokens
        .as_array()
        .or_else(|| tokens["facilitator_tokens"].as_array())
        .or_else(|| tokens["tokens"].as_array())
        .unwrap_or_else(|| panic!("a list of facilitator tokens: {tokens}"));
    assert_eq!(listed.len(), 1, "{tokens}");
    assert!(!listed[0]["last_used_at"].is_null(), "the token was used: {tokens}");
}

#[tokio::test]
async fn the_official_npm_client_pays_an_offer() {
    let s = selling().await;
    let offer = s.content_offer().await;
    let answer = npm_buyer(offer["url"].as_str().unwrap(), &s.payer).await;
    let (tx, sent) = paid(&answer, &s.payer);
    assert_eq!(answer["body"], CONTENT, "{answer}");
    assert_served_headers(&answer);

    let cost = s.assert_settled_by_agent(tx).await;
    assert_eq!(s.usdc_of(wallet(&s.agent)).await, U256::from(PRICE));
    assert_eq!(s.usdc_of(s.payer.address()).await, U256::from(PAYER_FUNDS - PRICE));
    assert!(authorization_state(&s.anvil, s.usdc, s.payer.address(), nonce_of(&sent)).await);
    assert_eq!(s.anvil.nonce(wallet(&s.agent)).await, 1);
    let income = s.income_once(1, "settled").await;
    assert_eq!(income[0]["offer_id"], offer["id"], "{income:#?}");
    assert_income(&income[0], s.payer.address(), nonce_of(&sent), tx, cost);
}

#[tokio::test]
async fn each_refusal_answers_402_with_its_reason_and_nothing_reaches_the_chain_or_the_upstream() {
    let s = selling().await;
    let offer = s.offer(json!({"url": s.upstream.url("/data")}), json!({})).await;
    let url = offer["url"].as_str().unwrap();
    // A good payment, made by the official SDK and not sent: every refused one below is it, altered.
    let made = python_buyer("sign", url, &s.payer).await;
    let good_header = made["payment_signature"].as_str().unwrap().to_owned();
    let good = decode(&good_header);
    let other = PrivateKeySigner::random().address().to_checksum(None);
    let now = now();

    // A nonce of the buyer's already used on chain, outside agentd: the buyer paid a third party with it.
    let used_nonce = alloy::primitives::keccak256(uuid::Uuid::new_v4().as_bytes());
    let mut elsewhere = good.clone();
    elsewhere["payload"]["authorization"]["to"] = json!(other);
    elsewhere["payload"]["authorization"]["value"] = json!("1");
    elsewhere["payload"]["authorization"]["nonce"] = json!(used_nonce.to_string());
    sign_again(&mut elsewhere, &s.payer);
    let a = &elsewhere["payload"]["authorization"];
    let data = Eip3009Token::transferWithAuthorizationCall {
        from: s.payer.address(),
        to: other.parse().unwrap(),
        value: U256::from(1),
        validAfter: U256::ZERO,
        validBefore: a["validBefore"].as_str().unwrap().parse().unwrap(),
        nonce: used_nonce,
        signature: elsewhere["payload"]["signature"]
            .as_str()
            .unwrap()
            .parse::<Bytes>()
            .unwrap(),
    }
    .abi_encode();
    let (_, succeeded) = send_as(&s.anvil, Anvil::DEV_ADDRESS.parse().unwrap(), s.usdc, data.into()).await;
    assert!(succeeded, "the third party's settlement succeeded");
    assert!(authorization_state(&s.anvil, s.usdc, s.payer.address(), used_nonce).await);
    let payer_funds = PAYER_FUNDS - 1;

    // A buyer holding less than the price, whose payment the SDK makes just as well.
    let poor = PrivateKeySigner::random();
    mint(&s.anvil, s.usdc, poor.address(), U256::from(PRICE - 1)).await;
    let poor_payment = python_buyer("sign", url, &poor).await;

    let altered = |change: &dyn Fn(&mut Value), signer: Option<&PrivateKeySigner>| {
        let mut payment = good.clone();
        change(&mut payment);
        if let Some(signer) = signer {
            sign_again(&mut payment, signer);
        }
        encode(&payment)
    };
    let payer = Some(&s.payer);
    let stranger = PrivateKeySigner::random();
    let cases: Vec<(&str, String, &str)> = vec![
        ("not base64 JSON", "not a payment!".to_owned(), "invalid_payload"),
        (
            "not the v2 shape",
            encode(&json!({"x402Version": 2, "payload": {}})),
            "invalid_payload",
        ),
        (
            "accepted with another payTo",
            altered(&|p| p["accepted"]["payTo"] = json!(other), payer),
            "requirements_mismatch",
        ),
        (
            "accepted with another amount",
            altered(&|p| p["accepted"]["amount"] = json!("1"), payer),
            "requirements_mismatch",
        ),
        (
            "accepted with another domain version",
            altered(&|p| p["accepted"]["extra"]["version"] = json!("1"), payer),
            "requirements_mismatch",
        ),
        (
            "paying someone else",
            altered(&|p| p["payload"]["authorization"]["to"] = json!(other), payer),
            "invalid_exact_evm_payload_recipient_mismatch",
        ),
        (
            "paying less than the price",
            altered(
                &|p| p["payload"]["authorization"]["value"] = json!((PRICE - 1).to_string()),
                payer,
            ),
            "invalid_exact_evm_payload_authorization_value_mismatch",
        ),
        (
            "valid only from later",
            altered(
                &|p| p["payload"]["authorization"]["validAfter"] = json!((now + 120).to_string()),
                payer,
            ),
            "invalid_exact_evm_payload_authorization_valid_after",
        ),
        (
            "validBefore too soon",
            altered(
                &|p| p["payload"]["authorization"]["validBefore"] = json!((now + 3).to_string()),
                payer,
            ),
            "invalid_exact_evm_payload_authorization_valid_before",
        ),
        (
            "validBefore too far",
            altered(
                &|p| p["payload"]["authorization"]["validBefore"] = json!((now + 300 + 600).to_string()),
                payer,
            ),
            "invalid_exact_evm_payload_authorization_valid_before",
        ),
        (
            "signed by someone else",
            altered(&|_| {}, Some(&stranger)),
            "invalid_exact_evm_payload_signature",
        ),
        (
            "a signature altered",
            altered(
                &|p| {
                    let signature = p["payload"]["signature"].as_str().unwrap();
                    let flipped = if signature.ends_with("1b") { "1c" } else { "1b" };
                    let altered = format!("{}{flipped}", &signature[..signature.len() - 2]);
                    p["payload"]["signature"] = json!(altered);
                },
                None,
            ),
            "invalid_exact_evm_payload_signature",
        ),
        (
            "a nonce already used on chain",
            altered(
                &|p| p["payload"]["authorization"]["nonce"] = json!(used_nonce.to_string()),
                payer,
            ),
            "invalid_exact_evm_nonce_already_used",
        ),
        (
            "a buyer short of the price",
            poor_payment["payment_signature"].as_str().unwrap().to_owned(),
            "invalid_exact_evm_insufficient_balance",
        ),
    ];
    let mut wrong = Vec::new();
    for (case, header, expected) in &cases {
        let response = s.pay_with(url, header).await;
        let answered = match response.status {
            StatusCode::PAYMENT_REQUIRED => refusal(&response),
            status => format!("{status}: {}", response.text),
        };
        if answered != *expected {
            wrong.push(format!("{case}: expected {expected}, got {answered}"));
        }
    }
    assert!(wrong.is_empty(), "refusals answered wrongly:\n{}", wrong.join("\n"));

    // An offer whose gas_per_day cannot pay one settlement is paused, checked before the payment is even read.
    let starved = s
        .offer(
            json!({"url": s.upstream.url("/data")}),
            json!({"gas_per_day": "0.000000000000000001"}),
        )
        .await;
    let starved_url = starved["url"].as_str().unwrap();
    assert_eq!(
        refusal(&s.pay_with(starved_url, "not a payment!").await),
        "offer_paused"
    );
    assert_eq!(refusal(&s.pay_with(starved_url, &good_header).await), "offer_paused");

    // Nothing was fetched, nothing sent, nothing moved, nothing recorded as income.
    assert_eq!(s.upstream.seen().len(), 0, "the upstream was never fetched");
    s.assert_nothing_settled(payer_funds, nonce_of(&good)).await;
    assert_eq!(s.usdc_of(poor.address()).await, U256::from(PRICE - 1));
    assert_eq!(s.income().await, Vec::<Value>::new(), "no payment was taken");

    // The untouched payment still pays: each refusal above was for its own alteration.
    let response = s.pay_with(url, &good_header).await;
    assert_eq!(response.status, StatusCode::OK, "{}", response.text);
    assert_eq!(response.text, UPSTREAM_BODY);
    assert_eq!(s.usdc_of(wallet(&s.agent)).await, U256::from(PRICE));
    assert!(authorization_state(&s.anvil, s.usdc, s.payer.address(), nonce_of(&good)).await);
}

#[tokio::test]
async fn an_upstream_answering_500_is_not_settled_and_the_payment_is_released() {
    let s = selling().await;
    let offer = s.offer(json!({"url": s.upstream.url("/broken")}), json!({})).await;
    let answer = python_buyer("pay", offer["url"].as_str().unwrap(), &s.payer).await;
    assert_eq!(answer["status"], 502, "{answer}");
    let body: Value = serde_json::from_str(answer["body"].as_str().unwrap()).expect("a JSON error");
    assert_eq!(body["error"]["code"], "upstream_failed", "{body}");
    assert_eq!(body["error"]["details"]["status"], 500, "{body}");
    assert!(
        !answer.to_string().contains(UPSTREAM_FAILURE),
        "nothing of the upstream's body: {answer}"
    );
    assert!(answer["payment_response"].is_null() || answer["payment_response"]["success"] == false);
    assert_eq!(s.upstream.seen().len(), 1, "fetched once");
    let sent = decode(answer["payment_signature"].as_str().expect("the SDK paid"));

    // Nothing settled: the buyer keeps the price, the authorization is unused, the agent sent nothing.
    s.assert_nothing_settled(PAYER_FUNDS, nonce_of(&sent)).await;
    let income = s.income_once(1, "released").await;
    assert_eq!(income[0]["offer_id"], offer["id"], "{income:#?}");
    assert!(income[0]["tx_hash"].is_null(), "{income:#?}");

    // A released authorization stays held: sent again, it is not taken (and the upstream not asked again).
    let again = s
        .pay_with(
            offer["url"].as_str().unwrap(),
            answer["payment_signature"].as_str().unwrap(),
        )
        .await;
    assert_eq!(refusal(&again), "invalid_exact_evm_nonce_already_used");
    assert_eq!(s.upstream.seen().len(), 1, "not fetched again");
    s.assert_nothing_settled(PAYER_FUNDS, nonce_of(&sent)).await;
}

#[tokio::test]
async fn a_replayed_payment_signature_after_success_settles_nothing_twice() {
    let s = selling().await;
    let offer = s.content_offer().await;
    let url = offer["url"].as_str().unwrap();
    let answer = python_buyer("pay", url, &s.payer).await;
    let (tx, sent) = paid(&answer, &s.payer);
    s.assert_settled_by_agent(tx).await;
    let header = answer["payment_signature"].as_str().unwrap();

    // The same PAYMENT-SIGNATURE again, once and then three times at once.
    let replay = s.pay_with(url, header).await;
    assert_eq!(refusal(&replay), "invalid_exact_evm_nonce_already_used");
    let replays = join_all((0..3).map(|_| s.pay_with(url, header))).await;
    for replay in &replays {
        assert_eq!(refusal(replay), "invalid_exact_evm_nonce_already_used");
    }

    // The chain: paid once.
    assert_eq!(s.usdc_of(wallet(&s.agent)).await, U256::from(PRICE));
    assert_eq!(s.usdc_of(s.payer.address()).await, U256::from(PAYER_FUNDS - PRICE));
    assert!(authorization_state(&s.anvil, s.usdc, s.payer.address(), nonce_of(&sent)).await);
    assert_eq!(s.anvil.nonce(wallet(&s.agent)).await, 1, "one settlement sent");
    let income = s.income_once(1, "settled").await;
    assert_eq!(income[0]["tx_hash"], tx.to_string(), "{income:#?}");
}

#[tokio::test]
async fn the_same_payment_sent_four_times_at_once_is_taken_once() {
    let s = selling().await;
    let offer = s.content_offer().await;
    let url = offer["url"].as_str().unwrap();
    let made = python_buyer("sign", url, &s.payer).await;
    let header = made["payment_signature"].as_str().unwrap();

    let answers = join_all((0..4).map(|_| s.pay_with(url, header))).await;
    let served = answers.iter().filter(|a| a.status == StatusCode::OK).count();
    assert_eq!(served, 1, "served once");
    for refused in answers.iter().filter(|a| a.status != StatusCode::OK) {
        assert_eq!(refusal(refused), "invalid_exact_evm_nonce_already_used");
    }

    assert_eq!(s.usdc_of(wallet(&s.agent)).await, U256::from(PRICE));
    assert_eq!(s.usdc_of(s.payer.address()).await, U256::from(PAYER_FUNDS - PRICE));
    assert_eq!(s.anvil.nonce(wallet(&s.agent)).await, 1, "one settlement sent");
    s.income_once(1, "settled").await;
}

#[tokio::test]
async fn a_before_serving_offer_is_paid_upfront_by_the_official_client_and_charges_for_a_failed_attempt() {
    let s = selling().await;
    let upfront = json!({"settle": "before_serving"});
    let working = s.offer(json!({"url": s.upstream.url("/data")}), upfront.clone()).await;
    let failing = s.offer(json!({"url": s.upstream.url("/broken")}), upfront).await;
    let url = working["url"].as_str().unwrap();
    let unpaid = s.app.send(s.app.client.get(url)).await;
    let required = decode(unpaid.headers["payment-required"].to_str().unwrap());
    assert_eq!(required["accepts"][0]["extra"]["paymentFlow"], "upfront", "{required}");

    let answer = python_buyer("pay", url, &s.payer).await;
    let (first_tx, first) = paid(&answer, &s.payer);
    assert_eq!(answer["body"], UPSTREAM_BODY, "{answer}");
    s.assert_settled_by_agent(first_tx).await;
    assert!(authorization_state(&s.anvil, s.usdc, s.payer.address(), nonce_of(&first)).await);

    // Settled before the upstream was asked: its failure is a 502, and the payment stands.
    let answer = python_buyer("pay", failing["url"].as_str().unwrap(), &s.payer).await;
    assert_eq!(answer["status"], 502, "{answer}");
    let body: Value = serde_json::from_str(answer["body"].as_str().unwrap()).expect("a JSON error");
    assert_eq!(body["error"]["code"], "upstream_failed", "{body}");
    assert!(!answer.to_string().contains(UPSTREAM_FAILURE), "{answer}");
    let second = decode(answer["payment_signature"].as_str().expect("the SDK paid"));
    assert!(authorization_state(&s.anvil, s.usdc, s.payer.address(), nonce_of(&second)).await);

    assert_eq!(s.usdc_of(wallet(&s.agent)).await, U256::from(2 * PRICE));
    assert_eq!(s.usdc_of(s.payer.address()).await, U256::from(PAYER_FUNDS - 2 * PRICE));
    assert_eq!(s.anvil.nonce(wallet(&s.agent)).await, 2, "two settlements sent");
    assert_eq!(s.upstream.seen().len(), 2, "each upstream asked once");
    let income = s.income_once(2, "settled").await;
    assert!(income.iter().any(|i| i["offer_id"] == failing["id"]), "{income:#?}");
}

/// A pass-through in front of agentd's facilitator endpoints that counts the settle requests it forwards.
struct CountingProxy {
    base: String,
    settles: Arc<Mutex<usize>>,
    task: JoinHandle<()>,
}

impl CountingProxy {
    async fn start(target: String) -> CountingProxy {
        let settles: Arc<Mutex<usize>> = Arc::default();
        let counted = settles.clone();
        let client = reqwest::Client::new();
        let router = Router::new().fallback(move |request: axum::extract::Request| {
            let (client, target, counted) = (client.clone(), target.clone(), counted.clone());
            async move {
                let (parts, body) = request.into_parts();
                if parts.uri.path().ends_with("/settle") {
                    *counted.lock().unwrap() += 1;
                }
                let body = axum::body::to_bytes(body, 1 << 20).await.unwrap_or_default();
                let mut forwarded = client.request(parts.method.clone(), format!("{target}{}", parts.uri));
                for name in ["authorization", "content-type"] {
                    if let Some(value) = parts.headers.get(name) {
                        forwarded = forwarded.header(name, value.as_bytes());
                    }
                }
                let answer = forwarded.body(body).send().await.expect("agentd answers");
                let status = AxumStatus::from_u16(answer.status().as_u16()).unwrap();
                let content_type = answer.headers().get("content-type").cloned();
                let bytes = answer.bytes().await.unwrap_or_default();
                let mut response = (status, bytes).into_response();
                if let Some(content_type) = content_type {
                    response
                        .headers_mut()
                        .insert("content-type", content_type.as_bytes().try_into().unwrap());
                }
                response
            }
        });
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind the proxy");
        let addr = listener.local_addr().expect("local address");
        let task = tokio::spawn(async move {
            let _ = axum::serve(listener, router).await;
        });
        CountingProxy {
            base: format!("http://{addr}"),
            settles,
            task,
        }
    }

    fn settles(&self) -> usize {
        *self.settles.lock().unwrap()
    }
}

impl Drop for CountingProxy {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// How long agentd waits for a settlement's inclusion in the tests of pending settlements (`X402_TIMEOUT_MS`).
const INCLUSION_WAIT_MS: u64 = 4_000;

impl Selling {
    /// Waits (up to 60 s) until the agent's settlement sits in the node's pool, unmined (automine off).
    async fn settlement_in_pool(&self) {
        let agent = wallet(&self.agent);
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
        loop {
            let pending = self
                .anvil
                .provider()
                .get_transaction_count(agent)
                .pending()
                .await
                .expect("eth_getTransactionCount(pending)");
            if pending > self.anvil.mined_nonce(agent).await {
                return;
            }
            assert!(std::time::Instant::now() < deadline, "no settlement reached the pool");
            tokio::time::sleep(std::time::Duration::from_millis(20)).await;
        }
    }
}

#[tokio::test]
async fn a_settlement_not_yet_included_is_pending_and_the_same_signature_is_served_once_it_is() {
    let wait = INCLUSION_WAIT_MS.to_string();
    let s = selling_with(&[("X402_TIMEOUT_MS", &wait)]).await;
    let offer = s.content_offer().await;
    let url = offer["url"].as_str().unwrap();
    let made = python_buyer("sign", url, &s.payer).await;
    let header = made["payment_signature"].as_str().unwrap();
    let payment = decode(header);

    // The node holds the settlement unmined: within X402_TIMEOUT_MS it is not included.
    s.anvil.set_automine(false).await;
    let first = s.pay_with(url, header).await;
    assert_eq!(first.status, StatusCode::PAYMENT_REQUIRED, "{}", first.text);
    let response = decode(
        first
            .headers
            .get("payment-response")
            .unwrap_or_else(|| panic!("a pending settlement is named in PAYMENT-RESPONSE: {:?}", first.headers))
            .to_str()
            .unwrap(),
    );
    assert_eq!(response["success"], false, "{response}");
    assert_eq!(response["errorReason"], "settlement_pending", "{response}");
    let pending: TxHash = response["transaction"]
        .as_str()
        .and_then(|t| t.parse().ok())
        .unwrap_or_else(|| panic!("the pending transaction: {response}"));
    assert_eq!(s.income().await[0]["status"], "settling");

    // The same signature again, answered once the block comes: served, and settled by the one transaction.
    let (second, ()) = tokio::join!(s.pay_with(url, header), async {
        tokio::time::sleep(std::time::Duration::from_millis(INCLUSION_WAIT_MS / 2)).await;
        s.anvil.mine(1).await;
    });
    s.anvil.set_automine(true).await;
    assert_eq!(second.status, StatusCode::OK, "{}", second.text);
    assert_eq!(second.text, CONTENT);
    let settled = decode(second.headers["payment-response"].to_str().unwrap());
    assert_eq!(settled["success"], true, "{settled}");
    assert_eq!(settled["transaction"], pending.to_string(), "{settled}");

    s.assert_settled_by_agent(pending).await;
    assert_eq!(s.anvil.nonce(wallet(&s.agent)).await, 1, "one settlement sent");
    assert_eq!(s.usdc_of(wallet(&s.agent)).await, U256::from(PRICE));
    assert!(authorization_state(&s.anvil, s.usdc, s.payer.address(), nonce_of(&payment)).await);
    let income = s.income_once(1, "settled").await;
    assert_eq!(income[0]["tx_hash"], pending.to_string(), "{income:#?}");
    // Served once: the same signature after that is a used nonce.
    assert_eq!(
        refusal(&s.pay_with(url, header).await),
        "invalid_exact_evm_nonce_already_used"
    );
}

#[tokio::test]
async fn the_official_resource_servers_retry_of_a_pending_settlement_is_answered_by_the_one_transaction() {
    let wait = INCLUSION_WAIT_MS.to_string();
    let s = selling_with(&[("X402_TIMEOUT_MS", &wait)]).await;
    let path = format!("/api/agents/{}/facilitator-tokens", s.agent.id);
    let (status, created) = call(&s.app, &s.agent, true, Method::POST, &path, None).await;
    assert_eq!(status, StatusCode::CREATED, "{created}");
    let token = created["token"].as_str().unwrap().to_owned();
    let proxy = CountingProxy::start(s.app.address.clone()).await;
    let facilitator = format!("{}/api/agents/{}/x402", proxy.base, s.agent.id);
    let pay_to = wallet(&s.agent).to_checksum(None);
    let seller = tokio::task::spawn_blocking(move || SdkSeller::start(&facilitator, &token, &pay_to, "$0.01", NETWORK))
        .await
        .expect("the seller starts");

    // The SDK's resource server settles, gets settlement_pending after X402_TIMEOUT_MS, and settles the same payment
    // once more at once (its single automatic retry); the block comes during that second wait.
    let report = seller.url("/report");
    s.anvil.set_automine(false).await;
    let (answer, ()) = tokio::join!(python_buyer("pay", &report, &s.payer), async {
        s.settlement_in_pool().await;
        tokio::time::sleep(std::time::Duration::from_millis(INCLUSION_WAIT_MS * 3 / 2)).await;
        s.anvil.mine(1).await;
    });
    s.anvil.set_automine(true).await;
    assert_eq!(
        answer["status"],
        200,
        "{answer}\nthe seller's log:\n{}",
        seller.stderr()
    );
    let (tx, sent) = paid(&answer, &s.payer);
    assert_eq!(
        proxy.settles(),
        2,
        "the SDK settled, was told settlement_pending, and settled once more"
    );

    s.assert_settled_by_agent(tx).await;
    assert_eq!(s.anvil.nonce(wallet(&s.agent)).await, 1, "one settlement sent");
    assert_eq!(s.usdc_of(wallet(&s.agent)).await, U256::from(PRICE));
    assert_eq!(s.usdc_of(s.payer.address()).await, U256::from(PAYER_FUNDS - PRICE));
    assert!(authorization_state(&s.anvil, s.usdc, s.payer.address(), nonce_of(&sent)).await);
    let income = s.income_once(1, "settled").await;
    assert_eq!(income[0]["tx_hash"], tx.to_string(), "{income:#?}");
}

#[tokio::test]
async fn the_npm_sdks_facilitator_client_verifies_and_settles_through_the_agents_facilitator() {
    let s = selling().await;
    let path = format!("/api/agents/{}/facilitator-tokens", s.agent.id);
    let (status, created) = call(&s.app, &s.agent, true, Method::POST, &path, None).await;
    assert_eq!(status, StatusCode::CREATED, "{created}");
    let token = created["token"].as_str().unwrap().to_owned();
    // A payment the Python SDK makes for the agent's terms (an offer's 402 gives them), settled by the npm SDK's
    // facilitator client as a resource server of its own would: not through the offer.
    let offer = s.content_offer().await;
    let made = python_buyer("sign", offer["url"].as_str().unwrap(), &s.payer).await;
    let header = made["payment_signature"].as_str().unwrap().to_owned();
    let payment = decode(&header);
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("test-tools/x402-buyer.mjs");
    let facilitator = s.app.url(&format!("/api/agents/{}/x402", s.agent.id));
    let args = vec![
        script.display().to_string(),
        "facilitate".into(),
        facilitator,
        token,
        header,
    ];
    let result = run_json(PathBuf::from("node"), args).await;

    let wallet_address = wallet(&s.agent).to_checksum(None);
    let kinds = result["supported"]["kinds"].as_array().expect("kinds");
    assert!(
        kinds
            .iter()
            .any(|k| k["x402Version"] == 2 && k["scheme"] == "exact" && k["network"] == NETWORK),
        "{result}"
    );
    assert_eq!(
        result["supported"]["signers"]["eip155:*"],
        json!([wallet_address]),
        "{result}"
    );
    assert_eq!(result["verify"]["isValid"], true, "{result}");
    let settled = &result["settle"];
    assert_eq!(settled["success"], true, "{result}");
    assert_eq!(settled["network"], NETWORK, "{result}");
    let tx: TxHash = settled["transaction"].as_str().unwrap().parse().unwrap();

    let cost = s.assert_settled_by_agent(tx).await;
    assert_eq!(s.anvil.nonce(wallet(&s.agent)).await, 1, "one settlement sent");
    assert_eq!(s.usdc_of(wallet(&s.agent)).await, U256::from(PRICE));
    assert_eq!(s.usdc_of(s.payer.address()).await, U256::from(PAYER_FUNDS - PRICE));
    assert!(authorization_state(&s.anvil, s.usdc, s.payer.address(), nonce_of(&payment)).await);
    let income = s.income_once(1, "settled").await;
    assert_eq!(income[0]["offer_id"], Value::Null, "{income:#?}");
    assert_income(&income[0], s.payer.address(), nonce_of(&payment), tx, cost);
}
