//! What grows with use is purged (docs/api.md §15): expired owner sessions and challenges, idempotency records past
//! their 24 h window. An instance purges at start (and hourly); rows still in use are kept.

use alloy::signers::local::PrivateKeySigner;
use reqwest::{Method, StatusCode};
use serde_json::json;

use crate::auth::owners::{execute, guarded_agent, owner_challenge, owner_session};
use crate::helpers::{TestApp, spawn_app, spawn_app_with};

/// One number read from the test's database.
async fn count(app: &TestApp, table: &str) -> i64 {
    let sql = format!("SELECT COUNT(*) FROM {table}");
    if app.db_url.starts_with("sqlite") {
        let pool = sqlx::SqlitePool::connect(&app.db_url)
            .await
            .expect("open the SQLite file");
        sqlx::query_scalar(sqlx::AssertSqlSafe(sql))
            .fetch_one(&pool)
            .await
            .unwrap()
    } else {
        let pool = sqlx::PgPool::connect(&app.db_url).await.expect("connect to PostgreSQL");
        sqlx::query_scalar(sqlx::AssertSqlSafe(sql))
            .fetch_one(&pool)
            .await
            .unwrap()
    }
}

const TABLES: [&str; 4] = [
    "owner_sessions",
    "owner_challenges",
    "reissue_challenges",
    "idempotency_keys",
];

#[tokio::test]
async fn expired_sessions_challenges_and_old_idempotency_records_are_purged_and_live_ones_kept() {
    let app = spawn_app().await;
    let owner = PrivateKeySigner::random();
    let agent = guarded_agent(&app, &owner).await;
    owner_session(&app, &agent.id, &owner).await;
    app.challenge(&agent.id).await;
    let chat = app
        .build(
            Method::POST,
            "/api/chat",
            Some(&agent.token),
            Some(json!({"agent_id": agent.id, "message": "hi"})),
        )
        .header("idempotency-key", "purge-test-1");
    assert_eq!(app.send(chat).await.status, StatusCode::OK);
    for table in TABLES {
        assert!(count(&app, table).await >= 1, "{table} has a row");
    }

    // Age every row past its use, then add live ones of each kind.
    execute(&app, "UPDATE owner_sessions SET expires_at = '2020-01-01T00:00:00Z'").await;
    execute(&app, "UPDATE owner_challenges SET expires_at = '2020-01-01T00:00:00Z'").await;
    execute(
        &app,
        "UPDATE reissue_challenges SET expires_at = '2020-01-01T00:00:00Z'",
    )
    .await;
    execute(&app, "UPDATE idempotency_keys SET created_at = '2020-01-01T00:00:00Z'").await;
    let live_session = owner_session(&app, &agent.id, &owner).await;
    let (status, _) = owner_challenge(&app, &agent.id, "base", &crate::helpers::checksummed(&owner)).await;
    assert_eq!(status, StatusCode::OK);
    app.challenge(&agent.id).await;
    let chat = app
        .build(
            Method::POST,
            "/api/chat",
            Some(&agent.token),
            Some(json!({"agent_id": agent.id, "message": "hi"})),
        )
        .header("idempotency-key", "purge-test-2");
    assert_eq!(app.send(chat).await.status, StatusCode::OK);

    // Another instance on the database purges at its start.
    let _second = spawn_app_with(&[("DATABASE_URL", &app.db_url)]).await;
    let expected = [
        ("owner_sessions", 1),
        ("owner_challenges", 2),
        ("reissue_challenges", 1),
        ("idempotency_keys", 1),
    ];
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    loop {
        let mut now = Vec::new();
        for (table, _) in expected {
            now.push((table, count(&app, table).await));
        }
        if now == expected {
            break;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "after the purge: {now:?}, expected {expected:?}"
        );
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    // The live session still works.
    let path = format!("/api/agents/{}", agent.id);
    let response = app
        .send(
            app.build(Method::GET, &path, None, None)
                .header("X-Owner-Token", &live_session),
        )
        .await;
    assert_eq!(response.status, StatusCode::OK, "{}", response.text);
}
