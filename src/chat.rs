//! The chat engine: one turn runner shared by the sync and streaming endpoints; the tools it offers come from
//! `crate::tools`.

mod error;
mod prompt;
pub mod runner;

pub use error::ChatError;

use std::sync::Arc;

use crate::llm::LlmProvider;
use crate::metrics::Metrics;
use crate::store::Store;
use crate::tools::ToolServices;

/// What a chat turn uses: the conversation store, the model, the tools, the turn metrics.
#[derive(Clone)]
pub struct ChatServices {
    pub store: Arc<dyn Store>,
    pub llm: Arc<dyn LlmProvider>,
    pub tools: ToolServices,
    pub metrics: Arc<Metrics>,
    /// The whole turn's deadline (`LLM_TURN_TIMEOUT_MS`).
    pub turn_timeout: std::time::Duration,
    /// What messages are stamped with (the system's clock outside tests).
    pub clock: Arc<dyn crate::domain::clock::Clock>,
}

use serde::Serialize;
use serde_json::Value;
use uuid::Uuid;

/// One tool call of a turn as stored and returned (`chain_calls`).
#[derive(Debug, Clone, Serialize)]
pub struct ChainCall {
    pub id: String,
    pub tool: String,
    pub args: Value,
    pub result: Value,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<Value>,
    pub duration_ms: u64,
}

/// The outcome of a finished turn (`final` event and the sync response).
#[derive(Debug, Clone, Serialize)]
pub struct TurnResult {
    pub response: String,
    pub conversation_id: Uuid,
    pub chain_calls: Vec<ChainCall>,
    pub tokens_used: u64,
    pub message_id: Uuid,
}

/// Events of a turn, in the order the stream sends them.
#[derive(Debug, Clone)]
pub enum ChatEvent {
    Start { conversation_id: Uuid },
    TextDelta(String),
    ToolCall { id: String, tool: String, args: Value },
    ToolResult(ChainCall),
    Final(TurnResult),
    Error { code: String, message: String },
}

impl ChatEvent {
    /// The SSE event name and JSON data.
    pub fn to_sse(&self) -> (&'static str, Value) {
        use serde_json::json;
        match self {
            ChatEvent::Start { conversation_id } => ("start", json!({ "conversation_id": conversation_id })),
            ChatEvent::TextDelta(text) => ("text_delta", json!({ "text": text })),
            ChatEvent::ToolCall { id, tool, args } => ("tool_call", json!({ "id": id, "tool": tool, "args": args })),
            ChatEvent::ToolResult(call) => {
                let mut data = json!({ "id": call.id, "tool": call.tool, "duration_ms": call.duration_ms });
                match &call.error {
                    Some(error) => data["error"] = error.clone(),
                    None => data["result"] = call.result.clone(),
                }
                ("tool_result", data)
            }
            ChatEvent::Final(result) => ("final", serde_json::to_value(result).unwrap_or_default()),
            ChatEvent::Error { code, message } => ("error", json!({ "code": code, "message": message })),
        }
    }
}
