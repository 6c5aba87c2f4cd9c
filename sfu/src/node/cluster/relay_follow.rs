//! The media relay following rooms through the cluster's [`directory`](super::directory):
//! every heartbeat, a node lists the publishers it hosts, and pulls into each room someone
//! here receives the publishers other nodes host there and this node lacks; a participant
//! joining pulls them at once. So a conference spread over nodes has every participant
//! receive every other, a publisher arriving later on another node within two heartbeats. A
//! relay whose origin said its track set changed is pulled again at the next beat.
//!
//! The directory is polled rather than subscribed to: the heartbeat already talks to the
//! store once a beat, a poll needs no connection held open nor a feed to resume after a
//! partition, and a beat (a second by default) is within what a participant joining waits.

use std::sync::Arc;

use super::relay_http::RelayService;
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
                    .pull_missing(&room.room, &room.present, &room.renew)
                    .await;
            }
        });
    }

    /// Before a participant joins `room`: the room's publishers on other nodes relayed here
    /// first, so that its answer has them.
    pub async fn pull_room(&self, room: &str) {
        let name = room.to_owned();
        let here = self
            .signaling
            .ask_room(room, move |worker, _| worker.core.relay_room(&name).present)
            .await;
        if let Ok(here) = here {
            self.pull_missing(room, &here, &[]).await;
        }
    }

    /// Pulls each publisher of `room` another node hosts and `here` lacks, each checked again
    /// under the pull's lock (a viewer may have pulled it meanwhile), and again those of
    /// `renew` (relayed here, their track set changed since).
    async fn pull_missing(&self, room: &str, here: &[String], renew: &[String]) {
        let here: Vec<String> = here
            .iter()
            .filter(|n| !renew.contains(n))
            .cloned()
            .collect();
        let wanted = match self.member.hosted_elsewhere(room, &here).await {
            Ok(wanted) => wanted,
            Err(failed) => {
                tracing::warn!(room, %failed, "the room directory was not read");
                return;
            }
        };
        for (origin, name) in wanted {
            let _one_at_a_time = self.pulling.lock().await;
            if !renew.contains(&name) && !self.needs_relay(room, Some(&name)).await {
                continue;
            }
            if let Err(failed) = self.pull_from(&origin.url, room, Some(&name)).await {
                tracing::warn!(room, origin = %origin.node, %failed, "no relay");
            }
        }
    }
}
