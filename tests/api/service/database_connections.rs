//! Replicas on a PostgreSQL server with few connections to spare (issue 50): `DATABASE_MAX_CONNECTIONS` bounds each
//! instance's pool, so more instances fit under the server's limit; and an instance that finds the server at its limit
//! waits for a connection and serves with what it gets, saying so in its log and in `/health`, rather than exiting.
//! Real processes against a role with a small `CONNECTION LIMIT` (the server's `max_connections` needs a restart to
//! change). PostgreSQL only: skipped without `TEST_POSTGRES_URL`.

use std::time::Duration;

use reqwest::StatusCode;
use serde_json::{Value, json};
use sqlx::{Connection, Executor, PgConnection};

use crate::helpers::{ENCRYPTION_KEY, ServerProcess};

/// Longer than the pool's wait for a connection (10 s), after which an instance that found the server full used to
/// exit at start.
const SERVER_FULL_FOR: Duration = Duration::from_secs(12);

fn admin_url() -> Option<String> {
    std::env::var("TEST_POSTGRES_URL")
        .ok()
        .filter(|url| !url.trim().is_empty())
}

/// A login role allowed `limit` connections, and a fresh database it owns (the instances migrate it); both dropped
/// with this value.
struct SmallRole {
    admin_url: String,
    role: String,
    database: String,
    /// `DATABASE_URL` for the instances, as the role.
    url: String,
    password: String,
    _dir: tempfile::TempDir,
}

impl SmallRole {
    async fn create(admin_url: &str, limit: u32) -> SmallRole {
        let id = uuid::Uuid::new_v4().simple().to_string();
        let (role, database) = (format!("agentd_small_{id}"), format!("agentd_test_{id}"));
        // Not derived from the role's name, which the server's refusals name.
        let password = uuid::Uuid::new_v4().simple().to_string();
        let mut admin = PgConnection::connect(admin_url)
            .await
            .expect("connect to TEST_POSTGRES_URL");
        for sql in [
            format!(r#"CREATE ROLE "{role}" LOGIN PASSWORD '{password}' CONNECTION LIMIT {limit}"#),
            format!(r#"CREATE DATABASE "{database}" OWNER "{role}""#),
        ] {
            admin
                .execute(sqlx::AssertSqlSafe(sql))
                .await
                .expect("create the role and its database");
        }
        let _ = admin.close().await;
        let mut url = reqwest::Url::parse(admin_url).expect("TEST_POSTGRES_URL is a URL");
        url.set_username(&role).unwrap();
        url.set_password(Some(&password)).unwrap();
        url.set_path(&database);
        SmallRole {
            admin_url: admin_url.to_string(),
            role,
            database,
            url: url.to_string(),
            password,
            _dir: tempfile::tempdir().unwrap(),
        }
    }

    /// Starts an instance on the role's database; `max_connections` unset leaves the default.
    fn start(&self, max_connections: Option<&str>) -> ServerProcess {
        let mut env = vec![
            ("APP_ENV", "development"),
            ("DATABASE_URL", self.url.as_str()),
            ("BIND_ADDR", "127.0.0.1:0"),
            ("ENCRYPTION_KEY", ENCRYPTION_KEY),
            ("RUST_LOG", "info,sqlx=warn"),
            // A chain whose node is down: its watcher reads the database every second all the same.
            ("RPC_URL_BASE", "http://127.0.0.1:1"),
        ];
        if let Some(max) = max_connections {
            env.push(("DATABASE_MAX_CONNECTIONS", max));
        }
        ServerProcess::start(&env, self._dir.path())
    }

    /// The role's connections now open, read as the administrator.
    async fn connections(&self) -> i64 {
        let mut admin = PgConnection::connect(&self.admin_url)
            .await
            .expect("connect to TEST_POSTGRES_URL");
        let (open,): (i64,) = sqlx::query_as("SELECT count(*) FROM pg_stat_activity WHERE usename = $1")
            .bind(&self.role)
            .fetch_one(&mut admin)
            .await
            .expect("read pg_stat_activity");
        let _ = admin.close().await;
        open
    }

    /// Connections as the role until the server refuses one (the role is at its limit).
    async fn fill(&self) -> Vec<PgConnection> {
        let mut held = Vec::new();
        loop {
            match PgConnection::connect(&self.url).await {
                Ok(conn) => held.push(conn),
                Err(e) => {
                    assert!(e.to_string().contains("too many connections"), "{e}");
                    return held;
                }
            }
        }
    }
}

impl Drop for SmallRole {
    fn drop(&mut self) {
        let (admin_url, role, database) = (self.admin_url.clone(), self.role.clone(), self.database.clone());
        // The test's runtime is busy dropping us: a runtime of our own on another thread.
        let dropped = std::thread::spawn(move || {
            let runtime = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .ok()?;
            runtime.block_on(async {
                let mut admin = PgConnection::connect(&admin_url).await.ok()?;
                for sql in [
                    format!(r#"DROP DATABASE IF EXISTS "{database}" WITH (FORCE)"#),
                    format!(r#"DROP ROLE IF EXISTS "{role}""#),
                ] {
                    admin.execute(sqlx::AssertSqlSafe(sql)).await.ok()?;
                }
                admin.close().await.ok()
            })
        });
        let _ = dropped.join();
    }
}

/// Creates `agents` agents at once on `server`: every one is created.
async fn creates_agents(server: &ServerProcess, agents: usize) {
    let client = reqwest::Client::new();
    let base = server.base_url();
    let answers = futures::future::join_all((0..agents).map(|i| {
        client
            .post(format!("{base}/api/agents"))
            .json(&json!({"name": format!("replica {i}"), "chains": ["base"]}))
            .send()
    }))
    .await;
    for answer in answers {
        let answer = answer.expect("POST /api/agents");
        let status = answer.status();
        let body = answer.text().await.unwrap();
        assert_eq!(status, StatusCode::CREATED, "{body}\n{}", server.logs());
    }
}

/// Creates an agent and reads `/health` on `server`: both answer, and `/health` says how its pool is doing.
async fn serves(server: &ServerProcess) -> Value {
    creates_agents(server, 1).await;
    let health = reqwest::get(format!("{}/health", server.base_url()))
        .await
        .expect("GET /health");
    assert_eq!(health.status(), StatusCode::OK, "{}", server.logs());
    let body: Value = health.json().await.unwrap();
    assert_eq!(body["status"], "ok", "{body}");
    assert_eq!(body["database"], "ok", "{body}");
    body
}

#[tokio::test]
async fn more_instances_than_sixteen_connections_each_allow_all_start_and_serve_with_database_max_connections() {
    let Some(admin_url) = admin_url() else {
        println!("skipped: connection limits are PostgreSQL's (set TEST_POSTGRES_URL)");
        return;
    };
    // At 16 connections each, four instances would need 64.
    let role = SmallRole::create(&admin_url, 24).await;

    let mut small = Vec::new();
    for _ in 0..4 {
        small.push(role.start(Some("4")));
    }
    // Under load, each instance would open all the connections it may.
    futures::future::join_all(small.iter().map(|server| creates_agents(server, 16))).await;
    let open = role.connections().await;
    assert!(open <= 16, "four instances of 4 hold {open} connections");
    for server in &small {
        let health = serves(server).await;
        let pool = &health["database_pool"];
        assert_eq!(pool["max_connections"], 4, "{health}");
        assert!(pool["open"].as_u64().is_some_and(|open| open <= 4), "{health}");
        assert_eq!(pool["ran_out"], 0, "sized to fit, they never ran out: {health}");
    }

    // One more at the default size finds 8 connections left of the 16 it may open: it starts, and serves with them.
    let default = role.start(None);
    let health = serves(&default).await;
    let pool = &health["database_pool"];
    assert_eq!(pool["max_connections"], 16, "{health}");
    if pool["ran_out"].as_u64().unwrap_or_default() > 0 {
        assert_eq!(pool["ran_out_recently"], true, "{health}");
        assert!(pool["last_ran_out_at"].is_string(), "{health}");
    }
    for server in &small {
        serves(server).await;
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn an_instance_that_finds_the_server_full_waits_then_serves_and_says_connections_ran_out() {
    let Some(admin_url) = admin_url() else {
        println!("skipped: connection limits are PostgreSQL's (set TEST_POSTGRES_URL)");
        return;
    };
    let role = SmallRole::create(&admin_url, 20).await;
    let held = role.fill().await;
    assert_eq!(held.len(), 20);
    // The server stays full a while, then the load that filled it goes away.
    let release = tokio::spawn(async move {
        tokio::time::sleep(SERVER_FULL_FOR).await;
        for conn in held {
            let _ = conn.close().await;
        }
    });

    let server = tokio::task::block_in_place(|| role.start(None));
    release.await.unwrap();

    let health = serves(&server).await;
    let pool = &health["database_pool"];
    assert_eq!(pool["max_connections"], 16, "{health}");
    assert!(pool["ran_out"].as_u64().is_some_and(|n| n >= 1), "{health}");
    assert_eq!(pool["ran_out_recently"], true, "{health}");
    assert!(pool["last_ran_out_at"].is_string(), "{health}");
    let logs = server.logs();
    assert!(logs.contains("connections ran out"), "{logs}");
    assert!(logs.contains("DATABASE_MAX_CONNECTIONS"), "{logs}");
    assert!(!logs.contains(&role.password), "the database password is in the log");
}
