//! `KEY_BACKEND=pkcs11` (§20) on SoftHSM2: keys generated in the token, signatures made by it, export refused (the
//! owner's sweep moving the funds instead), and the starts refused. Each test has its own token: a `softhsm2.conf` with its own token directory in a temporary
//! directory, named by `SOFTHSM2_CONF`. The service runs as a real process (a PKCS#11 module is initialised once per
//! process with the configuration it finds then, so the tests cannot share the test process's), on SQLite; the
//! token's objects are read with `pkcs11-tool` (OpenSC), a PKCS#11 client independent of the service.
//!
//! Without SoftHSM2 the tests print a note and pass, unless `CI` is set: then they fail (CI must run them).

use std::path::Path;
use std::process::Command;
use std::time::Duration;

use alloy::primitives::{Address, U256};
use reqwest::StatusCode;
use serde_json::{Value, json};
use tempfile::TempDir;

use crate::anvil::Anvil;
use crate::helpers::chain::{BASE_CHAIN_ID, CENT_ETH, ONE_ETH, fresh_address, wei};
use crate::helpers::{
    ENCRYPTION_KEY, ProcessOutcome, ServerProcess, TOKEN_HEADER, run_subcommand, run_to_exit, sqlite_url,
};

const MODULE: &str = "/usr/lib/x86_64-linux-gnu/softhsm/libsofthsm2.so";
const PIN: &str = "731946";
const SO_PIN: &str = "58203147";
const EXIT_TIMEOUT: Duration = Duration::from_secs(30);

/// A SoftHSM2 token of the test's own, with the database and everything else the service writes beside it.
struct SoftHsm {
    dir: TempDir,
    conf: String,
    label: String,
}

impl SoftHsm {
    /// A fresh initialised token; `None` (with a note) when SoftHSM2 is not installed and `CI` is not set.
    fn new() -> Option<SoftHsm> {
        let installed = Path::new(MODULE).exists() && which("softhsm2-util") && which("pkcs11-tool");
        if !installed {
            if std::env::var_os("CI").is_some() {
                panic!("SoftHSM2 and pkcs11-tool are required under CI: ./scripts/install.sh softhsm2");
            }
            eprintln!("note: SoftHSM2 is not installed (./scripts/install.sh softhsm2); the PKCS#11 test is skipped");
            return None;
        }
        let dir = tempfile::tempdir().expect("a temporary directory");
        let tokens = dir.path().join("tokens");
        std::fs::create_dir(&tokens).expect("the token directory");
        let conf = dir.path().join("softhsm2.conf");
        std::fs::write(
            &conf,
            format!(
                "directories.tokendir = {}\nobjectstore.backend = file\nlog.level = ERROR\n",
                tokens.display()
            ),
        )
        .expect("write softhsm2.conf");
        let hsm = SoftHsm {
            conf: conf.display().to_string(),
            label: format!("agentd-{}", &uuid::Uuid::new_v4().simple().to_string()[..8]),
            dir,
        };
        let out = Command::new("softhsm2-util")
            .env("SOFTHSM2_CONF", &hsm.conf)
            .args([
                "--init-token",
                "--free",
                "--label",
                &hsm.label,
                "--pin",
                PIN,
                "--so-pin",
                SO_PIN,
            ])
            .output()
            .expect("run softhsm2-util");
        assert!(
            out.status.success(),
            "softhsm2-util: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        Some(hsm)
    }

    fn db(&self) -> String {
        sqlite_url(self.dir.path())
    }

    /// The service's variables: SQLite in the test's directory, `KEY_BACKEND=pkcs11` on this token, then `extra`.
    fn env(&self, extra: &[(&str, &str)]) -> Vec<(String, String)> {
        let mut env: Vec<(String, String)> = [
            ("APP_ENV", "development"),
            ("BIND_ADDR", "127.0.0.1:0"),
            ("ENCRYPTION_KEY", ENCRYPTION_KEY),
            ("DATABASE_URL", &self.db()),
            ("SOFTHSM2_CONF", &self.conf),
            ("KEY_BACKEND", "pkcs11"),
            ("PKCS11_MODULE", MODULE),
            ("PKCS11_TOKEN_LABEL", &self.label),
            ("PKCS11_PIN", PIN),
        ]
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
        for (key, value) in extra {
            env.retain(|(k, _)| k != key);
            env.push((key.to_string(), value.to_string()));
        }
        env
    }

    fn start(&self, extra: &[(&str, &str)]) -> ServerProcess {
        let env = self.env(extra);
        ServerProcess::start(&refs(&env), self.dir.path())
    }

    fn run_to_exit(&self, extra: &[(&str, &str)]) -> ProcessOutcome {
        let env = self.env(extra);
        run_to_exit(&refs(&env), self.dir.path(), EXIT_TIMEOUT)
    }

    /// `pkcs11-tool` on this token, logged in; its output (it must succeed).
    fn tool(&self, args: &[&str]) -> String {
        let out = Command::new("pkcs11-tool")
            .env("SOFTHSM2_CONF", &self.conf)
            .args([
                "--module",
                MODULE,
                "--token-label",
                &self.label,
                "--login",
                "--pin",
                PIN,
            ])
            .args(args)
            .output()
            .expect("run pkcs11-tool");
        let text = format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        assert!(out.status.success(), "pkcs11-tool {args:?}: {text}");
        text
    }

    /// The token's objects of `kind` (`privkey`, `pubkey`) labelled `label`, as `pkcs11-tool` lists them.
    fn objects(&self, kind: &str, label: &str) -> String {
        self.tool(&["--list-objects", "--type", kind, "--label", label])
    }
}

fn which(tool: &str) -> bool {
    Command::new("sh")
        .args(["-c", &format!("command -v {tool}")])
        .output()
        .is_ok_and(|o| o.status.success())
}

fn refs(env: &[(String, String)]) -> Vec<(&str, &str)> {
    env.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect()
}

/// Asserts the process exited non-zero by itself, without serving, naming each of `names`, and never printing the
/// PIN.
fn assert_refused(outcome: &ProcessOutcome, names: &[&str]) {
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
    assert!(!outcome.logs.contains(PIN), "the PIN in the output:\n{}", outcome.logs);
}

struct Created {
    id: String,
    token: String,
    address: Address,
}

async fn create_agent(client: &reqwest::Client, server: &ServerProcess, body: Value) -> Created {
    let response = client
        .post(format!("{}/api/agents", server.base_url()))
        .json(&body)
        .send()
        .await
        .expect("create the agent");
    let status = response.status();
    let body: Value = response.json().await.expect("a JSON body");
    assert_eq!(status, StatusCode::CREATED, "{body}\n{}", server.logs());
    let chain = body["chains"][0].as_str().unwrap_or("base").to_string();
    Created {
        id: body["id"].as_str().expect("an id").to_string(),
        token: body["access_token"].as_str().expect("a token").to_string(),
        address: body["wallet_addresses"][&chain]
            .as_str()
            .expect("a wallet address")
            .parse()
            .expect("an address"),
    }
}

async fn post(
    client: &reqwest::Client,
    server: &ServerProcess,
    path: &str,
    token: &str,
    body: Value,
) -> (StatusCode, Value) {
    let response = client
        .post(format!("{}{path}", server.base_url()))
        .header(TOKEN_HEADER, token)
        .json(&body)
        .send()
        .await
        .expect("the request");
    let status = response.status();
    (status, response.json().await.unwrap_or(Value::Null))
}

/// What the database holds of the agent's key: its scheme and the lengths of its ciphertext and nonce.
async fn stored_key(db: &str, agent_id: &str) -> (String, i64, i64) {
    use sqlx::Connection;
    let mut conn = sqlx::SqliteConnection::connect(db).await.expect("open the database");
    let id: uuid::Uuid = agent_id.parse().unwrap();
    sqlx::query_as("SELECT scheme, length(ciphertext), length(nonce) FROM wallet_keys WHERE agent_id = $1")
        .bind(id)
        .fetch_one(&mut conn)
        .await
        .expect("the agent's key row")
}

#[tokio::test]
async fn a_new_agents_key_is_made_in_the_token_sensitive_and_never_extractable_and_cannot_be_exported() {
    let Some(hsm) = SoftHsm::new() else { return };
    let server = hsm.start(&[]);
    let client = reqwest::Client::new();

    let agent = create_agent(&client, &server, json!({"name": "hsm", "chains": ["base", "ethereum"]})).await;

    let private = hsm.objects("privkey", &agent.id);
    assert!(private.contains("Private Key Object; EC"), "{private}");
    for access in ["sensitive", "always sensitive", "never extractable"] {
        assert!(private.contains(access), "{access}: {private}");
    }
    assert!(private.contains("sign"), "{private}");
    let public = hsm.objects("pubkey", &agent.id);
    assert!(public.contains("Public Key Object; EC"), "{public}");
    // The object is labelled with the agent id and carries its 16 bytes as CKA_ID.
    let id_hex = agent.id.replace('-', "");
    assert!(private.to_lowercase().contains(&id_hex), "{private}");

    let (scheme, ciphertext, nonce) = stored_key(&hsm.db(), &agent.id).await;
    assert_eq!(
        (scheme.as_str(), ciphertext, nonce),
        ("pkcs11", 0, 0),
        "no key material in the database"
    );

    let path = format!("/api/agents/{}/export-key", agent.id);
    let (status, body) = post(
        &client,
        &server,
        &path,
        &agent.token,
        json!({"chain": "base", "confirm": true}),
    )
    .await;
    assert_eq!(status, StatusCode::FORBIDDEN, "{body}");
    assert_eq!(body["error"]["code"], "key_not_exportable", "{body}");

    let logs = server.terminate(Duration::from_secs(10)).logs;
    assert!(!logs.contains(PIN), "the PIN in the logs:\n{logs}");
}

#[tokio::test]
async fn native_transfers_are_signed_by_the_token_and_land_from_the_agents_address() {
    let Some(hsm) = SoftHsm::new() else { return };
    let anvil = Anvil::start(BASE_CHAIN_ID);
    let server = hsm.start(&[("RPC_URL_BASE", anvil.url()), ("WATCHER_INTERVAL_MS", "50")]);
    let client = reqwest::Client::new();
    let agent = create_agent(
        &client,
        &server,
        json!({"name": "payer", "chains": ["base"], "capabilities": ["read", "transact"], "spending_cap": 0.5}),
    )
    .await;
    anvil.set_balance(agent.address, wei(ONE_ETH)).await;
    let to = fresh_address();

    let path = format!("/api/agents/{}/transfers", agent.id);
    for (n, expected_nonce) in [(1u64, 0u64), (2, 1)] {
        let order = json!({"chain": "base", "to": to.to_string(), "amount": "0.01"});
        let (status, transfer) = post(&client, &server, &path, &agent.token, order).await;
        assert_eq!(status, StatusCode::CREATED, "{transfer}\n{}", server.logs());
        assert_eq!(transfer["nonce"], expected_nonce, "{transfer}");
        let hash = transfer["tx_hash"].as_str().expect("a hash").parse().unwrap();
        let receipt = anvil.receipt(hash).await;
        assert_eq!(
            receipt.from, agent.address,
            "the chain shows the token's key as the sender"
        );
        assert!(receipt.status());
        assert_eq!(anvil.nonce(agent.address).await, n);
    }
    assert_eq!(anvil.balance(to).await, U256::from(2 * CENT_ETH));
    server.terminate(Duration::from_secs(10));
}

#[tokio::test]
async fn a_sweep_moves_an_hsm_agents_whole_balance_to_its_owner_past_its_cap() {
    let Some(hsm) = SoftHsm::new() else { return };
    const ADMIN: &str = "admin-token-for-the-pkcs11-sweep-0123456789";
    let anvil = Anvil::start(BASE_CHAIN_ID);
    let server = hsm.start(&[
        ("RPC_URL_BASE", anvil.url()),
        ("WATCHER_INTERVAL_MS", "50"),
        ("ADMIN_TOKEN", ADMIN),
    ]);
    let client = reqwest::Client::new();
    let owner = fresh_address();
    let body = json!({"name": "hsm", "chains": ["base"], "capabilities": ["read", "transact"], "spending_cap": 0.001,
        "owner_addresses": {"base": owner.to_checksum(None)}});
    let created: Value = client
        .post(format!("{}/api/agents", server.base_url()))
        .bearer_auth(ADMIN)
        .json(&body)
        .send()
        .await
        .expect("create the agent")
        .json()
        .await
        .expect("a JSON body");
    let id = created["id"]
        .as_str()
        .unwrap_or_else(|| panic!("{created}\n{}", server.logs()));
    let address: Address = created["wallet_addresses"]["base"].as_str().unwrap().parse().unwrap();
    anvil.set_balance(address, wei(ONE_ETH)).await;
    let as_admin = |path: &str, body: Value| {
        client
            .post(format!("{}/api/agents/{id}/{path}", server.base_url()))
            .bearer_auth(ADMIN)
            .json(&body)
            .send()
    };

    let refused = as_admin("export-key", json!({"chain": "base", "confirm": true}))
        .await
        .unwrap();
    assert_eq!(refused.status(), StatusCode::FORBIDDEN);
    let response = as_admin("sweep", json!({"chain": "base", "to": owner.to_string()}))
        .await
        .unwrap();
    let status = response.status();
    let swept: Value = response.json().await.expect("a JSON body");
    assert_eq!(status, StatusCode::CREATED, "{swept}\n{}", server.logs());
    let amount: U256 = swept["amount_wei"].as_str().unwrap().parse().unwrap();
    let hash = swept["tx_hash"].as_str().unwrap().parse().unwrap();
    let receipt = anvil.receipt(hash).await;
    assert_eq!(receipt.from, address, "signed by the token's key");
    assert!(receipt.status());
    assert_eq!(
        anvil.balance(owner).await,
        amount,
        "the owner got the whole balance less the fee"
    );
    let fee = U256::from(receipt.gas_used) * U256::from(receipt.effective_gas_price);
    assert_eq!(anvil.balance(address).await + amount + fee, wei(ONE_ETH));
    assert!(amount > wei(ONE_ETH / 2), "far above the cap: {amount}");
    server.terminate(Duration::from_secs(10));
}

#[test]
fn the_start_is_refused_for_a_wrong_pin_a_missing_token_or_module_and_an_empty_pin() {
    let Some(hsm) = SoftHsm::new() else { return };

    assert_refused(
        &hsm.run_to_exit(&[("PKCS11_PIN", "000000")]),
        &["PKCS11_PIN", &hsm.label],
    );
    assert_refused(
        &hsm.run_to_exit(&[("PKCS11_TOKEN_LABEL", "no-such-token")]),
        &["no-such-token"],
    );
    assert_refused(
        &hsm.run_to_exit(&[("PKCS11_MODULE", "/nonexistent/libpkcs11.so")]),
        &["PKCS11_MODULE", "/nonexistent/libpkcs11.so"],
    );
    assert_refused(&hsm.run_to_exit(&[("PKCS11_PIN", " ")]), &["PKCS11_PIN"]);
    let pin_file = hsm.dir.path().join("pin");
    std::fs::write(&pin_file, format!("{PIN}\n")).unwrap();
    let env = hsm.env(&[]);
    let mut env: Vec<(String, String)> = env.into_iter().filter(|(k, _)| k != "PKCS11_PIN").collect();
    env.push(("PKCS11_PIN_FILE".into(), pin_file.display().to_string()));
    let server = ServerProcess::start(&refs(&env), hsm.dir.path());
    server.terminate(Duration::from_secs(10));
}

#[tokio::test]
async fn import_to_pkcs11_moves_a_local_key_into_the_token_which_then_signs_from_the_same_address() {
    let Some(hsm) = SoftHsm::new() else { return };
    let anvil = Anvil::start(BASE_CHAIN_ID);
    let chain_env = [("RPC_URL_BASE", anvil.url()), ("WATCHER_INTERVAL_MS", "50")];
    let local = [chain_env[0], chain_env[1], ("KEY_BACKEND", "local")];
    let server = hsm.start(&local);
    let client = reqwest::Client::new();
    let agent = create_agent(
        &client,
        &server,
        json!({"name": "mover", "chains": ["base"], "capabilities": ["read", "transact"], "spending_cap": 0.5}),
    )
    .await;
    server.terminate(Duration::from_secs(10));
    let (scheme, ciphertext, _) = stored_key(&hsm.db(), &agent.id).await;
    assert_eq!(scheme, "secp256k1");
    assert!(ciphertext > 0);
    anvil.set_balance(agent.address, wei(ONE_ETH)).await;

    let env = hsm.env(&[]);
    let import = || run_subcommand(&["keys", "import-to-pkcs11"], &refs(&env), hsm.dir.path(), EXIT_TIMEOUT);
    let first = import();
    assert!(first.status.is_some_and(|s| s.success()), "{}", first.logs);
    assert!(first.logs.contains(&format!("imported {}", agent.id)), "{}", first.logs);
    assert!(first.logs.contains("1 keys moved"), "{}", first.logs);
    assert!(!first.logs.contains(PIN), "the PIN in the output:\n{}", first.logs);

    let (scheme, ciphertext, nonce) = stored_key(&hsm.db(), &agent.id).await;
    assert_eq!(
        (scheme.as_str(), ciphertext, nonce),
        ("pkcs11", 0, 0),
        "no key material left in the database"
    );
    let private = hsm.objects("privkey", &agent.id);
    assert!(private.contains("Private Key Object; EC"), "{private}");
    assert!(private.contains("sensitive"), "{private}");
    assert!(private.contains("sign"), "{private}");
    assert!(private.to_lowercase().contains(&agent.id.replace('-', "")), "{private}");
    assert!(hsm.objects("pubkey", &agent.id).contains("Public Key Object; EC"));

    // Again: nothing left to move, nothing changed, success.
    let second = import();
    assert!(second.status.is_some_and(|s| s.success()), "{}", second.logs);
    assert!(second.logs.contains("0 keys moved"), "{}", second.logs);
    assert_eq!(stored_key(&hsm.db(), &agent.id).await.0, "pkcs11");

    // The token now signs for the agent: the chain shows the transfer sent from its address.
    let server = hsm.start(&chain_env);
    let to = fresh_address();
    let path = format!("/api/agents/{}/transfers", agent.id);
    let order = json!({"chain": "base", "to": to.to_string(), "amount": "0.01"});
    let (status, transfer) = post(&client, &server, &path, &agent.token, order).await;
    assert_eq!(status, StatusCode::CREATED, "{transfer}\n{}", server.logs());
    let hash = transfer["tx_hash"].as_str().expect("a hash").parse().unwrap();
    let receipt = anvil.receipt(hash).await;
    assert_eq!(receipt.from, agent.address, "sent from the agent's address");
    assert!(receipt.status());
    assert_eq!(anvil.nonce(agent.address).await, 1);
    assert_eq!(anvil.balance(to).await, U256::from(CENT_ETH));
    server.terminate(Duration::from_secs(10));
}

#[tokio::test]
async fn the_start_is_refused_when_an_active_agents_key_object_is_missing_or_the_backend_is_local() {
    let Some(hsm) = SoftHsm::new() else { return };
    let server = hsm.start(&[]);
    let agent = create_agent(&reqwest::Client::new(), &server, json!({"name": "gone"})).await;
    server.terminate(Duration::from_secs(10));

    // The same database on the local backend cannot sign for it: refused, naming the agent.
    assert_refused(&hsm.run_to_exit(&[("KEY_BACKEND", "local")]), &[&agent.id]);

    hsm.tool(&["--delete-object", "--type", "privkey", "--label", &agent.id]);
    assert_refused(&hsm.run_to_exit(&[]), &[&agent.id, &hsm.label]);
}

#[tokio::test]
async fn a_token_that_fails_mid_run_answers_503_records_nothing_and_once_back_the_next_transfer_takes_the_same_nonce() {
    let Some(hsm) = SoftHsm::new() else { return };
    let anvil = Anvil::start(BASE_CHAIN_ID);
    let server = hsm.start(&[("RPC_URL_BASE", anvil.url()), ("WATCHER_INTERVAL_MS", "50")]);
    let client = reqwest::Client::new();
    let agent = create_agent(
        &client,
        &server,
        json!({"name": "payer", "chains": ["base"], "capabilities": ["read", "transact"], "spending_cap": 0.5}),
    )
    .await;
    anvil.set_balance(agent.address, wei(ONE_ETH)).await;
    let path = format!("/api/agents/{}/transfers", agent.id);
    let order = json!({"chain": "base", "to": fresh_address().to_string(), "amount": "0.01"});
    let (status, first) = post(&client, &server, &path, &agent.token, order.clone()).await;
    assert_eq!(status, StatusCode::CREATED, "{first}");

    // SoftHSM2 reads its objects from the token directory: without it, the token fails (as a device that went away).
    let tokens = hsm.dir.path().join("tokens");
    let away = hsm.dir.path().join("tokens.away");
    std::fs::rename(&tokens, &away).unwrap();
    let (status, refused) = post(&client, &server, &path, &agent.token, order.clone()).await;
    assert_eq!(status, StatusCode::SERVICE_UNAVAILABLE, "{refused}\n{}", server.logs());
    assert_eq!(refused["error"]["code"], "signer_unavailable", "{refused}");
    std::fs::rename(&away, &tokens).unwrap();

    let listed = client
        .get(format!("{}/api/agents/{}/transactions", server.base_url(), agent.id))
        .header(TOKEN_HEADER, &agent.token)
        .send()
        .await
        .unwrap()
        .json::<Value>()
        .await
        .unwrap();
    assert_eq!(listed.as_array().map(Vec::len), Some(1), "nothing recorded: {listed}");
    assert_eq!(anvil.nonce(agent.address).await, 1);

    // The token is back: the service opens it afresh (SoftHSM2 reads its token directory again when the module is
    // initialised again), without a restart.
    let (status, next) = post(&client, &server, &path, &agent.token, order).await;
    assert_eq!(status, StatusCode::CREATED, "{next}\n{}", server.logs());
    assert_eq!(next["nonce"], 1, "the refused transfer's nonce was given back: {next}");
    assert_eq!(anvil.nonce(agent.address).await, 2);
    let logs = server.terminate(Duration::from_secs(10)).logs;
    assert!(!logs.contains(PIN), "the PIN in the logs");
}
