//! The store's offer contract (`OfferStore`, §23) on the backend the app would open (SQLite, or PostgreSQL with
//! `TEST_POSTGRES_URL`): an upstream and a stored body read back field for field, listed newest first, found by id
//! whatever their agent, closed once by their own agent only; held for approval and decided once (approved, rejected,
//! expired) with their events and audit entries; and an agent's income pages, filtered and walked.

use agentd::domain::audit::{Actor, Detail, detail};
use agentd::domain::policy::ApprovalStatus;
use agentd::store::AuditEvent;
use agentd::store::income::{Held, Hold, IncomeStatus};
use agentd::store::income_list::IncomeFilter;
use agentd::store::offers::{Offer, OfferApproval, OfferDecision, OfferState, OfferVerdict, Resource, SettleWhen};
use alloy::primitives::{Address, B256, U256};
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
        status: OfferState::Active,
        created_at: (agentd::domain::now() - Duration::seconds(seconds_ago)).trunc_subsecs(6),
        approval: None,
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
    assert_eq!(read.status, OfferState::Closed);
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

/// `offer` held for approval until `expires_in` seconds from now, asked in `conversation`.
fn held(mut offer: Offer, expires_in: i64, conversation: Option<Uuid>) -> Offer {
    offer.status = OfferState::AwaitingApproval;
    offer.approval = Some(OfferApproval {
        expires_at: (agentd::domain::now() + Duration::seconds(expires_in)).trunc_subsecs(6),
        conversation_id: conversation,
        decided_at: None,
    });
    offer
}

fn content() -> Resource {
    Resource::Content {
        content: b"a haiku".to_vec(),
        content_type: "text/plain".into(),
    }
}

#[tokio::test]
async fn held_offers_wait_are_listed_and_are_decided_once_with_their_events_and_audit() {
    let (_db, store) = open().await;
    let (agent, _) = stored_agent(store.as_ref(), 0).await;
    let (other, _) = stored_agent(store.as_ref(), 1).await;
    let approved = held(offer(agent.id, content(), 30), 900, None);
    let rejected = held(offer(agent.id, content(), 20), 900, None);
    let due = held(offer(agent.id, content(), 10), -1, None);
    let direct = offer(agent.id, content(), 0);
    for o in [&approved, &rejected, &due] {
        store.hold_offer(o).await.unwrap();
    }
    store.create_offer(&direct, &created(&direct)).await.unwrap();
    // Only an offer awaiting approval (with its expiry) is held.
    assert!(store.hold_offer(&offer(agent.id, content(), 0)).await.is_err());
    assert_eq!(store.offer(approved.id).await.unwrap(), Some(approved.clone()));
    assert_eq!(
        store.waiting_offers(agent.id).await.unwrap(),
        vec![approved.clone(), rejected.clone(), due.clone()],
        "oldest first"
    );
    assert!(store.waiting_offers(other.id).await.unwrap().is_empty());
    let now = agentd::domain::now();
    let dues = store.due_offers("base", now).await.unwrap();
    assert_eq!(dues.iter().map(|o| o.id).collect::<Vec<_>>(), vec![due.id]);
    assert!(store.due_offers("ethereum", now).await.unwrap().is_empty());

    let decide = |agent_id: Uuid, id: Uuid, verdict: OfferVerdict| {
        let store = store.clone();
        async move {
            store
                .decide_offer(agent_id, id, verdict, Actor::Admin, Some("not now"))
                .await
                .unwrap()
        }
    };
    // Another agent's, an unknown one and one that never waited are not found.
    for (agent_id, id) in [
        (other.id, approved.id),
        (agent.id, Uuid::new_v4()),
        (agent.id, direct.id),
    ] {
        assert!(matches!(
            decide(agent_id, id, OfferVerdict::Approved).await,
            OfferDecision::NotFound
        ));
    }
    // Past its expiry it is not approved.
    assert!(matches!(
        decide(agent.id, due.id, OfferVerdict::Approved).await,
        OfferDecision::NotWaiting(ApprovalStatus::Expired)
    ));
    let OfferDecision::Decided(done) = decide(agent.id, approved.id, OfferVerdict::Approved).await else {
        panic!("approved");
    };
    assert_eq!(done.status, OfferState::Active);
    assert!(done.approval.as_ref().unwrap().decided_at.is_some());
    assert_eq!(store.offer(approved.id).await.unwrap(), Some((*done).clone()));
    let OfferDecision::Decided(done) = decide(agent.id, rejected.id, OfferVerdict::Rejected).await else {
        panic!("rejected");
    };
    assert_eq!(done.status, OfferState::Rejected);
    let OfferDecision::Decided(done) = decide(agent.id, due.id, OfferVerdict::Expired).await else {
        panic!("expired");
    };
    assert_eq!(done.status, OfferState::Expired);
    // Decided once.
    assert!(matches!(
        decide(agent.id, approved.id, OfferVerdict::Rejected).await,
        OfferDecision::NotWaiting(ApprovalStatus::Approved)
    ));
    assert!(matches!(
        decide(agent.id, rejected.id, OfferVerdict::Approved).await,
        OfferDecision::NotWaiting(ApprovalStatus::Rejected)
    ));
    assert!(store.waiting_offers(agent.id).await.unwrap().is_empty());
    assert!(
        store
            .due_offers("base", agentd::domain::now())
            .await
            .unwrap()
            .is_empty()
    );

    let audit = store.list_audit(agent.id, None, 20).await.unwrap();
    let actions: Vec<&str> = audit.iter().map(|e| e.action.as_str()).collect();
    assert_eq!(
        actions,
        vec![
            "transfer_expired",
            "transfer_rejected",
            "offer_created",
            "transfer_approved",
            "offer_created",
            "agent_created"
        ],
        "newest first: one decision each, the approved one's creation after its approval; holding wrote none"
    );
    let detail = |i: usize| -> serde_json::Value { serde_json::from_str(&audit[i].detail).unwrap() };
    let rejection = detail(1);
    assert_eq!(rejection["transfer_id"], rejected.id.to_string(), "{rejection}");
    assert_eq!(rejection["kind"], "offer", "{rejection}");
    assert_eq!(rejection["amount"], "0.01", "{rejection}");
    assert_eq!(rejection["reason"], "not now", "{rejection}");
    assert_eq!(detail(2)["offer_id"], approved.id.to_string());
    assert_eq!(audit[3].actor, "admin");
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

fn hold(agent_id: Uuid, offer_id: Option<Uuid>, payer: u8) -> Hold {
    Hold {
        id: Uuid::new_v4(),
        agent_id,
        offer_id,
        chain: "base".into(),
        asset: "USDC".into(),
        token: Address::repeat_byte(0x83),
        decimals: 6,
        amount: U256::from(10_000u64),
        payer: Address::repeat_byte(payer),
        nonce: B256::repeat_byte(payer ^ 0x5a),
        valid_before: 4_000_000_000,
        signature_key: format!("sig-{}", Uuid::new_v4()),
        gas: U256::from(1_000u64),
        transfer_id: Uuid::new_v4(),
    }
}

#[tokio::test]
async fn income_pages_filter_by_offer_and_status_and_follow_their_cursor() {
    let (_db, store) = open().await;
    let (agent, _) = stored_agent(store.as_ref(), 0).await;
    let (other, _) = stored_agent(store.as_ref(), 1).await;
    let (a, b) = (Uuid::new_v4(), Uuid::new_v4());
    let holds = [
        hold(agent.id, Some(a), 1),
        hold(agent.id, Some(a), 2),
        hold(agent.id, Some(b), 3),
    ];
    for h in &holds {
        assert_eq!(store.take_hold(h, None).await.unwrap(), Held::Taken);
    }
    assert!(store.end_hold(holds[1].id, IncomeStatus::Released).await.unwrap());
    let page = |filter: IncomeFilter, before: Option<Uuid>, limit: i64| {
        let store = store.clone();
        async move {
            store
                .income_page(agent.id, &filter, before, limit)
                .await
                .unwrap()
                .expect("a known cursor")
        }
    };
    let all = page(IncomeFilter::default(), None, 10).await;
    assert_eq!(all.len(), 3);
    let first = &all.iter().find(|r| r.id == holds[0].id).unwrap();
    assert_eq!(
        (
            first.offer_id,
            first.amount,
            first.decimals,
            first.status.as_str(),
            first.fee,
            first.settled_at
        ),
        (Some(a), U256::from(10_000u64), 6, "settling", None, None)
    );
    assert_eq!(first.payer, Address::repeat_byte(1).to_checksum(None));
    let of_a = page(
        IncomeFilter {
            offer_id: Some(a),
            status: None,
        },
        None,
        10,
    )
    .await;
    assert_eq!(of_a.len(), 2);
    let released = page(
        IncomeFilter {
            offer_id: None,
            status: Some("released".into()),
        },
        None,
        10,
    )
    .await;
    assert_eq!(released.iter().map(|r| r.id).collect::<Vec<_>>(), [holds[1].id]);
    let settling_of_a = IncomeFilter {
        offer_id: Some(a),
        status: Some("settling".into()),
    };
    assert_eq!(page(settling_of_a, None, 10).await.len(), 1);

    // One at a time, each page after the last record of the one before: the same records in the same order.
    let mut walked = Vec::new();
    let mut cursor = None;
    loop {
        let one = page(IncomeFilter::default(), cursor, 1).await;
        let Some(record) = one.first() else { break };
        cursor = Some(record.id);
        walked.push(record.id);
    }
    assert_eq!(walked, all.iter().map(|r| r.id).collect::<Vec<_>>());
    assert_eq!(
        store
            .income_page(other.id, &IncomeFilter::default(), None, 10)
            .await
            .unwrap(),
        Some(vec![])
    );
    let theirs = store
        .income_page(other.id, &IncomeFilter::default(), Some(holds[0].id), 10)
        .await
        .unwrap();
    assert_eq!(theirs, None, "another agent's record is no cursor");
}
