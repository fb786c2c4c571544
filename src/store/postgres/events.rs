//! PostgreSQL: stored events, and the feed of new ones: this instance's, and other instances' by `LISTEN`.

use async_trait::async_trait;
use uuid::Uuid;

use super::PgStore;
use crate::store::shared::{self, EVENT_COLUMNS, EventRow};
use crate::store::{EventFeed, EventRecord, EventStore, StoreResult};

#[async_trait]
impl EventStore for PgStore {
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
        super::listener::event_feed(self).await
    }
}
