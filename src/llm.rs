//! Language-model providers behind one trait: the offline builtin engine and any OpenAI-compatible API.

pub mod builtin;
pub mod openai;

use async_trait::async_trait;
use serde::{Deserialize, Serialize};
use tokio::sync::mpsc;

use crate::domain::agent::Capability;

/// A tool the model may call, with its JSON schema.
#[derive(Debug, Clone, Serialize)]
pub struct ToolSpec {
    pub name: String,
    pub description: String,
    /// JSON schema of the arguments object.
    pub parameters: serde_json::Value,
    /// The capability that grants the tool (not sent to providers).
    #[serde(skip)]
    pub capability: Capability,
}

/// A tool call the model asked for.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ToolCall {
    /// Provider-assigned call id, echoed back in the tool result message.
    pub id: String,
    pub name: String,
    /// The arguments as the model produced them (a JSON object, or `Value::String` when unparseable).
    pub arguments: serde_json::Value,
}

/// One message of the prompt, in the order the model sees them.
#[derive(Debug, Clone, PartialEq)]
pub enum LlmMessage {
    User(String),
    Assistant {
        content: String,
        tool_calls: Vec<ToolCall>,
    },
    /// The result of a tool call, as JSON text.
    Tool {
        call_id: String,
        content: String,
    },
}

/// Facts about the turn that the builtin engine uses directly (an LLM reads them from the system prompt).
#[derive(Debug, Clone, Default)]
pub struct TurnContext {
    pub agent_name: String,
    pub chains: Vec<String>,
    pub capabilities: Vec<String>,
    /// `chain -> 0x address` of the agent's own wallets.
    pub wallet_addresses: Vec<(String, String)>,
    pub connected_wallet: Option<String>,
    /// Every tool the service has, offered or not, with the capability that grants it.
    pub tool_capabilities: Vec<(String, Capability)>,
    /// The assets the service knows (native coins and registry tokens): what the builtin engine can send.
    pub assets: std::sync::Arc<crate::domain::asset::Registry>,
}

impl TurnContext {
    /// The capability that grants `tool` (`read` for a name the service does not know).
    pub fn capability_of(&self, tool: &str) -> &'static str {
        self.tool_capabilities
            .iter()
            .find(|(name, _)| name == tool)
            .map_or(Capability::Read, |(_, capability)| *capability)
            .as_str()
    }
}

/// Everything a provider needs for one completion.
#[derive(Debug, Clone)]
pub struct LlmRequest {
    pub system: String,
    pub messages: Vec<LlmMessage>,
    pub tools: Vec<ToolSpec>,
    pub context: TurnContext,
}

/// Token usage of one completion.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Usage {
    pub prompt_tokens: u64,
    pub completion_tokens: u64,
}

impl Usage {
    pub fn total(&self) -> u64 {
        self.prompt_tokens + self.completion_tokens
    }
}

/// The outcome of one completion: text (already streamed as deltas) and/or tool calls.
#[derive(Debug, Clone, Default)]
pub struct LlmResponse {
    pub text: String,
    pub tool_calls: Vec<ToolCall>,
    pub usage: Usage,
}

/// Why a completion failed. Messages never contain the API key or the upstream body.
#[derive(Debug, thiserror::Error)]
pub enum LlmError {
    #[error("the language model did not answer in time")]
    Timeout,
    #[error("the language model is unavailable: {0}")]
    Unavailable(String),
    #[error("the language model returned an invalid response: {0}")]
    BadResponse(String),
}

/// A chat-completion provider. Text is sent to `deltas` piece by piece as it is produced.
#[async_trait]
pub trait LlmProvider: Send + Sync {
    async fn complete(&self, request: &LlmRequest, deltas: &mpsc::Sender<String>) -> Result<LlmResponse, LlmError>;
}
