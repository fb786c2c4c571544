//! The audit log (docs/api.md §10): every change with its actor, newest first and paged, one hash chain across
//! all agents, and `agentd audit verify` (the real binary) naming the first bad entry after a row is edited or
//! removed.

use std::time::Duration;

use alloy::signers::local::PrivateKeySigner;
use reqwest::{Method, StatusCode};
use serde_json::{Value, json};

use crate::auth::owners::{As, call, execute, guarded_agent, owner_session};
use crate::helpers::{TestApp, assert_error, run_subcommand, spawn_app, spawn_app_with, token_proof};

async fn audit(app: &TestApp, agent_id: &str, who: As<'_>, query: &str) -> (StatusCode, Value) {
    let path = format!("/api/agents/{agent_id}/audit{query}");
    call(app, Method::GET, &path, who, None).await
}

/// `(action, actor)` of each entry, in the order given.
fn actions(entries: &Value) -> Vec<(String, String)> {
    entries
        .as_array()
        .expect("a list")
        .iter()
        .map(|e| {
            (
                e["action"].as_str().unwrap().into(),
                e["actor"].as_str().unwrap().into(),
            )
        })
        .collect()
}

fn pairs(list: &[(&str, &str)]) -> Vec<(String, String)> {
    list.iter().map(|(a, b)| (a.to_string(), b.to_string())).collect()
}

#[tokio::test]
async fn the_audit_log_lists_each_change_with_its_actor_newest_first() {
    let app = spawn_app().await;
    let owner = PrivateKeySigner::random();
    let agent = guarded_agent(&app, &owner).await;
    let as_agent = As {
        agent: Some(&agent.token),
        ..As::default()
    };
    app.put_agent(&agent.id, &agent.token, json!({"name": "renamed"})).await;
    let session = owner_session(&app, &agent.id, &owner).await;
    let as_owner = As {
        owner: Some(&session),
        ..As::default()
    };
    let path = format!("/api/agents/{}", agent.id);
    call(&app, Method::PUT, &path, as_owner, Some(json!({"spending_cap": 2}))).await;
    let export = Some(json!({"chain": "base", "confirm": true}));
    call(&app, Method::POST, &format!("{path}/export-key"), as_owner, export).await;
    app.delete_agent(&agent.id, &agent.token).await;

    // Inactive: the agent's token no longer reads the log, its owner does.
    assert_error(
        &audit(&app, &agent.id, as_agent, "").await,
        StatusCode::GONE,
        "agent_inactive",
    );
    call(&app, Method::POST, &format!("{path}/reactivate"), as_owner, None).await;

    let (status, entries) = audit(&app, &agent.id, as_agent, "").await;
    assert_eq!(status, StatusCode::OK, "{entries}");
    let expected = pairs(&[
        ("agent_reactivated", "owner"),
        ("agent_deleted", "agent"),
        ("key_exported", "owner"),
        ("agent_updated", "owner"),
        ("owner_session_opened", "owner"),
        ("agent_updated", "agent"),
        ("agent_created", "admin"),
    ]);
    assert_eq!(actions(&entries), expected);
    let cap_change = &entries[3]["detail"];
    assert_eq!(cap_change["fields"], json!(["spending_cap"]), "{cap_change}");
    let text = entries.to_string();
    assert!(
        !text.contains(&agent.token) && !text.contains(&session),
        "no secret in the log"
    );
    assert!(
        entries
            .as_array()
            .unwrap()
            .iter()
            .all(|e| e["hash"].as_str().unwrap().len() == 64)
    );
}

#[tokio::test]
async fn the_audit_log_pages_with_limit_and_before() {
    let app = spawn_app().await;
    let agent = app.create_default_agent().await;
    for name in ["b", "c", "d"] {
        app.put_agent(&agent.id, &agent.token, json!({"name": name})).await;
    }
    let as_agent = As {
        agent: Some(&agent.token),
        ..As::default()
    };
    let (_, first) = audit(&app, &agent.id, as_agent, "?limit=2").await;
    assert_eq!(first.as_array().unwrap().len(), 2);
    assert_eq!(first[0]["detail"]["to"]["name"], "d");
    let before = first[1]["id"].as_i64().unwrap();
    let (_, second) = audit(&app, &agent.id, as_agent, &format!("?limit=2&before={before}")).await;
    assert_eq!(
        actions(&second),
        pairs(&[("agent_updated", "agent"), ("agent_created", "admin")])
    );
    assert!(second[0]["id"].as_i64().unwrap() < before);

    let response = audit(&app, &agent.id, as_agent, "?limit=0").await;
    assert_error(&response, StatusCode::UNPROCESSABLE_ENTITY, "validation_failed");
    let response = audit(&app, &agent.id, As::default(), "").await;
    assert_error(&response, StatusCode::UNAUTHORIZED, "missing_token");
}

#[tokio::test]
async fn the_admin_reads_any_agents_log_and_creation_is_the_admins() {
    let app = spawn_app_with(&[("ADMIN_TOKEN", "operator-secret")]).await;
    let agent = app.create_default_agent().await;
    let admin = As {
        admin: Some("operator-secret"),
        ..As::default()
    };
    let (status, entries) = audit(&app, &agent.id, admin, "").await;
    assert_eq!(status, StatusCode::OK, "{entries}");
    assert_eq!(actions(&entries), pairs(&[("agent_created", "admin")]));
}

/// Runs `agentd audit verify` (the real binary) on the app's database: whether it exited 0, and its output.
fn verify(app: &TestApp) -> (bool, String) {
    let env = [
        ("DATABASE_URL", app.db_url.as_str()),
        ("ENCRYPTION_KEY", crate::helpers::ENCRYPTION_KEY),
        ("APP_ENV", "development"),
    ];
    let outcome = run_subcommand(&["audit", "verify"], &env, app.dir.path(), Duration::from_secs(30));
    let status = outcome.status.expect("agentd audit verify exits by itself");
    (status.success(), outcome.logs)
}

/// Edits the database: with the `sqlite3` CLI on SQLite (as an operator would), with SQL on PostgreSQL.
pub async fn tamper(app: &TestApp, sql: &str) {
    if let Some(path) = app.db_url.strip_prefix("sqlite://") {
        let path = path.split('?').next().unwrap();
        let status = std::process::Command::new("sqlite3")
            .arg(path)
            .arg(sql)
            .status()
            .expect("the sqlite3 CLI runs (apt-get install -y sqlite3)");
        assert!(status.success());
    } else {
        execute(app, sql).await;
    }
}

/// Three agents' entries, interleaved in one chain.
async fn app_with_a_log() -> TestApp {
    let app = spawn_app().await;
    let a = app.create_default_agent().await;
    let b = app.create_default_agent().await;
    app.put_agent(&a.id, &a.token, json!({"name": "a2"})).await;
    app.put_agent(&b.id, &b.token, json!({"name": "b2"})).await;
    app.put_agent(&a.id, &a.token, json!({"name": "a3"})).await;
    app
}

#[tokio::test]
async fn audit_verify_passes_on_an_intact_log_then_names_an_edited_row() {
    let app = app_with_a_log().await;
    let (ok, output) = verify(&app);
    assert!(ok, "{output}");
    assert!(output.contains("intact: 5 entries"), "{output}");

    tamper(&app, "UPDATE audit_events SET actor = 'owner' WHERE id = 3").await;
    let (ok, output) = verify(&app);
    assert!(!ok, "{output}");
    assert!(output.contains("entry 3 was altered"), "{output}");
}

#[tokio::test]
async fn audit_verify_names_a_removed_middle_row_and_a_removed_newest_row() {
    let app = app_with_a_log().await;
    tamper(&app, "DELETE FROM audit_events WHERE id = 5").await;
    let (ok, output) = verify(&app);
    assert!(!ok, "{output}");
    assert!(output.contains("entry 5 is missing"), "{output}");

    tamper(&app, "DELETE FROM audit_events WHERE id = 2").await;
    let (ok, output) = verify(&app);
    assert!(!ok, "{output}");
    assert!(output.contains("entry 3 does not follow entry 1"), "{output}");
}

#[tokio::test]
async fn the_chains_head_is_served_to_the_admin_for_anchoring() {
    let app = spawn_app_with(&[("ADMIN_TOKEN", "operator-secret")]).await;
    let head = |bearer: Option<&'static str>| {
        let app = &app;
        async move {
            let mut builder = app.build(Method::GET, "/api/audit/head", None, None);
            if let Some(bearer) = bearer {
                builder = builder.bearer_auth(bearer);
            }
            let response = app.send(builder).await;
            (response.status, response.body)
        }
    };
    assert_eq!(
        head(Some("operator-secret")).await.0,
        StatusCode::NOT_FOUND,
        "an empty log has no head"
    );

    let agent = app.create_default_agent().await;
    app.put_agent(&agent.id, &agent.token, json!({"name": "renamed"})).await;
    assert_eq!(head(None).await.0, StatusCode::UNAUTHORIZED);
    assert_eq!(head(Some("wrong")).await.0, StatusCode::UNAUTHORIZED);
    let (status, anchored) = head(Some("operator-secret")).await;
    assert_eq!(status, StatusCode::OK, "{anchored}");
    let admin = As {
        admin: Some("operator-secret"),
        ..As::default()
    };
    let (_, entries) = audit(&app, &agent.id, admin, "?limit=1").await;
    let newest = &entries[0];
    assert_eq!(anchored["id"], newest["id"]);
    assert_eq!(anchored["hash"], newest["hash"]);
    assert_eq!(anchored["at"], newest["at"]);
}

#[tokio::test]
async fn a_history_rewritten_and_chained_again_by_whoever_writes_the_database_is_found() {
    let app = app_with_a_log().await;
    let entries = app.state.store.audit_entries_after(0, 100).await.unwrap();
    assert_eq!(entries.len(), 5);

    // Entry 3 rewritten, then every hash from there on recomputed the way the log's format says (SHA-256 over the
    // canonical text), and the head moved: all that a writer of the database can do without the audit key.
    let mut prev = entries[1].hash.clone();
    for entry in &entries[2..] {
        let actor = if entry.id == 3 { "owner" } else { entry.actor.as_str() };
        let mut forged = entry.clone();
        forged.actor = actor.to_string();
        forged.prev_hash = prev.clone();
        let hash = forged.computed_hash(None);
        let sql = format!(
            "UPDATE audit_events SET actor = '{actor}', prev_hash = '{prev}', hash = '{hash}' WHERE id = {}",
            entry.id
        );
        tamper(&app, &sql).await;
        prev = hash;
    }
    tamper(&app, &format!("UPDATE audit_head SET hash = '{prev}' WHERE id = 1")).await;

    let (ok, output) = verify(&app);
    assert!(!ok, "{output}");
    assert!(output.contains("entry 3 was altered"), "{output}");
}

/// Makes every new audit entry fail, as a full disk or a broken log would.
pub async fn refuse_audit_entries(app: &TestApp) {
    if app.db_url.starts_with("sqlite") {
        tamper(
            app,
            "CREATE TRIGGER refuse_audit BEFORE INSERT ON audit_events BEGIN SELECT RAISE(ABORT, 'refused'); END;",
        )
        .await;
    } else {
        execute(
            app,
            "CREATE FUNCTION refuse_audit() RETURNS trigger LANGUAGE plpgsql AS \
             $$ BEGIN RAISE EXCEPTION 'refused'; END $$",
        )
        .await;
        execute(
            app,
            "CREATE TRIGGER refuse_audit BEFORE INSERT ON audit_events FOR EACH ROW EXECUTE FUNCTION refuse_audit()",
        )
        .await;
    }
}

/// Lets audit entries be written again.
pub async fn allow_audit_entries(app: &TestApp) {
    let drop = match app.db_url.starts_with("sqlite") {
        true => "DROP TRIGGER refuse_audit",
        false => "DROP TRIGGER refuse_audit ON audit_events",
    };
    tamper(app, drop).await;
    if !app.db_url.starts_with("sqlite") {
        execute(app, "DROP FUNCTION refuse_audit").await;
    }
}

/// A change and its audit entry commit together (issue 22, point 6): while the log takes no entry, creating an
/// agent, reissuing its token, updating and deleting it answer 500 and change nothing, so no token is stored that
/// was never shown and no change is made that the log does not hold.
#[tokio::test]
async fn a_change_whose_audit_entry_fails_is_not_made() {
    let app = spawn_app().await;
    let agent = app.create_default_agent().await;
    refuse_audit_entries(&app).await;

    let (status, body) = app.create_agent(json!({"name": "unlogged"})).await;
    assert_eq!(status, StatusCode::INTERNAL_SERVER_ERROR, "{body}");
    let (_, list) = app.list_agents("").await;
    let names: Vec<&str> = list
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|a| a["name"].as_str())
        .collect();
    assert!(
        !names.contains(&"unlogged"),
        "an agent created without its entry: {names:?}"
    );

    let response = app.reissue_token(&agent.id, token_proof(&agent.token)).await;
    assert_eq!(response.0, StatusCode::INTERNAL_SERVER_ERROR, "{}", response.1);
    let (status, body) = app.get_agent(&agent.id, &agent.token).await;
    assert_eq!(status, StatusCode::OK, "the token is still the live one: {body}");

    let (status, _) = app.put_agent(&agent.id, &agent.token, json!({"name": "renamed"})).await;
    assert_eq!(status, StatusCode::INTERNAL_SERVER_ERROR);
    let (status, _) = app.delete_agent(&agent.id, &agent.token).await;
    assert_eq!(status, StatusCode::INTERNAL_SERVER_ERROR);
    let (status, body) = app.get_agent(&agent.id, &agent.token).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_ne!(body["name"], "renamed", "an update made without its entry");
}
