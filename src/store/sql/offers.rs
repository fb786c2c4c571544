//! Offers (§23) in SQL: one row per offer, an upstream (`resource_url`, its method, the advertised MIME type and the
//! sealed headers) or a stored body (`content`), never both; amounts as decimal text in base units and wei; `forward`
//! as a JSON array. Closing is a status change with its audit entry in the same transaction. An offer held for the
//! owner's approval (§23 Tools) is a row `awaiting_approval` with its `expires_at`; holding and deciding store the
//! approval events (stream and webhook outbox) and the decision's audit entries in the same transaction, as a held
//! transfer's do (`policies.rs`).

use alloy::primitives::Address;
use async_trait::async_trait;
use chrono::{DateTime, Utc};
use serde_json::{Value, json};
use sqlx::{ColumnIndex, Decode, Encode, Executor, Type};
use uuid::Uuid;

use super::{Backend, SqlStore};
use crate::domain::audit::Actor;
use crate::domain::policy::ApprovalStatus;
use crate::store::offers::{
    Offer, OfferApproval, OfferDecision, OfferState, OfferStore, OfferVerdict, Resource, SettleWhen,
};
use crate::store::shared::{self, EVENT_COLUMNS, EventRow};
use crate::store::{AuditEvent, EventRecord, StoreError, StoreResult};

const OFFER_COLUMNS: &str = "id, agent_id, chain, asset, token_address, decimals, token_name, token_version, price, \
     description, resource_url, resource_method, mime_type, resource_headers, content, content_type, settle, forward, \
     gas_per_day, max_timeout_seconds, status, created_at, expires_at, conversation_id, decided_at";

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
    expires_at: Option<DateTime<Utc>>,
    conversation_id: Option<Uuid>,
    decided_at: Option<DateTime<Utc>>,
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
            status: OfferState::parse(&self.status).ok_or_else(|| corrupt("status"))?,
            created_at: self.created_at,
            approval: self.expires_at.map(|expires_at| OfferApproval {
                expires_at,
                conversation_id: self.conversation_id,
                decided_at: self.decided_at,
            }),
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
    for<'r> Option<Uuid>: Encode<'r, B> + Decode<'r, B>,
    for<'r> Option<DateTime<Utc>>: Encode<'r, B> + Decode<'r, B>,
    usize: ColumnIndex<B::Row>,
    for<'r> &'r str: ColumnIndex<B::Row>,
{
    async fn create_offer(&self, offer: &Offer, audit: &AuditEvent) -> StoreResult<()> {
        let mut tx = B::begin_write(self).await?;
        Self::insert_offer_in(&mut tx, offer).await?;
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
        let mut conn = self.pool.acquire().await?;
        Self::offer_in(&mut conn, id).await
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

    async fn hold_offer(&self, offer: &Offer) -> StoreResult<()> {
        if offer.status != OfferState::AwaitingApproval || offer.approval.is_none() {
            return Err(StoreError::Corrupt(format!(
                "offer {} to hold is not awaiting approval",
                offer.id
            )));
        }
        let mut tx = B::begin_write(self).await?;
        Self::insert_offer_in(&mut tx, offer).await?;
        let pay_to = Self::pay_to_in(&mut tx, offer).await?;
        let event = self
            .offer_event_in(&mut tx, offer, "approval_required", offer.required_event(pay_to), None)
            .await?;
        tx.commit().await?;
        self.feed.announce(&event);
        Ok(())
    }

    async fn waiting_offers(&self, agent_id: Uuid) -> StoreResult<Vec<Offer>> {
        let sql = format!(
            "SELECT {OFFER_COLUMNS} FROM offers WHERE agent_id = $1 AND status = 'awaiting_approval' \
             ORDER BY created_at, id"
        );
        let rows: Vec<OfferRow> = sqlx::query_as(sqlx::AssertSqlSafe(sql))
            .bind(agent_id)
            .fetch_all(&self.pool)
            .await?;
        shared::convert(rows, OfferRow::into_offer)
    }

    async fn due_offers(&self, chain: &str, now: DateTime<Utc>) -> StoreResult<Vec<Offer>> {
        let sql = format!(
            "SELECT {OFFER_COLUMNS} FROM offers WHERE chain = $1 AND status = 'awaiting_approval' \
             AND expires_at <= $2 ORDER BY expires_at, id"
        );
        let rows: Vec<OfferRow> = sqlx::query_as(sqlx::AssertSqlSafe(sql))
            .bind(chain)
            .bind(now)
            .fetch_all(&self.pool)
            .await?;
        shared::convert(rows, OfferRow::into_offer)
    }

    async fn decide_offer(
        &self,
        agent_id: Uuid,
        id: Uuid,
        verdict: OfferVerdict,
        by: Actor,
        reason: Option<&str>,
    ) -> StoreResult<OfferDecision> {
        let mut tx = B::begin_write(self).await?;
        let Some(mut offer) = Self::offer_in(&mut tx, id).await?.filter(|o| o.agent_id == agent_id) else {
            return Ok(OfferDecision::NotFound);
        };
        let (Some(status), Some(approval)) = (offer.approval_status(), offer.approval.as_mut()) else {
            // An offer that never waited is no approval.
            return Ok(OfferDecision::NotFound);
        };
        if status != ApprovalStatus::AwaitingApproval {
            return Ok(OfferDecision::NotWaiting(status));
        }
        let now = self.now();
        if verdict == OfferVerdict::Approved && now >= approval.expires_at {
            return Ok(OfferDecision::NotWaiting(ApprovalStatus::Expired));
        }
        let decided = sqlx::query(
            "UPDATE offers SET status = $1, decided_at = $2 WHERE id = $3 AND status = 'awaiting_approval'",
        )
        .bind(verdict.state().as_str())
        .bind(now)
        .bind(id)
        .execute(&mut *tx)
        .await?;
        if B::rows_affected(&decided) != 1 {
            // Decided meanwhile by another instance (PostgreSQL): where it stands now.
            drop(tx);
            let now_status = self.offer(id).await?.and_then(|o| o.approval_status());
            return Ok(now_status.map_or(OfferDecision::NotFound, OfferDecision::NotWaiting));
        }
        approval.decided_at = Some(now);
        offer.status = verdict.state();
        let pay_to = Self::pay_to_in(&mut tx, &offer).await?;
        let audits = offer.decided_audit(verdict, by, reason, pay_to);
        self.append_audits(&mut tx, &audits.iter().collect::<Vec<_>>()).await?;
        let event = self
            .offer_event_in(
                &mut tx,
                &offer,
                "approval_resolved",
                offer.resolved_event(verdict),
                Some((verdict, pay_to)),
            )
            .await?;
        tx.commit().await?;
        self.feed.announce(&event);
        Ok(OfferDecision::Decided(Box::new(offer)))
    }
}

/// The offer steps inside the caller's transaction.
impl<B> SqlStore<B>
where
    B: Backend,
    for<'c> &'c mut B::Connection: Executor<'c, Database = B>,
    for<'r> Uuid: Encode<'r, B> + Decode<'r, B> + Type<B>,
    for<'r> String: Encode<'r, B> + Decode<'r, B> + Type<B>,
    for<'r> &'r str: Encode<'r, B> + Type<B>,
    for<'r> i64: Encode<'r, B> + Decode<'r, B> + Type<B>,
    for<'r> Vec<u8>: Encode<'r, B> + Decode<'r, B> + Type<B>,
    for<'r> DateTime<Utc>: Encode<'r, B> + Decode<'r, B> + Type<B>,
    for<'r> Option<String>: Encode<'r, B> + Decode<'r, B>,
    for<'r> Option<Vec<u8>>: Encode<'r, B> + Decode<'r, B>,
    for<'r> Option<Uuid>: Encode<'r, B> + Decode<'r, B>,
    for<'r> Option<DateTime<Utc>>: Encode<'r, B> + Decode<'r, B>,
    usize: ColumnIndex<B::Row>,
    for<'r> &'r str: ColumnIndex<B::Row>,
{
    async fn offer_in(conn: &mut B::Connection, id: Uuid) -> StoreResult<Option<Offer>> {
        let sql = format!("SELECT {OFFER_COLUMNS} FROM offers WHERE id = $1");
        let row: Option<OfferRow> = sqlx::query_as(sqlx::AssertSqlSafe(sql))
            .bind(id)
            .fetch_optional(&mut *conn)
            .await?;
        row.map(OfferRow::into_offer).transpose()
    }

    /// The agent's wallet on the offer's chain, where its buyers pay (`None` if it has none there any more).
    async fn pay_to_in(conn: &mut B::Connection, offer: &Offer) -> StoreResult<Option<Address>> {
        let row: Option<(String,)> =
            sqlx::query_as("SELECT address FROM wallet_addresses WHERE agent_id = $1 AND chain = $2")
                .bind(offer.agent_id)
                .bind(&offer.chain)
                .fetch_optional(&mut *conn)
                .await?;
        row.map(|(address,)| shared::address_from_text(&address)).transpose()
    }

    /// Stores a held offer's approval event in the events of its conversation and the webhook outbox, as a held
    /// transfer's (`approval.required` with its `kind`; `approval.resolved` with `decision` and `status`); it is
    /// announced to other instances once the transaction commits.
    async fn offer_event_in(
        &self,
        conn: &mut B::Connection,
        offer: &Offer,
        kind: &str,
        payload: Value,
        resolved: Option<(OfferVerdict, Option<Address>)>,
    ) -> StoreResult<EventRecord> {
        let conversation_id = offer.approval.as_ref().and_then(|a| a.conversation_id);
        let row: EventRow = sqlx::query_as(sqlx::AssertSqlSafe(format!(
            "INSERT INTO events (conversation_id, agent_id, kind, payload, created_at) VALUES ($1, $2, $3, $4, $5) \
             RETURNING {EVENT_COLUMNS}"
        )))
        .bind(conversation_id)
        .bind(offer.agent_id)
        .bind(kind)
        .bind(payload.to_string())
        .bind(self.now())
        .fetch_one(&mut *conn)
        .await?;
        let record = row.into_event()?;
        B::notify_event(&mut *conn, record.id).await?;
        let (ty, data) = match resolved {
            None => ("approval.required", payload),
            Some((verdict, pay_to)) => {
                let mut data = offer.required_event(pay_to);
                data["decision"] = json!(verdict.approval().decision());
                data["status"] = json!(verdict.approval().as_str());
                ("approval.resolved", data)
            }
        };
        Self::outbox_in(
            conn,
            crate::domain::webhook::WebhookEvent::new(ty, offer.agent_id, data, self.now()),
        )
        .await?;
        Ok(record)
    }

    async fn insert_offer_in(conn: &mut B::Connection, offer: &Offer) -> StoreResult<()> {
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
        let approval = offer.approval.as_ref();
        sqlx::query(sqlx::AssertSqlSafe(format!(
            "INSERT INTO offers ({OFFER_COLUMNS}) VALUES ({})",
            shared::placeholders(1, 25)
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
        .bind(offer.status.as_str())
        .bind(offer.created_at)
        .bind(approval.map(|a| a.expires_at))
        .bind(approval.and_then(|a| a.conversation_id))
        .bind(approval.and_then(|a| a.decided_at))
        .execute(&mut *conn)
        .await?;
        Ok(())
    }
}
