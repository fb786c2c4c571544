//! The server-sent-events client of the tests: reads a `text/event-stream` response chunk by chunk
//! (`bytes_stream()`), parses `event:`, `id:` and `data:` lines (LF or CRLF, split anywhere between chunks) into
//! events, keeps comment lines (`: keepalive`) for the tests that look for them, and waits with deadlines.
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

/// What the stream carries: an event, or a comment line (`: text`, the text without the colon and one space).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SseItem {
    Event(SseEvent),
    Comment(String),
}

/// An open event stream.
pub struct SseStream {
    pub status: StatusCode,
    pub headers: HeaderMap,
    body: BoxStream<'static, reqwest::Result<Vec<u8>>>,
    buffer: Vec<u8>,
    pending: PendingEvent,
    ready: VecDeque<SseItem>,
    ended: bool,
}

/// The fields of the event being read.
#[derive(Default)]
struct PendingEvent {
    event: Option<String>,
    id: Option<String>,
    data: Option<String>,
}

/// The outcome of one wait for the next item.
enum Read {
    Item(SseItem),
    /// The server closed the stream (or the read failed; `Some` holds why).
    Ended(Option<String>),
    TimedOut,
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
        SseStream::from_body(
            status,
            headers,
            response.bytes_stream().map(|chunk| chunk.map(|b| b.to_vec())).boxed(),
        )
    }

    fn from_body(status: StatusCode, headers: HeaderMap, body: BoxStream<'static, reqwest::Result<Vec<u8>>>) -> Self {
        SseStream {
            status,
            headers,
            body,
            buffer: Vec::new(),
            pending: PendingEvent::default(),
            ready: VecDeque::new(),
            ended: false,
        }
    }

    /// The next event, or `None` when `timeout` passes first or the stream ends (comments are skipped).
    pub async fn next_event(&mut self, timeout: Duration) -> Option<SseEvent> {
        let deadline = Instant::now() + timeout;
        loop {
            match self.read(deadline).await {
                Read::Item(SseItem::Event(event)) => return Some(event),
                Read::Item(SseItem::Comment(_)) => {}
                Read::Ended(_) | Read::TimedOut => return None,
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

    /// The next event or comment; `None` when the server closed the stream. Panics when nothing comes within
    /// `within` or reading the stream fails.
    pub async fn next_item(&mut self, within: Duration) -> Option<SseItem> {
        match self.read(Instant::now() + within).await {
            Read::Item(item) => Some(item),
            Read::Ended(None) => None,
            Read::Ended(Some(error)) => panic!("read the event stream: {error}"),
            Read::TimedOut => panic!("no server-sent event within {within:?}"),
        }
    }

    /// Every event until the server closes the stream (comments dropped), each within `within` of the previous
    /// one, as `(name, data parsed as JSON)`; panics on a longer silence, a failed read or data that is not JSON.
    pub async fn json_events(&mut self, within: Duration) -> Vec<(String, Value)> {
        let mut events = Vec::new();
        while let Some(item) = self.next_item(within).await {
            if let SseItem::Event(event) = item {
                let data = event.json();
                events.push((event.event, data));
            }
        }
        events
    }

    /// Whether the server closed the stream.
    pub fn ended(&self) -> bool {
        self.ended
    }

    async fn read(&mut self, deadline: Instant) -> Read {
        loop {
            if let Some(item) = self.ready.pop_front() {
                return Read::Item(item);
            }
            if self.ended {
                return Read::Ended(None);
            }
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return Read::TimedOut;
            }
            match tokio::time::timeout(left, self.body.next()).await {
                Err(_) => return Read::TimedOut,
                Ok(None) => self.end(),
                Ok(Some(Err(error))) => {
                    self.end();
                    return Read::Ended(Some(error.to_string()));
                }
                Ok(Some(Ok(chunk))) => self.feed(&chunk),
            }
        }
    }

    /// The end of the stream: an event not closed by a blank line is not dispatched (as in the specification).
    fn end(&mut self) {
        self.ended = true;
        self.buffer.clear();
        self.pending = PendingEvent::default();
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
                self.ready.push_back(SseItem::Event(SseEvent {
                    event: pending.event.unwrap_or_else(|| "message".into()),
                    id: pending.id,
                    data: pending.data.unwrap_or_default(),
                }));
            }
            return;
        }
        if let Some(comment) = line.strip_prefix(':') {
            let comment = comment.strip_prefix(' ').unwrap_or(comment);
            self.ready.push_back(SseItem::Comment(comment.to_string()));
            return;
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
    let mut stream = SseStream::from_body(StatusCode::OK, HeaderMap::new(), futures::stream::empty().boxed());
    stream.feed(b"event: ping\ndata: {}\n\n: keepalive\n\nevent: tx_conf");
    stream.feed(b"irmation\r\nid: 7\r\ndata: {\"a\":1}\r\ndata:2\r");
    stream.feed(b"\n\r\ndata: plain\n\ndata: cut off");
    stream.end();
    let items: Vec<SseItem> = stream.ready.drain(..).collect();
    assert_eq!(
        items,
        vec![
            SseItem::Event(SseEvent {
                event: "ping".into(),
                id: None,
                data: "{}".into()
            }),
            SseItem::Comment("keepalive".into()),
            SseItem::Event(SseEvent {
                event: "tx_confirmation".into(),
                id: Some("7".into()),
                data: "{\"a\":1}\n2".into()
            }),
            SseItem::Event(SseEvent {
                event: "message".into(),
                id: None,
                data: "plain".into()
            }),
        ]
    );
}
