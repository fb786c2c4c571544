//! The configurations the binary refuses to start with (docs/api.md §15), the master-key check, and
//! `agentd rotate-key`: real processes on a fresh database (SQLite, or PostgreSQL when `TEST_POSTGRES_URL` is set).

use std::path::Path;
use std::time::Duration;

use alloy::primitives::Address;
use reqwest::StatusCode;
use secrecy::ExposeSecret;
use serde_json::{Value, json};

use crate::anvil::Anvil;
use crate::helpers::chain::{BASE_CHAIN_ID, CENT_ETH, ONE_ETH, fresh_address, wei};
use crate::helpers::{
    ENCRYPTION_KEY, ProcessOutcome, ServerProcess, TOKEN_HEADER, parse_private_key, run_subcommand, run_to_exit,
    sqlite_url, test_database,
};

/// A second and a third key, neither the harness key.
const OTHER_KEY: &str = "2f8e2b6a91c4d7e05a3b8c9d1e2f30415263748596a7b8c9dae0f1021324354f";
const THIRD_KEY: &str = "7d1c4e9a0b3f5a6c8d2e1f0a9b8c7d6e5f4a3b2c1d0e9f8a7b6c5d4e3f2a1b0c";

const EXIT_TIMEOUT: Duration = Duration::from_secs(30);

/// Asserts the process exited non-zero by itself, without serving, naming `names` and printing none of `secrets`.
fn assert_refused(outcome: &ProcessOutcome, names: &[&str], secrets: &[&str]) {
    let status = outcome
        .status
        .unwrap_or_else(|| panic!("agentd kept running; output:\n{}", outcome.logs));
    assert!(!status.success(), "non-zero exit; output:\n{}", outcome.logs);
    assert!(!outcome.logs.contains("listening on"), "{}", outcome.logs);
    for name in names {
        assert!(
            outcome.logs.contains(name),
            "the message names {name}:\n{}",
            outcome.logs
        );
    }
    for secret in secrets {
        assert!(
            !outcome.logs.contains(secret),
            "a secret in the output:\n{}",
            outcome.logs
        );
    }
}

fn dev_env<'a>(db: &'a str, extra: &[(&'a str, &'a str)]) -> Vec<(&'a str, &'a str)> {
    let mut env = vec![
        ("APP_ENV", "development"),
        ("DATABASE_URL", db),
        ("BIND_ADDR", "127.0.0.1:0"),
        ("ENCRYPTION_KEY", ENCRYPTION_KEY),
    ];
    for (key, value) in extra {
        env.retain(|(k, _)| k != key);
        env.push((key, value));
    }
    env
}

#[test]
fn production_without_an_admin_token_refuses_to_start() {
    let dir = tempfile::tempdir().unwrap();
    let db = sqlite_url(dir.path());
    let env = dev_env(&db, &[("APP_ENV", "production")]);

    let outcome = run_to_exit(&env, dir.path(), EXIT_TIMEOUT);

    assert_refused(&outcome, &["ADMIN_TOKEN"], &[ENCRYPTION_KEY]);
}

#[tokio::test]
async fn production_without_a_public_url_refuses_to_start_and_with_one_never_signs_in_for_the_host() {
    let dir = tempfile::tempdir().unwrap();
    let db = sqlite_url(dir.path());
    let production = [("APP_ENV", "production"), ("ADMIN_TOKEN", "operator-token")];

    let outcome = run_to_exit(&dev_env(&db, &production), dir.path(), EXIT_TIMEOUT);
    assert_refused(&outcome, &["PUBLIC_URL"], &[ENCRYPTION_KEY, "operator-token"]);

    // With it the same configuration serves, and the sign-in domain is PUBLIC_URL's whatever the Host says.
    let with = [&production[..], &[("PUBLIC_URL", "https://wallet.example.com")]].concat();
    let server = ServerProcess::start(&dev_env(&db, &with), dir.path());
    let client = reqwest::Client::new();
    let created: Value = client
        .post(format!("{}/api/agents", server.base_url()))
        .bearer_auth("operator-token")
        .json(&json!({"name": "guarded", "owner_addresses": {"base": Address::repeat_byte(0x11).to_checksum(None)}}))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let id = created["id"].as_str().expect("created");
    let owner = Address::repeat_byte(0x11).to_checksum(None);
    let challenge: Value = client
        .get(format!(
            "{}/api/agents/{id}/owner-challenge?chain=base&address={owner}",
            server.base_url()
        ))
        .header("host", "evil.example")
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let message = challenge["message"].as_str().expect("a message");
    assert!(
        message.starts_with("wallet.example.com wants you to sign in"),
        "{message}"
    );
    assert!(!message.contains("evil.example"), "{message}");
}

#[test]
fn a_malformed_trusted_proxies_entry_refuses_to_start() {
    let dir = tempfile::tempdir().unwrap();
    let db = sqlite_url(dir.path());
    for list in ["10.0.0.0/33", "127.0.0.1, nginx", "10.0.0.1/+8"] {
        let outcome = run_to_exit(&dev_env(&db, &[("TRUSTED_PROXIES", list)]), dir.path(), EXIT_TIMEOUT);
        assert_refused(&outcome, &["TRUSTED_PROXIES"], &[ENCRYPTION_KEY]);
    }
}

#[test]
fn a_blank_admin_token_refuses_to_start_instead_of_opening_the_admin_endpoints() {
    let dir = tempfile::tempdir().unwrap();
    let db = sqlite_url(dir.path());
    for blank in ["", "   "] {
        let outcome = run_to_exit(&dev_env(&db, &[("ADMIN_TOKEN", blank)]), dir.path(), EXIT_TIMEOUT);
        assert_refused(&outcome, &["ADMIN_TOKEN"], &[ENCRYPTION_KEY]);
    }
}

#[test]
fn an_empty_or_unreadable_admin_token_file_refuses_to_start() {
    let dir = tempfile::tempdir().unwrap();
    let db = sqlite_url(dir.path());
    let empty = dir.path().join("admin-token");
    std::fs::write(&empty, "\n").unwrap();
    let missing = dir.path().join("no-such-file");
    for file in [
        empty.display().to_string(),
        missing.display().to_string(),
        String::new(),
    ] {
        let env = dev_env(&db, &[("ADMIN_TOKEN_FILE", &file), ("APP_ENV", "production")]);
        let outcome = run_to_exit(&env, dir.path(), EXIT_TIMEOUT);
        assert_refused(&outcome, &["ADMIN_TOKEN_FILE"], &[ENCRYPTION_KEY]);
    }
}

#[test]
fn disabled_agent_auth_on_a_non_loopback_address_refuses_to_start() {
    let dir = tempfile::tempdir().unwrap();
    let db = sqlite_url(dir.path());
    for bind in ["0.0.0.0:0", "[::]:0"] {
        let env = dev_env(&db, &[("DISABLE_AGENT_AUTH", "true"), ("BIND_ADDR", bind)]);
        let outcome = run_to_exit(&env, dir.path(), EXIT_TIMEOUT);
        assert_refused(&outcome, &["DISABLE_AGENT_AUTH", "BIND_ADDR"], &[ENCRYPTION_KEY]);
    }
}

/// A process's HTTP API: create an agent, export its key, send a transfer.
struct Remote {
    base: String,
    client: reqwest::Client,
}

impl Remote {
    fn new(server: &ServerProcess) -> Remote {
        Remote {
            base: server.base_url(),
            client: reqwest::Client::new(),
        }
    }

    async fn post(&self, path: &str, token: Option<&str>, body: Value) -> (StatusCode, Value) {
        let mut request = self.client.post(format!("{}{path}", self.base)).json(&body);
        if let Some(token) = token {
            request = request.header(TOKEN_HEADER, token);
        }
        let response = request.send().await.expect("agentd answers");
        let status = response.status();
        (status, response.json().await.unwrap_or(Value::Null))
    }

    /// A sending agent on base: (id, token, wallet address).
    async fn create(&self) -> (String, String, Address) {
        let body =
            json!({"name": "keeper", "chains": ["base"], "capabilities": ["read", "transact"], "spending_cap": 0.1});
        let (status, body) = self.post("/api/agents", None, body).await;
        assert_eq!(status, StatusCode::CREATED, "{body}");
        let id = body["id"].as_str().unwrap().to_string();
        let token = body["access_token"].as_str().unwrap().to_string();
        (
            id,
            token,
            body["wallet_addresses"]["base"].as_str().unwrap().parse().unwrap(),
        )
    }

    async fn export(&self, id: &str, token: &str) -> String {
        let body = json!({"chain": "base", "confirm": true});
        let (status, body) = self
            .post(&format!("/api/agents/{id}/export-key"), Some(token), body)
            .await;
        assert_eq!(status, StatusCode::OK, "{body}");
        body["private_key"].as_str().unwrap().to_string()
    }
}

/// Runs `SQL` on the test database (SQLite file or PostgreSQL), answering the first column of each row as text.
pub async fn sql(db: &str, statement: &str) -> Vec<String> {
    use sqlx::{Connection, Row};
    let statement = sqlx::AssertSqlSafe(statement.to_string());
    if db.starts_with("postgres") {
        let mut conn = sqlx::PgConnection::connect(db).await.unwrap();
        let rows = sqlx::query(statement).fetch_all(&mut conn).await.unwrap();
        rows.iter()
            .map(|r| r.try_get::<String, _>(0).unwrap_or_default())
            .collect()
    } else {
        let mut conn = sqlx::SqliteConnection::connect(db).await.unwrap();
        let rows = sqlx::query(statement).fetch_all(&mut conn).await.unwrap();
        rows.iter()
            .map(|r| r.try_get::<String, _>(0).unwrap_or_default())
            .collect()
    }
}

fn start(db: &str, key: &str, rpc: &str, dir: &Path) -> ServerProcess {
    ServerProcess::start(&dev_env(db, &[("ENCRYPTION_KEY", key), ("RPC_URL_BASE", rpc)]), dir)
}

fn stop(server: ServerProcess) {
    let outcome = server.terminate(Duration::from_secs(10));
    assert!(outcome.status.is_some_and(|s| s.success()), "{}", outcome.logs);
}

#[tokio::test]
async fn another_encryption_key_refuses_to_start_and_the_right_one_still_opens_the_keys() {
    let db = test_database().await;
    let url = db.config.database.url.expose_secret().to_string();
    let dir = tempfile::tempdir().unwrap();
    let rpc = "http://127.0.0.1:9";

    let first = start(&url, ENCRYPTION_KEY, rpc, dir.path());
    let remote = Remote::new(&first);
    let (id, token, _) = remote.create().await;
    let exported = remote.export(&id, &token).await;
    stop(first);

    let outcome = run_to_exit(
        &dev_env(&url, &[("ENCRYPTION_KEY", OTHER_KEY)]),
        dir.path(),
        EXIT_TIMEOUT,
    );
    assert_refused(&outcome, &["ENCRYPTION_KEY"], &[OTHER_KEY, ENCRYPTION_KEY]);

    let again = start(&url, ENCRYPTION_KEY, rpc, dir.path());
    assert_eq!(Remote::new(&again).export(&id, &token).await, exported);
    stop(again);
}

#[tokio::test]
async fn a_database_written_before_the_key_check_is_vouched_for_by_its_wallet_keys() {
    let db = test_database().await;
    let url = db.config.database.url.expose_secret().to_string();
    let dir = tempfile::tempdir().unwrap();
    let rpc = "http://127.0.0.1:9";
    let first = start(&url, ENCRYPTION_KEY, rpc, dir.path());
    let (id, token, _) = Remote::new(&first).create().await;
    stop(first);
    sql(&url, "DELETE FROM key_check").await;

    let outcome = run_to_exit(
        &dev_env(&url, &[("ENCRYPTION_KEY", OTHER_KEY)]),
        dir.path(),
        EXIT_TIMEOUT,
    );
    assert_refused(&outcome, &["ENCRYPTION_KEY"], &[OTHER_KEY]);
    assert!(
        sql(&url, "SELECT 'row' FROM key_check").await.is_empty(),
        "a refused key writes no check"
    );

    let again = start(&url, ENCRYPTION_KEY, rpc, dir.path());
    Remote::new(&again).export(&id, &token).await;
    stop(again);
    assert_eq!(
        sql(&url, "SELECT 'row' FROM key_check").await.len(),
        1,
        "the check is written once vouched for"
    );
}

#[tokio::test]
async fn rotate_key_moves_every_wallet_key_so_that_only_the_new_key_starts_and_signs() {
    let anvil = Anvil::start(BASE_CHAIN_ID);
    let db = test_database().await;
    let url = db.config.database.url.expose_secret().to_string();
    let dir = tempfile::tempdir().unwrap();

    let first = start(&url, ENCRYPTION_KEY, anvil.url(), dir.path());
    let remote = Remote::new(&first);
    let (id, token, address) = remote.create().await;
    let (other_id, other_token, _) = remote.create().await;
    let exported = remote.export(&id, &token).await;
    let other_exported = remote.export(&other_id, &other_token).await;
    stop(first);

    let rotate_env = dev_env(&url, &[("NEW_ENCRYPTION_KEY", OTHER_KEY)]);
    let rotated = run_subcommand(&["rotate-key"], &rotate_env, dir.path(), EXIT_TIMEOUT);
    assert!(rotated.status.is_some_and(|s| s.success()), "{}", rotated.logs);
    assert!(rotated.logs.contains("re-encrypted 2 wallet keys"), "{}", rotated.logs);
    assert!(
        !rotated.logs.contains(OTHER_KEY) && !rotated.logs.contains(ENCRYPTION_KEY),
        "{}",
        rotated.logs
    );
    let versions = sql(&url, "SELECT DISTINCT CAST(key_version AS TEXT) FROM wallet_keys").await;
    assert_eq!(versions, ["2"], "the key-version column moved");

    // A second run (as after a crash that hid whether the first finished) changes nothing.
    let rerun = run_subcommand(&["rotate-key"], &rotate_env, dir.path(), EXIT_TIMEOUT);
    assert!(rerun.status.is_some_and(|s| s.success()), "{}", rerun.logs);
    assert!(rerun.logs.contains("already"), "{}", rerun.logs);

    let outcome = run_to_exit(&dev_env(&url, &[]), dir.path(), EXIT_TIMEOUT);
    assert_refused(&outcome, &["ENCRYPTION_KEY"], &[ENCRYPTION_KEY, OTHER_KEY]);

    let after = start(&url, OTHER_KEY, anvil.url(), dir.path());
    let remote = Remote::new(&after);
    assert_eq!(remote.export(&id, &token).await, exported, "the same wallet key");
    assert_eq!(remote.export(&other_id, &other_token).await, other_exported);
    assert_eq!(parse_private_key(&exported).address(), address);
    anvil.set_balance(address, wei(ONE_ETH)).await;
    let to = fresh_address();
    let order = json!({"chain": "base", "to": to.to_string(), "amount": "0.01"});
    let (status, body) = remote
        .post(&format!("/api/agents/{id}/transfers"), Some(&token), order)
        .await;
    assert_eq!(status, StatusCode::CREATED, "{body}");
    // Answered once broadcast: anvil's automine seals the block a moment later, so the count is waited for.
    assert_eq!(anvil.nonce(address).await, 1, "one transaction mined");
    assert_eq!(
        anvil.balance(to).await,
        wei(CENT_ETH),
        "signed with the re-encrypted key"
    );
    stop(after);
    // The audit key moved with them: the log, written before and after the rotation, verifies under the new key.
    let verify = run_subcommand(
        &["audit", "verify"],
        &dev_env(&url, &[("ENCRYPTION_KEY", OTHER_KEY)]),
        dir.path(),
        EXIT_TIMEOUT,
    );
    assert!(verify.status.is_some_and(|s| s.success()), "{}", verify.logs);
    assert!(verify.logs.contains("audit log intact"), "{}", verify.logs);
}

#[tokio::test]
async fn rotate_key_with_a_wrong_current_key_changes_nothing() {
    let db = test_database().await;
    let url = db.config.database.url.expose_secret().to_string();
    let dir = tempfile::tempdir().unwrap();
    let rpc = "http://127.0.0.1:9";
    let first = start(&url, ENCRYPTION_KEY, rpc, dir.path());
    let (id, token, _) = Remote::new(&first).create().await;
    stop(first);

    let env = dev_env(
        &url,
        &[("ENCRYPTION_KEY", THIRD_KEY), ("NEW_ENCRYPTION_KEY", OTHER_KEY)],
    );
    let outcome = run_subcommand(&["rotate-key"], &env, dir.path(), EXIT_TIMEOUT);
    assert_refused(&outcome, &["ENCRYPTION_KEY"], &[THIRD_KEY, OTHER_KEY]);
    let same = run_subcommand(
        &["rotate-key", "--new-key", ENCRYPTION_KEY],
        &dev_env(&url, &[]),
        dir.path(),
        EXIT_TIMEOUT,
    );
    assert_refused(&same, &["new key"], &[ENCRYPTION_KEY]);

    // Still under the first key; the flag works as the variable does.
    let flag_env = dev_env(&url, &[]);
    let rotated = run_subcommand(
        &["rotate-key", "--new-key", THIRD_KEY],
        &flag_env,
        dir.path(),
        EXIT_TIMEOUT,
    );
    assert!(rotated.status.is_some_and(|s| s.success()), "{}", rotated.logs);
    let after = start(&url, THIRD_KEY, rpc, dir.path());
    Remote::new(&after).export(&id, &token).await;
    stop(after);
}

#[tokio::test]
async fn an_instance_still_running_with_the_rotated_key_writes_no_wallet_key_under_it() {
    let db = test_database().await;
    let url = db.config.database.url.expose_secret().to_string();
    let dir = tempfile::tempdir().unwrap();
    let stale = start(&url, ENCRYPTION_KEY, "http://127.0.0.1:9", dir.path());
    let remote = Remote::new(&stale);
    remote.create().await;

    let env = dev_env(&url, &[("NEW_ENCRYPTION_KEY", OTHER_KEY)]);
    let rotated = run_subcommand(&["rotate-key"], &env, dir.path(), EXIT_TIMEOUT);
    assert!(rotated.status.is_some_and(|s| s.success()), "{}", rotated.logs);
    let body = json!({"name": "late", "chains": ["base"]});
    let (status, body) = remote.post("/api/agents", None, body).await;
    assert_eq!(status, StatusCode::INTERNAL_SERVER_ERROR, "{body}");
    stop(stale);

    let versions = sql(&url, "SELECT CAST(key_version AS TEXT) FROM wallet_keys").await;
    assert_eq!(versions, ["2"], "only the rotated key; nothing under the old one");
}

#[test]
fn a_server_without_a_chain_or_an_admin_token_says_so_once_at_start() {
    let dir = tempfile::tempdir().unwrap();
    let db = sqlite_url(dir.path());
    let bare = ServerProcess::start(&dev_env(&db, &[]), dir.path());
    let outcome = bare.terminate(Duration::from_secs(10));
    let logs = outcome.logs;
    assert_eq!(logs.matches("no chain is configured").count(), 1, "{logs}");
    assert!(logs.contains("RPC_URL_<CHAIN>"), "{logs}");
    assert_eq!(logs.matches("ADMIN_TOKEN is unset").count(), 1, "{logs}");

    let set_up = ServerProcess::start(
        &dev_env(
            &db,
            &[
                ("RPC_URL_BASE", "http://127.0.0.1:9"),
                ("ADMIN_TOKEN", "adm_startup_test_token_value"),
            ],
        ),
        dir.path(),
    );
    let logs = set_up.terminate(Duration::from_secs(10)).logs;
    assert!(!logs.contains("no chain is configured"), "{logs}");
    assert!(!logs.contains("ADMIN_TOKEN is unset"), "{logs}");
    assert!(!logs.contains("adm_startup_test_token_value"), "{logs}");
}

/// §22: each chain's sponsor key is sealed as a wallet key is, so a rotation of the master key moves it too; after
/// it, only the new key starts, and it opens the same sponsor (the paymaster keeps trusting the same address).
#[tokio::test]
async fn rotate_key_moves_the_sponsor_key_so_the_chain_stays_sponsorable_with_the_same_sponsor() {
    use crate::helpers::delegation_framework::Framework;
    use crate::helpers::paymaster::Paymaster;
    let anvil = Anvil::start(BASE_CHAIN_ID);
    let framework = Framework::deploy(&anvil, BASE_CHAIN_ID).await;
    let paymaster = Paymaster::deploy(&anvil, framework.entry_point).await;
    let db = test_database().await;
    let url = db.config.database.url.expose_secret().to_string();
    let dir = tempfile::tempdir().unwrap();
    let mut parts = framework.vars();
    parts.push(("ENTRY_POINT_BASE".into(), framework.entry_point.to_string()));
    parts.push(("ACCOUNT_IMPLEMENTATION_BASE".into(), framework.delegator.to_string()));
    parts.push(("PAYMASTER_BASE".into(), paymaster.address.to_string()));
    parts.push(("RPC_URL_BASE".into(), anvil.url().to_string()));
    let sponsor_of = |key: &str| {
        let mut env: Vec<(&str, &str)> = parts.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
        env.push(("ENCRYPTION_KEY", key));
        let server = ServerProcess::start(&dev_env(&url, &env), dir.path());
        (server, reqwest::Client::new())
    };
    let sponsor = async |server: &ServerProcess, client: &reqwest::Client| -> Value {
        let chains: Value = client
            .get(format!("{}/api/chains", server.base_url()))
            .send()
            .await
            .unwrap()
            .json()
            .await
            .unwrap();
        let base = chains.as_array().unwrap().iter().find(|c| c["name"] == "base").unwrap();
        base["sponsorship"]["sponsor"].clone()
    };
    let (first, client) = sponsor_of(ENCRYPTION_KEY);
    let before = sponsor(&first, &client).await;
    assert!(before.is_string(), "base is sponsorable: {before}");
    stop(first);

    let rotate_env = dev_env(&url, &[("NEW_ENCRYPTION_KEY", OTHER_KEY)]);
    let rotated = run_subcommand(&["rotate-key"], &rotate_env, dir.path(), EXIT_TIMEOUT);
    assert!(rotated.status.is_some_and(|s| s.success()), "{}", rotated.logs);

    let (after, client) = sponsor_of(OTHER_KEY);
    assert_eq!(
        sponsor(&after, &client).await,
        before,
        "the same sponsor key, opened under the new master key"
    );
    stop(after);
}
