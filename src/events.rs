//! The event bus: stored events (confirmations) fanned out to stream subscribers on this instance. What reaches
//! it comes from the store's event feed (`EventStore::event_feed`), which on PostgreSQL also carries the events
//! of other instances.

use std::sync::Arc;

use futures::StreamExt;
use tokio::sync::broadcast;

use crate::store::{EventFeed, EventRecord};

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

/// Publishes what the store's event feed delivers (events committed by any instance) until `stop` turns true.
pub async fn forward(mut feed: EventFeed, bus: EventBus, mut stop: tokio::sync::watch::Receiver<bool>) {
    loop {
        let next = tokio::select! {
            next = feed.next() => next,
            _ = stop.wait_for(|stopped| *stopped) => return,
        };
        match next {
            Some(event) => bus.publish(event),
            None => return,
        }
    }
}
