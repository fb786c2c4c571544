//! Stored events, and the feed of new ones (how other instances' events arrive is the backend's affair).

use async_trait::async_trait;
use sqlx::{ColumnIndex, Decode, Encode, Executor, Type};
use uuid::Uuid;

use super::{Backend, SqlStore};
use crate::store::shared::{self, EVENT_COLUMNS, EventRow};
use crate::store::{EventFeed, EventRecord, EventStore, StoreResult};

#[async_trait]
impl<B> EventStore for SqlStore<B>
where
    B: Backend,
    for<'c> &'c mut B::Connection: Executor<'c, Database = B>,
    // Events are read by column name: integer id, ids, kind and payload as text.
    for<'r> Uuid: Encode<'r, B> + Decode<'r, B> + Type<B>,
    for<'r> i64: Encode<'r, B> + Decode<'r, B> + Type<B>,
    for<'r> String: Decode<'r, B> + Type<B>,
    for<'r> &'r str: ColumnIndex<B::Row>,
{
    async fn events_after(&self, conversation_id: Uuid, after_id: i64, limit: i64) -> StoreResult<Vec<EventRecord>> {
        let rows: Vec<EventRow> = sqlx::query_as(sqlx::AssertSqlSafe(format!(
            "SELECT {EVENT_COLUMNS} FROM events WHERE conversation_id = $1 AND id > $2 ORDER BY id LIMIT $3"
        )))
        .bind(conversation_id)
        .bind(after_id)
        .bind(limit)
        .fetch_all(&self.pool)
        .await?;
        shared::convert(rows, EventRow::into_event)
    }

    async fn event_by_id(&self, id: i64) -> StoreResult<Option<EventRecord>> {
        let row: Option<EventRow> = sqlx::query_as(sqlx::AssertSqlSafe(format!(
            "SELECT {EVENT_COLUMNS} FROM events WHERE id = $1"
        )))
        .bind(id)
        .fetch_optional(&self.pool)
        .await?;
        row.map(EventRow::into_event).transpose()
    }

    async fn event_feed(&self) -> EventFeed {
        B::event_feed(self).await
    }
}
