//! Connections set aside for single read statements outside any transaction (the authenticated hot path on SQLite).
//!
//! sqlx's pool pings a connection when it comes back (and, unless told otherwise, before it is handed out): on
//! SQLite each ping is a round trip to the connection's worker thread, as costly as the read itself. A connection
//! here is taken and given back without one. It is given back only after its statement completed; one dropped
//! mid-statement (a cancelled request) is closed instead, so a connection in an unknown state is never reused.
//! Each statement reads the latest committed state (WAL), so nothing read here is older than the last commit.

use std::sync::Mutex;

use futures::future::BoxFuture;
use tokio::sync::{Semaphore, SemaphorePermit};

/// Opens one more read connection.
pub type Opener<C> = Box<dyn Fn() -> BoxFuture<'static, Result<C, sqlx::Error>> + Send + Sync>;

/// At most `max` connections, opened on demand and kept idle between uses.
pub struct ReadConns<C> {
    idle: Mutex<Vec<C>>,
    slots: Semaphore,
    open: Opener<C>,
}

impl<C: Send> ReadConns<C> {
    pub fn new(max: usize, open: Opener<C>) -> Self {
        ReadConns {
            idle: Mutex::new(Vec::with_capacity(max)),
            slots: Semaphore::new(max),
            open,
        }
    }

    /// An idle connection, or a new one when none is idle and fewer than `max` are out.
    pub async fn take(&self) -> Result<ReadConn<'_, C>, sqlx::Error> {
        let permit = self.slots.acquire().await.map_err(|_| sqlx::Error::PoolClosed)?;
        let idle = self.idle.lock().unwrap_or_else(|p| p.into_inner()).pop();
        let conn = match idle {
            Some(conn) => conn,
            None => (self.open)().await?,
        };
        Ok(ReadConn {
            set: self,
            conn,
            _permit: permit,
        })
    }
}

/// A taken connection; `give_back` returns it once its statement is done, dropping it closes it.
pub struct ReadConn<'a, C> {
    set: &'a ReadConns<C>,
    pub conn: C,
    _permit: SemaphorePermit<'a>,
}

impl<C> ReadConn<'_, C> {
    pub fn give_back(self) {
        self.set.idle.lock().unwrap_or_else(|p| p.into_inner()).push(self.conn);
    }
}
