//! A JSON-RPC proxy in front of a node that answers every call only after a delay: a slow (or far) node, for tests
//! of what the service holds while it waits on one.

use std::time::Duration;

use axum::body::Bytes;
use axum::extract::State;
use axum::response::IntoResponse;

#[derive(Clone)]
struct Upstream {
    client: reqwest::Client,
    url: String,
    delay: Duration,
}

/// A running proxy; it stops with the test's runtime.
pub struct SlowRpc {
    url: String,
}

impl SlowRpc {
    /// Forwards every POST to `upstream` after `delay`.
    pub async fn start(upstream: &str, delay: Duration) -> SlowRpc {
        let state = Upstream {
            client: reqwest::Client::new(),
            url: upstream.to_string(),
            delay,
        };
        let router = axum::Router::new()
            .route("/", axum::routing::post(forward))
            .with_state(state);
        let url = super::relay::serve(router).await;
        SlowRpc { url }
    }

    /// The URL to give the service as `RPC_URL_<CHAIN>`.
    pub fn url(&self) -> &str {
        &self.url
    }
}

async fn forward(State(upstream): State<Upstream>, body: Bytes) -> impl IntoResponse {
    tokio::time::sleep(upstream.delay).await;
    super::relay::relay(&upstream.client, &upstream.url, body).await
}
