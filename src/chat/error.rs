//! Why a chat turn failed, in the chat engine's own terms; the HTTP status of each is decided in `http::error`.

use crate::llm::LlmError;
use crate::store::StoreError;

#[derive(Debug, thiserror::Error)]
pub enum ChatError {
    #[error("conversation not found")]
    ConversationNotFound,
    /// The conversation exists but belongs to another agent.
    #[error("the conversation belongs to another agent")]
    ForeignConversation,
    /// The language model failed; its kind (timeout, unavailable, bad response) keeps its own code.
    #[error(transparent)]
    Llm(#[from] LlmError),
    /// The turn ran past `LLM_TURN_TIMEOUT_MS`; what it had done is stored with the error.
    #[error("the chat turn did not finish within its deadline; what it did so far is recorded in the conversation")]
    Deadline,
    #[error("the conversation could not be read or saved")]
    Store(#[source] StoreError),
}

impl From<StoreError> for ChatError {
    fn from(err: StoreError) -> Self {
        match err {
            StoreError::ConversationNotFound => ChatError::ConversationNotFound,
            other => ChatError::Store(other),
        }
    }
}

impl ChatError {
    /// The snake_case code clients see (stream `error` events and API errors).
    pub fn code(&self) -> &'static str {
        match self {
            Self::ConversationNotFound => "conversation_not_found",
            Self::ForeignConversation => "forbidden",
            Self::Llm(LlmError::Timeout) | Self::Deadline => "upstream_timeout",
            Self::Llm(LlmError::Unavailable(_)) => "upstream_unavailable",
            Self::Llm(LlmError::BadResponse(_)) => "upstream_bad_response",
            Self::Store(_) => "internal_error",
        }
    }
}
