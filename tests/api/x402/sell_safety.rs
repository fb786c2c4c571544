//! Selling over x402 (§23) when things go wrong, read from the chain: a process SIGKILLed between the upstream's fetch
//! and the settlement (and while the settlement waits for inclusion), two instances on one database under concurrent
//! buyers, and griefers — a payer whose settlement reverts because it moved its tokens ahead of it, and a payer who
//! uses up its own authorization (cancelled, or spent on someone else) while the upstream holds the request. The
//! buyers are the official Python SDK (`tests/x402/sdk_buyer.py sign`) where one payment is enough, and payments
//! signed here (EIP-712 under USDC's domain on base, as the SDK signs them) where many are needed. Every outcome is
//! read from the chain — `authorizationState`, `AuthorizationUsed` logs, balances, the agent's nonce and ETH — as
//! well as from the income records and the audit log.

use std::net::TcpListener;
use std::path::Path;
use std::process::Command;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use alloy::primitives::{Address, B256, Bytes, U256};
use alloy::providers::Provider;
use alloy::rpc::types::Filter;
use alloy::signers::SignerSync;
use alloy::signers::local::PrivateKeySigner;
use alloy::sol_types::{SolCall, SolEvent, SolStruct, eip712_domain};
use axum::Router;
use axum::routing::get;
use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use futures::future::join_all;
use reqwest::{Method, StatusCode};
use secrecy::ExposeSecret;
use serde_json::{Value, json};
use tokio::sync::mpsc;
use tokio::task::JoinHandle;

use crate::anvil::Anvil;
use crate::helpers::chain::{BASE_CHAIN_ID, ONE_ETH, funded_agent, transfer_app, wallet, wei};
use crate::helpers::sdk_paywall::python;
use crate::helpers::solidity::{USDC_BASE, authorization_state, mint, send_as, token_balance, usdc_on_base};
use crate::helpers::{CreatedAgent, ENCRYPTION_KEY, ServerProcess, TOKEN_HEADER, TestApp, test_database};
use crate::money::policy::{ADMIN, call};

/// The offers' price, 0.01 USDC, in base units.
const PRICE: u64 = 10_000;
/// What a buyer holds at the start, in base units (1 USDC).
const PAYER_FUNDS: u64 = 1_000_000;
const NETWORK: &str = "eip155:8453";
/// What the upstream answers.
const UPSTREAM_BODY: &str = r#"{"forecast":"sunny"}"#;

alloy::sol! {
    /// EIP-3009's typed data, signed here as a buyer signs it.
    struct TransferWithAuthorization {
        address from;
        address to;
        uint256 value;
        uint256 validAfter;
        uint256 validBefore;
        bytes32 nonce;
    }

    /// EIP-3009's cancellation, signed by the payer.
    struct CancelAuthorization {
        address authorizer;
        bytes32 nonce;
    }
}

alloy::sol! {
    /// What the griefers call on the token, and its log of a used authorization.
    interface Usdc {
        function transfer(address to, uint256 value) external returns (bool);
        function cancelAuthorization(address authorizer, bytes32 nonce, bytes signature) external;
        function transferWithAuthorization(address from, address to, uint256 value, uint256 validAfter,
            uint256 validBefore, bytes32 nonce, bytes signature) external;
        event AuthorizationUsed(address indexed authorizer, bytes32 indexed nonce);
    }
}

/// A local upstream: `/slow` tells the test it holds a request (the request's number on `held`) and answers after
/// `delay`; `/fast` answers at once. Every request is counted.
struct Upstream {
    base: String,
    fetched: Arc<AtomicUsize>,
    task: JoinHandle<()>,
}

impl Upstream {
    async fn start(delay: Duration) -> (Upstream, mpsc::UnboundedReceiver<usize>) {
        let fetched = Arc::new(AtomicUsize::new(0));
        let (held, holding) = mpsc::unbounded_channel();
        let (slow_count, fast_count) = (fetched.clone(), fetched.clone());
        let router = Router::new()
            .route(
                "/slow",
                get(move || async move {
                    let n = slow_count.fetch_add(1, Ordering::SeqCst) + 1;
                    let _ = held.send(n);
                    tokio::time::sleep(delay).await;
                    ([("content-type", "application/json")], UPSTREAM_BODY)
                }),
            )
            .route(
                "/fast",
                get(move || async move {
                    fast_count.fetch_add(1, Ordering::SeqCst);
                    ([("content-type", "application/json")], UPSTREAM_BODY)
                }),
            );
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind the upstream");
        let addr = listener.local_addr().expect("local address");
        let task = tokio::spawn(async move {
            let _ = axum::serve(listener, router).await;
        });
        let upstream = Upstream {
            base: format!("http://{addr}"),
            fetched,
            task,
        };
        (upstream, holding)
    }

    fn url(&self, path: &str) -> String {
        format!("{}{path}", self.base)
    }

    fn fetched(&self) -> usize {
        self.fetched.load(Ordering::SeqCst)
    }
}

impl Drop for Upstream {
    fn drop(&mut self) {
        self.task.abort();
    }
}

fn now() -> u64 {
    SystemTime::now().duration_since(UNIX_EPOCH).unwrap().as_secs()
}

fn decode(header: &str) -> Value {
    let bytes = STANDARD
        .decode(header)
        .unwrap_or_else(|e| panic!("{header} is base64: {e}"));
    serde_json::from_slice(&bytes).unwrap_or_else(|e| panic!("{header} is base64 JSON: {e}"))
}

fn usdc_domain() -> alloy::sol_types::Eip712Domain {
    eip712_domain! {
        name: "USD Coin".to_owned(),
        version: "2".to_owned(),
        chain_id: BASE_CHAIN_ID,
        verifying_contract: USDC_BASE.parse::<Address>().unwrap(),
    }
}

/// A payment (the `PAYMENT-SIGNATURE` value) of `entry` (an `accepts` entry of an offer's 402) by `payer` with
/// `nonce`, valid for five minutes, as the official SDK builds one; and its authorization.
fn payment(
    entry: &Value,
    resource: &str,
    payer: &PrivateKeySigner,
    nonce: B256,
) -> (String, TransferWithAuthorization) {
    let authorization = TransferWithAuthorization {
        from: payer.address(),
        to: entry["payTo"].as_str().unwrap().parse().unwrap(),
        value: entry["amount"].as_str().unwrap().parse().unwrap(),
        validAfter: U256::ZERO,
        validBefore: U256::from(now() + 300),
        nonce,
    };
    let signature = payer
        .sign_hash_sync(&authorization.eip712_signing_hash(&usdc_domain()))
        .expect("signing");
    let document = json!({
        "x402Version": 2,
        "resource": {"url": resource, "description": "", "mimeType": "application/json"},
        "accepted": entry,
        "payload": {
            "signature": format!("0x{}", alloy::hex::encode(signature.as_bytes())),
            "authorization": {
                "from": authorization.from.to_checksum(None),
                "to": authorization.to.to_checksum(None),
                "value": authorization.value.to_string(),
                "validAfter": authorization.validAfter.to_string(),
                "validBefore": authorization.validBefore.to_string(),
                "nonce": authorization.nonce.to_string(),
            },
        },
    });
    (STANDARD.encode(document.to_string()), authorization)
}

fn random_nonce() -> B256 {
    alloy::primitives::keccak256(uuid::Uuid::new_v4().as_bytes())
}

/// The `accepts` entry of the offer at `url` (its unpaid 402).
async fn entry_of(client: &reqwest::Client, url: &str) -> Value {
    let response = client.get(url).send().await.expect("the offer answers");
    assert_eq!(response.status(), StatusCode::PAYMENT_REQUIRED);
    let header = response.headers()["payment-required"].to_str().unwrap().to_owned();
    decode(&header)["accepts"][0].clone()
}

/// The official Python SDK builds the payment for the offer at `url` without sending it (`sdk_buyer.py sign`).
async fn sdk_payment(url: &str, payer: &PrivateKeySigner) -> String {
    let python = python();
    assert!(
        python.exists(),
        "the x402 Python SDK is not installed at {} (scripts/install.sh x402 installs it)",
        python.display()
    );
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/x402/sdk_buyer.py");
    let key = format!("0x{}", alloy::hex::encode(payer.to_bytes()));
    let url = url.to_owned();
    let output = tokio::task::spawn_blocking(move || {
        Command::new(&python)
            .args([script.display().to_string(), "sign".into(), url, key, NETWORK.into()])
            .current_dir(env!("CARGO_MANIFEST_DIR"))
            .output()
    })
    .await
    .expect("the buyer's thread")
    .expect("run the SDK buyer");
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(
        output.status.success(),
        "the SDK buyer failed:\n{stdout}\n{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let answer: Value = serde_json::from_str(stdout.lines().last().unwrap_or_default()).expect("one JSON line");
    answer["payment_signature"].as_str().expect("a payment").to_owned()
}

/// What an answer to a paid request came to: `served` (200 with a successful `PAYMENT-RESPONSE`), a 402's `error`
/// or `errorReason`, or `<status>: <body>`.
fn outcome(status: StatusCode, headers: &reqwest::header::HeaderMap, body: &str) -> String {
    let header = |name: &str| headers.get(name).and_then(|v| v.to_str().ok()).map(decode);
    match status {
        StatusCode::OK => {
            let response = header("payment-response").unwrap_or_else(|| panic!("a 200 carries PAYMENT-RESPONSE"));
            assert_eq!(response["success"], true, "{response}");
            assert_eq!(body, UPSTREAM_BODY);
            "served".into()
        }
        StatusCode::PAYMENT_REQUIRED => {
            if let Some(response) = header("payment-response") {
                return response["errorReason"].as_str().unwrap_or("?").to_owned();
            }
            let required = header("payment-required").expect("a 402 carries PAYMENT-REQUIRED");
            required["error"].as_str().unwrap_or("402 without error").to_owned()
        }
        status => format!("{status}: {body}"),
    }
}

/// Sends `payment` to `url` and returns what it came to (see `outcome`).
async fn pay(client: &reqwest::Client, url: &str, payment: &str) -> String {
    let response = client
        .get(url)
        .header("PAYMENT-SIGNATURE", payment)
        .send()
        .await
        .expect("the offer answers");
    let (status, headers) = (response.status(), response.headers().clone());
    let body = response.text().await.unwrap_or_default();
    outcome(status, &headers, &body)
}

/// The `AuthorizationUsed` logs of `authorizer`'s `nonce` on `token`, from the first block.
async fn authorizations_used(anvil: &Anvil, token: Address, authorizer: Address, nonce: B256) -> usize {
    let filter = Filter::new()
        .address(token)
        .event_signature(Usdc::AuthorizationUsed::SIGNATURE_HASH)
        .topic1(authorizer.into_word())
        .topic2(nonce)
        .from_block(0);
    anvil.provider().get_logs(&filter).await.expect("eth_getLogs").len()
}

/// The number of transactions `address` sent that are in the node's pool or mined.
async fn pending_nonce(anvil: &Anvil, address: Address) -> u64 {
    anvil
        .provider()
        .get_transaction_count(address)
        .pending()
        .await
        .expect("eth_getTransactionCount(pending)")
}

/// Sends `data` to `to` from `from` (impersonated) with a high tip, without waiting for it to be mined.
async fn send_ahead(anvil: &Anvil, from: Address, to: Address, data: Bytes) {
    let _: Value = anvil
        .provider()
        .raw_request("anvil_impersonateAccount".into(), (from,))
        .await
        .expect("anvil_impersonateAccount");
    let tip = U256::from(100_000_000_000u64);
    let _: Value = anvil
        .provider()
        .raw_request(
            "eth_sendTransaction".into(),
            (json!({"from": from, "to": to, "data": data, "gas": "0x30d40",
                "maxPriorityFeePerGas": tip, "maxFeePerGas": tip * U256::from(2)}),),
        )
        .await
        .expect("eth_sendTransaction");
}

// ---------------------------------------------------------------------------------------------------------------
// (a) SIGKILL

/// A real agentd process on `db` and `anvil` (watcher every 50 ms, `OFFER_ALLOW_PRIVATE`, `X402_TIMEOUT_MS` 1500 so
/// that a hold a crash left is let go after 2 × 1.5 s + 10 s).
struct Process {
    server: ServerProcess,
    client: reqwest::Client,
}

impl Process {
    fn start(db: &str, anvil: &Anvil, dir: &Path) -> Process {
        let port = TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
        let bind = format!("127.0.0.1:{port}");
        let env = [
            ("BIND_ADDR", bind.as_str()),
            ("APP_ENV", "development"),
            ("ENCRYPTION_KEY", ENCRYPTION_KEY),
            ("DATABASE_URL", db),
            ("RPC_URL_BASE", anvil.url()),
            ("WATCHER_INTERVAL_MS", "50"),
            ("OFFER_ALLOW_PRIVATE", "true"),
            ("X402_TIMEOUT_MS", "1500"),
            ("RUST_LOG", "info,sqlx=warn"),
        ];
        Process {
            server: ServerProcess::start(&env, dir),
            client: reqwest::Client::new(),
        }
    }

    fn url(&self, path: &str) -> String {
        format!("{}{path}", self.server.base_url())
    }

    async fn json(&self, method: Method, path: &str, token: Option<&str>, body: Option<Value>) -> (StatusCode, Value) {
        let mut request = self.client.request(method, self.url(path));
        if let Some(token) = token {
            request = request.header(TOKEN_HEADER, token);
        }
        if let Some(body) = body {
            request = request.json(&body);
        }
        let response = request.send().await.expect("the process answers");
        let status = response.status();
        (status, response.json().await.unwrap_or(Value::Null))
    }

    /// A selling agent (unguarded: its token creates offers) whose wallet holds 1 ETH; its id, token and wallet.
    async fn agent(&self, anvil: &Anvil) -> (String, String, Address) {
        let body = json!({"name": "seller", "chains": ["base"], "capabilities": ["read", "transact"],
            "spending_cap": 0.5});
        let (status, agent) = self.json(Method::POST, "/api/agents", None, Some(body)).await;
        assert_eq!(status, StatusCode::CREATED, "{agent}");
        let wallet: Address = agent["wallet_addresses"]["base"].as_str().unwrap().parse().unwrap();
        anvil.set_balance(wallet, wei(ONE_ETH)).await;
        let id = agent["id"].as_str().unwrap().to_owned();
        (id, agent["access_token"].as_str().unwrap().to_owned(), wallet)
    }

    /// An `on_success` offer of `url` at `PRICE`; its public URL's path.
    async fn offer(&self, agent: &(String, String, Address), url: &str) -> String {
        let body = json!({"chain": "base", "asset": "USDC", "price": "0.01", "description": "held upstream",
            "resource": {"url": url}, "settle": "on_success", "gas_per_day": "0.01"});
        let path = format!("/api/agents/{}/offers", agent.0);
        let (status, offer) = self.json(Method::POST, &path, Some(&agent.1), Some(body)).await;
        assert_eq!(status, StatusCode::CREATED, "{offer}");
        format!("/x402/{}", offer["id"].as_str().unwrap())
    }

    async fn income(&self, agent: &(String, String, Address)) -> Vec<Value> {
        let path = format!("/api/agents/{}/income", agent.0);
        let (status, body) = self.json(Method::GET, &path, Some(&agent.1), None).await;
        assert_eq!(status, StatusCode::OK, "{body}");
        body["income"].as_array().cloned().unwrap_or_default()
    }

    /// The agent's audit entries with `action`.
    async fn audited(&self, agent: &(String, String, Address), action: &str) -> Vec<Value> {
        let path = format!("/api/agents/{}/audit?limit=500", agent.0);
        let (status, body) = self.json(Method::GET, &path, Some(&agent.1), None).await;
        assert_eq!(status, StatusCode::OK, "{body}");
        let entries = body.as_array().cloned().unwrap_or_default();
        entries.into_iter().filter(|e| e["action"] == action).collect()
    }

    /// Waits (up to `wait`) until the income lists one record with `status`.
    async fn income_becomes(&self, agent: &(String, String, Address), status: &str, wait: Duration) -> Value {
        let deadline = Instant::now() + wait;
        loop {
            let income = self.income(agent).await;
            if income.len() == 1 && income[0]["status"] == status {
                return income[0].clone();
            }
            assert!(
                Instant::now() < deadline,
                "no {status} income after {wait:?}: {income:#?}\n{}",
                self.server.logs()
            );
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    }

    /// SIGKILL (the helper's drop kills the child at once).
    fn kill(self) {
        drop(self.server);
    }
}

#[tokio::test]
async fn a_sigkill_while_the_upstream_holds_the_request_takes_nothing_and_serves_nothing_after_the_restart() {
    let anvil = Anvil::start(BASE_CHAIN_ID);
    let usdc = usdc_on_base(&anvil).await;
    let dir = tempfile::tempdir().unwrap();
    // A SQLite file, or a fresh PostgreSQL database with TEST_POSTGRES_URL.
    let database = test_database().await;
    let db = database.config.database.url.expose_secret().to_string();
    let (upstream, mut held) = Upstream::start(Duration::from_secs(30)).await;
    let payer = PrivateKeySigner::random();
    mint(&anvil, usdc, payer.address(), U256::from(PAYER_FUNDS)).await;

    let first = Process::start(&db, &anvil, dir.path());
    let agent = first.agent(&anvil).await;
    let offer = first.offer(&agent, &upstream.url("/slow")).await;
    let header = sdk_payment(&first.url(&offer), &payer).await;
    let nonce: B256 = decode(&header)["payload"]["authorization"]["nonce"]
        .as_str()
        .unwrap()
        .parse()
        .unwrap();

    // The buyer pays; agentd verified and held the payment and is fetching the upstream, which holds the request:
    // SIGKILL now, between the fetch and the settlement.
    let buying = {
        let (client, url, header) = (first.client.clone(), first.url(&offer), header.clone());
        tokio::spawn(async move { client.get(url).header("PAYMENT-SIGNATURE", header).send().await })
    };
    tokio::time::timeout(Duration::from_secs(20), held.recv())
        .await
        .expect("the upstream was asked")
        .expect("the upstream is up");
    first.kill();
    let answer = buying.await.expect("the buyer's task");
    assert!(answer.is_err(), "the killed process answered nothing: {answer:?}");

    // Restarted: the same signature is not taken again while its hold stands, and the hold a crash left is let go
    // once it is older than a whole exchange.
    let second = Process::start(&db, &anvil, dir.path());
    let url = second.url(&offer);
    assert_eq!(
        pay(&second.client, &url, &header).await,
        "invalid_exact_evm_nonce_already_used"
    );
    let released = second.income_becomes(&agent, "released", Duration::from_secs(60)).await;
    assert!(released["tx_hash"].is_null(), "{released}");
    let again = join_all((0..3).map(|_| pay(&second.client, &url, &header))).await;
    for answer in &again {
        assert_eq!(answer, "invalid_exact_evm_nonce_already_used", "{again:?}");
    }

    // From the chain: nothing taken. The upstream was asked once (before the kill) and nothing was served.
    assert!(!authorization_state(&anvil, usdc, payer.address(), nonce).await);
    assert_eq!(
        token_balance(&anvil, usdc, payer.address()).await,
        U256::from(PAYER_FUNDS)
    );
    assert_eq!(token_balance(&anvil, usdc, agent.2).await, U256::ZERO);
    assert_eq!(anvil.nonce(agent.2).await, 0, "the agent sent nothing");
    assert_eq!(upstream.fetched(), 1, "the upstream was fetched only before the kill");
    assert!(second.audited(&agent, "x402_payment_received").await.is_empty());
    second.kill();
}

#[tokio::test]
async fn a_sigkill_while_the_settlement_waits_for_inclusion_settles_once_and_serves_once_after_the_restart() {
    let anvil = Anvil::start(BASE_CHAIN_ID);
    let usdc = usdc_on_base(&anvil).await;
    let dir = tempfile::tempdir().unwrap();
    // A SQLite file, or a fresh PostgreSQL database with TEST_POSTGRES_URL.
    let database = test_database().await;
    let db = database.config.database.url.expose_secret().to_string();
    let (upstream, _held) = Upstream::start(Duration::ZERO).await;
    let payer = PrivateKeySigner::random();
    mint(&anvil, usdc, payer.address(), U256::from(PAYER_FUNDS)).await;

    let first = Process::start(&db, &anvil, dir.path());
    let agent = first.agent(&anvil).await;
    let offer = first.offer(&agent, &upstream.url("/fast")).await;
    let header = sdk_payment(&first.url(&offer), &payer).await;
    let nonce: B256 = decode(&header)["payload"]["authorization"]["nonce"]
        .as_str()
        .unwrap()
        .parse()
        .unwrap();

    // The node holds what it is sent: the upstream answers, the settlement is signed and sent, and agentd waits for
    // its inclusion — SIGKILL as soon as it is in the node's pool.
    anvil.set_automine(false).await;
    let buying = {
        let (client, url, header) = (first.client.clone(), first.url(&offer), header.clone());
        tokio::spawn(async move { client.get(url).header("PAYMENT-SIGNATURE", header).send().await })
    };
    let deadline = Instant::now() + Duration::from_secs(20);
    while pending_nonce(&anvil, agent.2).await == 0 {
        assert!(
            Instant::now() < deadline,
            "no settlement was sent:\n{}",
            first.server.logs()
        );
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    first.kill();
    let answer = buying.await.expect("the buyer's task");
    assert!(answer.is_err(), "the killed process answered nothing: {answer:?}");
    assert_eq!(upstream.fetched(), 1);

    // Restarted, the settlement not yet included: the same signature answers settlement_pending, nothing served.
    let second = Process::start(&db, &anvil, dir.path());
    let url = second.url(&offer);
    assert_eq!(pay(&second.client, &url, &header).await, "settlement_pending");
    // Included: the watcher settles the payment with its record and audit entry.
    anvil.set_automine(true).await;
    anvil.mine(5).await;
    let settled = second.income_becomes(&agent, "settled", Duration::from_secs(30)).await;
    assert_eq!(settled["settled_by"], "agentd", "{settled}");
    let received = second.audited(&agent, "x402_payment_received").await;
    assert_eq!(received.len(), 1, "{received:#?}");

    // The same signature again: served once, with the settlement; after that never again.
    let answers = join_all((0..3).map(|_| pay(&second.client, &url, &header))).await;
    assert_eq!(answers.iter().filter(|a| *a == "served").count(), 1, "{answers:?}");
    for answer in answers.iter().filter(|a| *a != "served") {
        assert_eq!(answer, "invalid_exact_evm_nonce_already_used", "{answers:?}");
    }
    assert_eq!(
        pay(&second.client, &url, &header).await,
        "invalid_exact_evm_nonce_already_used"
    );

    // From the chain: settled once, by the agent's one transaction.
    assert!(authorization_state(&anvil, usdc, payer.address(), nonce).await);
    assert_eq!(authorizations_used(&anvil, usdc, payer.address(), nonce).await, 1);
    assert_eq!(token_balance(&anvil, usdc, agent.2).await, U256::from(PRICE));
    assert_eq!(
        token_balance(&anvil, usdc, payer.address()).await,
        U256::from(PAYER_FUNDS - PRICE)
    );
    assert_eq!(anvil.nonce(agent.2).await, 1, "one settlement sent");
    let hash: alloy::primitives::TxHash = settled["tx_hash"].as_str().unwrap().parse().unwrap();
    let receipt = anvil.receipt(hash).await;
    assert!(
        receipt.status() && receipt.from == agent.2,
        "the agent's settlement {hash} succeeded"
    );
    assert_eq!(second.audited(&agent, "x402_payment_received").await.len(), 1);
    second.kill();
}

// ---------------------------------------------------------------------------------------------------------------
// (b) two instances on one database

#[tokio::test]
async fn concurrent_buyers_on_two_instances_on_one_database_settle_and_serve_each_authorization_at_most_once() {
    let anvil = Anvil::start(BASE_CHAIN_ID);
    let usdc = usdc_on_base(&anvil).await;
    let vars = [("OFFER_ALLOW_PRIVATE", "true"), ("ADMIN_TOKEN", ADMIN)];
    let first = transfer_app(&anvil, &vars).await;
    // A second instance on the same database (PostgreSQL with TEST_POSTGRES_URL, else the same SQLite file).
    let second = transfer_app(&anvil, &[vars[0], vars[1], ("DATABASE_URL", first.db_url.as_str())]).await;
    let agent = funded_agent(&first, &anvil, Some(0.5)).await;
    let (upstream, _held) = Upstream::start(Duration::ZERO).await;
    let offer = create_offer(&first, &agent, &upstream.url("/fast"), "0.05").await;
    let path = format!("/x402/{}", offer["id"].as_str().unwrap());
    let entry = entry_of(&first.client, &first.url(&path)).await;

    // Six buyers with one payment each, and one buyer with two payments at once (one payment of a payer per offer
    // is in flight at a time). Each payment is sent twice to each instance, all at once.
    let mut payments: Vec<(PrivateKeySigner, B256, String)> = Vec::new();
    for _ in 0..6 {
        let payer = PrivateKeySigner::random();
        mint(&anvil, usdc, payer.address(), U256::from(PAYER_FUNDS)).await;
        let nonce = random_nonce();
        let (header, _) = payment(&entry, &first.url(&path), &payer, nonce);
        payments.push((payer, nonce, header));
    }
    let twice = PrivateKeySigner::random();
    mint(&anvil, usdc, twice.address(), U256::from(PAYER_FUNDS)).await;
    for _ in 0..2 {
        let nonce = random_nonce();
        let (header, _) = payment(&entry, &first.url(&path), &twice, nonce);
        payments.push((twice.clone(), nonce, header));
    }
    let path = &path;
    let sends = payments.iter().enumerate().flat_map(|(i, (_, _, header))| {
        [&first, &second, &first, &second].into_iter().map(move |app| {
            let url = app.url(path);
            async move { (i, pay(&app.client, &url, header).await) }
        })
    });
    let answers = join_all(sends).await;

    let mut served = vec![0usize; payments.len()];
    for (i, answer) in &answers {
        match answer.as_str() {
            "served" => served[*i] += 1,
            "invalid_exact_evm_nonce_already_used" => {}
            other => panic!("payment {i} answered {other}: {answers:?}"),
        }
    }
    assert!(served.iter().all(|n| *n <= 1), "served at most once each: {served:?}");
    assert!(
        served[..6].iter().all(|n| *n == 1),
        "each lone buyer was served: {served:?}"
    );
    assert!(
        served[6] + served[7] >= 1,
        "the buyer with two payments was served: {served:?}"
    );
    let total: usize = served.iter().sum();

    // From the chain: each authorization used at most once, exactly the served ones, and the money moved once each.
    for ((payer, nonce, _), served) in payments.iter().zip(&served) {
        assert_eq!(
            authorizations_used(&anvil, usdc, payer.address(), *nonce).await,
            *served,
            "{nonce} used on chain as often as served"
        );
    }
    let agent_wallet = wallet(&agent);
    assert_eq!(
        token_balance(&anvil, usdc, agent_wallet).await,
        U256::from(PRICE * total as u64)
    );
    assert_eq!(
        token_balance(&anvil, usdc, twice.address()).await,
        U256::from(PAYER_FUNDS - PRICE * (served[6] + served[7]) as u64)
    );
    assert_eq!(
        anvil.nonce(agent_wallet).await,
        total as u64,
        "one settlement per payment served"
    );
    assert!(upstream.fetched() >= total, "each served payment was fetched");
    assert!(upstream.fetched() <= payments.len(), "fetched at most once per payment");

    // The records agree: one settled income per payment served, nothing else settled.
    let income = first
        .settle_until(async || {
            let (status, body) = call(
                &first,
                &agent,
                true,
                Method::GET,
                &format!("/api/agents/{}/income", agent.id),
                None,
            )
            .await;
            assert_eq!(status, StatusCode::OK, "{body}");
            let income = body["income"].as_array().cloned().unwrap_or_default();
            match income.iter().filter(|i| i["status"] == "settled").count() == total
                && !income.iter().any(|i| i["status"] == "settling")
            {
                true => Ok(income),
                false => Err(format!("{total} settled income records expected: {income:#?}")),
            }
        })
        .await;
    assert!(
        income.len() <= payments.len(),
        "one record per payment taken: {income:#?}"
    );
}

/// `POST …/offers` with owner authority: an `on_success` offer of `url` at `PRICE`, its `gas_per_day`.
async fn create_offer(app: &TestApp, agent: &CreatedAgent, url: &str, gas_per_day: &str) -> Value {
    let body = json!({"chain": "base", "asset": "USDC", "price": "0.01", "description": "a safety offer",
        "resource": {"url": url}, "settle": "on_success", "gas_per_day": gas_per_day});
    let path = format!("/api/agents/{}/offers", agent.id);
    let (status, offer) = call(app, agent, true, Method::POST, &path, Some(body)).await;
    assert_eq!(status, StatusCode::CREATED, "{offer}");
    offer
}

// ---------------------------------------------------------------------------------------------------------------
// (c) griefers

/// A griefer whose tokens move away ahead of its settlement: moved while the upstream holds the request, the
/// simulation right before signing refuses it and nothing is sent; moved once the settlement is in the node's pool
/// (ahead of it, with a higher tip), the settlement reverts, the payer is blocked, and fresh payers doing the same
/// cost the agent no more gas than the offer's `gas_per_day`.
#[tokio::test]
async fn a_payer_whose_settlement_reverts_is_blocked_and_reverts_cost_the_agent_at_most_gas_per_day() {
    let anvil = Anvil::start(BASE_CHAIN_ID);
    let usdc = usdc_on_base(&anvil).await;
    let app = transfer_app(&anvil, &[("OFFER_ALLOW_PRIVATE", "true"), ("ADMIN_TOKEN", ADMIN)]).await;
    let agent = funded_agent(&app, &anvil, Some(0.5)).await;
    let agent_wallet = wallet(&agent);
    let (upstream, mut held) = Upstream::start(Duration::from_millis(1500)).await;
    let gas_per_day = "0.0008";
    let slow = create_offer(&app, &agent, &upstream.url("/slow"), gas_per_day).await;
    let slow_url = app.url(&format!("/x402/{}", slow["id"].as_str().unwrap()));
    let fast = create_offer(&app, &agent, &upstream.url("/fast"), gas_per_day).await;
    let fast_url = app.url(&format!("/x402/{}", fast["id"].as_str().unwrap()));
    let elsewhere = PrivateKeySigner::random().address();

    // 1. The tokens moved while the upstream holds the request: refused right before signing, nothing sent.
    let griefer = PrivateKeySigner::random();
    mint(&anvil, usdc, griefer.address(), U256::from(PRICE)).await;
    anvil.set_balance(griefer.address(), wei(ONE_ETH)).await;
    let header = sdk_payment(&slow_url, &griefer).await;
    let buying = {
        let (client, url, header) = (app.client.clone(), slow_url.clone(), header.clone());
        tokio::spawn(async move { pay(&client, &url, &header).await })
    };
    tokio::time::timeout(Duration::from_secs(20), held.recv())
        .await
        .unwrap()
        .unwrap();
    let away = Usdc::transferCall {
        to: elsewhere,
        value: U256::from(PRICE),
    }
    .abi_encode();
    let (_, moved) = send_as_payer(&anvil, griefer.address(), usdc, away.into()).await;
    assert!(moved, "the griefer moved its tokens");
    assert_eq!(buying.await.unwrap(), "invalid_exact_evm_transaction_simulation_failed");
    assert_eq!(anvil.nonce(agent_wallet).await, 0, "nothing was sent");
    assert_eq!(anvil.balance(agent_wallet).await, wei(ONE_ETH));

    // 2. The tokens moved ahead of the settlement in the same block: it reverts; the payer is blocked.
    let (entry, resource) = (entry_of(&app.client, &fast_url).await, fast_url.clone());
    let mut reverted = 0;
    let mut paused = false;
    let mut first_griefer = None;
    for round in 0..12 {
        let griefer = PrivateKeySigner::random();
        mint(&anvil, usdc, griefer.address(), U256::from(PRICE)).await;
        anvil.set_balance(griefer.address(), wei(ONE_ETH)).await;
        let (header, _) = payment(&entry, &resource, &griefer, random_nonce());
        let sent_before = pending_nonce(&anvil, agent_wallet).await;
        anvil.set_automine(false).await;
        let buying = {
            let (client, url, header) = (app.client.clone(), fast_url.clone(), header.clone());
            tokio::spawn(async move { pay(&client, &url, &header).await })
        };
        let deadline = Instant::now() + Duration::from_secs(20);
        while pending_nonce(&anvil, agent_wallet).await == sent_before && !buying.is_finished() {
            assert!(Instant::now() < deadline, "round {round}: no settlement was sent");
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        if buying.is_finished() {
            anvil.set_automine(true).await;
            let answer = buying.await.unwrap();
            assert_eq!(answer, "offer_paused", "round {round}");
            paused = true;
            break;
        }
        let away = Usdc::transferCall {
            to: elsewhere,
            value: U256::from(PRICE),
        }
        .abi_encode();
        send_ahead(&anvil, griefer.address(), usdc, away.into()).await;
        anvil.mine(1).await;
        anvil.set_automine(true).await;
        let answer = buying.await.unwrap();
        assert_eq!(answer, "transaction_failed", "round {round}");
        reverted += 1;
        first_griefer.get_or_insert(griefer);
    }
    assert!(reverted >= 1, "at least one settlement reverted");
    assert!(paused, "the offer paused before twelve reverts");

    // The first griefer's next payment (funded again) is refused: payer_blocked.
    let griefer = first_griefer.unwrap();
    mint(&anvil, usdc, griefer.address(), U256::from(PRICE)).await;
    let (header, _) = payment(
        &entry_of(&app.client, &slow_url).await,
        &slow_url,
        &griefer,
        random_nonce(),
    );
    assert_eq!(pay(&app.client, &slow_url, &header).await, "payer_blocked");

    // From the chain: the agent sent `reverted` settlements, all reverted, and their gas is within gas_per_day.
    assert_eq!(anvil.nonce(agent_wallet).await, reverted);
    assert_eq!(token_balance(&anvil, usdc, agent_wallet).await, U256::ZERO);
    let spent = wei(ONE_ETH) - anvil.balance(agent_wallet).await;
    let budget = agentd::domain::amount::parse_units(gas_per_day, 18).unwrap();
    assert!(
        spent > U256::ZERO && spent <= budget,
        "the agent spent {spent} wei on reverts, budget {budget}"
    );
    let income = app
        .settle_until(async || {
            let (status, body) = call(
                &app,
                &agent,
                true,
                Method::GET,
                &format!("/api/agents/{}/income", agent.id),
                None,
            )
            .await;
            assert_eq!(status, StatusCode::OK, "{body}");
            let income = body["income"].as_array().cloned().unwrap_or_default();
            match income.iter().filter(|i| i["status"] == "failed").count() == reverted as usize {
                true => Ok(income),
                false => Err(format!("{reverted} failed income records expected: {income:#?}")),
            }
        })
        .await;
    assert!(!income.iter().any(|i| i["status"] == "settled"), "{income:#?}");
    let fees: Vec<&Value> = income.iter().map(|i| &i["fee"]).collect();
    println!("{reverted} reverted settlements cost the agent {spent} wei of a gas_per_day of {budget}; fees {fees:?}");
}

/// `send_as` for an address the node does not hold: impersonated.
async fn send_as_payer(anvil: &Anvil, from: Address, to: Address, data: Bytes) -> (alloy::primitives::TxHash, bool) {
    let _: Value = anvil
        .provider()
        .raw_request("anvil_impersonateAccount".into(), (from,))
        .await
        .expect("anvil_impersonateAccount");
    send_as(anvil, from, to, data).await
}

/// A payer who uses up its own authorization while the upstream holds the request — cancelled
/// (`cancelAuthorization`), or its nonce spent on another authorization paying someone else — has its settlement's
/// simulation fail. The chain shows the authorization used (`authorizationState` true) but no `AuthorizationUsed`
/// with a transfer to the agent: the resource is not served and the payment is released, not recorded as settled
/// elsewhere. The buyer's own authorization settled by a third party meanwhile is: settled `external`, served once.
#[tokio::test]
async fn an_authorization_the_payer_used_up_elsewhere_while_the_upstream_holds_the_request_is_not_served() {
    let anvil = Anvil::start(BASE_CHAIN_ID);
    let usdc = usdc_on_base(&anvil).await;
    let app = transfer_app(&anvil, &[("OFFER_ALLOW_PRIVATE", "true"), ("ADMIN_TOKEN", ADMIN)]).await;
    let agent = funded_agent(&app, &anvil, Some(0.5)).await;
    let agent_wallet = wallet(&agent);
    let (upstream, mut held) = Upstream::start(Duration::from_millis(1500)).await;
    let offer = create_offer(&app, &agent, &upstream.url("/slow"), "0.01").await;
    let url = app.url(&format!("/x402/{}", offer["id"].as_str().unwrap()));
    let entry = entry_of(&app.client, &url).await;
    let dev: Address = Anvil::DEV_ADDRESS.parse().unwrap();

    let cancelled = PrivateKeySigner::random();
    let spent_elsewhere = PrivateKeySigner::random();
    let settled_by_a_third_party = PrivateKeySigner::random();
    let accomplice = PrivateKeySigner::random().address();
    let payers = [&cancelled, &spent_elsewhere, &settled_by_a_third_party];
    for (i, payer) in payers.into_iter().enumerate() {
        mint(&anvil, usdc, payer.address(), U256::from(PAYER_FUNDS)).await;
        let nonce = random_nonce();
        let (header, authorization) = payment(&entry, &url, payer, nonce);
        let buying = {
            let (client, url, header) = (app.client.clone(), url.clone(), header.clone());
            tokio::spawn(async move { pay(&client, &url, &header).await })
        };
        tokio::time::timeout(Duration::from_secs(20), held.recv())
            .await
            .unwrap()
            .unwrap();
        // While the upstream holds the request, anyone submits what the payer signed: a cancellation of the nonce,
        // or an authorization with the same nonce paying 1 base unit to someone else.
        let data: Bytes = match i {
            0 => {
                let cancel = CancelAuthorization {
                    authorizer: payer.address(),
                    nonce,
                };
                let signature = payer
                    .sign_hash_sync(&cancel.eip712_signing_hash(&usdc_domain()))
                    .unwrap();
                Usdc::cancelAuthorizationCall {
                    authorizer: payer.address(),
                    nonce,
                    signature: signature.as_bytes().to_vec().into(),
                }
                .abi_encode()
                .into()
            }
            _ => {
                // 1: the same nonce paying 1 base unit to an accomplice; 2: the buyer's own authorization, as sent.
                let other = match i {
                    1 => TransferWithAuthorization {
                        to: accomplice,
                        value: U256::from(1),
                        ..authorization
                    },
                    _ => authorization,
                };
                let signature = payer
                    .sign_hash_sync(&other.eip712_signing_hash(&usdc_domain()))
                    .unwrap();
                Usdc::transferWithAuthorizationCall {
                    from: other.from,
                    to: other.to,
                    value: other.value,
                    validAfter: other.validAfter,
                    validBefore: other.validBefore,
                    nonce,
                    signature: signature.as_bytes().to_vec().into(),
                }
                .abi_encode()
                .into()
            }
        };
        let (_, used) = send_as(&anvil, dev, usdc, data).await;
        assert!(used, "the payer's own use of its nonce succeeded");
        assert!(authorization_state(&anvil, usdc, payer.address(), nonce).await);

        let answer = buying.await.unwrap();
        let again = pay(&app.client, &url, &header).await;
        match i {
            0 | 1 => {
                assert_eq!(
                    answer, "invalid_exact_evm_transaction_simulation_failed",
                    "payer {i}: not served, the agent was never paid"
                );
                assert_eq!(
                    again, "invalid_exact_evm_nonce_already_used",
                    "payer {i}: a released authorization stays held"
                );
            }
            _ => {
                assert_eq!(answer, "served", "settled by a third party: the agent was paid");
                assert_eq!(again, "invalid_exact_evm_nonce_already_used", "served once");
            }
        }
    }

    // From the chain: the agent received the third party's settlement only and sent nothing.
    assert_eq!(token_balance(&anvil, usdc, agent_wallet).await, U256::from(PRICE));
    assert_eq!(
        token_balance(&anvil, usdc, settled_by_a_third_party.address()).await,
        U256::from(PAYER_FUNDS - PRICE)
    );
    assert_eq!(
        token_balance(&anvil, usdc, cancelled.address()).await,
        U256::from(PAYER_FUNDS)
    );
    assert_eq!(anvil.nonce(agent_wallet).await, 0);
    let (status, body) = call(
        &app,
        &agent,
        true,
        Method::GET,
        &format!("/api/agents/{}/income", agent.id),
        None,
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    let income = body["income"].as_array().cloned().unwrap_or_default();
    let by = |payer: &PrivateKeySigner| {
        let found = income
            .iter()
            .find(|i| i["payer"].as_str().and_then(|p| p.parse::<Address>().ok()) == Some(payer.address()));
        found
            .cloned()
            .unwrap_or_else(|| panic!("an income record of {}: {income:#?}", payer.address()))
    };
    assert_eq!(by(&cancelled)["status"], "released", "{income:#?}");
    assert_eq!(by(&spent_elsewhere)["status"], "released", "{income:#?}");
    let external = by(&settled_by_a_third_party);
    assert_eq!(external["status"], "settled", "{income:#?}");
    assert_eq!(external["settled_by"], "external", "{income:#?}");
    assert!(external["tx_hash"].is_string(), "{income:#?}");
    let (status, audit) = call(
        &app,
        &agent,
        true,
        Method::GET,
        &format!("/api/agents/{}/audit", agent.id),
        None,
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{audit}");
    let received: Vec<&Value> = audit
        .as_array()
        .into_iter()
        .flatten()
        .filter(|e| e["action"] == "x402_payment_received")
        .collect();
    assert_eq!(received.len(), 1, "only the third party's settlement: {received:#?}");
}
