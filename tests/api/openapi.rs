//! The OpenAPI document and the API reference page: every documented route is served, every served API route is
//! documented, and the reference page loads nothing from the internet.

use reqwest::{Method, StatusCode};

use crate::helpers::spawn_app;

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
    ("GET", "/api/agents/{id}/balances"),
    ("POST", "/api/agents/{id}/fund"),
    ("GET", "/api/agents/{id}/transactions"),
    ("GET", "/api/chains"),
    ("POST", "/api/chat"),
    ("POST", "/api/chat/stream"),
    ("GET", "/api/conversations"),
    ("DELETE", "/api/conversations/{id}"),
    ("GET", "/api/conversations/{id}/messages"),
    ("GET", "/api/conversations/{id}/stream"),
    ("GET", "/health"),
    ("GET", "/metrics"),
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
        assert_ne!(
            response.body["error"]["code"], "not_found",
            "{method} {path} fell through to the fallback"
        );
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
