//! Crash safety with the real binary: a process that dies after storing a signed transfer but before broadcasting
//! it (`FAULT_EXIT_BEFORE_BROADCAST=true`, exit code 86) leaves it stored; the next start broadcasts it exactly once,
//! the watcher confirms it, and later starts do not send it again.

use std::path::Path;
use std::time::{Duration, Instant};

use alloy::primitives::{Address, TxHash, U256};
use reqwest::StatusCode;
use serde_json::{Value, json};

use crate::anvil::Anvil;
use crate::helpers::chain::{BASE_CHAIN_ID, CENT_ETH, ONE_ETH, fresh_address, node_cost, wei};
use crate::helpers::{ENCRYPTION_KEY, ExitingProcess, ServerProcess, TOKEN_HEADER, sqlite_url};

const FAULT_EXIT_CODE: i32 = 86;
const LOG_REBROADCAST: &str = "re-broadcast a stored transaction";

fn server_env(bind: &str, db: &str, rpc: &str, fault: bool) -> Vec<(String, String)> {
    let mut env = vec![
        ("BIND_ADDR".to_string(), bind.to_string()),
        ("APP_ENV".to_string(), "development".to_string()),
        ("ENCRYPTION_KEY".to_string(), ENCRYPTION_KEY.to_string()),
        ("DATABASE_URL".to_string(), db.to_string()),
        ("RPC_URL_BASE".to_string(), rpc.to_string()),
        ("WATCHER_INTERVAL_MS".to_string(), "50".to_string()),
        ("RUST_LOG".to_string(), "info,sqlx=warn".to_string()),
    ];
    if fault {
        env.push(("FAULT_EXIT_BEFORE_BROADCAST".to_string(), "true".to_string()));
    }
    env
}

fn as_refs(env: &[(String, String)]) -> Vec<(&str, &str)> {
    env.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect()
}

fn start(env: &[(String, String)], dir: &Path) -> ServerProcess {
    ServerProcess::start(&as_refs(env), dir)
}

/// The agent's audit entries, newest first, through a process.
async fn audit(client: &reqwest::Client, base: &str, agent_id: &str, token: &str) -> Vec<Value> {
    agents_list(client, base, agent_id, token, "audit").await
}

/// The agent's stored transfers, through a process.
async fn transactions(client: &reqwest::Client, base: &str, agent_id: &str, token: &str) -> Vec<Value> {
    agents_list(client, base, agent_id, token, "transactions").await
}

/// `GET /api/agents/{agent_id}/{list}` as the agent, through a process: the array it answers.
async fn agents_list(client: &reqwest::Client, base: &str, agent_id: &str, token: &str, list: &str) -> Vec<Value> {
    let response = client
        .get(format!("{base}/api/agents/{agent_id}/{list}"))
        .header(TOKEN_HEADER, token)
        .send()
        .await
        .unwrap_or_else(|e| panic!("the {list} request reaches the process: {e}"));
    assert_eq!(response.status(), StatusCode::OK);
    response
        .json::<Value>()
        .await
        .expect("JSON")
        .as_array()
        .expect("an array")
        .clone()
}

#[tokio::test]
async fn a_transfer_stored_before_a_crash_is_broadcast_once_after_the_restart() {
    let anvil = Anvil::start(BASE_CHAIN_ID);
    let dir = tempfile::tempdir().expect("a temporary directory");
    let db = sqlite_url(dir.path());
    let client = reqwest::Client::new();

    // 1. A process with the fault switch (its exit waited for on a thread).
    let fault_env = server_env("127.0.0.1:0", &db, anvil.url(), true);
    let crashed = ExitingProcess::start(&as_refs(&fault_env), dir.path(), Duration::from_secs(60));
    let base = crashed.base_url();

    let created: Value = client
        .post(format!("{base}/api/agents"))
        .json(&json!({"name": "crashy", "chains": ["base"], "capabilities": ["read", "transact"], "spending_cap": 0.5}))
        .send()
        .await
        .expect("create an agent")
        .json()
        .await
        .expect("JSON");
    let agent_id = created["id"]
        .as_str()
        .unwrap_or_else(|| panic!("id: {created}"))
        .to_string();
    let token = created["access_token"].as_str().expect("access_token").to_string();
    let from: Address = created["wallet_addresses"]["base"]
        .as_str()
        .expect("base wallet")
        .parse()
        .unwrap();
    anvil.set_balance(from, wei(ONE_ETH)).await;
    let to = fresh_address();

    let chat = client
        .post(format!("{base}/api/chat"))
        .header(TOKEN_HEADER, &token)
        .json(&json!({"agent_id": agent_id, "message": format!("send 0.01 ETH to {to} on base")}))
        .send()
        .await;
    assert!(
        chat.is_err(),
        "the process dies during the turn, so the request fails: {chat:?}"
    );
    let outcome = crashed.exit().await;
    assert_eq!(
        outcome.status.and_then(|s| s.code()),
        Some(FAULT_EXIT_CODE),
        "the fault switch exits with 86; logs:\n{}",
        outcome.logs
    );
    assert_eq!(anvil.nonce(from).await, 0, "nothing was broadcast before the crash");
    assert_eq!(anvil.balance(to).await, U256::ZERO);

    // 2. A normal start on the same database: the stored transfer goes out once and is confirmed.
    let env = server_env("127.0.0.1:0", &db, anvil.url(), false);
    let started = Instant::now();
    let server = start(&env, dir.path());
    let base = server.base_url();
    let deadline = Instant::now() + Duration::from_secs(15);
    let txs = loop {
        let txs = transactions(&client, &base, &agent_id, &token).await;
        if txs.len() == 1 && txs[0]["status"] == "confirmed" {
            break txs;
        }
        assert!(
            Instant::now() < deadline,
            "the stored transfer was not confirmed after the restart: {txs:#?}\nlogs:\n{}",
            server.logs()
        );
        tokio::time::sleep(Duration::from_millis(25)).await;
    };
    println!(
        "recovered and confirmed {:?} after the restart began",
        started.elapsed()
    );
    assert_eq!(txs[0]["nonce"], 0, "{txs:?}");
    assert_eq!(txs[0]["value_wei"], CENT_ETH.to_string(), "{txs:?}");
    assert_eq!(anvil.nonce(from).await, 1, "exactly one transaction on chain");
    assert_eq!(
        anvil.balance(to).await,
        wei(CENT_ETH),
        "the recipient got the value once"
    );
    let hash: TxHash = txs[0]["tx_hash"].as_str().unwrap().parse().unwrap();
    let (cost, success) = node_cost(&anvil, hash).await;
    assert!(success);
    assert_eq!(anvil.balance(from).await, wei(ONE_ETH) - cost);
    // The audit log records the transfer the chain shows, though the process died before its entry's round.
    let accepted: Vec<Value> = audit(&client, &base, &agent_id, &token)
        .await
        .into_iter()
        .filter(|e| e["action"] == "transfer_accepted")
        .collect();
    assert_eq!(accepted.len(), 1, "one transfer_accepted entry: {accepted:#?}");
    assert_eq!(accepted[0]["detail"]["transfer_id"], txs[0]["id"], "{accepted:#?}");
    assert_eq!(accepted[0]["detail"]["tx_hash"], txs[0]["tx_hash"], "{accepted:#?}");
    assert_eq!(accepted[0]["actor"], "agent", "{accepted:#?}");
    let logs = server.logs();
    assert_eq!(
        logs.matches(LOG_REBROADCAST).count(),
        1,
        "one re-broadcast; logs:\n{logs}"
    );
    let stopped = server.terminate(Duration::from_secs(15));
    assert_eq!(stopped.status.and_then(|s| s.code()), Some(0), "{}", stopped.logs);

    // 3. Another start: nothing is sent again (the watcher gets many rounds to try).
    let server = start(&env, dir.path());
    let base = server.base_url();
    let window = Instant::now() + Duration::from_secs(1);
    while Instant::now() < window {
        let txs = transactions(&client, &base, &agent_id, &token).await;
        assert_eq!(txs.len(), 1, "{txs:?}");
        assert_eq!(txs[0]["status"], "confirmed", "{txs:?}");
        assert_eq!(anvil.nonce(from).await, 1, "no second transaction on chain");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert_eq!(anvil.balance(to).await, wei(CENT_ETH));
    let entries = audit(&client, &base, &agent_id, &token).await;
    assert_eq!(
        entries.iter().filter(|e| e["action"] == "transfer_accepted").count(),
        1,
        "the entry is not written again on a later start: {entries:#?}"
    );
    let stopped = server.terminate(Duration::from_secs(15));
    assert!(
        !stopped.logs.contains(LOG_REBROADCAST),
        "nothing is re-broadcast on a later start; logs:\n{}",
        stopped.logs
    );
}

const ADMIN: &str = "admin-token-for-crash-window-tests-0123456789";

/// An agent on base created with the admin token: (id, token, wallet).
async fn crash_agent(client: &reqwest::Client, base: &str) -> (String, String, Address) {
    let created: Value = client
        .post(format!("{base}/api/agents"))
        .bearer_auth(ADMIN)
        .json(&json!({"name": "crashy", "chains": ["base"], "capabilities": ["read", "transact"], "spending_cap": 0.5}))
        .send()
        .await
        .expect("create an agent")
        .json()
        .await
        .expect("JSON");
    let id = created["id"]
        .as_str()
        .unwrap_or_else(|| panic!("id: {created}"))
        .to_string();
    let token = created["access_token"].as_str().expect("access_token").to_string();
    let from = created["wallet_addresses"]["base"]
        .as_str()
        .expect("base wallet")
        .parse()
        .unwrap();
    (id, token, from)
}

/// The audit entries of `action` naming `transfer_id`, through a process (waiting for the watcher to write a kept
/// one: up to `within`), then a look that no second one comes.
async fn entries_naming(
    client: &reqwest::Client,
    base: &str,
    agent: (&str, &str),
    action: &str,
    transfer_id: &Value,
    within: Duration,
) -> Vec<Value> {
    let deadline = Instant::now() + within;
    loop {
        let entries: Vec<Value> = audit(client, base, agent.0, agent.1)
            .await
            .into_iter()
            .filter(|e| e["action"] == action && e["detail"]["transfer_id"] == *transfer_id)
            .collect();
        if !entries.is_empty() || Instant::now() >= deadline {
            return entries;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// The one entry of `action` naming `transfer_id`, written by the restarted process's watcher (waited for), and
/// still the only one a moment later.
async fn the_one_entry(
    client: &reqwest::Client,
    server: &ServerProcess,
    agent: (&str, &str),
    action: &str,
    transfer_id: &Value,
) -> Value {
    let base = server.base_url();
    let entries = entries_naming(client, &base, agent, action, transfer_id, Duration::from_secs(15)).await;
    assert_eq!(
        entries.len(),
        1,
        "one {action} entry: {entries:#?}\nlogs:\n{}",
        server.logs()
    );
    tokio::time::sleep(Duration::from_millis(500)).await;
    let again = entries_naming(client, &base, agent, action, transfer_id, Duration::ZERO).await;
    assert_eq!(again.len(), 1, "written once: {again:#?}");
    entries[0].clone()
}

/// Stops the process gracefully (exit 0) and runs `agentd audit verify` on its database.
fn stop_and_verify(server: ServerProcess, db: &str, dir: &Path) {
    let stopped = server.terminate(Duration::from_secs(15));
    assert_eq!(stopped.status.and_then(|s| s.code()), Some(0), "{}", stopped.logs);
    audit_verifies(db, dir);
}

/// `agentd audit verify` on the database: the chain of entries verifies.
fn audit_verifies(db: &str, dir: &Path) {
    let env = [
        ("DATABASE_URL", db),
        ("ENCRYPTION_KEY", crate::helpers::ENCRYPTION_KEY),
        ("APP_ENV", "development"),
    ];
    let outcome = crate::helpers::run_subcommand(&["audit", "verify"], &env, dir, Duration::from_secs(30));
    assert!(
        outcome.status.is_some_and(|s| s.success()),
        "audit verify: {}",
        outcome.logs
    );
}

/// Issue 50 point 2: an x402 payment whose process is SIGKILLed while the paid request is with the resource, after
/// the resource settled it on chain. After the restart the payment has its `x402_payment_accepted` entry, once, and
/// the log verifies; nothing is paid again.
#[tokio::test]
async fn an_x402_payment_settled_while_its_process_is_killed_has_its_entry_once_after_the_restart() {
    use crate::helpers::paywall::{Paywall, PaywallSetup, entry_v2};
    use crate::helpers::solidity::{mint, token_balance, usdc_on_base};

    let anvil = Anvil::start(BASE_CHAIN_ID);
    let usdc = usdc_on_base(&anvil).await;
    let pay_to = fresh_address();
    let mut setup = PaywallSetup::new(
        2,
        vec![entry_v2(BASE_CHAIN_ID, usdc, 10_000, pay_to, "USD Coin", "2")],
        anvil.url(),
        BASE_CHAIN_ID,
    );
    setup.answer_after_settling = Duration::from_secs(60);
    let paywall = Paywall::start(setup).await;
    let dir = tempfile::tempdir().expect("a temporary directory");
    let db = sqlite_url(dir.path());
    let client = reqwest::Client::new();
    let mut env = server_env("127.0.0.1:0", &db, anvil.url(), false);
    env.push(("ADMIN_TOKEN".into(), ADMIN.into()));
    env.push(("X402_ALLOW_PRIVATE".into(), "true".into()));
    let server = start(&env, dir.path());
    let base = server.base_url();
    let (agent_id, token, from) = crash_agent(&client, &base).await;
    mint(&anvil, usdc, from, U256::from(1_000_000)).await;

    let fetch = tokio::spawn({
        let (client, url) = (client.clone(), format!("{base}/api/agents/{agent_id}/x402/fetch"));
        let (token, paid) = (token.clone(), paywall.url("/paid"));
        async move {
            client
                .post(url)
                .header(TOKEN_HEADER, token)
                .json(&json!({"url": paid, "max_amount": "0.05"}))
                .send()
                .await
        }
    });
    let deadline = Instant::now() + Duration::from_secs(30);
    while paywall.verified().first().and_then(|v| v.settlement).is_none() {
        assert!(
            Instant::now() < deadline,
            "the paywall never settled; logs:\n{}",
            server.logs()
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert_eq!(
        token_balance(&anvil, usdc, pay_to).await,
        U256::from(10_000),
        "settled on chain"
    );
    drop(server); // SIGKILL while the paid request is with the resource.
    assert!(fetch.await.unwrap().is_err(), "the payer died before answering");

    let server = start(&env, dir.path());
    let base = server.base_url();
    let txs = transactions(&client, &base, &agent_id, &token).await;
    assert_eq!(txs.len(), 1, "{txs:#?}");
    let accepted = the_one_entry(
        &client,
        &server,
        (&agent_id, &token),
        "x402_payment_accepted",
        &txs[0]["id"],
    )
    .await;
    assert_eq!(accepted["actor"], "agent");
    assert_eq!(accepted["detail"]["status"], "pending");
    assert_eq!(accepted["detail"]["pay_to"], pay_to.to_checksum(None), "{accepted:#?}");
    assert_eq!(paywall.paid_requests(), 1, "paid once");
    assert_eq!(token_balance(&anvil, usdc, pay_to).await, U256::from(10_000));
    stop_and_verify(server, &db, dir.path());
}

/// Issue 50 point 3: a process that dies right after storing a typed-data signature (the fault switch, before the
/// signature is handed out or its entry's round) leaves a signature the agent can read; after the restart it has
/// its `typed_data_signed` entry, once, and the log verifies.
#[tokio::test]
async fn a_typed_data_signature_stored_before_a_crash_has_its_entry_once_after_the_restart() {
    let anvil = Anvil::start(BASE_CHAIN_ID);
    let dir = tempfile::tempdir().expect("a temporary directory");
    let db = sqlite_url(dir.path());
    let client = reqwest::Client::new();
    let mut fault_env = server_env("127.0.0.1:0", &db, anvil.url(), true);
    fault_env.push(("ADMIN_TOKEN".into(), ADMIN.into()));
    let crashed = ExitingProcess::start(&as_refs(&fault_env), dir.path(), Duration::from_secs(60));
    let base = crashed.base_url();
    let (agent_id, token, from) = crash_agent(&client, &base).await;
    let policy = json!({"calls": {"rules": [{"typed_data": {"primary_type": "Mail"}, "action": "allow"}]}});
    let set = client
        .put(format!("{base}/api/agents/{agent_id}/policy"))
        .bearer_auth(ADMIN)
        .json(&policy)
        .send()
        .await
        .expect("set the policy");
    assert_eq!(set.status(), StatusCode::OK);
    let typed = json!({
        "types": {
            "EIP712Domain": [{"name": "name", "type": "string"}, {"name": "chainId", "type": "uint256"},
                {"name": "verifyingContract", "type": "address"}],
            "Mail": [{"name": "from", "type": "address"}, {"name": "contents", "type": "string"}]
        },
        "primaryType": "Mail",
        "domain": {"name": "Mail", "chainId": BASE_CHAIN_ID, "verifyingContract": fresh_address().to_string()},
        "message": {"from": from.to_string(), "contents": "hello"}
    });
    let signed = client
        .post(format!("{base}/api/agents/{agent_id}/sign-typed-data"))
        .header(TOKEN_HEADER, &token)
        .json(&json!({"chain": "base", "typed_data": typed}))
        .send()
        .await;
    assert!(signed.is_err(), "the process dies before answering: {signed:?}");
    let outcome = crashed.exit().await;
    assert_eq!(
        outcome.status.and_then(|s| s.code()),
        Some(FAULT_EXIT_CODE),
        "logs:\n{}",
        outcome.logs
    );

    let mut env = server_env("127.0.0.1:0", &db, anvil.url(), false);
    env.push(("ADMIN_TOKEN".into(), ADMIN.into()));
    let server = start(&env, dir.path());
    let base = server.base_url();
    let txs = transactions(&client, &base, &agent_id, &token).await;
    assert_eq!(txs.len(), 1, "the signature was stored: {txs:#?}");
    let read = client
        .get(format!(
            "{base}/api/agents/{agent_id}/transfers/{}",
            txs[0]["id"].as_str().unwrap()
        ))
        .header(TOKEN_HEADER, &token)
        .send()
        .await
        .unwrap();
    assert_eq!(
        read.status(),
        StatusCode::OK,
        "the agent token reads the signature back"
    );
    let signed = the_one_entry(
        &client,
        &server,
        (&agent_id, &token),
        "typed_data_signed",
        &txs[0]["id"],
    )
    .await;
    assert_eq!(signed["actor"], "agent");
    assert_eq!(signed["detail"]["primary_type"], "Mail", "{signed:#?}");
    assert_eq!(anvil.nonce(from).await, 0, "nothing was sent");
    stop_and_verify(server, &db, dir.path());
}
