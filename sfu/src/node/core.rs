//! The node's media core: the engine plus what a UDP port adds to it (ICE-lite, DTLS, SRTP,
//! rooms of sessions). Sans-IO like the engine: datagrams and time come in, datagrams are
//! polled out. Each session's DTLS association lives in its session and is driven here
//! (`dtls.rs`): its records leave with the media, its timers are the core's, and the SRTP
//! keys it yields connect the session.
//!
//! The core is the one place a session lives: signaling asks it whether a resource exists
//! and whose it is, and a session that ends for any reason (DELETE, silence, a failed
//! handshake) is gone from every table here and from the engine at once.
//!
//! One concept a file: this one holds the core's tables, its timers and the engine's events;
//! `sessions.rs` adds, checks and removes sessions; `room.rs` is a room's members;
//! `viewers.rs` subscribes WHEP viewers to their room's tracks; `conference.rs` does the same
//! for conference participants; `speakers.rs` picks who speaks; `wire.rs` and `dtls.rs` are
//! the datagrams in and out; `views.rs` and `stats.rs` read the state for signaling and
//! `/metrics`; `followed.rs` holds a clustered room's parts on the other nodes, as handed in.
//! The media relay between nodes is `relay*.rs` (links, their datagrams, their data channel
//! associations, renewals, and what the edge asks its node to pull) and `data_relays.rs`
//! (relays of a room's data alone).

mod conference;
mod data;
mod data_relays;
mod dtls;
#[cfg(test)]
mod dtls_tests;
mod followed;
mod moves;
mod relay;
mod relay_data;
mod relay_pulls;
mod relay_renew;
mod relay_resend;
mod relay_wire;
mod room;
mod sessions;
mod speakers;
mod stats;
mod track_names;
mod viewers;
mod views;
mod wire;

use std::collections::{BTreeSet, HashMap, VecDeque};
use std::sync::Arc;
use std::time::{Duration, Instant};

use self::room::Room;
use super::admission::Admission;
use super::datachannel::relay::DataRelay;
use super::dtls::{DtlsConfig, DATAGRAM_LIMIT};
use super::limits::{LimitError, Limits};
use super::metrics::{DropReason, NodeCounters, Snapshot};
use super::peer::{Peer, PeerId, Role};
use super::relays::RelayHosts;
use super::remote::Remote;
use super::session_events::SessionEvent;
use super::shard::{Steering, WorkerId};
use crate::engine::id_map::IdMap;
use crate::engine::rtcp::WallClock;
use crate::engine::{DownTrackId, Event, Router, RouterConfig, TransportId};

pub use self::conference::{Negotiated, ParticipantOffer, Sending, MAX_NAME_BYTES};
pub use self::data_relays::DataRelayed;
pub use self::followed::{Followed, FollowedNode, LocalPart};
pub use self::relay::{
    LinkQuality, NewLink, RelayCounters, RelayOffer, RelayRefusal, KEEPALIVE, LINGER,
    LINKS_PER_NODE, LINK_TIMEOUT, RELAYS_PER_LINK,
};
pub use self::relay_data::{link_data, write_link_data, LinkDataError};
pub use self::relay_pulls::{PullReason, RelayPull, RoomRelays, PULL_AGAIN};
pub use self::relay_wire::{bye_ssrcs, changed_tags, data_ended_tags};
pub use self::sessions::Resource;
pub use self::speakers::SPEAKER_INTERVAL;
pub use self::wire::MAX_DATAGRAM;

/// How often sessions are checked for silence.
const SWEEP_INTERVAL: Duration = Duration::from_secs(1);

/// Why the core refused a request from signaling.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CoreError {
    /// No session has that id (or it is of another kind or room): a 404, never a hint that it
    /// exists elsewhere.
    #[error("no such session")]
    UnknownPeer,
    /// The session exists but another credential created it: a 403.
    #[error("the session was created with another credential")]
    NotOwner,
    /// A viewer's request (a layer choice, its stats) named a session that does not watch.
    #[error("the session is not a viewer")]
    NotAViewer,
    /// An SSRC the offer publishes is already another track's on this core: the engine routes
    /// by SSRC, so two publishers cannot share one.
    #[error("an SSRC of the offer is already published")]
    SsrcInUse,
    /// A conference request (renegotiation, choice, events) named a session that is not a
    /// participant.
    #[error("the session is not a conference participant")]
    NotAParticipant,
    /// Another session of the room already goes by the name: names pick whom a viewer watches,
    /// so they are unique in a room.
    #[error("the name is taken in this room")]
    NameTaken,
    /// The name is empty, longer than [`MAX_NAME_BYTES`] or holds control characters.
    #[error("a name is 1 to {MAX_NAME_BYTES} bytes without control characters")]
    BadName,
    /// The room has nobody of the name a viewer asked to watch.
    #[error("no such participant in the room")]
    NoSuchParticipant,
    /// A participant's choice named a track the room does not carry.
    #[error("no such track in the room")]
    UnknownTrack,
    /// The renegotiation's `If-Match` names an answer that is no longer the session's last: the
    /// participant offered on an old state and must offer again (412).
    #[error("If-Match names answer {named}, the session's last answer is {current}")]
    Stale {
        /// The answer version the `If-Match` named.
        named: u64,
        /// The version of the session's last answer.
        current: u64,
    },
    /// A renegotiation changed what must stay the same for the session (ICE credentials, DTLS
    /// fingerprint, the sections already there): why.
    #[error("the offer does not match the session: {0}")]
    OfferMismatch(String),
    /// A conference participant's trickle fragment named ICE credentials other than its
    /// offer's: an ICE restart, which a participant makes with a new offer (refused: the
    /// session keeps its own).
    #[error("an ICE restart of a participant")]
    IceRestart,
    /// A relay refused at one of its limits, or for an SSRC another relay on its link has.
    #[error(transparent)]
    RelayRefused(#[from] RelayRefusal),
    /// A limit of the node, a room or a client refused the session.
    #[error(transparent)]
    Limit(#[from] LimitError),
}

/// The sans-IO core of one media worker: the engine ([`Router`]) and every session bound to
/// it, their rooms, ICE, DTLS and SRTP. Datagrams go in through
/// [`handle_datagram`](Self::handle_datagram) and out through
/// [`poll_datagram`](Self::poll_datagram), time through
/// [`handle_timeout`](Self::handle_timeout); signaling adds and removes sessions through its
/// methods.
#[derive(Debug)]
pub struct NodeCore {
    router: Router,
    peers: IdMap<PeerId, Peer>,
    rooms: HashMap<String, Room>,
    by_ufrag: HashMap<String, PeerId>,
    /// Filled only by binding requests that proved the session's password, so no sender
    /// picks its keys: an unkeyed hash is safe here.
    by_addr: IdMap<Remote, PeerId>,
    /// The sessions whose checks wait at an address they were nominated at (`moves.rs`).
    moving_to: IdMap<Remote, PeerId>,
    /// Each session's engine transport: outputs name the transport they go out on.
    by_transport: IdMap<TransportId, PeerId>,
    /// The node-wide places its sessions hold, shared with the node's other cores.
    admission: Arc<Admission>,
    /// This core's worker and the table that steers datagrams to workers, when the node
    /// has several.
    steering: Option<(WorkerId, Arc<Steering>)>,
    /// This core's sessions without SRTP keys yet.
    connecting: usize,
    /// STUN answers and DTLS records: a session's set-up, sent before any media.
    handshake_out: VecDeque<(Remote, Vec<u8>)>,
    /// The certificate and timeout of sessions' DTLS associations.
    dtls: Option<DtlsConfig>,
    /// Sessions' association timers, earliest first.
    dtls_timers: BTreeSet<(Instant, PeerId)>,
    /// Where an association writes what it has for the core.
    dtls_buffer: Vec<u8>,
    removed: VecDeque<PeerId>,
    /// Events for participants' event streams.
    session_events: VecDeque<(PeerId, SessionEvent)>,
    counters: NodeCounters,
    /// An inbound RTCP packet, decrypted.
    plain: Vec<u8>,
    peer_timeout: Duration,
    next_sweep: Option<Instant>,
    limits: Limits,
    /// Whether viewers that negotiated transport-wide CC get it (their estimate from its
    /// feedback).
    viewer_estimation: bool,
    /// When the rooms' speakers are next looked at.
    next_speakers: Option<Instant>,
    /// While more publishers of a room speak at once than this, only the loudest are
    /// forwarded; `None`: all.
    loudest_speakers: Option<usize>,
    /// Participants' data channels.
    data: DataRelay,
    /// Media relayed to and from other nodes of a cluster.
    media_relays: relay::Relays,
    /// The configured TURN servers' addresses: a session there is counted as relayed.
    relays: RelayHosts,
}

impl NodeCore {
    /// An empty core: an engine with `config`, and sessions ended after `peer_timeout` without
    /// a datagram. The `with_*` methods set the rest.
    pub fn new(config: RouterConfig, peer_timeout: Duration) -> Self {
        Self {
            router: Router::new(config),
            peers: IdMap::default(),
            rooms: HashMap::new(),
            by_ufrag: HashMap::new(),
            by_addr: IdMap::default(),
            moving_to: IdMap::default(),
            by_transport: IdMap::default(),
            admission: Arc::default(),
            steering: None,
            connecting: 0,
            handshake_out: VecDeque::new(),
            dtls: None,
            dtls_timers: BTreeSet::new(),
            dtls_buffer: vec![0; DATAGRAM_LIMIT],
            removed: VecDeque::new(),
            session_events: VecDeque::new(),
            counters: NodeCounters::default(),
            plain: Vec::with_capacity(MAX_DATAGRAM),
            peer_timeout,
            next_sweep: None,
            limits: Limits::default(),
            viewer_estimation: true,
            next_speakers: None,
            loudest_speakers: None,
            data: DataRelay::default(),
            relays: RelayHosts::default(),
            media_relays: relay::Relays::default(),
        }
    }

    /// The same core forwarding only the `n` loudest audio tracks of a room while more speak
    /// at once (`None`: all).
    pub fn with_loudest_speakers(mut self, n: Option<usize>) -> Self {
        self.loudest_speakers = n;
        self
    }

    /// Anchors the engine's NTP timestamps to wall-clock time.
    pub fn set_wall_clock(&mut self, clock: WallClock) {
        self.router.set_wall_clock(clock);
    }

    /// The same core with viewers' transport-wide CC on or off (see
    /// [`NodeConfig::viewer_estimation`](crate::node::config::NodeConfig::viewer_estimation)).
    pub fn with_viewer_estimation(mut self, on: bool) -> Self {
        self.viewer_estimation = on;
        self
    }

    /// The same core counting sessions at `relays` (the TURN servers' addresses) as relayed.
    pub fn with_relays(mut self, relays: RelayHosts) -> Self {
        self.relays = relays;
        self
    }

    /// The same core with other limits.
    pub fn with_limits(mut self, limits: Limits) -> Self {
        self.limits = limits;
        self
    }

    /// The same core as worker `worker` of several: the node-wide limits count in
    /// `admission` with the others', and the addresses its sessions are bound at go into
    /// `steering`.
    pub fn with_shard(
        mut self,
        worker: WorkerId,
        admission: Arc<Admission>,
        steering: Arc<Steering>,
    ) -> Self {
        self.admission = admission;
        self.steering = Some((worker, steering));
        self
    }

    /// The engine, for reading its state (tests, stats); changes go through the core.
    pub fn router(&self) -> &Router {
        &self.router
    }

    /// What the core counted: drops by reason, refusals, handshakes.
    pub fn counters(&self) -> &NodeCounters {
        &self.counters
    }

    /// Datagrams the loop around the core dropped.
    pub fn count_dropped(&mut self, reason: DropReason, datagrams: u64) {
        self.counters.drop_many(reason, datagrams);
    }

    /// A session, by id.
    pub fn peer(&self, id: PeerId) -> Option<&Peer> {
        self.peers.get(&id)
    }

    /// Rooms with at least one session.
    pub fn room_count(&self) -> usize {
        self.rooms.len()
    }

    /// The names of the rooms with at least one session.
    pub fn room_names(&self) -> impl Iterator<Item = &str> {
        self.rooms.keys().map(String::as_str)
    }

    /// How many entries every table of the core and the engine holds, summed: zero once
    /// every session is gone, whatever they did.
    pub fn table_entries(&self) -> usize {
        self.peers.len()
            + self.rooms.len()
            + self.by_ufrag.len()
            + self.by_addr.len()
            + self.moving_to.len()
            + self.by_transport.len()
            + self.admission.entries()
            + self.connecting
            + self.router.table_entries()
            + self.data.entries()
            + self.media_relays.entries()
    }

    fn arm_sweep(&mut self, now: Instant) {
        self.next_sweep.get_or_insert(now + SWEEP_INTERVAL);
        self.next_speakers.get_or_insert(now + SPEAKER_INTERVAL);
    }

    /// The engine's timers, and the sweep of silent sessions once a second.
    pub fn handle_timeout(&mut self, now: Instant) {
        self.handle_dtls_timeouts(now);
        self.handle_data_timeouts(now);
        self.handle_relay_timeouts(now);
        self.router.handle_timeout(now);
        self.handle_events();
        self.check_speakers(now);
        if self.next_sweep.is_some_and(|at| at > now) {
            return;
        }
        self.next_sweep = Some(now + SWEEP_INTERVAL);
        let silent: Vec<PeerId> = self
            .peers
            .iter()
            .filter(|(_, p)| {
                now.saturating_duration_since(p.last_seen) > self.peer_timeout
                    || p.connect_by.is_some_and(|by| now > by)
            })
            .map(|(&id, _)| id)
            .collect();
        for id in silent {
            tracing::info!(peer = %id, "session timed out");
            let _ = self.remove_peer(id);
        }
    }

    /// The engine's events: counted, logged, and a viewer's estimate kept with its session.
    pub(super) fn handle_events(&mut self) {
        while let Some(event) = self.router.poll_event() {
            match event {
                Event::LayerChanged {
                    transport,
                    layer,
                    down_track,
                } => {
                    self.counters.layer_changes += 1;
                    let peer = self.by_transport.get(&transport).copied();
                    tracing::debug!(?peer, ?down_track, ?layer, "layer changed");
                    let track = peer.and_then(|p| self.participant(p)).and_then(|p| {
                        p.sections
                            .iter()
                            .find(|s| s.media.down_track == Some(down_track))?
                            .source
                    });
                    if let (Some(peer), Some(track)) = (peer, track) {
                        let event = SessionEvent::LayerChanged {
                            track: self.room_track_id(track),
                            participant: self.track_owner(track),
                            layer,
                        };
                        self.session_events.push_back((peer, event));
                    }
                }
                Event::StreamBound {
                    transport,
                    track,
                    stream,
                    ssrcs,
                } => {
                    let peer = self.by_transport.get(&transport);
                    tracing::debug!(
                        ?peer,
                        ?track,
                        stream,
                        ?ssrcs,
                        "stream bound from its packets"
                    );
                }
                Event::LayerAllocated {
                    transport,
                    down_track,
                    layer,
                } => {
                    self.counters.layer_allocations += 1;
                    let id = self.by_transport.get(&transport).copied();
                    if let Some(peer) = id.and_then(|id| self.peers.get_mut(&id)) {
                        peer.allocated = Some((down_track, layer));
                    }
                    tracing::debug!(peer = ?id, ?down_track, ?layer, "layer allocated to fit the estimate");
                }
                Event::StreamsSent { track, active } => {
                    tracing::debug!(?track, active = format!("{active:04b}"), "streams sent");
                }
                Event::KeyframeRequested { transport, track } => {
                    let peer = self.by_transport.get(&transport);
                    tracing::debug!(?peer, ?track, "keyframe requested upstream");
                }
                Event::BandwidthEstimate {
                    transport,
                    bitrate_bps,
                } => {
                    self.counters.bandwidth_estimates += 1;
                    let id = self.by_transport.get(&transport).copied();
                    let Some((id, peer)) = id.and_then(|id| Some((id, self.peers.get_mut(&id)?)))
                    else {
                        continue;
                    };
                    let before = peer.estimate_bps.replace(bitrate_bps);
                    tracing::debug!(peer = ?id, bitrate_bps, "viewer bandwidth estimate");
                    // A participant hears of a change of a twentieth or more, not of every
                    // feedback's.
                    let moved =
                        before.is_none_or(|b| b.abs_diff(bitrate_bps).saturating_mul(20) >= b);
                    if moved && matches!(peer.role, Role::Participant(_)) {
                        let event = SessionEvent::Estimate { bitrate_bps };
                        self.session_events.push_back((id, event));
                    }
                }
            }
        }
    }

    /// When [`handle_timeout`](Self::handle_timeout) is next due: always a time once the
    /// core has seen a session or a datagram, so the sweep runs however busy the node is.
    pub fn poll_timeout(&self) -> Option<Instant> {
        let speakers = self.next_speakers.filter(|_| !self.rooms.is_empty());
        let dtls = self.dtls_timeout();
        let data = self.data.poll_timeout();
        let media_relays = self.media_relays.poll_timeout();
        [
            self.router.poll_timeout(),
            self.next_sweep,
            speakers,
            dtls,
            data,
            media_relays,
        ]
        .into_iter()
        .flatten()
        .min()
    }

    /// Sessions removed since the last call (their DTLS state can go).
    pub fn poll_removed(&mut self) -> Option<PeerId> {
        self.removed.pop_front()
    }

    /// The next event for a participant's event stream.
    pub fn poll_session_event(&mut self) -> Option<(PeerId, SessionEvent)> {
        self.session_events.pop_front()
    }

    /// Sessions, subscriptions and counters of the node and the engine, for `/metrics`.
    pub fn snapshot(&self) -> Snapshot {
        let router = self.router.counters();
        let mut snapshot = Snapshot {
            rooms: self.rooms.len(),
            connecting: self.connecting,
            node: {
                let mut node = self.counters;
                node.add(self.data.counters());
                node
            },
            rtp_in: router.rtp_in,
            bad_rtcp: router.bad_rtcp,
            nacks_sent: router.nacks_sent,
            keyframe_requests_sent: router.keyframe_requests_sent,
            rembs_sent: router.rembs_sent,
            probe_clusters: router.probe_clusters,
            viewer_stats: self.all_viewer_stats(),
            media_relay: self.relay_figures(),
            ..Snapshot::default()
        };
        for peer in self.peers.values() {
            if let Some(addr) = peer.addr {
                snapshot.sessions_by_transport[addr.transport() as usize] += 1;
            }
            if let Some(p) = peer.role.publisher() {
                snapshot.tracks += p.tracks.len();
                for track in p.tracks.iter().filter_map(|t| t.id) {
                    let asked = self.router.keyframe_counters(track).map(|k| k.asked);
                    snapshot.keyframes_asked += asked.unwrap_or(0);
                }
            }
            let subscriptions: Vec<DownTrackId> = match &peer.role {
                Role::Publisher(_) => {
                    snapshot.publishers += 1;
                    Vec::new()
                }
                Role::Viewer(v) => {
                    snapshot.viewers += 1;
                    let media = [&v.video, &v.audio].into_iter().flatten();
                    media.filter_map(|m| m.down_track).collect()
                }
                Role::Participant(p) => {
                    snapshot.participants += 1;
                    p.sections
                        .iter()
                        .filter_map(|s| s.media.down_track)
                        .collect()
                }
            };
            for down_track in subscriptions {
                snapshot.subscriptions += 1;
                let counters = self.router.down_track_counters(down_track);
                snapshot.retransmissions += counters.map_or(0, |c| c.retransmitted);
            }
        }
        snapshot
    }
}
