//! The store's facilitator token contract (`FacilitatorTokenStore`, §23) on the backend the app would open (SQLite,
//! or PostgreSQL with `TEST_POSTGRES_URL`): tokens found by hash while live, used only by their own agent, deleted
//! once, and never live again.

use agentd::domain::audit::{Actor, Detail, detail};
use agentd::store::AuditEvent;
use agentd::store::facilitator::{FacilitatorToken, NewFacilitatorToken};
use uuid::Uuid;

use crate::store::contract::{open, stored_agent};

fn new_token(agent_id: Uuid, hash: &str) -> NewFacilitatorToken {
    NewFacilitatorToken {
        id: Uuid::new_v4(),
        agent_id,
        token_hash: hash.into(),
        prefix: "fac_AbCdEfGh".into(),
    }
}

fn noted(agent_id: Uuid, token: &FacilitatorToken) -> AuditEvent {
    let detail = detail::FacilitatorToken {
        token_id: token.id,
        prefix: token.prefix.clone(),
    };
    AuditEvent::new(agent_id, Actor::Admin, Detail::FacilitatorTokenDeleted(detail))
}

#[tokio::test]
async fn a_facilitator_token_is_used_by_its_agent_only_and_is_never_live_again_once_deleted() {
    let (_db, store) = open().await;
    let (agent, _) = stored_agent(store.as_ref(), 0).await;
    let (other, _) = stored_agent(store.as_ref(), 1).await;
    let hash = "a".repeat(64);
    let new = new_token(agent.id, &hash);
    let created_audit = AuditEvent::new(
        agent.id,
        Actor::Admin,
        Detail::FacilitatorTokenCreated(detail::FacilitatorToken {
            token_id: new.id,
            prefix: new.prefix.clone(),
        }),
    );
    let created = store.create_facilitator_token(&new, &created_audit).await.unwrap();
    assert_eq!(
        (created.id, created.agent_id, created.last_used_at),
        (new.id, agent.id, None)
    );
    assert_eq!(store.facilitator_tokens(agent.id).await.unwrap(), vec![created.clone()]);
    assert!(store.facilitator_tokens(other.id).await.unwrap().is_empty());

    // Presented on another agent's endpoints: found (so that it is refused as another's), not used.
    let seen = store
        .use_facilitator_token(other.id, &hash)
        .await
        .unwrap()
        .expect("found");
    assert_eq!((seen.agent_id, seen.last_used_at), (agent.id, None));
    let used = store
        .use_facilitator_token(agent.id, &hash)
        .await
        .unwrap()
        .expect("found");
    assert!(used.last_used_at.is_some());
    assert_eq!(store.facilitator_tokens(agent.id).await.unwrap(), vec![used.clone()]);
    assert_eq!(
        store.use_facilitator_token(agent.id, &"b".repeat(64)).await.unwrap(),
        None
    );

    // Another agent cannot delete it; its own agent deletes it once.
    let audit = |t: &FacilitatorToken| noted(other.id, t);
    assert_eq!(
        store.delete_facilitator_token(other.id, new.id, &audit).await.unwrap(),
        None
    );
    let audit = |t: &FacilitatorToken| noted(agent.id, t);
    let deleted = store.delete_facilitator_token(agent.id, new.id, &audit).await.unwrap();
    assert_eq!(deleted, Some(used));
    assert_eq!(
        store.delete_facilitator_token(agent.id, new.id, &audit).await.unwrap(),
        None
    );
    assert!(store.facilitator_tokens(agent.id).await.unwrap().is_empty());
    assert_eq!(store.use_facilitator_token(agent.id, &hash).await.unwrap(), None);
    let actions: Vec<String> = store
        .list_audit(agent.id, None, 10)
        .await
        .unwrap()
        .into_iter()
        .map(|e| e.action)
        .collect();
    assert_eq!(actions[..2], ["facilitator_token_deleted", "facilitator_token_created"]);
}
