//! A provider for any OpenAI-compatible Chat Completions API, streamed over server-sent events.

use std::time::Duration;

use async_trait::async_trait;
use futures::StreamExt;
use secrecy::{ExposeSecret, SecretString};
use tokio::sync::mpsc;
use tokio::time::timeout;

use super::{LlmError, LlmProvider, LlmRequest, LlmResponse};
use wire::{LineBuffer, Step, StreamState, parse_json_response, request_body, upstream_error_code};

mod wire;

/// Longest non-streaming body accepted from the server, and the most of an error body read for its code.
const MAX_BODY_BYTES: usize = 8 << 20;
const MAX_ERROR_BODY_BYTES: usize = 64 << 10;
/// Used when no base URL is configured.
const DEFAULT_BASE_URL: &str = "https://api.openai.com/v1";
/// Connection setup never waits longer than this, whatever the request timeout.
const MAX_CONNECT_TIMEOUT: Duration = Duration::from_secs(10);

/// How to reach an OpenAI-compatible server.
#[derive(Debug, Clone)]
pub struct OpenAiConfig {
    /// API root such as `http://127.0.0.1:1234/v1` or `https://api.openai.com/v1`.
    pub base_url: String,
    pub api_key: Option<SecretString>,
    pub model: String,
    /// Limit for the first byte of the answer and for every pause between streamed chunks.
    pub timeout: Duration,
}

/// Chat completions against an OpenAI-compatible API. `Debug` never shows the API key.
#[derive(Debug)]
pub struct OpenAiProvider {
    client: reqwest::Client,
    endpoint: String,
    api_key: Option<SecretString>,
    model: String,
    timeout: Duration,
}

impl OpenAiProvider {
    /// Builds the provider and its HTTP client. An empty `base_url` means OpenAI's own API; a URL that is not
    /// http(s) is refused.
    pub fn new(config: OpenAiConfig) -> Result<Self, LlmError> {
        let base_url = match config.base_url.trim().trim_end_matches('/') {
            "" => DEFAULT_BASE_URL,
            url if url.starts_with("http://") || url.starts_with("https://") => url,
            _ => {
                return Err(LlmError::Unavailable(
                    "the base URL must start with http:// or https://".into(),
                ));
            }
        };
        let timeout = if config.timeout.is_zero() {
            Duration::from_secs(60)
        } else {
            config.timeout
        };
        let client = reqwest::Client::builder()
            .connect_timeout(timeout.min(MAX_CONNECT_TIMEOUT))
            .build()
            .map_err(|_| LlmError::Unavailable("could not set up the HTTP client".into()))?;
        let endpoint = format!("{base_url}/chat/completions");
        Ok(Self {
            client,
            endpoint,
            api_key: config.api_key,
            model: config.model,
            timeout,
        })
    }

    /// The URL completions are posted to.
    pub fn endpoint(&self) -> &str {
        &self.endpoint
    }
}

#[async_trait]
impl LlmProvider for OpenAiProvider {
    #[tracing::instrument(skip_all, fields(model = %self.model))]
    async fn complete(&self, request: &LlmRequest, deltas: &mpsc::Sender<String>) -> Result<LlmResponse, LlmError> {
        let body = request_body(&self.model, request);
        let mut builder = self
            .client
            .post(&self.endpoint)
            .header(reqwest::header::ACCEPT, "text/event-stream, application/json")
            .json(&body);
        if let Some(key) = &self.api_key {
            builder = builder.bearer_auth(key.expose_secret());
        }
        let response = timeout(self.timeout, builder.send())
            .await
            .map_err(|_| LlmError::Timeout)?
            .map_err(send_error)?;
        let status = response.status();
        if !status.is_success() {
            return Err(self.status_error(response).await);
        }
        let is_json = response
            .headers()
            .get(reqwest::header::CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .is_some_and(|v| v.to_ascii_lowercase().contains("json"));
        if is_json {
            self.read_json(response, deltas).await
        } else {
            self.read_stream(response, deltas).await
        }
    }
}

impl OpenAiProvider {
    /// Maps a non-2xx answer to an error: only the status and a short upstream error code, never the body.
    async fn status_error(&self, response: reqwest::Response) -> LlmError {
        let status = response.status();
        let code = match timeout(self.timeout.min(Duration::from_secs(5)), read_capped(response)).await {
            Ok(Some(bytes)) => upstream_error_code(&bytes),
            _ => None,
        };
        let detail = code.map(|c| format!(", {c}")).unwrap_or_default();
        tracing::warn!(
            status = status.as_u16(),
            code = detail.trim_start_matches(", "),
            "language model request refused"
        );
        if status.is_server_error() || status == reqwest::StatusCode::TOO_MANY_REQUESTS {
            LlmError::Unavailable(format!("the server answered {status}{detail}"))
        } else {
            LlmError::BadResponse(format!("the server refused the request ({status}{detail})"))
        }
    }

    /// A server that ignored `stream: true` and answered with one JSON document.
    async fn read_json(
        &self,
        response: reqwest::Response,
        deltas: &mpsc::Sender<String>,
    ) -> Result<LlmResponse, LlmError> {
        let mut stream = response.bytes_stream();
        let mut body = Vec::new();
        while let Some(chunk) = timeout(self.timeout, stream.next())
            .await
            .map_err(|_| LlmError::Timeout)?
        {
            body.extend_from_slice(&chunk.map_err(stream_error)?);
            if body.len() > MAX_BODY_BYTES {
                return Err(LlmError::BadResponse("the response is too large".into()));
            }
        }
        let parsed = parse_json_response(&body)?;
        if !parsed.text.is_empty() {
            // A closed receiver only means nobody listens any more; the answer is still complete.
            let _ = deltas.send(parsed.text.clone()).await;
        }
        Ok(parsed)
    }

    /// The normal case: `data: {chunk}` lines until `data: [DONE]`.
    async fn read_stream(
        &self,
        response: reqwest::Response,
        deltas: &mpsc::Sender<String>,
    ) -> Result<LlmResponse, LlmError> {
        let mut stream = response.bytes_stream();
        let mut lines = LineBuffer::default();
        let mut state = StreamState::default();
        loop {
            let next = timeout(self.timeout, stream.next())
                .await
                .map_err(|_| LlmError::Timeout)?;
            let Some(chunk) = next else { break };
            lines.push(&chunk.map_err(stream_error)?)?;
            while let Some(line) = lines.next_line() {
                match state.feed_line(&line)? {
                    Step::Continue => {}
                    Step::Delta(text) => {
                        if deltas.send(text).await.is_err() {
                            // The listener went away: stop here with what arrived, and call no tools.
                            return Ok(state.abandon());
                        }
                    }
                    Step::Done => return state.finish(),
                }
            }
        }
        if let Some(line) = lines.rest()
            && let Step::Delta(text) = state.feed_line(&line)?
        {
            let _ = deltas.send(text).await;
        }
        if !state.seen_chunk {
            return Err(LlmError::BadResponse("the stream ended without any data".into()));
        }
        state.finish()
    }
}

/// The start of a body (at most `MAX_ERROR_BODY_BYTES`), or `None` when reading fails.
async fn read_capped(response: reqwest::Response) -> Option<Vec<u8>> {
    let mut stream = response.bytes_stream();
    let mut body = Vec::new();
    while let Some(chunk) = stream.next().await {
        body.extend_from_slice(&chunk.ok()?);
        if body.len() >= MAX_ERROR_BODY_BYTES {
            body.truncate(MAX_ERROR_BODY_BYTES);
            break;
        }
    }
    Some(body)
}

fn send_error(error: reqwest::Error) -> LlmError {
    if error.is_timeout() {
        LlmError::Timeout
    } else if error.is_connect() {
        LlmError::Unavailable("could not connect to the server".into())
    } else {
        LlmError::Unavailable("the request to the server failed".into())
    }
}

fn stream_error(error: reqwest::Error) -> LlmError {
    if error.is_timeout() {
        LlmError::Timeout
    } else {
        LlmError::Unavailable("the connection broke while reading the answer".into())
    }
}

#[cfg(test)]
mod tests {
    use std::io::{Read, Write};
    use std::net::TcpListener;
    use std::thread;
    use std::time::Duration;

    use serde_json::{Value, json};
    use tokio::sync::mpsc;

    use super::*;
    use crate::llm::{LlmMessage, ToolCall, ToolSpec, TurnContext, Usage};

    const KEY: &str = "sk-test-very-secret-key";

    /// A one-connection HTTP server: captures the request, then writes `parts` after their delays and closes.
    fn serve(parts: Vec<(u64, String)>) -> (String, std::sync::mpsc::Receiver<String>) {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let url = format!("http://{}/v1/", listener.local_addr().unwrap());
        let (tx, rx) = std::sync::mpsc::channel();
        thread::spawn(move || {
            let Ok((mut socket, _)) = listener.accept() else { return };
            let mut data = Vec::new();
            let mut buf = [0u8; 4096];
            loop {
                let n = socket.read(&mut buf).unwrap_or(0);
                if n == 0 {
                    break;
                }
                data.extend_from_slice(&buf[..n]);
                let text = String::from_utf8_lossy(&data).to_string();
                if let Some(end) = text.find("\r\n\r\n") {
                    let length = text[..end]
                        .lines()
                        .find_map(|l| {
                            l.to_ascii_lowercase()
                                .strip_prefix("content-length:")
                                .map(|v| v.trim().parse::<usize>().unwrap())
                        })
                        .unwrap_or(0);
                    if data.len() >= end + 4 + length {
                        break;
                    }
                }
            }
            let _ = tx.send(String::from_utf8_lossy(&data).to_string());
            for (delay, part) in parts {
                thread::sleep(Duration::from_millis(delay));
                if socket.write_all(part.as_bytes()).is_err() {
                    return;
                }
                let _ = socket.flush();
            }
        });
        (url, rx)
    }

    fn head(status: &str, content_type: &str) -> String {
        format!("HTTP/1.1 {status}\r\ncontent-type: {content_type}\r\nconnection: close\r\n\r\n")
    }

    fn sse(value: Value) -> String {
        format!("data: {value}\n\n")
    }

    fn provider(url: &str, timeout_ms: u64) -> OpenAiProvider {
        OpenAiProvider::new(OpenAiConfig {
            base_url: url.to_string(),
            api_key: Some(SecretString::from(KEY)),
            model: "test-model".into(),
            timeout: Duration::from_millis(timeout_ms),
        })
        .unwrap()
    }

    fn request() -> LlmRequest {
        LlmRequest {
            system: "You are Scout.".into(),
            messages: vec![
                LlmMessage::User("balance?".into()),
                LlmMessage::Assistant {
                    content: String::new(),
                    tool_calls: vec![ToolCall {
                        id: "c1".into(),
                        name: "get_balance".into(),
                        arguments: json!({"chain": "base"}),
                    }],
                },
                LlmMessage::Tool {
                    call_id: "c1".into(),
                    content: "{\"wei\":\"1\"}".into(),
                },
                LlmMessage::User("and gas?".into()),
            ],
            tools: vec![ToolSpec {
                name: "get_gas_price".into(),
                description: "Gas".into(),
                parameters: json!({"type": "object"}),
                capability: crate::domain::agent::Capability::Read,
            }],
            context: TurnContext::default(),
        }
    }

    async fn complete(provider: &OpenAiProvider) -> (Result<LlmResponse, LlmError>, Vec<String>) {
        let (tx, mut rx) = mpsc::channel(64);
        let result = provider.complete(&request(), &tx).await;
        drop(tx);
        let mut deltas = Vec::new();
        while let Some(d) = rx.recv().await {
            deltas.push(d);
        }
        (result, deltas)
    }

    fn chunk(delta: Value) -> String {
        sse(json!({"choices": [{"index": 0, "delta": delta}]}))
    }

    #[tokio::test]
    async fn streams_text_and_assembles_tool_calls() {
        let body = [
            ": keepalive\n\n".to_string(),
            chunk(json!({"role": "assistant", "content": "Hel"})),
            chunk(json!({"content": "lo"})).replace("\n\n", "\r\n\r\n"),
            chunk(
                json!({"tool_calls": [{"index": 0, "id": "call_a", "type": "function", "function": {"name": "get_gas_price", "arguments": ""}}]}),
            ),
            chunk(json!({"tool_calls": [{"index": 0, "function": {"arguments": "{\"chain\":"}}]})),
            chunk(
                json!({"tool_calls": [{"index": 1, "id": "call_b", "function": {"name": "get_block_number", "arguments": "not json"}}]}),
            ),
            chunk(json!({"tool_calls": [{"index": 0, "function": {"arguments": "\"base\"}"}}]})),
            sse(json!({"choices": [], "usage": {"prompt_tokens": 12, "completion_tokens": 7, "total_tokens": 19}})),
            "data: [DONE]\n\n".to_string(),
        ];
        let mut parts = vec![(0, head("200 OK", "text/event-stream"))];
        // Split the body at awkward places to exercise line reassembly.
        let joined = body.concat();
        let (a, b) = joined.split_at(37);
        parts.extend([(5, a.to_string()), (5, b.to_string())]);
        let (url, captured) = serve(parts);
        let (result, deltas) = complete(&provider(&url, 2000)).await;
        let response = result.unwrap();
        assert_eq!(response.text, "Hello");
        assert_eq!(deltas.concat(), "Hello");
        assert_eq!(
            response.usage,
            Usage {
                prompt_tokens: 12,
                completion_tokens: 7
            }
        );
        assert_eq!(
            response.tool_calls,
            vec![
                ToolCall {
                    id: "call_a".into(),
                    name: "get_gas_price".into(),
                    arguments: json!({"chain": "base"})
                },
                ToolCall {
                    id: "call_b".into(),
                    name: "get_block_number".into(),
                    arguments: Value::String("not json".into())
                },
            ]
        );

        let raw = captured.recv().unwrap();
        let (headers, body) = raw.split_once("\r\n\r\n").unwrap();
        assert!(headers.starts_with("POST /v1/chat/completions HTTP/1.1"), "{headers}");
        assert!(
            headers
                .to_ascii_lowercase()
                .contains(&format!("authorization: bearer {}", KEY.to_ascii_lowercase()))
        );
        let body: Value = serde_json::from_str(body).unwrap();
        assert_eq!(body["model"], "test-model");
        assert_eq!(body["stream"], true);
        assert_eq!(body["stream_options"]["include_usage"], true);
        let roles: Vec<&str> = body["messages"]
            .as_array()
            .unwrap()
            .iter()
            .map(|m| m["role"].as_str().unwrap())
            .collect();
        assert_eq!(roles, ["system", "user", "assistant", "tool", "user"]);
        assert_eq!(
            body["messages"][2]["tool_calls"][0]["function"]["arguments"],
            "{\"chain\":\"base\"}"
        );
        assert_eq!(body["messages"][2]["tool_calls"][0]["type"], "function");
        assert_eq!(body["messages"][3]["tool_call_id"], "c1");
        assert_eq!(
            body["tools"][0],
            json!({"type": "function", "function": {"name": "get_gas_price", "description": "Gas", "parameters": {"type": "object"}}})
        );
    }

    #[tokio::test]
    async fn accepts_a_non_streaming_answer() {
        let answer = json!({"choices": [{"index": 0, "message": {"role": "assistant", "content": "Hi there", "tool_calls": [
            {"id": "x1", "type": "function", "function": {"name": "get_balance", "arguments": "{}"}}]}}],
            "usage": {"prompt_tokens": 3, "completion_tokens": 2}});
        let (url, _captured) = serve(vec![(
            0,
            head("200 OK", "application/json; charset=utf-8") + &answer.to_string(),
        )]);
        let (result, deltas) = complete(&provider(&url, 2000)).await;
        let response = result.unwrap();
        assert_eq!(
            (response.text.as_str(), deltas.concat().as_str()),
            ("Hi there", "Hi there")
        );
        assert_eq!(response.tool_calls[0].arguments, json!({}));
        assert_eq!(response.usage.total(), 5);
    }

    #[tokio::test]
    async fn maps_http_errors_without_leaking() {
        let leaky =
            json!({"error": {"message": format!("Incorrect API key provided: {KEY}"), "code": "invalid_api_key"}})
                .to_string();
        for (status, expect_unavailable) in [
            ("500 Internal Server Error", true),
            ("429 Too Many Requests", true),
            ("401 Unauthorized", false),
            ("400 Bad Request", false),
        ] {
            let (url, _c) = serve(vec![(0, head(status, "application/json") + &leaky)]);
            let error = complete(&provider(&url, 2000)).await.0.unwrap_err();
            assert_eq!(
                matches!(error, LlmError::Unavailable(_)),
                expect_unavailable,
                "{status}: {error:?}"
            );
            assert!(matches!(error, LlmError::Unavailable(_) | LlmError::BadResponse(_)));
            let shown = format!("{error} {error:?}");
            assert!(!shown.contains(KEY) && !shown.contains("Incorrect"), "{shown}");
            assert!(shown.contains("invalid_api_key"), "{shown}");
        }
    }

    #[tokio::test]
    async fn connection_refused_is_unavailable() {
        let port = TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
        let error = complete(&provider(&format!("http://127.0.0.1:{port}/v1"), 2000))
            .await
            .0
            .unwrap_err();
        assert!(matches!(error, LlmError::Unavailable(_)), "{error:?}");
    }

    #[tokio::test]
    async fn times_out_before_headers_and_between_chunks() {
        let (url, _c) = serve(vec![(600, head("200 OK", "text/event-stream"))]);
        assert!(matches!(complete(&provider(&url, 150)).await.0, Err(LlmError::Timeout)));
        let (url, _c) = serve(vec![
            (0, head("200 OK", "text/event-stream") + &chunk(json!({"content": "a"}))),
            (600, "data: [DONE]\n\n".into()),
        ]);
        assert!(matches!(complete(&provider(&url, 150)).await.0, Err(LlmError::Timeout)));
    }

    #[tokio::test]
    async fn invalid_stream_json_is_a_bad_response() {
        let (url, _c) = serve(vec![(
            0,
            head("200 OK", "text/event-stream") + "data: {nope\n\ndata: [DONE]\n\n",
        )]);
        assert!(matches!(
            complete(&provider(&url, 2000)).await.0,
            Err(LlmError::BadResponse(_))
        ));
        let (url, _c) = serve(vec![(0, head("200 OK", "application/json") + "not json")]);
        assert!(matches!(
            complete(&provider(&url, 2000)).await.0,
            Err(LlmError::BadResponse(_))
        ));
    }

    #[tokio::test]
    async fn closed_receiver_stops_without_tool_calls() {
        let body = chunk(json!({"content": "partial"}))
            + &chunk(
                json!({"tool_calls": [{"index": 0, "id": "c", "function": {"name": "send_native", "arguments": "{}"}}]}),
            )
            + "data: [DONE]\n\n";
        let (url, _c) = serve(vec![(0, head("200 OK", "text/event-stream") + &body)]);
        let (tx, rx) = mpsc::channel(4);
        drop(rx);
        let response = provider(&url, 2000).complete(&request(), &tx).await.unwrap();
        assert_eq!(response.text, "partial");
        assert!(response.tool_calls.is_empty());
    }

    #[test]
    fn debug_hides_the_key_and_endpoint_is_trimmed() {
        let p = provider("http://localhost:1234/v1///", 1000);
        assert!(!format!("{p:?}").contains(KEY));
        assert_eq!(p.endpoint(), "http://localhost:1234/v1/chat/completions");
        assert_eq!(
            provider("", 1000).endpoint(),
            "https://api.openai.com/v1/chat/completions"
        );
        let config = OpenAiConfig {
            base_url: "localhost:1234".into(),
            api_key: None,
            model: "m".into(),
            timeout: Duration::from_secs(1),
        };
        assert!(OpenAiProvider::new(config).is_err());
    }
}
