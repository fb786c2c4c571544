//! What the JSON-RPC proxies of the tests share: serving a router on a free local port, and relaying one call to
//! the node behind them as it was sent, its answer back as it came (502 with no body when the node is unreachable).

use axum::body::Bytes;
use axum::http::{StatusCode, header};
use axum::response::IntoResponse;

/// Serves `router` on `127.0.0.1` at a free port until the test's runtime stops; returns its URL.
pub async fn serve(router: axum::Router) -> String {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind the proxy");
    let url = format!("http://{}", listener.local_addr().expect("the proxy's address"));
    tokio::spawn(async move { axum::serve(listener, router).await });
    url
}

/// Posts `body` to `upstream` and answers with what it answered.
pub async fn relay(client: &reqwest::Client, upstream: &str, body: Bytes) -> impl IntoResponse + use<> {
    let answer = client
        .post(upstream)
        .header(header::CONTENT_TYPE.as_str(), "application/json")
        .body(body)
        .send()
        .await;
    match answer {
        Ok(answer) => {
            let body = answer.bytes().await.unwrap_or_default();
            (StatusCode::OK, [(header::CONTENT_TYPE, "application/json")], body)
        }
        Err(_) => (
            StatusCode::BAD_GATEWAY,
            [(header::CONTENT_TYPE, "application/json")],
            Bytes::new(),
        ),
    }
}
