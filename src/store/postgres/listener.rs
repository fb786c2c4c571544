//! The PostgreSQL event feed: this instance's committed events, merged with the ids other instances announce by
//! `NOTIFY` (read back from the table), each event once; and the webhook outbox's wake-ups.

use std::collections::VecDeque;
use std::time::Duration;

use futures::StreamExt;
use futures::stream::BoxStream;
use sqlx::postgres::{PgListener, PgNotification};
use tokio::sync::broadcast::{self, error::RecvError};
use tokio::sync::oneshot;

use super::{EVENTS_CHANNEL, OUTBOX_CHANNEL, PgStore};
use crate::store::{EventFeed, EventRecord, EventStore, connections};

/// How many recent ids a feed remembers to drop the second copy (local announce and notification) of an event.
const REMEMBERED: usize = 256;
/// The pause before the feed tries again to listen, after it could not.
const LISTEN_AGAIN: Duration = Duration::from_secs(5);

/// Listens on its own connection. Without one (the server refused it at its limit), the feed carries this
/// instance's events only, says so in the log, and tries again in the background until it listens.
pub(super) async fn event_feed(store: &PgStore) -> EventFeed {
    // Follow the local side before listening, so nothing committed in between is missed.
    let local = store.feed.receiver();
    let listener = match listen(store).await {
        Ok(listener) => Listening::Now(listener),
        Err(e) => {
            connections::note(&e);
            tracing::error!(
                error = %e,
                "cannot listen for events yet; streams see only this instance's events until it can"
            );
            Listening::Later(listen_later(store.clone()))
        }
    };
    let follower = Follower {
        store: store.clone(),
        local,
        listener,
        seen: VecDeque::with_capacity(REMEMBERED),
    };
    futures::stream::unfold(follower, |mut f| async move { f.next().await.map(|e| (e, f)) }).boxed()
}

async fn listen(store: &PgStore) -> Result<PgListener, sqlx::Error> {
    let mut listener = PgListener::connect_with(&store.pool).await?;
    listener.listen(EVENTS_CHANNEL).await?;
    Ok(listener)
}

/// Tries to listen every `LISTEN_AGAIN` until it does (the listener is sent) or the feed is gone.
fn listen_later(store: PgStore) -> oneshot::Receiver<PgListener> {
    let (mut found, later) = oneshot::channel();
    tokio::spawn(async move {
        loop {
            tokio::select! {
                () = found.closed() => return,
                () = tokio::time::sleep(LISTEN_AGAIN) => {}
            }
            match listen(&store).await {
                Ok(listener) => {
                    let _ = found.send(listener);
                    return;
                }
                Err(e) => {
                    connections::note(&e);
                    tracing::debug!(error = %e, "still cannot listen for events");
                }
            }
        }
    });
    later
}

struct Follower {
    store: PgStore,
    local: broadcast::Receiver<EventRecord>,
    listener: Listening,
    seen: VecDeque<i64>,
}

/// Whether the feed hears other instances' events.
enum Listening {
    Now(PgListener),
    /// Not yet: a task tries again (`listen_later`).
    Later(oneshot::Receiver<PgListener>),
    Never,
}

enum Heard {
    Local(Result<EventRecord, RecvError>),
    Notified(Result<PgNotification, sqlx::Error>),
    /// The listener `listen_later` found (`None`: it stopped without one).
    Listening(Option<PgListener>),
}

impl Follower {
    /// The next event not sent before; `None` only when the store is gone.
    async fn next(&mut self) -> Option<EventRecord> {
        loop {
            let heard = match &mut self.listener {
                Listening::Now(listener) => tokio::select! {
                    local = self.local.recv() => Heard::Local(local),
                    notified = listener.recv() => Heard::Notified(notified),
                },
                Listening::Later(later) => tokio::select! {
                    local = self.local.recv() => Heard::Local(local),
                    found = later => Heard::Listening(found.ok()),
                },
                Listening::Never => Heard::Local(self.local.recv().await),
            };
            let event = match heard {
                // Events other instances stored while it could not listen were not followed live; a client resuming
                // with `Last-Event-ID` still gets them from the store.
                Heard::Listening(Some(listener)) => {
                    tracing::info!("listening for events: streams see every instance's events again");
                    self.listener = Listening::Now(listener);
                    continue;
                }
                Heard::Listening(None) => {
                    self.listener = Listening::Never;
                    continue;
                }
                Heard::Local(Ok(event)) => event,
                Heard::Local(Err(RecvError::Lagged(missed))) => {
                    tracing::warn!(missed, "the event feed fell behind; some live events were skipped");
                    continue;
                }
                Heard::Local(Err(RecvError::Closed)) => return None,
                Heard::Notified(Ok(notification)) => match self.notified(&notification).await {
                    Some(event) => event,
                    None => continue,
                },
                Heard::Notified(Err(e)) => {
                    // `recv` reconnects by itself on the next call; this pause keeps a dead server from spinning us.
                    tracing::warn!(error = %e, "event listener interrupted; reconnecting");
                    tokio::time::sleep(Duration::from_millis(500)).await;
                    continue;
                }
            };
            if self.seen.contains(&event.id) {
                continue;
            }
            if self.seen.len() == REMEMBERED {
                self.seen.pop_front();
            }
            self.seen.push_back(event.id);
            return Some(event);
        }
    }

    /// The event a notification names, unless it was already sent (this instance's own) or cannot be read.
    async fn notified(&self, notification: &PgNotification) -> Option<EventRecord> {
        let id = notification.payload().parse::<i64>().ok()?;
        if self.seen.contains(&id) {
            return None;
        }
        match self.store.event_by_id(id).await {
            Ok(event) => event,
            Err(e) => {
                tracing::warn!(error = %e, "cannot read a notified event");
                None
            }
        }
    }
}

/// Wakes on every outbox notification, its own connection listening; after an interruption it wakes once too (a
/// notification may have been missed while reconnecting). `None`, with an error in the log, when it cannot listen:
/// the worker's poll still finds everything.
pub(super) async fn outbox_listener(store: &PgStore) -> Option<BoxStream<'static, ()>> {
    let listened = async {
        let mut listener = PgListener::connect_with(&store.pool).await?;
        listener.listen(OUTBOX_CHANNEL).await?;
        Ok::<_, sqlx::Error>(listener)
    };
    let listener = match listened.await {
        Ok(listener) => listener,
        Err(e) => {
            connections::note(&e);
            tracing::error!(error = %e, "cannot listen for webhook events; deliveries wait for the poll");
            return None;
        }
    };
    let wakes = futures::stream::unfold(listener, |mut listener| async move {
        if let Err(e) = listener.recv().await {
            // `recv` reconnects by itself on the next call; this pause keeps a dead server from spinning us.
            tracing::warn!(error = %e, "webhook outbox listener interrupted; reconnecting");
            tokio::time::sleep(Duration::from_millis(500)).await;
        }
        Some(((), listener))
    });
    Some(wakes.boxed())
}
