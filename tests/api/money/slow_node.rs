//! Senders waiting on a slow node hold no database connection: many agents sending at once through a JSON-RPC proxy
//! that answers each call late keep `/health` answering 200, and every send lands on the node (issue 10, item 4:
//! the send lock once pinned a pooled PostgreSQL connection across its RPC calls).

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use alloy::primitives::Address;
use futures::future::join_all;
use reqwest::StatusCode;
use serde_json::json;

use crate::anvil::Anvil;
use crate::helpers::chain::{BASE_CHAIN_ID, CENT_ETH, fresh_address, funded_agent, wallet, wei};
use crate::helpers::slow_rpc::SlowRpc;
use crate::helpers::spawn_app_with;
use crate::money::transfers_api::post_transfer;

/// More agents than the PostgreSQL pool has connections (16).
const AGENTS: usize = 32;
/// How late the proxy answers each call.
const NODE_DELAY: Duration = Duration::from_millis(1500);

/// Asks `/health` until `done`; every answer's status (or the failure to get one).
async fn watch_health(client: reqwest::Client, url: String, done: Arc<AtomicBool>) -> Vec<Result<StatusCode, String>> {
    let mut answers = Vec::new();
    while !done.load(Ordering::SeqCst) {
        let answer = client
            .get(&url)
            .send()
            .await
            .map(|r| r.status())
            .map_err(|e| e.to_string());
        answers.push(answer);
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    answers
}

#[tokio::test]
async fn many_agents_sending_through_a_slow_node_keep_health_up_and_lose_no_send() {
    let anvil = Anvil::start(BASE_CHAIN_ID);
    let proxy = SlowRpc::start(anvil.url(), NODE_DELAY).await;
    let app = spawn_app_with(&[("RPC_URL_BASE", proxy.url()), ("WATCHER_INTERVAL_MS", "50")]).await;
    let mut agents = Vec::with_capacity(AGENTS);
    for _ in 0..AGENTS {
        agents.push(funded_agent(&app, &anvil, Some(1.0)).await);
    }
    let recipients: Vec<Address> = (0..AGENTS).map(|_| fresh_address()).collect();

    let done = Arc::new(AtomicBool::new(false));
    let health = tokio::spawn(watch_health(app.client.clone(), app.url("/health"), done.clone()));
    let sends = agents.iter().zip(&recipients).map(|(agent, to)| {
        post_transfer(
            &app,
            agent,
            json!({"chain": "base", "to": to.to_string(), "amount": "0.01"}),
        )
    });
    let answers = join_all(sends).await;
    done.store(true, Ordering::SeqCst);
    let health = health.await.expect("the health watcher");

    println!("{} health answers during {AGENTS} slow sends", health.len());
    assert!(health.len() >= 3, "health was asked during the sends: {health:?}");
    for answer in &health {
        assert_eq!(answer, &Ok(StatusCode::OK), "health answers 200 throughout: {health:?}");
    }
    for (status, body) in &answers {
        assert_eq!(*status, StatusCode::CREATED, "every send is accepted: {body}");
    }
    // The node agrees: one transaction per agent, each recipient paid once.
    for (agent, to) in agents.iter().zip(&recipients) {
        assert_eq!(anvil.nonce(wallet(agent)).await, 1, "the agent's send landed");
        assert_eq!(anvil.balance(*to).await, wei(CENT_ETH), "the recipient was paid once");
    }
}
