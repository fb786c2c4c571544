//! Which agent holds each open Streamable HTTP session, so that a session id is only honoured for the agent that
//! opened it, and how many each agent may hold. The sessions themselves live in rmcp's `LocalSessionManager` (this
//! instance's memory), which closes one idle longer than `MCP_SESSION_IDLE_SECS`; entries here whose session is
//! gone are dropped whenever a session is opened, so neither map grows without bound.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Instant;

use rmcp::transport::streamable_http_server::session::SessionId;
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use uuid::Uuid;

struct Held {
    agent_id: Uuid,
    last_used: Instant,
}

/// The owners of the open sessions of this instance.
pub struct SessionOwners {
    manager: Arc<LocalSessionManager>,
    held: Mutex<HashMap<SessionId, Held>>,
    max_per_agent: usize,
}

impl SessionOwners {
    pub fn new(manager: Arc<LocalSessionManager>, max_per_agent: usize) -> Self {
        SessionOwners {
            manager,
            held: Mutex::default(),
            max_per_agent,
        }
    }

    fn held(&self) -> std::sync::MutexGuard<'_, HashMap<SessionId, Held>> {
        self.held.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// Whether `id` is an open session of `agent_id` (marking it used); an unknown, closed or other agent's
    /// session is not.
    pub async fn holds(&self, agent_id: Uuid, id: &str) -> bool {
        let id: SessionId = id.into();
        let open = self.manager.sessions.read().await.contains_key(&id);
        let mut held = self.held();
        match held.get_mut(&id) {
            Some(entry) if open && entry.agent_id == agent_id => {
                entry.last_used = Instant::now();
                true
            }
            Some(_) if !open => {
                held.remove(&id);
                false
            }
            _ => false,
        }
    }

    /// Records a session just opened by `agent_id`; beyond the per-agent cap its least recently used sessions are
    /// closed. Entries of sessions closed meanwhile (idle, deleted) are dropped.
    pub async fn opened(&self, agent_id: Uuid, id: &str) {
        let open: Vec<SessionId> = self.manager.sessions.read().await.keys().cloned().collect();
        let evicted = {
            let mut held = self.held();
            held.retain(|id, _| open.contains(id));
            held.insert(
                id.into(),
                Held {
                    agent_id,
                    last_used: Instant::now(),
                },
            );
            let mut own: Vec<(SessionId, Instant)> = held
                .iter()
                .filter(|(_, entry)| entry.agent_id == agent_id)
                .map(|(id, entry)| (id.clone(), entry.last_used))
                .collect();
            own.sort_by_key(|(_, used)| *used);
            let excess = own.len().saturating_sub(self.max_per_agent);
            let evicted: Vec<SessionId> = own.into_iter().take(excess).map(|(id, _)| id).collect();
            for id in &evicted {
                held.remove(id);
            }
            evicted
        };
        for id in evicted {
            tracing::info!(%agent_id, "MCP session closed: the agent opened more than its cap");
            use rmcp::transport::streamable_http_server::session::SessionManager;
            if let Err(e) = self.manager.close_session(&id).await {
                tracing::warn!(error = %e, "could not close an MCP session");
            }
        }
    }

    /// Forgets a session its client ended (`DELETE /mcp`).
    pub fn closed(&self, id: &str) {
        self.held().remove(id);
    }
}
