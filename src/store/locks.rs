//! In-process named locks. SQLite relies on them alone (one instance per file); PostgreSQL takes one before its
//! lease row, so that at most one task per instance polls the database for a name.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use tokio::sync::OwnedMutexGuard;

use super::SendGuard;

impl SendGuard for OwnedMutexGuard<()> {}

/// Several locks held together (a round's, taken in order).
impl SendGuard for Vec<OwnedMutexGuard<()>> {}

/// Named async mutexes, created on first use.
#[derive(Debug, Clone, Default)]
pub struct LocalLocks(Arc<Mutex<HashMap<String, Arc<tokio::sync::Mutex<()>>>>>);

impl LocalLocks {
    fn named(&self, name: &str) -> Arc<tokio::sync::Mutex<()>> {
        let mut locks = self.0.lock().unwrap_or_else(|p| p.into_inner());
        locks.entry(name.to_string()).or_default().clone()
    }

    pub async fn lock(&self, name: &str) -> OwnedMutexGuard<()> {
        self.named(name).lock_owned().await
    }

    pub fn try_lock(&self, name: &str) -> Option<OwnedMutexGuard<()>> {
        self.named(name).try_lock_owned().ok()
    }
}
