//! The guarded fetch of §16, exercised directly (the endpoint comes next): the URL and address rules refuse before
//! any request is made, redirects come back unfollowed, bodies are cut, one deadline bounds the exchange, and the
//! caller's headers reach the resource while reserved ones are refused.

use std::collections::BTreeMap;
use std::time::Duration;

use agentd::config::X402Config;
use agentd::net::egress::{FetchError, FetchRequest, Fetcher};

use crate::helpers::paywall::{Paywall, PaywallSetup};

fn fetcher(allow_private: bool) -> Fetcher {
    Fetcher::new(X402Config {
        allow_private,
        offer_allow_private: false,
        max_response_bytes: 1000,
        timeout: Duration::from_secs(10),
    })
}

/// A paywall serving only its free paths (no node behind it).
async fn resource() -> Paywall {
    Paywall::start(PaywallSetup::new(2, vec![], "http://127.0.0.1:1", 8453)).await
}

fn get(url: &str) -> FetchRequest {
    FetchRequest::new(None, url, &BTreeMap::new(), None).expect("a plain GET")
}

#[tokio::test]
async fn urls_that_reach_non_global_addresses_are_refused_before_any_request() {
    let paywall = resource().await;
    let port = paywall.base.rsplit(':').next().unwrap().to_owned();
    let hostname = std::fs::read_to_string("/proc/sys/kernel/hostname")
        .expect("the machine's hostname")
        .trim()
        .to_owned();
    let resolved: Vec<_> = tokio::net::lookup_host((hostname.as_str(), 80))
        .await
        .expect("the machine's own hostname resolves")
        .collect();
    assert!(
        resolved
            .iter()
            .all(|a| agentd::net::egress::guard::non_global(a.ip()).is_some()),
        "this test needs the hostname {hostname} to resolve to this machine (loopback or private): {resolved:?}"
    );
    let fetcher = fetcher(false);
    for url in [
        paywall.url("/free"),
        format!("http://localhost:{port}/free"),
        format!("http://[::1]:{port}/free"),
        format!("http://[::ffff:127.0.0.1]:{port}/free"),
        format!("http://{hostname}:{port}/free"),
        "http://169.254.169.254/latest/meta-data/".to_owned(),
        "http://10.0.0.8/".to_owned(),
        "http://192.168.1.1/".to_owned(),
        "http://100.64.0.1/".to_owned(),
        "http://0.0.0.0/".to_owned(),
        "http://[fe80::1]/".to_owned(),
        format!("http://user:pass@127.0.0.1:{port}/free"),
        "https://user:pass@example.com/".to_owned(),
        format!("ftp://127.0.0.1:{port}/free"),
        "file:///etc/passwd".to_owned(),
    ] {
        let err = fetcher.send(&get(&url), fetcher.deadline()).await.unwrap_err();
        assert!(matches!(err, FetchError::UrlNotAllowed(_)), "{url}: {err:?}");
    }
    assert!(
        paywall.seen().is_empty(),
        "nothing reached the resource: {:?}",
        paywall.seen()
    );
}

#[tokio::test]
async fn allow_private_lets_a_local_resource_be_fetched_by_address_and_by_name() {
    let paywall = resource().await;
    let port = paywall.base.rsplit(':').next().unwrap().to_owned();
    let fetcher = fetcher(true);
    for url in [paywall.url("/free"), format!("http://localhost:{port}/free")] {
        let answer = fetcher.send(&get(&url), fetcher.deadline()).await.expect(&url);
        assert_eq!((answer.status, answer.text().as_str()), (200, "free content"));
    }
    // The scheme and credential rules hold even then.
    let err = fetcher
        .send(&get(&format!("http://u:p@127.0.0.1:{port}/free")), fetcher.deadline())
        .await
        .unwrap_err();
    assert!(matches!(err, FetchError::UrlNotAllowed(_)), "{err:?}");
    assert_eq!(paywall.seen().len(), 2);
}

#[tokio::test]
async fn a_host_that_does_not_resolve_is_its_own_error() {
    for allow_private in [false, true] {
        let fetcher = fetcher(allow_private);
        let err = fetcher
            .send(&get("http://nothing-here.invalid/x"), fetcher.deadline())
            .await
            .unwrap_err();
        assert_eq!(err, FetchError::HostNotFound);
    }
}

#[tokio::test]
async fn a_redirect_is_handed_back_unfollowed() {
    let paywall = resource().await;
    let fetcher = fetcher(true);
    let answer = fetcher
        .send(&get(&paywall.url("/redirect")), fetcher.deadline())
        .await
        .unwrap();
    assert_eq!(answer.status, 302);
    assert_eq!(answer.header("Location"), Some("/paid"));
    let paths: Vec<_> = paywall.seen().into_iter().map(|s| s.path).collect();
    assert_eq!(paths, ["/redirect"], "the target was not requested");
}

#[tokio::test]
async fn a_body_longer_than_the_limit_is_cut_and_marked() {
    let paywall = resource().await;
    let fetcher = fetcher(true);
    let long = fetcher
        .send(&get(&paywall.url("/large/5000")), fetcher.deadline())
        .await
        .unwrap();
    assert_eq!((long.body.len(), long.truncated), (1000, true));
    let exact = fetcher
        .send(&get(&paywall.url("/large/1000")), fetcher.deadline())
        .await
        .unwrap();
    assert_eq!((exact.body.len(), exact.truncated), (1000, false));
}

#[tokio::test]
async fn the_deadline_bounds_the_whole_exchange() {
    let paywall = resource().await;
    let fetcher = fetcher(true);
    // The resource takes 5 s; the exchange's deadline is already close.
    let deadline = tokio::time::Instant::now() + Duration::from_millis(300);
    let err = fetcher.send(&get(&paywall.url("/slow")), deadline).await.unwrap_err();
    assert_eq!(err, FetchError::Timeout);
    // A deadline that has passed gives no second chance to a later request of the same exchange.
    let err = fetcher.send(&get(&paywall.url("/free")), deadline).await.unwrap_err();
    assert_eq!(err, FetchError::Timeout);
}

#[tokio::test]
async fn caller_headers_body_and_query_arrive_and_answer_header_names_are_lower_case() {
    let paywall = resource().await;
    let fetcher = fetcher(true);
    let headers: BTreeMap<String, String> = [("X-Api-Key", "k-123"), ("Accept", "application/json")]
        .into_iter()
        .map(|(k, v)| (k.to_owned(), v.to_owned()))
        .collect();
    let request = FetchRequest::new(
        Some("post"),
        &paywall.url("/echo?q=secret"),
        &headers,
        Some("hello".into()),
    )
    .unwrap();
    let answer = fetcher.send(&request, fetcher.deadline()).await.unwrap();
    assert_eq!(answer.status, 200);
    assert_eq!(answer.headers.get("x-mixed-case").map(String::as_str), Some("Yes"));
    assert!(answer.headers.keys().all(|k| *k == k.to_ascii_lowercase()));
    let echoed: serde_json::Value = serde_json::from_slice(&answer.body).unwrap();
    assert_eq!(echoed["method"], "POST");
    assert_eq!(echoed["body"], "hello");
    assert_eq!(echoed["headers"]["x-api-key"], "k-123");
    let port = paywall.base.rsplit(':').next().unwrap();
    assert_eq!(echoed["headers"]["host"], format!("127.0.0.1:{port}"));
    assert_eq!(paywall.seen()[0].query.as_deref(), Some("q=secret"));
    for reserved in [
        "Host",
        "Transfer-Encoding",
        "Connection",
        "Content-Length",
        "Payment-Signature",
        "X-Payment",
    ] {
        let headers = BTreeMap::from([(reserved.to_owned(), "x".to_owned())]);
        let err = FetchRequest::new(None, &paywall.url("/echo"), &headers, None).unwrap_err();
        assert!(
            matches!(err, FetchError::Invalid { field: "headers", .. }),
            "{reserved}: {err:?}"
        );
    }
}
