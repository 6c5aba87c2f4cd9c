//! A clustered room's state across its nodes. Each node writes its part of each of its rooms
//! (its participants, their names and tracks, its WHEP viewers, and its own dominant speaker
//! with how loud it is) to the store under the room's home, and reads the parts of the room's
//! other nodes back in the same request (one script on Redis): a snapshot each time, so a
//! node that missed a change, or was cut off, has the room whole again with its next
//! successful read. It hands the other nodes' parts to its media loop, which shows them in
//! `GET /rooms/{room}` and tells its participants what changed.
//!
//! When: every [`FEED_INTERVAL`] the node looks at its parts, and as a session joins or
//! leaves through signaling (a participant joining finds the others sooner). One that changed (see
//! [`Part::changed_from`]) is written at once, at most once per feed interval, and the room's
//! other nodes are told with a [`notice`](super::notice); they read the room when told. A
//! part that did not change is written again only to refresh its lease, every `refresh` (the
//! heartbeat), which is also when the node reads the others' parts without being told: the
//! safety read that heals a lost notice. An idle room costs one script per node and beat.
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

use std::collections::{BTreeSet, HashMap};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Weak};
use std::time::{Duration, Instant};

use tokio::time::MissedTickBehavior;

use super::member::Member;
pub use super::room_part::{Candidate, Part, PartError};
use super::store::{ClusterStore, NodeRef, RoomParts};
use crate::node::core::{Followed, LocalPart};
use crate::node::dominant::Dominant;
use crate::node::participant::ParticipantId;
use crate::node::room_view::ParticipantView;
use crate::node::signaling::Signaling;

/// How often a node looks at its parts (and writes those that changed, at most this often):
/// the period the local dominant speaker is looked at too, so the home's hysteresis runs at
/// the same pace.
pub const FEED_INTERVAL: Duration = crate::node::core::SPEAKER_INTERVAL;

/// Runs the feed until the node's signaling is gone (held weakly, as the heartbeat holds it):
/// at every feed interval, and whenever a notice tells of a room.
pub async fn run(
    member: Arc<Member>,
    store: Arc<dyn ClusterStore>,
    signaling: Weak<Signaling>,
    (lease, refresh): (Duration, Duration),
) {
    let mut feed = RoomFeed::new(member.identity().node.clone(), lease, refresh);
    let inbox = store.inbox().clone();
    let Some(sessions_changed) = signaling.upgrade().map(|s| s.sessions_changed()) else {
        return;
    };
    let mut ticks = tokio::time::interval(FEED_INTERVAL);
    ticks.set_missed_tick_behavior(MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            _ = ticks.tick() => {}
            () = inbox.told() => {}
            () = sessions_changed.notified() => {}
        }
        let Some(signaling) = signaling.upgrade() else {
            return;
        };
        let Ok(parts) = signaling.local_parts().await else {
            return;
        };
        let live: Vec<String> = member.peers().into_iter().map(|r| r.node).collect();
        let followed = feed
            .look(store.as_ref(), parts, &live, Instant::now())
            .await;
        for (room, followed) in followed {
            if signaling.follow_room(room, followed).await.is_err() {
                return;
            }
        }
        let counters = member.counters();
        let add = |counter: &AtomicU64, n| counter.fetch_add(n, Ordering::Relaxed);
        let fed = feed.take_counts();
        add(&counters.feed_unavailable, fed.unavailable);
        add(&counters.parts_unreadable, fed.unreadable);
        add(&counters.notices_sent, fed.told);
        let heard = inbox.take_counts();
        add(&counters.notices_received, heard.received);
        add(&counters.notices_refused, heard.refused);
        add(&counters.subscription_lost, heard.lost_subscription);
    }
}

/// This node's side of its clustered rooms: what it last wrote and read of each, and, for
/// the rooms it is home of, how their dominant speaker is being decided.
#[derive(Debug)]
pub struct RoomFeed {
    node: String,
    lease: Duration,
    refresh: Duration,
    rooms: HashMap<String, Following>,
    counts: Counts,
}

/// What the feed counted since last asked.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Counts {
    /// Requests to the store that failed.
    pub unavailable: u64,
    /// Other nodes' parts that did not read as one (dropped).
    pub unreadable: u64,
    /// Parts written with a notice to the room's other nodes.
    pub told: u64,
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
    /// This node's part as last written under the home, and when: none until it is (or
    /// once the home it was written under is gone).
    written: Option<(Part, Instant)>,
}

/// What a room's store takes at a look.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Due {
    /// This node's part, written and the others' read back; `tell`: a change, noticed.
    Write { tell: bool },
    /// The others' parts read: a notice told of the room.
    Read,
    /// Nothing: the room is as last read.
    Nothing,
}

impl RoomFeed {
    /// The feed of node `node`, whose parts live for `lease` unless written again, and are
    /// written again (the others' read) every `refresh` at least.
    pub fn new(node: String, lease: Duration, refresh: Duration) -> Self {
        Self {
            node,
            lease,
            refresh,
            rooms: HashMap::new(),
            counts: Counts::default(),
        }
    }

    /// Listens to the notices of the rooms of `parts` (this node's parts of its rooms), then
    /// [`tick`](Self::tick)s with the rooms told about since the last look.
    pub async fn look(
        &mut self,
        store: &dyn ClusterStore,
        parts: Vec<LocalPart>,
        live: &[String],
        now: Instant,
    ) -> Vec<(String, Option<Followed>)> {
        let rooms: Vec<String> = parts.iter().map(|p| p.room.clone()).collect();
        store.inbox().listen(&self.node, &rooms);
        store.heard();
        let told = store.inbox().take();
        self.tick(store, parts, &told, live, now).await
    }

    /// Writes this node's `parts` of its rooms that are due, reads the others' where due or
    /// `told` (`live`: the other nodes registered now); what each room's media loop is to be
    /// handed. A room that left this node has its part written empty once, so its
    /// participants leave the others' view now rather than when the part expires.
    pub async fn tick(
        &mut self,
        store: &dyn ClusterStore,
        parts: Vec<LocalPart>,
        told: &BTreeSet<String>,
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
            self.rooms.entry(room.clone()).or_default().written = None;
            self.follow(store, empty, false, live, now).await;
            self.rooms.remove(&room);
        }
        let mut followed = Vec::with_capacity(parts.len());
        for part in parts {
            let room = part.room.clone();
            let told = told.contains(&room);
            followed.push((room, self.follow(store, part, told, live, now).await));
        }
        followed
    }

    /// What was counted since last asked.
    pub fn take_counts(&mut self) -> Counts {
        std::mem::take(&mut self.counts)
    }

    async fn follow(
        &mut self,
        store: &dyn ClusterStore,
        local: LocalPart,
        told: bool,
        live: &[String],
        now: Instant,
    ) -> Option<Followed> {
        let me = self.node.as_str();
        let following = self.rooms.entry(local.room.clone()).or_default();
        let part = following.part(me, local.participants, local.viewers, local.candidate);
        let read = match following.due(&part, told, self.refresh, now) {
            Due::Write { tell } => {
                // Views, ids and numbers: nothing in a part that JSON cannot write.
                let json = serde_json::to_string(&part).unwrap_or_default();
                let read = store
                    .exchange_part(&local.room, me, &json, self.lease, tell)
                    .await;
                if let Ok(Some(_)) = read {
                    following.written = Some((part.clone(), now));
                    self.counts.told += u64::from(tell);
                }
                Some(read)
            }
            Due::Read => Some(store.read_parts(&local.room).await),
            Due::Nothing => None,
        };
        match read {
            Some(Ok(Some(parts))) => {
                let until = now + self.lease;
                self.counts.unreadable += following.read(me, parts, until);
            }
            Some(Ok(None)) => following.homeless(live),
            Some(Err(_)) => self.counts.unavailable += 1,
            None => {}
        }
        following.others.retain(|(_, _, until)| *until > now);
        following.followed(me, &part, now)
    }
}

impl Following {
    /// This node's part now; the room's speaker in it while this node is the home.
    fn part(
        &self,
        me: &str,
        participants: Vec<ParticipantView>,
        viewers: usize,
        candidate: Option<(ParticipantId, f32)>,
    ) -> Part {
        let speaker = match &self.home {
            Some(home) if home.node == me => self.dominant.current,
            _ => None,
        };
        Part {
            participants,
            viewers,
            candidate: candidate.map(|(participant, level)| Candidate { participant, level }),
            speaker,
        }
    }

    /// What the store is to do for the room now: write `part` when it changed (at most once
    /// per feed interval: every write but the first waits half of one since the last, which
    /// lets one through per tick and none between) or when its lease is to be refreshed; read
    /// the others' when told.
    fn due(&self, part: &Part, told: bool, refresh: Duration, now: Instant) -> Due {
        let read = match told {
            true => Due::Read,
            false => Due::Nothing,
        };
        let Some((written, at)) = &self.written else {
            return Due::Write { tell: true };
        };
        let since = now.saturating_duration_since(*at);
        if since < FEED_INTERVAL / 2 {
            read
        } else if part.changed_from(written) {
            Due::Write { tell: true }
        } else if since >= refresh {
            Due::Write { tell: false }
        } else {
            read
        }
    }

    /// The parts read under `parts.home`, each standing until `until`; how many did not read.
    /// This node's own part missing (it was written under another home) is to be written
    /// again at once.
    fn read(&mut self, me: &str, parts: RoomParts, until: Instant) -> u64 {
        if self.home.as_ref() != Some(&parts.home) {
            // A new home: what was decided under the last one is void.
            self.dominant = Dominant::default();
        }
        self.home = Some(parts.home);
        if parts.parts.iter().all(|(node, _)| node != me) {
            self.written = None;
        }
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
    /// registered stay until the next home has them written again. This node's part is to be
    /// written again under that home.
    fn homeless(&mut self, live: &[String]) {
        let home = self.home.take();
        self.dominant = Dominant::default();
        self.written = None;
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
            // Saturating: another node's part says what it likes.
            viewers: (self.others.iter()).fold(0, |n, (_, part, _)| n.saturating_add(part.viewers)),
            speaker,
            nodes: self
                .others
                .iter()
                .map(|(node, part, _)| part.node(node))
                .collect(),
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
    use super::*;
    use crate::node::cluster::member::Identity;
    use crate::node::cluster::memory::{Link, MemoryStore};
    use crate::node::cluster::placement::Placement;
    use crate::node::cluster::store::Load;

    const LEASE: Duration = Duration::from_secs(3);
    const REFRESH: Duration = Duration::from_secs(1);

    /// A registered member of the cluster of `store`, with its own connection.
    async fn member(store: &MemoryStore, node: &str) -> (Member, Arc<MemoryStore>) {
        let connection = Arc::new(store.connection());
        let identity = Identity {
            node: node.to_owned(),
            url: format!("http://{node}"),
            relay: None,
        };
        let member = Member::new(connection.clone(), identity, LEASE, 0);
        member.heartbeat(load(), &[]).await.expect("registered");
        (member, connection)
    }

    fn load() -> Load {
        Load {
            capacity: 10,
            ..Load::default()
        }
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

    type Feeds = [(RoomFeed, Arc<MemoryStore>); 2];

    /// Nodes one (the home of room `call`) and two on one store, each with its feed.
    async fn two_nodes(store: &MemoryStore) -> ([Member; 2], Feeds) {
        let (one, at_one) = member(store, "one").await;
        let (two, at_two) = member(store, "two").await;
        assert_eq!(one.place("call").await, Placement::Here, "one is home");
        let feeds = [
            (RoomFeed::new("one".into(), LEASE, REFRESH), at_one),
            (RoomFeed::new("two".into(), LEASE, REFRESH), at_two),
        ];
        ([one, two], feeds)
    }

    /// One look on each node, `one` first, with `parts` of ada's on one and of bo's on two:
    /// what each shows.
    async fn both(feeds: &mut Feeds, parts: [LocalPart; 2], now: Instant) -> [Option<Followed>; 2] {
        let [(one, at_one), (two, at_two)] = feeds;
        let [ada, bo] = parts;
        let mut on_one = one
            .look(at_one.as_ref(), vec![ada], &["two".into()], now)
            .await;
        let mut on_two = two
            .look(at_two.as_ref(), vec![bo], &["one".into()], now)
            .await;
        [on_one.remove(0).1, on_two.remove(0).1]
    }

    /// ada's and bo's parts with these levels.
    fn levels(ada: f32, bo: f32) -> [LocalPart; 2] {
        [alone(1, "ada", ada), alone(2, "bo", bo)]
    }

    /// The names another node's participants go by, as `followed` shows them.
    fn names(followed: &Option<Followed>) -> Vec<String> {
        let others = followed.iter().flat_map(Followed::participants);
        others.map(|p| p.name.clone()).collect()
    }

    #[tokio::test]
    async fn the_home_decides_the_rooms_speaker_and_every_node_shows_it() {
        let store = MemoryStore::new();
        let (_members, mut feeds) = two_nodes(&store).await;
        let start = Instant::now();
        let at = |step: u32| start + FEED_INTERVAL * step;
        let [first, _] = both(&mut feeds, levels(70.0, 90.0), at(0)).await;
        assert_eq!(first, None, "one had nobody else's part yet: alone");
        // Bo, on two, is louder by more than the margin: the home picks him, once he has
        // spoken for 300 ms over a quiet room, and two shows what one decided.
        let mut shown = [None, None];
        for step in 1..=6 {
            shown = both(&mut feeds, levels(70.0, 90.0), at(step)).await;
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
            shown = both(&mut feeds, levels(93.0, 90.0), at(step)).await;
        }
        let speakers = |shown: &[Option<Followed>; 2]| shown.clone().map(|f| f.unwrap().speaker);
        assert_eq!(speakers(&shown), [Some(ParticipantId(2)); 2]);
        for step in 15..=20 {
            shown = both(&mut feeds, levels(80.0, 0.0), at(step)).await;
        }
        assert_eq!(speakers(&shown), [Some(ParticipantId(1)); 2]);
    }

    #[tokio::test]
    async fn parts_under_a_home_that_is_gone_are_void_and_a_room_left_is_written_empty() {
        let store = MemoryStore::new();
        let ([one, two], mut feeds) = two_nodes(&store).await;
        let now = Instant::now();
        both(&mut feeds, levels(0.0, 0.0), now).await;
        let [_, on_two] = both(&mut feeds, levels(0.0, 0.0), now).await;
        assert_eq!(names(&on_two), ["ada"]);
        // One leaves the cluster: its home and part are void; two, at its next refresh, has
        // nobody else's.
        one.leave().await.expect("left");
        let [_, (feed_two, at_two)] = &mut feeds;
        let bo = || vec![alone(2, "bo", 0.0)];
        let at = |refresh: u32| now + REFRESH * refresh;
        let shown = feed_two.look(at_two.as_ref(), bo(), &[], at(1)).await;
        assert_eq!(shown[0].1, None);
        // Two takes the room over; one's part under the old home stays void.
        two.heartbeat(load(), &["call".into()]).await.expect("beat");
        assert!(two.is_home("call"));
        let shown = feed_two.look(at_two.as_ref(), bo(), &[], at(2)).await;
        assert_eq!(shown[0].1, None);
        // Two's room empties: its part is written once more, empty, and then forgotten.
        let before = store.writes();
        let shown = feed_two.look(at_two.as_ref(), Vec::new(), &[], at(2)).await;
        assert!(shown.is_empty());
        assert_eq!(
            store.writes(),
            (before.0 + 1, before.1 + 1),
            "written, told"
        );
        let parts = at_two.read_parts("call").await;
        let parts = parts.expect("the store").expect("two's home").parts;
        let empty = parts.iter().find(|(node, _)| node == "two");
        let empty: Part = serde_json::from_str(&empty.expect("two's part").1).expect("a part");
        assert!(empty.participants.is_empty());
        assert!(feed_two.rooms.is_empty());
    }

    /// Both nodes through `steps` feed intervals after `start` (simulated time), each look
    /// with `parts` of the step, heartbeats every `REFRESH` keeping their registrations and
    /// one's home: what each showed last.
    async fn run_for(
        (members, feeds): &mut ([Member; 2], Feeds),
        start: Instant,
        steps: std::ops::Range<u32>,
        parts: impl Fn(u32) -> [LocalPart; 2],
    ) -> [Option<Followed>; 2] {
        let mut shown = [None, None];
        for step in steps {
            tokio::time::advance(FEED_INTERVAL).await;
            if step.is_multiple_of(5) {
                for member in members.iter() {
                    member
                        .heartbeat(load(), &["call".into()])
                        .await
                        .expect("beat");
                }
            }
            shown = both(feeds, parts(step), start + FEED_INTERVAL * step).await;
        }
        shown
    }

    #[tokio::test(start_paused = true)]
    async fn an_idle_room_writes_its_parts_once_a_refresh_and_a_talking_one_once_a_look_at_most() {
        let store = MemoryStore::new();
        let mut nodes = two_nodes(&store).await;
        let start = Instant::now();
        let shown = run_for(&mut nodes, start, 0..5, |_| levels(0.0, 90.0)).await;
        assert_eq!(
            shown.clone().map(|f| f.is_some()),
            [true; 2],
            "each has the other"
        );
        // 30 s in which ada is quiet and bo speaks on, his level never 3 dB from the one
        // written: each node writes its part once a second, and tells nobody of it.
        let before = store.writes();
        let jitter = |step: u32| levels(0.0, 90.0 + (step % 3) as f32);
        let shown = run_for(&mut nodes, start, 5..155, jitter).await;
        let (writes, notices) = store.writes();
        assert_eq!((writes - before.0, notices - before.1), (2 * 30, 0));
        let speakers = shown.map(|f| f.expect("the other's part").speaker);
        assert_eq!(speakers, [Some(ParticipantId(2)); 2], "as decided before");
        // 10 s in which bo's level swings by 6 dB at every look: two writes (and tells) at
        // every feed interval, never more often; one still only refreshes.
        let before = store.writes();
        let swings = |step: u32| levels(0.0, if step.is_multiple_of(2) { 80.0 } else { 86.0 });
        run_for(&mut nodes, start, 155..205, swings).await;
        let (writes, notices) = store.writes();
        assert_eq!((writes - before.0, notices - before.1), (50 + 10, 50));
    }

    #[tokio::test(start_paused = true)]
    async fn a_change_is_read_at_the_next_look_and_a_lost_notice_at_the_next_refresh() {
        let store = MemoryStore::new();
        let mut nodes = two_nodes(&store).await;
        let start = Instant::now();
        run_for(&mut nodes, start, 0..10, |_| levels(0.0, 0.0)).await;
        // Step 10 is a refresh of both: the next is at step 15. Bo's node gets a second
        // participant at step 11 and tells one, which reads the room at its next look.
        let with_cy = |_: u32| {
            let [ada, mut bo] = levels(0.0, 0.0);
            bo.participants.extend(alone(3, "cy", 0.0).participants);
            [ada, bo]
        };
        run_for(&mut nodes, start, 10..11, |_| levels(0.0, 0.0)).await;
        let [on_one, _] = run_for(&mut nodes, start, 11..12, with_cy).await;
        assert_eq!(names(&on_one), ["bo"], "one looked before two wrote");
        let [on_one, _] = run_for(&mut nodes, start, 12..13, with_cy).await;
        assert_eq!(
            names(&on_one),
            ["bo", "cy"],
            "read when told, 3 steps early"
        );
        // Notices to one are lost from now on: cy's leaving (step 13) shows there only at
        // one's next refresh (step 15), not before.
        nodes.1[0].1.set_link(Link::NoticesLost);
        let [on_one, on_two] = run_for(&mut nodes, start, 13..15, |_| levels(0.0, 0.0)).await;
        assert_eq!(names(&on_one), ["bo", "cy"], "not told");
        assert_eq!(names(&on_two), ["ada"]);
        let [on_one, _] = run_for(&mut nodes, start, 15..16, |_| levels(0.0, 0.0)).await;
        assert_eq!(names(&on_one), ["bo"], "the safety read");
    }
}
