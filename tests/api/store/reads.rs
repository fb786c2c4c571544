//! The authenticated read path (`GET /api/agents/{id}`), however it is served (on SQLite from memory while the
//! database is unchanged, else from its read connections; on PostgreSQL from the pool): a reissue, a deletion or an
//! edit shows on the very next read, even one made by another process straight in the database.

use reqwest::StatusCode;

use crate::auth::audit::tamper;
use crate::helpers::{assert_error, spawn_app, spawn_app_with, token_proof};

#[tokio::test]
async fn a_reissued_token_is_refused_on_every_connection_that_read_it_before() {
    let app = spawn_app().await;
    let agent = app.create_default_agent().await;
    // Concurrent reads, so that every read connection has served the live token.
    let warm = futures::future::join_all((0..16).map(|_| app.get_agent(&agent.id, &agent.token))).await;
    for (status, body) in warm {
        assert_eq!(status, StatusCode::OK, "{body}");
    }

    let (status, body) = app.reissue_token(&agent.id, token_proof(&agent.token)).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    let new_token = body["access_token"].as_str().expect("access_token").to_string();

    let after = futures::future::join_all((0..16).map(|_| app.get_agent(&agent.id, &agent.token))).await;
    for refused in &after {
        assert_error(refused, StatusCode::UNAUTHORIZED, "invalid_token");
    }
    let fresh = futures::future::join_all((0..16).map(|_| app.get_agent(&agent.id, &new_token))).await;
    for (status, body) in fresh {
        assert_eq!(status, StatusCode::OK, "{body}");
    }
}

#[tokio::test]
async fn an_edit_by_another_process_shows_on_the_next_read() {
    let app = spawn_app().await;
    let agent = app.create_default_agent().await;
    // Read twice, so that on SQLite the second answer already came from memory.
    for _ in 0..2 {
        let (status, body) = app.get_agent(&agent.id, &agent.token).await;
        assert_eq!(status, StatusCode::OK, "{body}");
    }

    // The `sqlite3` CLI on SQLite: a writer the service knows nothing of.
    tamper(&app, "UPDATE agents SET name = 'renamed outside'").await;
    let (status, body) = app.get_agent(&agent.id, &agent.token).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(body["name"], "renamed outside", "{body}");

    tamper(&app, "UPDATE access_tokens SET revoked_at = '2020-01-01T00:00:00Z'").await;
    let refused = app.get_agent(&agent.id, &agent.token).await;
    assert_error(&refused, StatusCode::UNAUTHORIZED, "invalid_token");
}

#[tokio::test]
async fn a_token_reissued_through_one_instance_is_refused_at_once_by_another() {
    let first = spawn_app().await;
    let second = spawn_app_with(&[("DATABASE_URL", &first.db_url)]).await;
    let agent = first.create_default_agent().await;
    for app in [&first, &second, &first, &second] {
        let (status, body) = app.get_agent(&agent.id, &agent.token).await;
        assert_eq!(status, StatusCode::OK, "{body}");
    }

    let (status, body) = first.reissue_token(&agent.id, token_proof(&agent.token)).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    let new_token = body["access_token"].as_str().expect("access_token").to_string();
    for app in [&second, &first] {
        assert_error(
            &app.get_agent(&agent.id, &agent.token).await,
            StatusCode::UNAUTHORIZED,
            "invalid_token",
        );
        let (status, body) = app.get_agent(&agent.id, &new_token).await;
        assert_eq!(status, StatusCode::OK, "{body}");
    }
}
