//! Offers (§23) in SQL: one row per offer, an upstream (`resource_url`, its method, the advertised MIME type and the
//! sealed headers) or a stored body (`content`), never both; amounts as decimal text in base units and wei; `forward`
//! as a JSON array. Closing is a status change with its audit entry in the same transaction.

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use sqlx::{ColumnIndex, Decode, Encode, Executor, Type};
use uuid::Uuid;

use super::{Backend, SqlStore};
use crate::store::offers::{Offer, OfferStore, Resource, SettleWhen};
use crate::store::shared;
use crate::store::{AuditEvent, StoreError, StoreResult};

const OFFER_COLUMNS: &str = "id, agent_id, chain, asset, token_address, decimals, token_name, token_version, price, \
     description, resource_url, resource_method, mime_type, resource_headers, content, content_type, settle, forward, \
     gas_per_day, max_timeout_seconds, status, created_at";

#[derive(sqlx::FromRow)]
struct OfferRow {
    id: Uuid,
    agent_id: Uuid,
    chain: String,
    asset: String,
    token_address: String,
    decimals: i64,
    token_name: String,
    token_version: String,
    price: String,
    description: String,
    resource_url: Option<String>,
    resource_method: Option<String>,
    mime_type: Option<String>,
    resource_headers: Option<Vec<u8>>,
    content: Option<Vec<u8>>,
    content_type: Option<String>,
    settle: String,
    forward: String,
    gas_per_day: String,
    max_timeout_seconds: i64,
    status: String,
    created_at: DateTime<Utc>,
}

impl OfferRow {
    fn into_offer(self) -> StoreResult<Offer> {
        let corrupt = |what: &str| StoreError::Corrupt(format!("offers.{what} of {}", self.id));
        let resource = match (self.resource_url, self.content) {
            (Some(url), None) => Resource::Upstream {
                url,
                method: self.resource_method.ok_or_else(|| corrupt("resource_method"))?,
                mime_type: self.mime_type.ok_or_else(|| corrupt("mime_type"))?,
                sealed_headers: self.resource_headers,
            },
            (None, Some(content)) => Resource::Content {
                content,
                content_type: self.content_type.ok_or_else(|| corrupt("content_type"))?,
            },
            _ => return Err(corrupt("resource_url")),
        };
        let forward: Vec<String> = serde_json::from_str(&self.forward).map_err(|_| corrupt("forward"))?;
        Ok(Offer {
            id: self.id,
            agent_id: self.agent_id,
            chain: self.chain,
            asset: self.asset,
            token: shared::address_from_text(&self.token_address)?,
            decimals: u8::try_from(self.decimals).map_err(|_| corrupt("decimals"))?,
            token_name: self.token_name,
            token_version: self.token_version,
            price: shared::wei_from_text(&self.price, "offers.price")?,
            description: self.description,
            resource,
            settle: SettleWhen::parse(&self.settle).ok_or_else(|| corrupt("settle"))?,
            forward,
            gas_per_day: shared::wei_from_text(&self.gas_per_day, "offers.gas_per_day")?,
            max_timeout_seconds: shared::u64_from(self.max_timeout_seconds, "offers.max_timeout_seconds")?,
            active: self.status == "active",
            created_at: self.created_at,
        })
    }
}

#[async_trait]
impl<B> OfferStore for SqlStore<B>
where
    B: Backend,
    for<'c> &'c mut B::Connection: Executor<'c, Database = B>,
    // Ids, text, numbers, bytes and times bound and read by name; the audit entry as `append_audit` writes it.
    for<'r> Uuid: Encode<'r, B> + Decode<'r, B> + Type<B>,
    for<'r> String: Encode<'r, B> + Decode<'r, B> + Type<B>,
    for<'r> &'r str: Encode<'r, B> + Type<B>,
    for<'r> i64: Encode<'r, B> + Decode<'r, B> + Type<B>,
    for<'r> Vec<u8>: Encode<'r, B> + Decode<'r, B> + Type<B>,
    for<'r> DateTime<Utc>: Encode<'r, B> + Decode<'r, B> + Type<B>,
    for<'r> Option<String>: Encode<'r, B> + Decode<'r, B>,
    for<'r> Option<Vec<u8>>: Encode<'r, B> + Decode<'r, B>,
    usize: ColumnIndex<B::Row>,
    for<'r> &'r str: ColumnIndex<B::Row>,
{
    async fn create_offer(&self, offer: &Offer, audit: &AuditEvent) -> StoreResult<()> {
        let (url, method, mime_type, headers, content, content_type) = match &offer.resource {
            Resource::Upstream {
                url,
                method,
                mime_type,
                sealed_headers,
            } => (
                Some(url.clone()),
                Some(method.clone()),
                Some(mime_type.clone()),
                sealed_headers.clone(),
                None,
                None,
            ),
            Resource::Content { content, content_type } => (
                None,
                None,
                None,
                None,
                Some(content.clone()),
                Some(content_type.clone()),
            ),
        };
        let forward = serde_json::to_string(&offer.forward).expect("a list of strings serialises");
        let mut tx = B::begin_write(self).await?;
        sqlx::query(sqlx::AssertSqlSafe(format!(
            "INSERT INTO offers ({OFFER_COLUMNS}) VALUES ({})",
            shared::placeholders(1, 22)
        )))
        .bind(offer.id)
        .bind(offer.agent_id)
        .bind(&offer.chain)
        .bind(&offer.asset)
        .bind(offer.token.to_checksum(None))
        .bind(i64::from(offer.decimals))
        .bind(&offer.token_name)
        .bind(&offer.token_version)
        .bind(offer.price.to_string())
        .bind(&offer.description)
        .bind(url)
        .bind(method)
        .bind(mime_type)
        .bind(headers)
        .bind(content)
        .bind(content_type)
        .bind(offer.settle.as_str())
        .bind(forward)
        .bind(offer.gas_per_day.to_string())
        .bind(i64::try_from(offer.max_timeout_seconds).unwrap_or(i64::MAX))
        .bind(if offer.active { "active" } else { "closed" })
        .bind(offer.created_at)
        .execute(&mut *tx)
        .await?;
        self.append_audit(&mut tx, audit).await?;
        tx.commit().await?;
        Ok(())
    }

    async fn offers(&self, agent_id: Uuid) -> StoreResult<Vec<Offer>> {
        let sql = format!("SELECT {OFFER_COLUMNS} FROM offers WHERE agent_id = $1 ORDER BY created_at DESC, id DESC");
        let rows: Vec<OfferRow> = sqlx::query_as(sqlx::AssertSqlSafe(sql))
            .bind(agent_id)
            .fetch_all(&self.pool)
            .await?;
        shared::convert(rows, OfferRow::into_offer)
    }

    async fn offer(&self, id: Uuid) -> StoreResult<Option<Offer>> {
        let sql = format!("SELECT {OFFER_COLUMNS} FROM offers WHERE id = $1");
        let row: Option<OfferRow> = sqlx::query_as(sqlx::AssertSqlSafe(sql))
            .bind(id)
            .fetch_optional(&self.pool)
            .await?;
        row.map(OfferRow::into_offer).transpose()
    }

    async fn close_offer(&self, agent_id: Uuid, id: Uuid, audit: &AuditEvent) -> StoreResult<bool> {
        let mut tx = B::begin_write(self).await?;
        let closed = sqlx::query(
            "UPDATE offers SET status = 'closed', closed_at = $1 WHERE id = $2 AND agent_id = $3 AND status = 'active'",
        )
        .bind(self.now())
        .bind(id)
        .bind(agent_id)
        .execute(&mut *tx)
        .await?;
        if B::rows_affected(&closed) != 1 {
            return Ok(false);
        }
        self.append_audit(&mut tx, audit).await?;
        tx.commit().await?;
        Ok(true)
    }
}
