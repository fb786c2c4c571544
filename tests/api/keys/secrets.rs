//! Secrets at rest and in logs (docs/api.md §1, §4): the real binary never writes a plaintext token, an exported key or
//! the encryption key to its database files or its output, shuts down cleanly on SIGTERM, and in development
//! generates a key file once and reuses it.

use std::path::Path;
use std::time::Duration;

use alloy::signers::local::PrivateKeySigner;
use reqwest::StatusCode;
use serde_json::{Value, json};

use crate::helpers::{
    ENCRYPTION_KEY, ServerProcess, TOKEN_HEADER, TestApp, checksummed, parse_private_key, sign, spawn_app,
    spawn_app_with, sqlite_url, token_proof, wallet_proof,
};
use agentd::app::App;
use agentd::config::Config;

/// A thin client for the subprocess (the in-process `TestApp` helpers need an in-process app).
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

    async fn call(
        &self,
        method: reqwest::Method,
        path: &str,
        token: Option<&str>,
        body: Option<Value>,
    ) -> (StatusCode, Value) {
        let mut builder = self.client.request(method, format!("{}{path}", self.base));
        if let Some(token) = token {
            builder = builder.header(TOKEN_HEADER, token);
        }
        if let Some(body) = body {
            builder = builder.json(&body);
        }
        let response = builder.send().await.expect("agentd answers");
        let status = response.status();
        let text = response.text().await.unwrap();
        (status, serde_json::from_str(&text).unwrap_or(Value::String(text)))
    }

    async fn create(&self, body: Value) -> (String, String, Value) {
        let (status, body) = self.call(reqwest::Method::POST, "/api/agents", None, Some(body)).await;
        assert_eq!(status, StatusCode::CREATED, "{body}");
        (
            body["id"].as_str().unwrap().to_string(),
            body["access_token"].as_str().unwrap().to_string(),
            body,
        )
    }

    async fn export(&self, id: &str, token: &str, chain: &str) -> String {
        let path = format!("/api/agents/{id}/export-key");
        let (status, body) = self
            .call(
                reqwest::Method::POST,
                &path,
                Some(token),
                Some(json!({"chain": chain, "confirm": true})),
            )
            .await;
        assert_eq!(status, StatusCode::OK, "{body}");
        body["private_key"].as_str().unwrap().to_string()
    }

    async fn reissue(&self, id: &str, proof: Value) -> String {
        let path = format!("/api/agents/{id}/reissue-token");
        let (status, body) = self.call(reqwest::Method::POST, &path, None, Some(proof)).await;
        assert_eq!(status, StatusCode::OK, "{body}");
        body["access_token"].as_str().unwrap().to_string()
    }

    /// Opens an owner session by signing the agent's Sign-In with Ethereum challenge.
    async fn owner_session(&self, id: &str, owner: &PrivateKeySigner) -> String {
        let path = format!(
            "/api/agents/{id}/owner-challenge?chain=ethereum&address={}",
            checksummed(owner)
        );
        let (status, body) = self.call(reqwest::Method::GET, &path, None, None).await;
        assert_eq!(status, StatusCode::OK, "{body}");
        let message = body["message"].as_str().unwrap();
        let proof = json!({"chain": "ethereum", "message": message, "signature": sign(owner, message)});
        let path = format!("/api/agents/{id}/owner-session");
        let (status, body) = self.call(reqwest::Method::POST, &path, None, Some(proof)).await;
        assert_eq!(status, StatusCode::OK, "{body}");
        body["owner_token"].as_str().unwrap().to_string()
    }

    /// Exports a guarded agent's key with owner authority.
    async fn export_as_owner(&self, id: &str, owner_token: &str, chain: &str) -> String {
        let response = self
            .client
            .post(format!("{}/api/agents/{id}/export-key", self.base))
            .header("X-Owner-Token", owner_token)
            .json(&json!({"chain": chain, "confirm": true}))
            .send()
            .await
            .expect("agentd answers");
        assert_eq!(response.status(), StatusCode::OK);
        let body: Value = response.json().await.unwrap();
        body["private_key"].as_str().unwrap().to_string()
    }

    async fn challenge(&self, id: &str) -> String {
        let path = format!("/api/agents/{id}/reissue-challenge");
        let (status, body) = self.call(reqwest::Method::GET, &path, None, None).await;
        assert_eq!(status, StatusCode::OK, "{body}");
        body["message"].as_str().unwrap().to_string()
    }
}

fn random_hex_key() -> String {
    format!("{}{}", uuid::Uuid::new_v4().simple(), uuid::Uuid::new_v4().simple())
}

/// Every spelling of a secret that must not appear anywhere: as given, upper-cased, without `0x`, and its raw bytes
/// when it is hex.
fn spellings(secret: &str) -> Vec<Vec<u8>> {
    let mut out = vec![secret.as_bytes().to_vec()];
    let bare = secret.trim_start_matches("0x");
    out.push(bare.as_bytes().to_vec());
    out.push(bare.to_lowercase().into_bytes());
    out.push(bare.to_uppercase().into_bytes());
    if let Some(random) = secret.strip_prefix("agt_").or_else(|| secret.strip_prefix("own_")) {
        out.push(random.as_bytes().to_vec());
    }
    if let Ok(raw) = alloy::hex::decode(bare)
        && raw.len() == 32
    {
        out.push(raw);
    }
    out
}

fn contains(haystack: &[u8], needle: &[u8]) -> bool {
    !needle.is_empty() && haystack.windows(needle.len()).any(|w| w == needle)
}

/// Every regular file under `dir`, with its bytes.
fn files_under(dir: &Path) -> Vec<(String, Vec<u8>)> {
    let mut out = Vec::new();
    for entry in std::fs::read_dir(dir).expect("read the data directory") {
        let path = entry.unwrap().path();
        if path.is_dir() {
            out.extend(files_under(&path));
        } else {
            out.push((path.display().to_string(), std::fs::read(&path).unwrap()));
        }
    }
    out
}

#[tokio::test]
async fn the_binary_keeps_tokens_and_keys_out_of_its_database_and_logs() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    std::fs::create_dir_all(&data).unwrap();
    let db = sqlite_url(&data);
    let encryption_key = random_hex_key();
    let server = ServerProcess::start(
        &[
            ("DATABASE_URL", &db),
            ("BIND_ADDR", "127.0.0.1:0"),
            ("ENCRYPTION_KEY", &encryption_key),
            ("RUST_LOG", "debug,agentd=trace"),
        ],
        dir.path(),
    );
    let remote = Remote::new(&server);
    let mut secrets = vec![encryption_key.clone()];

    let owner = PrivateKeySigner::random();
    let (a_id, a_token, _) = remote
        .create(json!({"name": "a", "owner_addresses": {"ethereum": checksummed(&owner)}}))
        .await;
    let (b_id, b_token, _) = remote.create(json!({"name": "b", "chains": ["base"]})).await;
    secrets.extend([a_token.clone(), b_token.clone()]);
    let (status, _) = remote
        .call(
            reqwest::Method::GET,
            &format!("/api/agents/{a_id}"),
            Some(&a_token),
            None,
        )
        .await;
    assert_eq!(status, StatusCode::OK);
    // Agent a has an owner, so it is guarded: its key is exported with the owner's session, not its token.
    let owner_token = remote.owner_session(&a_id, &owner).await;
    secrets.push(owner_token.clone());
    let a_key = remote.export_as_owner(&a_id, &owner_token, "ethereum").await;
    let b_key = remote.export(&b_id, &b_token, "base").await;
    secrets.extend([a_key.clone(), b_key.clone()]);

    // Reissue by current token, by the owner's signature and by the exported key's signature.
    let a_token2 = remote.reissue(&a_id, token_proof(&a_token)).await;
    let message = remote.challenge(&a_id).await;
    let a_token3 = remote
        .reissue(&a_id, wallet_proof("ethereum", &message, &sign(&owner, &message)))
        .await;
    let message = remote.challenge(&b_id).await;
    let b_signer = parse_private_key(&b_key);
    let b_token2 = remote
        .reissue(&b_id, wallet_proof("base", &message, &sign(&b_signer, &message)))
        .await;
    // A failed proof and an unknown token also pass through the logs.
    let path = format!("/api/agents/{b_id}/reissue-token");
    let (status, _) = remote
        .call(reqwest::Method::POST, &path, None, Some(token_proof(&b_token)))
        .await;
    assert_eq!(status, StatusCode::UNAUTHORIZED);
    let (status, _) = remote
        .call(
            reqwest::Method::GET,
            &format!("/api/agents/{b_id}"),
            Some(&b_token),
            None,
        )
        .await;
    assert_eq!(status, StatusCode::UNAUTHORIZED);
    let (status, _) = remote
        .call(
            reqwest::Method::GET,
            &format!("/api/agents/{a_id}"),
            Some(&a_token3),
            None,
        )
        .await;
    assert_eq!(status, StatusCode::OK);
    secrets.extend([a_token2, a_token3, b_token2]);

    let outcome = server.terminate(Duration::from_secs(10));
    let status = outcome
        .status
        .unwrap_or_else(|| panic!("agentd did not exit within 10 s of SIGTERM:\n{}", outcome.logs));
    assert!(status.success(), "exit status {status}; output:\n{}", outcome.logs);
    assert!(outcome.logs.contains("listening on"));

    let files = files_under(&data);
    assert!(
        files.iter().any(|(name, _)| name.ends_with("agentd.db")),
        "the SQLite file exists: {:?}",
        files.iter().map(|(n, _)| n).collect::<Vec<_>>()
    );
    let mut places = files;
    places.push(("the output".to_string(), outcome.logs.into_bytes()));
    for (place, bytes) in &places {
        for secret in &secrets {
            for spelling in spellings(secret) {
                assert!(
                    !contains(bytes, &spelling),
                    "{place} contains a secret (one of the tokens, exported keys or the encryption key)"
                );
            }
        }
    }
}

#[tokio::test]
async fn in_development_without_an_encryption_key_a_key_file_is_generated_and_reused() {
    use std::os::unix::fs::PermissionsExt;

    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    std::fs::create_dir_all(&data).unwrap();
    let db = sqlite_url(&data);
    let env = [
        ("DATABASE_URL", db.as_str()),
        ("BIND_ADDR", "127.0.0.1:0"),
        ("APP_ENV", "development"),
        ("RUST_LOG", "debug"),
    ];
    let key_file = data.join("encryption.key");

    let first = ServerProcess::start(&env, dir.path());
    let remote = Remote::new(&first);
    let (id, token, _) = remote.create(json!({"name": "survivor"})).await;
    let key_before = remote.export(&id, &token, "ethereum").await;
    let first_run = first.terminate(Duration::from_secs(10));
    assert!(first_run.status.is_some_and(|s| s.success()), "{}", first_run.logs);

    let metadata = std::fs::metadata(&key_file).unwrap_or_else(|e| panic!("{} exists: {e}", key_file.display()));
    assert_eq!(metadata.permissions().mode() & 0o777, 0o600, "the key file is private");
    let key_material = std::fs::read(&key_file).unwrap();

    let second = ServerProcess::start(&env, dir.path());
    let remote = Remote::new(&second);
    let key_after = remote.export(&id, &token, "ethereum").await;
    let second_run = second.terminate(Duration::from_secs(10));
    assert!(second_run.status.is_some_and(|s| s.success()), "{}", second_run.logs);

    assert_eq!(key_after, key_before, "the second run decrypts the first run's key");
    assert_eq!(
        std::fs::read(&key_file).unwrap(),
        key_material,
        "the key file is reused, not rewritten"
    );
    let key_text = String::from_utf8_lossy(&key_material).trim().to_string();
    for logs in [&first_run.logs, &second_run.logs] {
        assert!(!logs.contains(&key_text), "the generated key appears in the output");
        assert!(!logs.contains(key_before.trim_start_matches("0x")));
        assert!(!logs.contains(&token));
    }
}

#[tokio::test]
async fn a_base64_encryption_key_is_accepted() {
    use base64::Engine;
    let key = base64::engine::general_purpose::STANDARD.encode([7u8; 32]);
    let app = spawn_app_with(&[("ENCRYPTION_KEY", key.as_str())]).await;
    let agent = app.create_default_agent().await;

    let (signer, _) = app.exported_signer(&agent, "ethereum").await;

    assert_eq!(signer.address().to_checksum(None), agent.address("ethereum"));
}

#[tokio::test]
async fn an_encryption_key_that_is_not_32_bytes_is_refused() {
    for key in [
        "abcd",
        "e17cbbe009243e23cd94262fddb8f83fca4de05f2e0d7058a0a203439f8f89",
        "not a key at all",
    ] {
        let dir = tempfile::tempdir().unwrap();
        let vars = vec![
            ("BIND_ADDR".to_string(), "127.0.0.1:0".to_string()),
            ("DATABASE_URL".to_string(), sqlite_url(dir.path())),
            ("ENCRYPTION_KEY".to_string(), key.to_string()),
        ];
        // Refused when the configuration loads, or at the latest when the app is built.
        if let Ok(config) = Config::from_vars(vars) {
            assert!(
                App::build(config).await.is_err(),
                "ENCRYPTION_KEY {key:?} must be refused"
            );
        }
    }
}

/// Everything the test app's database holds: the SQLite files, or every row of every table as text on PostgreSQL.
async fn database_dump(app: &TestApp) -> Vec<u8> {
    use sqlx::Connection;

    if !app.db_url.starts_with("postgres") {
        return files_under(app.dir.path())
            .into_iter()
            .flat_map(|(_, bytes)| bytes)
            .collect();
    }
    let mut conn = sqlx::PgConnection::connect(&app.db_url)
        .await
        .expect("connect to the test database");
    let tables: Vec<String> =
        sqlx::query_scalar("SELECT tablename::text FROM pg_tables WHERE schemaname = current_schema()")
            .fetch_all(&mut conn)
            .await
            .expect("list the tables");
    assert!(!tables.is_empty(), "the migrations created tables");
    let mut dump = Vec::new();
    for table in tables {
        let sql = format!(r#"SELECT t::text FROM "{table}" t"#);
        let rows: Vec<String> = sqlx::query_scalar(sqlx::AssertSqlSafe(sql))
            .fetch_all(&mut conn)
            .await
            .expect("read a table");
        for row in rows {
            dump.extend_from_slice(row.as_bytes());
            dump.push(b'\n');
        }
    }
    dump
}

#[tokio::test]
async fn the_database_never_holds_a_plaintext_token_or_key() {
    let app = spawn_app().await;
    let agent = app.create_default_agent().await;
    let (_, key) = app.exported_signer(&agent, "ethereum").await;
    let (status, body) = app.reissue_token(&agent.id, token_proof(&agent.token)).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    let new_token = body["access_token"].as_str().unwrap().to_string();

    let dump = database_dump(&app).await;

    assert!(
        contains(&dump, b"test agent"),
        "the dump holds the agent (sanity check)"
    );
    for secret in [agent.token.as_str(), new_token.as_str(), key.as_str(), ENCRYPTION_KEY] {
        for spelling in spellings(secret) {
            assert!(
                !contains(&dump, &spelling),
                "the database holds a plaintext token or key"
            );
        }
    }
}
