//! The OpenAPI document and the API reference page: every documented route is served, every served API route is
//! documented, real responses of every route validate against the document, the console's copy of the document
//! is current, and the reference page loads nothing from the internet.

use reqwest::header::CONTENT_TYPE;
use reqwest::{Method, StatusCode};
use serde_json::{Value, json};

use crate::anvil::Anvil;
use crate::helpers::chain::{BASE_CHAIN_ID, ONE_ETH, fresh_address, transfer_app, wait_for_transactions, wallet, wei};
use crate::helpers::openapi::{Document, Oracle, final_event};
use crate::helpers::{CreatedAgent, TestApp, TestResponse, checksummed, sign, spawn_app, token_proof};
use alloy::signers::local::PrivateKeySigner;

/// Routes served outside the document on purpose: the document itself, the reference page and the console.
const UNDOCUMENTED: &[&str] = &["/api/openapi.json", "/docs", "/"];

/// Every API route the router serves, as `(method, path template)`, written down independently of the document.
const SERVED: &[(&str, &str)] = &[
    ("POST", "/api/agents"),
    ("GET", "/api/agents"),
    ("GET", "/api/agents/{id}"),
    ("PUT", "/api/agents/{id}"),
    ("DELETE", "/api/agents/{id}"),
    ("POST", "/api/agents/{id}/export-key"),
    ("GET", "/api/agents/{id}/reissue-challenge"),
    ("POST", "/api/agents/{id}/reissue-token"),
    ("GET", "/api/agents/{id}/owner-challenge"),
    ("POST", "/api/agents/{id}/owner-session"),
    ("DELETE", "/api/agents/{id}/owner-session"),
    ("POST", "/api/agents/{id}/reactivate"),
    ("GET", "/api/agents/{id}/audit"),
    ("GET", "/api/audit/head"),
    ("GET", "/api/agents/{id}/balances"),
    ("POST", "/api/agents/{id}/fund"),
    ("GET", "/api/agents/{id}/transactions"),
    ("GET", "/api/agents/{id}/policy"),
    ("PUT", "/api/agents/{id}/policy"),
    ("GET", "/api/agents/{id}/budget"),
    ("GET", "/api/agents/{id}/approvals"),
    ("POST", "/api/agents/{id}/transfers/{transfer_id}/approve"),
    ("POST", "/api/agents/{id}/transfers/{transfer_id}/cancel"),
    ("POST", "/api/agents/{id}/transfers/{transfer_id}/reject"),
    ("POST", "/api/agents/{id}/transfers"),
    ("POST", "/api/agents/{id}/transfers/preview"),
    ("GET", "/api/agents/{id}/transfers/{transfer_id}"),
    ("POST", "/api/agents/{id}/sweep"),
    ("POST", "/api/agents/{id}/calls"),
    ("POST", "/api/agents/{id}/calls/simulate"),
    ("POST", "/api/agents/{id}/sign-typed-data"),
    ("POST", "/api/agents/{id}/x402/fetch"),
    ("POST", "/api/agents/{id}/delegations"),
    ("GET", "/api/agents/{id}/delegations"),
    ("PUT", "/api/agents/{id}/sponsorship"),
    ("GET", "/api/agents/{id}/sponsorship"),
    ("GET", "/api/agents/{id}/delegations/{did}"),
    ("DELETE", "/api/agents/{id}/delegations/{did}"),
    ("POST", "/api/agents/{id}/facilitator-tokens"),
    ("GET", "/api/agents/{id}/facilitator-tokens"),
    ("DELETE", "/api/agents/{id}/facilitator-tokens/{tid}"),
    ("POST", "/api/agents/{id}/x402/verify"),
    ("POST", "/api/agents/{id}/x402/settle"),
    ("GET", "/api/agents/{id}/x402/supported"),
    ("POST", "/api/agents/{id}/offers"),
    ("GET", "/api/agents/{id}/offers"),
    ("GET", "/api/agents/{id}/offers/{oid}"),
    ("DELETE", "/api/agents/{id}/offers/{oid}"),
    ("GET", "/api/agents/{id}/income"),
    ("GET", "/x402/{oid}"),
    ("POST", "/x402/{oid}"),
    ("GET", "/api/chains"),
    ("POST", "/api/chat"),
    ("POST", "/api/chat/stream"),
    ("GET", "/api/conversations"),
    ("DELETE", "/api/conversations/{id}"),
    ("GET", "/api/conversations/{id}/messages"),
    ("GET", "/api/conversations/{id}/stream"),
    ("GET", "/health"),
    ("GET", "/metrics"),
    ("POST", "/api/webhooks"),
    ("GET", "/api/webhooks"),
    ("GET", "/api/webhooks/{wid}"),
    ("PATCH", "/api/webhooks/{wid}"),
    ("DELETE", "/api/webhooks/{wid}"),
    ("POST", "/api/webhooks/{wid}/rotate-secret"),
    ("POST", "/api/webhooks/{wid}/test"),
    ("GET", "/api/webhooks/{wid}/deliveries"),
    ("POST", "/api/webhooks/{wid}/deliveries/{event_id}/redeliver"),
    ("POST", "/api/agents/{id}/webhooks"),
    ("GET", "/api/agents/{id}/webhooks"),
    ("GET", "/api/agents/{id}/webhooks/{wid}"),
    ("PATCH", "/api/agents/{id}/webhooks/{wid}"),
    ("DELETE", "/api/agents/{id}/webhooks/{wid}"),
    ("POST", "/api/agents/{id}/webhooks/{wid}/rotate-secret"),
    ("POST", "/api/agents/{id}/webhooks/{wid}/test"),
    ("GET", "/api/agents/{id}/webhooks/{wid}/deliveries"),
    (
        "POST",
        "/api/agents/{id}/webhooks/{wid}/deliveries/{event_id}/redeliver",
    ),
];

fn documented(doc: &serde_json::Value) -> Vec<(String, String)> {
    let mut routes = Vec::new();
    for (path, item) in doc["paths"].as_object().expect("paths") {
        for method in item.as_object().expect("path item").keys() {
            routes.push((method.to_ascii_uppercase(), path.clone()));
        }
    }
    routes.sort();
    routes
}

#[tokio::test]
async fn the_document_lists_exactly_the_routes_the_router_serves() {
    let app = spawn_app().await;
    let (status, doc) = app.request(Method::GET, "/api/openapi.json", None, None).await;
    assert_eq!(status, StatusCode::OK);
    assert!(doc["openapi"].as_str().unwrap().starts_with("3."), "{}", doc["openapi"]);
    let mut served: Vec<(String, String)> = SERVED.iter().map(|(m, p)| (m.to_string(), p.to_string())).collect();
    served.sort();
    assert_eq!(documented(&doc), served);
    for (_, path) in documented(&doc) {
        assert!(!UNDOCUMENTED.contains(&path.as_str()));
    }
}

#[tokio::test]
async fn every_documented_route_answers_from_its_handler() {
    let app = spawn_app().await;
    let (_, doc) = app.request(Method::GET, "/api/openapi.json", None, None).await;
    let id = uuid::Uuid::new_v4().to_string();
    for (method, path) in documented(&doc) {
        let concrete = path.replace("{id}", &id);
        let method = Method::from_bytes(method.as_bytes()).unwrap();
        let response = app.send(app.build(method.clone(), &concrete, None, None)).await;
        assert_ne!(response.status, StatusCode::METHOD_NOT_ALLOWED, "{method} {path}");
        // The chain's head of an empty log is the one documented route whose own answer is a plain 404.
        if path != "/api/audit/head" {
            assert_ne!(
                response.body["error"]["code"], "not_found",
                "{method} {path} fell through to the fallback"
            );
        }
    }
}

#[tokio::test]
async fn the_document_declares_the_access_token_scheme_and_the_error_shape() {
    let app = spawn_app().await;
    let (_, doc) = app.request(Method::GET, "/api/openapi.json", None, None).await;
    let scheme = &doc["components"]["securitySchemes"]["agent_token"];
    assert_eq!(scheme["type"], "apiKey");
    assert_eq!(scheme["in"], "header");
    assert_eq!(scheme["name"], "X-Agent-Access-Token");
    assert!(doc["components"]["schemas"]["ErrorBody"].is_object());
    let get_agent = &doc["paths"]["/api/agents/{id}"]["get"];
    assert_eq!(get_agent["security"][0]["agent_token"], serde_json::json!([]));
    let stream = &doc["paths"]["/api/conversations/{id}/stream"]["get"]["responses"]["200"]["content"];
    assert!(stream["text/event-stream"].is_object(), "{stream}");
}

#[tokio::test]
async fn the_reference_page_loads_nothing_from_the_internet() {
    let app = spawn_app().await;
    let page = app.send(app.build(Method::GET, "/docs/", None, None)).await;
    assert_eq!(page.status, StatusCode::OK);
    assert!(
        page.text.contains("<html") || page.text.contains("<!DOCTYPE"),
        "{}",
        &page.text[..200.min(page.text.len())]
    );
    for needle in [
        "src=\"http",
        "href=\"http",
        "src='http",
        "href='http",
        "@import url(http",
    ] {
        assert!(
            !page.text.contains(needle),
            "the page references an external asset: {needle}"
        );
    }
    for asset in [
        "/docs/swagger-ui.css",
        "/docs/swagger-ui-bundle.js",
        "/docs/swagger-initializer.js",
    ] {
        let response = app.send(app.build(Method::GET, asset, None, None)).await;
        assert_eq!(response.status, StatusCode::OK, "{asset}");
        assert!(
            !response.text.contains("https://unpkg.com") && !response.text.contains("cdn.jsdelivr"),
            "{asset}"
        );
    }
}

async fn send(app: &TestApp, method: Method, path: &str, token: Option<&str>, body: Option<Value>) -> TestResponse {
    app.send(app.build(method, path, token, body)).await
}

const OWNER_HEADER: &str = "X-Owner-Token";

/// The owner of the agent the document is checked with (a fixed key, so every step can sign as it).
fn owner_signer() -> PrivateKeySigner {
    PrivateKeySigner::from_bytes(&alloy::primitives::B256::repeat_byte(7)).unwrap()
}

/// Drives the owner challenge and session (a refused proof, then the owner's) and returns the owner token.
async fn owner_token(app: &TestApp, agent_id: &str, oracle: &mut Oracle) -> String {
    let owner = owner_signer();
    let path = format!(
        "/api/agents/{agent_id}/owner-challenge?chain=base&address={}",
        checksummed(&owner)
    );
    let challenge = send(app, Method::GET, &path, None, None).await;
    oracle.check("GET", "/api/agents/{id}/owner-challenge", &challenge);
    let bad = send(
        app,
        Method::GET,
        &format!("/api/agents/{agent_id}/owner-challenge?chain=x"),
        None,
        None,
    )
    .await;
    oracle.check("GET", "/api/agents/{id}/owner-challenge", &bad);
    let message = challenge.body["message"].as_str().unwrap();
    let session = format!("/api/agents/{agent_id}/owner-session");
    let stranger = PrivateKeySigner::random();
    for signer in [&stranger, &owner] {
        let body = json!({"chain": "base", "message": message, "signature": sign(signer, message)});
        let answer = send(app, Method::POST, &session, None, Some(body)).await;
        oracle.check("POST", "/api/agents/{id}/owner-session", &answer);
    }
    let body = json!({"chain": "base", "message": "hello", "signature": sign(&owner, "hello")});
    let malformed = send(app, Method::POST, &session, None, Some(body)).await;
    oracle.check("POST", "/api/agents/{id}/owner-session", &malformed);
    let body = json!({"chain": "base", "message": message, "signature": sign(&owner, message)});
    let replayed = send(app, Method::POST, &session, None, Some(body)).await;
    oracle.check("POST", "/api/agents/{id}/owner-session", &replayed);
    // The successful answer was the second: open one more to return its token.
    let challenge = send(app, Method::GET, &path, None, None).await;
    let message = challenge.body["message"].as_str().unwrap();
    let body = json!({"chain": "base", "message": message, "signature": sign(&owner, message)});
    let opened = send(app, Method::POST, &session, None, Some(body)).await;
    oracle.check("POST", "/api/agents/{id}/owner-session", &opened);
    opened.body["owner_token"].as_str().unwrap().to_string()
}

/// Agents, reissue, key export, funding and the errors around them (the agent returned is funded on base).
async fn drive_agents(app: &TestApp, anvil: &Anvil, oracle: &mut Oracle) -> CreatedAgent {
    let body = json!({"name": "Checked", "chains": ["base", "optimism"], "capabilities": ["read", "compare", "transact", "analytics"],
        "spending_cap": 0.5, "owner_addresses": {"base": checksummed(&owner_signer())}});
    let created = send(app, Method::POST, "/api/agents", None, Some(body)).await;
    oracle.check("POST", "/api/agents", &created);
    let mut agent = CreatedAgent {
        id: created.body["id"].as_str().unwrap().to_string(),
        token: created.body["access_token"].as_str().unwrap().to_string(),
        body: created.body.clone(),
    };
    let refused = send(app, Method::POST, "/api/agents", None, Some(json!({"name": " "}))).await;
    oracle.check("POST", "/api/agents", &refused);
    let raw = app
        .client
        .post(app.url("/api/agents"))
        .header(CONTENT_TYPE, "application/json")
        .body("{");
    oracle.check("POST", "/api/agents", &app.send(raw).await);
    oracle.check(
        "GET",
        "/api/agents",
        &send(app, Method::GET, "/api/agents", None, None).await,
    );
    oracle.check(
        "GET",
        "/api/agents",
        &send(app, Method::GET, "/api/agents?limit=0", None, None).await,
    );

    let path = format!("/api/agents/{}", agent.id);
    oracle.check(
        "GET",
        "/api/agents/{id}",
        &send(app, Method::GET, &path, Some(&agent.token), None).await,
    );
    oracle.check(
        "GET",
        "/api/agents/{id}",
        &send(app, Method::GET, &path, None, None).await,
    );
    let unknown = format!("/api/agents/{}", uuid::Uuid::new_v4());
    oracle.check(
        "GET",
        "/api/agents/{id}",
        &send(app, Method::GET, &unknown, Some(&agent.token), None).await,
    );
    let update = json!({"description": null, "spending_cap": 1});
    let refused = send(app, Method::PUT, &path, Some(&agent.token), Some(update.clone())).await;
    oracle.check("PUT", "/api/agents/{id}", &refused);
    let owner = owner_token(app, &agent.id, oracle).await;
    let as_owner = app
        .build(Method::PUT, &path, None, Some(update))
        .header(OWNER_HEADER, &owner);
    oracle.check("PUT", "/api/agents/{id}", &app.send(as_owner).await);

    let challenge = send(app, Method::GET, &format!("{path}/reissue-challenge"), None, None).await;
    oracle.check("GET", "/api/agents/{id}/reissue-challenge", &challenge);
    let reissue = format!("{path}/reissue-token");
    let failed = send(app, Method::POST, &reissue, None, Some(token_proof("agt_wrong"))).await;
    oracle.check("POST", "/api/agents/{id}/reissue-token", &failed);
    let reissued = send(app, Method::POST, &reissue, None, Some(token_proof(&agent.token))).await;
    oracle.check("POST", "/api/agents/{id}/reissue-token", &reissued);
    agent.token = reissued.body["access_token"].as_str().unwrap().to_string();

    let export = json!({"chain": "base", "confirm": true});
    let refused = send(
        app,
        Method::POST,
        &format!("{path}/export-key"),
        Some(&agent.token),
        Some(export.clone()),
    )
    .await;
    oracle.check("POST", "/api/agents/{id}/export-key", &refused);
    let exported = app.build(Method::POST, &format!("{path}/export-key"), None, Some(export));
    let exported = app.send(exported.header(OWNER_HEADER, &owner)).await;
    oracle.check("POST", "/api/agents/{id}/export-key", &exported);
    let audit = format!("{path}/audit");
    oracle.check(
        "GET",
        "/api/agents/{id}/audit",
        &send(app, Method::GET, &audit, Some(&agent.token), None).await,
    );
    let audit = format!("{path}/audit?limit=0");
    oracle.check(
        "GET",
        "/api/agents/{id}/audit",
        &send(app, Method::GET, &audit, Some(&agent.token), None).await,
    );
    oracle.check(
        "GET",
        "/api/audit/head",
        &send(app, Method::GET, "/api/audit/head", None, None).await,
    );

    anvil.set_balance(wallet(&agent), wei(ONE_ETH)).await;
    // base answers from the node, optimism has no RPC URL: one entry of each shape.
    let balances = send(app, Method::GET, &format!("{path}/balances"), Some(&agent.token), None).await;
    assert!(
        balances.body["balances"]["optimism"]["error"].is_object(),
        "{}",
        balances.body
    );
    oracle.check("GET", "/api/agents/{id}/balances", &balances);
    let fund = format!("{path}/fund");
    oracle.check(
        "POST",
        "/api/agents/{id}/fund",
        &send(app, Method::POST, &fund, Some(&agent.token), None).await,
    );
    let one = json!({"chain": "base", "amount": "0.05"});
    oracle.check(
        "POST",
        "/api/agents/{id}/fund",
        &send(app, Method::POST, &fund, Some(&agent.token), Some(one)).await,
    );
    let foreign = json!({"chain": "ethereum"});
    oracle.check(
        "POST",
        "/api/agents/{id}/fund",
        &send(app, Method::POST, &fund, Some(&agent.token), Some(foreign)).await,
    );
    agent
}

/// Contract calls (§18): a simulation, a call made on a test token, a malformed call.
async fn drive_calls(app: &TestApp, anvil: &Anvil, oracle: &mut Oracle) {
    let token = crate::helpers::solidity::deploy_test_token(anvil, "Test Dollar", "TUSD", 6).await;
    // An unguarded agent's calls are allowed when no rule decides.
    let agent = &crate::helpers::chain::sending_agent(app, Some(1.0)).await;
    anvil.set_balance(wallet(agent), wei(ONE_ETH)).await;
    let call = json!({"chain": "base", "to": token.to_checksum(None), "function": "approve(address,uint256)",
        "args": [fresh_address().to_checksum(None), "1000"]});
    let simulate = format!("/api/agents/{}/calls/simulate", agent.id);
    oracle.check(
        "POST",
        "/api/agents/{id}/calls/simulate",
        &send(app, Method::POST, &simulate, Some(&agent.token), Some(call.clone())).await,
    );
    let create = format!("/api/agents/{}/calls", agent.id);
    let made = send(app, Method::POST, &create, Some(&agent.token), Some(call)).await;
    assert_eq!(made.status, StatusCode::CREATED, "{}", made.text);
    oracle.check("POST", "/api/agents/{id}/calls", &made);
    let bad = json!({"chain": "base", "to": token.to_checksum(None), "data": "0x12"});
    oracle.check(
        "POST",
        "/api/agents/{id}/calls",
        &send(app, Method::POST, &create, Some(&agent.token), Some(bad)).await,
    );
    // Typed data: refused without a rule, signed under one, malformed.
    let typed = json!({"chain": "base", "typed_data": {
        "types": {"EIP712Domain": [{"name": "chainId", "type": "uint256"}, {"name": "verifyingContract", "type": "address"}],
            "Permit": [{"name": "owner", "type": "address"}, {"name": "spender", "type": "address"},
                {"name": "value", "type": "uint256"}, {"name": "nonce", "type": "uint256"}, {"name": "deadline", "type": "uint256"}]},
        "primaryType": "Permit",
        "domain": {"chainId": 8453, "verifyingContract": token.to_checksum(None)},
        "message": {"owner": wallet(agent).to_checksum(None), "spender": fresh_address().to_checksum(None),
            "value": "1000", "nonce": 0, "deadline": "99999999999"}}});
    let sign = format!("/api/agents/{}/sign-typed-data", agent.id);
    let path = "/api/agents/{id}/sign-typed-data";
    oracle.check(
        "POST",
        path,
        &send(app, Method::POST, &sign, Some(&agent.token), Some(typed.clone())).await,
    );
    let policy = format!("/api/agents/{}/policy", agent.id);
    let rule = json!({"calls": {"rules": [{"typed_data": {"primary_type": "Permit"}, "action": "allow"}]}});
    let put = send(app, Method::PUT, &policy, Some(&agent.token), Some(rule)).await;
    assert_eq!(put.status, StatusCode::OK, "{}", put.text);
    let signed = send(app, Method::POST, &sign, Some(&agent.token), Some(typed)).await;
    assert_eq!(signed.status, StatusCode::OK, "{}", signed.text);
    oracle.check("POST", path, &signed);
    let malformed = json!({"chain": "base", "typed_data": {"types": {}}});
    oracle.check(
        "POST",
        path,
        &send(app, Method::POST, &sign, Some(&agent.token), Some(malformed)).await,
    );
}

/// The transfers API: a transfer made, a refusal, a repeat under its key, the transfer read back, a page.
async fn drive_transfers(app: &TestApp, agent: &CreatedAgent, oracle: &mut Oracle) {
    let create = format!("/api/agents/{}/transfers", agent.id);
    let order = json!({"chain": "base", "to": fresh_address().to_checksum(None), "amount": "0.001"});
    let keyed = || {
        app.build(Method::POST, &create, Some(&agent.token), Some(order.clone()))
            .header("Idempotency-Key", "openapi-1")
    };
    let preview = format!("{create}/preview");
    let previewed = send(app, Method::POST, &preview, Some(&agent.token), Some(order.clone())).await;
    assert_eq!(previewed.status, StatusCode::OK, "{}", previewed.text);
    oracle.check("POST", "/api/agents/{id}/transfers/preview", &previewed);
    let own = json!({"chain": "base", "to": wallet(agent).to_checksum(None), "amount": "0.001"});
    oracle.check(
        "POST",
        "/api/agents/{id}/transfers/preview",
        &send(app, Method::POST, &preview, Some(&agent.token), Some(own)).await,
    );
    let made = app.send(keyed()).await;
    oracle.check("POST", "/api/agents/{id}/transfers", &made);
    oracle.check("POST", "/api/agents/{id}/transfers", &app.send(keyed()).await);
    let bad = json!({"chain": "base", "to": "0x1234", "amount": "0.001"});
    oracle.check(
        "POST",
        "/api/agents/{id}/transfers",
        &send(app, Method::POST, &create, Some(&agent.token), Some(bad)).await,
    );
    let one = format!("{create}/{}", made.body["id"].as_str().unwrap());
    let template = "/api/agents/{id}/transfers/{transfer_id}";
    oracle.check(
        "GET",
        template,
        &send(app, Method::GET, &one, Some(&agent.token), None).await,
    );
    let unknown = format!("{create}/{}", uuid::Uuid::new_v4());
    oracle.check(
        "GET",
        template,
        &send(app, Method::GET, &unknown, Some(&agent.token), None).await,
    );
    let page = format!(
        "/api/agents/{}/transactions?limit=1&before={}",
        agent.id,
        uuid::Uuid::new_v4()
    );
    oracle.check(
        "GET",
        "/api/agents/{id}/transactions",
        &send(app, Method::GET, &page, Some(&agent.token), None).await,
    );
}

#[tokio::test]
async fn real_responses_of_every_route_validate_against_the_document() {
    let anvil = Anvil::start(BASE_CHAIN_ID);
    let app = transfer_app(&anvil, &[]).await;
    let mut oracle = Oracle::new(&app).await;
    oracle.check(
        "GET",
        "/api/chains",
        &send(&app, Method::GET, "/api/chains", None, None).await,
    );
    oracle.check("GET", "/health", &send(&app, Method::GET, "/health", None, None).await);
    oracle.check(
        "GET",
        "/metrics",
        &send(&app, Method::GET, "/metrics", None, None).await,
    );

    let agent = drive_agents(&app, &anvil, &mut oracle).await;
    let token = Some(agent.token.as_str());
    let turn = |message: String| Some(json!({"agent_id": agent.id, "message": message}));
    let sent = send(
        &app,
        Method::POST,
        "/api/chat",
        token,
        turn(format!("send 0.01 ETH to {} on base", fresh_address())),
    )
    .await;
    oracle.check("POST", "/api/chat", &sent);
    oracle.check(
        "POST",
        "/api/chat",
        &send(&app, Method::POST, "/api/chat", token, turn("balances".into())).await,
    );
    oracle.check(
        "POST",
        "/api/chat",
        &send(&app, Method::POST, "/api/chat", token, turn(String::new())).await,
    );
    let streamed = send(
        &app,
        Method::POST,
        "/api/chat/stream",
        token,
        turn("what is my balance on base".into()),
    )
    .await;
    oracle.check("POST", "/api/chat/stream", &streamed);
    let final_data = final_event(&streamed.text);
    let problems = oracle
        .doc
        .validate(oracle.doc.component("ChatResponseView"), &final_data);
    assert!(
        problems.is_empty(),
        "the final event is a ChatResponseView: {problems:?}"
    );

    wait_for_transactions(&app, &agent, 1, "confirmed").await;
    let transactions = format!("/api/agents/{}/transactions", agent.id);
    oracle.check(
        "GET",
        "/api/agents/{id}/transactions",
        &send(&app, Method::GET, &transactions, token, None).await,
    );
    drive_transfers(&app, &agent, &mut oracle).await;
    drive_calls(&app, &anvil, &mut oracle).await;

    let list = format!("/api/conversations?agent_id={}", agent.id);
    oracle.check(
        "GET",
        "/api/conversations",
        &send(&app, Method::GET, &list, token, None).await,
    );
    oracle.check(
        "GET",
        "/api/conversations",
        &send(&app, Method::GET, "/api/conversations", token, None).await,
    );
    let conversation = sent.body["conversation_id"].as_str().unwrap();
    let messages = format!("/api/conversations/{conversation}/messages");
    oracle.check(
        "GET",
        "/api/conversations/{id}/messages",
        &send(&app, Method::GET, &messages, token, None).await,
    );
    // The stream never ends on its own: its status and media type are what can be checked.
    let stream = app.build(
        Method::GET,
        &format!("/api/conversations/{conversation}/stream"),
        token,
        None,
    );
    let stream = stream.send().await.expect("the stream answers");
    let media = stream
        .headers()
        .get(CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .map(|v| v.to_string());
    oracle.check_parts(
        "GET",
        "/api/conversations/{id}/stream",
        stream.status().as_u16(),
        media.as_deref(),
        &Value::Null,
    );
    drop(stream);

    let other = app.create_default_agent().await;
    let agent_path = format!("/api/agents/{}", agent.id);
    oracle.check(
        "GET",
        "/api/agents/{id}",
        &send(&app, Method::GET, &agent_path, Some(&other.token), None).await,
    );
    let conversation_path = format!("/api/conversations/{conversation}");
    oracle.check(
        "DELETE",
        "/api/conversations/{id}",
        &send(&app, Method::DELETE, &conversation_path, token, None).await,
    );
    oracle.check(
        "GET",
        "/api/conversations/{id}/messages",
        &send(&app, Method::GET, &messages, token, None).await,
    );
    oracle.check(
        "DELETE",
        "/api/agents/{id}",
        &send(&app, Method::DELETE, &agent_path, token, None).await,
    );
    oracle.check(
        "DELETE",
        "/api/agents/{id}",
        &send(&app, Method::DELETE, &agent_path, token, None).await,
    );

    let reactivate = format!("{agent_path}/reactivate");
    oracle.check(
        "POST",
        "/api/agents/{id}/reactivate",
        &send(&app, Method::POST, &reactivate, token, None).await,
    );
    let owner = owner_token(&app, &agent.id, &mut oracle).await;
    let as_owner = app
        .build(Method::POST, &reactivate, None, None)
        .header(OWNER_HEADER, &owner);
    oracle.check("POST", "/api/agents/{id}/reactivate", &app.send(as_owner).await);
    let sign_out = reactivate.replace("/reactivate", "/owner-session");
    let signed_out = app
        .build(Method::DELETE, &sign_out, None, None)
        .header(OWNER_HEADER, &owner);
    oracle.check("DELETE", "/api/agents/{id}/owner-session", &app.send(signed_out).await);
    drive_policy_and_approvals(&anvil, &mut oracle).await;
    drive_cancel(&mut oracle).await;
    drive_sweep(&mut oracle).await;
    drive_x402(&mut oracle).await;
    drive_webhooks(&mut oracle).await;
    crate::delegations::framework::drive_delegations(&mut oracle).await;
    crate::sponsored::endpoints::drive_sponsorship(&mut oracle).await;
    crate::offers::endpoints::drive_offers(&mut oracle).await;
    crate::facilitator::drive_facilitator(&mut oracle).await;
    crate::x402::sale_calls::drive_sale(&mut oracle).await;

    let succeeded: Vec<(String, String)> = oracle.succeeded.iter().cloned().collect();
    assert_eq!(
        succeeded,
        documented(&oracle.doc.0),
        "every documented route was checked with a success"
    );
}

#[test]
fn the_consoles_copy_of_the_document_is_current() {
    let current = agentd::http::openapi().to_pretty_json().expect("the document renders");
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/web/openapi.json");
    let committed = std::fs::read_to_string(path).unwrap_or_default();
    assert!(
        committed.trim_end() == current.trim_end(),
        "web/openapi.json is stale: run `cargo run -- openapi > web/openapi.json`, then web/build.sh"
    );
}

/// Policy and approval routes, on an app with an operator token (approving needs owner authority).
async fn drive_policy_and_approvals(anvil: &Anvil, oracle: &mut Oracle) {
    let app = crate::money::policy::admin_app(anvil).await;
    let agent = crate::helpers::chain::funded_agent(&app, anvil, Some(0.5)).await;
    let owner = |method: Method, path: &str, body: Option<Value>| {
        app.build(method, path, Some(&agent.token), body)
            .bearer_auth(crate::money::policy::ADMIN)
    };
    let policy = format!("/api/agents/{}/policy", agent.id);
    let rules = json!({"limits": {"base:ETH": {"per_transfer": "0.5", "per_day": "1", "approval_above": "0.005"}}});
    oracle.check(
        "GET",
        "/api/agents/{id}/policy",
        &send(&app, Method::GET, &policy, Some(&agent.token), None).await,
    );
    let refused = send(&app, Method::PUT, &policy, Some(&agent.token), Some(rules.clone())).await;
    oracle.check("PUT", "/api/agents/{id}/policy", &refused);
    let invalid = app
        .send(owner(Method::PUT, &policy, Some(json!({"limits": {"base:DOGE": {}}}))))
        .await;
    oracle.check("PUT", "/api/agents/{id}/policy", &invalid);
    oracle.check(
        "PUT",
        "/api/agents/{id}/policy",
        &app.send(owner(Method::PUT, &policy, Some(rules))).await,
    );

    let mut held = Vec::new();
    for _ in 0..2 {
        let (_, call) = crate::helpers::chain::send_via_chat(&app, &agent, "0.01", fresh_address()).await;
        held.push(
            call["result"]["transfer_id"]
                .as_str()
                .expect("a held transfer")
                .to_string(),
        );
    }
    let budget = format!("/api/agents/{}/budget", agent.id);
    oracle.check(
        "GET",
        "/api/agents/{id}/budget",
        &send(&app, Method::GET, &budget, Some(&agent.token), None).await,
    );
    let approvals = format!("/api/agents/{}/approvals", agent.id);
    let listed = send(&app, Method::GET, &approvals, Some(&agent.token), None).await;
    oracle.check("GET", "/api/agents/{id}/approvals", &listed);
    for (id, decision) in held.iter().zip(["approve", "reject"]) {
        let path = format!("/api/agents/{}/transfers/{id}/{decision}", agent.id);
        let template = format!("/api/agents/{{id}}/transfers/{{transfer_id}}/{decision}");
        let by_agent = send(&app, Method::POST, &path, Some(&agent.token), None).await;
        oracle.check("POST", &template, &by_agent);
        oracle.check("POST", &template, &app.send(owner(Method::POST, &path, None)).await);
        oracle.check("POST", &template, &app.send(owner(Method::POST, &path, None)).await);
    }
}

/// The cancel route, on a node that mines only when told (so the transfer is still pending when cancelled).
/// Every webhook route (§19), as the operator and as an agent's owner, on an app with `ADMIN_TOKEN`; a test event is
/// delivered to a local receiver so that the deliveries log and a redelivery have something to show.
async fn drive_webhooks(oracle: &mut Oracle) {
    use crate::helpers::webhook_receiver::Receiver;
    const ADMIN: &str = crate::money::policy::ADMIN;
    let app = crate::helpers::spawn_app_with(&[("ADMIN_TOKEN", ADMIN), ("WEBHOOK_ALLOW_PRIVATE", "true")]).await;
    let agent = app
        .create_agent_ok(json!({"name": "hooked", "chains": ["base"], "capabilities": ["read"]}))
        .await;
    let receiver = Receiver::start().await;
    let admin =
        |method: Method, path: &str, body: Option<Value>| app.build(method, path, None, body).bearer_auth(ADMIN);
    for (prefix, template) in [
        ("/api/webhooks".to_string(), "/api/webhooks"),
        (
            format!("/api/agents/{}/webhooks", agent.id),
            "/api/agents/{id}/webhooks",
        ),
    ] {
        let body = json!({"url": receiver.url, "events": ["*"], "description": "docs"});
        let created = app.send(admin(Method::POST, &prefix, Some(body))).await;
        assert_eq!(created.status, StatusCode::CREATED, "{}", created.text);
        oracle.check("POST", template, &created);
        let refused = app
            .send(admin(Method::POST, &prefix, Some(json!({"url": "x", "events": []}))))
            .await;
        oracle.check("POST", template, &refused);
        oracle.check("GET", template, &app.send(admin(Method::GET, &prefix, None)).await);
        let one = format!("{prefix}/{}", created.body["id"].as_str().unwrap());
        let one_template = format!("{template}/{{wid}}");
        oracle.check("GET", &one_template, &app.send(admin(Method::GET, &one, None)).await);
        let patch = Some(json!({"description": "changed", "enabled": true}));
        oracle.check(
            "PATCH",
            &one_template,
            &app.send(admin(Method::PATCH, &one, patch)).await,
        );
        let rotated = app
            .send(admin(Method::POST, &format!("{one}/rotate-secret"), None))
            .await;
        oracle.check("POST", &format!("{one_template}/rotate-secret"), &rotated);
        let tested = app.send(admin(Method::POST, &format!("{one}/test"), None)).await;
        assert_eq!(tested.status, StatusCode::ACCEPTED, "{}", tested.text);
        oracle.check("POST", &format!("{one_template}/test"), &tested);
        let event_id = tested.body["event_id"].as_str().unwrap().to_string();
        let deliveries = format!("{one}/deliveries");
        let mut listed = app.send(admin(Method::GET, &deliveries, None)).await;
        for _ in 0..200 {
            if listed.body.as_array().is_some_and(|l| !l.is_empty()) {
                break;
            }
            tokio::time::sleep(std::time::Duration::from_millis(50)).await;
            listed = app.send(admin(Method::GET, &deliveries, None)).await;
        }
        oracle.check("GET", &format!("{one_template}/deliveries"), &listed);
        let redeliver = format!("{deliveries}/{event_id}/redeliver");
        oracle.check(
            "POST",
            &format!("{one_template}/deliveries/{{event_id}}/redeliver"),
            &app.send(admin(Method::POST, &redeliver, None)).await,
        );
        oracle.check(
            "DELETE",
            &one_template,
            &app.send(admin(Method::DELETE, &one, None)).await,
        );
        oracle.check("GET", &one_template, &app.send(admin(Method::GET, &one, None)).await);
    }
}

async fn drive_cancel(oracle: &mut Oracle) {
    let anvil = Anvil::start_with(BASE_CHAIN_ID, &["--no-mining"]);
    let app = transfer_app(&anvil, &[]).await;
    let agent = crate::helpers::chain::funded_agent(&app, &anvil, Some(0.5)).await;
    let order = json!({"chain": "base", "to": fresh_address().to_string(), "amount": "0.01"});
    let (status, sent) = crate::money::transfers_api::post_transfer(&app, &agent, order).await;
    assert_eq!(status, StatusCode::CREATED, "{sent}");
    let template = "/api/agents/{id}/transfers/{transfer_id}/cancel";
    let path = format!(
        "/api/agents/{}/transfers/{}/cancel",
        agent.id,
        sent["id"].as_str().expect("id")
    );
    let cancelled = send(&app, Method::POST, &path, Some(&agent.token), None).await;
    assert_eq!(cancelled.status, StatusCode::OK, "{}", cancelled.text);
    oracle.check("POST", template, &cancelled);
    let unknown = format!("/api/agents/{}/transfers/{}/cancel", agent.id, uuid::Uuid::new_v4());
    oracle.check(
        "POST",
        template,
        &send(&app, Method::POST, &unknown, Some(&agent.token), None).await,
    );
}

/// A sweep (§20): refused with the agent token alone, to an address that is not an owner's, then made by the owner.
async fn drive_sweep(oracle: &mut Oracle) {
    let anvil = Anvil::start(BASE_CHAIN_ID);
    let app = transfer_app(&anvil, &[]).await;
    let owner = owner_signer();
    let body = json!({"name": "swept", "chains": ["base"], "capabilities": ["read"], "spending_cap": 0.001,
        "owner_addresses": {"base": checksummed(&owner)}});
    let created = send(&app, Method::POST, "/api/agents", None, Some(body)).await;
    let (id, token) = (
        created.body["id"].as_str().unwrap().to_string(),
        created.body["access_token"].as_str().unwrap().to_string(),
    );
    let address = created.body["wallet_addresses"]["base"]
        .as_str()
        .unwrap()
        .parse()
        .unwrap();
    anvil.set_balance(address, wei(ONE_ETH)).await;
    let template = "/api/agents/{id}/sweep";
    let path = format!("/api/agents/{id}/sweep");
    let to_owner = json!({"chain": "base", "to": checksummed(&owner)});
    let refused = send(&app, Method::POST, &path, Some(&token), Some(to_owner.clone())).await;
    oracle.check("POST", template, &refused);
    let session = owner_token(&app, &id, oracle).await;
    let elsewhere = json!({"chain": "base", "to": fresh_address().to_string()});
    let foreign = app.build(Method::POST, &path, None, Some(elsewhere));
    oracle.check(
        "POST",
        template,
        &app.send(foreign.header(OWNER_HEADER, &session)).await,
    );
    let unknown = json!({"chain": "base", "to": checksummed(&owner), "asset": "DOGE"});
    let unknown = app.build(Method::POST, &path, None, Some(unknown));
    oracle.check(
        "POST",
        template,
        &app.send(unknown.header(OWNER_HEADER, &session)).await,
    );
    let swept = app.build(Method::POST, &path, None, Some(to_owner));
    let swept = app.send(swept.header(OWNER_HEADER, &session)).await;
    assert_eq!(swept.status, StatusCode::CREATED, "{}", swept.text);
    oracle.check("POST", template, &swept);
}

fn operations(doc: &Value) -> Vec<(String, String, Value)> {
    let mut all = Vec::new();
    for (path, item) in doc["paths"].as_object().expect("paths") {
        for (method, op) in item.as_object().expect("path item") {
            all.push((method.to_ascii_uppercase(), path.clone(), op.clone()));
        }
    }
    all
}

#[test]
fn every_operation_has_a_summary_a_description_and_its_body_errors() {
    let doc = serde_json::to_value(agentd::http::openapi()).unwrap();
    for (method, path, op) in operations(&doc) {
        for field in ["summary", "description", "operationId"] {
            let text = op[field].as_str().unwrap_or_default();
            assert!(!text.trim().is_empty(), "{method} {path} has no {field}");
        }
        if op.get("requestBody").is_some() {
            for status in ["400", "413", "422"] {
                assert!(
                    op["responses"][status].is_object(),
                    "{method} {path} does not document {status}"
                );
            }
        }
        // Query parameters are documented in the query (a path parameter must appear in the path).
        for parameter in op["parameters"].as_array().into_iter().flatten() {
            if parameter["in"] == "path" {
                let name = parameter["name"].as_str().unwrap();
                assert!(
                    path.contains(&format!("{{{name}}}")),
                    "{method} {path}: {name} is not in the path"
                );
            }
        }
    }
}

/// The main success of an operation: its lowest 2xx status.
fn main_success(op: &Value) -> String {
    op["responses"]
        .as_object()
        .expect("responses")
        .keys()
        .filter(|status| status.starts_with('2'))
        .min()
        .cloned()
        .expect("a success status")
}

/// Every request body, the main success response of every operation that has a body and every error response
/// carry an example for each media type, and each example validates against the schema beside it.
#[test]
fn every_operation_has_examples_that_validate_against_their_schemas() {
    let value = serde_json::to_value(agentd::http::openapi()).unwrap();
    let doc = Document(value.clone());
    let mut checked = 0;
    let mut errors = 0;
    for (method, path, op) in operations(&value) {
        let success = main_success(&op);
        let mut contents = vec![(success.clone(), &op["responses"][&success]["content"])];
        for (status, response) in op["responses"].as_object().expect("responses") {
            if status.starts_with('4') || status.starts_with('5') {
                let example = &response["content"]["application/json"]["example"];
                let code = example["error"]["code"].as_str();
                assert!(
                    code.is_some_and(|c| !c.is_empty()),
                    "{method} {path} {status}: an error example with a code: {example}"
                );
                errors += 1;
                contents.push((status.clone(), &response["content"]));
            }
        }
        if let Some(body) = op.get("requestBody") {
            contents.push(("request body".to_string(), &body["content"]));
        }
        for (what, content) in contents {
            for (media, content) in content.as_object().into_iter().flatten() {
                let example = content
                    .get("example")
                    .unwrap_or_else(|| panic!("{method} {path} {what} ({media}) has no example"));
                let schema = content.get("schema").expect("a schema beside the example");
                let problems = doc.validate(schema, example);
                assert!(
                    problems.is_empty(),
                    "{method} {path} {what} ({media}): the example does not validate: {problems:#?}"
                );
                checked += 1;
            }
        }
    }
    // 33 success bodies but the two 204s, plus 10 request bodies, plus every error response.
    assert!(checked >= 40 + errors, "only {checked} examples checked");
    assert!(errors >= 200, "only {errors} error examples checked");
}

/// The validator the examples go through refuses what the schemas' constraints refuse (so the test above can fail).
#[test]
fn the_example_validator_applies_the_schemas_constraints() {
    let value = serde_json::to_value(agentd::http::openapi()).unwrap();
    let doc = Document(value.clone());
    let create = &value["paths"]["/api/agents"]["post"]["requestBody"]["content"]["application/json"];
    let mut example = create["example"].clone();
    assert!(doc.validate(&create["schema"], &example).is_empty());
    for (field, bad) in [
        ("name", json!("")),
        ("description", json!("x".repeat(1001))),
        ("chains", json!([])),
        ("spending_cap", json!(-1)),
        ("capabilities", json!(["fly"])),
        ("unknown", json!(1)),
    ] {
        let good = example.get(field).cloned();
        example[field] = bad.clone();
        assert!(
            !doc.validate(&create["schema"], &example).is_empty(),
            "{field} = {bad} passed"
        );
        match good {
            Some(good) => example[field] = good,
            None => {
                example.as_object_mut().unwrap().remove(field);
            }
        }
    }
    let detail = doc.component("AgentDetailView");
    let mut agent =
        value["paths"]["/api/agents/{id}"]["get"]["responses"]["200"]["content"]["application/json"]["example"].clone();
    assert!(doc.validate(detail, &agent).is_empty());
    agent["id"] = json!("not-a-uuid");
    agent["created_at"] = json!("yesterday");
    assert_eq!(doc.validate(detail, &agent).len(), 2, "{agent}");
    let policy = doc.component("PolicyBody");
    assert!(!doc.validate(policy, &json!({"approval_ttl_secs": 604_801})).is_empty());
}

/// Every operation documents 500 `internal_error`; the ones that reach a chain node or the LLM document 502, 503
/// and 504 too.
#[test]
fn every_operation_documents_its_server_errors() {
    const UPSTREAM: &[(&str, &str)] = &[
        ("POST", "/api/agents/{id}/transfers"),
        ("POST", "/api/agents/{id}/transfers/preview"),
        ("POST", "/api/agents/{id}/transfers/{transfer_id}/approve"),
        ("POST", "/api/agents/{id}/transfers/{transfer_id}/cancel"),
        ("POST", "/api/agents/{id}/sweep"),
        ("POST", "/api/agents/{id}/calls"),
        ("POST", "/api/agents/{id}/calls/simulate"),
        ("POST", "/api/agents/{id}/x402/fetch"),
        ("POST", "/api/chat"),
        ("POST", "/api/chat/stream"),
    ];
    let doc = serde_json::to_value(agentd::http::openapi()).unwrap();
    for (method, path, op) in operations(&doc) {
        let mut statuses = vec!["500"];
        if UPSTREAM.contains(&(method.as_str(), path.as_str())) {
            statuses.extend(["502", "503", "504"]);
        }
        for status in statuses {
            let response = &op["responses"][status];
            assert_eq!(
                response["content"]["application/json"]["schema"]["$ref"], "#/components/schemas/ErrorBody",
                "{method} {path} does not document {status}: {response}"
            );
        }
    }
    let transfer = &doc["paths"]["/api/agents/{id}/transfers/{transfer_id}/approve"]["post"]["responses"];
    for (status, code) in [
        ("500", "internal_error"),
        ("502", "upstream_unavailable"),
        ("502", "token_unavailable"),
        ("503", "token_decimals_mismatch"),
        ("504", "upstream_timeout"),
    ] {
        let description = transfer[status]["description"].as_str().unwrap();
        assert!(
            description.contains(code),
            "{status} does not name {code}: {description}"
        );
    }
}

/// OpenAPI requires a `description` on every response object: without it, generators that validate the document
/// (openapi-python-client) refuse it whole.
#[test]
fn every_response_has_a_description() {
    let doc = serde_json::to_value(agentd::http::openapi()).unwrap();
    for (method, path, op) in operations(&doc) {
        for (status, response) in op["responses"].as_object().expect("responses") {
            let text = response["description"].as_str().unwrap_or_default();
            assert!(!text.trim().is_empty(), "{method} {path} {status} has no description");
        }
    }
}

#[test]
fn the_document_says_what_the_service_requires() {
    let doc = serde_json::to_value(agentd::http::openapi()).unwrap();
    let conversations = doc["paths"]["/api/conversations"]["get"]["parameters"]
        .as_array()
        .unwrap();
    let agent_id = conversations
        .iter()
        .find(|p| p["name"] == "agent_id")
        .expect("agent_id");
    assert_eq!(agent_id["in"], "query");
    assert_eq!(agent_id["required"], true);
    let fund = &doc["paths"]["/api/agents/{id}/fund"]["post"]["requestBody"];
    assert_eq!(fund["required"], false, "{fund}");
    assert_eq!(
        fund["content"]["application/json"]["schema"]["$ref"], "#/components/schemas/FundRequest",
        "an object, never null: {fund}"
    );
    let links = &doc["paths"]["/api/agents"]["post"]["responses"]["201"]["links"];
    assert_eq!(links["GetAgent"]["operationId"], "get_agent", "{links}");
    assert_eq!(links["GetAgent"]["parameters"]["path.id"], "$response.body#/id");
    assert_eq!(
        links["ListConversations"]["parameters"]["query.agent_id"],
        "$response.body#/id"
    );
    for (method, path, op) in operations(&doc) {
        if path.starts_with("/api/agents/{id}") && !path.contains("{transfer_id}") {
            let id = op["operationId"].as_str().unwrap();
            assert!(
                links.as_object().unwrap().values().any(|l| l["operationId"] == id),
                "no link from POST /api/agents to {method} {path}"
            );
        }
    }
}

#[tokio::test]
async fn a_body_that_is_not_an_object_is_refused() {
    let app = spawn_app().await;
    let agent = app.create_default_agent().await;
    let fund = format!("/api/agents/{}/fund", agent.id);
    for body in [
        json!([null, null]),
        json!([null, null, null]),
        json!(null),
        json!("base"),
    ] {
        let answer = send(&app, Method::POST, &fund, Some(&agent.token), Some(body.clone())).await;
        assert_eq!(
            answer.status,
            StatusCode::UNPROCESSABLE_ENTITY,
            "{body}: {}",
            answer.text
        );
        assert_eq!(answer.body["error"]["code"], "validation_failed", "{body}");
    }
    let update = format!("/api/agents/{}", agent.id);
    let answer = send(&app, Method::PUT, &update, Some(&agent.token), Some(json!([]))).await;
    assert_eq!(answer.status, StatusCode::UNPROCESSABLE_ENTITY, "{}", answer.text);
}

/// The x402 fetch: a free resource, a paid one (the payment and its single read), a refusal.
async fn drive_x402(oracle: &mut Oracle) {
    use crate::helpers::paywall::{Paywall, PaywallSetup, entry_v2};
    let anvil = Anvil::start(BASE_CHAIN_ID);
    let app = transfer_app(&anvil, &[("X402_ALLOW_PRIVATE", "true")]).await;
    let agent = crate::helpers::chain::funded_agent(&app, &anvil, Some(0.5)).await;
    let usdc = crate::helpers::solidity::usdc_on_base(&anvil).await;
    crate::helpers::solidity::mint(
        &anvil,
        usdc,
        wallet(&agent),
        alloy::primitives::U256::from(1_000_000u64),
    )
    .await;
    let pay_to = alloy::primitives::Address::repeat_byte(0x42);
    let entry = entry_v2(BASE_CHAIN_ID, usdc, 10_000, pay_to, "USD Coin", "2");
    let paywall = Paywall::start(PaywallSetup::new(2, vec![entry], anvil.url(), BASE_CHAIN_ID)).await;
    let path = format!("/api/agents/{}/x402/fetch", agent.id);
    let template = "/api/agents/{id}/x402/fetch";
    let token = Some(agent.token.as_str());
    for (url, max) in [("/free", "0.05"), ("/paid", "0.05"), ("/paid", "0.001")] {
        let body = json!({"url": paywall.url(url), "max_amount": max});
        let answer = send(&app, Method::POST, &path, token, Some(body)).await;
        oracle.check("POST", template, &answer);
        if url == "/paid" && answer.status == StatusCode::OK {
            let id = answer.body["payment"]["id"].as_str().expect("a payment id");
            let read = format!("/api/agents/{}/transfers/{id}", agent.id);
            oracle.check(
                "GET",
                "/api/agents/{id}/transfers/{transfer_id}",
                &send(&app, Method::GET, &read, token, None).await,
            );
        }
    }
}
