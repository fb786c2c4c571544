//! The test harness: `spawn_app()` starts the real app in-process on a fresh database (SQLite file, or a fresh
//! PostgreSQL database when `TEST_POSTGRES_URL` is set), `TestApp` wraps typed requests, and `ServerProcess`
//! (in `process`) runs the compiled binary for the tests that need a real process (signals, logs, files on disk).

use std::collections::BTreeMap;
use std::path::Path;

use agentd::app::App;
use agentd::config::Config;
use alloy::primitives::Address;
use alloy::signers::SignerSync;
use alloy::signers::local::PrivateKeySigner;
use reqwest::header::HeaderMap;
use reqwest::{Method, RequestBuilder, StatusCode};
use serde_json::{Value, json};
use tempfile::TempDir;
use tokio::sync::oneshot;

pub mod chain;
pub mod chat;
pub mod delegation_framework;
pub mod gated_rpc;
pub mod l1_proxy;
pub mod llm_server;
pub mod openapi;
pub mod paymaster;
pub mod paywall;
mod process;
pub mod relay;
pub mod sdk_paywall;
pub mod sdk_seller;
pub mod slow_rpc;
pub mod solidity;
pub mod sse;
pub mod uniswap;
mod watcher;
pub mod webhook_receiver;
pub use process::{ExitingProcess, ProcessOutcome, ServerProcess, run_subcommand, run_to_exit};

/// The fixed key every in-process test app encrypts wallet keys with (32 bytes, hex).
pub const ENCRYPTION_KEY: &str = "e17cbbe009243e23cd94262fddb8f83fca4de05f2e0d7058a0a203439f8f8910";

/// The header agent-scoped calls carry the access token in.
pub const TOKEN_HEADER: &str = "X-Agent-Access-Token";

/// A running in-process app with its own database and port.
pub struct TestApp {
    /// `http://127.0.0.1:<port>`
    pub address: String,
    pub client: reqwest::Client,
    pub db_url: String,
    /// Sent as `Authorization: Bearer` on agent creation and listing when the app was started with `ADMIN_TOKEN`.
    pub admin_token: Option<String>,
    /// Holds the SQLite file (and anything else the app writes); removed when the test ends.
    pub dir: TempDir,
    /// The running app's state, for the few tests that look inside (the rate limiters' sizes).
    pub state: agentd::state::AppState,
    /// The app's clock: `advance` skips an interval the app waits out (a recheck, a cache's age).
    pub clock: std::sync::Arc<agentd::domain::clock::ManualClock>,
    /// `(server URL, database name)` of the PostgreSQL database created for this test, dropped with it.
    postgres_database: Option<(String, String)>,
    // Dropping the sender resolves the shutdown future, so the server stops with the test.
    _shutdown: oneshot::Sender<()>,
}

/// A response with everything a test may look at.
pub struct TestResponse {
    pub status: StatusCode,
    pub headers: HeaderMap,
    pub text: String,
    /// The body parsed as JSON; `Null` when empty, a JSON string holding the raw text when it is not JSON.
    pub body: Value,
}

/// An agent created through the API, with the token it was issued.
pub struct CreatedAgent {
    pub id: String,
    pub token: String,
    pub body: Value,
}

impl CreatedAgent {
    /// The agent's wallet address on `chain`, as the creation response gave it.
    pub fn address(&self, chain: &str) -> String {
        self.body["wallet_addresses"][chain]
            .as_str()
            .unwrap_or_else(|| panic!("no wallet address for {chain} in {}", self.body))
            .to_string()
    }
}

/// A reissue challenge as the API returned it.
pub struct Challenge {
    pub message: String,
    pub nonce: String,
    pub expires_unix: i64,
}

pub async fn spawn_app() -> TestApp {
    spawn_app_with(&[]).await
}

/// Starts the app with the harness defaults overridden (or extended) by `extra_vars`. With `TEST_LOG` set (a filter
/// such as `warn` or `agentd=debug`), the app's log lines go to the test's captured output, shown when it fails.
pub async fn spawn_app_with(extra_vars: &[(&str, &str)]) -> TestApp {
    if let Ok(filter) = std::env::var("TEST_LOG") {
        let _ = tracing_subscriber::fmt()
            .with_env_filter(tracing_subscriber::EnvFilter::new(filter))
            .with_test_writer()
            .try_init();
    }
    let dir = tempfile::tempdir().expect("create a temporary directory");
    let mut vars = base_vars(&dir);
    let explicit_db = extra_vars.iter().any(|(k, _)| *k == "DATABASE_URL");
    let mut postgres_database = None;
    if !explicit_db && let Some(admin_url) = postgres_admin_url() {
        let name = create_postgres_database(&admin_url).await;
        vars.insert("DATABASE_URL".into(), with_database_name(&admin_url, &name));
        postgres_database = Some((admin_url, name));
    }
    for (key, value) in extra_vars {
        vars.insert(key.to_string(), value.to_string());
    }
    let db_url = vars["DATABASE_URL"].clone();
    let admin_token = vars.get("ADMIN_TOKEN").cloned();

    let config = Config::from_vars(vars).expect("the test configuration is valid");
    let clock = std::sync::Arc::new(agentd::domain::clock::ManualClock::default());
    let app = App::build_on(config, clock.clone()).await.expect("the app builds");
    let addr = app.local_addr();
    let state = app.state().clone();
    let (tx, rx) = oneshot::channel::<()>();
    tokio::spawn(app.run_until_stopped(async move {
        let _ = rx.await;
    }));

    TestApp {
        address: format!("http://{addr}"),
        client: reqwest::Client::builder()
            .redirect(reqwest::redirect::Policy::none())
            .build()
            .expect("build the HTTP client"),
        db_url,
        admin_token,
        dir,
        state,
        clock,
        postgres_database,
        _shutdown: tx,
    }
}

/// The variables every in-process test app starts from: a free port, a fixed key, a SQLite file in `dir`.
pub fn base_vars(dir: &TempDir) -> BTreeMap<String, String> {
    let mut vars = BTreeMap::from([
        ("BIND_ADDR".to_string(), "127.0.0.1:0".to_string()),
        ("APP_ENV".to_string(), "development".to_string()),
        ("ENCRYPTION_KEY".to_string(), ENCRYPTION_KEY.to_string()),
        ("DATABASE_URL".to_string(), sqlite_url(dir.path())),
    ]);
    vars.extend(key_backend_vars());
    vars
}

/// With `TEST_KEY_BACKEND=pkcs11`, every app of the run keeps its agents' keys in one PKCS#11 token
/// (`TEST_PKCS11_MODULE`, `TEST_PKCS11_TOKEN`, `TEST_PKCS11_PIN`; the module's own configuration, such as
/// `SOFTHSM2_CONF`, comes from the environment of the run): `scripts/test.sh` runs the money-path suites so, on a
/// SoftHSM2 token it initialises. Otherwise nothing: the local backend.
fn key_backend_vars() -> Vec<(String, String)> {
    if std::env::var("TEST_KEY_BACKEND").as_deref() != Ok("pkcs11") {
        return Vec::new();
    }
    let var = |name: &str| std::env::var(name).unwrap_or_else(|_| panic!("TEST_KEY_BACKEND=pkcs11 needs {name}"));
    vec![
        ("KEY_BACKEND".to_string(), "pkcs11".to_string()),
        ("PKCS11_MODULE".to_string(), var("TEST_PKCS11_MODULE")),
        ("PKCS11_TOKEN_LABEL".to_string(), var("TEST_PKCS11_TOKEN")),
        ("PKCS11_PIN".to_string(), var("TEST_PKCS11_PIN")),
    ]
}

pub fn sqlite_url(dir: &Path) -> String {
    format!("sqlite://{}/agentd.db", dir.display())
}

fn postgres_admin_url() -> Option<String> {
    std::env::var("TEST_POSTGRES_URL")
        .ok()
        .filter(|url| !url.trim().is_empty())
}

/// Creates `agentd_test_<uuid>` on the server of `admin_url`, a copy of the migrated template, and returns its name.
async fn create_postgres_database(admin_url: &str) -> String {
    use sqlx::{Connection, Executor};

    let template = postgres_template(admin_url);
    let name = format!("agentd_test_{}", uuid::Uuid::new_v4().simple());
    let mut conn = sqlx::PgConnection::connect(admin_url)
        .await
        .expect("connect to TEST_POSTGRES_URL");
    conn.execute(sqlx::AssertSqlSafe(format!(
        r#"CREATE DATABASE "{name}" TEMPLATE "{template}""#
    )))
    .await
    .expect("create the test database");
    let _ = conn.close().await;
    name
}

/// The database every test database is copied from: migrated once per set of migrations (its name holds a hash of
/// them), so that a test does not run every migration again (a copy is a fraction of that). The app still runs its
/// migrations at start; on a copy they are all applied already.
fn postgres_template(admin_url: &str) -> String {
    static TEMPLATE: std::sync::OnceLock<String> = std::sync::OnceLock::new();
    TEMPLATE
        .get_or_init(|| {
            let admin_url = admin_url.to_string();
            // The asking test's runtime is blocked here: build it on a runtime of our own on another thread.
            std::thread::spawn(move || {
                let runtime = tokio::runtime::Builder::new_current_thread()
                    .enable_all()
                    .build()
                    .expect("a runtime");
                runtime.block_on(build_postgres_template(&admin_url))
            })
            .join()
            .expect("the template is built")
        })
        .clone()
}

async fn build_postgres_template(admin_url: &str) -> String {
    use sqlx::{Connection, Executor};
    use std::hash::{Hash, Hasher};

    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("migrations/postgres");
    let mut files: Vec<_> = std::fs::read_dir(&dir)
        .expect("the migrations are readable")
        .map(|e| e.expect("a directory entry").path())
        .collect();
    files.sort();
    let mut hasher = std::collections::hash_map::DefaultHasher::new();
    for file in &files {
        file.file_name().hash(&mut hasher);
        std::fs::read(file).expect("a readable migration").hash(&mut hasher);
    }
    let name = format!("agentd_template_{:016x}", hasher.finish());
    let mut conn = sqlx::PgConnection::connect(admin_url)
        .await
        .expect("connect to TEST_POSTGRES_URL");
    let exists: Option<(i32,)> = sqlx::query_as("SELECT 1 FROM pg_database WHERE datname = $1")
        .bind(&name)
        .fetch_optional(&mut conn)
        .await
        .expect("read pg_database");
    if exists.is_none() {
        // Built under a name of its own and renamed once migrated: another run building it at the same time never
        // sees half of it (whichever renames second drops its own).
        let building = format!("agentd_building_{}", uuid::Uuid::new_v4().simple());
        conn.execute(sqlx::AssertSqlSafe(format!(r#"CREATE DATABASE "{building}""#)))
            .await
            .expect("create the template database");
        let mut migrating = sqlx::PgConnection::connect(&with_database_name(admin_url, &building))
            .await
            .expect("connect to the template database");
        sqlx::migrate!("./migrations/postgres")
            .run(&mut migrating)
            .await
            .expect("migrate the template database");
        let _ = migrating.close().await;
        let renamed = conn
            .execute(sqlx::AssertSqlSafe(format!(
                r#"ALTER DATABASE "{building}" RENAME TO "{name}""#
            )))
            .await;
        if renamed.is_err() {
            let _ = conn
                .execute(sqlx::AssertSqlSafe(format!(r#"DROP DATABASE IF EXISTS "{building}""#)))
                .await;
        }
    }
    let _ = conn.close().await;
    name
}

impl Drop for TestApp {
    /// Drops the test's PostgreSQL database (a few MB each) so that test runs do not pile them up.
    fn drop(&mut self) {
        if let Some((admin_url, name)) = self.postgres_database.take() {
            drop_postgres_database(admin_url, name);
        }
    }
}

/// A fresh database for tests that open the store themselves, as the app does: a SQLite file in `dir`, or a new
/// PostgreSQL database when `TEST_POSTGRES_URL` is set (dropped with this value).
pub struct TestDatabase {
    /// The harness configuration pointing at this database.
    pub config: Config,
    /// Holds the SQLite file; removed when the test ends.
    _dir: TempDir,
    postgres_database: Option<(String, String)>,
}

pub async fn test_database() -> TestDatabase {
    let dir = tempfile::tempdir().expect("create a temporary directory");
    let mut vars = base_vars(&dir);
    let mut postgres_database = None;
    if let Some(admin_url) = postgres_admin_url() {
        let name = create_postgres_database(&admin_url).await;
        vars.insert("DATABASE_URL".into(), with_database_name(&admin_url, &name));
        postgres_database = Some((admin_url, name));
    }
    let config = Config::from_vars(vars).expect("the test configuration is valid");
    TestDatabase {
        config,
        _dir: dir,
        postgres_database,
    }
}

impl Drop for TestDatabase {
    fn drop(&mut self) {
        if let Some((admin_url, name)) = self.postgres_database.take() {
            drop_postgres_database(admin_url, name);
        }
    }
}

/// Drops a test's PostgreSQL database (a few MB each) so that test runs do not pile them up.
fn drop_postgres_database(admin_url: String, name: String) {
    // The test's runtime is busy dropping us: use a runtime of our own on another thread.
    let dropped = std::thread::spawn(move || {
        use sqlx::{Connection, Executor};
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .ok()?;
        runtime.block_on(async {
            let mut conn = sqlx::PgConnection::connect(&admin_url).await.ok()?;
            // FORCE closes the connections the app's pool still holds.
            let sql = format!(r#"DROP DATABASE IF EXISTS "{name}" WITH (FORCE)"#);
            conn.execute(sqlx::AssertSqlSafe(sql)).await.ok()?;
            conn.close().await.ok()
        })
    });
    let _ = dropped.join();
}

/// Replaces the database name (the path) of a `postgres://` URL, keeping its query string.
fn with_database_name(url: &str, name: &str) -> String {
    let (base, query) = match url.split_once('?') {
        Some((base, query)) => (base, Some(query)),
        None => (url, None),
    };
    let scheme_end = base.find("://").map(|i| i + 3).unwrap_or(0);
    let authority_end = base[scheme_end..]
        .find('/')
        .map(|i| scheme_end + i)
        .unwrap_or(base.len());
    let mut out = format!("{}/{}", &base[..authority_end], name);
    if let Some(query) = query {
        out.push('?');
        out.push_str(query);
    }
    out
}

impl TestApp {
    pub fn url(&self, path: &str) -> String {
        format!("{}{}", self.address, path)
    }

    /// A request with an optional agent token and an optional JSON body, not yet sent.
    pub fn build(&self, method: Method, path: &str, token: Option<&str>, body: Option<Value>) -> RequestBuilder {
        let mut builder = self.client.request(method, self.url(path));
        if let Some(token) = token {
            builder = builder.header(TOKEN_HEADER, token);
        }
        if let Some(body) = body {
            builder = builder.json(&body);
        }
        builder
    }

    pub async fn send(&self, builder: RequestBuilder) -> TestResponse {
        let response = builder.send().await.expect("the request reaches the app");
        let status = response.status();
        let headers = response.headers().clone();
        let text = response.text().await.expect("read the response body");
        let body = if text.is_empty() {
            Value::Null
        } else {
            serde_json::from_str(&text).unwrap_or_else(|_| Value::String(text.clone()))
        };
        TestResponse {
            status,
            headers,
            text,
            body,
        }
    }

    pub async fn request(
        &self,
        method: Method,
        path: &str,
        token: Option<&str>,
        body: Option<Value>,
    ) -> (StatusCode, Value) {
        let response = self.send(self.build(method, path, token, body)).await;
        (response.status, response.body)
    }

    fn with_admin(&self, builder: RequestBuilder) -> RequestBuilder {
        match &self.admin_token {
            Some(admin) => builder.bearer_auth(admin),
            None => builder,
        }
    }

    pub async fn create_agent(&self, body: Value) -> (StatusCode, Value) {
        let builder = self.with_admin(self.build(Method::POST, "/api/agents", None, Some(body)));
        let response = self.send(builder).await;
        (response.status, response.body)
    }

    /// Creates an agent from `body` and insists on a 201.
    pub async fn create_agent_ok(&self, body: Value) -> CreatedAgent {
        let (status, body) = self.create_agent(body).await;
        assert_eq!(status, StatusCode::CREATED, "creating an agent failed: {body}");
        let id = body["id"].as_str().expect("id in the creation response").to_string();
        let token = body["access_token"]
            .as_str()
            .expect("access_token in the creation response")
            .to_string();
        CreatedAgent { id, token, body }
    }

    pub async fn create_default_agent(&self) -> CreatedAgent {
        self.create_agent_ok(json!({"name": "test agent"})).await
    }

    pub async fn list_agents(&self, query: &str) -> (StatusCode, Value) {
        let path = format!("/api/agents{query}");
        let builder = self.with_admin(self.build(Method::GET, &path, None, None));
        let response = self.send(builder).await;
        (response.status, response.body)
    }

    pub async fn get_agent(&self, id: &str, token: &str) -> (StatusCode, Value) {
        self.request(Method::GET, &format!("/api/agents/{id}"), Some(token), None)
            .await
    }

    pub async fn put_agent(&self, id: &str, token: &str, body: Value) -> (StatusCode, Value) {
        self.request(Method::PUT, &format!("/api/agents/{id}"), Some(token), Some(body))
            .await
    }

    pub async fn delete_agent(&self, id: &str, token: &str) -> (StatusCode, Value) {
        self.request(Method::DELETE, &format!("/api/agents/{id}"), Some(token), None)
            .await
    }

    pub async fn reissue_challenge(&self, id: &str) -> (StatusCode, Value) {
        let path = format!("/api/agents/{id}/reissue-challenge");
        self.request(Method::GET, &path, None, None).await
    }

    /// Fetches a reissue challenge and insists on a 200 with a parsable message.
    pub async fn challenge(&self, id: &str) -> Challenge {
        let (status, body) = self.reissue_challenge(id).await;
        assert_eq!(status, StatusCode::OK, "reissue-challenge failed: {body}");
        let message = body["message"].as_str().expect("message").to_string();
        let nonce = body["nonce"].as_str().expect("nonce").to_string();
        let expires_unix = message
            .rsplit(':')
            .next()
            .and_then(|s| s.parse().ok())
            .unwrap_or_else(|| panic!("challenge message ends in a unix time: {message}"));
        Challenge {
            message,
            nonce,
            expires_unix,
        }
    }

    pub async fn reissue_token(&self, id: &str, body: Value) -> (StatusCode, Value) {
        let path = format!("/api/agents/{id}/reissue-token");
        self.request(Method::POST, &path, None, Some(body)).await
    }

    pub async fn export_key(&self, id: &str, token: &str, body: Value) -> (StatusCode, Value) {
        let path = format!("/api/agents/{id}/export-key");
        self.request(Method::POST, &path, Some(token), Some(body)).await
    }

    /// `GET /api/conversations?agent_id=…` as the agent; insists on a 200 with an array, newest first.
    pub async fn list_conversations(&self, agent: &CreatedAgent) -> Vec<Value> {
        let path = format!("/api/conversations?agent_id={}", agent.id);
        let (status, body) = self.request(Method::GET, &path, Some(&agent.token), None).await;
        assert_eq!(status, StatusCode::OK, "listing conversations: {body}");
        body.as_array()
            .unwrap_or_else(|| panic!("an array of conversations: {body}"))
            .clone()
    }

    /// `GET /api/conversations/{id}/messages` as the agent; insists on a 200 with an array, oldest first.
    pub async fn messages(&self, agent: &CreatedAgent, conversation_id: &str) -> Vec<Value> {
        let path = format!("/api/conversations/{conversation_id}/messages");
        let (status, body) = self.request(Method::GET, &path, Some(&agent.token), None).await;
        assert_eq!(status, StatusCode::OK, "messages: {body}");
        body.as_array()
            .unwrap_or_else(|| panic!("an array of messages: {body}"))
            .clone()
    }

    /// Exports the agent's key on `chain` and insists on a 200.
    pub async fn exported_signer(&self, agent: &CreatedAgent, chain: &str) -> (PrivateKeySigner, String) {
        let (status, body) = self
            .export_key(&agent.id, &agent.token, json!({"chain": chain, "confirm": true}))
            .await;
        assert_eq!(status, StatusCode::OK, "export-key failed: {body}");
        let key = body["private_key"].as_str().expect("private_key").to_string();
        (parse_private_key(&key), key)
    }
}

pub fn parse_private_key(key: &str) -> PrivateKeySigner {
    key.trim_start_matches("0x")
        .parse()
        .unwrap_or_else(|e| panic!("private_key is a secp256k1 key in hex: {e}"))
}

/// An EIP-191 `personal_sign` signature of `message`, as `0x` + 65 bytes of hex.
pub fn sign(signer: &PrivateKeySigner, message: &str) -> String {
    let signature = signer
        .sign_message_sync(message.as_bytes())
        .expect("signing a message works");
    format!("0x{}", alloy::hex::encode(signature.as_bytes()))
}

pub fn checksummed(signer: &PrivateKeySigner) -> String {
    signer.address().to_checksum(None)
}

pub fn wallet_proof(chain: &str, message: &str, signature: &str) -> Value {
    json!({"proof": {
        "type": "wallet_signature",
        "chain": chain,
        "message": message,
        "signature": signature,
        "public_key": "",
    }})
}

pub fn token_proof(token: &str) -> Value {
    json!({"proof": {"type": "current_token", "token": token}})
}

/// Checks the `{"error": {"code", "message"}}` shape, the status and the code.
#[track_caller]
pub fn assert_error(response: &(StatusCode, Value), status: StatusCode, code: &str) {
    assert_error_status(response, status);
    assert_eq!(
        response.1["error"]["code"], code,
        "expected error code {code}, got {}",
        response.1
    );
}

/// Checks the status and the error shape, whatever the code.
#[track_caller]
pub fn assert_error_status(response: &(StatusCode, Value), status: StatusCode) {
    let (actual, body) = response;
    assert_eq!(*actual, status, "expected {status}, got {actual} with {body}");
    assert_error_shape(body);
}

/// `{"error": {"code": "<snake_case>", "message": "<text>"}}`, `details` allowed, nothing else.
#[track_caller]
pub fn assert_error_shape(body: &Value) {
    let top = body
        .as_object()
        .unwrap_or_else(|| panic!("error body is a JSON object: {body}"));
    assert_eq!(top.len(), 1, "error body has only `error`: {body}");
    let error = body["error"]
        .as_object()
        .unwrap_or_else(|| panic!("`error` is an object: {body}"));
    let code = error["code"].as_str().unwrap_or_else(|| panic!("string code: {body}"));
    assert!(
        !code.is_empty()
            && code.starts_with(|c: char| c.is_ascii_lowercase())
            && code
                .chars()
                .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_'),
        "code is snake_case: {body}"
    );
    let message = error
        .get("message")
        .and_then(Value::as_str)
        .unwrap_or_else(|| panic!("string message: {body}"));
    assert!(!message.trim().is_empty(), "message is not empty: {body}");
    for key in error.keys() {
        assert!(
            ["code", "message", "details"].contains(&key.as_str()),
            "unexpected key {key} in error: {body}"
        );
    }
}

/// Fails when an agent representation carries anything that looks like key material, a hash or a key-store nonce.
#[track_caller]
pub fn assert_no_secret_fields(value: &Value) {
    match value {
        Value::Object(map) => {
            for (key, inner) in map {
                let key = key.to_ascii_lowercase();
                for word in [
                    "private",
                    "secret",
                    "cipher",
                    "encrypted",
                    "hash",
                    "nonce",
                    "seed",
                    "mnemonic",
                ] {
                    assert!(!key.contains(word), "agent field `{key}` looks secret: {value}");
                }
                assert_no_secret_fields(inner);
            }
        }
        Value::Array(items) => items.iter().for_each(assert_no_secret_fields),
        Value::String(s) => {
            let hex = s.trim_start_matches("0x");
            assert!(
                !(hex.len() >= 64 && hex.chars().all(|c| c.is_ascii_hexdigit())),
                "a value looks like key material: {s}"
            );
        }
        _ => {}
    }
}

/// Asserts an EIP-55 checksummed address and returns it parsed.
#[track_caller]
pub fn assert_checksummed(address: &str) -> Address {
    Address::parse_checksummed(address, None)
        .unwrap_or_else(|e| panic!("{address} is an EIP-55 checksummed address: {e}"))
}

pub fn now_unix() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .expect("clock after 1970")
        .as_secs() as i64
}

#[test]
fn postgres_urls_get_the_test_database_name() {
    assert_eq!(
        with_database_name("postgres://postgres@127.0.0.1:5432/postgres", "x"),
        "postgres://postgres@127.0.0.1:5432/x"
    );
    assert_eq!(
        with_database_name("postgres://u:p@h/postgres?sslmode=disable", "x"),
        "postgres://u:p@h/x?sslmode=disable"
    );
    assert_eq!(with_database_name("postgres://h:5432", "x"), "postgres://h:5432/x");
}
