//! The pulls the media loops' cores ask for (see the core's `relay_pulls.rs`), made over HTTP
//! as they come: a publisher another node has (the room's state named it, or its origin said
//! its track set changed), the data of a room's participants on another node; and the
//! pulls a join asks for, waited for a bounded time. One at a time,
//! under the relay's pull lock, each checked again first: another pull (a viewer's, a join's,
//! the heartbeat's) may have made it meanwhile.

use std::future::Future;
use std::sync::atomic::Ordering;
use std::sync::{Arc, Weak};
use std::time::Duration;

use tokio::sync::mpsc;

use super::relay_http::RelayService;
use crate::node::core::RelayPull;

/// How long a join waits for the pulls it asks for: an origin's answer takes 2 s at most,
/// and other pulls may be ahead of it (one at a time, each of them up to 2 s). Past it the
/// join goes on, and the pulls finish behind it.
pub const JOIN_WAIT: Duration = Duration::from_secs(3);

/// Pulls the media loops may queue for the relay before one is dropped (counted by the core,
/// which asks for it again when next wanted).
pub const PULL_QUEUE: usize = 64;

/// The queue the media loops hand their cores' pulls to, and the relay's end of it.
pub fn pull_queue() -> (mpsc::Sender<RelayPull>, mpsc::Receiver<RelayPull>) {
    mpsc::channel(PULL_QUEUE)
}

/// Makes the pulls that come on `pulls` while the relay is there (held weakly: the HTTP
/// routes own it); ends with the media loops, or the relay.
pub async fn serve(relay: Weak<RelayService>, mut pulls: mpsc::Receiver<RelayPull>) {
    while let Some(pull) = pulls.recv().await {
        let Some(relay) = relay.upgrade() else {
            return;
        };
        match pull {
            RelayPull::Publisher { room, name, node } => {
                relay.pull_publisher(&room, &name, node.as_deref()).await;
            }
            RelayPull::Data { room, node } => relay.pull_data(&room, &node).await,
        }
    }
}

impl RelayService {
    /// A join's `pulls`, made on a task of their own and waited for at most [`JOIN_WAIT`];
    /// counted when the join goes on before they are done.
    pub(super) async fn before_join(&self, pulls: impl Future<Output = ()> + Send + 'static) {
        let pulls = tokio::spawn(pulls);
        if tokio::time::timeout(JOIN_WAIT, pulls).await.is_err() {
            tracing::debug!("a join goes on before its pulls are done");
            let late = &self.member.counters().join_pulls_late;
            late.fetch_add(1, Ordering::Relaxed);
        }
    }

    /// The publisher named `name` of `room` from node `node` (or the one the room directory
    /// names), unless it is here already with the track set its origin has.
    async fn pull_publisher(&self, room: &str, name: &str, node: Option<&str>) {
        let _one_at_a_time = self.pulling.lock().await;
        let (room_name, wanted) = (room.to_owned(), name.to_owned());
        let asked = self.signaling.ask_room(room, move |worker, _| {
            worker.core.wants_publisher(&room_name, &wanted)
        });
        if asked.await != Ok(true) {
            return;
        }
        let origin = match node {
            Some(node) => self.member.peer(node).await,
            None => {
                let listed = self.member.hosted_elsewhere(room, &[]).await;
                let listed = listed.unwrap_or_default().into_iter();
                listed.filter(|(_, n)| n == name).map(|(r, _)| r).next()
            }
        };
        let Some(origin) = origin else {
            tracing::debug!(room, name, "no node known to have the publisher");
            return;
        };
        if let Err(failed) = self.pull_from(&origin.url, room, Some(name)).await {
            tracing::warn!(room, origin = %origin.node, %failed, "no relay");
        }
    }

    /// `room`'s data from node `node`, unless a relay of it comes here already.
    pub(super) async fn pull_data(&self, room: &str, node: &str) {
        let _one_at_a_time = self.pulling.lock().await;
        self.pull_data_held(room, node).await;
    }

    /// On the origin of a relay of `room`'s data to node `node`, before it answers: that
    /// node's data pulled in turn, so that what its participants write from their first
    /// moment reaches this node's. While another pull is on its way, after the answer
    /// instead: two nodes asking each other at once would each wait for the other's lock.
    pub(super) async fn pull_back(self: &Arc<Self>, room: &str, node: &str) {
        if let Ok(_one_at_a_time) = self.pulling.try_lock() {
            self.pull_data_held(room, node).await;
            return;
        }
        let (service, room, node) = (self.clone(), room.to_owned(), node.to_owned());
        tokio::spawn(async move { service.pull_data(&room, &node).await });
    }

    /// [`pull_data`](Self::pull_data), the pull's lock held.
    pub(super) async fn pull_data_held(&self, room: &str, node: &str) {
        let (room_name, node_name) = (room.to_owned(), node.to_owned());
        let asked = self.signaling.ask_room(room, move |worker, _| {
            worker.core.needs_data(&room_name, &node_name)
        });
        if asked.await != Ok(true) {
            return;
        }
        let Some(origin) = self.member.peer(node).await else {
            tracing::debug!(
                room,
                node,
                "the node of a room's data is not known here yet"
            );
            return;
        };
        if let Err(failed) = self.pull_data_from(&origin.url, room, node).await {
            tracing::warn!(room, origin = %origin.node, %failed, "no relay of the room's data");
        }
    }
}
