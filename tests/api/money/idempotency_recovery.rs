//! `Idempotency-Key` across a crash (docs/api.md §12), with the real binary and anvil on a fresh database (SQLite, or
//! PostgreSQL with `TEST_POSTGRES_URL`): a keyed transfer whose process died after storing it is answered by a repeat
//! once the dead request's lease is over (201, the stored transfer) and never sent twice; one whose process died before
//! it reserved anything is run by the repeat. The lease (60 s) is ended in the database instead of waited for.

use std::path::Path;
use std::time::{Duration, Instant};

use alloy::primitives::Address;
use reqwest::StatusCode;
use secrecy::ExposeSecret;
use serde_json::{Value, json};

use crate::anvil::Anvil;
use crate::helpers::chain::{BASE_CHAIN_ID, CENT_ETH, ONE_ETH, fresh_address, wei};
use crate::helpers::gated_rpc::GatedRpc;
use crate::helpers::{ENCRYPTION_KEY, ExitingProcess, ServerProcess, TOKEN_HEADER, assert_error, test_database};
use crate::service::startup::sql;

const FAULT_EXIT_CODE: i32 = 86;

/// The process's environment on `db` and the node `rpc`, plus `extra`.
fn server_env(bind: &str, db: &str, rpc: &str, extra: &[(&str, &str)]) -> Vec<(String, String)> {
    let mut env = vec![
        ("BIND_ADDR", bind),
        ("APP_ENV", "development"),
        ("ENCRYPTION_KEY", ENCRYPTION_KEY),
        ("DATABASE_URL", db),
        ("RPC_URL_BASE", rpc),
        ("WATCHER_INTERVAL_MS", "50"),
        ("RUST_LOG", "info,sqlx=warn"),
    ];
    env.extend_from_slice(extra);
    env.into_iter().map(|(k, v)| (k.to_string(), v.to_string())).collect()
}

fn start(db: &str, rpc: &str, dir: &Path) -> ServerProcess {
    let env = server_env("127.0.0.1:0", db, rpc, &[]);
    let env: Vec<(&str, &str)> = env.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
    ServerProcess::start(&env, dir)
}

/// An agent created through a process: its id, its token and its wallet on base (funded with 1 ETH).
struct Remote {
    id: String,
    token: String,
    wallet: Address,
}

async fn funded_agent(client: &reqwest::Client, base: &str, anvil: &Anvil) -> Remote {
    let created: Value = client
        .post(format!("{base}/api/agents"))
        .json(&json!({"name": "keyed", "chains": ["base"], "capabilities": ["read", "transact"], "spending_cap": 0.5}))
        .send()
        .await
        .expect("create an agent")
        .json()
        .await
        .expect("JSON");
    let agent = Remote {
        id: created["id"]
            .as_str()
            .unwrap_or_else(|| panic!("id: {created}"))
            .to_string(),
        token: created["access_token"].as_str().expect("access_token").to_string(),
        wallet: created["wallet_addresses"]["base"]
            .as_str()
            .expect("base wallet")
            .parse()
            .unwrap(),
    };
    anvil.set_balance(agent.wallet, wei(ONE_ETH)).await;
    agent
}

/// A keyed transfer's answer: status, whether it says it is a replay (`Idempotent-Replayed`), body.
struct Answered {
    status: StatusCode,
    replayed: bool,
    body: Value,
}

/// `POST /api/agents/{id}/transfers` of 0.01 ETH to `to` on base under `key`, through a process; an error when the
/// process died before answering.
async fn keyed_transfer(
    client: &reqwest::Client,
    base: &str,
    agent: &Remote,
    key: &str,
    to: Address,
) -> reqwest::Result<Answered> {
    let response = client
        .post(format!("{base}/api/agents/{}/transfers", agent.id))
        .header(TOKEN_HEADER, &agent.token)
        .header("Idempotency-Key", key)
        .json(&json!({"chain": "base", "to": to.to_string(), "amount": "0.01"}))
        .send()
        .await?;
    let status = response.status();
    let replayed = response
        .headers()
        .get("idempotent-replayed")
        .is_some_and(|v| v == "true");
    Ok(Answered {
        status,
        replayed,
        body: response.json().await?,
    })
}

/// Waits until the process shows the agent's one transfer `confirmed`, and answers it. On PostgreSQL a restarted
/// process's watcher first waits out the dead one's lease on the chain (up to 15 s) before it re-broadcasts.
async fn one_confirmed(client: &reqwest::Client, server: &ServerProcess, agent: &Remote) -> Value {
    let deadline = Instant::now() + Duration::from_secs(45);
    loop {
        let txs: Value = client
            .get(format!("{}/api/agents/{}/transactions", server.base_url(), agent.id))
            .header(TOKEN_HEADER, &agent.token)
            .send()
            .await
            .expect("the process answers")
            .json()
            .await
            .expect("JSON");
        if txs.as_array().is_some_and(|t| t.len() == 1) && txs[0]["status"] == "confirmed" {
            return txs[0].clone();
        }
        assert!(
            Instant::now() < deadline,
            "no one confirmed transfer: {txs:#}\nlogs:\n{}",
            server.logs()
        );
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
}

/// A repeat while the dead request's lease still runs: nobody can tell it from a live one yet.
async fn refused_while_leased(
    client: &reqwest::Client,
    server: &ServerProcess,
    agent: &Remote,
    key: &str,
    to: Address,
) {
    let early = keyed_transfer(client, &server.base_url(), agent, key, to)
        .await
        .expect("an answer");
    assert_error(
        &(early.status, early.body),
        StatusCode::CONFLICT,
        "idempotency_in_progress",
    );
}

/// The dead request's lease runs out (its process renews it no more; the 60 s are not waited for).
async fn end_leases(db: &str) {
    sql(
        db,
        "UPDATE idempotency_keys SET held_until = created_at WHERE status_code IS NULL",
    )
    .await;
}

/// Issue 50 point 4: a keyed transfer whose process died after storing it (signed, before its broadcast:
/// `FAULT_EXIT_BEFORE_BROADCAST`) and before storing its answer. After the restart the transfer goes out once; a
/// repeat with the same key and body is 409 while the dead request's lease runs, then answers the stored transfer
/// (201, same id, `Idempotent-Replayed`), and that answer again byte for byte; nothing is sent a second time.
#[tokio::test]
async fn a_keyed_transfer_whose_process_died_after_storing_it_is_answered_once_its_lease_is_over_and_sent_once() {
    let anvil = Anvil::start(BASE_CHAIN_ID);
    let db = test_database().await;
    let url = db.config.database.url.expose_secret().to_string();
    let dir = tempfile::tempdir().expect("a temporary directory");
    let client = reqwest::Client::new();

    // A process with the fault switch (its exit waited for on a thread).
    let env = server_env(
        "127.0.0.1:0",
        &url,
        anvil.url(),
        &[("FAULT_EXIT_BEFORE_BROADCAST", "true")],
    );
    let env: Vec<(&str, &str)> = env.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
    let crashed = ExitingProcess::start(&env, dir.path(), Duration::from_secs(60));
    let base = crashed.base_url();
    let agent = funded_agent(&client, &base, &anvil).await;
    let to = fresh_address();

    let died = keyed_transfer(&client, &base, &agent, "crash-after-storing", to).await;
    assert!(died.is_err(), "the process dies before answering");
    let outcome = crashed.exit().await;
    assert_eq!(
        outcome.status.and_then(|s| s.code()),
        Some(FAULT_EXIT_CODE),
        "the fault switch exits with 86; logs:\n{}",
        outcome.logs
    );
    assert_eq!(
        anvil.nonce(agent.wallet).await,
        0,
        "nothing was broadcast before the crash"
    );

    // The next start broadcasts the stored transfer; the dead request's claim is still unanswered.
    let server = start(&url, anvil.url(), dir.path());
    refused_while_leased(&client, &server, &agent, "crash-after-storing", to).await;
    let stored = one_confirmed(&client, &server, &agent).await;

    end_leases(&url).await;
    let recalled = keyed_transfer(&client, &server.base_url(), &agent, "crash-after-storing", to)
        .await
        .expect("an answer");
    assert_eq!(
        recalled.status,
        StatusCode::CREATED,
        "the stored transfer is the answer: {}",
        recalled.body
    );
    assert_eq!(recalled.body["id"], stored["id"], "{}", recalled.body);
    assert_eq!(recalled.body["tx_hash"], stored["tx_hash"], "{}", recalled.body);
    assert!(recalled.replayed, "a repeat that ran nothing says so");
    let again = keyed_transfer(&client, &server.base_url(), &agent, "crash-after-storing", to)
        .await
        .expect("an answer");
    assert_eq!(
        (again.status, &again.body),
        (recalled.status, &recalled.body),
        "kept as the answer"
    );
    assert!(again.replayed);

    assert_eq!(anvil.nonce(agent.wallet).await, 1, "one send on chain");
    assert_eq!(anvil.balance(to).await, wei(CENT_ETH), "the recipient was paid once");
    let other = keyed_transfer(
        &client,
        &server.base_url(),
        &agent,
        "crash-after-storing",
        fresh_address(),
    )
    .await
    .expect("an answer");
    assert_error(
        &(other.status, other.body),
        StatusCode::UNPROCESSABLE_ENTITY,
        "idempotency_key_reused",
    );
}

/// A keyed transfer whose process is SIGKILLed before it moved money (held in front of the node at its balance read,
/// before its reservation): after the restart and the end of the dead request's lease, the repeat runs the request
/// and sends once.
#[tokio::test]
async fn a_keyed_transfer_whose_process_died_before_moving_money_is_run_by_the_repeat_once_its_lease_is_over() {
    let anvil = Anvil::start(BASE_CHAIN_ID);
    let gate = GatedRpc::start(anvil.url()).await;
    let db = test_database().await;
    let url = db.config.database.url.expose_secret().to_string();
    let dir = tempfile::tempdir().expect("a temporary directory");
    let client = reqwest::Client::new();

    let server = start(&url, gate.url(), dir.path());
    let agent = funded_agent(&client, &server.base_url(), &anvil).await;
    let to = fresh_address();
    gate.hold_method("eth_getBalance");
    let first = tokio::spawn({
        let (client, base) = (client.clone(), server.base_url());
        let agent = Remote {
            id: agent.id.clone(),
            token: agent.token.clone(),
            wallet: agent.wallet,
        };
        async move { keyed_transfer(&client, &base, &agent, "crash-before-moving", to).await }
    });
    gate.wait_held(1, Duration::from_secs(10)).await;
    let claimed = "SELECT CASE WHEN status_code IS NULL AND acted_at IS NULL THEN 'unanswered, nothing moved' \
                   ELSE 'other' END FROM idempotency_keys";
    let deadline = Instant::now() + Duration::from_secs(10);
    while sql(&url, claimed).await.is_empty() {
        assert!(Instant::now() < deadline, "the request never claimed its key");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    drop(server); // SIGKILL while the request waits for the node.
    assert!(first.await.unwrap().is_err(), "the process died before answering");
    gate.release();
    assert_eq!(sql(&url, claimed).await, ["unanswered, nothing moved"]);

    let server = start(&url, anvil.url(), dir.path());
    refused_while_leased(&client, &server, &agent, "crash-before-moving", to).await;
    end_leases(&url).await;
    let ran = keyed_transfer(&client, &server.base_url(), &agent, "crash-before-moving", to)
        .await
        .expect("an answer");
    assert_eq!(
        ran.status,
        StatusCode::CREATED,
        "the repeat runs the request: {}",
        ran.body
    );
    assert!(!ran.replayed, "a fresh answer");
    let sent = one_confirmed(&client, &server, &agent).await;
    assert_eq!(sent["id"], ran.body["id"]);
    let again = keyed_transfer(&client, &server.base_url(), &agent, "crash-before-moving", to)
        .await
        .expect("an answer");
    assert_eq!(again.body, ran.body, "then its answer is kept");
    assert_eq!(anvil.nonce(agent.wallet).await, 1, "one send on chain");
    assert_eq!(anvil.balance(to).await, wei(CENT_ETH));
}
