//! A scripted OpenAI-compatible Chat Completions server running inside the test process, so that the service's real
//! HTTP client talks to it over TCP. Every request (headers and JSON body) is recorded; each request takes the next
//! reply of the script: a stream of chunks (usage appended only when the request asked for it with
//! `stream_options.include_usage`), a plain JSON answer, an error status, or any of these after a delay.
#![allow(dead_code)] // Each test file uses a different part of this helper.

use std::collections::VecDeque;
use std::convert::Infallible;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::Router;
use axum::body::{Body, Bytes};
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode, Uri, header};
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use futures::StreamExt;
use serde_json::{Value, json};
use tokio::task::JoinHandle;

/// A request the server received.
#[derive(Debug, Clone)]
pub struct Recorded {
    pub path: String,
    /// Header names lower-cased, in arrival order.
    pub headers: Vec<(String, String)>,
    /// The body parsed as JSON (`Value::String` with the raw text when it is not JSON).
    pub body: Value,
}

impl Recorded {
    pub fn header(&self, name: &str) -> Option<&str> {
        let name = name.to_ascii_lowercase();
        self.headers.iter().find(|(k, _)| *k == name).map(|(_, v)| v.as_str())
    }

    /// `messages` of the request.
    pub fn messages(&self) -> Vec<Value> {
        self.body["messages"].as_array().cloned().unwrap_or_default()
    }

    /// The names of the tools offered, in order (empty when none are).
    pub fn tool_names(&self) -> Vec<String> {
        self.body["tools"]
            .as_array()
            .map(|tools| {
                tools
                    .iter()
                    .map(|t| t["function"]["name"].as_str().unwrap_or_default().to_string())
                    .collect()
            })
            .unwrap_or_default()
    }

    /// The content of the system message (the first message), or "".
    pub fn system_prompt(&self) -> String {
        let messages = self.messages();
        match messages.first() {
            Some(m) if m["role"] == "system" => m["content"].as_str().unwrap_or_default().to_string(),
            _ => String::new(),
        }
    }

    pub fn asks_for_usage(&self) -> bool {
        self.body["stream_options"]["include_usage"] == true
    }

    pub fn streams(&self) -> bool {
        self.body["stream"] == true
    }
}

/// One scripted answer.
#[derive(Debug, Clone)]
pub enum Reply {
    /// An answer made of `delta` objects (`choices[0].delta`), each in its own chunk. Streamed as SSE when the
    /// request asks to stream (usage in a last chunk without choices, only when `include_usage` was asked), or
    /// assembled into one JSON message otherwise (usage always present there).
    Completion {
        deltas: Vec<Value>,
        prompt_tokens: u64,
        completion_tokens: u64,
    },
    /// Any status with a JSON body.
    Status(u16, Value),
    /// The inner reply, after a delay (before the status line is sent).
    After(Duration, Box<Reply>),
    /// A streamed answer that never finishes in time: `pieces` text chunks, one every `every` (each one well within
    /// a per-read timeout), then the end.
    Trickle { pieces: usize, every: Duration },
}

impl Reply {
    /// Text streamed in the given pieces.
    pub fn text(pieces: &[&str], prompt_tokens: u64, completion_tokens: u64) -> Reply {
        let mut deltas: Vec<Value> = pieces.iter().map(|p| json!({"content": p})).collect();
        if let Some(first) = deltas.first_mut() {
            first["role"] = json!("assistant");
        }
        Reply::Completion {
            deltas,
            prompt_tokens,
            completion_tokens,
        }
    }

    /// One tool call whose id and name come in the first chunk and whose arguments come in `fragments`.
    pub fn tool_call(id: &str, name: &str, fragments: &[&str], prompt_tokens: u64, completion_tokens: u64) -> Reply {
        Reply::tool_calls(&[(id, name, fragments)], prompt_tokens, completion_tokens)
    }

    /// Several tool calls (`index` 0, 1, …), each streamed as in `tool_call`, one call after the other.
    pub fn tool_calls(calls: &[(&str, &str, &[&str])], prompt_tokens: u64, completion_tokens: u64) -> Reply {
        let mut deltas = vec![json!({"role": "assistant", "content": null})];
        for (index, (id, name, fragments)) in calls.iter().enumerate() {
            deltas.push(json!({"tool_calls": [{
                "index": index, "id": id, "type": "function", "function": {"name": name, "arguments": ""}
            }]}));
            for fragment in *fragments {
                deltas.push(json!({"tool_calls": [{"index": index, "function": {"arguments": fragment}}]}));
            }
        }
        Reply::Completion {
            deltas,
            prompt_tokens,
            completion_tokens,
        }
    }

    /// An error status with an OpenAI-style error body.
    pub fn error(status: u16, code: &str, message: &str) -> Reply {
        Reply::Status(
            status,
            json!({"error": {"message": message, "type": "server_error", "code": code}}),
        )
    }

    pub fn after(self, delay: Duration) -> Reply {
        Reply::After(delay, Box::new(self))
    }
}

#[derive(Default)]
struct Shared {
    script: Mutex<VecDeque<Reply>>,
    requests: Mutex<Vec<Recorded>>,
}

/// The running server; stops when dropped.
pub struct LlmServer {
    /// The API root to configure as `LLM_BASE_URL`: `http://127.0.0.1:<port>/v1`.
    pub base_url: String,
    shared: Arc<Shared>,
    task: JoinHandle<()>,
}

impl LlmServer {
    /// The variables that make an agentd app use this server as its model (`test-model`), with `key` as the API key.
    pub fn app_vars<'a>(&'a self, key: &'a str) -> Vec<(&'a str, &'a str)> {
        vec![
            ("LLM_PROVIDER", "openai"),
            ("LLM_BASE_URL", &self.base_url),
            ("LLM_API_KEY", key),
            ("LLM_MODEL", "test-model"),
        ]
    }

    /// Starts the server with `script`; replies are taken in order, one per request.
    pub async fn start(script: Vec<Reply>) -> LlmServer {
        let shared = Arc::new(Shared {
            script: Mutex::new(script.into()),
            requests: Mutex::new(Vec::new()),
        });
        let router = Router::new()
            .route("/v1/chat/completions", post(completions))
            .fallback(not_found)
            .with_state(Arc::clone(&shared));
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind the scripted LLM server");
        let addr = listener.local_addr().expect("local address");
        let task = tokio::spawn(async move {
            let _ = axum::serve(listener, router).await;
        });
        LlmServer {
            base_url: format!("http://{addr}/v1"),
            shared,
            task,
        }
    }

    /// Appends replies to the script.
    pub fn push(&self, replies: impl IntoIterator<Item = Reply>) {
        self.shared.script.lock().unwrap().extend(replies);
    }

    /// Every request received so far, in order.
    pub fn requests(&self) -> Vec<Recorded> {
        self.shared.requests.lock().unwrap().clone()
    }

    /// Replies not yet used.
    pub fn remaining(&self) -> usize {
        self.shared.script.lock().unwrap().len()
    }
}

impl Drop for LlmServer {
    fn drop(&mut self) {
        self.task.abort();
    }
}

async fn not_found(uri: Uri) -> Response {
    (
        StatusCode::NOT_FOUND,
        axum::Json(json!({"error": {"message": format!("no route {uri}"), "code": "not_found"}})),
    )
        .into_response()
}

async fn completions(State(shared): State<Arc<Shared>>, uri: Uri, headers: HeaderMap, body: Bytes) -> Response {
    let text = String::from_utf8_lossy(&body).into_owned();
    let recorded = Recorded {
        path: uri.path().to_string(),
        headers: headers
            .iter()
            .map(|(k, v)| (k.as_str().to_string(), v.to_str().unwrap_or_default().to_string()))
            .collect(),
        body: serde_json::from_str(&text).unwrap_or(Value::String(text)),
    };
    shared.requests.lock().unwrap().push(recorded.clone());
    let reply = shared.script.lock().unwrap().pop_front();
    let reply = reply.unwrap_or_else(|| Reply::error(500, "script_exhausted", "the test script has no more replies"));
    answer(reply, &recorded).await
}

async fn answer(mut reply: Reply, request: &Recorded) -> Response {
    while let Reply::After(delay, inner) = reply {
        tokio::time::sleep(delay).await;
        reply = *inner;
    }
    match reply {
        Reply::Status(status, body) => {
            (StatusCode::from_u16(status).expect("a valid status"), axum::Json(body)).into_response()
        }
        Reply::Completion {
            deltas,
            prompt_tokens,
            completion_tokens,
        } => {
            let usage = json!({
                "prompt_tokens": prompt_tokens,
                "completion_tokens": completion_tokens,
                "total_tokens": prompt_tokens + completion_tokens,
            });
            if request.streams() {
                stream(deltas, request.asks_for_usage().then_some(usage))
            } else {
                axum::Json(assemble(&deltas, usage)).into_response()
            }
        }
        Reply::Trickle { pieces, every } => trickle(pieces, every),
        Reply::After(..) => unreachable!("unwrapped above"),
    }
}

fn trickle(pieces: usize, every: Duration) -> Response {
    let chunks = futures::stream::iter(0..=pieces).then(move |i| async move {
        tokio::time::sleep(every).await;
        let event = if i < pieces {
            chunk(
                json!([{"index": 0, "delta": {"content": "."}, "finish_reason": null}]),
                None,
            )
            .to_string()
        } else {
            "[DONE]".to_string()
        };
        Ok::<_, Infallible>(Bytes::from(format!("data: {event}\n\n")))
    });
    Response::builder()
        .status(StatusCode::OK)
        .header(header::CONTENT_TYPE, "text/event-stream")
        .body(Body::from_stream(chunks))
        .expect("a valid response")
}

fn chunk(choices: Value, usage: Option<Value>) -> Value {
    let mut chunk = json!({
        "id": "chatcmpl-test",
        "object": "chat.completion.chunk",
        "created": 1_700_000_000,
        "model": "test-model",
        "choices": choices,
    });
    if let Some(usage) = usage {
        chunk["usage"] = usage;
    }
    chunk
}

/// `data: {chunk}` events, each written as its own body frame and every event cut in two frames in the middle of
/// its JSON (the client must reassemble lines), then a finish chunk, the optional usage chunk and `[DONE]`.
fn stream(deltas: Vec<Value>, usage: Option<Value>) -> Response {
    let has_tools = deltas.iter().any(|d| d.get("tool_calls").is_some());
    let mut events: Vec<String> = deltas
        .into_iter()
        .map(|delta| chunk(json!([{"index": 0, "delta": delta, "finish_reason": null}]), None).to_string())
        .collect();
    let finish = if has_tools { "tool_calls" } else { "stop" };
    events.push(chunk(json!([{"index": 0, "delta": {}, "finish_reason": finish}]), None).to_string());
    if let Some(usage) = usage {
        events.push(chunk(json!([]), Some(usage)).to_string());
    }
    events.push("[DONE]".to_string());
    let mut frames: Vec<Result<Bytes, Infallible>> = Vec::new();
    for event in events {
        let line = format!("data: {event}\n\n");
        let middle = (1..line.len() / 2)
            .rev()
            .find(|i| line.is_char_boundary(*i))
            .unwrap_or(0);
        let (a, b) = line.split_at(middle);
        frames.push(Ok(Bytes::from(a.to_string())));
        frames.push(Ok(Bytes::from(b.to_string())));
    }
    Response::builder()
        .status(StatusCode::OK)
        .header(header::CONTENT_TYPE, "text/event-stream")
        .header(header::CACHE_CONTROL, "no-cache")
        .body(Body::from_stream(futures::stream::iter(frames)))
        .expect("a valid response")
}

/// A non-streaming `chat.completion`: the deltas folded into one message.
fn assemble(deltas: &[Value], usage: Value) -> Value {
    let mut content = String::new();
    let mut calls: Vec<Value> = Vec::new();
    for delta in deltas {
        if let Some(text) = delta["content"].as_str() {
            content.push_str(text);
        }
        for fragment in delta["tool_calls"].as_array().into_iter().flatten() {
            let index = fragment["index"].as_u64().unwrap_or(0) as usize;
            while calls.len() <= index {
                calls.push(json!({"id": "", "type": "function", "function": {"name": "", "arguments": ""}}));
            }
            let call = &mut calls[index];
            if let Some(id) = fragment["id"].as_str() {
                call["id"] = json!(id);
            }
            if let Some(name) = fragment["function"]["name"].as_str() {
                call["function"]["name"] = json!(name);
            }
            if let Some(arguments) = fragment["function"]["arguments"].as_str() {
                let joined = format!(
                    "{}{arguments}",
                    call["function"]["arguments"].as_str().unwrap_or_default()
                );
                call["function"]["arguments"] = json!(joined);
            }
        }
    }
    let mut message =
        json!({"role": "assistant", "content": if content.is_empty() { Value::Null } else { json!(content) }});
    if !calls.is_empty() {
        message["tool_calls"] = Value::Array(calls);
    }
    json!({
        "id": "chatcmpl-test",
        "object": "chat.completion",
        "created": 1_700_000_000,
        "model": "test-model",
        "choices": [{"index": 0, "message": message, "finish_reason": if content.is_empty() { "tool_calls" } else { "stop" }}],
        "usage": usage,
    })
}
