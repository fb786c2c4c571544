//! The in-process side of the event feed: each backend announces the events it commits here, and every feed
//! handed out by `EventStore::event_feed` follows it.

use futures::StreamExt;
use futures::stream::BoxStream;
use tokio::sync::broadcast;
use tokio_stream::wrappers::BroadcastStream;
use tokio_stream::wrappers::errors::BroadcastStreamRecvError;

use super::EventRecord;

/// New events as they are committed, oldest first.
pub type EventFeed = BoxStream<'static, EventRecord>;

/// Events this instance committed. Cheap to clone; clones announce to the same followers.
#[derive(Debug, Clone)]
pub struct LocalFeed {
    sender: broadcast::Sender<EventRecord>,
}

impl Default for LocalFeed {
    fn default() -> Self {
        LocalFeed {
            sender: broadcast::channel(4096).0,
        }
    }
}

impl LocalFeed {
    /// Announces a committed event (no follower is fine).
    pub fn announce(&self, event: &EventRecord) {
        let _ = self.sender.send(event.clone());
    }

    pub fn receiver(&self) -> broadcast::Receiver<EventRecord> {
        self.sender.subscribe()
    }

    /// A feed of what this instance commits from now on.
    pub fn follow(&self) -> EventFeed {
        BroadcastStream::new(self.receiver())
            .filter_map(|next| async move {
                match next {
                    Ok(event) => Some(event),
                    // The follower fell behind (4096 events): they are stored, so a client resuming with
                    // `Last-Event-ID` still gets them.
                    Err(BroadcastStreamRecvError::Lagged(missed)) => {
                        tracing::warn!(missed, "the event feed fell behind; some live events were skipped");
                        None
                    }
                }
            })
            .boxed()
    }
}
