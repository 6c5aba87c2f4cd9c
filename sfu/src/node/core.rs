//! The node's media core: the engine plus what a UDP port adds to it (ICE-lite, DTLS, SRTP,
//! rooms of sessions). Sans-IO like the engine: datagrams and time come in, datagrams are
//! polled out. Each session's DTLS association lives in its session and is driven here
//! (`dtls.rs`): its records leave with the media, its timers are the core's, and the SRTP
//! keys it yields connect the session.
//!
//! The core is the one place a session lives: signaling asks it whether a resource exists
//! and whose it is, and a session that ends for any reason (DELETE, silence, a failed
//! handshake) is gone from every table here and from the engine at once.

mod conference;
mod dtls;
#[cfg(test)]
mod dtls_tests;
mod room;
mod speakers;
mod stats;
mod views;
mod wire;

use std::collections::{BTreeSet, HashMap, VecDeque};
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use selector::Layer;

use self::room::Room;
use super::admission::Admission;
use super::dtls::{DtlsConfig, DATAGRAM_LIMIT};
use super::limits::{LimitError, Limits};
use super::metrics::{DropReason, NodeCounters, Snapshot};
use super::peer::{Join, Kind, Owner, Peer, PeerId, Publisher, Role, Viewer};
use super::sdp::RoomCodec;
use super::session_events::SessionEvent;
use super::shard::{Steering, WorkerId};
use super::srtp::SrtpContext;
use crate::engine::id_map::IdMap;
use crate::engine::rtcp::WallClock;
use crate::engine::{
    DownTrackConfig, DownTrackId, Event, Router, RouterConfig, RouterError, TrackId, TransportId,
};

pub use self::conference::{Negotiated, ParticipantOffer, Sending, MAX_NAME_BYTES};
pub use self::wire::MAX_DATAGRAM;

/// How often sessions are checked for silence.
const SWEEP_INTERVAL: Duration = Duration::from_secs(1);

/// Why the core refused a request from signaling.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CoreError {
    #[error("no such session")]
    UnknownPeer,
    #[error("the session was created with another credential")]
    NotOwner,
    #[error("the session is not a viewer")]
    NotAViewer,
    #[error("an SSRC of the offer is already published")]
    SsrcInUse,
    #[error("the session is not a conference participant")]
    NotAParticipant,
    #[error("the name is taken in this room")]
    NameTaken,
    #[error("a name is 1 to {MAX_NAME_BYTES} bytes without control characters")]
    BadName,
    #[error("no such participant in the room")]
    NoSuchParticipant,
    #[error("no such track in the room")]
    UnknownTrack,
    #[error("If-Match names answer {named}, the session's last answer is {current}")]
    Stale { named: u64, current: u64 },
    #[error("the offer does not match the session: {0}")]
    OfferMismatch(String),
    #[error(transparent)]
    Limit(#[from] LimitError),
}

/// A session's resource URL as a request names it, with the credential it came with.
#[derive(Debug, Clone)]
pub struct Resource {
    pub kind: Kind,
    pub room: String,
    pub id: PeerId,
    pub owner: Option<Owner>,
}

#[derive(Debug)]
pub struct NodeCore {
    router: Router,
    peers: IdMap<PeerId, Peer>,
    rooms: HashMap<String, Room>,
    by_ufrag: HashMap<String, PeerId>,
    /// Filled only by binding requests that proved the session's password, so no sender
    /// picks its keys: an unkeyed hash is safe here.
    by_addr: IdMap<SocketAddr, PeerId>,
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
    handshake_out: VecDeque<(SocketAddr, Vec<u8>)>,
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
}

impl NodeCore {
    pub fn new(config: RouterConfig, peer_timeout: Duration) -> Self {
        Self {
            router: Router::new(config),
            peers: IdMap::default(),
            rooms: HashMap::new(),
            by_ufrag: HashMap::new(),
            by_addr: IdMap::default(),
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

    pub fn router(&self) -> &Router {
        &self.router
    }

    pub fn counters(&self) -> &NodeCounters {
        &self.counters
    }

    /// Datagrams the loop around the core dropped.
    pub fn count_dropped(&mut self, reason: DropReason, datagrams: u64) {
        self.counters.drop_many(reason, datagrams);
    }

    pub fn peer(&self, id: PeerId) -> Option<&Peer> {
        self.peers.get(&id)
    }

    /// Rooms with at least one session.
    pub fn room_count(&self) -> usize {
        self.rooms.len()
    }

    /// How many entries every table of the core and the engine holds, summed: zero once
    /// every session is gone, whatever they did.
    pub fn table_entries(&self) -> usize {
        self.peers.len()
            + self.rooms.len()
            + self.by_ufrag.len()
            + self.by_addr.len()
            + self.by_transport.len()
            + self.admission.entries()
            + self.connecting
            + self.router.table_entries()
    }

    /// Refuses a new session past a limit (counted by reason), or takes its place.
    fn admit(&mut self, join: &Join) -> Result<(), CoreError> {
        let room = self.rooms.get(&join.room).map_or(0, Room::len);
        self.admission
            .admit(&self.limits, room, join.client)
            .map_err(|limit| {
                self.counters.refuse(limit);
                limit.into()
            })
    }

    /// Refuses one more publishing session (a participant, or a WHIP publisher, which every
    /// participant receives as it does a participant) in a room at its cap.
    fn check_participants(&mut self, room: &str) -> Result<(), CoreError> {
        let publishing = self.rooms.get(room).map_or(0, |r| r.publishers.len());
        if publishing < self.limits.participants_per_room {
            return Ok(());
        }
        let limit = LimitError::ParticipantsFull(self.limits.participants_per_room);
        self.counters.refuse(limit);
        Err(limit.into())
    }

    /// Steers datagrams from `addr` to this core's worker, when the node has several.
    fn bind(&self, addr: SocketAddr) {
        if let Some((worker, steering)) = &self.steering {
            steering.bind(addr, *worker);
        }
    }

    fn unbind(&self, addr: SocketAddr) {
        if let Some((worker, steering)) = &self.steering {
            steering.unbind(addr, *worker);
        }
    }

    fn add_peer(&mut self, now: Instant, transport: TransportId, join: Join, role: Role) -> PeerId {
        let mut id = PeerId::random();
        while self.peers.contains_key(&id) {
            id = PeerId::random();
        }
        self.by_transport.insert(transport, id);
        self.arm_sweep(now);
        self.by_ufrag.insert(join.ice.local_ufrag.clone(), id);
        self.connecting += 1;
        let identity = join.name.clone().map(|name| self.identity(name));
        let room = self.rooms.entry(join.room.clone()).or_default();
        if let Some(identity) = &identity {
            room.names.insert(identity.name.clone(), id);
        }
        match role {
            Role::Publisher(_) => room.publishers.push(id),
            Role::Viewer(_) => {
                room.viewers.insert(id);
            }
            Role::Participant(_) => {
                room.publishers.push(id);
                room.participants.push(id);
            }
        }
        let peer = Peer {
            transport,
            room: join.room,
            ice: join.ice,
            fingerprint: join.fingerprint,
            owner: join.owner,
            client: join.client,
            addr: None,
            srtp: None,
            dtls: None,
            dtls_timer: None,
            estimate_bps: None,
            allocated: None,
            last_seen: now,
            identity,
            role,
        };
        self.peers.insert(id, peer);
        id
    }

    /// A WHIP session: its tracks are published at once (simulcast streams get their SSRCs
    /// when their first packets name their rids) and the room's waiting viewers subscribed.
    pub fn add_publisher(
        &mut self,
        now: Instant,
        join: Join,
        mut publisher: Publisher,
    ) -> Result<PeerId, CoreError> {
        if let Some(name) = &join.name {
            self.check_name(&join.room, name)?;
        }
        self.check_participants(&join.room)?;
        self.admit(&join)?;
        let transport = self.router.add_transport();
        if let Err(e) = self.publish_tracks(transport, &mut publisher) {
            // Just added: known to the router, with what it published so far.
            let _ = self.router.remove_transport(transport);
            self.admission.left(join.client, true);
            return Err(e);
        }
        let room = join.room.clone();
        let id = self.add_peer(now, transport, join, Role::Publisher(publisher));
        self.announce_join(now, &room, id);
        Ok(id)
    }

    /// A WHEP session. It is subscribed once its keys are set (an unconnected viewer costs
    /// the engine nothing) to what its room publishes then or later.
    pub fn add_viewer(
        &mut self,
        now: Instant,
        join: Join,
        viewer: Viewer,
    ) -> Result<PeerId, CoreError> {
        self.admit(&join)?;
        let transport = self.router.add_transport();
        Ok(self.add_peer(now, transport, join, Role::Viewer(viewer)))
    }

    /// Checks a resource URL and its credential: the session exists, is of that kind in that
    /// room, and (when it has an owner) the credential is the one that created it.
    pub fn resource(&self, resource: &Resource) -> Result<PeerId, CoreError> {
        let peer = self
            .peers
            .get(&resource.id)
            .filter(|p| p.role.kind() == resource.kind && p.room == resource.room)
            .ok_or(CoreError::UnknownPeer)?;
        match peer.owner {
            Some(owner) if resource.owner != Some(owner) => Err(CoreError::NotOwner),
            _ => Ok(resource.id),
        }
    }

    /// What the publisher a new viewer watches sends (the one named `source`, or the room's
    /// first that publishes): the viewer's codecs must match it.
    pub fn room_codecs(
        &self,
        room: &str,
        source: Option<&str>,
    ) -> Result<Vec<RoomCodec>, CoreError> {
        let Some(members) = self.rooms.get(room) else {
            return match source {
                Some(_) => Err(CoreError::NoSuchParticipant),
                None => Ok(Vec::new()),
            };
        };
        let publisher = |id: &PeerId| self.peers.get(id)?.role.publisher();
        match source {
            Some(name) => {
                let id = members
                    .names
                    .get(name)
                    .ok_or(CoreError::NoSuchParticipant)?;
                Ok(publisher(id).map(|p| p.codecs.clone()).unwrap_or_default())
            }
            None => Ok(members
                .publishers
                .iter()
                .filter_map(publisher)
                .find(|p| !p.codecs.is_empty())
                .map(|p| p.codecs.clone())
                .unwrap_or_default()),
        }
    }

    /// Ends a session (DELETE, silence, a failed handshake, shutdown): it leaves every table.
    pub fn remove_peer(&mut self, id: PeerId) -> Result<(), CoreError> {
        let peer = self.peers.remove(&id).ok_or(CoreError::UnknownPeer)?;
        self.by_ufrag.remove(&peer.ice.local_ufrag);
        self.forget_dtls_timer(id, peer.dtls_timer);
        if let Some(addr) = peer.addr {
            self.by_addr.remove(&addr);
            self.unbind(addr);
        }
        self.admission.left(peer.client, peer.srtp.is_none());
        if peer.srtp.is_none() {
            self.connecting -= 1;
        }
        if let Some(room) = self.rooms.get_mut(&peer.room) {
            room.remove(id);
        }
        for track in peer
            .role
            .publisher()
            .iter()
            .flat_map(|p| p.tracks.iter().filter_map(|t| t.id))
        {
            self.unpublish(&peer.room, track);
        }
        if let Some(identity) = &peer.identity {
            let left = SessionEvent::ParticipantLeft {
                participant: identity.public,
                name: identity.name.clone(),
            };
            self.broadcast(&peer.room, id, left);
            tracing::info!(peer = %id, participant = %identity.public, "left its room");
        }
        self.by_transport.remove(&peer.transport);
        // Known to the router since the session was added: its subscriptions go with it.
        let _ = self.router.remove_transport(peer.transport);
        if self.rooms.get(&peer.room).is_some_and(Room::is_empty) {
            self.rooms.remove(&peer.room);
        }
        self.removed.push_back(id);
        self.session_events.retain(|(to, _)| *to != id);
        self.serve_waiting(&peer.room);
        self.ask_renegotiation(&peer.room);
        Ok(())
    }

    /// Unpublishes a track; its subscriptions go with it, and their viewers wait for the
    /// room's next publisher.
    fn unpublish(&mut self, room: &str, track: TrackId) {
        let subscribers: Vec<(DownTrackId, Option<PeerId>)> = self
            .router
            .subscribers(track)
            .iter()
            .map(|&d| (d, self.owner_of(d)))
            .collect();
        let _ = self.router.unpublish(track);
        self.forget_track(room, track);
        for (down_track, owner) in subscribers {
            let Some(owner) = owner else {
                continue;
            };
            if let Some(viewer) = self.peers.get_mut(&owner).and_then(Peer::viewer_mut) {
                for media in [&mut viewer.video, &mut viewer.audio].into_iter().flatten() {
                    if media.down_track == Some(down_track) {
                        media.down_track = None;
                    }
                }
                if let Some(room) = self.rooms.get_mut(room) {
                    room.waiting.insert(owner);
                }
            }
        }
    }

    /// Subscribes each waiting viewer of the room to the room's first published track of
    /// each kind it lacks, in a codec it accepts. Costs the waiting viewers, not the room.
    fn serve_waiting(&mut self, room: &str) {
        let Some(members) = self.rooms.get(room) else {
            return;
        };
        if members.waiting.is_empty() {
            return;
        }
        let waiting: Vec<PeerId> = members.waiting.iter().copied().collect();
        for viewer in waiting {
            for track in self.watched_tracks(room, viewer) {
                self.connect(viewer, track);
            }
            let served = self
                .peers
                .get_mut(&viewer)
                .and_then(Peer::viewer_mut)
                .is_none_or(|v| v.is_served());
            if let (true, Some(members)) = (served, self.rooms.get_mut(room)) {
                members.waiting.remove(&viewer);
            }
        }
    }

    /// The tracks a viewer may watch: the named publisher's, or every publisher's in the order
    /// they came (it takes the first of each kind that it decodes).
    fn watched_tracks(&self, room: &str, viewer: PeerId) -> Vec<TrackId> {
        let source = match self.peers.get(&viewer).map(|p| &p.role) {
            Some(Role::Viewer(v)) => v.source.clone(),
            _ => return Vec::new(),
        };
        match source {
            Some(name) => self
                .rooms
                .get(room)
                .and_then(|r| r.names.get(&name))
                .map_or(Vec::new(), |&id| self.tracks_of(id)),
            None => self.room_tracks(room, None),
        }
    }

    fn connect(&mut self, viewer_id: PeerId, track: TrackId) {
        let Some(config) = self.router.receiver_config(track) else {
            return;
        };
        let codec = config.codec;
        let format = self.track_format(track);
        let Some(peer) = self.peers.get_mut(&viewer_id) else {
            return;
        };
        let transport = peer.transport;
        let Some(viewer) = peer.viewer_mut() else {
            return;
        };
        let Some(dd) = viewer.media_mut(codec.kind()).map(|m| m.dd_ext_id) else {
            return;
        };
        let limits = viewer.limits(codec, dd);
        let Some(media) = viewer.media_mut(codec.kind()) else {
            return;
        };
        if media.down_track.is_some() {
            return;
        }
        let Some(accepted) = media.codec_for(codec, &format) else {
            return;
        };
        let down = DownTrackConfig {
            rtx: accepted.rtx_payload_type.map(|pt| (media.rtx_ssrc, pt)),
            dd_ext_id: media.dd_ext_id,
            two_byte_allowed: media.two_byte_allowed,
            transport_cc_ext_id: media.transport_cc_ext_id.filter(|_| self.viewer_estimation),
            ..DownTrackConfig::new(media.ssrc, accepted.payload_type)
        };
        if let Ok(down_track) = self.router.subscribe(transport, track, down, limits) {
            media.down_track = Some(down_track);
        }
    }

    /// The session a subscription sends to.
    fn owner_of(&self, down_track: DownTrackId) -> Option<PeerId> {
        let transport = self.router.down_track_info(down_track)?.transport;
        self.by_transport.get(&transport).copied()
    }

    /// The format parameters the track's publisher announced it with.
    fn track_format(&self, track: TrackId) -> String {
        let publisher = self
            .router
            .track_transport(track)
            .and_then(|t| self.by_transport.get(&t))
            .and_then(|p| self.peers.get(p));
        publisher
            .and_then(|p| p.role.publisher())
            .and_then(|p| p.format_of(track))
            .unwrap_or_default()
            .to_owned()
    }

    /// A new layer choice for a viewer's video (PATCH on its resource).
    pub fn set_target(&mut self, id: PeerId, target: Layer) -> Result<(), CoreError> {
        let viewer = self
            .peers
            .get_mut(&id)
            .ok_or(CoreError::UnknownPeer)?
            .viewer_mut()
            .ok_or(CoreError::NotAViewer)?;
        viewer.target = target;
        let Some(media) = &viewer.video else {
            return Ok(());
        };
        let Some(down_track) = media.down_track else {
            return Ok(());
        };
        let limits = viewer.limits(
            self.router
                .down_track_info(down_track)
                .and_then(|d| self.router.receiver_config(d.track))
                .map_or(rtp_ext::codec::Codec::Vp8, |c| c.codec),
            media.dd_ext_id,
        );
        self.router
            .set_limits(down_track, limits)
            .map_err(|_: RouterError| CoreError::UnknownPeer)
    }

    /// The SRTP context the session's DTLS handshake produced: the session is connected, and
    /// a viewer is subscribed to its room.
    pub fn set_srtp(&mut self, id: PeerId, srtp: Box<dyn SrtpContext>) {
        let Some(peer) = self.peers.get_mut(&id) else {
            return;
        };
        if peer.srtp.replace(srtp).is_some() {
            return;
        }
        self.connecting -= 1;
        self.admission.connected();
        if let (Role::Viewer(_), Some(room)) = (&peer.role, self.rooms.get_mut(&peer.room)) {
            room.waiting.insert(id);
            let room = peer.room.clone();
            self.serve_waiting(&room);
        } else if let Role::Participant(_) = &peer.role {
            self.connect_sections(id);
        }
    }

    fn arm_sweep(&mut self, now: Instant) {
        self.next_sweep.get_or_insert(now + SWEEP_INTERVAL);
        self.next_speakers
            .get_or_insert(now + speakers::SPEAKER_INTERVAL);
    }

    /// The engine's timers, and the sweep of silent sessions once a second.
    pub fn handle_timeout(&mut self, now: Instant) {
        self.handle_dtls_timeouts(now);
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
            .filter(|(_, p)| now.saturating_duration_since(p.last_seen) > self.peer_timeout)
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
                            track: track.0,
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
                    let moved = before.is_none_or(|b| b.abs_diff(bitrate_bps) * 20 >= b);
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
        [self.router.poll_timeout(), self.next_sweep, speakers, dtls]
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
            node: self.counters,
            rtp_in: router.rtp_in,
            bad_rtcp: router.bad_rtcp,
            nacks_sent: router.nacks_sent,
            keyframe_requests_sent: router.keyframe_requests_sent,
            rembs_sent: router.rembs_sent,
            probe_clusters: router.probe_clusters,
            viewer_stats: self.all_viewer_stats(),
            ..Snapshot::default()
        };
        for peer in self.peers.values() {
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

impl Peer {
    fn viewer_mut(&mut self) -> Option<&mut Viewer> {
        match &mut self.role {
            Role::Viewer(viewer) => Some(viewer),
            Role::Publisher(_) | Role::Participant(_) => None,
        }
    }
}
