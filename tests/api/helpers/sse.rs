//! A small server-sent-events client for the tests: reads a `text/event-stream` response chunk by chunk
//! (`bytes_stream()`), parses `event:`, `id:` and `data:` lines into events, and waits with deadlines.
#![allow(dead_code)] // Each test file uses a different part of this helper.

use std::collections::VecDeque;
use std::time::{Duration, Instant};

use futures::StreamExt;
use futures::stream::BoxStream;
use reqwest::header::HeaderMap;
use reqwest::{RequestBuilder, StatusCode};
use serde_json::Value;

/// One dispatched event.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SseEvent {
    /// The `event:` name (`message` when the server sent none).
    pub event: String,
    /// The `id:` field, when the event had one.
    pub id: Option<String>,
    /// The `data:` lines joined with `\n`.
    pub data: String,
}

impl SseEvent {
    /// The data parsed as JSON (panics when it is not JSON).
    #[track_caller]
    pub fn json(&self) -> Value {
        serde_json::from_str(&self.data).unwrap_or_else(|e| panic!("event data is not JSON ({e}): {self:?}"))
    }

    /// The `id:` as an integer (panics when absent or not a number).
    #[track_caller]
    pub fn id_number(&self) -> i64 {
        self.id
            .as_deref()
            .and_then(|id| id.parse().ok())
            .unwrap_or_else(|| panic!("event has an integer id: {self:?}"))
    }
}

/// An open event stream.
pub struct SseStream {
    pub status: StatusCode,
    pub headers: HeaderMap,
    body: BoxStream<'static, reqwest::Result<Vec<u8>>>,
    buffer: Vec<u8>,
    pending: PendingEvent,
    ready: VecDeque<SseEvent>,
    ended: bool,
}

/// The fields of the event being read.
#[derive(Default)]
struct PendingEvent {
    event: Option<String>,
    id: Option<String>,
    data: Option<String>,
}

impl SseStream {
    /// Sends the request and insists on a 200 `text/event-stream` response.
    pub async fn open(builder: RequestBuilder) -> SseStream {
        let response = builder.send().await.expect("the stream request reaches the app");
        let status = response.status();
        let headers = response.headers().clone();
        if status != StatusCode::OK {
            let text = response.text().await.unwrap_or_default();
            panic!("expected a 200 event stream, got {status}: {text}");
        }
        let content_type = headers
            .get(reqwest::header::CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .unwrap_or_default();
        assert!(
            content_type.starts_with("text/event-stream"),
            "content type of an event stream: {content_type}"
        );
        SseStream {
            status,
            headers,
            body: response.bytes_stream().map(|chunk| chunk.map(|b| b.to_vec())).boxed(),
            buffer: Vec::new(),
            pending: PendingEvent::default(),
            ready: VecDeque::new(),
            ended: false,
        }
    }

    /// The next event, or `None` when `timeout` passes first or the stream ends.
    pub async fn next_event(&mut self, timeout: Duration) -> Option<SseEvent> {
        let deadline = Instant::now() + timeout;
        loop {
            if let Some(event) = self.ready.pop_front() {
                return Some(event);
            }
            if self.ended {
                return None;
            }
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return None;
            }
            match tokio::time::timeout(left, self.body.next()).await {
                Err(_) => return None,
                Ok(None) | Ok(Some(Err(_))) => {
                    self.ended = true;
                    self.feed(b"\n\n");
                }
                Ok(Some(Ok(chunk))) => self.feed(&chunk),
            }
        }
    }

    /// The next event named `name`, skipping others (pings, say); `None` when `timeout` passes first.
    pub async fn next_named(&mut self, name: &str, timeout: Duration) -> Option<SseEvent> {
        let deadline = Instant::now() + timeout;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            let event = self.next_event(left).await?;
            if event.event == name {
                return Some(event);
            }
        }
    }

    /// Every event that arrives within `window` (the stream staying open).
    pub async fn collect_for(&mut self, window: Duration) -> Vec<SseEvent> {
        let deadline = Instant::now() + window;
        let mut events = Vec::new();
        while let Some(event) = self
            .next_event(deadline.saturating_duration_since(Instant::now()))
            .await
        {
            events.push(event);
        }
        events
    }

    /// Whether the server closed the stream.
    pub fn ended(&self) -> bool {
        self.ended
    }

    fn feed(&mut self, chunk: &[u8]) {
        self.buffer.extend_from_slice(chunk);
        while let Some(end) = self.buffer.iter().position(|b| *b == b'\n') {
            let line: Vec<u8> = self.buffer.drain(..=end).collect();
            let line = String::from_utf8_lossy(&line);
            let line = line.trim_end_matches('\n').trim_end_matches('\r');
            self.line(line);
        }
    }

    fn line(&mut self, line: &str) {
        if line.is_empty() {
            let pending = std::mem::take(&mut self.pending);
            if pending.event.is_some() || pending.id.is_some() || pending.data.is_some() {
                self.ready.push_back(SseEvent {
                    event: pending.event.unwrap_or_else(|| "message".into()),
                    id: pending.id,
                    data: pending.data.unwrap_or_default(),
                });
            }
            return;
        }
        if line.starts_with(':') {
            return; // a comment (keep-alive)
        }
        let (field, value) = match line.split_once(':') {
            Some((field, value)) => (field, value.strip_prefix(' ').unwrap_or(value)),
            None => (line, ""),
        };
        match field {
            "event" => self.pending.event = Some(value.to_string()),
            "id" => self.pending.id = Some(value.to_string()),
            "data" => match &mut self.pending.data {
                Some(data) => {
                    data.push('\n');
                    data.push_str(value);
                }
                None => self.pending.data = Some(value.to_string()),
            },
            _ => {}
        }
    }
}

#[test]
fn events_are_parsed_across_chunks_and_line_endings() {
    let mut stream = SseStream {
        status: StatusCode::OK,
        headers: HeaderMap::new(),
        body: futures::stream::empty().boxed(),
        buffer: Vec::new(),
        pending: PendingEvent::default(),
        ready: VecDeque::new(),
        ended: false,
    };
    stream.feed(b"event: ping\ndata: {}\n\n: keepalive\n\nevent: tx_conf");
    stream.feed(b"irmation\r\nid: 7\r\ndata: {\"a\":1}\r\ndata:2\r\n\r\ndata: plain\n\n");
    let events: Vec<SseEvent> = stream.ready.drain(..).collect();
    assert_eq!(
        events,
        vec![
            SseEvent {
                event: "ping".into(),
                id: None,
                data: "{}".into()
            },
            SseEvent {
                event: "tx_confirmation".into(),
                id: Some("7".into()),
                data: "{\"a\":1}\n2".into()
            },
            SseEvent {
                event: "message".into(),
                id: None,
                data: "plain".into()
            },
        ]
    );
}
