//! The node's media core: the engine plus what a UDP port adds to it (ICE-lite, SRTP, rooms
//! of sessions). Sans-IO like the engine: datagrams and time come in, datagrams are polled
//! out. Only the DTLS handshake runs elsewhere (it is the `dtls` crate's async state
//! machine): the core hands DTLS datagrams back to the caller and takes the SRTP context
//! the handshake yields.

use std::collections::{HashMap, VecDeque};
use std::net::SocketAddr;
use std::time::{Duration, Instant};

use bytes::Bytes;
use rtp_ext::rtp::RtpPacket;
use selector::Layer;

use super::ice::BindingRequest;
use super::metrics::{DropReason, NodeCounters, Snapshot};
use super::peer::{IceCredentials, Peer, PeerId, Publisher, Role, Viewer};
use super::srtp::SrtpContext;
use crate::capture::{classify, PayloadKind};
use crate::engine::{
    DownTrackConfig, DownTrackId, Output, Router, RouterConfig, RouterError, RtcpTarget, TrackId,
};

/// Largest datagram the node writes: an MTU-sized packet plus the SRTP tag.
pub const MAX_DATAGRAM: usize = 1500;

/// How often sessions are checked for silence.
const SWEEP_INTERVAL: Duration = Duration::from_secs(1);

/// What to do with a datagram the core did not consume itself.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Inbound {
    /// Consumed (or counted and dropped).
    Done,
    /// A DTLS record for this session's handshake.
    Dtls(PeerId),
}

/// Misuse of the core's API by signaling.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum CoreError {
    #[error("no such session")]
    UnknownPeer,
    #[error("the session is not a viewer")]
    NotAViewer,
    #[error("an SSRC of the offer is already published")]
    SsrcInUse,
}

#[derive(Debug, Default)]
struct Room {
    /// Sessions in the order they joined: viewers watch the first publisher of each kind.
    peers: Vec<PeerId>,
}

#[derive(Debug)]
pub struct NodeCore {
    router: Router,
    peers: HashMap<PeerId, Peer>,
    rooms: HashMap<String, Room>,
    by_ufrag: HashMap<String, PeerId>,
    by_addr: HashMap<SocketAddr, PeerId>,
    track_owner: HashMap<TrackId, PeerId>,
    down_track_owner: HashMap<DownTrackId, PeerId>,
    stun_out: VecDeque<(SocketAddr, Vec<u8>)>,
    removed: VecDeque<PeerId>,
    counters: NodeCounters,
    /// A decrypted inbound packet, or an outbound one before encryption.
    plain: Vec<u8>,
    next_peer: u64,
    peer_timeout: Duration,
    next_sweep: Option<Instant>,
}

impl NodeCore {
    pub fn new(config: RouterConfig, peer_timeout: Duration) -> Self {
        Self {
            router: Router::new(config),
            peers: HashMap::new(),
            rooms: HashMap::new(),
            by_ufrag: HashMap::new(),
            by_addr: HashMap::new(),
            track_owner: HashMap::new(),
            down_track_owner: HashMap::new(),
            stun_out: VecDeque::new(),
            removed: VecDeque::new(),
            counters: NodeCounters::default(),
            plain: Vec::with_capacity(MAX_DATAGRAM),
            next_peer: 1,
            peer_timeout,
            next_sweep: None,
        }
    }

    pub fn router(&self) -> &Router {
        &self.router
    }

    pub fn counters(&self) -> &NodeCounters {
        &self.counters
    }

    pub fn peer(&self, id: PeerId) -> Option<&Peer> {
        self.peers.get(&id)
    }

    /// Rooms with at least one session.
    pub fn room_count(&self) -> usize {
        self.rooms.len()
    }

    fn add_peer(&mut self, now: Instant, room: &str, ice: IceCredentials, role: Role) -> PeerId {
        let id = PeerId(self.next_peer);
        self.next_peer += 1;
        self.by_ufrag.insert(ice.local_ufrag.clone(), id);
        self.rooms
            .entry(room.to_owned())
            .or_default()
            .peers
            .push(id);
        let peer = Peer {
            room: room.to_owned(),
            ice,
            addr: None,
            srtp: None,
            last_seen: now,
            role,
        };
        self.peers.insert(id, peer);
        id
    }

    /// A WHIP session: its tracks are published at once (simulcast streams get their SSRCs
    /// when their first packets name their rids) and the room's viewers subscribed.
    pub fn add_publisher(
        &mut self,
        now: Instant,
        room: &str,
        ice: IceCredentials,
        mut publisher: Publisher,
    ) -> Result<PeerId, CoreError> {
        let mut published = Vec::new();
        for track in &mut publisher.tracks {
            match self.router.publish(track.config.clone()) {
                Ok(id) => {
                    track.id = Some(id);
                    published.push(id);
                }
                Err(_) => {
                    for id in published {
                        // Just published: known to the router.
                        let _ = self.router.unpublish(id);
                    }
                    return Err(CoreError::SsrcInUse);
                }
            }
        }
        let id = self.add_peer(now, room, ice, Role::Publisher(publisher));
        for track in published {
            self.track_owner.insert(track, id);
        }
        self.connect_room(room);
        Ok(id)
    }

    /// A WHEP session, subscribed to what its room publishes now or later.
    pub fn add_viewer(
        &mut self,
        now: Instant,
        room: &str,
        ice: IceCredentials,
        viewer: Viewer,
    ) -> PeerId {
        let id = self.add_peer(now, room, ice, Role::Viewer(viewer));
        self.connect_room(room);
        id
    }

    /// Ends a session (DELETE, or silence).
    pub fn remove_peer(&mut self, id: PeerId) -> Result<(), CoreError> {
        let peer = self.peers.remove(&id).ok_or(CoreError::UnknownPeer)?;
        self.by_ufrag.remove(&peer.ice.local_ufrag);
        if let Some(addr) = peer.addr {
            self.by_addr.remove(&addr);
        }
        match &peer.role {
            Role::Publisher(publisher) => {
                for track in publisher.tracks.iter().filter_map(|t| t.id) {
                    self.unpublish(track);
                }
            }
            Role::Viewer(viewer) => {
                for media in [&viewer.video, &viewer.audio].into_iter().flatten() {
                    if let Some(down_track) = media.down_track {
                        self.down_track_owner.remove(&down_track);
                        let _ = self.router.unsubscribe(down_track);
                    }
                }
            }
        }
        if let Some(room) = self.rooms.get_mut(&peer.room) {
            room.peers.retain(|&p| p != id);
            if room.peers.is_empty() {
                self.rooms.remove(&peer.room);
            }
        }
        self.removed.push_back(id);
        self.connect_room(&peer.room);
        Ok(())
    }

    /// Unpublishes a track; its subscriptions go with it, and their viewers are free for the
    /// room's next publisher.
    fn unpublish(&mut self, track: TrackId) {
        self.track_owner.remove(&track);
        let _ = self.router.unpublish(track);
        let gone: Vec<DownTrackId> = self
            .down_track_owner
            .keys()
            .copied()
            .filter(|&d| self.router.down_track(d).is_none())
            .collect();
        for down_track in gone {
            if let Some(viewer) = self
                .down_track_owner
                .remove(&down_track)
                .and_then(|owner| self.peers.get_mut(&owner))
                .and_then(|peer| peer.viewer_mut())
            {
                for media in [&mut viewer.video, &mut viewer.audio].into_iter().flatten() {
                    if media.down_track == Some(down_track) {
                        media.down_track = None;
                    }
                }
            }
        }
    }

    /// Subscribes every viewer of the room lacking a track of some kind to the room's first
    /// published track of that kind in a codec the viewer accepts.
    fn connect_room(&mut self, room: &str) {
        let Some(members) = self.rooms.get(room).map(|r| r.peers.clone()) else {
            return;
        };
        let tracks: Vec<TrackId> = members
            .iter()
            .filter_map(|p| match &self.peers.get(p)?.role {
                Role::Publisher(publisher) => Some(publisher.tracks.iter().filter_map(|t| t.id)),
                Role::Viewer(_) => None,
            })
            .flatten()
            .collect();
        for viewer in members {
            for &track in &tracks {
                self.connect(viewer, track);
            }
        }
    }

    fn connect(&mut self, viewer_id: PeerId, track: TrackId) {
        let Some(config) = self.router.receiver_config(track) else {
            return;
        };
        let codec = config.codec;
        let format = self.track_format(track);
        let Some(viewer) = self.peers.get_mut(&viewer_id).and_then(Peer::viewer_mut) else {
            return;
        };
        let target = viewer.target;
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
            ..DownTrackConfig::new(media.ssrc, accepted.payload_type)
        };
        let dd = media.dd_ext_id;
        let limits = Viewer {
            video: None,
            audio: None,
            target,
        }
        .limits(codec, dd);
        if let Ok(down_track) = self.router.subscribe(track, down, limits) {
            media.down_track = Some(down_track);
            self.down_track_owner.insert(down_track, viewer_id);
        }
    }

    /// The format parameters the track's publisher announced it with.
    fn track_format(&self, track: TrackId) -> String {
        let publisher = self.track_owner.get(&track).and_then(|p| self.peers.get(p));
        match publisher.map(|p| &p.role) {
            Some(Role::Publisher(publisher)) => publisher.format_of(track).unwrap_or_default(),
            _ => "",
        }
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
                .down_track(down_track)
                .and_then(|d| self.router.receiver_config(d.track()))
                .map_or(rtp_ext::codec::Codec::Vp8, |c| c.codec),
            media.dd_ext_id,
        );
        self.router
            .set_limits(down_track, limits)
            .map_err(|_: RouterError| CoreError::UnknownPeer)
    }

    /// A datagram the socket did not take (its send buffer was full).
    pub fn count_send_failure(&mut self) {
        self.counters.drop(DropReason::SendFailed);
    }

    /// The SRTP context the session's DTLS handshake produced.
    pub fn set_srtp(&mut self, id: PeerId, srtp: Box<dyn SrtpContext>) {
        if let Some(peer) = self.peers.get_mut(&id) {
            peer.srtp = Some(srtp);
        }
    }

    /// One datagram from the UDP socket.
    pub fn handle_datagram(&mut self, now: Instant, from: SocketAddr, data: &[u8]) -> Inbound {
        self.counters.datagrams_in += 1;
        self.counters.bytes_in += data.len() as u64;
        let kind = classify(data);
        if kind == PayloadKind::Stun {
            self.handle_stun(now, from, data);
            return Inbound::Done;
        }
        let Some(&id) = self.by_addr.get(&from) else {
            self.counters.drop(DropReason::UnknownSource);
            return Inbound::Done;
        };
        match kind {
            PayloadKind::Dtls => Inbound::Dtls(id),
            PayloadKind::Rtp => {
                self.handle_srtp(now, id, data);
                Inbound::Done
            }
            PayloadKind::Rtcp => {
                self.handle_srtcp(now, id, data);
                Inbound::Done
            }
            _ => {
                self.counters.drop(DropReason::NotWebRtc);
                Inbound::Done
            }
        }
    }

    fn handle_stun(&mut self, now: Instant, from: SocketAddr, data: &[u8]) {
        let answered = BindingRequest::parse(data).and_then(|request| {
            let id = *self
                .by_ufrag
                .get(&request.local_ufrag)
                .ok_or(super::ice::IceError::UnknownUfrag)?;
            let peer = self
                .peers
                .get(&id)
                .ok_or(super::ice::IceError::UnknownUfrag)?;
            let nominated = request.use_candidate;
            let response = request.answer(&peer.ice.local_pwd, from)?;
            Ok((id, nominated, response))
        });
        let Ok((id, nominated, response)) = answered else {
            self.counters.drop(DropReason::BadStun);
            return;
        };
        self.stun_out.push_back((from, response));
        let Some(peer) = self.peers.get_mut(&id) else {
            return;
        };
        peer.last_seen = now;
        // Latch the first address that proves it knows our password, and move to the one the
        // browser nominates.
        if peer.addr.is_none() || (nominated && peer.addr != Some(from)) {
            if let Some(old) = peer.addr.replace(from) {
                self.by_addr.remove(&old);
            }
            self.by_addr.insert(from, id);
        }
    }

    fn handle_srtp(&mut self, now: Instant, id: PeerId, data: &[u8]) {
        if !self.unprotect(id, data, false) {
            return;
        }
        let Some(peer) = self.peers.get_mut(&id) else {
            return;
        };
        let Role::Publisher(publisher) = &mut peer.role else {
            self.counters.drop(DropReason::NotAPublisher);
            return;
        };
        if publisher.has_unbound() {
            if let Ok(packet) = RtpPacket::parse(&self.plain) {
                let known = self.router.ssrc_track(packet.fields().ssrc).is_some();
                if let (false, Some(binding)) = (known, publisher.bind(&packet)) {
                    let bound =
                        self.router
                            .bind_stream(binding.track, binding.index, binding.ssrcs);
                    tracing::debug!(peer = %id, ?binding, ?bound, "stream bound from its packets");
                }
            }
        }
        let packet = Bytes::copy_from_slice(&self.plain);
        if self.router.handle_rtp(now, packet).is_err() {
            self.counters.drop(DropReason::RtpRejected);
        }
    }

    fn handle_srtcp(&mut self, now: Instant, id: PeerId, data: &[u8]) {
        if !self.unprotect(id, data, true) {
            return;
        }
        let Some(peer) = self.peers.get(&id) else {
            return;
        };
        match &peer.role {
            Role::Publisher(publisher) => {
                for track in publisher.tracks.iter().filter_map(|t| t.id) {
                    let _ = self.router.handle_publisher_rtcp(now, track, &self.plain);
                }
            }
            Role::Viewer(viewer) => {
                let down_tracks = [&viewer.video, &viewer.audio]
                    .into_iter()
                    .flatten()
                    .filter_map(|m| m.down_track);
                for down_track in down_tracks {
                    let _ = self
                        .router
                        .handle_subscriber_rtcp(now, down_track, &self.plain);
                }
            }
        }
    }

    /// Decrypts into `plain`; false (counted) when the session has no keys yet or the packet
    /// fails authentication or replay protection.
    fn unprotect(&mut self, id: PeerId, data: &[u8], rtcp: bool) -> bool {
        let Some(srtp) = self.peers.get_mut(&id).and_then(|p| p.srtp.as_mut()) else {
            self.counters.drop(DropReason::NoKeys);
            return false;
        };
        let result = if rtcp {
            srtp.unprotect_rtcp(data, &mut self.plain)
        } else {
            srtp.unprotect_rtp(data, &mut self.plain)
        };
        if result.is_err() {
            self.counters.drop(DropReason::SrtpRejected);
        }
        result.is_ok()
    }

    pub fn handle_timeout(&mut self, now: Instant) {
        self.router.handle_timeout(now);
        while self.router.poll_event().is_some() {}
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

    pub fn poll_timeout(&self) -> Option<Instant> {
        [self.router.poll_timeout(), self.next_sweep]
            .into_iter()
            .flatten()
            .min()
    }

    /// Sessions removed since the last call (their DTLS state can go).
    pub fn poll_removed(&mut self) -> Option<PeerId> {
        self.removed.pop_front()
    }

    /// The next datagram to send, written into `out`: STUN answers, then RTCP, then media.
    pub fn poll_datagram(&mut self, out: &mut Vec<u8>) -> Option<SocketAddr> {
        if let Some((to, response)) = self.stun_out.pop_front() {
            out.clear();
            out.extend_from_slice(&response);
            return Some(to);
        }
        self.poll_rtcp(out).or_else(|| self.poll_media(out))
    }

    fn poll_rtcp(&mut self, out: &mut Vec<u8>) -> Option<SocketAddr> {
        let mut buf = [0u8; MAX_DATAGRAM];
        while let Some(rtcp) = self.router.poll_rtcp(&mut buf) {
            let owner = match rtcp.to {
                RtcpTarget::Publisher(track) => self.track_owner.get(&track),
                RtcpTarget::Subscriber(down_track) => self.down_track_owner.get(&down_track),
            };
            let Some(&id) = owner else { continue };
            if let Some(to) = self.protect(id, &buf[..rtcp.len], true, out) {
                return Some(to);
            }
        }
        None
    }

    fn poll_media(&mut self, out: &mut Vec<u8>) -> Option<SocketAddr> {
        let mut header = [0u8; MAX_DATAGRAM];
        while let Some(Output {
            down_track,
            transmit,
        }) = self.router.poll_transmit(&mut header)
        {
            let Some(&id) = self.down_track_owner.get(&down_track) else {
                continue;
            };
            let mut plain = std::mem::take(&mut self.plain);
            plain.clear();
            plain.extend_from_slice(&header[..transmit.len]);
            plain.extend_from_slice(&transmit.payload);
            let sent = self.protect(id, &plain, false, out);
            self.plain = plain;
            if let Some(to) = sent {
                self.counters.rtp_out += 1;
                return Some(to);
            }
        }
        None
    }

    /// Encrypts for a connected session; None (counted) while it has no address or keys.
    fn protect(
        &mut self,
        id: PeerId,
        packet: &[u8],
        rtcp: bool,
        out: &mut Vec<u8>,
    ) -> Option<SocketAddr> {
        let peer = self.peers.get_mut(&id)?;
        let (Some(to), Some(srtp)) = (peer.addr, peer.srtp.as_mut()) else {
            self.counters.drop(DropReason::NotConnected);
            return None;
        };
        let result = if rtcp {
            srtp.protect_rtcp(packet, out)
        } else {
            srtp.protect_rtp(packet, out)
        };
        match result {
            Ok(()) => {
                self.counters.bytes_out += out.len() as u64;
                Some(to)
            }
            Err(_) => {
                self.counters.drop(DropReason::SrtpRejected);
                None
            }
        }
    }

    /// Sessions, subscriptions and counters of the node and the engine, for `/metrics`.
    pub fn snapshot(&self) -> Snapshot {
        let router = self.router.counters();
        let mut snapshot = Snapshot {
            rooms: self.rooms.len(),
            node: self.counters,
            rtp_in: router.rtp_in,
            engine_dropped_in: router.dropped_in,
            bad_rtcp: router.bad_rtcp,
            nacks_sent: router.nacks_sent,
            keyframe_requests_sent: router.keyframe_requests_sent,
            ..Snapshot::default()
        };
        for peer in self.peers.values() {
            match &peer.role {
                Role::Publisher(p) => {
                    snapshot.publishers += 1;
                    snapshot.tracks += p.tracks.len();
                }
                Role::Viewer(_) => snapshot.viewers += 1,
            }
        }
        snapshot.subscriptions = self.down_track_owner.len();
        for &down_track in self.down_track_owner.keys() {
            if let Some(c) = self.router.down_track_counters(down_track) {
                snapshot.retransmissions += c.retransmitted;
            }
        }
        for &track in self.track_owner.keys() {
            if let Some(k) = self.router.keyframe_counters(track) {
                snapshot.keyframes_asked += k.asked;
            }
        }
        snapshot
    }
}

impl Peer {
    fn viewer_mut(&mut self) -> Option<&mut Viewer> {
        match &mut self.role {
            Role::Viewer(viewer) => Some(viewer),
            Role::Publisher(_) => None,
        }
    }
}
