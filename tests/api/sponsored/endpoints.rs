//! The operator's gas sponsorship per agent (§22 "Sponsorship per agent"): `PUT …/sponsorship` with the admin token
//! only (an owner or the agent is forbidden, nothing stored), 422 `sponsorship_unavailable` off a sponsorable chain
//! of the agent, `GET …/sponsorship` and `GET …/budget` showing each chain's `per_day`, `counted` and `left`; and the
//! store's `counted`: the user operations signed in the last 24 hours and not dropped, each at its gas cost once
//! mined, else its maximum cost. On SQLite, or PostgreSQL with `TEST_POSTGRES_URL`.

use std::time::Duration;

use agentd::domain::audit::{Actor, Detail, detail};
use agentd::domain::clock::Clock;
use agentd::store::{AuditEvent, Store};
use alloy::primitives::U256;
use alloy::signers::local::PrivateKeySigner;
use chrono::{DateTime, Utc};
use reqwest::{Method, StatusCode};
use serde_json::{Value, json};
use uuid::Uuid;

use crate::auth::owners::{As, call, guarded_agent, owner_session};
use crate::helpers::{CreatedAgent, TestApp, assert_error, spawn_app, spawn_app_with};

const ADMIN: &str = "admin-token-for-sponsorship-tests-0123456789";
const GWEI: u64 = 1_000_000_000;

fn path(agent: &CreatedAgent) -> String {
    format!("/api/agents/{}/sponsorship", agent.id)
}

fn admin() -> As<'static> {
    As {
        admin: Some(ADMIN),
        ..As::default()
    }
}

fn agent_token(agent: &CreatedAgent) -> As<'_> {
    As {
        agent: Some(&agent.token),
        ..As::default()
    }
}

fn set(chain: &str, per_day: &str) -> Option<Value> {
    Some(json!({"chain": chain, "per_day": per_day}))
}

/// `(action, actor)` of the agent's audit entries, newest first (read with the admin token).
async fn audit_actions(app: &TestApp, agent: &CreatedAgent) -> Vec<(String, String)> {
    let (status, entries) = call(
        app,
        Method::GET,
        &format!("/api/agents/{}/audit", agent.id),
        admin(),
        None,
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{entries}");
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

/// The sponsorships `GET …/sponsorship` lists, read with the agent token.
async fn listed(app: &TestApp, agent: &CreatedAgent) -> Value {
    let (status, body) = call(app, Method::GET, &path(agent), agent_token(agent), None).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    body["sponsorships"].clone()
}

/// How the tests spell values in SQL text for the database at `url` (SQLite stores ids as 16-byte blobs and times as
/// sqlx writes them; PostgreSQL has its own types).
struct Sql {
    url: String,
}

impl Sql {
    fn sqlite(&self) -> bool {
        self.url.starts_with("sqlite")
    }

    fn id(&self, id: Uuid) -> String {
        match self.sqlite() {
            true => format!("X'{}'", id.simple()),
            false => format!("'{id}'"),
        }
    }

    fn time(&self, at: DateTime<Utc>) -> String {
        format!("'{}'", at.to_rfc3339_opts(chrono::SecondsFormat::AutoSi, false))
    }

    async fn execute(&self, sql: String) {
        if self.sqlite() {
            let pool = sqlx::SqlitePool::connect(&self.url)
                .await
                .expect("open the SQLite file");
            sqlx::query(sqlx::AssertSqlSafe(sql))
                .execute(&pool)
                .await
                .expect("the SQL runs");
        } else {
            let pool = sqlx::PgPool::connect(&self.url).await.expect("connect to PostgreSQL");
            sqlx::query(sqlx::AssertSqlSafe(sql))
                .execute(&pool)
                .await
                .expect("the SQL runs");
        }
    }

    /// Stores a user operation of `agent_id` on `chain` signed `at`, its transaction row in `status`, holding
    /// `max_cost` wei and, once mined, `gas_cost`: as the sponsored send path and the bundler would leave it.
    async fn operation(
        &self,
        agent_id: Uuid,
        chain: &str,
        status: &str,
        (max_cost, gas_cost): (u64, Option<u64>),
        at: DateTime<Utc>,
    ) {
        let id = Uuid::new_v4();
        let raw = if self.sqlite() { "X'00'" } else { "'\\x00'::bytea" };
        let (tx, agent, when) = (self.id(id), self.id(agent_id), self.time(at));
        // The operation's EntryPoint nonce: unique per agent and chain, any number will do.
        let nonce = id.as_u128() as u32;
        self.execute(format!(
            "INSERT INTO transactions (id, agent_id, chain, nonce, from_address, to_address, value_wei, gas_limit, \
             max_fee_per_gas, reserved_wei, raw_tx, status, created_at, updated_at, kind) VALUES ({tx}, {agent}, \
             '{chain}', {nonce}, '0x1111111111111111111111111111111111111111', \
             '0x3333333333333333333333333333333333333333', '0', 100000, '1', '0', {raw}, '{status}', {when}, {when}, \
             'user_op')"
        ))
        .await;
        let gas_cost = gas_cost.map_or("NULL".to_string(), |g| format!("'{g}'"));
        self.execute(format!(
            "INSERT INTO user_operations (transfer_id, agent_id, chain, user_op_hash, max_cost, gas_cost, valid_until, \
             created_at) VALUES ({tx}, {agent}, '{chain}', '0x{}', '{max_cost}', {gas_cost}, 0, {when})",
            id.simple()
        ))
        .await;
    }
}

fn sponsorship_set(chain: &str, per_day: &str) -> Detail {
    Detail::SponsorshipSet(detail::SponsorshipSet {
        chain: chain.into(),
        per_day: per_day.into(),
    })
}

async fn set_in_store(
    store: &dyn Store,
    agent_id: Uuid,
    chain: &str,
    per_day: u64,
) -> agentd::store::sponsorship::SponsorshipState {
    let audit = AuditEvent::new(agent_id, Actor::Admin, sponsorship_set(chain, &per_day.to_string()));
    store
        .set_sponsorship(agent_id, chain, U256::from(per_day), &audit)
        .await
        .expect("the sponsorship is stored")
}

#[tokio::test]
async fn an_owner_or_the_agent_may_not_set_what_the_operator_pays_and_nothing_is_stored() {
    let app = spawn_app_with(&[("ADMIN_TOKEN", ADMIN)]).await;
    let owner = PrivateKeySigner::random();
    let agent = guarded_agent(&app, &owner).await;
    let session = owner_session(&app, &agent.id, &owner).await;
    let refusals = [
        (
            "an owner session",
            As {
                owner: Some(&session),
                ..As::default()
            },
        ),
        ("the agent token", agent_token(&agent)),
        (
            "the agent token beside a wrong bearer",
            As {
                agent: Some(&agent.token),
                admin: Some("wrong"),
                ..As::default()
            },
        ),
    ];
    for (who, credentials) in refusals {
        let refused = call(&app, Method::PUT, &path(&agent), credentials, set("base", "0.05")).await;
        assert_error(&refused, StatusCode::FORBIDDEN, "forbidden");
        assert!(
            refused.1["error"]["message"].as_str().unwrap().contains("operator"),
            "{who}: {}",
            refused.1
        );
    }
    // No credential, or a wrong bearer alone: as POST /api/agents answers.
    for credentials in [
        As::default(),
        As {
            admin: Some("wrong"),
            ..As::default()
        },
    ] {
        let refused = call(&app, Method::PUT, &path(&agent), credentials, set("base", "0.05")).await;
        assert_error(&refused, StatusCode::UNAUTHORIZED, "unauthorized");
    }
    assert_eq!(listed(&app, &agent).await, json!([]));
    assert!(
        !audit_actions(&app, &agent)
            .await
            .iter()
            .any(|(action, _)| action == "sponsorship_set")
    );
}

#[tokio::test]
async fn a_sponsorship_is_refused_off_a_sponsorable_chain_of_the_agent_after_the_body_is_checked() {
    let app = spawn_app_with(&[("ADMIN_TOKEN", ADMIN)]).await;
    let agent = guarded_agent(&app, &PrivateKeySigner::random()).await;
    let sponsorship = path(&agent);
    let put = |body| call(&app, Method::PUT, &sponsorship, admin(), body);
    // The test configuration sets no PAYMASTER_BASE: base is the agent's chain but not sponsorable.
    let unavailable = put(set("base", "0.05")).await;
    assert_error(
        &unavailable,
        StatusCode::UNPROCESSABLE_ENTITY,
        "sponsorship_unavailable",
    );
    assert_error(
        &put(set("ethereum", "0.05")).await,
        StatusCode::UNPROCESSABLE_ENTITY,
        "sponsorship_unavailable",
    );
    for (body, field) in [
        (set("dogechain", "0.05"), "chain"),
        (set("base", "-1"), "per_day"),
        (set("base", "a lot"), "per_day"),
        (set("base", "0.0000000000000000001"), "per_day"),
        (Some(json!({"chain": "base"})), "body"),
    ] {
        let refused = put(body.clone()).await;
        assert_error(&refused, StatusCode::UNPROCESSABLE_ENTITY, "validation_failed");
        assert!(
            refused.1["error"]["details"]["fields"].get(field).is_some(),
            "{body:?}: {}",
            refused.1
        );
    }
    let unknown = format!("/api/agents/{}/sponsorship", Uuid::new_v4());
    assert_error(
        &call(&app, Method::PUT, &unknown, admin(), set("base", "0.05")).await,
        StatusCode::NOT_FOUND,
        "agent_not_found",
    );
    let deleted = app.delete_agent(&agent.id, &agent.token).await;
    assert!(deleted.0.is_success(), "{}", deleted.1);
    assert_error(&put(set("base", "0.05")).await, StatusCode::GONE, "agent_inactive");
}

#[tokio::test]
async fn without_an_admin_token_the_operators_call_is_open_but_never_to_the_agent_token() {
    let app = spawn_app().await;
    let agent = app.create_default_agent().await;
    let open = call(&app, Method::PUT, &path(&agent), As::default(), set("base", "0.05")).await;
    assert_error(&open, StatusCode::UNPROCESSABLE_ENTITY, "sponsorship_unavailable");
    let refused = call(
        &app,
        Method::PUT,
        &path(&agent),
        agent_token(&agent),
        set("base", "0.05"),
    )
    .await;
    assert_error(&refused, StatusCode::FORBIDDEN, "forbidden");
}

#[tokio::test]
async fn the_list_and_the_budget_show_each_sponsorship_counting_the_last_day_of_operations() {
    let app = spawn_app_with(&[("ADMIN_TOKEN", ADMIN)]).await;
    let agent = guarded_agent(&app, &PrivateKeySigner::random()).await;
    let id = Uuid::parse_str(&agent.id).unwrap();
    let sql = Sql {
        url: app.db_url.clone(),
    };
    // Set through the store, as the operator's PUT does (the default test configuration sponsors no chain).
    set_in_store(app.state.store.as_ref(), id, "base", 50_000_000 * GWEI).await;
    sql.operation(id, "base", "pending", (1_000_000 * GWEI, None), app.clock.now())
        .await;
    sql.operation(
        id,
        "base",
        "confirmed",
        (900_000 * GWEI, Some(200_000 * GWEI)),
        app.clock.now(),
    )
    .await;
    let expected = json!([{"chain": "base", "per_day": "0.05", "counted": "0.0012", "left": "0.0488"}]);
    assert_eq!(listed(&app, &agent).await, expected);
    let (status, budget) = call(
        &app,
        Method::GET,
        &format!("/api/agents/{}/budget", agent.id),
        agent_token(&agent),
        None,
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{budget}");
    assert_eq!(budget["sponsorships"], expected);
    assert!(
        audit_actions(&app, &agent)
            .await
            .contains(&("sponsorship_set".into(), "admin".into()))
    );

    // A day later the window holds nothing: the sponsorship is whole again.
    app.clock.advance(Duration::from_secs(24 * 3600 + 1));
    let whole = json!([{"chain": "base", "per_day": "0.05", "counted": "0", "left": "0.05"}]);
    assert_eq!(listed(&app, &agent).await, whole);
}

#[tokio::test]
async fn counted_is_what_undropped_operations_of_the_last_day_hold_at_their_gas_cost_once_mined() {
    let app = spawn_app().await;
    let store = app.state.store.clone();
    let sql = Sql {
        url: app.db_url.clone(),
    };
    let agent = app.create_default_agent().await;
    let agent = store.get_agent(Uuid::parse_str(&agent.id).unwrap()).await.unwrap();
    let now = app.clock.now();
    let hours = |h: i64| now - chrono::Duration::hours(h);
    assert_eq!(store.sponsorships(agent.id).await.unwrap(), Vec::new(), "none set yet");
    sql.operation(agent.id, "base", "pending", (100, None), hours(1)).await;
    sql.operation(agent.id, "base", "confirmed", (1_000, Some(30)), hours(2))
        .await;
    sql.operation(agent.id, "base", "reverted", (900, Some(40)), hours(3))
        .await;
    // Dropped: never landed, holds nothing; unless a gas cost was recorded for it (a bundle reverted on chain).
    sql.operation(agent.id, "base", "dropped", (500, None), hours(4)).await;
    sql.operation(agent.id, "base", "dropped", (600, Some(8)), hours(5))
        .await;
    // Out of the window, and another chain's.
    sql.operation(agent.id, "base", "confirmed", (7_000, Some(7_000)), hours(25))
        .await;
    sql.operation(agent.id, "ethereum", "pending", (11, None), hours(1))
        .await;

    let base = set_in_store(store.as_ref(), agent.id, "base", 5_000).await;
    assert_eq!(
        (base.per_day, base.counted, base.left()),
        (U256::from(5_000), U256::from(178), U256::from(4_822))
    );
    // Lowered under what it counted: counted stays, left is 0; "0" ends it and is still listed.
    let lowered = set_in_store(store.as_ref(), agent.id, "base", 100).await;
    assert_eq!((lowered.counted, lowered.left()), (U256::from(178), U256::ZERO));
    let ended = set_in_store(store.as_ref(), agent.id, "ethereum", 0).await;
    assert_eq!(
        (ended.per_day, ended.counted, ended.left()),
        (U256::ZERO, U256::from(11), U256::ZERO)
    );
    let all = store.sponsorships(agent.id).await.unwrap();
    let figures: Vec<_> = all.iter().map(|s| (s.chain.as_str(), s.per_day, s.counted)).collect();
    assert_eq!(
        figures,
        [
            ("base", U256::from(100), U256::from(178)),
            ("ethereum", U256::ZERO, U256::from(11))
        ]
    );

    let other = Uuid::parse_str(&app.create_default_agent().await.id).unwrap();
    assert_eq!(
        store.sponsorships(other).await.unwrap(),
        Vec::new(),
        "another agent's are its own"
    );
    let entries = store.list_audit(agent.id, None, 10).await.unwrap();
    let set: Vec<_> = entries.iter().filter(|e| e.action == "sponsorship_set").collect();
    assert_eq!(set.len(), 3);
    assert_eq!(
        (set[0].actor.as_str(), set[0].detail.as_str()),
        ("admin", r#"{"chain":"ethereum","per_day":"0"}"#)
    );
}

/// An app (admin token `ADMIN`) whose `base` is a node with the EntryPoint, `EIP7702StatelessDeleGator` and a
/// `SingletonPaymaster` deployed and configured, so that it checks out at start as sponsorable; with its node.
pub(crate) async fn sponsorable_app() -> (crate::anvil::Anvil, TestApp) {
    use crate::helpers::chain::{BASE_CHAIN_ID, transfer_app};
    use crate::helpers::delegation_framework::Framework;
    use crate::helpers::paymaster::Paymaster;

    let anvil = crate::anvil::Anvil::start(BASE_CHAIN_ID);
    let framework = Framework::deploy(&anvil, BASE_CHAIN_ID).await;
    let paymaster = Paymaster::deploy(&anvil, framework.entry_point).await;
    let mut vars: Vec<(String, String)> = framework.vars();
    vars.extend([
        ("ADMIN_TOKEN".into(), ADMIN.into()),
        ("ENTRY_POINT_BASE".into(), framework.entry_point.to_string()),
        ("ACCOUNT_IMPLEMENTATION_BASE".into(), framework.delegator.to_string()),
        ("PAYMASTER_BASE".into(), paymaster.address.to_string()),
    ]);
    let vars: Vec<(&str, &str)> = vars.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
    let app = transfer_app(&anvil, &vars).await;
    assert!(app.state.sponsors.is_sponsorable("base"), "base checks out at start");
    (anvil, app)
}

/// The operator's `PUT` on a sponsorable chain, end to end.
#[tokio::test]
async fn the_operator_sets_a_sponsorship_on_a_sponsorable_chain_and_zero_ends_it() {
    let (_anvil, app) = sponsorable_app().await;
    let agent = guarded_agent(&app, &PrivateKeySigner::random()).await;

    let (status, body) = call(&app, Method::PUT, &path(&agent), admin(), set("base", "0.05")).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(
        body,
        json!({"chain": "base", "per_day": "0.05", "counted": "0", "left": "0.05"})
    );
    assert_eq!(listed(&app, &agent).await, json!([body]));
    assert_eq!(
        audit_actions(&app, &agent).await[0],
        ("sponsorship_set".into(), "admin".into())
    );
    assert_error(
        &call(&app, Method::PUT, &path(&agent), admin(), set("ethereum", "0.05")).await,
        StatusCode::UNPROCESSABLE_ENTITY,
        "sponsorship_unavailable",
    );
    let (status, ended) = call(&app, Method::PUT, &path(&agent), admin(), set("base", "0")).await;
    assert_eq!(status, StatusCode::OK, "{ended}");
    assert_eq!(
        ended,
        json!({"chain": "base", "per_day": "0", "counted": "0", "left": "0"})
    );
}

/// The sponsorship routes' real answers, for the OpenAPI oracle: the operator's `PUT` (200), an agent token's (403),
/// and the agent's `GET` (200).
pub async fn drive_sponsorship(oracle: &mut crate::helpers::openapi::Oracle) {
    let (_anvil, app) = sponsorable_app().await;
    let agent = guarded_agent(&app, &PrivateKeySigner::random()).await;
    let path = format!("/api/agents/{}/sponsorship", agent.id);
    let template = "/api/agents/{id}/sponsorship";
    let body = serde_json::json!({"chain": "base", "per_day": "0.05"});
    let as_operator = app
        .build(reqwest::Method::PUT, &path, None, Some(body.clone()))
        .bearer_auth(ADMIN);
    let set = app.send(as_operator).await;
    assert_eq!(set.status, reqwest::StatusCode::OK, "{}", set.text);
    oracle.check("PUT", template, &set);
    let as_agent = app.build(reqwest::Method::PUT, &path, Some(&agent.token), Some(body));
    oracle.check("PUT", template, &app.send(as_agent).await);
    let listed = app.build(reqwest::Method::GET, &path, Some(&agent.token), None);
    oracle.check("GET", template, &app.send(listed).await);
}
