//! What an edge asks its node to pull from other nodes, and when. The core decides; the
//! node's cluster code polls the pulls ([`NodeCore::poll_relay_pull`]), asks the origins over
//! HTTP and hands their answers back in ([`relay_in`](NodeCore::relay_in),
//! [`relay_data_in`](NodeCore::relay_data_in)), so the core stays sans-IO.
//!
//! - Every heartbeat the node lists what each room here hosts and lacks ([`RoomRelays`]) and
//!   pulls what the room directory names: the safety net, and the WHEP viewers' way.
//! - When the room's state is read (a notice of another node's change, see
//!   [`follow_room`](NodeCore::follow_room)): a named publisher with tracks on another node
//!   that this node lacks while someone here receives the room is pulled from that node; and
//!   another node with conference participants while this node has some and no relay of the
//!   room's data from it has that relay pulled (`data_relays.rs`).
//! - An origin's word that a relay's track set changed (`STRC`) has its publisher pulled
//!   again at once: one pull per relay until the relay is renewed, however many words come.
//! - A node asking this one for a room's data while this one has participants there and no
//!   relay of that node's data has that one pulled in turn, so channels cross both ways: the
//!   core says so in its answer ([`DataRelayed`](super::DataRelayed)), and the node pulls it
//!   before it answers.
//!
//! A pull of the room's state is asked at most once per [`PULL_AGAIN`] while it stays wanted
//! (an origin that refuses is asked again then, not at every read); the node re-checks each
//! under its one-at-a-time lock before it asks the origin.

use std::collections::{HashMap, VecDeque};
use std::time::{Duration, Instant};

use super::room::Room;
use super::NodeCore;
use crate::node::peer::PeerId;

/// A pull still wanted is asked again after this long: past the node's wait for an origin's
/// answer (2 s), so one on its way is not asked twice.
pub const PULL_AGAIN: Duration = Duration::from_millis(2500);
/// Pulls queued for the node at most between two of its polls; past it they are dropped
/// (counted) and asked again when next wanted.
const QUEUED: usize = 64;

/// What the node is to ask another node for.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum RelayPull {
    /// The publisher named `name` of `room`: from `node` when the room's state names the
    /// node that has it, else from the node the room directory names.
    Publisher {
        /// The room.
        room: String,
        /// The publisher's name there.
        name: String,
        /// Its node, by id.
        node: Option<String>,
    },
    /// The data channels of `room`'s participants on `node`.
    Data {
        /// The room.
        room: String,
        /// The node, by id.
        node: String,
    },
}

impl RelayPull {
    /// The room it is of.
    pub fn room(&self) -> &str {
        match self {
            Self::Publisher { room, .. } | Self::Data { room, .. } => room,
        }
    }
}

/// Why the core asked for a pull, for `/metrics`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PullReason {
    /// The room's state showed a publisher on another node that this node lacks.
    Publisher,
    /// The origin said a relay's track set changed.
    Changed,
    /// The room's state showed participants on another node whose data this node lacks.
    Data,
    /// Another node asked this one for a room's data: its own are pulled in turn.
    Answer,
}

impl PullReason {
    /// The labels, in [`RelayCounters::pulls`](super::RelayCounters::pulls)'s order.
    pub const LABELS: [&'static str; 4] = ["publisher", "changed", "data", "answer"];
}

/// A room as the relay follows it, for the cluster's directory and pulls.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RoomRelays {
    /// The room.
    pub room: String,
    /// The named publishers with tracks it hosts here (relayed ones left out): the directory
    /// lists them.
    pub hosted: Vec<String>,
    /// The names of its publishers here, relayed in or not: those hosted elsewhere and not
    /// among them are pulled.
    pub present: Vec<String>,
    /// Whether a viewer or a participant here receives it.
    pub receiving: bool,
    /// Its relayed publishers whose origin said their track set changed: pulled again.
    pub renew: Vec<String>,
}

/// The pulls the core asked for and the node has not taken yet, and when each pull of the
/// room's state was last asked.
#[derive(Debug, Default)]
pub(super) struct Pulls {
    /// Whether anybody takes them: a node without the relay asks for nothing.
    on: bool,
    queue: VecDeque<RelayPull>,
    asked: HashMap<RelayPull, Instant>,
}

impl Pulls {
    pub fn len(&self) -> usize {
        self.queue.len() + self.asked.len()
    }
}

impl NodeCore {
    /// Has the core ask for pulls, which its node then takes with
    /// [`poll_relay_pull`](Self::poll_relay_pull): a node with the relay between nodes.
    pub fn enable_relay_pulls(&mut self) {
        self.media_relays.pulls.on = true;
    }

    /// The next pull asked for.
    pub fn poll_relay_pull(&mut self) -> Option<RelayPull> {
        self.media_relays.pulls.queue.pop_front()
    }

    /// A pull the node had no room for: counted, and asked again when next wanted.
    pub fn relay_pull_dropped(&mut self, pull: &RelayPull) {
        self.media_relays.pulls.asked.remove(pull);
        self.media_relays.counters.pulls_dropped += 1;
    }

    /// Whether the publisher named `name` of `room` is to be pulled: it is not here, or is
    /// relayed here with a changed track set.
    pub fn wants_publisher(&self, room: &str, name: &str) -> bool {
        let Some(members) = self.rooms.get(room) else {
            return true;
        };
        members
            .names
            .get(name)
            .is_none_or(|&id| self.relay_changed(id))
    }

    /// Whether a viewer of `room` watching `source` (or the room's first publisher) would find
    /// nobody to watch here, relayed or not: an edge then asks for a relay.
    pub fn needs_relay(&self, room: &str, source: Option<&str>) -> bool {
        let Some(members) = self.rooms.get(room) else {
            return true;
        };
        match source {
            Some(name) => !members.names.contains_key(name),
            None => !members.publishers.iter().any(|id| self.has_tracks(id)),
        }
    }

    /// Each room here as the relay follows it: the publishers it hosts, those it has, and
    /// whether anyone receives it.
    pub fn relay_rooms(&self) -> Vec<RoomRelays> {
        let rooms = self.rooms.iter();
        rooms
            .map(|(room, members)| self.relays_of(room, members))
            .collect()
    }

    /// `room` as the relay follows it (empty when nobody is in it here).
    pub fn relay_room(&self, room: &str) -> RoomRelays {
        match self.rooms.get(room) {
            Some(members) => self.relays_of(room, members),
            None => RoomRelays {
                room: room.to_owned(),
                ..RoomRelays::default()
            },
        }
    }

    fn relays_of(&self, room: &str, members: &Room) -> RoomRelays {
        let named = members
            .names
            .iter()
            .filter(|(_, id)| members.publishers.contains(id));
        let mut view = RoomRelays {
            room: room.to_owned(),
            receiving: !members.viewers.is_empty() || !members.participants.is_empty(),
            ..RoomRelays::default()
        };
        for (name, id) in named {
            view.present.push(name.clone());
            if self.relay_changed(*id) {
                view.renew.push(name.clone());
            }
            if !self.media_relays.in_peers.contains_key(id) && self.has_tracks(id) {
                view.hosted.push(name.clone());
            }
        }
        view
    }

    /// What the room's state, as last read, has this node pull in `room`: the publishers of
    /// other nodes it lacks while someone here receives the room, the data of other nodes
    /// with participants while it has some.
    pub(super) fn want_relays(&mut self, now: Instant, room: &str) {
        self.prune_asked(now);
        let Some(members) = self.rooms.get(room).filter(|_| self.media_relays.pulls.on) else {
            return;
        };
        let Some(followed) = &members.followed else {
            return;
        };
        let receiving = !members.viewers.is_empty() || !members.participants.is_empty();
        let mut wanted = Vec::new();
        for other in &followed.nodes {
            let lacked = other
                .publishers
                .iter()
                .filter(|name| receiving && !members.names.contains_key(*name));
            wanted.extend(lacked.map(|name| {
                let pull = RelayPull::Publisher {
                    room: room.to_owned(),
                    name: name.clone(),
                    node: Some(other.node.clone()),
                };
                (pull, PullReason::Publisher)
            }));
            let data = !members.participants.is_empty() && other.participants;
            if data && self.needs_data(room, &other.node) {
                let pull = RelayPull::Data {
                    room: room.to_owned(),
                    node: other.node.clone(),
                };
                wanted.push((pull, PullReason::Data));
            }
        }
        for (pull, reason) in wanted {
            self.ask_pull(now, pull, reason);
        }
    }

    /// Asks for `pull`, unless it was asked less than [`PULL_AGAIN`] ago.
    pub(super) fn ask_pull(&mut self, now: Instant, pull: RelayPull, reason: PullReason) {
        let pulls = &mut self.media_relays.pulls;
        let recent = pulls
            .asked
            .get(&pull)
            .is_some_and(|&at| at + PULL_AGAIN > now);
        if !pulls.on || recent {
            return;
        }
        pulls.asked.insert(pull.clone(), now);
        self.queue_pull(pull, reason);
    }

    /// The origin of relay-in `id` said its track set changed, for the first time since it
    /// was relayed: its publisher is pulled again.
    pub(super) fn pull_changed(&mut self, id: PeerId) {
        let Some(peer) = self.peers.get(&id) else {
            return;
        };
        let Some(identity) = &peer.identity else {
            return;
        };
        let followed = self.rooms.get(&peer.room).and_then(|r| r.followed.as_ref());
        let nodes = followed.iter().flat_map(|f| &f.nodes);
        let node = nodes
            .filter(|n| n.publishers.contains(&identity.name))
            .map(|n| n.node.clone())
            .next();
        let pull = RelayPull::Publisher {
            room: peer.room.clone(),
            name: identity.name.clone(),
            node,
        };
        self.queue_pull(pull, PullReason::Changed);
    }

    fn queue_pull(&mut self, pull: RelayPull, reason: PullReason) {
        let relays = &mut self.media_relays;
        if !relays.pulls.on {
            return;
        }
        if relays.pulls.queue.len() >= QUEUED {
            relays.pulls.asked.remove(&pull);
            relays.counters.pulls_dropped += 1;
            return;
        }
        relays.counters.pulls[reason as usize] += 1;
        relays.pulls.queue.push_back(pull);
    }

    /// Forgets the pulls asked long enough ago to be asked again.
    fn prune_asked(&mut self, now: Instant) {
        let asked = &mut self.media_relays.pulls.asked;
        asked.retain(|_, at| *at + PULL_AGAIN > now);
    }

    /// `room` left this core: what was asked for it is forgotten.
    pub(super) fn forget_pulls(&mut self, room: &str) {
        let asked = &mut self.media_relays.pulls.asked;
        asked.retain(|pull, _| pull.room() != room);
    }
}
