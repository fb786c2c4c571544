//! The store's delegation contract (`DelegationStore`, §21) on the backend the app would open (SQLite, or
//! PostgreSQL with `TEST_POSTGRES_URL`): a hash registered once per chain, kept after removal, brought back by owner
//! authority only, and a revocation recorded once.

use agentd::domain::audit::{Actor, Detail, detail};
use agentd::domain::delegation::Status;
use agentd::store::AuditEvent;
use agentd::store::delegations::{DelegationRecord, Registration};
use alloy::primitives::{Address, B256};
use serde_json::json;
use uuid::Uuid;

use crate::store::contract::{open, stored_agent};

fn record(agent_id: Uuid, chain: &str, hash: B256) -> DelegationRecord {
    DelegationRecord {
        id: Uuid::new_v4(),
        agent_id,
        chain: chain.into(),
        hash,
        delegator: Address::repeat_byte(0x22),
        delegation: json!({"salt": "1"}),
        status: Status::Active,
        created_at: agentd::domain::now(),
        revoked_at: None,
    }
}

fn audit(agent_id: Uuid, detail: Detail) -> AuditEvent {
    AuditEvent::new(agent_id, Actor::Admin, detail)
}

fn added(id: Uuid) -> Detail {
    Detail::DelegationAdded(detail::DelegationAdded {
        delegation_id: id,
        chain: "base".into(),
        hash: format!("{:#x}", B256::repeat_byte(0x33)),
        delegator: "0x0000000000000000000000000000000000000001".into(),
    })
}

#[tokio::test]
async fn a_delegation_hash_is_registered_once_per_chain_and_outlives_its_removal() {
    let (_db, store) = open().await;
    let (agent, _) = stored_agent(store.as_ref(), 0).await;
    let hash = B256::repeat_byte(0x33);
    let first = record(agent.id, "base", hash);
    let added = audit(agent.id, added(first.id));
    let Registration::Added(stored) = store.add_delegation(&first, false, &added).await.unwrap() else {
        panic!("the first registration is stored");
    };
    assert_eq!((stored.id, stored.status), (first.id, Status::Active));
    // The same hash on the same chain, whoever asks: known. On another chain: another delegation.
    let again = record(agent.id, "base", hash);
    assert_eq!(
        store.add_delegation(&again, true, &added).await.unwrap(),
        Registration::Exists
    );
    let elsewhere = record(agent.id, "optimism", hash);
    assert!(matches!(
        store.add_delegation(&elsewhere, false, &added).await.unwrap(),
        Registration::Added(_)
    ));

    let removed = audit(
        agent.id,
        Detail::DelegationRemoved(detail::DelegationRemoved {
            delegation_id: first.id,
        }),
    );
    assert_eq!(
        store.remove_delegation(agent.id, first.id, &removed).await.unwrap(),
        Some(true)
    );
    assert_eq!(
        store.remove_delegation(agent.id, first.id, &removed).await.unwrap(),
        Some(false)
    );
    assert_eq!(
        store
            .remove_delegation(Uuid::new_v4(), first.id, &removed)
            .await
            .unwrap(),
        None
    );
    let got = store.get_delegation(agent.id, first.id).await.unwrap().unwrap();
    assert_eq!(got.status, Status::Removed);
    assert!(
        store.get_delegation(Uuid::new_v4(), first.id).await.unwrap().is_none(),
        "another agent's"
    );

    // Removed: the agent token cannot bring it back, owner authority can (same id, active again).
    assert_eq!(
        store.add_delegation(&again, false, &added).await.unwrap(),
        Registration::Exists
    );
    let Registration::Added(back) = store.add_delegation(&again, true, &added).await.unwrap() else {
        panic!("owner authority registers a removed delegation again");
    };
    assert_eq!((back.id, back.status), (first.id, Status::Active));
    assert_eq!(store.list_delegations(agent.id).await.unwrap().len(), 2);
    let actions: Vec<String> = store
        .list_audit(agent.id, None, 50)
        .await
        .unwrap()
        .into_iter()
        .map(|e| e.action)
        .filter(|a| a.starts_with("delegation_"))
        .collect();
    assert_eq!(
        actions,
        [
            "delegation_added",
            "delegation_removed",
            "delegation_added",
            "delegation_added"
        ]
    );
}

#[tokio::test]
async fn a_revocation_is_recorded_once_with_its_event() {
    let (_db, store) = open().await;
    let (agent, _) = stored_agent(store.as_ref(), 0).await;
    let delegation = record(agent.id, "base", B256::repeat_byte(0x44));
    store
        .add_delegation(&delegation, false, &audit(agent.id, added(delegation.id)))
        .await
        .unwrap();
    assert_eq!(store.active_delegations("base").await.unwrap().len(), 1);
    let revoked = audit(
        agent.id,
        Detail::DelegationRevoked(detail::DelegationRevoked {
            delegation_id: delegation.id,
            chain: "base".into(),
            hash: format!("{:#x}", delegation.hash),
            delegator: delegation.delegator.to_checksum(None),
            status: "revoked".into(),
        }),
    );
    let event = store
        .revoke_delegation(delegation.id, &revoked)
        .await
        .unwrap()
        .expect("recorded");
    assert_eq!(event.kind, "delegation_revoked");
    assert_eq!(event.conversation_id, None);
    assert_eq!(event.payload["delegation_id"], json!(delegation.id));
    assert!(
        store
            .revoke_delegation(delegation.id, &revoked)
            .await
            .unwrap()
            .is_none(),
        "once"
    );
    assert!(store.active_delegations("base").await.unwrap().is_empty());
    let got = store.get_delegation(agent.id, delegation.id).await.unwrap().unwrap();
    assert_eq!(got.status, Status::Revoked);
    assert!(got.revoked_at.is_some());
}
