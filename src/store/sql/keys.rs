//! The master-key check and the re-encryption of every wallet key under a new master key.

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use sqlx::{ColumnIndex, Decode, Encode, Executor, Type};
use uuid::Uuid;

use super::{Backend, SqlStore};
use crate::domain::transaction::X402Record;
use crate::store::shared::{self, KeyRow};
use crate::store::{AuditSealFn, KeyStore, Resealers, StoreError, StoreResult};
use crate::vault::{EncryptedKey, KeyCheck, SealedAuditKey};
use alloy::primitives::Address;

type CheckRow = (i32, Vec<u8>, Vec<u8>);

fn into_sealed((key_version, ciphertext, nonce): CheckRow) -> SealedAuditKey {
    SealedAuditKey {
        key_version,
        ciphertext,
        nonce,
    }
}

fn into_check((key_version, ciphertext, nonce): CheckRow) -> KeyCheck {
    KeyCheck {
        key_version,
        ciphertext,
        nonce,
    }
}

#[async_trait]
impl<B> KeyStore for SqlStore<B>
where
    B: Backend,
    for<'c> &'c mut B::Connection: Executor<'c, Database = B>,
    // Ids, key bytes and versions, addresses as text, times; key rows are read by name, the check as a tuple.
    for<'r> Uuid: Encode<'r, B> + Decode<'r, B> + Type<B>,
    for<'r> String: Encode<'r, B> + Decode<'r, B> + Type<B>,
    for<'r> i32: Encode<'r, B> + Decode<'r, B> + Type<B>,
    for<'r> Vec<u8>: Encode<'r, B> + Decode<'r, B> + Type<B>,
    for<'r> DateTime<Utc>: Encode<'r, B> + Type<B>,
    for<'r> i64: Decode<'r, B> + Type<B>,
    usize: ColumnIndex<B::Row>,
    for<'r> &'r str: ColumnIndex<B::Row>,
{
    async fn key_check(&self) -> StoreResult<Option<KeyCheck>> {
        let row: Option<CheckRow> = sqlx::query_as("SELECT key_version, ciphertext, nonce FROM key_check WHERE id = 1")
            .fetch_optional(&self.pool)
            .await?;
        Ok(row.map(into_check))
    }

    async fn init_key_check(&self, check: &KeyCheck) -> StoreResult<KeyCheck> {
        let mut tx = B::begin_write(self).await?;
        sqlx::query(
            "INSERT INTO key_check (id, key_version, ciphertext, nonce, updated_at) VALUES (1, $1, $2, $3, $4) \
             ON CONFLICT (id) DO NOTHING",
        )
        .bind(check.key_version)
        .bind(&check.ciphertext)
        .bind(&check.nonce)
        .bind(self.now())
        .execute(&mut *tx)
        .await?;
        let stored: CheckRow = sqlx::query_as("SELECT key_version, ciphertext, nonce FROM key_check WHERE id = 1")
            .fetch_one(&mut *tx)
            .await?;
        tx.commit().await?;
        Ok(into_check(stored))
    }

    async fn any_wallet_key(&self) -> StoreResult<Option<(Uuid, EncryptedKey)>> {
        let row: Option<(Uuid,)> =
            sqlx::query_as("SELECT agent_id FROM wallet_keys WHERE scheme = 'secp256k1' ORDER BY created_at LIMIT 1")
                .fetch_optional(&self.pool)
                .await?;
        let Some((agent_id,)) = row else {
            return Ok(None);
        };
        let row: KeyRow = sqlx::query_as(
            "SELECT address, ciphertext, nonce, key_version, scheme FROM wallet_keys WHERE agent_id = $1",
        )
        .bind(agent_id)
        .fetch_one(&self.pool)
        .await?;
        Ok(Some((agent_id, row.into_key()?)))
    }

    async fn token_keys(&self) -> StoreResult<Vec<(Uuid, Address)>> {
        let rows: Vec<(Uuid, String)> = sqlx::query_as(
            "SELECT w.agent_id, w.address FROM wallet_keys w JOIN agents a ON a.id = w.agent_id \
             WHERE w.scheme = 'pkcs11' AND a.is_active ORDER BY w.agent_id",
        )
        .fetch_all(&self.pool)
        .await?;
        rows.into_iter()
            .map(|(id, address)| Ok((id, shared::address_from_text(&address)?)))
            .collect()
    }

    async fn local_keys(&self) -> StoreResult<Vec<(Uuid, EncryptedKey)>> {
        let ids: Vec<(Uuid,)> =
            sqlx::query_as("SELECT agent_id FROM wallet_keys WHERE scheme = 'secp256k1' ORDER BY agent_id")
                .fetch_all(&self.pool)
                .await?;
        let mut keys = Vec::with_capacity(ids.len());
        for (agent_id,) in ids {
            let row: KeyRow = sqlx::query_as(
                "SELECT address, ciphertext, nonce, key_version, scheme FROM wallet_keys WHERE agent_id = $1",
            )
            .bind(agent_id)
            .fetch_one(&self.pool)
            .await?;
            keys.push((agent_id, row.into_key()?));
        }
        Ok(keys)
    }

    async fn move_key_to_token(&self, agent_id: Uuid, address: Address) -> StoreResult<bool> {
        let moved = sqlx::query(
            "UPDATE wallet_keys SET scheme = 'pkcs11', ciphertext = $1, nonce = $2 \
             WHERE agent_id = $3 AND scheme = 'secp256k1' AND address = $4",
        )
        .bind(Vec::<u8>::new())
        .bind(Vec::<u8>::new())
        .bind(agent_id)
        .bind(address.to_checksum(None))
        .execute(&self.pool)
        .await?;
        Ok(B::rows_affected(&moved) == 1)
    }

    /// Locks the check row first: agent creation reads it under the same lock (`check_key_version`), so no key of
    /// the old version can be written while or after the keys move.
    async fn rotate_keys(&self, from: &KeyCheck, to: &KeyCheck, reseal: &Resealers<'_>) -> StoreResult<Option<usize>> {
        let mut tx = B::begin_write(self).await?;
        let sql = format!(
            "SELECT key_version, ciphertext, nonce FROM key_check WHERE id = 1{}",
            B::ROW_LOCK
        );
        let current: Option<CheckRow> = sqlx::query_as(sqlx::AssertSqlSafe(sql))
            .fetch_optional(&mut *tx)
            .await?;
        if current.map(into_check).as_ref() != Some(from) {
            return Ok(None);
        }
        let ids: Vec<(Uuid,)> =
            sqlx::query_as("SELECT agent_id FROM wallet_keys WHERE scheme = 'secp256k1' ORDER BY agent_id")
                .fetch_all(&mut *tx)
                .await?;
        for (agent_id,) in &ids {
            let row: KeyRow = sqlx::query_as(
                "SELECT address, ciphertext, nonce, key_version, scheme FROM wallet_keys WHERE agent_id = $1",
            )
            .bind(agent_id)
            .fetch_one(&mut *tx)
            .await?;
            let key = (reseal.wallet)(*agent_id, &row.into_key()?).map_err(StoreError::Reseal)?;
            sqlx::query("UPDATE wallet_keys SET ciphertext = $1, nonce = $2, key_version = $3 WHERE agent_id = $4")
                .bind(&key.ciphertext)
                .bind(&key.nonce)
                .bind(key.key_version)
                .bind(agent_id)
                .execute(&mut *tx)
                .await?;
        }
        reseal_sponsor_keys(&mut tx, reseal.wallet).await?;
        let audit: Option<CheckRow> =
            sqlx::query_as("SELECT key_version, ciphertext, nonce FROM audit_key WHERE id = 1")
                .fetch_optional(&mut *tx)
                .await?;
        if let Some(sealed) = audit.map(into_sealed) {
            let moved = (reseal.audit)(&sealed).map_err(StoreError::Reseal)?;
            sqlx::query("UPDATE audit_key SET key_version = $1, ciphertext = $2, nonce = $3 WHERE id = 1")
                .bind(moved.key_version)
                .bind(&moved.ciphertext)
                .bind(&moved.nonce)
                .execute(&mut *tx)
                .await?;
        }
        let waiting: Vec<(Uuid, String)> =
            sqlx::query_as("SELECT id, x402 FROM approvals WHERE status = 'awaiting_approval' AND x402 IS NOT NULL")
                .fetch_all(&mut *tx)
                .await?;
        for (id, text) in waiting {
            let mut record: X402Record =
                serde_json::from_str(&text).map_err(|e| StoreError::Corrupt(format!("approvals.x402: {e}")))?;
            let Some(sealed) = &record.pending_request else {
                continue;
            };
            record.pending_request = Some((reseal.request)(id, sealed).map_err(StoreError::Reseal)?);
            let text = serde_json::to_string(&record).expect("an x402 record serialises");
            sqlx::query("UPDATE approvals SET x402 = $1 WHERE id = $2")
                .bind(text)
                .bind(id)
                .execute(&mut *tx)
                .await?;
        }
        reseal_webhook_secrets(&mut tx, reseal.webhook).await?;
        reseal_offer_headers(&mut tx, reseal.offer).await?;
        sqlx::query("UPDATE key_check SET key_version = $1, ciphertext = $2, nonce = $3, updated_at = $4 WHERE id = 1")
            .bind(to.key_version)
            .bind(&to.ciphertext)
            .bind(&to.nonce)
            .bind(self.now())
            .execute(&mut *tx)
            .await?;
        tx.commit().await?;
        Ok(Some(ids.len()))
    }

    async fn audit_key(&self) -> StoreResult<Option<SealedAuditKey>> {
        let row: Option<CheckRow> = sqlx::query_as("SELECT key_version, ciphertext, nonce FROM audit_key WHERE id = 1")
            .fetch_optional(&self.pool)
            .await?;
        Ok(row.map(into_sealed))
    }

    /// In the write transaction that appends audit entries too (the head row locked on PostgreSQL), so the first
    /// keyed id is the one after the head as it stands at the commit.
    async fn create_audit_key(&self, seal: AuditSealFn<'_>) -> StoreResult<SealedAuditKey> {
        let mut tx = B::begin_write(self).await?;
        let head = format!("SELECT entry_id FROM audit_head WHERE id = 1{}", B::ROW_LOCK);
        let (head_id,): (i64,) = sqlx::query_as(sqlx::AssertSqlSafe(head)).fetch_one(&mut *tx).await?;
        let existing: Option<CheckRow> =
            sqlx::query_as("SELECT key_version, ciphertext, nonce FROM audit_key WHERE id = 1")
                .fetch_optional(&mut *tx)
                .await?;
        if let Some(existing) = existing {
            return Ok(into_sealed(existing));
        }
        let sealed = seal(head_id + 1);
        sqlx::query(
            "INSERT INTO audit_key (id, key_version, ciphertext, nonce, created_at) VALUES (1, $1, $2, $3, $4)",
        )
        .bind(sealed.key_version)
        .bind(&sealed.ciphertext)
        .bind(&sealed.nonce)
        .bind(self.now())
        .execute(&mut *tx)
        .await?;
        tx.commit().await?;
        Ok(sealed)
    }
}

impl<B> SqlStore<B>
where
    B: Backend,
    for<'c> &'c mut B::Connection: Executor<'c, Database = B>,
    for<'r> i32: Decode<'r, B> + Type<B>,
    usize: ColumnIndex<B::Row>,
{
    /// Inside a write transaction: refuses a wallet key of another version than the database's (an instance still
    /// running with the key `agentd rotate-key` replaced), holding the check row until the commit.
    pub(super) async fn check_key_version(conn: &mut B::Connection, version: i32) -> StoreResult<()> {
        let sql = format!("SELECT key_version FROM key_check WHERE id = 1{}", B::ROW_LOCK);
        let stored: Option<(i32,)> = sqlx::query_as(sqlx::AssertSqlSafe(sql)).fetch_optional(conn).await?;
        match stored {
            Some((stored,)) if stored != version => Err(StoreError::KeyRotated),
            _ => Ok(()),
        }
    }
}

/// Reseals each chain's sponsor key held in the database (§22: sealed as wallet keys are, under its key id) with
/// `reseal`, in the rotating transaction.
async fn reseal_sponsor_keys<B>(conn: &mut B::Connection, reseal: crate::store::ResealFn<'_>) -> StoreResult<()>
where
    B: Backend,
    for<'c> &'c mut B::Connection: Executor<'c, Database = B>,
    for<'r> Uuid: Encode<'r, B> + Decode<'r, B> + Type<B>,
    for<'r> String: Encode<'r, B> + Decode<'r, B> + Type<B>,
    for<'r> i32: Encode<'r, B> + Decode<'r, B> + Type<B>,
    for<'r> Vec<u8>: Encode<'r, B> + Decode<'r, B> + Type<B>,
    usize: ColumnIndex<B::Row>,
    for<'r> &'r str: ColumnIndex<B::Row>,
{
    let sponsors: Vec<(String, Uuid)> =
        sqlx::query_as("SELECT chain, key_id FROM sponsor_keys WHERE scheme = 'secp256k1' ORDER BY chain")
            .fetch_all(&mut *conn)
            .await?;
    for (chain, key_id) in &sponsors {
        let row: KeyRow =
            sqlx::query_as("SELECT address, ciphertext, nonce, key_version, scheme FROM sponsor_keys WHERE chain = $1")
                .bind(chain)
                .fetch_one(&mut *conn)
                .await?;
        let key = (reseal)(*key_id, &row.into_key()?).map_err(StoreError::Reseal)?;
        sqlx::query("UPDATE sponsor_keys SET ciphertext = $1, nonce = $2, key_version = $3 WHERE chain = $4")
            .bind(&key.ciphertext)
            .bind(&key.nonce)
            .bind(key.key_version)
            .bind(chain)
            .execute(&mut *conn)
            .await?;
    }
    Ok(())
}

/// Reseals every webhook endpoint's secret under the next master key (part of `rotate_keys`' transaction).
async fn reseal_webhook_secrets<B>(
    conn: &mut B::Connection,
    reseal: crate::store::WebhookResealFn<'_>,
) -> StoreResult<()>
where
    B: Backend,
    for<'c> &'c mut B::Connection: Executor<'c, Database = B>,
    for<'r> Uuid: Encode<'r, B> + Decode<'r, B> + Type<B>,
    for<'r> i32: Encode<'r, B> + Decode<'r, B> + Type<B>,
    for<'r> Vec<u8>: Encode<'r, B> + Decode<'r, B> + Type<B>,
    usize: ColumnIndex<B::Row>,
{
    let secrets: Vec<(Uuid, i32, Vec<u8>, Vec<u8>)> =
        sqlx::query_as("SELECT id, secret_version, secret_ciphertext, secret_nonce FROM webhooks ORDER BY id")
            .fetch_all(&mut *conn)
            .await?;
    for (id, key_version, ciphertext, nonce) in secrets {
        let sealed = crate::vault::SealedSecret {
            key_version,
            ciphertext,
            nonce,
        };
        let moved = (reseal)(id, &sealed).map_err(StoreError::Reseal)?;
        sqlx::query("UPDATE webhooks SET secret_version = $1, secret_ciphertext = $2, secret_nonce = $3 WHERE id = $4")
            .bind(moved.key_version)
            .bind(&moved.ciphertext)
            .bind(&moved.nonce)
            .bind(id)
            .execute(&mut *conn)
            .await?;
    }
    Ok(())
}

/// Reseals every offer's upstream headers under the next master key (part of `rotate_keys`' transaction, §23).
async fn reseal_offer_headers<B>(conn: &mut B::Connection, reseal: crate::store::OfferResealFn<'_>) -> StoreResult<()>
where
    B: Backend,
    for<'c> &'c mut B::Connection: Executor<'c, Database = B>,
    for<'r> Uuid: Encode<'r, B> + Decode<'r, B> + Type<B>,
    for<'r> i32: Encode<'r, B> + Decode<'r, B> + Type<B>,
    for<'r> Vec<u8>: Encode<'r, B> + Decode<'r, B> + Type<B>,
    usize: ColumnIndex<B::Row>,
{
    let headers: Vec<(Uuid, Vec<u8>)> =
        sqlx::query_as("SELECT id, resource_headers FROM offers WHERE resource_headers IS NOT NULL ORDER BY id")
            .fetch_all(&mut *conn)
            .await?;
    for (id, sealed) in headers {
        let moved = (reseal)(id, &sealed).map_err(StoreError::Reseal)?;
        sqlx::query("UPDATE offers SET resource_headers = $1 WHERE id = $2")
            .bind(moved)
            .bind(id)
            .execute(&mut *conn)
            .await?;
    }
    Ok(())
}
