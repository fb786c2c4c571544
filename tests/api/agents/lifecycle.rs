//! Agents (docs/api.md §3): creation with its defaults and validation, listing, detail, partial update, soft delete,
//! and the optional admin token on creation and listing.

use reqwest::{Method, StatusCode};
use serde_json::{Value, json};

use crate::helpers::{
    CreatedAgent, TestApp, assert_checksummed, assert_error, assert_error_status, assert_no_secret_fields, spawn_app,
    spawn_app_with,
};

const CREATE_FIELDS: &[&str] = &[
    "id",
    "name",
    "description",
    "chains",
    "capabilities",
    "spending_cap",
    "wallet_addresses",
    "access_token",
    "is_active",
    "created_at",
];
const SUMMARY_FIELDS: &[&str] = &[
    "id",
    "name",
    "description",
    "chains",
    "capabilities",
    "is_active",
    "created_at",
];

fn strings(value: &Value) -> Vec<String> {
    value
        .as_array()
        .unwrap_or_else(|| panic!("expected an array, got {value}"))
        .iter()
        .map(|v| v.as_str().expect("array of strings").to_string())
        .collect()
}

fn assert_timestamp(value: &Value) {
    let text = value
        .as_str()
        .unwrap_or_else(|| panic!("timestamp is a string: {value}"));
    chrono::DateTime::parse_from_rfc3339(text).unwrap_or_else(|e| panic!("timestamp {text} is RFC 3339: {e}"));
}

async fn assert_create_refused(app: &TestApp, body: Value) {
    let response = app.create_agent(body.clone()).await;
    assert_error(&response, StatusCode::UNPROCESSABLE_ENTITY, "validation_failed");
    let (_, list) = app.list_agents("").await;
    assert_eq!(list, json!([]), "a refused creation stored nothing ({body})");
}

#[tokio::test]
async fn creating_an_agent_returns_201_with_every_field() {
    let app = spawn_app().await;

    let (status, body) = app
        .create_agent(json!({"name": "Trader", "description": "buys low"}))
        .await;

    assert_eq!(status, StatusCode::CREATED, "{body}");
    for field in CREATE_FIELDS {
        assert!(body.get(*field).is_some(), "missing {field} in {body}");
    }
    uuid::Uuid::parse_str(body["id"].as_str().unwrap()).expect("id is a uuid");
    assert_eq!(body["name"], "Trader");
    assert_eq!(body["description"], "buys low");
    assert_eq!(body["chains"], json!(["ethereum", "base"]));
    assert_eq!(body["capabilities"], json!(["read"]));
    assert_eq!(body["spending_cap"].as_f64(), Some(0.0), "{body}");
    assert_eq!(body["is_active"], true);
    assert_timestamp(&body["created_at"]);

    let wallets = body["wallet_addresses"]
        .as_object()
        .expect("wallet_addresses is an object");
    let mut keys: Vec<_> = wallets.keys().cloned().collect();
    keys.sort();
    assert_eq!(keys, ["base", "ethereum"]);
    let ethereum = wallets["ethereum"].as_str().unwrap();
    assert_checksummed(ethereum);
    assert_eq!(wallets["base"], ethereum, "EVM chains share one address");

    let token = body["access_token"].as_str().unwrap();
    let random = token.strip_prefix("agt_").expect("token starts with agt_");
    assert!(random.len() >= 43, "at least 43 characters after agt_: {token}");
    assert!(
        random
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_'),
        "base64url characters only: {token}"
    );

    let mut without_token = body.clone();
    without_token.as_object_mut().unwrap().remove("access_token");
    assert_no_secret_fields(&without_token);
}

#[tokio::test]
async fn every_agent_gets_its_own_wallet_and_token() {
    let app = spawn_app().await;

    let first = app.create_default_agent().await;
    let second = app.create_default_agent().await;

    assert_ne!(first.id, second.id);
    assert_ne!(first.token, second.token);
    assert_ne!(first.address("ethereum"), second.address("ethereum"));
}

#[tokio::test]
async fn creating_an_agent_folds_duplicate_chains_and_keeps_their_order() {
    let app = spawn_app().await;

    let agent = app
        .create_agent_ok(json!({"name": "a", "chains": ["base", "optimism", "base", "optimism"]}))
        .await;

    assert_eq!(agent.body["chains"], json!(["base", "optimism"]));
    let wallets = agent.body["wallet_addresses"].as_object().unwrap();
    assert_eq!(wallets.len(), 2, "{}", agent.body);
    assert_eq!(agent.address("base"), agent.address("optimism"));
}

#[tokio::test]
async fn creating_an_agent_with_empty_capabilities_gives_it_read() {
    let app = spawn_app().await;

    let agent = app.create_agent_ok(json!({"name": "a", "capabilities": []})).await;

    assert_eq!(agent.body["capabilities"], json!(["read"]));
}

#[tokio::test]
async fn creating_an_agent_keeps_the_given_capabilities_and_cap() {
    let app = spawn_app().await;

    let agent = app
        .create_agent_ok(json!({
            "name": "a",
            "capabilities": ["read", "compare", "transact", "analytics"],
            "spending_cap": 0.25,
            "description": null,
        }))
        .await;

    let mut capabilities = strings(&agent.body["capabilities"]);
    capabilities.sort();
    assert_eq!(capabilities, ["analytics", "compare", "read", "transact"]);
    assert_eq!(agent.body["spending_cap"].as_f64(), Some(0.25));
    assert_eq!(agent.body["description"], Value::Null);
}

#[tokio::test]
async fn names_and_descriptions_at_their_limits_are_accepted() {
    let app = spawn_app().await;

    // Limits count characters, not bytes.
    let name = "é".repeat(100);
    let description = "ü".repeat(1000);
    let agent = app
        .create_agent_ok(json!({"name": name, "description": description}))
        .await;

    assert_eq!(agent.body["name"], name.as_str());
    assert_eq!(agent.body["description"], description.as_str());
}

#[tokio::test]
async fn creating_an_agent_without_a_name_is_refused() {
    let app = spawn_app().await;
    assert_create_refused(&app, json!({"description": "no name"})).await;
}

#[tokio::test]
async fn creating_an_agent_with_an_empty_or_blank_name_is_refused() {
    let app = spawn_app().await;
    assert_create_refused(&app, json!({"name": ""})).await;
    assert_create_refused(&app, json!({"name": "   \t "})).await;
}

#[tokio::test]
async fn creating_an_agent_with_a_name_over_100_characters_is_refused() {
    let app = spawn_app().await;
    assert_create_refused(&app, json!({"name": "x".repeat(101)})).await;
}

#[tokio::test]
async fn creating_an_agent_with_a_description_over_1000_characters_is_refused() {
    let app = spawn_app().await;
    assert_create_refused(&app, json!({"name": "a", "description": "x".repeat(1001)})).await;
}

#[tokio::test]
async fn creating_an_agent_with_an_unknown_chain_is_refused() {
    let app = spawn_app().await;
    assert_create_refused(&app, json!({"name": "a", "chains": ["ethereum", "dogecoin"]})).await;
    assert_create_refused(&app, json!({"name": "a", "chains": ["Ethereum"]})).await;
}

#[tokio::test]
async fn creating_an_agent_with_an_empty_chain_list_is_refused() {
    let app = spawn_app().await;
    assert_create_refused(&app, json!({"name": "a", "chains": []})).await;
}

#[tokio::test]
async fn creating_an_agent_with_an_unknown_capability_is_refused() {
    let app = spawn_app().await;
    assert_create_refused(&app, json!({"name": "a", "capabilities": ["read", "fly"]})).await;
}

#[tokio::test]
async fn creating_an_agent_with_a_negative_spending_cap_is_refused() {
    let app = spawn_app().await;
    assert_create_refused(&app, json!({"name": "a", "spending_cap": -0.5})).await;
}

#[tokio::test]
async fn creating_an_agent_with_an_unknown_field_is_refused() {
    let app = spawn_app().await;
    assert_create_refused(&app, json!({"name": "a", "colour": "blue"})).await;
    assert_create_refused(&app, json!({"name": "a", "is_active": false})).await;
}

#[tokio::test]
async fn creating_an_agent_with_an_invalid_owner_address_is_refused() {
    let app = spawn_app().await;
    assert_create_refused(&app, json!({"name": "a", "owner_addresses": {"ethereum": "0x1234"}})).await;
    assert_create_refused(
        &app,
        json!({"name": "a", "owner_addresses": {"ethereum": "not an address"}}),
    )
    .await;
}

#[tokio::test]
async fn creating_an_agent_with_an_owner_address_on_an_unknown_chain_is_refused() {
    let app = spawn_app().await;
    let owner = alloy::signers::local::PrivateKeySigner::random();
    assert_create_refused(
        &app,
        json!({"name": "a", "owner_addresses": {"dogecoin": crate::helpers::checksummed(&owner)}}),
    )
    .await;
}

#[tokio::test]
async fn listing_agents_gives_summaries_newest_first() {
    let app = spawn_app().await;
    let mut created = Vec::new();
    for name in ["first", "second", "third"] {
        created.push(app.create_agent_ok(json!({"name": name})).await);
    }

    let (status, list) = app.list_agents("").await;

    assert_eq!(status, StatusCode::OK, "{list}");
    let items = list.as_array().expect("a JSON array");
    let names: Vec<_> = items.iter().map(|a| a["name"].clone()).collect();
    assert_eq!(names, [json!("third"), json!("second"), json!("first")]);
    assert_eq!(items[0]["id"], created[2].id.as_str());
    for item in items {
        for field in SUMMARY_FIELDS {
            assert!(item.get(*field).is_some(), "summary lacks {field}: {item}");
        }
        for field in ["wallet_addresses", "access_token", "token_hash", "owner_addresses"] {
            assert!(item.get(field).is_none(), "summary has {field}: {item}");
        }
        assert_no_secret_fields(item);
        let text = item.to_string();
        for agent in &created {
            assert!(!text.contains(&agent.token), "a token in the list: {text}");
        }
    }
}

#[tokio::test]
async fn listing_agents_paginates_with_limit_and_offset() {
    let app = spawn_app().await;
    let mut ids = Vec::new();
    for name in ["first", "second", "third"] {
        ids.push(app.create_agent_ok(json!({"name": name})).await.id);
    }
    let ids_of = |list: &Value| -> Vec<String> {
        list.as_array()
            .unwrap_or_else(|| panic!("a JSON array: {list}"))
            .iter()
            .map(|a| a["id"].as_str().unwrap().to_string())
            .collect()
    };

    let (_, page) = app.list_agents("?limit=1").await;
    assert_eq!(ids_of(&page), [ids[2].clone()]);
    let (_, page) = app.list_agents("?limit=1&offset=1").await;
    assert_eq!(ids_of(&page), [ids[1].clone()]);
    let (_, page) = app.list_agents("?offset=1").await;
    assert_eq!(ids_of(&page), [ids[1].clone(), ids[0].clone()]);
    let (_, page) = app.list_agents("?limit=2&offset=3").await;
    assert_eq!(page, json!([]));
    let (_, page) = app.list_agents("?limit=500").await;
    assert_eq!(ids_of(&page).len(), 3);
}

#[tokio::test]
async fn the_agent_detail_has_spent_and_updated_at_but_no_token() {
    let app = spawn_app().await;
    let agent = app.create_default_agent().await;

    let (status, detail) = app.get_agent(&agent.id, &agent.token).await;

    assert_eq!(status, StatusCode::OK, "{detail}");
    for field in CREATE_FIELDS.iter().filter(|f| **f != "access_token") {
        assert_eq!(detail[*field], agent.body[*field], "{field} differs from creation");
    }
    assert!(detail.get("access_token").is_none(), "{detail}");
    assert!(!detail.to_string().contains(&agent.token));
    assert_timestamp(&detail["updated_at"]);
    let spent = detail["spent"].as_object().expect("spent is an object");
    for (chain, amount) in spent {
        let amount = amount
            .as_str()
            .unwrap_or_else(|| panic!("spent on {chain} is a string"));
        let value: f64 = amount.parse().expect("spent is a decimal string");
        assert_eq!(value, 0.0, "a new agent has spent nothing on {chain}");
    }
    assert_no_secret_fields(&detail);
}

#[tokio::test]
async fn updating_an_agent_changes_only_the_fields_given() {
    let app = spawn_app().await;
    let agent = app
        .create_agent_ok(
            json!({"name": "old", "description": "kept", "capabilities": ["read", "compare"], "spending_cap": 1}),
        )
        .await;

    let (status, detail) = app.put_agent(&agent.id, &agent.token, json!({"name": "new"})).await;

    assert_eq!(status, StatusCode::OK, "{detail}");
    assert_eq!(detail["name"], "new");
    for field in [
        "description",
        "chains",
        "capabilities",
        "wallet_addresses",
        "is_active",
        "created_at",
    ] {
        assert_eq!(detail[field], agent.body[field], "{field} changed");
    }
    assert_eq!(detail["spending_cap"].as_f64(), Some(1.0));
    assert!(
        detail.get("spent").is_some() && detail.get("updated_at").is_some(),
        "{detail}"
    );
    assert!(detail.get("access_token").is_none());

    let (_, reread) = app.get_agent(&agent.id, &agent.token).await;
    assert_eq!(reread["name"], "new");
    assert_eq!(reread["description"], "kept");
}

#[tokio::test]
async fn updating_every_field_stores_the_new_values() {
    let app = spawn_app().await;
    let agent = app.create_default_agent().await;

    let (status, detail) = app
        .put_agent(
            &agent.id,
            &agent.token,
            json!({
                "name": "renamed",
                "description": "now described",
                "chains": ["base"],
                "capabilities": ["read", "transact"],
                "spending_cap": 1.5,
            }),
        )
        .await;

    assert_eq!(status, StatusCode::OK, "{detail}");
    let (_, reread) = app.get_agent(&agent.id, &agent.token).await;
    for body in [&detail, &reread] {
        assert_eq!(body["name"], "renamed");
        assert_eq!(body["description"], "now described");
        assert_eq!(body["chains"], json!(["base"]));
        let mut capabilities = strings(&body["capabilities"]);
        capabilities.sort();
        assert_eq!(capabilities, ["read", "transact"]);
        assert_eq!(body["spending_cap"].as_f64(), Some(1.5));
        assert_eq!(body["wallet_addresses"]["base"], agent.address("base").as_str());
    }
}

#[tokio::test]
async fn updating_the_description_to_null_clears_it() {
    let app = spawn_app().await;
    let agent = app
        .create_agent_ok(json!({"name": "a", "description": "something"}))
        .await;

    let (status, detail) = app
        .put_agent(&agent.id, &agent.token, json!({"description": null}))
        .await;

    assert_eq!(status, StatusCode::OK, "{detail}");
    assert_eq!(detail["description"], Value::Null);
    assert_eq!(detail["name"], "a");
    let (_, reread) = app.get_agent(&agent.id, &agent.token).await;
    assert_eq!(reread["description"], Value::Null);
}

#[tokio::test]
async fn updating_capabilities_to_an_empty_list_gives_read() {
    let app = spawn_app().await;
    let agent = app
        .create_agent_ok(json!({"name": "a", "capabilities": ["compare"]}))
        .await;

    let (status, detail) = app
        .put_agent(&agent.id, &agent.token, json!({"capabilities": []}))
        .await;

    assert_eq!(status, StatusCode::OK, "{detail}");
    assert_eq!(detail["capabilities"], json!(["read"]));
}

#[tokio::test]
async fn adding_a_chain_adds_its_wallet_address() {
    let app = spawn_app().await;
    let agent = app.create_default_agent().await;
    let evm = agent.address("ethereum");

    let (status, detail) = app
        .put_agent(
            &agent.id,
            &agent.token,
            json!({"chains": ["ethereum", "base", "optimism", "optimism"]}),
        )
        .await;

    assert_eq!(status, StatusCode::OK, "{detail}");
    assert_eq!(detail["chains"], json!(["ethereum", "base", "optimism"]));
    assert_eq!(detail["wallet_addresses"]["optimism"], evm.as_str());
    assert_eq!(detail["wallet_addresses"]["ethereum"], evm.as_str());
    let (_, reread) = app.get_agent(&agent.id, &agent.token).await;
    assert_eq!(reread["wallet_addresses"]["optimism"], evm.as_str());
}

#[tokio::test]
async fn updating_an_agent_with_an_unknown_field_is_refused() {
    let app = spawn_app().await;
    let agent = app.create_default_agent().await;

    for body in [
        json!({"colour": "blue"}),
        json!({"is_active": false}),
        json!({"wallet_addresses": {"ethereum": agent.address("ethereum")}}),
        json!({"id": uuid::Uuid::new_v4().to_string()}),
        json!({"name": "renamed", "access_token": "agt_x"}),
    ] {
        let response = app.put_agent(&agent.id, &agent.token, body.clone()).await;
        assert_error(&response, StatusCode::UNPROCESSABLE_ENTITY, "validation_failed");
    }
    let (_, reread) = app.get_agent(&agent.id, &agent.token).await;
    assert_eq!(reread["name"], "test agent", "a refused update changed nothing");
}

#[tokio::test]
async fn updating_an_agent_with_invalid_values_is_refused() {
    let app = spawn_app().await;
    let agent = app.create_default_agent().await;

    for body in [
        json!({"name": ""}),
        json!({"name": "  "}),
        json!({"name": "x".repeat(101)}),
        json!({"description": "x".repeat(1001)}),
        json!({"chains": []}),
        json!({"chains": ["dogecoin"]}),
        json!({"capabilities": ["fly"]}),
        json!({"spending_cap": -1}),
        json!({"owner_addresses": {"ethereum": "0xnope"}}),
        json!({"name": "valid", "spending_cap": -1}),
    ] {
        let response = app.put_agent(&agent.id, &agent.token, body.clone()).await;
        assert_eq!(
            response.0,
            StatusCode::UNPROCESSABLE_ENTITY,
            "{body} gave {}",
            response.1
        );
        assert_error(&response, StatusCode::UNPROCESSABLE_ENTITY, "validation_failed");
    }
    let (_, reread) = app.get_agent(&agent.id, &agent.token).await;
    for field in ["name", "description", "chains", "capabilities", "spending_cap"] {
        assert_eq!(reread[field], agent.body[field], "a refused update changed {field}");
    }
}

#[tokio::test]
async fn deleting_an_agent_answers_204_with_an_empty_body_and_deactivates_it() {
    let app = spawn_app().await;
    let agent = app.create_default_agent().await;

    let response = app
        .send(app.build(
            Method::DELETE,
            &format!("/api/agents/{}", agent.id),
            Some(&agent.token),
            None,
        ))
        .await;

    assert_eq!(response.status, StatusCode::NO_CONTENT);
    assert!(response.text.is_empty(), "body: {:?}", response.text);
    let (status, detail) = app.get_agent(&agent.id, &agent.token).await;
    assert_eq!(status, StatusCode::OK, "detail works for inactive agents: {detail}");
    assert_eq!(detail["is_active"], false);
    assert_eq!(detail["name"], "test agent", "nothing is erased");
    assert_eq!(detail["wallet_addresses"], agent.body["wallet_addresses"]);
    let (_, list) = app.list_agents("").await;
    assert_eq!(list[0]["id"], agent.id.as_str());
    assert_eq!(list[0]["is_active"], false);
}

#[tokio::test]
async fn deleting_an_agent_twice_answers_410() {
    let app = spawn_app().await;
    let agent = app.create_default_agent().await;
    let (status, _) = app.delete_agent(&agent.id, &agent.token).await;
    assert_eq!(status, StatusCode::NO_CONTENT);

    let response = app.delete_agent(&agent.id, &agent.token).await;

    assert_error(&response, StatusCode::GONE, "agent_inactive");
}

#[tokio::test]
async fn updating_a_deleted_agent_answers_410() {
    let app = spawn_app().await;
    let agent = app.create_default_agent().await;
    app.delete_agent(&agent.id, &agent.token).await;

    let response = app.put_agent(&agent.id, &agent.token, json!({"name": "back"})).await;

    assert_error(&response, StatusCode::GONE, "agent_inactive");
    let (_, detail) = app.get_agent(&agent.id, &agent.token).await;
    assert_eq!(detail["name"], "test agent");
    assert_eq!(detail["is_active"], false);
}

#[tokio::test]
async fn with_an_admin_token_creating_and_listing_agents_require_it() {
    let app = spawn_app_with(&[("ADMIN_TOKEN", "admin-secret-1234")]).await;
    let body = json!({"name": "guarded"});

    let anonymous = app.request(Method::POST, "/api/agents", None, Some(body.clone())).await;
    assert_error_status(&anonymous, StatusCode::UNAUTHORIZED);
    let wrong = app
        .send(
            app.build(Method::POST, "/api/agents", None, Some(body.clone()))
                .bearer_auth("nope"),
        )
        .await;
    assert_error_status(&(wrong.status, wrong.body), StatusCode::UNAUTHORIZED);
    let list = app.request(Method::GET, "/api/agents", None, None).await;
    assert_error_status(&list, StatusCode::UNAUTHORIZED);

    // The helpers send the admin token when the app has one.
    let agent: CreatedAgent = app.create_agent_ok(body).await;
    let (status, list) = app.list_agents("").await;
    assert_eq!(status, StatusCode::OK, "{list}");
    assert_eq!(list[0]["id"], agent.id.as_str());
    // Agent-scoped calls still use the agent token, not the admin token.
    let (status, _) = app.get_agent(&agent.id, &agent.token).await;
    assert_eq!(status, StatusCode::OK);
}

#[tokio::test]
async fn without_an_admin_token_creating_and_listing_agents_are_open() {
    let app = spawn_app().await;

    let created = app
        .request(Method::POST, "/api/agents", None, Some(json!({"name": "open"})))
        .await;
    assert_eq!(created.0, StatusCode::CREATED, "{}", created.1);
    let list = app.request(Method::GET, "/api/agents", None, None).await;
    assert_eq!(list.0, StatusCode::OK, "{}", list.1);
}
