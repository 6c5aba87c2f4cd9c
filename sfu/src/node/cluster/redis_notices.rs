//! The Redis store's subscription to rooms' notices: a connection of its own (a subscribed
//! connection takes no other command), driven by a task on the node's runtime that subscribes
//! to the channels of the rooms the inbox listens to, follows changes to them, hands each
//! message to the inbox, and pings the server every [`PING_EVERY`] `timeout`s so a connection
//! that went silent is noticed. A connection lost or refused is made again (after `timeout`),
//! every channel subscribed again, and every room read once: notices sent meanwhile were lost.

use std::collections::BTreeSet;
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use futures_core::Stream;
use redis::aio::{PubSubSink, PubSubStream};
use redis::{Msg, RedisError, Value};
use tokio::sync::watch;

use super::notice::{channel, Inbox};

/// The subscription's connection is pinged every this many `timeout`s (heartbeats): a
/// connection that went silent loses notices until then, which the safety reads make up for,
/// so the ping costs Redis little.
pub const PING_EVERY: u32 = 5;

/// The subscription, started with the first rooms to listen to.
pub struct Notices {
    client: redis::Client,
    timeout: Duration,
    inbox: Arc<Inbox>,
    /// The rooms to subscribe to, which the task follows.
    wanted: OnceLock<watch::Sender<BTreeSet<String>>>,
}

impl std::fmt::Debug for Notices {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Notices").finish_non_exhaustive()
    }
}

impl Notices {
    /// Not subscribed yet: the task starts with the first [`subscribe`](Self::subscribe).
    pub fn new(client: redis::Client, timeout: Duration) -> Self {
        Self {
            client,
            timeout,
            inbox: Arc::default(),
            wanted: OnceLock::new(),
        }
    }

    /// Where the notices arrive.
    pub fn inbox(&self) -> &Arc<Inbox> {
        &self.inbox
    }

    /// Subscribes to the rooms the inbox listens to now (from within the node's runtime).
    pub fn subscribe(&self) {
        let rooms: BTreeSet<String> = self.inbox.rooms().into_iter().collect();
        let wanted = self.wanted.get_or_init(|| {
            let (wanted, follow) = watch::channel(BTreeSet::new());
            let (client, inbox) = (self.client.clone(), self.inbox.clone());
            tokio::spawn(subscribed(client, follow, inbox, self.timeout));
            wanted
        });
        wanted.send_if_modified(|now| {
            let changed = *now != rooms;
            *now = rooms;
            changed
        });
    }
}

/// Keeps a subscription until the store is dropped.
async fn subscribed(
    client: redis::Client,
    mut wanted: watch::Receiver<BTreeSet<String>>,
    inbox: Arc<Inbox>,
    timeout: Duration,
) {
    loop {
        match session(&client, &mut wanted, &inbox, timeout).await {
            Ok(()) => return,
            Err(e) => {
                inbox.lost_subscription();
                tracing::warn!("the rooms' notices: {e}");
                tokio::time::sleep(timeout).await;
            }
        }
    }
}

/// One connection's subscription: until it fails (an error), or the store is gone (`Ok`).
async fn session(
    client: &redis::Client,
    wanted: &mut watch::Receiver<BTreeSet<String>>,
    inbox: &Inbox,
    timeout: Duration,
) -> Result<(), RedisError> {
    let pubsub = within(timeout, client.get_async_pubsub()).await?;
    let (mut sink, mut stream) = pubsub.split();
    let mut subscribed = BTreeSet::new();
    let rooms = wanted.borrow_and_update().clone();
    follow(&mut sink, &mut subscribed, rooms, timeout).await?;
    inbox.tell_all();
    let mut pings = tokio::time::interval(timeout * PING_EVERY);
    loop {
        tokio::select! {
            changed = wanted.changed() => {
                if changed.is_err() {
                    return Ok(());
                }
                let rooms = wanted.borrow_and_update().clone();
                follow(&mut sink, &mut subscribed, rooms, timeout).await?;
            }
            message = next(&mut stream) => {
                let message = message.ok_or_else(closed)?;
                inbox.deliver(message.get_channel_name().as_bytes(), message.get_payload_bytes());
            }
            _ = pings.tick() => {
                within(timeout, sink.ping::<Value>()).await?;
            }
        }
    }
}

/// Subscribes to the channels of the `rooms` not subscribed yet, unsubscribes from the others.
async fn follow(
    sink: &mut PubSubSink,
    subscribed: &mut BTreeSet<String>,
    rooms: BTreeSet<String>,
    timeout: Duration,
) -> Result<(), RedisError> {
    let channels = |rooms: Vec<&String>| rooms.into_iter().map(|r| channel(r)).collect::<Vec<_>>();
    let new = channels(rooms.difference(subscribed).collect());
    let old = channels(subscribed.difference(&rooms).collect());
    if !new.is_empty() {
        within(timeout, sink.subscribe(&new)).await?;
    }
    if !old.is_empty() {
        within(timeout, sink.unsubscribe(&old)).await?;
    }
    *subscribed = rooms;
    Ok(())
}

/// The next message, `None` once the connection is closed.
async fn next(stream: &mut PubSubStream) -> Option<Msg> {
    std::future::poll_fn(|cx| std::pin::Pin::new(&mut *stream).poll_next(cx)).await
}

/// `request`, failing after `timeout`.
async fn within<T>(
    timeout: Duration,
    request: impl std::future::Future<Output = Result<T, RedisError>>,
) -> Result<T, RedisError> {
    match tokio::time::timeout(timeout, request).await {
        Ok(result) => result,
        Err(_) => Err(RedisError::from(std::io::Error::from(
            std::io::ErrorKind::TimedOut,
        ))),
    }
}

fn closed() -> RedisError {
    RedisError::from(std::io::Error::from(std::io::ErrorKind::ConnectionReset))
}
