//! The event bus: stored events (confirmations) fanned out to stream subscribers on this instance, and, on
//! PostgreSQL, woken by `LISTEN/NOTIFY` so that events produced by any instance reach every instance.

use std::sync::Arc;

use tokio::sync::broadcast;

use crate::store::{EventRecord, Store};

/// Live events of this instance. Subscribers filter by conversation and skip ids they already sent.
#[derive(Debug, Clone)]
pub struct EventBus {
    sender: broadcast::Sender<Arc<EventRecord>>,
}

impl Default for EventBus {
    fn default() -> Self {
        EventBus {
            sender: broadcast::channel(4096).0,
        }
    }
}

impl EventBus {
    /// Hands a stored event to the live subscribers (none listening is fine).
    pub fn publish(&self, event: EventRecord) {
        let _ = self.sender.send(Arc::new(event));
    }

    pub fn subscribe(&self) -> broadcast::Receiver<Arc<EventRecord>> {
        self.sender.subscribe()
    }

    pub fn subscribers(&self) -> usize {
        self.sender.receiver_count()
    }
}

/// Follows `NOTIFY agentd_events` and publishes each event it names, read back from the store.
pub async fn listen_postgres(
    pool: sqlx::PgPool,
    store: Arc<dyn Store>,
    bus: EventBus,
    mut stop: tokio::sync::watch::Receiver<bool>,
) {
    let mut listener = match sqlx::postgres::PgListener::connect_with(&pool).await {
        Ok(l) => l,
        Err(e) => {
            tracing::error!(error = %e, "cannot listen for events; streams will only see this instance's events");
            return;
        }
    };
    if let Err(e) = listener.listen(crate::store::EVENTS_CHANNEL).await {
        tracing::error!(error = %e, "cannot listen for events");
        return;
    }
    loop {
        let notification = tokio::select! {
            n = listener.recv() => n,
            _ = stop.changed() => return,
        };
        match notification {
            Ok(n) => {
                let Ok(id) = n.payload().parse::<i64>() else { continue };
                match store.event_by_id(id).await {
                    Ok(Some(event)) => bus.publish(event),
                    Ok(None) => {}
                    Err(e) => tracing::warn!(error = %e, "cannot read a notified event"),
                }
            }
            Err(e) => {
                tracing::warn!(error = %e, "event listener interrupted; reconnecting");
                tokio::time::sleep(std::time::Duration::from_millis(500)).await;
            }
        }
    }
}
