//! Request bodies are limited before they are read, on every route, before authentication (docs/api.md §15): the
//! compiled binary is sent bodies far over the limit and its peak memory is read from `/proc`.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::Duration;

use axum::body::Bytes;
use reqwest::StatusCode;
use serde_json::{Value, json};

use crate::helpers::{ENCRYPTION_KEY, ServerProcess, TOKEN_HEADER, spawn_app, sqlite_url};

/// 64 KiB of JSON whitespace, sent again and again.
static CHUNK: [u8; 64 * 1024] = [b' '; 64 * 1024];

/// The process's peak resident set (`VmHWM`), in bytes.
fn peak_rss(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).expect("read /proc/<pid>/status");
    let line = status.lines().find(|l| l.starts_with("VmHWM:")).expect("a VmHWM line");
    let kib: u64 = line
        .split_whitespace()
        .nth(1)
        .and_then(|n| n.parse().ok())
        .expect("VmHWM in kB");
    kib * 1024
}

fn start_server(dir: &tempfile::TempDir) -> ServerProcess {
    let db = sqlite_url(dir.path());
    ServerProcess::start(
        &[
            ("DATABASE_URL", &db),
            ("BIND_ADDR", "127.0.0.1:0"),
            ("ENCRYPTION_KEY", ENCRYPTION_KEY),
        ],
        dir.path(),
    )
}

async fn create_agent(base: &str) -> String {
    let response = reqwest::Client::new()
        .post(format!("{base}/api/agents"))
        .json(&json!({"name": "big bodies"}))
        .send()
        .await
        .expect("agentd answers");
    assert_eq!(response.status(), StatusCode::CREATED);
    let body: Value = response.json().await.unwrap();
    body["access_token"].as_str().unwrap().to_string()
}

/// A request head written by hand, so that the declared length need not be sent; the status line read back.
fn status_of_raw_request(addr: std::net::SocketAddr, head: &str) -> String {
    let mut stream = TcpStream::connect(addr).expect("connect to agentd");
    stream.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    stream.write_all(head.as_bytes()).unwrap();
    stream.write_all(b"{\"jsonrpc\":").unwrap();
    let mut answer = Vec::new();
    let mut buf = [0u8; 4096];
    while !answer.windows(2).any(|w| w == b"\r\n") {
        match stream.read(&mut buf) {
            Ok(0) | Err(_) => break,
            Ok(n) => answer.extend_from_slice(&buf[..n]),
        }
    }
    String::from_utf8_lossy(&answer)
        .lines()
        .next()
        .unwrap_or_default()
        .to_string()
}

#[tokio::test]
async fn a_streamed_mcp_body_of_hundreds_of_mib_is_refused_and_memory_stays_flat() {
    let dir = tempfile::tempdir().unwrap();
    let server = start_server(&dir);
    let token = create_agent(&server.base_url()).await;
    let before = peak_rss(server.pid());

    // 320 MiB, chunked (no Content-Length): only reading it shows it is too large.
    let chunks = futures::stream::iter((0..5120).map(|_| Ok::<_, std::io::Error>(Bytes::from_static(&CHUNK))));
    let sent = reqwest::Client::new()
        .post(format!("{}/mcp", server.base_url()))
        .header(TOKEN_HEADER, &token)
        .header("content-type", "application/json")
        .header("accept", "application/json, text/event-stream")
        .body(reqwest::Body::wrap_stream(chunks))
        .send()
        .await;

    let after = peak_rss(server.pid());
    let grown = after.saturating_sub(before);
    assert!(
        grown < 64 << 20,
        "the server's peak memory grew by {} MiB ({} → {} MiB)",
        grown >> 20,
        before >> 20,
        after >> 20
    );
    // The refusal may reach the client before it has sent everything; once it does, it is a 413.
    if let Ok(response) = sent {
        assert_eq!(response.status(), StatusCode::PAYLOAD_TOO_LARGE);
        let body: Value = response.json().await.unwrap();
        assert_eq!(body["error"]["data"]["code"], "payload_too_large", "{body}");
    }
    // And the server goes on answering.
    let health = reqwest::get(format!("{}/health", server.base_url())).await.unwrap();
    assert_eq!(health.status(), StatusCode::OK);
}

#[tokio::test]
async fn a_declared_length_over_the_limit_is_refused_before_the_token_is_read_or_the_body_sent() {
    let dir = tempfile::tempdir().unwrap();
    let server = start_server(&dir);

    for (path, length) in [("/mcp", 300 << 20), ("/mcp", (1 << 20) + 1), ("/api/agents", 65 * 1024)] {
        let head = format!(
            "POST {path} HTTP/1.1\r\nHost: {}\r\nContent-Type: application/json\r\nContent-Length: {length}\r\n\r\n",
            server.addr
        );
        let status = status_of_raw_request(server.addr, &head);
        assert!(
            status.starts_with("HTTP/1.1 413"),
            "{path} with {length} bytes declared: {status}"
        );
    }
}

#[tokio::test]
async fn a_policy_may_carry_up_to_one_mib_and_other_routes_stop_at_max_body_bytes() {
    let app = spawn_app().await;
    let agent = app.create_default_agent().await;
    // A policy body of ~200 KiB is read (and judged on its content), not refused for its size.
    let padding = "x".repeat(200 * 1024);
    let policy = json!({"padding": padding});
    let response = app
        .send(app.build(
            reqwest::Method::PUT,
            &format!("/api/agents/{}/policy", agent.id),
            Some(&agent.token),
            Some(policy.clone()),
        ))
        .await;
    assert_ne!(response.status, StatusCode::PAYLOAD_TOO_LARGE, "{}", response.text);
    // The same size on a route without ABIs is refused, and so is a policy over 1 MiB.
    let response = app
        .send(app.build(
            reqwest::Method::POST,
            "/api/agents",
            None,
            Some(json!({"name": padding})),
        ))
        .await;
    assert_eq!(response.status, StatusCode::PAYLOAD_TOO_LARGE);
    let huge = json!({"padding": "x".repeat(1100 * 1024)});
    let response = app
        .send(app.build(
            reqwest::Method::PUT,
            &format!("/api/agents/{}/policy", agent.id),
            Some(&agent.token),
            Some(huge),
        ))
        .await;
    assert_eq!(response.status, StatusCode::PAYLOAD_TOO_LARGE, "{}", response.text);
}

/// One HTTP/1.1 answer read off `stream`: its status, whether it says `Connection: close`, and `None` when the
/// connection was closed under the request (what a client sees as "Remote end closed connection without response").
fn answer(stream: &mut TcpStream) -> Option<(u16, bool)> {
    let mut head = Vec::new();
    let mut byte = [0u8; 1];
    while !head.ends_with(b"\r\n\r\n") {
        match stream.read(&mut byte) {
            Ok(1) => head.push(byte[0]),
            _ => return None,
        }
    }
    let text = String::from_utf8_lossy(&head).to_ascii_lowercase();
    let status = text.split_whitespace().nth(1)?.parse().ok()?;
    let length: usize = text
        .lines()
        .find_map(|l| l.strip_prefix("content-length:"))
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or(0);
    let mut body = vec![0u8; length];
    stream.read_exact(&mut body).ok()?;
    Some((status, text.lines().any(|l| l.trim() == "connection: close")))
}

#[tokio::test]
async fn a_body_refused_before_it_is_read_never_leaves_a_dead_keep_alive_connection() {
    let app = spawn_app().await;
    let agent = app.create_default_agent().await;
    let address = app.address.trim_start_matches("http://").to_string();
    let id = agent.id.clone();
    // Blocking sockets on a thread of their own: the in-process server answers on the test's runtime.
    let errors = tokio::task::spawn_blocking(move || {
        let connect = || {
            let stream = TcpStream::connect(&address).expect("connect");
            stream.set_read_timeout(Some(Duration::from_secs(5))).expect("timeout");
            stream
        };
        let mut stream = connect();
        let mut errors = 0;
        let body = br#"{"name": "renamed"}"#;
        for _ in 0..50 {
            // A PUT refused (401) before its body is read: the body comes after the answer, as a client that writes
            // headers and body apart may send it.
            let head = format!(
                "PUT /api/agents/{id} HTTP/1.1\r\nHost: agentd\r\nX-Agent-Access-Token: agt_not_a_token\r\n\
                 Content-Type: application/json\r\nContent-Length: {}\r\n\r\n",
                body.len()
            );
            let refused = stream
                .write_all(head.as_bytes())
                .ok()
                .and_then(|()| answer(&mut stream));
            let Some((401, close)) = refused else {
                errors += 1;
                stream = connect();
                continue;
            };
            let _ = stream.write_all(body);
            if close {
                // Told so: a client opens a new connection for its next request.
                stream = connect();
            }
            // The next request on the connection the server left open must be answered.
            let next = stream
                .write_all(b"GET /health HTTP/1.1\r\nHost: agentd\r\n\r\n")
                .ok()
                .and_then(|()| answer(&mut stream));
            if next.map(|(status, _)| status) != Some(200) {
                errors += 1;
                stream = connect();
            }
        }
        errors
    })
    .await
    .expect("the client thread");
    assert_eq!(errors, 0, "requests lost on connections the server had closed");
}
