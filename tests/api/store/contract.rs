//! The store's contract, checked directly on the backend the app would open: a SQLite file, or a fresh PostgreSQL
//! database when `TEST_POSTGRES_URL` is set (CI runs both). One test per promise of an aggregate trait.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use agentd::config::DatabaseKind;
use agentd::domain::agent::{Agent, Capability};
use agentd::domain::audit::{Detail, detail};
use agentd::domain::decision::Refusal;
use agentd::domain::transaction::{Action, Body, OnChain, TxState};
use agentd::store::{
    AgentUpdate, AuditEvent, Challenge, Clearance, Conversation, Message, NewAgent, NonceFill, OutflowEntry,
    OwnerChallenge, Presigned, ReissueProof, Reservation, Role, Settlement, SignedTx, Store, StoreError,
    TransferRequest,
};
use agentd::transfers::reserve_once;
use agentd::vault::EncryptedKey;
use alloy::primitives::{Address, U256};
use futures::StreamExt;
use secrecy::ExposeSecret;
use serde_json::json;
use uuid::Uuid;

use crate::helpers::{TestDatabase, test_database};

pub(crate) const CHAIN: &str = "ethereum";

/// A migrated store on a fresh database, opened as the app opens it.
pub(crate) async fn open() -> (TestDatabase, Arc<dyn Store>) {
    let db = test_database().await;
    let store = agentd::store::open(&db.config).await.expect("the store opens");
    (db, store)
}

fn wallet() -> Address {
    Address::repeat_byte(0x11)
}

/// Stores an agent with `cap` wei to spend per chain; returns it with the hash of its first token.
pub(crate) async fn stored_agent(store: &dyn Store, cap: u64) -> (Agent, String) {
    let now = agentd::domain::now();
    let agent = Agent {
        id: Uuid::new_v4(),
        name: "Keeper".into(),
        description: Some("checks the store".into()),
        chains: vec![CHAIN.into(), "base".into()],
        capabilities: vec![Capability::Read, Capability::Transact],
        spending_cap_wei: U256::from(cap),
        owner_addresses: BTreeMap::from([(CHAIN.to_string(), Address::repeat_byte(0x22))]),
        wallet_addresses: BTreeMap::new(),
        spent_wei: BTreeMap::new(),
        is_active: true,
        created_at: now,
        updated_at: now,
    };
    let token_hash = format!("hash-{}", Uuid::new_v4());
    let key = EncryptedKey {
        address: wallet(),
        ciphertext: vec![7; 48],
        nonce: vec![9; 12],
        key_version: 1,
        scheme: agentd::vault::KeyScheme::Local,
    };
    store
        .create_agent(
            &NewAgent {
                agent: agent.clone(),
                key,
                token_hash: token_hash.clone(),
            },
            &noted(agent.id, created(&agent)),
        )
        .await
        .expect("the agent is stored");
    (agent, token_hash)
}

pub(crate) fn transfer(agent: &Agent, value: u64, conversation_id: Option<Uuid>) -> TransferRequest {
    TransferRequest {
        id: Uuid::new_v4(),
        agent_id: agent.id,
        chain: CHAIN.into(),
        conversation_id,
        from: wallet(),
        to: Address::repeat_byte(0x33),
        value_wei: U256::from(value),
        reserved_wei: U256::from(value + 21_000),
        asset: "ETH".into(),
        token: None,
        clearance: Clearance::Policy,
        reads: agentd::domain::outflow::ChainReads::default(),
        body: Body::Transaction(OnChain {
            at: (),
            gas: agentd::domain::transaction::Payer::Wallet,
            gas_limit: 21_000,
            max_fee_per_gas: 1,
            action: Action::Transfer,
        }),
        check: agentd::domain::outflow::Check::Transfer,
        mandate: agentd::store::Mandate::NONE,
        owed: None,
    }
}

/// "Signs" a transfer with bytes and a hash unique to the transfer and nonce.
fn presigned(id: Uuid, nonce: Option<u64>) -> Presigned {
    let at = nonce.unwrap_or(0);
    Presigned {
        nonce,
        signed: SignedTx {
            raw: at.to_be_bytes().to_vec(),
            hash: format!("0x{}{:032x}", id.simple(), at),
        },
    }
}

/// Reserves a transfer as the send path does: the store names the nonce (writing nothing), the transfer is
/// "signed" at it outside the store, and the store decides again and records it.
pub(crate) async fn reserve(store: &dyn Store, request: &TransferRequest) -> Reservation {
    let nonce = match reserve_once(store, request, None, None)
        .await
        .expect("the reservation runs")
    {
        Reservation::Sign { nonce } => nonce,
        other => return other,
    };
    reserve_once(store, request, Some(&presigned(request.id, nonce)), None)
        .await
        .expect("the reservation runs")
}

async fn reserved_nonce(store: &dyn Store, request: &TransferRequest) -> u64 {
    match reserve(store, request).await {
        Reservation::Reserved(tx) => tx.nonce().unwrap(),
        Reservation::Refused(Refusal::CapExceeded { cap, spent }) => {
            panic!("refused under the cap: cap {cap}, spent {spent}")
        }
        other => panic!("not reserved: {other:?}"),
    }
}

async fn conversation(store: &dyn Store, agent: &Agent) -> Conversation {
    let now = agentd::domain::now();
    let conversation = Conversation {
        id: Uuid::new_v4(),
        agent_id: agent.id,
        title: "Payments".into(),
        created_at: now,
        updated_at: now,
        message_count: 0,
    };
    store
        .create_conversation(&conversation)
        .await
        .expect("the conversation is stored");
    conversation
}

pub(crate) fn confirmed(cost: u64) -> Settlement {
    Settlement {
        status: TxState::Confirmed,
        landed: None,
        block_number: Some(7),
        gas_used: Some(21_000),
        actual_cost_wei: Some(U256::from(cost)),
        counts: Vec::new(),
    }
}

/// A committed reservation must survive a power cut once its transaction is broadcast: every pooled connection
/// commits to stable storage (SQLite `synchronous=FULL`, PostgreSQL `synchronous_commit` on).
#[tokio::test]
async fn every_pooled_connection_commits_durably() {
    let (_db, store) = open().await;
    // Several at once, so the pool opens several connections and each is asked.
    let answers = futures::future::join_all((0..6).map(|_| store.durable_commits())).await;
    for answer in answers {
        assert!(answer.expect("the setting is read"), "commits are durable");
    }
}

/// Whether the tests run on PostgreSQL, where locks span instances (SQLite serves one instance per file); says so
/// when not.
fn on_postgres() -> bool {
    let set = std::env::var("TEST_POSTGRES_URL").is_ok_and(|u| !u.trim().is_empty());
    if !set {
        println!("skipped: locks span instances only on PostgreSQL (set TEST_POSTGRES_URL)");
    }
    set
}

/// Named locks hold across instances on PostgreSQL (lease rows; SQLite serves one instance per file): the watcher
/// lock one store holds is refused to a second store on the same database until the first lets it go.
#[tokio::test]
async fn a_lock_held_by_one_instance_is_refused_to_another_until_released() {
    if !on_postgres() {
        return;
    }
    let (db, first) = open().await;
    let second = agentd::store::open(&db.config).await.expect("a second instance opens");
    let held = first
        .try_lock_watcher("base")
        .await
        .unwrap()
        .expect("a free lock is taken");
    assert!(
        second.try_lock_watcher("base").await.unwrap().is_none(),
        "held elsewhere"
    );
    assert!(first.try_lock_watcher("base").await.unwrap().is_none(), "held here");
    assert!(
        second.try_lock_watcher("ethereum").await.unwrap().is_some(),
        "another name is free"
    );
    drop(held);
    // The release is a short statement of its own, after the guard is gone.
    let deadline = std::time::Instant::now() + Duration::from_secs(5);
    loop {
        if second.try_lock_watcher("base").await.unwrap().is_some() {
            break;
        }
        assert!(std::time::Instant::now() < deadline, "a released lock is free again");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// A round's send locks (`lock_senders`) are taken in order across instances: while another instance holds a name,
/// the round holds the names before it and gives back the ones after it at once (so two rounds never wait for each
/// other), and takes the rest once it is let go; dropped, the round's guard frees them all.
#[tokio::test]
async fn a_rounds_send_locks_are_taken_in_order_and_wait_only_for_the_name_held_elsewhere() {
    if !on_postgres() {
        return;
    }
    let (db, first) = open().await;
    let second: std::sync::Arc<dyn Store> = agentd::store::open(&db.config).await.expect("a second instance opens");
    let mut ids = [Uuid::new_v4(), Uuid::new_v4(), Uuid::new_v4()];
    ids.sort();
    let [a, b, c] = ids;
    let held_elsewhere = first.lock_sender(b, CHAIN).await.expect("b is free");

    let round = {
        let second = second.clone();
        tokio::spawn(async move { second.lock_senders(&[(a, CHAIN), (b, CHAIN), (c, CHAIN)]).await })
    };
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(!round.is_finished(), "the round waits for b");
    let short = Duration::from_millis(300);
    assert!(
        tokio::time::timeout(short, first.lock_sender(a, CHAIN)).await.is_err(),
        "the round holds a, the name before b"
    );
    let c_held = tokio::time::timeout(Duration::from_secs(5), first.lock_sender(c, CHAIN))
        .await
        .expect("c, after b, was given back")
        .expect("c is taken");
    drop(c_held);
    drop(held_elsewhere);
    let guard = tokio::time::timeout(Duration::from_secs(5), round)
        .await
        .expect("the round takes b once it is let go")
        .unwrap()
        .expect("every lock of the round");
    assert!(
        tokio::time::timeout(short, first.lock_sender(c, CHAIN)).await.is_err(),
        "the round holds c now"
    );
    drop(guard);
    for name in [a, b, c] {
        tokio::time::timeout(Duration::from_secs(5), first.lock_sender(name, CHAIN))
            .await
            .expect("the round's guard freed every name")
            .expect("taken");
    }
}

/// An attempt recorded while its endpoint is being deleted: the deletion takes the endpoint's row and then its
/// deliveries, so recording takes the endpoint's row first too. Before, recording moved the delivery and then the
/// endpoint, and the two transactions waited for each other until PostgreSQL aborted one (seen as a 500 on
/// `DELETE …/webhooks/{wid}` under load). Here another transaction holds the delivery's row while both start.
#[tokio::test]
async fn an_attempt_recorded_while_its_endpoint_is_deleted_waits_instead_of_deadlocking() {
    use agentd::store::webhooks::{AttemptOutcome, Webhook};
    use sqlx::Connection;
    if !on_postgres() {
        return;
    }
    let (db, store) = open().await;
    let now = chrono::Utc::now();
    let webhook = Webhook {
        id: Uuid::new_v4(),
        agent_id: None,
        url: "https://receiver.example/hook".into(),
        events: vec!["transfer.confirmed".into()],
        description: None,
        enabled: true,
        created_at: now,
        updated_at: now,
    };
    let secret = agentd::vault::SealedSecret {
        key_version: 1,
        ciphertext: vec![1; 48],
        nonce: vec![2; 12],
    };
    store.create_webhook(&webhook, &secret, None).await.expect("created");
    store.queue_webhook_test(&webhook).await.expect("queued");
    store.fan_out_webhook_events(10).await.expect("fanned out");
    let due = store
        .claim_deliveries(chrono::Utc::now(), chrono::TimeDelta::seconds(60), 10)
        .await
        .expect("claimed");
    assert_eq!(due.len(), 1, "the test event is due");

    let mut holder = sqlx::PgConnection::connect(db.config.database.url.expose_secret())
        .await
        .expect("connect to PostgreSQL");
    let mut held = holder.begin().await.expect("a transaction");
    sqlx::query("SELECT 1 FROM webhook_jobs WHERE webhook_id = $1 FOR UPDATE")
        .bind(webhook.id)
        .execute(&mut *held)
        .await
        .expect("the delivery's row is held");

    let outcome = AttemptOutcome {
        status_code: Some(200),
        error: None,
        response: None,
        duration_ms: 3,
        at: chrono::Utc::now(),
        delivered: true,
        next_at: None,
    };
    let recording = {
        let (store, done) = (store.clone(), vec![(due[0].clone(), outcome)]);
        tokio::spawn(async move { store.record_attempts(&done, chrono::TimeDelta::hours(24)).await })
    };
    tokio::time::sleep(Duration::from_millis(300)).await;
    let deleting = {
        let store = store.clone();
        tokio::spawn(async move { store.delete_webhook(webhook.id, None).await })
    };
    tokio::time::sleep(Duration::from_millis(300)).await;
    held.commit().await.expect("the holder lets go");

    let recorded = tokio::time::timeout(Duration::from_secs(10), recording)
        .await
        .expect("in time");
    let deleted = tokio::time::timeout(Duration::from_secs(10), deleting)
        .await
        .expect("in time");
    recorded
        .unwrap()
        .expect("the attempt is recorded or skipped, not aborted");
    assert!(deleted.unwrap().expect("the deletion is not aborted"), "deleted");
    assert!(store.get_webhook(webhook.id).await.unwrap().is_none());
    assert!(
        store.list_deliveries(webhook.id, None, 10).await.unwrap().is_empty(),
        "no log left of a deleted endpoint"
    );
}

#[tokio::test]
async fn an_agent_is_created_read_updated_and_deactivated() {
    let (_db, store) = open().await;
    let (agent, _) = stored_agent(store.as_ref(), 1_000_000).await;

    let read = store.get_agent(agent.id).await.unwrap();
    assert_eq!(read.name, "Keeper");
    assert_eq!(read.wallet_addresses.get(CHAIN), Some(&wallet()));
    assert_eq!(read.owner_addresses, agent.owner_addresses);
    assert_eq!(store.wallet_key(agent.id).await.unwrap().address, wallet());
    assert_eq!(store.list_agents(10, 0).await.unwrap().len(), 1);

    let update = AgentUpdate {
        name: Some("Renamed".into()),
        chains: Some(vec!["base".into()]),
        spending_cap_wei: Some(U256::from(5u64)),
        owner_addresses: Some(BTreeMap::new()),
        ..AgentUpdate::default()
    };
    let updated = store
        .update_agent(agent.id, &update, wallet(), &|_, _| None)
        .await
        .unwrap();
    assert_eq!(updated.name, "Renamed");
    assert_eq!(
        updated.description, agent.description,
        "fields not named stay as they were"
    );
    assert_eq!(updated.spending_cap_wei, U256::from(5u64));
    assert!(
        !updated.wallet_addresses.contains_key(CHAIN),
        "a dropped chain's address is not the agent's"
    );
    assert!(updated.owner_addresses.is_empty());
    assert_eq!(store.get_agent(agent.id).await.unwrap(), updated);

    assert!(
        store
            .deactivate_agent(agent.id, &noted(agent.id, Detail::AgentDeleted(detail::Nothing {})))
            .await
            .unwrap()
    );
    assert!(
        !store
            .deactivate_agent(agent.id, &noted(agent.id, Detail::AgentDeleted(detail::Nothing {})))
            .await
            .unwrap(),
        "already inactive"
    );
    assert!(!store.get_agent(agent.id).await.unwrap().is_active);
    assert!(matches!(
        store.get_agent(Uuid::new_v4()).await,
        Err(StoreError::AgentNotFound)
    ));
}

#[tokio::test]
async fn a_token_is_looked_up_and_reissued_with_either_proof_once() {
    let (_db, store) = open().await;
    let (agent, first) = stored_agent(store.as_ref(), 0).await;
    assert_eq!(store.agent_for_token(&first).await.unwrap(), Some(agent.id));
    let (_, owner) = store.get_agent_for_token(agent.id, &first).await.unwrap();
    assert_eq!(owner, Some(agent.id));

    let proof = ReissueProof::CurrentToken { token_hash: &first };
    assert!(
        store
            .reissue_token(agent.id, proof, "second", &noted(agent.id, reissued()))
            .await
            .unwrap()
    );
    assert_eq!(
        store.agent_for_token(&first).await.unwrap(),
        None,
        "the old token is revoked"
    );
    assert_eq!(store.agent_for_token("second").await.unwrap(), Some(agent.id));
    let stale = ReissueProof::CurrentToken { token_hash: &first };
    assert!(
        !store
            .reissue_token(agent.id, stale, "never", &noted(agent.id, reissued()))
            .await
            .unwrap()
    );

    let challenge = Challenge {
        nonce: format!("nonce-{}", Uuid::new_v4()),
        agent_id: agent.id,
        message: "sign this".into(),
        expires_at: agentd::domain::now() + chrono::Duration::minutes(5),
        used: false,
    };
    store.insert_challenge(&challenge).await.unwrap();
    let proof = ReissueProof::Challenge {
        nonce: &challenge.nonce,
    };
    assert!(
        store
            .reissue_token(agent.id, proof, "third", &noted(agent.id, reissued()))
            .await
            .unwrap()
    );
    assert!(store.get_challenge(&challenge.nonce).await.unwrap().unwrap().used);
    assert_eq!(store.agent_for_token("second").await.unwrap(), None);
    assert_eq!(store.agent_for_token("third").await.unwrap(), Some(agent.id));

    let used = ReissueProof::Challenge {
        nonce: &challenge.nonce,
    };
    assert!(
        !store
            .reissue_token(agent.id, used, "fourth", &noted(agent.id, reissued()))
            .await
            .unwrap(),
        "a used challenge is refused"
    );
    assert_eq!(store.agent_for_token("fourth").await.unwrap(), None);
    assert_eq!(store.agent_for_token("third").await.unwrap(), Some(agent.id));
}

#[tokio::test]
async fn challenges_long_expired_are_purged_when_new_ones_are_stored() {
    let (_db, store) = open().await;
    let (agent, _) = stored_agent(store.as_ref(), 0).await;
    let now = agentd::domain::now();
    let challenge = |expires_at| Challenge {
        nonce: format!("nonce-{}", Uuid::new_v4()),
        agent_id: agent.id,
        message: "sign this".into(),
        expires_at,
        used: false,
    };
    let owner_challenge = |expires_at| OwnerChallenge {
        nonce: format!("owner-{}", Uuid::new_v4()),
        agent_id: agent.id,
        chain: CHAIN.into(),
        address: Address::repeat_byte(0x22),
        message: "sign in".into(),
        expires_at,
        used: false,
    };
    let (old, recent) = (
        challenge(now - chrono::Duration::hours(2)),
        challenge(now - chrono::Duration::minutes(1)),
    );
    let (old_owner, recent_owner) = (
        owner_challenge(now - chrono::Duration::hours(2)),
        owner_challenge(now - chrono::Duration::minutes(1)),
    );
    for c in [&old, &recent] {
        store.insert_challenge(c).await.unwrap();
    }
    for c in [&old_owner, &recent_owner] {
        store.insert_owner_challenge(c).await.unwrap();
    }

    let fresh = challenge(now + chrono::Duration::minutes(5));
    store.insert_challenge(&fresh).await.unwrap();
    let fresh_owner = owner_challenge(now + chrono::Duration::minutes(5));
    store.insert_owner_challenge(&fresh_owner).await.unwrap();

    assert!(store.get_challenge(&old.nonce).await.unwrap().is_none(), "purged");
    assert!(
        store.get_challenge(&recent.nonce).await.unwrap().is_some(),
        "just expired: kept"
    );
    assert!(store.get_challenge(&fresh.nonce).await.unwrap().is_some());
    assert!(
        store.get_owner_challenge(&old_owner.nonce).await.unwrap().is_none(),
        "purged"
    );
    assert!(store.get_owner_challenge(&recent_owner.nonce).await.unwrap().is_some());
    assert!(store.get_owner_challenge(&fresh_owner.nonce).await.unwrap().is_some());
}

#[tokio::test]
async fn messages_come_back_in_order_and_are_counted() {
    let (_db, store) = open().await;
    let (agent, _) = stored_agent(store.as_ref(), 0).await;
    let conversation = conversation(store.as_ref(), &agent).await;
    let start = agentd::domain::now();
    for (i, role) in [Role::User, Role::Assistant, Role::User].into_iter().enumerate() {
        let message = Message {
            id: Uuid::new_v4(),
            conversation_id: conversation.id,
            role,
            content: format!("message {i}"),
            chain_calls: json!([]),
            tokens_used: i as i64,
            created_at: start + chrono::Duration::seconds(i as i64),
        };
        store.insert_message(&message).await.unwrap();
    }

    let read = store.get_conversation(conversation.id).await.unwrap();
    assert_eq!(read.message_count, 3);
    assert_eq!(read.updated_at, start + chrono::Duration::seconds(2));
    let recent = store.recent_messages(conversation.id, 2).await.unwrap();
    let contents: Vec<_> = recent.iter().map(|m| m.content.as_str()).collect();
    assert_eq!(contents, ["message 1", "message 2"], "the newest two, oldest first");
    assert_eq!(
        store.list_conversations(agent.id, None, 100).await.unwrap(),
        Some(vec![read])
    );

    assert!(store.delete_conversation(conversation.id).await.unwrap());
    assert!(!store.delete_conversation(conversation.id).await.unwrap());
    assert!(matches!(
        store.get_conversation(conversation.id).await,
        Err(StoreError::ConversationNotFound)
    ));
}

#[tokio::test]
async fn a_reservation_under_the_cap_is_kept_and_one_over_it_refused() {
    let (_db, store) = open().await;
    let (agent, _) = stored_agent(store.as_ref(), 100_000).await;
    let first = transfer(&agent, 50_000, None);
    assert!(matches!(
        reserve(store.as_ref(), &first).await,
        Reservation::Reserved(_)
    ));
    assert_eq!(store.spent_by_chain(agent.id).await.unwrap()[CHAIN], first.reserved_wei);

    match reserve(store.as_ref(), &transfer(&agent, 50_000, None)).await {
        Reservation::Refused(Refusal::CapExceeded { cap, spent }) => {
            assert_eq!(cap, U256::from(100_000u64));
            assert_eq!(spent, first.reserved_wei);
        }
        other => panic!("a reservation over the cap was not refused for the cap: {other:?}"),
    }
    let stored = store.list_transactions(agent.id, Some(CHAIN), 10).await.unwrap();
    assert_eq!(stored.len(), 1, "nothing is stored for the refused transfer");
    assert_eq!(stored[0].status, TxState::Signed);
}

#[tokio::test]
async fn a_reservation_is_signed_outside_the_store_and_kept_only_at_the_nonce_it_was_signed_for() {
    let (_db, store) = open().await;
    let (agent, _) = stored_agent(store.as_ref(), 10_000_000).await;
    let request = transfer(&agent, 1_000, None);

    let asked_nonce = |presigned: Option<Presigned>| {
        let (store, request) = (store.as_ref(), &request);
        async move {
            match reserve_once(store, request, presigned.as_ref(), None).await.unwrap() {
                Reservation::Sign { nonce } => nonce,
                other => panic!("the store did not ask for a signature: {other:?}"),
            }
        }
    };
    let rows = || async { store.list_transactions(agent.id, Some(CHAIN), 10).await.unwrap().len() };

    // Asked without a signature, the store names the nonce and writes nothing: no row, no spending, no nonce.
    assert_eq!(asked_nonce(None).await, Some(0));
    assert_eq!(rows().await, 0);
    assert!(
        store
            .spent_by_chain(agent.id)
            .await
            .unwrap()
            .get(CHAIN)
            .is_none_or(U256::is_zero)
    );
    assert_eq!(store.next_nonce(agent.id, CHAIN).await.unwrap(), None);

    // A signature made at another nonce is not stored: the store names the nonce again.
    assert_eq!(asked_nonce(Some(presigned(request.id, Some(5)))).await, Some(0));
    assert_eq!(rows().await, 0);

    let signed = presigned(request.id, Some(0));
    match reserve_once(store.as_ref(), &request, Some(&signed), None)
        .await
        .unwrap()
    {
        Reservation::Reserved(tx) => {
            assert_eq!(tx.nonce(), Some(0));
            assert_eq!(tx.raw_tx, signed.signed.raw);
            assert_eq!(tx.tx_hash(), Some(signed.signed.hash.as_str()));
        }
        other => panic!("a signature at the named nonce was not stored: {other:?}"),
    }
    assert_eq!(store.next_nonce(agent.id, CHAIN).await.unwrap(), Some(1));

    // Over the cap, a signature brought along is not stored either: the decision is taken again.
    let over = transfer(&agent, 20_000_000, None);
    assert!(matches!(
        reserve_once(store.as_ref(), &over, Some(&presigned(over.id, Some(1))), None)
            .await
            .unwrap(),
        Reservation::Refused(Refusal::CapExceeded { .. })
    ));
    assert_eq!(rows().await, 1);
}

#[tokio::test]
async fn nonces_are_allocated_in_sequence_and_a_discard_gives_the_last_back() {
    let (_db, store) = open().await;
    let (agent, _) = stored_agent(store.as_ref(), 10_000_000).await;
    assert_eq!(store.next_nonce(agent.id, CHAIN).await.unwrap(), None);

    let mut nonces = Vec::new();
    let mut last = None;
    for _ in 0..3 {
        let request = transfer(&agent, 1, None);
        nonces.push(reserved_nonce(store.as_ref(), &request).await);
        last = Some(request);
    }
    assert_eq!(nonces, [0, 1, 2]);
    assert_eq!(store.next_nonce(agent.id, CHAIN).await.unwrap(), Some(3));

    let last = last.expect("three transfers were reserved");
    let _guard = store.lock_sender(agent.id, CHAIN).await.unwrap();
    store.discard_transfer(last.id, None).await.unwrap();
    assert_eq!(
        store.next_nonce(agent.id, CHAIN).await.unwrap(),
        Some(2),
        "the nonce is given back"
    );
    assert_eq!(
        store.spent_by_chain(agent.id).await.unwrap()[CHAIN],
        U256::from(2 * 21_001u64)
    );
    assert_eq!(store.open_transactions(CHAIN).await.unwrap().len(), 2);

    let next = transfer(&agent, 1, None);
    assert_eq!(
        reserved_nonce(store.as_ref(), &next).await,
        2,
        "the given-back nonce is used again"
    );
    store.discard_transfer(next.id, Some(9)).await.unwrap();
    assert_eq!(
        store.next_nonce(agent.id, CHAIN).await.unwrap(),
        Some(9),
        "resynced to the node's count"
    );
}

/// Fills the nonce of `gap` with `fill`, "signed" at the gap's nonce as `reserve` signs.
async fn fill(store: &dyn Store, gap: Uuid, fill: &TransferRequest) -> NonceFill {
    let nonce = store
        .get_transaction(fill.agent_id, gap)
        .await
        .unwrap()
        .map(|tx| tx.nonce().unwrap());
    store
        .fill_nonce(gap, fill, &presigned(fill.id, nonce))
        .await
        .expect("the fill runs")
}

#[tokio::test]
async fn a_nonce_is_filled_once_with_its_fee_held_out_of_the_transfer() {
    let (_db, store) = open().await;
    let (agent, _) = stored_agent(store.as_ref(), 200_000).await;
    let gap = transfer(&agent, 100_000, None);
    let later = transfer(&agent, 1, None);
    assert_eq!(reserved_nonce(store.as_ref(), &gap).await, 0);
    assert_eq!(reserved_nonce(store.as_ref(), &later).await, 1);
    let before = store.spent_by_chain(agent.id).await.unwrap()[CHAIN];

    let self_send = TransferRequest {
        to: wallet(),
        value_wei: U256::ZERO,
        reserved_wei: U256::from(21_000u64),
        ..transfer(&agent, 0, None)
    };
    let NonceFill::Stored(stored) = fill(store.as_ref(), gap.id, &self_send).await else {
        panic!("the fill is stored");
    };
    assert_eq!(stored.nonce(), Some(0), "the fill takes the transfer's nonce");
    assert_eq!(
        store.spent_by_chain(agent.id).await.unwrap()[CHAIN],
        before,
        "its fee comes out of the transfer's reservation"
    );
    assert_eq!(
        store.next_nonce(agent.id, CHAIN).await.unwrap(),
        Some(2),
        "no nonce is allocated"
    );
    let open: Vec<u64> = store
        .open_transactions(CHAIN)
        .await
        .unwrap()
        .iter()
        .map(|tx| tx.nonce().unwrap())
        .collect();
    assert_eq!(open, [0, 0, 1], "the transfer and its fill both stay open");

    let again = TransferRequest {
        id: Uuid::new_v4(),
        ..self_send.clone()
    };
    assert!(
        matches!(fill(store.as_ref(), gap.id, &again).await, NonceFill::NotNeeded),
        "filled once"
    );
    assert!(
        matches!(fill(store.as_ref(), stored.id, &again).await, NonceFill::NotNeeded),
        "a fill is not filled in turn"
    );

    // The fill lands, the transfer is dropped: only the fill's fee counts for nonce 0.
    store
        .settle_transaction(stored.id, &confirmed(20_000), json!({}), None)
        .await
        .unwrap();
    let dropped = Settlement {
        status: TxState::Dropped,
        landed: None,
        block_number: None,
        gas_used: None,
        actual_cost_wei: Some(U256::ZERO),
        counts: Vec::new(),
    };
    store
        .settle_transaction(gap.id, &dropped, json!({}), None)
        .await
        .unwrap();
    assert_eq!(
        store.spent_by_chain(agent.id).await.unwrap()[CHAIN],
        U256::from(20_000u64) + later.reserved_wei
    );
    let late = TransferRequest {
        id: Uuid::new_v4(),
        ..self_send
    };
    assert!(
        matches!(fill(store.as_ref(), gap.id, &late).await, NonceFill::NotNeeded),
        "a settled one is not filled"
    );
}

#[tokio::test]
async fn a_transfer_settles_once_with_its_event_and_message() {
    let (_db, store) = open().await;
    let (agent, _) = stored_agent(store.as_ref(), 10_000_000).await;
    let conversation = conversation(store.as_ref(), &agent).await;
    let request = transfer(&agent, 1_000, Some(conversation.id));
    reserve(store.as_ref(), &request).await;
    store.mark_broadcast(request.id).await.unwrap();
    assert_eq!(
        store.open_transactions(CHAIN).await.unwrap()[0].status,
        TxState::Pending
    );

    let cost = confirmed(22_000);
    let message = Message {
        id: Uuid::new_v4(),
        conversation_id: conversation.id,
        role: Role::Assistant,
        content: "confirmed".into(),
        chain_calls: json!([]),
        tokens_used: 0,
        created_at: agentd::domain::now(),
    };
    let settled = store
        .settle_transaction(request.id, &cost, json!({"n": 1}), Some(&message))
        .await
        .unwrap()
        .expect("an open transfer settles");
    assert_eq!(settled.conversation_id, Some(conversation.id));
    assert_eq!(settled.payload, json!({"n": 1}));
    let again = store.settle_transaction(request.id, &cost, json!({"n": 2}), None);
    assert!(
        again.await.unwrap().is_none(),
        "a settled transfer does not settle twice"
    );

    assert!(store.open_transactions(CHAIN).await.unwrap().is_empty());
    assert_eq!(
        store.spent_by_chain(agent.id).await.unwrap()[CHAIN],
        U256::from(22_000u64)
    );
    assert_eq!(store.get_conversation(conversation.id).await.unwrap().message_count, 1);
    assert_eq!(store.event_by_id(settled.id).await.unwrap(), Some(settled));
    let counts = store.count_transactions_by_status().await.unwrap();
    assert_eq!(counts, vec![("confirmed".to_string(), 1)]);
}

#[tokio::test]
async fn events_after_an_id_come_oldest_first() {
    let (_db, store) = open().await;
    let (agent, _) = stored_agent(store.as_ref(), 10_000_000).await;
    let conversation = conversation(store.as_ref(), &agent).await;
    let mut ids = Vec::new();
    for n in 0..3 {
        let request = transfer(&agent, 1, Some(conversation.id));
        reserve(store.as_ref(), &request).await;
        let settled = store
            .settle_transaction(request.id, &confirmed(1), json!({"n": n}), None)
            .await;
        ids.push(settled.unwrap().expect("settled").id);
    }
    assert!(ids.windows(2).all(|w| w[0] < w[1]), "ids increase: {ids:?}");

    let all = store.events_after(conversation.id, 0, 10).await.unwrap();
    assert_eq!(all.iter().map(|e| e.id).collect::<Vec<_>>(), ids);
    assert_eq!(all[0].payload, json!({"n": 0}));
    let later = store.events_after(conversation.id, ids[0], 1).await.unwrap();
    assert_eq!(later.iter().map(|e| e.id).collect::<Vec<_>>(), [ids[1]]);
    assert!(store.events_after(Uuid::new_v4(), 0, 10).await.unwrap().is_empty());
}

#[tokio::test]
async fn the_event_feed_delivers_a_settled_event() {
    let (_db, store) = open().await;
    let (agent, _) = stored_agent(store.as_ref(), 10_000_000).await;
    let mut feed = store.event_feed().await;
    let request = transfer(&agent, 1, None);
    reserve(store.as_ref(), &request).await;
    let settled = store
        .settle_transaction(request.id, &confirmed(1), json!({}), None)
        .await;
    let settled = settled.unwrap().expect("settled");

    let delivered = tokio::time::timeout(Duration::from_secs(10), feed.next()).await;
    assert_eq!(delivered.expect("the feed delivers in time"), Some(settled));
}

#[tokio::test]
async fn the_event_feed_of_another_instance_delivers_a_settled_event_on_postgres() {
    let (db, store) = open().await;
    if matches!(db.config.database.kind, DatabaseKind::Sqlite(_)) {
        // One instance serves a SQLite file: there is no other instance to tell.
        return;
    }
    let other = agentd::store::open(&db.config)
        .await
        .expect("a second instance opens the store");
    let mut feed = other.event_feed().await;
    let (agent, _) = stored_agent(store.as_ref(), 10_000_000).await;
    let request = transfer(&agent, 1, None);
    reserve(store.as_ref(), &request).await;
    let settled = store
        .settle_transaction(request.id, &confirmed(1), json!({}), None)
        .await;
    let settled = settled.unwrap().expect("settled");

    let delivered = tokio::time::timeout(Duration::from_secs(10), feed.next()).await;
    assert_eq!(delivered.expect("the other instance hears in time"), Some(settled));
}

#[tokio::test]
async fn an_audit_event_is_stored() {
    let (_db, store) = open().await;
    let (agent, _) = stored_agent(store.as_ref(), 0).await;
    let event = AuditEvent::new(agent.id, agentd::domain::audit::Actor::Owner, reissued());
    store.insert_audit(&event).await.expect("the audit event is stored");
    let unknown = AuditEvent {
        agent_id: Uuid::new_v4(),
        ..event
    };
    assert!(
        store.insert_audit(&unknown).await.is_err(),
        "audit rows belong to a stored agent"
    );
}

/// A transfer that lands while still `signed` (its `pending` mark rides in a lazy round, or its sender died before
/// the mark) is marked with its settlement: its `transfer.pending` event goes out beside `transfer.confirmed`.
#[tokio::test]
async fn a_transfer_settled_while_still_signed_sends_its_pending_event_too() {
    use agentd::store::webhooks::Webhook;
    let (_db, store) = open().await;
    let (agent, _) = stored_agent(store.as_ref(), 10_000_000).await;
    let now = chrono::Utc::now();
    let webhook = Webhook {
        id: Uuid::new_v4(),
        agent_id: Some(agent.id),
        url: "https://receiver.example/hook".into(),
        events: vec!["transfer.pending".into(), "transfer.confirmed".into()],
        description: None,
        enabled: true,
        created_at: now,
        updated_at: now,
    };
    let secret = agentd::vault::SealedSecret {
        key_version: 1,
        ciphertext: vec![1; 48],
        nonce: vec![2; 12],
    };
    store.create_webhook(&webhook, &secret, None).await.expect("created");
    let request = transfer(&agent, 1_000, None);
    reserve(store.as_ref(), &request).await;
    store
        .settle_transaction(request.id, &confirmed(21_000), json!({"status": "confirmed"}), None)
        .await
        .expect("settled");

    store.fan_out_webhook_events(10).await.expect("fanned out");
    let due = store
        .claim_deliveries(chrono::Utc::now(), chrono::TimeDelta::seconds(60), 10)
        .await
        .expect("claimed");
    let mut types: Vec<&str> = due.iter().map(|d| d.ty.as_str()).collect();
    types.sort();
    assert_eq!(types, ["transfer.confirmed", "transfer.pending"], "both events");
    assert!(due.iter().all(|d| d.body.contains(&request.id.to_string())));
}

/// A transfer's entry kept with its reservation (`owed`) is written once, whoever comes first: the round's own
/// entry (the kept one dropped, `write_owed` then finds nothing), or `write_owed` after a crash (the round's own
/// entry, late, is then left out); a refusal's entry is written whatever was kept.
#[tokio::test]
async fn a_kept_audit_entry_is_written_once_by_whoever_comes_first() {
    let (_db, store) = open().await;
    let (agent, _) = stored_agent(store.as_ref(), 10_000_000).await;
    let owed = agentd::domain::audit::OwedEntry::Transfer {
        actor: agentd::domain::audit::Actor::Agent,
        asked: detail::AssetAsked {
            chain: CHAIN.into(),
            asset: "ETH".into(),
            to: "0x0000000000000000000000000000000000000001".into(),
            amount: Some("0.001".into()),
            delegation_id: None,
        },
    };
    let kept = |value| TransferRequest {
        owed: Some(owed.clone()),
        ..transfer(&agent, value, None)
    };
    let (first, second) = (kept(1_000), kept(2_000));
    reserve(store.as_ref(), &first).await;
    reserve(store.as_ref(), &second).await;
    let own = |id| OutflowEntry {
        accepted: Some(id),
        owes: Some(id),
        event: noted(agent.id, accepted(id)),
    };
    let accepted_ids = |entries: Vec<agentd::domain::audit::AuditEntry>| -> Vec<(String, String)> {
        entries
            .into_iter()
            .filter(|e| e.action == "transfer_accepted")
            .map(|e| {
                let detail: serde_json::Value = serde_json::from_str(&e.detail).unwrap();
                (detail["transfer_id"].as_str().unwrap().to_string(), e.actor)
            })
            .collect()
    };

    // The first's own entry comes in time: nothing is kept for the watcher.
    store.record_outflows(&[&own(first.id)]).await.unwrap();
    let later = chrono::Utc::now() + chrono::Duration::seconds(60);
    // The second's never came (a crash): the watcher writes the kept one, as the agent's, once.
    assert_eq!(store.write_owed(CHAIN, later).await.unwrap(), 1);
    assert_eq!(store.write_owed(CHAIN, later).await.unwrap(), 0, "written once");
    // Its own entry, late, is left out; a refusal's is written.
    let refusal = OutflowEntry {
        accepted: None,
        owes: None,
        event: noted(agent.id, reissued()),
    };
    store.record_outflows(&[&own(second.id), &refusal]).await.unwrap();

    let entries = store.list_audit(agent.id, None, 50).await.unwrap();
    assert_eq!(entries[0].action, "token_reissued", "the refusal's stand-in is written");
    let mut ids = accepted_ids(entries);
    ids.reverse();
    assert_eq!(
        ids,
        vec![
            (first.id.to_string(), "admin".to_string()),
            (second.id.to_string(), "agent".to_string())
        ],
        "one entry each: the first's own, the second's kept"
    );
    let stored = store
        .get_transaction(agent.id, second.id)
        .await
        .unwrap()
        .expect("stored");
    assert_eq!(stored.status.as_str(), "pending", "the late entry's mark still applies");
    let kept = store.list_audit(agent.id, None, 50).await.unwrap();
    let kept = kept.iter().find(|e| e.actor == "agent").expect("the kept entry");
    let detail: serde_json::Value = serde_json::from_str(&kept.detail).unwrap();
    assert_eq!(detail["tx_hash"].as_str(), stored.tx_hash(), "with the hash as stored");
    assert_eq!(detail["status"], "pending");
    assert_eq!(detail["amount"], "0.001");
}

/// A round's records are written together (a few statements whatever their number): every entry is chained after
/// the one before it under the audit key, the head names the last, the next append goes on from it, and each
/// accepted transfer is `pending`.
#[tokio::test]
async fn a_rounds_entries_written_together_chain_one_after_the_other() {
    let (_db, store) = open().await;
    let key = agentd::domain::audit::AuditKey::new([7; 32], 1);
    store.use_audit_key(key.clone());
    let (agent, _) = stored_agent(store.as_ref(), 10_000_000).await;
    let requests: Vec<TransferRequest> = (0..3).map(|i| transfer(&agent, 1_000 + i, None)).collect();
    for request in &requests {
        reserve(store.as_ref(), request).await;
    }
    let before = agentd::store::verify_audit(store.as_ref(), Some(key.clone()))
        .await
        .unwrap()
        .expect("the chain holds before");
    let mut records: Vec<OutflowEntry> = requests
        .iter()
        .map(|r| OutflowEntry {
            accepted: Some(r.id),
            owes: None,
            event: noted(agent.id, accepted(r.id)),
        })
        .collect();
    let refused = OutflowEntry {
        accepted: None,
        owes: None,
        event: noted(agent.id, reissued()),
    };
    records.insert(1, refused);
    store
        .record_outflows(&records.iter().collect::<Vec<_>>())
        .await
        .expect("the records are written");
    store
        .insert_audit(&noted(agent.id, reissued()))
        .await
        .expect("the next entry is appended");

    let checked = agentd::store::verify_audit(store.as_ref(), Some(key)).await.unwrap();
    assert_eq!(
        checked,
        Ok(before + 5),
        "the chain holds, from the first entry to the head"
    );
    let mut entries = store.list_audit(agent.id, None, 5).await.unwrap();
    entries.reverse();
    let actions: Vec<&str> = entries.iter().map(|e| e.action.as_str()).collect();
    assert_eq!(
        actions,
        [
            "transfer_accepted",
            "token_reissued",
            "transfer_accepted",
            "transfer_accepted",
            "token_reissued"
        ],
        "in the order they were given"
    );
    let (head_id, head_hash) = store.audit_head().await.unwrap();
    assert_eq!((head_id, head_hash.as_str()), (entries[4].id, entries[4].hash.as_str()));
    for request in &requests {
        let stored = store
            .get_transaction(agent.id, request.id)
            .await
            .unwrap()
            .expect("stored");
        assert_eq!(stored.status.as_str(), "pending", "{stored:?}");
    }
}

#[tokio::test]
async fn an_approved_transfer_the_node_refused_waits_again_holding_its_reservation() {
    let (_db, store) = open().await;
    let (agent, _) = stored_agent(store.as_ref(), 10_000_000).await;
    let policy = agentd::domain::policy::Policy {
        approve_new_recipients: true,
        ..Default::default()
    };
    store
        .put_policy(
            agent.id,
            &policy,
            &noted(
                agent.id,
                Detail::PolicyUpdated(detail::PolicyUpdated { policy: json!({}) }),
            ),
        )
        .await
        .unwrap();
    let request = transfer(&agent, 1_000, None);
    let Reservation::AwaitingApproval(held) = reserve(store.as_ref(), &request).await else {
        panic!("a new recipient waits for approval");
    };
    assert_eq!(
        store.spent_by_chain(agent.id).await.unwrap()[CHAIN],
        request.reserved_wei
    );

    // Approved: the sent record replaces the waiting one's reservation; then the node refuses and it is discarded.
    let approved = TransferRequest {
        clearance: Clearance::Approval {
            by: agentd::domain::audit::Actor::Owner,
        },
        reads: agentd::domain::outflow::ChainReads {
            node_nonce: request.reads.node_nonce,
            ..Default::default()
        },
        ..request.clone()
    };
    assert!(matches!(
        reserve(store.as_ref(), &approved).await,
        Reservation::Reserved(_)
    ));
    assert_eq!(
        store.spent_by_chain(agent.id).await.unwrap()[CHAIN],
        request.reserved_wei
    );
    store.discard_transfer(held.id, None).await.unwrap();
    assert_eq!(store.spent_by_chain(agent.id).await.unwrap()[CHAIN], U256::ZERO);

    assert!(store.reopen_approval(held.id).await.unwrap());
    let waiting = store.waiting_approvals(agent.id).await.unwrap();
    assert_eq!(waiting.len(), 1, "it waits again");
    assert_eq!(waiting[0].id, held.id);
    assert_eq!(
        store.spent_by_chain(agent.id).await.unwrap()[CHAIN],
        request.reserved_wei,
        "holding its reservation again"
    );
    assert!(
        !store.reopen_approval(held.id).await.unwrap(),
        "only an approved transfer reopens"
    );
    assert_eq!(
        store.next_nonce(agent.id, CHAIN).await.unwrap(),
        Some(0),
        "its nonce was given back"
    );
}

/// An audit entry for a change made straight on the store.
/// How many other sessions of this PostgreSQL database wait for a lock.
async fn waiting_for_locks(pool: &sqlx::PgPool) -> i64 {
    let (waiting,): (i64,) = sqlx::query_as(
        "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() AND wait_event_type = 'Lock' \
         AND pid <> pg_backend_pid()",
    )
    .fetch_one(pool)
    .await
    .expect("pg_stat_activity");
    waiting
}

/// Waits until `count` sessions wait for a lock.
async fn until_waiting(pool: &sqlx::PgPool, count: i64) {
    for _ in 0..200 {
        if waiting_for_locks(pool).await >= count {
            return;
        }
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
    panic!("{count} sessions never waited for a lock");
}

/// PostgreSQL: a settlement holds its agent's lock while it waits for the transfer's row, which a broadcast's
/// audited mark holds while it appends to the audit log, whose entries reference the agent. The agent's lock must
/// not stop that reference (only writers of the agent wait for each other), else the two wait for each other in a
/// circle and PostgreSQL aborts one of them ("deadlock detected"): a send answered `internal_error` that way under
/// load. The audit head is held here so that each of them stops where the circle would close.
#[tokio::test]
async fn a_settlement_and_an_audited_broadcast_mark_of_one_transfer_never_deadlock() {
    use secrecy::ExposeSecret;
    let (db, store) = open().await;
    if matches!(db.config.database.kind, DatabaseKind::Sqlite(_)) {
        // SQLite has one writer at a time: nothing waits in a circle.
        return;
    }
    let (agent, _) = stored_agent(store.as_ref(), 10_000_000).await;
    let request = transfer(&agent, 1_000, None);
    reserve(store.as_ref(), &request).await;
    let url = db.config.database.url.expose_secret().to_string();
    let pool = sqlx::PgPool::connect(&url).await.expect("connect to PostgreSQL");

    let mut audit_writer = pool.begin().await.unwrap();
    sqlx::query("SELECT 1 FROM audit_head WHERE id = 1 FOR UPDATE")
        .execute(&mut *audit_writer)
        .await
        .unwrap();
    let marking = tokio::spawn({
        let store = store.clone();
        let entry = OutflowEntry {
            accepted: Some(request.id),
            owes: None,
            event: noted(agent.id, accepted(request.id)),
        };
        async move { store.record_outflows(&[&entry]).await }
    });
    // The mark holds the transfer's row and waits for the audit head.
    until_waiting(&pool, 1).await;
    let settling = tokio::spawn({
        let store = store.clone();
        async move {
            store
                .settle_transaction(request.id, &confirmed(21_000), json!({}), None)
                .await
        }
    });
    // The settlement holds the agent's lock and waits for the transfer's row.
    until_waiting(&pool, 2).await;
    audit_writer.commit().await.unwrap();

    let marked = tokio::time::timeout(Duration::from_secs(10), marking).await;
    marked.expect("the mark ends").unwrap().expect("the mark is stored");
    let settled = tokio::time::timeout(Duration::from_secs(10), settling).await;
    let settled = settled.expect("the settlement ends").unwrap();
    assert!(
        settled.expect("the settlement is stored").is_some(),
        "the transfer settled"
    );
    assert!(store.open_transactions(CHAIN).await.unwrap().is_empty());
    let audit = store.list_audit(agent.id, None, 10).await.unwrap();
    assert!(audit.iter().any(|e| e.action == "transfer_accepted"), "{audit:?}");
}

fn created(agent: &Agent) -> Detail {
    Detail::AgentCreated(detail::AgentCreated {
        name: agent.name.clone(),
        chains: agent.chains.clone(),
        capabilities: vec![],
        spending_cap: "0".into(),
        owner_addresses: Default::default(),
    })
}

fn reissued() -> Detail {
    Detail::TokenReissued(detail::TokenReissued {
        proof: detail::Proof::CurrentToken,
        client: "127.0.0.1".into(),
    })
}

fn accepted(transfer_id: Uuid) -> Detail {
    Detail::TransferAccepted(detail::TransferAccepted {
        asked: detail::Asked::Asset(detail::AssetAsked {
            chain: CHAIN.into(),
            asset: "ETH".into(),
            to: "0x0000000000000000000000000000000000000001".into(),
            amount: Some("1".into()),
            delegation_id: None,
        }),
        accepted: detail::Accepted {
            transfer_id,
            status: "pending".into(),
            tx_hash: None,
        },
    })
}

/// An entry for a change whose detail the test does not look at.
fn noted(agent_id: Uuid, detail: Detail) -> AuditEvent {
    AuditEvent::new(agent_id, agentd::domain::audit::Actor::Admin, detail)
}
