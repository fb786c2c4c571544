//! `POST/GET …/offers` and `GET/DELETE …/offers/{oid}` (§23): an offer as created and shown (its URL at the
//! listening address, the resource as origin and path, never its headers or query), listed, read and closed with
//! their audit entries; each refusal with its code, nothing stored; who may call them.

use alloy::signers::local::PrivateKeySigner;
use reqwest::{Method, StatusCode};
use serde_json::{Value, json};

use super::{Selling, create, offers_path, selling, upstream_offer};
use crate::auth::owners::{As, call, owner_session};
use crate::helpers::chain::{funded_agent, transfer_app, wallet};
use crate::helpers::solidity::deploy_test_token;
use crate::helpers::{assert_error, checksummed};

/// The agent's audit actions, newest first.
async fn audit_actions(s: &Selling) -> Vec<String> {
    let path = format!("/api/agents/{}/audit", s.agent.id);
    let (status, entries) = s.app.request(Method::GET, &path, Some(&s.agent.token), None).await;
    assert_eq!(status, StatusCode::OK, "{entries}");
    entries
        .as_array()
        .expect("a list")
        .iter()
        .map(|e| e["action"].as_str().unwrap().to_string())
        .collect()
}

#[tokio::test]
async fn an_offer_is_created_listed_read_and_closed_and_never_shows_its_headers_or_query() {
    let s = selling(&[]).await;
    let (status, offer) = create(&s.app, &s.agent, upstream_offer()).await;
    assert_eq!(status, StatusCode::CREATED, "{offer}");
    let id = offer["id"].as_str().unwrap().to_string();
    assert_eq!(
        offer["url"],
        format!("{}/x402/{id}", s.app.address),
        "the listening address without PUBLIC_URL"
    );
    assert_eq!(offer["chain"], "base");
    assert_eq!(offer["asset"], "USDC");
    assert_eq!(offer["price"], "0.01");
    assert_eq!(offer["pay_to"], wallet(&s.agent).to_checksum(None));
    assert_eq!(offer["description"], "today's weather");
    assert_eq!(offer["settle"], "on_success");
    assert_eq!(offer["forward"], json!([]));
    assert_eq!(offer["gas_per_day"], "0.001");
    assert_eq!(offer["max_timeout_seconds"], 300);
    assert_eq!(offer["status"], "active");
    assert!(offer["created_at"].is_string(), "{offer}");
    assert_eq!(
        offer["resource"],
        json!({"kind": "url", "url": "http://127.0.0.1:9/weather", "method": "GET",
            "mime_type": "application/json", "headers": true})
    );
    let text = offer.to_string();
    assert!(
        !text.contains("upstream-secret") && !text.contains("query-secret"),
        "{text}"
    );

    let (status, listed) = s
        .app
        .request(Method::GET, &offers_path(&s.agent), Some(&s.agent.token), None)
        .await;
    assert_eq!(status, StatusCode::OK, "{listed}");
    assert_eq!(listed["offers"], json!([offer.clone()]));
    let one = format!("{}/{id}", offers_path(&s.agent));
    let (status, read) = s.app.request(Method::GET, &one, Some(&s.agent.token), None).await;
    assert_eq!((status, &read), (StatusCode::OK, &offer));

    let (status, body) = s.app.request(Method::DELETE, &one, Some(&s.agent.token), None).await;
    assert_eq!(status, StatusCode::NO_CONTENT, "{body}");
    let (_, read) = s.app.request(Method::GET, &one, Some(&s.agent.token), None).await;
    assert_eq!(read["status"], "closed", "{read}");
    let (status, _) = s.app.request(Method::DELETE, &one, Some(&s.agent.token), None).await;
    assert_eq!(
        status,
        StatusCode::NO_CONTENT,
        "closing a closed offer again changes nothing"
    );
    let actions = audit_actions(&s).await;
    assert_eq!(
        actions.iter().filter(|a| *a == "offer_created").count(),
        1,
        "{actions:?}"
    );
    assert_eq!(
        actions.iter().filter(|a| *a == "offer_closed").count(),
        1,
        "{actions:?}"
    );
    assert_eq!(actions[0], "offer_closed");

    let unknown = format!("{}/{}", offers_path(&s.agent), uuid::Uuid::new_v4());
    for (method, path) in [
        (Method::GET, unknown.clone()),
        (Method::DELETE, unknown),
        (Method::GET, format!("{}/not-an-id", offers_path(&s.agent))),
    ] {
        let answer = s.app.request(method, &path, Some(&s.agent.token), None).await;
        assert_error(&answer, StatusCode::NOT_FOUND, "offer_not_found");
    }
    // Another agent's offer is not found through this one.
    let other = s
        .app
        .create_agent_ok(json!({"name": "other", "chains": ["base"], "capabilities": ["read", "transact"]}))
        .await;
    let theirs = format!("/api/agents/{}/offers/{id}", other.id);
    let answer = s.app.request(Method::GET, &theirs, Some(&other.token), None).await;
    assert_error(&answer, StatusCode::NOT_FOUND, "offer_not_found");
}

#[tokio::test]
async fn a_closed_offer_answers_offer_not_found_at_its_url() {
    let s = selling(&[]).await;
    let (status, offer) = create(&s.app, &s.agent, upstream_offer()).await;
    assert_eq!(status, StatusCode::CREATED, "{offer}");
    let one = format!("{}/{}", offers_path(&s.agent), offer["id"].as_str().unwrap());
    let (status, _) = s.app.request(Method::DELETE, &one, Some(&s.agent.token), None).await;
    assert_eq!(status, StatusCode::NO_CONTENT);
    let response = s.app.client.get(offer["url"].as_str().unwrap()).send().await.unwrap();
    assert_eq!(response.status(), StatusCode::NOT_FOUND);
    let body: Value = response.json().await.unwrap();
    assert_eq!(body["error"]["code"], "offer_not_found", "{body}");
}

#[tokio::test]
async fn a_stored_body_and_a_post_upstream_settled_before_serving_are_offers_too() {
    let s = selling(&[]).await;
    let content = json!({"chain": "base", "asset": "usdc", "price": "1.5", "description": "a poem",
        "resource": {"content": "roses are red", "content_type": "text/plain"},
        "gas_per_day": "0.01", "max_timeout_seconds": 60});
    let (status, offer) = create(&s.app, &s.agent, content).await;
    assert_eq!(status, StatusCode::CREATED, "{offer}");
    assert_eq!(offer["resource"]["kind"], "content");
    assert_eq!(offer["resource"]["mime_type"], "text/plain");
    assert_eq!(
        (offer["price"].as_str(), offer["asset"].as_str()),
        (Some("1.5"), Some("USDC"))
    );
    assert!(
        !offer.to_string().contains("roses"),
        "the content is sold, not shown: {offer}"
    );
    let mut post = upstream_offer();
    post["resource"]["method"] = json!("POST");
    post["settle"] = json!("before_serving");
    post["forward"] = json!(["body", "query"]);
    post["max_timeout_seconds"] = json!(3600);
    let (status, offer) = create(&s.app, &s.agent, post).await;
    assert_eq!(status, StatusCode::CREATED, "{offer}");
    assert_eq!(offer["settle"], "before_serving");
    assert_eq!(offer["forward"], json!(["body", "query"]));
    assert_eq!(offer["resource"]["method"], "POST");
}

#[tokio::test]
async fn offers_are_refused_with_the_contracts_codes_and_nothing_is_stored() {
    let s = selling(&[]).await;
    // A registry token without EIP-3009, in the registry of a second app on the same node.
    let plain = deploy_test_token(&s.anvil, "Plain", "PLN", 6).await;
    let extra = format!("PLN:{plain}:6");
    let app = transfer_app(&s.anvil, &[("OFFER_ALLOW_PRIVATE", "true"), ("TOKENS_BASE", &extra)]).await;
    let agent = funded_agent(&app, &s.anvil, Some(0.5)).await;
    let with = |change: &dyn Fn(&mut Value)| {
        let mut body = upstream_offer();
        change(&mut body);
        body
    };
    let cases: Vec<(Value, StatusCode, &str)> = vec![
        (
            with(&|b| b["asset"] = json!("PLN")),
            StatusCode::UNPROCESSABLE_ENTITY,
            "asset_not_payable",
        ),
        (
            with(&|b| b["asset"] = json!("ETH")),
            StatusCode::UNPROCESSABLE_ENTITY,
            "asset_not_payable",
        ),
        (
            with(&|b| b["asset"] = json!("DOGE")),
            StatusCode::UNPROCESSABLE_ENTITY,
            "validation_failed",
        ),
        (
            with(&|b| b["chain"] = json!("polygon")),
            StatusCode::UNPROCESSABLE_ENTITY,
            "validation_failed",
        ),
        (
            with(&|b| b["price"] = json!("0")),
            StatusCode::UNPROCESSABLE_ENTITY,
            "validation_failed",
        ),
        (
            with(&|b| b["price"] = json!("0.0000001")),
            StatusCode::UNPROCESSABLE_ENTITY,
            "validation_failed",
        ),
        (
            with(&|b| b["price"] = json!("-1")),
            StatusCode::UNPROCESSABLE_ENTITY,
            "validation_failed",
        ),
        (
            with(&|b| b["description"] = json!("  ")),
            StatusCode::UNPROCESSABLE_ENTITY,
            "validation_failed",
        ),
        (
            with(&|b| b["gas_per_day"] = json!("0")),
            StatusCode::UNPROCESSABLE_ENTITY,
            "validation_failed",
        ),
        (
            with(&|b| b["max_timeout_seconds"] = json!(59)),
            StatusCode::UNPROCESSABLE_ENTITY,
            "validation_failed",
        ),
        (
            with(&|b| b["max_timeout_seconds"] = json!(3601)),
            StatusCode::UNPROCESSABLE_ENTITY,
            "validation_failed",
        ),
        (
            with(&|b| b["settle"] = json!("later")),
            StatusCode::UNPROCESSABLE_ENTITY,
            "validation_failed",
        ),
        (
            with(&|b| b["resource"]["method"] = json!("POST")),
            StatusCode::UNPROCESSABLE_ENTITY,
            "validation_failed",
        ),
        (
            with(&|b| b["resource"]["method"] = json!("DELETE")),
            StatusCode::UNPROCESSABLE_ENTITY,
            "validation_failed",
        ),
        (
            with(&|b| b["forward"] = json!(["body"])),
            StatusCode::UNPROCESSABLE_ENTITY,
            "validation_failed",
        ),
        (
            with(&|b| b["forward"] = json!(["headers"])),
            StatusCode::UNPROCESSABLE_ENTITY,
            "validation_failed",
        ),
        (
            with(&|b| b["resource"]["headers"] = json!({"Host": "evil.example"})),
            StatusCode::UNPROCESSABLE_ENTITY,
            "validation_failed",
        ),
        (
            with(&|b| b["resource"]["url"] = json!("ftp://127.0.0.1/data")),
            StatusCode::UNPROCESSABLE_ENTITY,
            "url_not_allowed",
        ),
        (
            with(&|b| b["resource"]["url"] = json!("http://user:pw@127.0.0.1/data")),
            StatusCode::UNPROCESSABLE_ENTITY,
            "url_not_allowed",
        ),
        (
            with(&|b| b["resource"]["mime_type"] = json!("json")),
            StatusCode::UNPROCESSABLE_ENTITY,
            "validation_failed",
        ),
        (
            with(&|b| b["surprise"] = json!(1)),
            StatusCode::UNPROCESSABLE_ENTITY,
            "validation_failed",
        ),
        (
            with(&|b| b["resource"] = json!({"content": "x"})),
            StatusCode::UNPROCESSABLE_ENTITY,
            "validation_failed",
        ),
    ];
    for (body, status, code) in cases {
        let answer = create(&app, &agent, body.clone()).await;
        assert_eq!(answer.0, status, "{body} → {}", answer.1);
        assert_eq!(answer.1["error"]["code"], code, "{body} → {}", answer.1);
    }
    // The policy's hosts restrict what an offer fronts (§16: 403 policy_denied, host_not_allowed).
    set_policy_unguarded(&app, &agent, json!({"allowed_hosts": ["api.example.com"]})).await;
    let answer = create(&app, &agent, upstream_offer()).await;
    assert_error(&answer, StatusCode::FORBIDDEN, "policy_denied");
    assert_eq!(answer.1["error"]["details"]["rule"], "host_not_allowed", "{}", answer.1);
    let (_, listed) = app
        .request(Method::GET, &offers_path(&agent), Some(&agent.token), None)
        .await;
    assert_eq!(listed["offers"], json!([]), "nothing was stored");

    // Without OFFER_ALLOW_PRIVATE a loopback upstream is refused by §16's rules.
    let strict = transfer_app(&s.anvil, &[]).await;
    let agent = funded_agent(&strict, &s.anvil, Some(0.5)).await;
    let answer = create(&strict, &agent, upstream_offer()).await;
    assert_error(&answer, StatusCode::UNPROCESSABLE_ENTITY, "url_not_allowed");
}

/// `PUT …/policy` with the agent token (the agent is unguarded), insisting on a 200.
async fn set_policy_unguarded(app: &crate::helpers::TestApp, agent: &crate::helpers::CreatedAgent, policy: Value) {
    let path = format!("/api/agents/{}/policy", agent.id);
    let (status, body) = app.request(Method::PUT, &path, Some(&agent.token), Some(policy)).await;
    assert_eq!(status, StatusCode::OK, "{body}");
}

#[tokio::test]
async fn on_a_guarded_agent_only_owner_authority_creates_lists_and_closes_offers() {
    const ADMIN: &str = "admin-token-for-offer-tests-0123456789";
    let s = selling(&[("ADMIN_TOKEN", ADMIN)]).await;
    let agent = &s.agent;
    let as_agent = As {
        agent: Some(&agent.token),
        ..As::default()
    };
    let as_admin = As {
        admin: Some(ADMIN),
        ..As::default()
    };
    let answer = call(
        &s.app,
        Method::POST,
        &offers_path(agent),
        as_agent,
        Some(upstream_offer()),
    )
    .await;
    assert_error(&answer, StatusCode::FORBIDDEN, "owner_required");
    let answer = call(&s.app, Method::GET, &offers_path(agent), as_agent, None).await;
    assert_error(&answer, StatusCode::FORBIDDEN, "owner_required");
    let answer = call(
        &s.app,
        Method::POST,
        &offers_path(agent),
        As::default(),
        Some(upstream_offer()),
    )
    .await;
    assert_error(&answer, StatusCode::UNAUTHORIZED, "missing_token");

    let (status, offer) = call(
        &s.app,
        Method::POST,
        &offers_path(agent),
        as_admin,
        Some(upstream_offer()),
    )
    .await;
    assert_eq!(status, StatusCode::CREATED, "{offer}");
    let one = format!("{}/{}", offers_path(agent), offer["id"].as_str().unwrap());
    let answer = call(&s.app, Method::DELETE, &one, as_agent, None).await;
    assert_error(&answer, StatusCode::FORBIDDEN, "owner_required");
    let (status, listed) = call(&s.app, Method::GET, &offers_path(agent), as_admin, None).await;
    assert_eq!(status, StatusCode::OK, "{listed}");
    assert_eq!(listed["offers"][0]["id"], offer["id"]);
    let (status, _) = call(&s.app, Method::DELETE, &one, as_admin, None).await;
    assert_eq!(status, StatusCode::NO_CONTENT);

    // An owner's session is owner authority too; an agent without `transact` sells nothing.
    let owner = PrivateKeySigner::random();
    let reader = s
        .app
        .create_agent_ok(json!({"name": "reader", "chains": ["base"], "capabilities": ["read"],
            "owner_addresses": {"base": checksummed(&owner)}}))
        .await;
    let session = owner_session(&s.app, &reader.id, &owner).await;
    let as_owner = As {
        owner: Some(&session),
        ..As::default()
    };
    let answer = call(
        &s.app,
        Method::POST,
        &offers_path(&reader),
        as_owner,
        Some(upstream_offer()),
    )
    .await;
    assert_error(&answer, StatusCode::FORBIDDEN, "capability_denied");
    let (status, listed) = call(&s.app, Method::GET, &offers_path(&reader), as_owner, None).await;
    assert_eq!((status, &listed["offers"]), (StatusCode::OK, &json!([])));
}

#[tokio::test]
async fn offer_urls_start_with_public_url_when_it_is_set() {
    let s = selling(&[("PUBLIC_URL", "https://shop.example.com/")]).await;
    let (status, offer) = create(&s.app, &s.agent, upstream_offer()).await;
    assert_eq!(status, StatusCode::CREATED, "{offer}");
    assert_eq!(
        offer["url"],
        format!("https://shop.example.com/x402/{}", offer["id"].as_str().unwrap())
    );
}

/// Every offer and income route answered for real, success and refusals, each checked against the document.
pub async fn drive_offers(oracle: &mut crate::helpers::openapi::Oracle) {
    let s = selling(&[]).await;
    let (app, agent) = (&s.app, &s.agent);
    let send = |method: Method, path: String, body: Option<Value>| {
        let builder = app.build(method, &path, Some(&agent.token), body);
        app.send(builder)
    };
    let list = "/api/agents/{id}/offers";
    let one = "/api/agents/{id}/offers/{oid}";
    let income = "/api/agents/{id}/income";
    let created = send(Method::POST, offers_path(agent), Some(upstream_offer())).await;
    assert_eq!(created.status, StatusCode::CREATED, "{}", created.text);
    oracle.check("POST", list, &created);
    let mut not_payable = upstream_offer();
    not_payable["asset"] = json!("ETH");
    oracle.check(
        "POST",
        list,
        &send(Method::POST, offers_path(agent), Some(not_payable)).await,
    );
    oracle.check("GET", list, &send(Method::GET, offers_path(agent), None).await);
    let path = format!("{}/{}", offers_path(agent), created.body["id"].as_str().unwrap());
    oracle.check("GET", one, &send(Method::GET, path.clone(), None).await);
    oracle.check("DELETE", one, &send(Method::DELETE, path, None).await);
    let unknown = format!("{}/{}", offers_path(agent), uuid::Uuid::new_v4());
    oracle.check("GET", one, &send(Method::GET, unknown, None).await);
    let path = format!("/api/agents/{}/income", agent.id);
    oracle.check("GET", income, &send(Method::GET, path.clone(), None).await);
    oracle.check(
        "GET",
        income,
        &send(Method::GET, format!("{path}?status=paid"), None).await,
    );
}
