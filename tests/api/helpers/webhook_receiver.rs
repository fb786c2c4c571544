//! A webhook receiver inside the test suite: an HTTP server that records every delivery (headers and raw body) and
//! answers with the statuses it is told to (2xx by default), and the official Standard Webhooks library (PyPI
//! `standardwebhooks`, in `~/.cache/agentd-webhooks-venv`, `scripts/install.sh webhooks`) verifying deliveries.
#![allow(dead_code)] // Each test uses a different part of this helper.

use std::collections::{BTreeMap, VecDeque};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use axum::body::Bytes;
use axum::http::{HeaderMap, StatusCode};
use serde_json::{Value, json};
use tokio::sync::oneshot;

/// One request the receiver got.
#[derive(Debug, Clone)]
pub struct Delivery {
    pub headers: BTreeMap<String, String>,
    pub body: String,
}

impl Delivery {
    /// The `webhook-id` header.
    pub fn id(&self) -> &str {
        self.headers.get("webhook-id").map(String::as_str).unwrap_or_default()
    }

    /// The body's `type`.
    pub fn ty(&self) -> String {
        let body: Value = serde_json::from_str(&self.body).unwrap_or_default();
        body["type"].as_str().unwrap_or_default().to_string()
    }
}

#[derive(Default)]
struct Shared {
    deliveries: Vec<Delivery>,
    /// Statuses to answer with, in order, before answering 204.
    answers: VecDeque<u16>,
}

pub struct Receiver {
    pub url: String,
    shared: Arc<Mutex<Shared>>,
    _stop: oneshot::Sender<()>,
}

impl Receiver {
    pub async fn start() -> Receiver {
        Receiver::start_on(0).await
    }

    /// On `127.0.0.1:port` (0: any free port).
    pub async fn start_on(port: u16) -> Receiver {
        let listener = tokio::net::TcpListener::bind(("127.0.0.1", port))
            .await
            .expect("bind the webhook receiver");
        let addr = listener.local_addr().expect("the receiver's address");
        let shared = Arc::new(Mutex::new(Shared::default()));
        let state = shared.clone();
        let app = axum::Router::new().fallback(move |headers: HeaderMap, body: Bytes| {
            let state = state.clone();
            async move {
                let headers = headers
                    .iter()
                    .map(|(k, v)| (k.as_str().to_string(), v.to_str().unwrap_or_default().to_string()))
                    .collect();
                let mut shared = state.lock().unwrap();
                shared.deliveries.push(Delivery {
                    headers,
                    body: String::from_utf8_lossy(&body).into_owned(),
                });
                let status = shared.answers.pop_front().unwrap_or(204);
                StatusCode::from_u16(status).unwrap()
            }
        });
        let (stop, stopped) = oneshot::channel::<()>();
        tokio::spawn(async move {
            let _ = axum::serve(listener, app)
                .with_graceful_shutdown(async move {
                    let _ = stopped.await;
                })
                .await;
        });
        Receiver {
            url: format!("http://{addr}/hooks/agentd?token=receiver-key"),
            shared,
            _stop: stop,
        }
    }

    /// The next `n` deliveries get `status`.
    pub fn answer_next(&self, n: usize, status: u16) {
        let mut shared = self.shared.lock().unwrap();
        shared.answers.extend(std::iter::repeat_n(status, n));
    }

    pub fn deliveries(&self) -> Vec<Delivery> {
        self.shared.lock().unwrap().deliveries.clone()
    }

    /// Waits (up to 20 s) until at least `n` deliveries arrived; returns them all.
    pub async fn wait_for(&self, n: usize) -> Vec<Delivery> {
        self.wait_until(|d| d.len() >= n, &format!("{n} deliveries")).await
    }

    /// Waits (up to 20 s) until the deliveries so far satisfy `done`.
    pub async fn wait_until(&self, done: impl Fn(&[Delivery]) -> bool, what: &str) -> Vec<Delivery> {
        let deadline = Instant::now() + Duration::from_secs(20);
        loop {
            let all = self.deliveries();
            if done(&all) {
                return all;
            }
            assert!(
                Instant::now() < deadline,
                "the receiver did not get {what}; it got {:#?}",
                all.iter().map(|d| d.body.clone()).collect::<Vec<_>>()
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }
}

fn python() -> PathBuf {
    let home = std::env::var("HOME").expect("HOME");
    Path::new(&home).join(".cache/agentd-webhooks-venv/bin/python")
}

/// Each delivery verified by the Standard Webhooks library with `secret`: the parsed payload, or why it was refused.
pub fn verify(secret: &str, deliveries: &[Delivery]) -> Vec<Result<Value, String>> {
    let python = python();
    assert!(
        python.exists(),
        "{} is missing: run `scripts/install.sh webhooks`",
        python.display()
    );
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/api/helpers/webhook_verify.py");
    let mut child = Command::new(&python)
        .arg(script)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .expect("start the verifier");
    {
        let mut stdin = child.stdin.take().expect("stdin");
        for d in deliveries {
            let line = json!({"secret": secret, "headers": d.headers, "body": d.body});
            writeln!(stdin, "{line}").expect("write to the verifier");
        }
    }
    let output = child.wait_with_output().expect("the verifier ran");
    assert!(output.status.success(), "the verifier failed");
    String::from_utf8_lossy(&output.stdout)
        .lines()
        .map(|line| {
            let v: Value = serde_json::from_str(line).expect("the verifier writes JSON");
            if v["ok"] == true {
                Ok(v["payload"].clone())
            } else {
                Err(v["error"].as_str().unwrap_or_default().to_string())
            }
        })
        .collect()
}

/// Every delivery verified with `secret`; panics on the first refusal. The payloads, in order.
pub fn verified(secret: &str, deliveries: &[Delivery]) -> Vec<Value> {
    verify(secret, deliveries)
        .into_iter()
        .enumerate()
        .map(|(i, r)| r.unwrap_or_else(|e| panic!("delivery {i} was refused by standardwebhooks: {e}")))
        .collect()
}
