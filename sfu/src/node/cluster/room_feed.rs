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
//! kept under the home's [`NodeRef`]: once the home's registration is gone (it
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

impl Part {
    /// A part as another node wrote it: its JSON, with a finite level (a level past what an
    /// `f32` holds would read as infinite, and the hysteresis would never let go of it).
    pub fn read(json: &[u8]) -> Result<Self, PartError> {
        let part: Self = serde_json::from_slice(json).map_err(|_| PartError::NotJson)?;
        let finite = |c: &Candidate| c.level.is_finite();
        if !part.candidate.as_ref().is_none_or(finite) {
            return Err(PartError::BadLevel);
        }
        Ok(part)
    }
}

/// Why another node's part was dropped.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum PartError {
    /// Not a part's JSON.
    #[error("not a part's JSON")]
    NotJson,
    /// A candidate's level that is not a finite number.
    #[error("a level that is not a finite number")]
    BadLevel,
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
        let followed = feed
            .tick(store.as_ref(), parts, &live, Instant::now())
            .await;
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
            candidate: local
                .candidate
                .map(|(participant, level)| Candidate { participant, level }),
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
            match Part::read(json.as_bytes()) {
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
        let (before, after): (Vec<_>, Vec<_>) = self
            .others
            .iter()
            .partition(|(node, ..)| node.as_str() < me);
        let participants = |parts: Vec<&(String, Part, Instant)>| -> Vec<ParticipantView> {
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

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;
    use crate::node::cluster::member::Identity;
    use crate::node::cluster::memory::MemoryStore;
    use crate::node::cluster::placement::Placement;
    use crate::node::cluster::store::Load;

    const LEASE: Duration = Duration::from_secs(3);

    /// A registered member of the cluster of `store`, with its own connection.
    async fn member(store: &MemoryStore, node: &str) -> (Member, Arc<MemoryStore>) {
        let connection = Arc::new(store.connection());
        let identity = Identity {
            node: node.to_owned(),
            url: format!("http://{node}"),
            relay: None,
        };
        let member = Member::new(connection.clone(), identity, LEASE, 0);
        let load = Load {
            capacity: 10,
            ..Load::default()
        };
        member.heartbeat(load, &[]).await.expect("registered");
        (member, connection)
    }

    fn alone(id: u64, name: &str, level: f32) -> LocalPart {
        let participant = ParticipantView {
            id: ParticipantId(id),
            name: name.to_owned(),
            kind: "participant",
            tracks: Vec::new(),
            receiving: 0,
            channels: Vec::new(),
        };
        LocalPart {
            room: "call".to_owned(),
            participants: vec![participant],
            viewers: 1,
            candidate: Some((ParticipantId(id), level)),
        }
    }

    /// One feed tick on each node, `one` first, with ada's and bo's levels: what each shows.
    async fn both(
        feeds: &mut [(RoomFeed, Arc<MemoryStore>); 2],
        levels: (f32, f32),
        now: Instant,
    ) -> [Option<Followed>; 2] {
        let [(one, at_one), (two, at_two)] = feeds;
        let parts = vec![alone(1, "ada", levels.0)];
        let mut shown_one = one.tick(at_one.as_ref(), parts, &["two".into()], now).await;
        let parts = vec![alone(2, "bo", levels.1)];
        let mut shown_two = two.tick(at_two.as_ref(), parts, &["one".into()], now).await;
        [shown_one.remove(0).1, shown_two.remove(0).1]
    }

    #[tokio::test]
    async fn the_home_decides_the_rooms_speaker_and_every_node_shows_it() {
        let store = MemoryStore::new();
        let (one, at_one) = member(&store, "one").await;
        let (_two, at_two) = member(&store, "two").await;
        assert_eq!(one.place("call").await, Placement::Here, "one is home");
        let mut feeds = [
            (RoomFeed::new("one".into(), LEASE), at_one),
            (RoomFeed::new("two".into(), LEASE), at_two),
        ];
        let start = Instant::now();
        let at = |step: u32| start + FEED_INTERVAL * step;
        let [first, _] = both(&mut feeds, (70.0, 90.0), at(0)).await;
        assert_eq!(first, None, "one had nobody else's part yet: alone");
        // Bo, on two, is louder by more than the margin: the home picks him, once he has
        // spoken for 300 ms over a quiet room, and two shows what one decided.
        let mut shown = [None, None];
        for step in 1..=6 {
            shown = both(&mut feeds, (70.0, 90.0), at(step)).await;
        }
        let [on_one, on_two] = shown.clone().map(|f| f.expect("two nodes' parts"));
        assert_eq!(on_one.speaker, Some(ParticipantId(2)));
        assert_eq!(on_two.speaker, Some(ParticipantId(2)));
        // The room's order is the same on both: nodes by id ("one" before "two").
        assert_eq!((on_one.before.len(), on_one.after.len()), (0, 1));
        assert_eq!((on_two.before.len(), on_two.after.len()), (1, 0));
        assert_eq!(on_one.after[0].name, "bo");
        assert_eq!(on_two.before[0].name, "ada");
        assert_eq!((on_one.viewers, on_two.viewers), (1, 1));
        // Ada louder, but not by the margin: bo keeps it. Then bo falls quiet: ada takes it.
        for step in 7..=14 {
            shown = both(&mut feeds, (93.0, 90.0), at(step)).await;
        }
        assert!(shown
            .iter()
            .all(|f| f.as_ref().unwrap().speaker == Some(ParticipantId(2))));
        for step in 15..=20 {
            shown = both(&mut feeds, (80.0, 0.0), at(step)).await;
        }
        assert!(shown
            .iter()
            .all(|f| f.as_ref().unwrap().speaker == Some(ParticipantId(1))));
    }

    #[tokio::test]
    async fn parts_under_a_home_that_is_gone_are_void_and_a_room_left_is_written_empty() {
        let store = MemoryStore::new();
        let (one, at_one) = member(&store, "one").await;
        let (two, at_two) = member(&store, "two").await;
        assert_eq!(one.place("call").await, Placement::Here);
        let mut feeds = [
            (RoomFeed::new("one".into(), LEASE), at_one),
            (RoomFeed::new("two".into(), LEASE), at_two),
        ];
        let now = Instant::now();
        both(&mut feeds, (0.0, 0.0), now).await;
        let [_, on_two] = both(&mut feeds, (0.0, 0.0), now).await;
        assert_eq!(on_two.expect("one's part").before[0].name, "ada");
        // One leaves the cluster: its home and part are void; two has nobody else's.
        one.leave().await.expect("left");
        let [(_, _), (feed_two, at_two)] = &mut feeds;
        let shown = feed_two
            .tick(at_two.as_ref(), vec![alone(2, "bo", 0.0)], &[], now)
            .await;
        assert_eq!(shown[0].1, None);
        // Two takes the room over; one's part under the old home stays void.
        two.heartbeat(Load::default(), &["call".into()])
            .await
            .expect("beat");
        assert!(two.is_home("call"));
        let shown = feed_two
            .tick(at_two.as_ref(), vec![alone(2, "bo", 0.0)], &[], now)
            .await;
        assert_eq!(shown[0].1, None);
        // Two's room empties: its part is written once more, empty, and then forgotten.
        assert!(feed_two
            .tick(at_two.as_ref(), Vec::new(), &[], now)
            .await
            .is_empty());
        let parts = at_two.exchange_part("call", "three", "{}", LEASE).await;
        let parts = parts.expect("the store").expect("two's home").parts;
        let empty = parts
            .iter()
            .find(|(node, _)| node == "two")
            .expect("two's part");
        let empty: Part = serde_json::from_str(&empty.1).expect("a part");
        assert!(empty.participants.is_empty());
        assert!(feed_two.rooms.is_empty());
    }

    proptest::proptest! {
        #[test]
        fn a_part_reads_back_as_written(
            people in proptest::collection::vec(
                (any::<u64>(), ".{0,16}", any::<bool>(), proptest::collection::vec(
                    (any::<u32>(), 0..8usize, 1..4usize, any::<(u8, u8, u64)>()), 0..3)),
                0..4),
            viewers in 0..1000usize,
            candidate in proptest::option::of((any::<u64>(), 0.0f32..130.0)),
            speaker in proptest::option::of(any::<u64>()),
        ) {
            use rtp_ext::codec::Codec;
            use crate::node::room_view::{ChannelView, LayerRate, TrackView};
            let codecs = ["AV1", "VP9", "VP8", "H264", "opus", "PCMU", "PCMA", "G722"];
            let participants = people.into_iter().map(|(id, name, whip, tracks)| {
                let id = ParticipantId(id);
                let tracks = tracks.into_iter().map(|(track, codec, streams, (s, t, bps))| {
                    let codec = Codec::from_encoding_name(codecs[codec]).expect("a codec");
                    TrackView {
                        id: track, participant: id, kind: codec.kind(), codec, streams,
                        layers: vec![LayerRate { spatial: s, temporal: t, bps }],
                        viewers: streams,
                    }
                });
                let channel = ChannelView {
                    participant: id, label: name.clone(), ordered: whip,
                    reliability: if whip { "max_lifetime" } else { "reliable" },
                    limit: whip.then_some(250), protocol: String::new(),
                };
                ParticipantView {
                    id, name, kind: if whip { "whip" } else { "participant" },
                    tracks: tracks.collect(), receiving: viewers, channels: vec![channel],
                }
            });
            let part = Part {
                participants: participants.collect(),
                viewers,
                candidate: candidate.map(|(id, level)| Candidate {
                    participant: ParticipantId(id), level,
                }),
                speaker: speaker.map(ParticipantId),
            };
            let json = serde_json::to_vec(&part).expect("JSON");
            prop_assert_eq!(Part::read(&json), Ok(part));
        }
    }

    #[test]
    fn a_part_that_is_not_one_is_refused() {
        assert_eq!(Part::read(b"{}"), Err(PartError::NotJson));
        let infinite = br#"{"participants":[],"viewers":0,"speaker":null,
            "candidate":{"participant":"0000000000000001","level":1e39}}"#;
        assert_eq!(Part::read(infinite), Err(PartError::BadLevel));
        let bad_id = br#"{"participants":[],"viewers":0,"candidate":null,"speaker":"12"}"#;
        assert_eq!(Part::read(bad_id), Err(PartError::NotJson));
    }
}
