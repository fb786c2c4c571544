//! The PostgreSQL backend: a connection pool; row locks where read-then-write must not interleave.

use std::time::Duration;

use sqlx::postgres::PgPoolOptions;
use sqlx::{PgPool, Postgres, Transaction};

use super::sql::impl_store;

/// PostgreSQL-backed store.
#[derive(Debug, Clone)]
pub struct PgStore {
    pool: PgPool,
}

impl PgStore {
    pub async fn connect(url: &str) -> Result<Self, StoreError> {
        let pool = PgPoolOptions::new()
            .max_connections(16)
            .acquire_timeout(Duration::from_secs(10))
            .connect(url)
            .await?;
        Ok(PgStore { pool })
    }

    pub async fn migrate(&self) -> Result<(), StoreError> {
        sqlx::migrate!("./migrations/postgres").run(&self.pool).await?;
        Ok(())
    }

    pub fn pool(&self) -> &PgPool {
        &self.pool
    }

    /// Writes that must not interleave lock the rows they read (`FOR UPDATE`) inside this transaction.
    async fn begin_write(&self) -> Result<Transaction<'static, Postgres>, sqlx::Error> {
        self.pool.begin().await
    }
}

/// Serialises writers of one agent (updates, spending, nonces) across connections and instances.
async fn lock_agent(conn: &mut sqlx::PgConnection, id: uuid::Uuid) -> Result<(), sqlx::Error> {
    sqlx::query("SELECT 1 FROM agents WHERE id = $1 FOR UPDATE")
        .bind(id)
        .execute(conn)
        .await?;
    Ok(())
}

impl_store!(PgStore, Postgres);
