//! The store's offer contract (`OfferStore`, §23) on the backend the app would open (SQLite, or PostgreSQL with
//! `TEST_POSTGRES_URL`): an upstream and a stored body read back field for field, listed newest first, found by id
//! whatever their agent, closed once by their own agent only; and an agent's empty income page.

use agentd::domain::audit::{Actor, Detail, detail};
use agentd::store::AuditEvent;
use agentd::store::income_list::IncomeFilter;
use agentd::store::offers::{Offer, Resource, SettleWhen};
use alloy::primitives::{Address, U256};
use chrono::{Duration, SubsecRound};
use uuid::Uuid;

use crate::store::contract::{open, stored_agent};

fn offer(agent_id: Uuid, resource: Resource, seconds_ago: i64) -> Offer {
    Offer {
        id: Uuid::new_v4(),
        agent_id,
        chain: "base".into(),
        asset: "USDC".into(),
        token: Address::repeat_byte(0x83),
        decimals: 6,
        token_name: "USD Coin".into(),
        token_version: "2".into(),
        price: U256::from(10_000u64),
        description: "today's weather".into(),
        resource,
        settle: SettleWhen::OnSuccess,
        forward: vec!["query".into()],
        gas_per_day: U256::from(10u64).pow(U256::from(15u64)),
        max_timeout_seconds: 300,
        active: true,
        created_at: (agentd::domain::now() - Duration::seconds(seconds_ago)).trunc_subsecs(6),
    }
}

fn created(offer: &Offer) -> AuditEvent {
    let detail = detail::OfferCreated {
        offer_id: offer.id,
        chain: offer.chain.clone(),
        asset: offer.asset.clone(),
        price: "0.01".into(),
        resource: "https://api.example.com/weather".into(),
        settle: offer.settle.as_str().into(),
    };
    AuditEvent::new(offer.agent_id, Actor::Agent, Detail::OfferCreated(detail))
}

fn closed(agent_id: Uuid, id: Uuid) -> AuditEvent {
    AuditEvent::new(
        agent_id,
        Actor::Admin,
        Detail::OfferClosed(detail::OfferClosed { offer_id: id }),
    )
}

#[tokio::test]
async fn offers_read_back_as_stored_and_close_once_by_their_own_agent() {
    let (_db, store) = open().await;
    let (agent, _) = stored_agent(store.as_ref(), 0).await;
    let (other, _) = stored_agent(store.as_ref(), 1).await;
    let upstream = offer(
        agent.id,
        Resource::Upstream {
            url: "https://api.example.com/weather?key=q".into(),
            method: "GET".into(),
            mime_type: "application/json".into(),
            sealed_headers: Some(vec![0, 0, 0, 1, 9, 9, 9]),
        },
        10,
    );
    let mut content = offer(
        agent.id,
        Resource::Content {
            content: b"roses are red".to_vec(),
            content_type: "text/plain".into(),
        },
        0,
    );
    content.settle = SettleWhen::BeforeServing;
    content.forward = vec![];
    for o in [&upstream, &content] {
        store.create_offer(o, &created(o)).await.unwrap();
    }
    assert_eq!(store.offer(upstream.id).await.unwrap(), Some(upstream.clone()));
    assert_eq!(store.offer(content.id).await.unwrap(), Some(content.clone()));
    assert_eq!(store.offer(Uuid::new_v4()).await.unwrap(), None);
    assert_eq!(
        store.offers(agent.id).await.unwrap(),
        vec![content.clone(), upstream.clone()],
        "newest first"
    );
    assert!(store.offers(other.id).await.unwrap().is_empty());

    assert!(
        !store
            .close_offer(other.id, upstream.id, &closed(other.id, upstream.id))
            .await
            .unwrap()
    );
    assert!(
        store
            .close_offer(agent.id, upstream.id, &closed(agent.id, upstream.id))
            .await
            .unwrap()
    );
    assert!(
        !store
            .close_offer(agent.id, upstream.id, &closed(agent.id, upstream.id))
            .await
            .unwrap()
    );
    let read = store.offer(upstream.id).await.unwrap().unwrap();
    assert!(!read.active);
    let actions: Vec<String> = store
        .list_audit(agent.id, None, 10)
        .await
        .unwrap()
        .iter()
        .map(|e| e.action.clone())
        .collect();
    assert_eq!(
        actions.iter().filter(|a| *a == "offer_closed").count(),
        1,
        "{actions:?}"
    );
    assert_eq!(
        actions.iter().filter(|a| *a == "offer_created").count(),
        2,
        "{actions:?}"
    );
}

#[tokio::test]
async fn an_agent_without_payments_has_an_empty_income_page_and_an_unknown_cursor_is_none() {
    let (_db, store) = open().await;
    let (agent, _) = stored_agent(store.as_ref(), 0).await;
    let filter = IncomeFilter {
        offer_id: Some(Uuid::new_v4()),
        status: Some("settled".into()),
    };
    assert_eq!(
        store
            .income_page(agent.id, &IncomeFilter::default(), None, 10)
            .await
            .unwrap(),
        Some(vec![])
    );
    assert_eq!(
        store.income_page(agent.id, &filter, None, 10).await.unwrap(),
        Some(vec![])
    );
    assert_eq!(
        store
            .income_page(agent.id, &filter, Some(Uuid::new_v4()), 10)
            .await
            .unwrap(),
        None
    );
}
