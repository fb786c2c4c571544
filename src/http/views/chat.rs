//! Views of a chat turn: the answer of `POST /api/chat` (also the `final` stream event) and its tool calls.

use serde::Serialize;
use serde_json::Value;
use utoipa::ToSchema;
use uuid::Uuid;

use super::error::FailureView;
use crate::chat::{ChainCall, TurnResult};

/// One tool call of a turn, in call order.
#[derive(Debug, Serialize, ToSchema)]
pub struct ChainCallView {
    pub id: String,
    /// get_balance, get_gas_price, get_block_number, get_transaction, compare_gas, compare_balances,
    /// estimate_transfer_cost, send_native, spending_summary, transaction_history.
    pub tool: String,
    #[schema(value_type = Value)]
    pub args: Value,
    /// The tool's answer (`null` when it failed).
    #[schema(value_type = Value)]
    pub result: Value,
    /// A refused or failed call: the refusal the model was shown.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(value_type = Option<FailureView>, nullable = false)]
    pub error: Option<Value>,
    pub duration_ms: u64,
}

impl From<ChainCall> for ChainCallView {
    fn from(call: ChainCall) -> Self {
        Self {
            id: call.id,
            tool: call.tool,
            args: call.args,
            result: call.result,
            error: call.error,
            duration_ms: call.duration_ms,
        }
    }
}

/// A finished turn.
#[derive(Debug, Serialize, ToSchema)]
pub struct ChatResponseView {
    pub response: String,
    pub conversation_id: Uuid,
    pub chain_calls: Vec<ChainCallView>,
    /// Prompt and completion tokens of every LLM call of the turn.
    pub tokens_used: u64,
    pub message_id: Uuid,
}

impl From<TurnResult> for ChatResponseView {
    fn from(turn: TurnResult) -> Self {
        Self {
            response: turn.response,
            conversation_id: turn.conversation_id,
            chain_calls: turn.chain_calls.into_iter().map(ChainCallView::from).collect(),
            tokens_used: turn.tokens_used,
            message_id: turn.message_id,
        }
    }
}
