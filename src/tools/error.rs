//! A tool's refusal or failure as models and MCP clients see it: `{"error": {code, message}}`. The services' own
//! errors are converted here, at the edge that shows them.

use serde_json::{Value, json};

use crate::chain::ChainError;
use crate::transfers::TransferError;

/// A tool's refusal or failure, returned to the model as `{"error": {code, message}}`.
#[derive(Debug, Clone, PartialEq)]
pub struct ToolError {
    pub code: &'static str,
    pub message: String,
}

impl ToolError {
    pub fn new(code: &'static str, message: impl Into<String>) -> Self {
        ToolError {
            code,
            message: message.into(),
        }
    }

    pub fn invalid(message: impl Into<String>) -> Self {
        Self::new("invalid_arguments", message)
    }

    pub fn unknown_tool(name: &str) -> Self {
        Self::new("unknown_tool", format!("no tool named {name}"))
    }

    pub fn to_json(&self) -> Value {
        json!({ "code": self.code, "message": self.message })
    }
}

impl From<ChainError> for ToolError {
    fn from(err: ChainError) -> Self {
        ToolError::new(err.code(), err.to_string())
    }
}

impl From<TransferError> for ToolError {
    fn from(err: TransferError) -> Self {
        ToolError::new(err.code(), err.to_string())
    }
}

/// A tool's result: its JSON, or why it has none.
pub type ToolResult = Result<Value, ToolError>;
