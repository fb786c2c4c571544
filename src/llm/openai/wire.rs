//! The Chat Completions wire format: the request body, streamed chunks, tool-call assembly and SSE lines.

use std::collections::BTreeMap;

use serde::Deserialize;
use serde_json::{Value, json};

use crate::llm::{LlmError, LlmMessage, LlmRequest, LlmResponse, ToolCall, Usage};

/// Longest SSE line accepted from the server.
const MAX_LINE_BYTES: usize = 1 << 20;

pub(super) fn upstream_error_code(body: &[u8]) -> Option<String> {
    let value: Value = serde_json::from_slice(body).ok()?;
    let error = value.get("error")?;
    let code = error
        .get("code")
        .and_then(Value::as_str)
        .or_else(|| error.get("type").and_then(Value::as_str))?;
    let ok = !code.is_empty()
        && code.len() <= 64
        && code
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-');
    ok.then(|| code.to_string())
}

/// The JSON body of a streamed chat-completion request.
pub(super) fn request_body(model: &str, request: &LlmRequest) -> Value {
    let mut messages = Vec::with_capacity(request.messages.len() + 1);
    if !request.system.is_empty() {
        messages.push(json!({"role": "system", "content": request.system}));
    }
    for message in &request.messages {
        messages.push(match message {
            LlmMessage::User(text) => json!({"role": "user", "content": text}),
            LlmMessage::Assistant { content, tool_calls } if tool_calls.is_empty() => {
                json!({"role": "assistant", "content": content})
            }
            LlmMessage::Assistant { content, tool_calls } => {
                let calls: Vec<Value> = tool_calls
                    .iter()
                    .map(|c| json!({"id": c.id, "type": "function", "function": {"name": c.name, "arguments": arguments_text(&c.arguments)}}))
                    .collect();
                let content = if content.is_empty() { Value::Null } else { Value::String(content.clone()) };
                json!({"role": "assistant", "content": content, "tool_calls": calls})
            }
            LlmMessage::Tool { call_id, content } => json!({"role": "tool", "tool_call_id": call_id, "content": content}),
        });
    }
    let mut body = json!({
        "model": model,
        "messages": messages,
        "stream": true,
        "stream_options": {"include_usage": true},
    });
    if !request.tools.is_empty() {
        let tools: Vec<Value> = request
            .tools
            .iter()
            .map(|t| json!({"type": "function", "function": {"name": t.name, "description": t.description, "parameters": t.parameters}}))
            .collect();
        body["tools"] = Value::Array(tools);
    }
    body
}

/// Tool-call arguments as the JSON string the API expects (an unparseable original is passed back verbatim).
fn arguments_text(arguments: &Value) -> String {
    match arguments {
        Value::String(raw) => raw.clone(),
        other => other.to_string(),
    }
}

/// Parses collected tool-call arguments; empty means `{}`, unparseable stays a string.
fn parse_arguments(raw: &str) -> Value {
    let trimmed = raw.trim();
    if trimmed.is_empty() {
        return json!({});
    }
    serde_json::from_str(trimmed).unwrap_or_else(|_| Value::String(raw.to_string()))
}

#[derive(Debug, Default, Deserialize)]
struct WireUsage {
    #[serde(default)]
    prompt_tokens: Option<u64>,
    #[serde(default)]
    completion_tokens: Option<u64>,
}

impl WireUsage {
    fn into_usage(self) -> Usage {
        Usage {
            prompt_tokens: self.prompt_tokens.unwrap_or(0),
            completion_tokens: self.completion_tokens.unwrap_or(0),
        }
    }
}

#[derive(Debug, Default, Deserialize)]
struct WireFunction {
    #[serde(default)]
    name: Option<String>,
    /// Usually a string fragment; some servers send a whole object.
    #[serde(default)]
    arguments: Option<Value>,
}

#[derive(Debug, Default, Deserialize)]
struct WireToolCall {
    #[serde(default)]
    index: Option<usize>,
    #[serde(default)]
    id: Option<String>,
    #[serde(default)]
    function: Option<WireFunction>,
}

#[derive(Debug, Default, Deserialize)]
struct WireMessage {
    #[serde(default)]
    content: Option<String>,
    #[serde(default)]
    tool_calls: Option<Vec<WireToolCall>>,
}

#[derive(Debug, Default, Deserialize)]
struct WireChoice {
    #[serde(default)]
    delta: Option<WireMessage>,
    #[serde(default)]
    message: Option<WireMessage>,
}

#[derive(Debug, Default, Deserialize)]
struct WireChunk {
    #[serde(default)]
    choices: Vec<WireChoice>,
    #[serde(default)]
    usage: Option<WireUsage>,
    #[serde(default)]
    error: Option<Value>,
}

/// A non-streaming answer: `choices[0].message` and `usage`.
pub(super) fn parse_json_response(body: &[u8]) -> Result<LlmResponse, LlmError> {
    let chunk: WireChunk =
        serde_json::from_slice(body).map_err(|_| LlmError::BadResponse("the response is not valid JSON".into()))?;
    if let Some(error) = chunk.error {
        return Err(reported_error(&error));
    }
    let message = chunk
        .choices
        .into_iter()
        .next()
        .and_then(|c| c.message.or(c.delta))
        .ok_or_else(|| LlmError::BadResponse("the response has no choices".into()))?;
    let mut calls = ToolCallAssembler::default();
    calls.feed(message.tool_calls.unwrap_or_default());
    Ok(LlmResponse {
        text: message.content.unwrap_or_default(),
        tool_calls: calls.finish(),
        usage: chunk.usage.map(WireUsage::into_usage).unwrap_or_default(),
    })
}

fn reported_error(error: &Value) -> LlmError {
    let code = upstream_error_code(json!({"error": error}).to_string().as_bytes());
    LlmError::BadResponse(match code {
        Some(code) => format!("the server reported an error ({code})"),
        None => "the server reported an error".into(),
    })
}

/// Tool calls streamed in fragments, keyed by their `index`.
#[derive(Debug, Default)]
struct ToolCallAssembler {
    calls: BTreeMap<usize, PartialCall>,
}

#[derive(Debug, Default)]
struct PartialCall {
    id: String,
    name: String,
    arguments: String,
}

impl ToolCallAssembler {
    fn feed(&mut self, fragments: Vec<WireToolCall>) {
        for (position, fragment) in fragments.into_iter().enumerate() {
            let index = fragment
                .index
                .unwrap_or_else(|| self.guess_index(position, fragment.id.as_deref()));
            let call = self.calls.entry(index).or_default();
            if let Some(id) = fragment.id.filter(|id| !id.is_empty())
                && call.id.is_empty()
            {
                call.id = id;
            }
            let Some(function) = fragment.function else { continue };
            if let Some(name) = function.name.filter(|n| !n.is_empty())
                && call.name.is_empty()
            {
                call.name = name;
            }
            match function.arguments {
                Some(Value::String(piece)) => call.arguments.push_str(&piece),
                Some(Value::Null) | None => {}
                Some(other) => call.arguments.push_str(&other.to_string()),
            }
        }
    }

    /// For servers that omit `index`: a new id starts a new call, otherwise fragments continue the last one.
    fn guess_index(&self, position: usize, id: Option<&str>) -> usize {
        let last = self.calls.keys().next_back().copied();
        match (id, last) {
            (Some(id), _) if !id.is_empty() && !self.calls.values().any(|c| c.id == id) => {
                last.map_or(position, |l| l + 1)
            }
            (Some(id), _) if !id.is_empty() => self
                .calls
                .iter()
                .find(|(_, c)| c.id == id)
                .map_or(position, |(i, _)| *i),
            (_, Some(last)) => last,
            (_, None) => position,
        }
    }

    fn finish(self) -> Vec<ToolCall> {
        self.calls
            .into_iter()
            .filter(|(_, c)| {
                if c.name.is_empty() {
                    tracing::warn!("dropping a tool call without a function name");
                }
                !c.name.is_empty()
            })
            .map(|(index, c)| ToolCall {
                id: if c.id.is_empty() { format!("call_{index}") } else { c.id },
                name: c.name,
                arguments: parse_arguments(&c.arguments),
            })
            .collect()
    }
}

/// What one SSE line meant.
#[derive(Debug, PartialEq)]
pub(super) enum Step {
    Continue,
    Delta(String),
    Done,
}

/// The accumulated answer of a stream.
#[derive(Debug, Default)]
pub(super) struct StreamState {
    text: String,
    calls: ToolCallAssembler,
    usage: Usage,
    pub(super) seen_chunk: bool,
    /// `data:` lines that did not parse on their own (a JSON event split over several lines).
    pending: String,
}

impl StreamState {
    pub(super) fn feed_line(&mut self, line: &str) -> Result<Step, LlmError> {
        if line.is_empty() {
            if !self.pending.is_empty() {
                return Err(LlmError::BadResponse("the stream carried invalid JSON".into()));
            }
            return Ok(Step::Continue);
        }
        let Some(data) = line.strip_prefix("data:") else {
            return Ok(Step::Continue); // `event:`, `id:`, `retry:` and `: comment` lines
        };
        let data = data.strip_prefix(' ').unwrap_or(data);
        if self.pending.is_empty() && data.trim() == "[DONE]" {
            return Ok(Step::Done);
        }
        let chunk: WireChunk = if self.pending.is_empty() {
            match serde_json::from_str(data) {
                Ok(chunk) => chunk,
                Err(_) => {
                    self.pending.push_str(data);
                    return Ok(Step::Continue);
                }
            }
        } else {
            self.pending.push('\n');
            self.pending.push_str(data);
            match serde_json::from_str(&self.pending) {
                Ok(chunk) => {
                    self.pending.clear();
                    chunk
                }
                Err(_) => return Ok(Step::Continue),
            }
        };
        self.apply(chunk)
    }

    fn apply(&mut self, chunk: WireChunk) -> Result<Step, LlmError> {
        self.seen_chunk = true;
        if let Some(error) = chunk.error {
            return Err(reported_error(&error));
        }
        if let Some(usage) = chunk.usage {
            self.usage = usage.into_usage();
        }
        let mut delta_text = String::new();
        if let Some(choice) = chunk.choices.into_iter().next()
            && let Some(delta) = choice.delta.or(choice.message)
        {
            delta_text = delta.content.unwrap_or_default();
            self.calls.feed(delta.tool_calls.unwrap_or_default());
        }
        if delta_text.is_empty() {
            return Ok(Step::Continue);
        }
        self.text.push_str(&delta_text);
        Ok(Step::Delta(delta_text))
    }

    pub(super) fn finish(self) -> Result<LlmResponse, LlmError> {
        if !self.pending.is_empty() {
            return Err(LlmError::BadResponse("the stream carried invalid JSON".into()));
        }
        Ok(LlmResponse {
            text: self.text,
            tool_calls: self.calls.finish(),
            usage: self.usage,
        })
    }

    pub(super) fn abandon(self) -> LlmResponse {
        LlmResponse {
            text: self.text,
            tool_calls: Vec::new(),
            usage: self.usage,
        }
    }
}

/// Splits a byte stream into lines (`\n` or `\r\n`), keeping incomplete UTF-8 across chunks.
#[derive(Debug, Default)]
pub(super) struct LineBuffer {
    buffer: Vec<u8>,
}

impl LineBuffer {
    pub(super) fn push(&mut self, bytes: &[u8]) -> Result<(), LlmError> {
        self.buffer.extend_from_slice(bytes);
        if self.buffer.len() > MAX_LINE_BYTES && !self.buffer.contains(&b'\n') {
            return Err(LlmError::BadResponse("a stream line is too long".into()));
        }
        Ok(())
    }

    pub(super) fn next_line(&mut self) -> Option<String> {
        let end = self.buffer.iter().position(|&b| b == b'\n')?;
        let mut line: Vec<u8> = self.buffer.drain(..=end).collect();
        line.pop();
        if line.last() == Some(&b'\r') {
            line.pop();
        }
        Some(String::from_utf8_lossy(&line).into_owned())
    }

    pub(super) fn rest(&mut self) -> Option<String> {
        if self.buffer.is_empty() {
            return None;
        }
        let line = String::from_utf8_lossy(&self.buffer).trim_end_matches('\r').to_string();
        self.buffer.clear();
        Some(line)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn feed(state: &mut StreamState, lines: &[&str]) -> Vec<Step> {
        lines.iter().map(|l| state.feed_line(l).unwrap()).collect()
    }

    #[test]
    fn body_omits_empty_tools() {
        let req = LlmRequest {
            system: String::new(),
            messages: vec![LlmMessage::User("hi".into())],
            tools: vec![],
            context: Default::default(),
        };
        assert!(request_body("m", &req).get("tools").is_none());
    }

    #[test]
    fn tool_calls_without_index_are_grouped_by_id() {
        let mut calls = ToolCallAssembler::default();
        let fragments: Vec<WireToolCall> = serde_json::from_value(json!([
            {"id": "a", "function": {"name": "get_balance", "arguments": "{\"chain\""}},
            {"function": {"arguments": ":\"base\"}"}},
            {"id": "b", "function": {"name": "compare_gas", "arguments": {"chains": ["base"]}}}
        ]))
        .unwrap();
        for fragment in fragments {
            calls.feed(vec![fragment]);
        }
        let calls = calls.finish();
        assert_eq!(calls.len(), 2);
        assert_eq!(calls[0].arguments, json!({"chain": "base"}));
        assert_eq!(calls[1].arguments, json!({"chains": ["base"]}));
    }

    #[test]
    fn sse_lines_comments_and_done() {
        let mut state = StreamState::default();
        let steps = feed(
            &mut state,
            &[
                ": keepalive",
                "event: message",
                "data:{\"choices\":[{\"delta\":{\"content\":\"a b\"}}]}",
                "",
                "data: [DONE]",
            ],
        );
        assert_eq!(
            steps,
            [
                Step::Continue,
                Step::Continue,
                Step::Delta("a b".into()),
                Step::Continue,
                Step::Done
            ]
        );
        assert_eq!(state.finish().unwrap().text, "a b");
    }

    #[test]
    fn json_split_over_data_lines_is_joined() {
        let mut state = StreamState::default();
        let steps = feed(
            &mut state,
            &["data: {\"choices\":[{\"delta\":", "data: {\"content\":\"x\"}}]}", ""],
        );
        assert_eq!(steps, [Step::Continue, Step::Delta("x".into()), Step::Continue]);
        let mut broken = StreamState::default();
        broken.feed_line("data: {oops").unwrap();
        assert!(matches!(broken.feed_line(""), Err(LlmError::BadResponse(_))));
    }

    #[test]
    fn error_chunks_and_codes() {
        let mut state = StreamState::default();
        let error = state
            .feed_line("data: {\"error\":{\"message\":\"secret sk-1\",\"code\":\"rate_limit_exceeded\"}}")
            .unwrap_err();
        assert_eq!(
            error.to_string(),
            "the language model returned an invalid response: the server reported an error (rate_limit_exceeded)"
        );
        assert_eq!(
            upstream_error_code(b"{\"error\":{\"code\":\"has spaces in it\"}}"),
            None
        );
    }

    #[test]
    fn line_buffer_handles_crlf_and_partial_lines() {
        let mut lines = LineBuffer::default();
        lines.push(b"data: a\r\nda").unwrap();
        assert_eq!(lines.next_line().as_deref(), Some("data: a"));
        assert_eq!(lines.next_line(), None);
        lines.push(b"ta: b").unwrap();
        assert_eq!(lines.rest().as_deref(), Some("data: b"));
    }
}
