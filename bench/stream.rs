//! `stream`: many concurrent confirmation-stream subscribers on one instance of the release binary. Every
//! subscriber waits for its initial `ping`; then one pending transfer is mined and the time until every subscriber
//! has its `tx_confirmation` is measured, along with the server's resident memory before and after subscribing.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use alloy::primitives::U256;
use serde_json::{Value, json};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::sync::{Semaphore, mpsc, watch};

use crate::common::{self, RECIPIENT, Samples, f, start_anvil, table, transacting_agent, verdict};
use crate::server::ServerProcess;

/// Subscribers; `BENCH_STREAM_SUBSCRIBERS` overrides it.
const DEFAULT_SUBSCRIBERS: usize = 10_000;
/// Connections being opened (connect, request, first ping) at any one time.
const OPENING_AT_ONCE: usize = 256;
const OPEN_TIMEOUT: Duration = Duration::from_secs(90);
const DELIVERY_TIMEOUT: Duration = Duration::from_secs(20);

pub async fn run() {
    let subscribers = std::env::var("BENCH_STREAM_SUBSCRIBERS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(DEFAULT_SUBSCRIBERS);
    let anvil = start_anvil(8453, &[]).await;
    let server = ServerProcess::start(&[
        ("RPC_URL_BASE", anvil.url()),
        ("WATCHER_INTERVAL_MS", "20"),
        // Every subscriber is the same agent; the per-agent cap (100 by default) would refuse all but the first.
        ("MAX_STREAMS_PER_AGENT", &subscribers.to_string()),
        // Startup line only: per-request logs of 10,000 connections would cost the server CPU.
        ("RUST_LOG", "warn,agentd::app=info"),
    ]);
    let base = format!("http://{}", server.addr);
    let client = common::client(4);
    let agent = common::create_agent(&client, &base, transacting_agent("bench streamer")).await;
    anvil
        .set_balance(agent.address("base"), U256::from(10u128.pow(19)))
        .await;
    anvil.set_automine(false).await;
    let chat: Value = client
        .post(format!("{base}/api/chat"))
        .header(common::TOKEN_HEADER, &agent.token)
        .json(&json!({"agent_id": agent.id, "message": format!("send 0.001 ETH to {RECIPIENT} on base")}))
        .send()
        .await
        .expect("POST /api/chat")
        .json()
        .await
        .expect("chat answer");
    let status = &chat["chain_calls"][0]["result"]["status"];
    assert!(*status == "pending", "the transfer did not go out as pending: {chat}");
    let conversation = chat["conversation_id"].as_str().expect("conversation_id").to_string();

    let rss_before = server.vm_rss_kb();
    let request = format!(
        "GET /api/conversations/{conversation}/stream?access_token={} HTTP/1.1\r\nHost: {}\r\nAccept: text/event-stream\r\n\r\n",
        agent.token, server.addr
    );
    let (delivered_tx, mut delivered_rx) = mpsc::unbounded_channel::<Instant>();
    let (done_tx, done_rx) = watch::channel(false);
    let ready = Arc::new(AtomicUsize::new(0));
    let failed = Arc::new(AtomicUsize::new(0));
    let first_failure = Arc::new(std::sync::Mutex::new(None::<String>));
    let opening = Arc::new(Semaphore::new(OPENING_AT_ONCE));
    let open_started = Instant::now();
    for _ in 0..subscribers {
        let subscriber = Subscriber {
            addr: server.addr,
            request: request.clone(),
            opening: opening.clone(),
            ready: ready.clone(),
            delivered: delivered_tx.clone(),
            done: done_rx.clone(),
        };
        let (failed, first_failure) = (failed.clone(), first_failure.clone());
        tokio::spawn(async move {
            if let Err(e) = subscriber.run().await {
                failed.fetch_add(1, Ordering::Relaxed);
                first_failure.lock().expect("lock").get_or_insert(e);
            }
        });
    }
    drop(delivered_tx);
    while ready.load(Ordering::Relaxed) + failed.load(Ordering::Relaxed) < subscribers
        && open_started.elapsed() < OPEN_TIMEOUT
    {
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let open_time = open_started.elapsed();
    let opened = ready.load(Ordering::Relaxed);
    // Let the server settle (allocator, buffers) before reading its memory.
    tokio::time::sleep(Duration::from_millis(300)).await;
    let rss_after = server.vm_rss_kb();

    let mine_started = Instant::now();
    anvil.mine(1).await;
    let mine_returned = mine_started.elapsed();
    let mut arrivals = Vec::with_capacity(opened);
    while arrivals.len() < opened {
        match tokio::time::timeout_at((mine_started + DELIVERY_TIMEOUT).into(), delivered_rx.recv()).await {
            Ok(Some(at)) => arrivals.push(at.saturating_duration_since(mine_started)),
            _ => break,
        }
    }
    let _ = done_tx.send(true);

    println!(
        "{subscribers} subscribers requested, {opened} got their ping in {:.1} s ({:.0}/s, {OPENING_AT_ONCE} opening at once), {} failed",
        open_time.as_secs_f64(),
        opened as f64 / open_time.as_secs_f64(),
        failed.load(Ordering::Relaxed)
    );
    if let Some(e) = first_failure.lock().expect("lock").as_ref() {
        println!("  first failure: {e}");
    }
    let mb = |kb: u64| kb as f64 / 1024.0;
    let per_conn = (rss_after.saturating_sub(rss_before)) as f64 * 1024.0 / opened.max(1) as f64;
    table(
        &["server VmRSS", "MB"],
        &[
            vec!["before subscribing".into(), f(mb(rss_before), 1)],
            vec![format!("with {opened} subscribers"), f(mb(rss_after), 1)],
            vec!["per subscriber (KB)".into(), f(per_conn / 1024.0, 1)],
        ],
    );
    let s = Samples::from_durations(&arrivals);
    println!();
    table(
        &["tx_confirmation delivery", "ms"],
        &[
            vec![
                "anvil_mine call returned".into(),
                f(mine_returned.as_secs_f64() * 1e3, 1),
            ],
            vec!["first subscriber (from mine)".into(), f(s.min(), 1)],
            vec!["p50 subscriber".into(), f(s.pct(50.0), 1)],
            vec!["p99 subscriber".into(), f(s.pct(99.0), 1)],
            vec!["last subscriber (from mine)".into(), f(s.max(), 1)],
            vec!["first to last".into(), f(s.max() - s.min(), 1)],
        ],
    );
    println!(
        "  delivered to {}/{opened}; memory {} MB (target < 150 MB: {}); all delivered within {} ms of the mine call (target < 1 s: {})",
        s.len(),
        f(mb(rss_after), 1),
        verdict(mb(rss_after) < 150.0),
        f(s.max(), 0),
        verdict(s.len() == opened && opened == subscribers && s.max() < 1000.0)
    );
    drop(server);
}

/// One SSE client on a raw TCP connection.
struct Subscriber {
    addr: std::net::SocketAddr,
    request: String,
    opening: Arc<Semaphore>,
    ready: Arc<AtomicUsize>,
    delivered: mpsc::UnboundedSender<Instant>,
    done: watch::Receiver<bool>,
}

impl Subscriber {
    async fn run(mut self) -> Result<(), String> {
        let permit = self.opening.acquire().await.map_err(|e| e.to_string())?;
        let mut stream = TcpStream::connect(self.addr)
            .await
            .map_err(|e| format!("connect: {e}"))?;
        stream
            .write_all(self.request.as_bytes())
            .await
            .map_err(|e| format!("request: {e}"))?;
        let mut reader = Reader::default();
        reader.until(&mut stream, b"event: ping").await?;
        drop(permit);
        self.ready.fetch_add(1, Ordering::Relaxed);
        reader.until(&mut stream, b"event: tx_confirmation").await?;
        let _ = self.delivered.send(Instant::now());
        // Stay connected until every subscriber is counted, so closing does not disturb the others.
        let _ = self.done.wait_for(|done| *done).await;
        Ok(())
    }
}

/// Reads until a marker shows up, keeping only a short tail between reads.
#[derive(Default)]
struct Reader {
    seen: Vec<u8>,
}

impl Reader {
    async fn until(&mut self, stream: &mut TcpStream, marker: &[u8]) -> Result<(), String> {
        let mut buf = [0u8; 2048];
        loop {
            if self.seen.len() >= 12 && !self.seen.starts_with(b"HTTP/1.1 200") {
                let end = self.seen.len().min(200);
                return Err(format!(
                    "unexpected response: {}",
                    String::from_utf8_lossy(&self.seen[..end])
                ));
            }
            if self.seen.windows(marker.len()).any(|w| w == marker) {
                // Keep the status line for the first check; forget the rest.
                self.seen.truncate(16);
                return Ok(());
            }
            let n = stream.read(&mut buf).await.map_err(|e| format!("read: {e}"))?;
            if n == 0 {
                return Err(format!("closed before {}", String::from_utf8_lossy(marker)));
            }
            if self.seen.len() > 8192 {
                self.seen.drain(16..self.seen.len() - 64);
            }
            self.seen.extend_from_slice(&buf[..n]);
        }
    }
}
