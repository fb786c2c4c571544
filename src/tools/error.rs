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
    /// Machine-readable specifics beside the code (`{"rule": "per_day"}` for `policy_denied`).
    pub details: Option<Value>,
}

impl ToolError {
    pub fn new(code: &'static str, message: impl Into<String>) -> Self {
        ToolError {
            code,
            message: message.into(),
            details: None,
        }
    }

    pub fn invalid(message: impl Into<String>) -> Self {
        Self::new("invalid_arguments", message)
    }

    pub fn unknown_tool(name: &str) -> Self {
        Self::new("unknown_tool", format!("no tool named {name}"))
    }

    pub fn to_json(&self) -> Value {
        match &self.details {
            Some(details) => json!({ "code": self.code, "message": self.message, "details": details }),
            None => json!({ "code": self.code, "message": self.message }),
        }
    }
}

impl From<ChainError> for ToolError {
    fn from(err: ChainError) -> Self {
        ToolError::new(err.code(), err.to_string())
    }
}

impl From<TransferError> for ToolError {
    fn from(err: TransferError) -> Self {
        let mut tool_error = ToolError::new(err.code(), err.to_string());
        if let Some(rule) = err.policy_rule() {
            tool_error.details = Some(json!({ "rule": rule.as_str() }));
        }
        tool_error
    }
}

impl From<crate::transfers::PayError> for ToolError {
    fn from(err: crate::transfers::PayError) -> Self {
        use crate::transfers::PayError;
        let mut tool_error = ToolError::new(err.code(), err.to_string());
        tool_error.details = match &err {
            PayError::Transfer(e) if e.policy_rule().is_some() => {
                e.policy_rule().map(|rule| json!({ "rule": rule.as_str() }))
            }
            PayError::PaymentFailed { reason, transfer_id } => {
                Some(json!({ "reason": reason, "transfer_id": transfer_id }))
            }
            PayError::Timeout { transfer_id } | PayError::Unavailable { transfer_id } => {
                Some(json!({ "transfer_id": transfer_id }))
            }
            PayError::Refused(crate::x402::X402Error::Unsupported { offered, .. }) => {
                Some(json!({ "offered": offered }))
            }
            _ => None,
        };
        tool_error
    }
}

/// A tool's result: its JSON, or why it has none.
pub type ToolResult = Result<Value, ToolError>;
