//! The media relay following rooms through the cluster's [`directory`](super::directory):
//! every heartbeat, a node lists the publishers it hosts, and pulls into each room someone
//! here receives the publishers other nodes host there and this node lacks, and again those
//! whose origin said their track set changed. That is the safety net: a node pulls on change
//! (a publisher the room's state shows, a changed track set, another node's participants,
//! see `relay_pulls.rs`), and a participant joining pulls at once, before its answer, what
//! the room's state (its parts in the store, fresher than the directory) and the directory
//! name: the publishers it lacks and the data of every other node with participants there.
//!
//! The directory is polled rather than subscribed to: the heartbeat already talks to the
//! store once a beat, and a poll needs no connection held open nor a feed to resume after a
//! partition.

use std::sync::Arc;

use futures_util::future::join_all;

use super::relay_http::RelayService;
use super::store::Registration;
use crate::node::core::RoomRelays;

impl RelayService {
    /// Once a heartbeat, off its task (a beat never waits on a pull): lists the publishers
    /// hosted here, and pulls what rooms received here lack. Nothing when the last is still
    /// at work.
    pub fn follow(self: &Arc<Self>, rooms: Vec<RoomRelays>) {
        let service = self.clone();
        tokio::spawn(async move {
            let Ok(_one_at_a_time) = service.following.try_lock() else {
                return;
            };
            let hosted: Vec<(String, Vec<String>)> = rooms
                .iter()
                .filter(|r| !r.hosted.is_empty())
                .map(|r| (r.room.clone(), r.hosted.clone()))
                .collect();
            if let Err(failed) = service.member.list_hosted(&hosted).await {
                tracing::warn!(%failed, "the room directory was not written");
            }
            for room in rooms.iter().filter(|r| r.receiving) {
                service
                    .pull_missing(&room.room, &room.present, &room.renew, Vec::new())
                    .await;
            }
        });
    }

    /// Before a participant joins `room`: the room's publishers on other nodes relayed here
    /// first, so that its answer has them, and the data of the other nodes' participants, so
    /// that what they write reaches it from the start. The join goes on after
    /// [`JOIN_WAIT`](super::relay_pulls::JOIN_WAIT) all the same, and what the pulls bring
    /// later reaches it as a publisher joining does.
    pub async fn pull_room(self: &Arc<Self>, room: &str) {
        let (service, room) = (self.clone(), room.to_owned());
        self.before_join(async move { service.pull_joined(&room).await })
            .await;
    }

    /// [`pull_room`](Self::pull_room), waited for whole.
    async fn pull_joined(&self, room: &str) {
        let name = room.to_owned();
        let here = self
            .signaling
            .ask_room(room, move |worker, _| worker.core.relay_room(&name).present)
            .await;
        let Ok(here) = here else {
            return;
        };
        let nodes = self.member.room_nodes(room).await.unwrap_or_else(|failed| {
            tracing::warn!(room, %failed, "the room's parts were not read");
            Vec::new()
        });
        let shown = nodes.iter().flat_map(|(origin, node)| {
            let names = node.publishers.iter();
            names.map(|name| (origin.clone(), name.clone()))
        });
        self.pull_missing(room, &here, &[], shown.collect()).await;
        // Each node's data comes on a link of its own: asked of every node together.
        let _one_at_a_time = self.pulling.lock().await;
        let with_participants = nodes.iter().filter(|(_, node)| node.participants);
        let pulls = with_participants.map(|(origin, _)| self.pull_data_held(room, &origin.node));
        join_all(pulls).await;
    }

    /// Pulls each publisher of `room` that another node hosts (as the directory lists it, or
    /// as `shown` by the room's state) and `here` lacks, each checked again under the pull's
    /// lock (a viewer may have pulled it meanwhile), and again those of `renew` (relayed
    /// here, their track set changed since).
    async fn pull_missing(
        &self,
        room: &str,
        here: &[String],
        renew: &[String],
        shown: Vec<(Registration, String)>,
    ) {
        let here: Vec<String> = here
            .iter()
            .filter(|n| !renew.contains(n))
            .cloned()
            .collect();
        let mut wanted = shown;
        match self.member.hosted_elsewhere(room, &here).await {
            Ok(listed) => wanted.extend(listed),
            Err(failed) => tracing::warn!(room, %failed, "the room directory was not read"),
        }
        let mut seen: Vec<String> = here;
        wanted.retain(|(_, name)| match seen.contains(name) {
            true => false,
            false => {
                seen.push(name.clone());
                true
            }
        });
        // The nodes asked together, each node's publishers one after the other: two relays
        // asked of one node at once would each make a link of their own.
        let mut by_node: Vec<(Registration, Vec<String>)> = Vec::new();
        for (origin, name) in wanted {
            match by_node.iter_mut().find(|(o, _)| o.node == origin.node) {
                Some((_, names)) => names.push(name),
                None => by_node.push((origin, vec![name])),
            }
        }
        let _one_at_a_time = self.pulling.lock().await;
        let pulls = by_node.iter().map(|(origin, names)| async move {
            for name in names {
                if !renew.contains(name) && !self.needs_relay(room, Some(name)).await {
                    continue;
                }
                if let Err(failed) = self.pull_from(&origin.url, room, Some(name)).await {
                    tracing::warn!(room, origin = %origin.node, %failed, "no relay");
                }
            }
        });
        join_all(pulls).await;
    }
}
