//! Views of stored conversations and their messages.

use chrono::{DateTime, Utc};
use serde::Serialize;
use serde_json::Value;
use utoipa::ToSchema;
use uuid::Uuid;

use super::chat::ChainCallView;
use crate::store::{Conversation, Message, Role};

#[derive(Debug, Serialize, ToSchema)]
pub struct ConversationView {
    pub id: Uuid,
    pub agent_id: Uuid,
    /// The first user message, cut to 80 characters.
    pub title: String,
    pub created_at: DateTime<Utc>,
    pub updated_at: DateTime<Utc>,
    pub message_count: i64,
}

impl From<&Conversation> for ConversationView {
    fn from(c: &Conversation) -> Self {
        Self {
            id: c.id,
            agent_id: c.agent_id,
            title: c.title.clone(),
            created_at: c.created_at,
            updated_at: c.updated_at,
            message_count: c.message_count,
        }
    }
}

/// Who wrote a message.
#[derive(Debug, Clone, Copy, Serialize, ToSchema)]
#[serde(rename_all = "lowercase")]
pub enum RoleView {
    User,
    Assistant,
}

impl From<Role> for RoleView {
    fn from(role: Role) -> Self {
        match role {
            Role::User => Self::User,
            Role::Assistant => Self::Assistant,
        }
    }
}

#[derive(Debug, Serialize, ToSchema)]
pub struct MessageView {
    pub id: Uuid,
    pub role: RoleView,
    pub content: String,
    /// The turn's tool calls as stored (empty for user messages).
    #[schema(value_type = Vec<ChainCallView>)]
    pub chain_calls: Value,
    pub created_at: DateTime<Utc>,
}

impl From<&Message> for MessageView {
    fn from(m: &Message) -> Self {
        Self {
            id: m.id,
            role: m.role.into(),
            content: m.content.clone(),
            chain_calls: m.chain_calls.clone(),
            created_at: m.created_at,
        }
    }
}
