//! Conversations and their messages.

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use sqlx::{ColumnIndex, Decode, Encode, Executor, Type};
use uuid::Uuid;

use super::{Backend, SqlStore};
use crate::store::shared::{self, CONVERSATION_SELECT, MESSAGE_COLUMNS, MessageRow};
use crate::store::{Conversation, ConversationStore, Message, StoreError, StoreResult};

#[async_trait]
impl<B> ConversationStore for SqlStore<B>
where
    B: Backend,
    for<'c> &'c mut B::Connection: Executor<'c, Database = B>,
    // Conversations and messages are read by column name: ids, text, counts, times.
    for<'r> Uuid: Encode<'r, B> + Decode<'r, B> + Type<B>,
    for<'r> Option<Uuid>: Encode<'r, B>,
    for<'r> String: Encode<'r, B> + Decode<'r, B> + Type<B>,
    for<'r> &'r str: Encode<'r, B> + Type<B>,
    for<'r> i64: Encode<'r, B> + Decode<'r, B> + Type<B>,
    for<'r> DateTime<Utc>: Encode<'r, B> + Decode<'r, B> + Type<B>,
    for<'r> &'r str: ColumnIndex<B::Row>,
{
    async fn create_conversation(&self, c: &Conversation) -> StoreResult<()> {
        let mut conn = self.pool.acquire().await?;
        Self::insert_conversation_in(&mut conn, c).await
    }

    async fn start_conversation(&self, c: &Conversation, first: &Message) -> StoreResult<()> {
        let mut tx = B::begin_write(self).await?;
        Self::insert_conversation_in(&mut tx, c).await?;
        Self::insert_message_in(&mut tx, first).await?;
        tx.commit().await?;
        Ok(())
    }

    async fn get_conversation(&self, id: Uuid) -> StoreResult<Conversation> {
        let row: Option<Conversation> =
            sqlx::query_as(sqlx::AssertSqlSafe(format!("{CONVERSATION_SELECT} WHERE c.id = $1")))
                .bind(id)
                .fetch_optional(&self.pool)
                .await?;
        row.ok_or(StoreError::ConversationNotFound)
    }

    async fn list_conversations(
        &self,
        agent_id: Uuid,
        before: Option<Uuid>,
        limit: i64,
    ) -> StoreResult<Option<Vec<Conversation>>> {
        if let Some(cursor) = before {
            match self.get_conversation(cursor).await {
                Ok(c) if c.agent_id == agent_id => {}
                Ok(_) | Err(StoreError::ConversationNotFound) => return Ok(None),
                Err(e) => return Err(e),
            }
        }
        // The page is chosen first, then its messages are counted in one grouped join: no count per row.
        // (created_at, id) orders the page totally, so a cursor never skips or repeats a conversation.
        Ok(Some(
            sqlx::query_as(
                "SELECT c.id, c.agent_id, c.title, c.created_at, c.updated_at, COUNT(m.id) AS message_count \
                 FROM (SELECT id, agent_id, title, created_at, updated_at FROM conversations \
                       WHERE agent_id = $1 AND ($2 IS NULL \
                         OR created_at < (SELECT created_at FROM conversations WHERE id = $2) \
                         OR (created_at = (SELECT created_at FROM conversations WHERE id = $2) AND id < $2)) \
                       ORDER BY created_at DESC, id DESC LIMIT $3) c \
                 LEFT JOIN messages m ON m.conversation_id = c.id \
                 GROUP BY c.id, c.agent_id, c.title, c.created_at, c.updated_at \
                 ORDER BY c.created_at DESC, c.id DESC",
            )
            .bind(agent_id)
            .bind(before)
            .bind(limit)
            .fetch_all(&self.pool)
            .await?,
        ))
    }

    async fn delete_conversation(&self, id: Uuid) -> StoreResult<bool> {
        let mut tx = B::begin_write(self).await?;
        sqlx::query("DELETE FROM messages WHERE conversation_id = $1")
            .bind(id)
            .execute(&mut *tx)
            .await?;
        let done = sqlx::query("DELETE FROM conversations WHERE id = $1")
            .bind(id)
            .execute(&mut *tx)
            .await?;
        tx.commit().await?;
        Ok(B::rows_affected(&done) == 1)
    }

    async fn insert_message(&self, m: &Message) -> StoreResult<()> {
        let mut tx = B::begin_write(self).await?;
        Self::insert_message_in(&mut tx, m).await?;
        tx.commit().await?;
        Ok(())
    }

    async fn recent_messages(&self, conversation_id: Uuid, limit: i64) -> StoreResult<Vec<Message>> {
        let rows: Vec<MessageRow> = sqlx::query_as(sqlx::AssertSqlSafe(format!(
            "SELECT {MESSAGE_COLUMNS} FROM messages WHERE conversation_id = $1 \
             ORDER BY created_at DESC, role ASC LIMIT $2"
        )))
        .bind(conversation_id)
        .bind(limit)
        .fetch_all(&self.pool)
        .await?;
        let mut messages = shared::convert(rows, MessageRow::into_message)?;
        messages.reverse();
        Ok(messages)
    }
}

impl<B> SqlStore<B>
where
    B: Backend,
    for<'c> &'c mut B::Connection: Executor<'c, Database = B>,
    // Writes only: ids, text, the token count and times are bound.
    for<'r> Uuid: Encode<'r, B> + Type<B>,
    for<'r> String: Encode<'r, B> + Type<B>,
    for<'r> &'r str: Encode<'r, B> + Type<B>,
    for<'r> i64: Encode<'r, B> + Type<B>,
    for<'r> DateTime<Utc>: Encode<'r, B> + Type<B>,
{
    /// Inserts a conversation inside the caller's transaction (or on the caller's connection).
    async fn insert_conversation_in(conn: &mut B::Connection, c: &Conversation) -> StoreResult<()> {
        sqlx::query(
            "INSERT INTO conversations (id, agent_id, title, created_at, updated_at) VALUES ($1, $2, $3, $4, $5)",
        )
        .bind(c.id)
        .bind(c.agent_id)
        .bind(&c.title)
        .bind(c.created_at)
        .bind(c.updated_at)
        .execute(&mut *conn)
        .await?;
        Ok(())
    }

    /// Appends a message inside the caller's transaction and marks its conversation as updated.
    pub(super) async fn insert_message_in(conn: &mut B::Connection, m: &Message) -> StoreResult<()> {
        sqlx::query(sqlx::AssertSqlSafe(format!(
            "INSERT INTO messages ({MESSAGE_COLUMNS}) VALUES ($1, $2, $3, $4, $5, $6, $7)"
        )))
        .bind(m.id)
        .bind(m.conversation_id)
        .bind(m.role.as_str())
        .bind(&m.content)
        .bind(m.chain_calls.to_string())
        .bind(m.tokens_used)
        .bind(m.created_at)
        .execute(&mut *conn)
        .await?;
        sqlx::query("UPDATE conversations SET updated_at = $1 WHERE id = $2")
            .bind(m.created_at)
            .bind(m.conversation_id)
            .execute(&mut *conn)
            .await?;
        Ok(())
    }
}
