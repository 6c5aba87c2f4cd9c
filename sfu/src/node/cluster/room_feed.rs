//! A clustered room's state across its nodes. Every [`FEED_INTERVAL`], each node writes its
//! part of each of its rooms (its participants, their names and tracks, its WHEP viewers, and
//! its own dominant speaker with how loud it is) to the store under the room's home, and reads
//! the parts of the room's other nodes back in the same request (one script on Redis): a
//! snapshot each time, so a node that missed a change, or was cut off, has the room whole
//! again with its next successful read. It hands the other nodes' parts to its media loop,
//! which shows them in `GET /rooms/{room}` and tells its participants what changed.
//!
//! The home holds the room's state: it decides the room's dominant speaker from the
//! candidates every node reports, with the same hysteresis a node applies to its own
//! publishers ([`Dominant`]), and writes it in its own part, which the others show. Parts are
//! kept under the home's [`NodeRef`](super::NodeRef): once the home's registration is gone (it
//! died) or its node booted again, its parts are void, the node that takes the room over
//! starts a new set, and the dead node's participants leave the other nodes' view (within the
//! registration's lease).
//!
//! A room on one node only hands nothing in: the node shows it as a lone node would.

use std::collections::HashMap;
use std::sync::atomic::Ordering;
use std::sync::{Arc, Weak};
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};
use tokio::time::MissedTickBehavior;

use super::member::Member;
use super::store::{ClusterStore, NodeRef, RoomParts};
use crate::node::core::{Followed, LocalPart};
use crate::node::dominant::Dominant;
use crate::node::participant::ParticipantId;
use crate::node::room_view::ParticipantView;
use crate::node::signaling::Signaling;

/// How often a node writes its parts and reads the others': the period the local dominant
/// speaker is looked at too, so the home's hysteresis runs at the same pace.
pub const FEED_INTERVAL: Duration = crate::node::core::SPEAKER_INTERVAL;

/// A node's part of a room, as the store carries it (JSON).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Part {
    /// Its participants and WHIP publishers, in the order they came.
    pub participants: Vec<ParticipantView>,
    /// Its WHEP viewers.
    pub viewers: usize,
    /// Its own dominant speaker and how loud it is now.
    pub candidate: Option<Candidate>,
    /// The room's dominant speaker: written by the room's home only.
    pub speaker: Option<ParticipantId>,
}

/// A node's dominant speaker, which the home weighs against the other nodes'.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Candidate {
    /// Who.
    pub participant: ParticipantId,
    /// Its loudness now, dB above silence (0: quiet).
    pub level: f32,
}

/// Runs the feed until the node's signaling is gone (held weakly, as the heartbeat holds it).
pub async fn run(
    member: Arc<Member>,
    store: Arc<dyn ClusterStore>,
    signaling: Weak<Signaling>,
    lease: Duration,
) {
    let mut feed = RoomFeed::new(member.identity().node.clone(), lease);
    let mut ticks = tokio::time::interval(FEED_INTERVAL);
    ticks.set_missed_tick_behavior(MissedTickBehavior::Delay);
    loop {
        ticks.tick().await;
        let Some(signaling) = signaling.upgrade() else {
            return;
        };
        let Ok(parts) = signaling.local_parts().await else {
            return;
        };
        let live: Vec<String> = member.peers().into_iter().map(|r| r.node).collect();
        let followed = feed.tick(store.as_ref(), parts, &live, Instant::now()).await;
        for (room, followed) in followed {
            if signaling.follow_room(room, followed).await.is_err() {
                return;
            }
        }
        let counters = member.counters();
        counters
            .feed_unavailable
            .fetch_add(feed.take_unavailable(), Ordering::Relaxed);
        counters
            .parts_unreadable
            .fetch_add(feed.take_unreadable(), Ordering::Relaxed);
    }
}

/// This node's side of its clustered rooms: what it last read of each, and, for the rooms it
/// is home of, how their dominant speaker is being decided.
#[derive(Debug)]
pub struct RoomFeed {
    node: String,
    lease: Duration,
    rooms: HashMap<String, Following>,
    unavailable: u64,
    unreadable: u64,
}

/// One room as this node follows it.
#[derive(Debug, Default)]
struct Following {
    /// The home the parts were read under.
    home: Option<NodeRef>,
    /// The other nodes' parts, by node id, each until when it stands at the latest.
    others: Vec<(String, Part, Instant)>,
    /// The room's speaker being decided here, while this node is its home.
    dominant: Dominant<ParticipantId>,
}

impl RoomFeed {
    /// The feed of node `node`, whose parts live for `lease` unless written again.
    pub fn new(node: String, lease: Duration) -> Self {
        Self {
            node,
            lease,
            rooms: HashMap::new(),
            unavailable: 0,
            unreadable: 0,
        }
    }

    /// Writes this node's `parts` of its rooms and reads the others' (`live`: the other nodes
    /// registered now); what each room's media loop is to be handed. A room that left this
    /// node has its part written empty once, so its participants leave the others' view now
    /// rather than when the part expires.
    pub async fn tick(
        &mut self,
        store: &dyn ClusterStore,
        parts: Vec<LocalPart>,
        live: &[String],
        now: Instant,
    ) -> Vec<(String, Option<Followed>)> {
        let mut gone: Vec<String> = self.rooms.keys().cloned().collect();
        gone.retain(|room| parts.iter().all(|p| p.room != *room));
        for room in gone {
            let empty = LocalPart {
                room: room.clone(),
                participants: Vec::new(),
                viewers: 0,
                candidate: None,
            };
            self.follow(store, empty, live, now).await;
            self.rooms.remove(&room);
        }
        let mut followed = Vec::with_capacity(parts.len());
        for part in parts {
            let room = part.room.clone();
            followed.push((room, self.follow(store, part, live, now).await));
        }
        followed
    }

    /// Requests to the store that failed since last asked.
    pub fn take_unavailable(&mut self) -> u64 {
        std::mem::take(&mut self.unavailable)
    }

    /// Parts that did not read as one since last asked (dropped).
    pub fn take_unreadable(&mut self) -> u64 {
        std::mem::take(&mut self.unreadable)
    }

    async fn follow(
        &mut self,
        store: &dyn ClusterStore,
        local: LocalPart,
        live: &[String],
        now: Instant,
    ) -> Option<Followed> {
        let following = self.rooms.entry(local.room.clone()).or_default();
        let speaker = match &following.home {
            Some(home) if home.node == self.node => following.dominant.current,
            _ => None,
        };
        let part = Part {
            participants: local.participants,
            viewers: local.viewers,
            candidate: local.candidate.map(|(participant, level)| Candidate {
                participant,
                level,
            }),
            speaker,
        };
        // Views, ids and numbers: nothing in a part that JSON cannot write.
        let json = serde_json::to_string(&part).unwrap_or_default();
        let read = store
            .exchange_part(&local.room, &self.node, &json, self.lease)
            .await;
        let following = self.rooms.entry(local.room).or_default();
        match read {
            Ok(Some(parts)) => {
                let unreadable = following.read(&self.node, parts, now + self.lease);
                self.unreadable += unreadable;
            }
            Ok(None) => following.homeless(live),
            Err(_) => self.unavailable += 1,
        }
        following.others.retain(|(_, _, until)| *until > now);
        following.followed(&self.node, &part, now)
    }
}

impl Following {
    /// The parts read under `parts.home`, each standing until `until`; how many did not read.
    fn read(&mut self, me: &str, parts: RoomParts, until: Instant) -> u64 {
        if self.home.as_ref() != Some(&parts.home) {
            // A new home: what was decided under the last one is void.
            self.dominant = Dominant::default();
        }
        self.home = Some(parts.home);
        let mut unreadable = 0;
        self.others.clear();
        for (node, json) in parts.parts.into_iter().filter(|(node, _)| node != me) {
            match serde_json::from_str::<Part>(&json) {
                Ok(part) => self.others.push((node, part, until)),
                Err(e) => {
                    tracing::warn!(%node, "a room's part does not read: {e}");
                    unreadable += 1;
                }
            }
        }
        self.others.sort_by(|a, b| a.0.cmp(&b.0));
        unreadable
    }

    /// The room has no live home: its home's node died (or booted again) and nobody has
    /// taken the room over yet. What that node contributed is gone; the parts of nodes still
    /// registered stay until the next home has them written again.
    fn homeless(&mut self, live: &[String]) {
        let home = self.home.take();
        self.dominant = Dominant::default();
        self.others.retain(|(node, ..)| {
            live.contains(node) && home.as_ref().is_none_or(|h| h.node != *node)
        });
    }

    /// What the room's media loop is to be handed: nothing while no other node has a part.
    fn followed(&mut self, me: &str, mine: &Part, now: Instant) -> Option<Followed> {
        if self.others.is_empty() {
            return None;
        }
        let speaker = match &self.home {
            Some(home) if home.node == me => self.decide(mine, now),
            
Some(home) => self
                .others
                .iter()
                .find(|(node, ..)| *node == home.node)
                .and_then(|(_, part, _)| part.speaker),
            None => None,
        };
        let (before, after): (Vec<_>, Vec<_>) =
            self.others.iter().partition(|(node, ..)| node.as_str() < me);
        let participants =
            |parts: Vec<&(String, Part, Instant)>| -> Vec<ParticipantView> {
                parts
                    .into_iter()
                    .flat_map(|(_, part, _)| part.participants.iter().cloned())
                    .collect()
            };
        Some(Followed {
            before: participants(before),
            after: participants(after),
            viewers: self.others.iter().map(|(_, part, _)| part.viewers).sum(),
            speaker,
        })
    }

    /// The room's dominant speaker, as its home decides it from every node's candidate; a
    /// speaker who left the room is forgotten, as a node forgets its own.
    fn decide(&mut self, mine: &Part, now: Instant) -> Option<ParticipantId> {
        let parts = || std::iter::once(mine).chain(self.others.iter().map(|(_, part, _)| part));
        let present = |id| parts().any(|part| part.participants.iter().any(|p| p.id == id));
        if self.dominant.current.is_some_and(|id| !present(id)) {
            self.dominant = Dominant::default();
        }
        let candidates: Vec<(ParticipantId, f32)> = parts()
            .filter_map(|part| part.candidate)
            .map(|c| (c.participant, c.level))
            .collect();
        self.dominant.pick(&candidates, now);
        self.dominant.current
    }
}
