//! The media relay between nodes of a cluster: a publisher's tracks sent once from the node
//! that has the publisher (the *origin*) to a node whose sessions receive them (the *edge*),
//! over one SRTP link between the two nodes' media ports.
//!
//! On the edge the relayed publisher is a publishing session like any other (a *relay-in*):
//! its tracks are published in its engine with the origin's SSRCs, payload types and
//! extension ids, so the edge's receivers, selectors and allocation work on the packets as
//! the origin sent them, and its NACKs, PLIs and receiver reports go back on the link. On the
//! origin a *relay-out* takes every packet of the publisher that the engine took, unchanged
//! (every layer, the original sequence numbers and Dependency Descriptor), and the
//! publisher's RTCP (its sender reports) as it came, and answers the
//! link's NACKs from the packets it sent and its PLIs and FIRs through the track's keyframe
//! throttle. Each end sends an empty receiver report every [`KEEPALIVE`] and ends the relay
//! when nothing authenticated came for [`LINK_TIMEOUT`]; the edge ends it with a BYE once the
//! room has had nobody to receive it for [`LINGER`], the origin when its publisher leaves.
//!
//! One relay per pair of nodes at a time: both ends know the link by the other's address.

use std::collections::{HashMap, VecDeque};
use std::time::{Duration, Instant};

use bytes::Bytes;

use super::{CoreError, NodeCore};
use crate::capture::{classify, PayloadKind};
use crate::engine::rtcp::{parse_compound, RtcpFeedback};
use crate::engine::{StreamIds, TransportId};
use crate::node::metrics::{DropReason, RelayFigures};
use crate::node::peer::{IceCredentials, Join, PeerId, PublishedTrack, Publisher};
use crate::node::remote::Remote;
use crate::node::sdp::{random_ice_credentials, RoomCodec};
use crate::node::srtp::{SrtpContext, MAX_OVERHEAD};

/// How often each end of a link sends a keepalive.
pub const KEEPALIVE: Duration = Duration::from_millis(500);
/// A link from which nothing authenticated came for this long is lost; the links are looked at
/// every 250 ms, so a loss is noticed within 2 s.
pub const LINK_TIMEOUT: Duration = Duration::from_millis(1500);
/// How long an edge keeps a relay after its room's last receiving session left: a viewer
/// that reloads finds it still there.
pub const LINGER: Duration = Duration::from_secs(3);
/// How often the links are looked at.
const TICK: Duration = Duration::from_millis(250);
/// Packets a relay-out keeps to answer its link's NACKs: a second of a high-rate stream.
const RESEND_RING: usize = 1024;
/// The SSRC a link's own RTCP (keepalives, BYE) is sent under.
const LINK_SSRC: u32 = 0x5354_4c4b;
/// RTCP packet types (RFC 3550 section 12.1).
const RTCP_RR: u8 = 201;
const RTCP_BYE: u8 = 203;

/// What an origin answers for a relay: the publisher's tracks as the edge publishes them.
#[derive(Debug, Clone)]
pub struct RelayOffer {
    /// The name the publisher goes by in its room, for viewers that name whom they watch.
    pub name: Option<String>,
    /// Its tracks, with the SSRCs the origin bound and without transport-wide CC or REMB
    /// (the edge's estimate of the link is not the publisher's to hear).
    pub tracks: Vec<PublishedTrack>,
    /// What its answer accepted: the edge's viewers negotiate against it.
    pub codecs: Vec<RoomCodec>,
}

/// What the relays did, for `/metrics`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct RelayCounters {
    /// Relays started toward another node (this node the origin).
    pub started_out: u64,
    /// Relays started from another node (this node the edge).
    pub started_in: u64,
    /// Relays an edge ended after [`LINGER`] without a receiving session.
    pub ended_idle: u64,
    /// Relays ended because their link went silent for [`LINK_TIMEOUT`].
    pub links_lost: u64,
    /// Packets sent on links (media and NACKed packets again).
    pub packets_out: u64,
    /// Packets sent again for a link's NACK.
    pub resent: u64,
    /// PLIs and FIRs from links passed to a publisher's keyframe throttle.
    pub keyframes_asked: u64,
}

/// The origin's end of a relay.
struct RelayOut {
    publisher: PeerId,
    transport: TransportId,
    srtp: Box<dyn SrtpContext>,
    heard: Instant,
    next_keepalive: Instant,
    /// The last packets sent, to answer NACKs with the same bytes: protected again under the
    /// same SRTP index, they encrypt to the same datagram, so no keystream is used twice on
    /// different bytes.
    sent: VecDeque<Bytes>,
    /// The last sender reports relayed (their compact NTP time) and when: the edge's report
    /// blocks name one, and the time since, less the delay they state, is the round trip.
    reports: VecDeque<(u32, Instant)>,
    /// What the edge's last report said of the link.
    quality: LinkQuality,
}

/// A link as the edge's receiver reports show it.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct LinkQuality {
    /// The fraction of packets lost over the last report interval, in 256ths (RFC 3550
    /// section 6.4.1), the most of any relayed stream.
    pub fraction_lost: Option<u8>,
    /// The round trip from a relayed sender report to the edge's report of it.
    pub round_trip: Option<Duration>,
}

/// Sender reports kept per link to match the edge's reports against.
const REPORTS_KEPT: usize = 8;

impl std::fmt::Debug for RelayOut {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RelayOut")
            .field("publisher", &self.publisher)
            .field("heard", &self.heard)
            .finish_non_exhaustive()
    }
}

/// The edge's end of a relay: its publishing session is in the core's tables.
#[derive(Debug)]
struct RelayIn {
    from: Remote,
    next_keepalive: Instant,
    /// Since when its room has had nobody to receive it.
    idle_since: Option<Instant>,
}

/// The core's relays, both ends.
#[derive(Debug, Default)]
pub(super) struct Relays {
    outs: HashMap<Remote, RelayOut>,
    ins: HashMap<PeerId, RelayIn>,
    /// Packets for links, to be protected as they are polled.
    queue: VecDeque<(Remote, Bytes)>,
    next_tick: Option<Instant>,
    counters: RelayCounters,
}

impl Relays {
    pub fn entries(&self) -> usize {
        self.outs.len() + self.ins.len() + self.queue.len()
    }

    pub fn poll_timeout(&self) -> Option<Instant> {
        self.next_tick
            .filter(|_| !self.outs.is_empty() || !self.ins.is_empty())
    }

    /// Whether packets of the publisher on `transport` go out on a link.
    fn relays_from(&self, transport: TransportId) -> bool {
        self.outs.values().any(|o| o.transport == transport)
    }
}

impl NodeCore {
    /// What the relays did.
    pub fn relay_counters(&self) -> RelayCounters {
        self.media_relays.counters
    }

    /// Relays this core is the origin of, and the edge of.
    pub fn relay_count(&self) -> (usize, usize) {
        (self.media_relays.outs.len(), self.media_relays.ins.len())
    }

    pub(super) fn relay_figures(&self) -> RelayFigures {
        RelayFigures {
            out: self.media_relays.outs.len(),
            into: self.media_relays.ins.len(),
            counters: self.media_relays.counters,
            links: self
                .media_relays
                .outs
                .iter()
                .map(|(to, r)| (to.addr(), r.quality))
                .collect(),
        }
    }

    /// Starts relaying the publisher a viewer of `room` would watch (the one named `source`,
    /// or the room's first that publishes) to the node at `to`, protected by `srtp`: what
    /// the edge publishes it as. A relay to `to` of the same publisher starts over (the
    /// edge lost the link); of another, it is refused.
    pub fn relay_out(
        &mut self,
        now: Instant,
        room: &str,
        source: Option<&str>,
        to: Remote,
        srtp: Box<dyn SrtpContext>,
    ) -> Result<RelayOffer, CoreError> {
        let publisher = self.relayed_publisher(room, source)?;
        if self
            .media_relays
            .outs
            .get(&to)
            .is_some_and(|o| o.publisher != publisher)
        {
            return Err(CoreError::RelayBusy);
        }
        let peer = self.peers.get(&publisher).ok_or(CoreError::UnknownPeer)?;
        let offer = self.offer_of(peer);
        let relay = RelayOut {
            publisher,
            transport: peer.transport,
            srtp,
            heard: now,
            next_keepalive: now,
            sent: VecDeque::with_capacity(RESEND_RING),
            reports: VecDeque::with_capacity(REPORTS_KEPT),
            quality: LinkQuality::default(),
        };
        // With several workers, the edge's datagrams come to this one.
        self.bind(to);
        self.media_relays.outs.insert(to, relay);
        self.media_relays.counters.started_out += 1;
        self.arm_relay_tick(now);
        tracing::info!(room, ?to, "relaying a publisher to another node");
        Ok(offer)
    }

    /// Whether a viewer of `room` watching `source` (or the room's first publisher) would find
    /// nobody to watch here, relayed or not: an edge then asks the room's home for a relay.
    pub fn needs_relay(&self, room: &str, source: Option<&str>) -> bool {
        let Some(members) = self.rooms.get(room) else {
            return true;
        };
        match source {
            Some(name) => !members.names.contains_key(name),
            None => !members.publishers.iter().any(|id| {
                self.peers
                    .get(id)
                    .and_then(|p| p.role.publisher())
                    .is_some_and(|p| !p.tracks.is_empty())
            }),
        }
    }

    /// The publisher named `source` in `room`, or the room's first with tracks; never one
    /// relayed in from elsewhere (relays do not chain).
    fn relayed_publisher(&self, room: &str, source: Option<&str>) -> Result<PeerId, CoreError> {
        let members = self.rooms.get(room).ok_or(CoreError::NoSuchParticipant)?;
        let local = |id: &&PeerId| !self.media_relays.ins.contains_key(id);
        let found = match source {
            Some(name) => members.names.get(name).filter(local),
            None => members.publishers.iter().filter(local).find(|id| {
                self.peers
                    .get(id)
                    .and_then(|p| p.role.publisher())
                    .is_some_and(|p| !p.tracks.is_empty())
            }),
        };
        found.copied().ok_or(CoreError::NoSuchParticipant)
    }

    /// A publisher's tracks as the engine has them now (simulcast streams with the SSRCs
    /// their packets bound), for an edge to publish.
    fn offer_of(&self, peer: &crate::node::peer::Peer) -> RelayOffer {
        let publisher = peer.role.publisher();
        let tracks = publisher.iter().flat_map(|p| p.tracks.iter());
        let tracks = tracks
            .filter_map(|track| {
                let mut config = self.router.receiver_config(track.id?)?.clone();
                config.transport_cc = None;
                config.remb = None;
                // Senders stop naming their streams once reports come back: an edge that
                // joins later learns them from here.
                if config.streams.iter().all(|s| s.ssrc != 0) {
                    config.stream_ids = StreamIds::Signaled;
                }
                Some(PublishedTrack {
                    config,
                    id: None,
                    ..track.clone()
                })
            })
            .collect();
        RelayOffer {
            name: peer.identity.as_ref().map(|i| i.name.clone()),
            tracks,
            codecs: publisher.map(|p| p.codecs.clone()).unwrap_or_default(),
        }
    }

    /// Publishes what the origin at `from` relays as `offer` in `room`, its link protected
    /// by `srtp`: the room's viewers that wait for a publisher get it at once. One relay
    /// from a node at a time.
    pub fn relay_in(
        &mut self,
        now: Instant,
        room: &str,
        offer: RelayOffer,
        from: Remote,
        srtp: Box<dyn SrtpContext>,
    ) -> Result<PeerId, CoreError> {
        if self.media_relays.ins.values().any(|r| r.from == from)
            || self.by_addr.contains_key(&from)
        {
            return Err(CoreError::RelayBusy);
        }
        let (local_ufrag, local_pwd) = random_ice_credentials();
        let join = Join {
            name: offer.name,
            ..Join::new(
                room,
                IceCredentials {
                    local_ufrag,
                    local_pwd,
                },
            )
        };
        let publisher = Publisher {
            tracks: offer.tracks,
            codecs: offer.codecs,
        };
        let id = self.add_publisher(now, join, publisher)?;
        if let Some(peer) = self.peers.get_mut(&id) {
            peer.addr = Some(from);
        }
        self.by_addr.insert(from, id);
        self.bind(from);
        self.set_srtp(id, srtp);
        let relay = RelayIn {
            from,
            next_keepalive: now,
            idle_since: None,
        };
        self.media_relays.ins.insert(id, relay);
        self.media_relays.counters.started_in += 1;
        self.arm_relay_tick(now);
        tracing::info!(room, ?from, peer = %id, "relaying a publisher from another node");
        Ok(id)
    }

    fn arm_relay_tick(&mut self, now: Instant) {
        self.media_relays.next_tick.get_or_insert(now + TICK);
    }

    /// Whether `from` is the edge of a relay this core sends: its datagrams are the link's.
    pub(super) fn is_relay_edge(&self, from: Remote) -> bool {
        !self.media_relays.outs.is_empty() && self.media_relays.outs.contains_key(&from)
    }

    /// Whether session `id` is a relay-in.
    pub(super) fn is_relay_in(&self, id: PeerId) -> bool {
        !self.media_relays.ins.is_empty() && self.media_relays.ins.contains_key(&id)
    }

    /// A packet the engine took from the publisher on `transport` goes out on its links.
    pub(super) fn relay_packet(&mut self, transport: TransportId, packet: &Bytes) {
        for (&to, relay) in self.media_relays.outs.iter_mut() {
            if relay.transport != transport {
                continue;
            }
            if relay.sent.len() == RESEND_RING {
                relay.sent.pop_front();
            }
            relay.sent.push_back(packet.clone());
            self.media_relays.queue.push_back((to, packet.clone()));
        }
    }

    /// The publisher's RTCP (its sender reports, which the edge's receivers align simulcast
    /// streams and report by) goes out on its links as it came, protected at once: one
    /// compound packet a second or so.
    pub(super) fn relay_rtcp(&mut self, now: Instant, transport: TransportId, compound: &[u8]) {
        let mut sent_report = None;
        let _ = parse_compound(compound, |item| {
            if let RtcpFeedback::SenderReport(report) = item {
                sent_report = Some((report.ntp_time >> 16) as u32);
            }
        });
        let mut buf = Vec::with_capacity(compound.len() + MAX_OVERHEAD);
        for (&to, relay) in self.media_relays.outs.iter_mut() {
            if relay.transport != transport {
                continue;
            }
            if let Some(ntp) = sent_report {
                if relay.reports.len() == REPORTS_KEPT {
                    relay.reports.pop_front();
                }
                relay.reports.push_back((ntp, now));
            }
            buf.clear();
            buf.extend_from_slice(compound);
            buf.resize(compound.len() + MAX_OVERHEAD, 0);
            match relay.srtp.protect_rtcp(&mut buf, compound.len()) {
                Ok(len) => self.handshake_out.push_back((to, buf[..len].to_vec())),
                Err(_) => self.counters.drop(DropReason::SrtpRejected),
            }
        }
    }

    /// The decrypted packet to be relayed, when the publisher on `transport` has links.
    pub(super) fn wants_relay(&self, transport: TransportId) -> bool {
        !self.media_relays.outs.is_empty() && self.media_relays.relays_from(transport)
    }

    /// The next packet for a link, protected in `out`.
    pub(super) fn poll_relayed(&mut self, out: &mut [u8]) -> Option<(Remote, usize)> {
        while let Some((to, packet)) = self.media_relays.queue.pop_front() {
            let Some(relay) = self.media_relays.outs.get_mut(&to) else {
                continue;
            };
            let len = packet.len();
            let fits = len + MAX_OVERHEAD <= out.len();
            let Some(slot) = out.get_mut(..len).filter(|_| fits) else {
                self.counters.drop(DropReason::TooLong);
                continue;
            };
            slot.copy_from_slice(&packet);
            match relay.srtp.protect_rtp(out, len) {
                Ok(protected) => {
                    self.counters.bytes_out += protected as u64;
                    self.media_relays.counters.packets_out += 1;
                    return Some((to, protected));
                }
                Err(_) => self.counters.drop(DropReason::SrtpRejected),
            }
        }
        None
    }

    /// A datagram from a relay's edge: SRTCP (its NACKs, keyframe requests, keepalives, BYE)
    /// or nothing.
    pub(super) fn handle_from_edge(&mut self, now: Instant, from: Remote, data: &[u8]) {
        let Some(relay) = self.media_relays.outs.get_mut(&from) else {
            return;
        };
        if classify(data) != PayloadKind::Rtcp {
            self.counters.drop(DropReason::NotAPublisher);
            return;
        }
        self.plain.clear();
        self.plain.extend_from_slice(data);
        let Ok(len) = relay.srtp.unprotect_rtcp(&mut self.plain) else {
            self.counters.drop(DropReason::SrtpRejected);
            return;
        };
        relay.heard = now;
        let mut asks = Vec::new();
        let mut bye = false;
        let parsed = parse_compound(&self.plain[..len], |item| match item {
            RtcpFeedback::Pli(pli) => asks.push(Ask::Keyframe(pli.media_ssrc)),
            RtcpFeedback::Fir(fir) => {
                asks.extend(fir.entries.iter().map(|e| Ask::Keyframe(e.ssrc)));
            }
            RtcpFeedback::Nack(nack) => {
                let ssrc = nack.media_ssrc;
                asks.extend(nack.pairs.lost().map(|seq| Ask::Resend(ssrc, seq)));
            }
            RtcpFeedback::ReceiverReport(report) => {
                asks.extend(
                    report
                        .blocks
                        .iter()
                        .map(|b| Ask::Report(b.fraction_lost, b.last_sr, b.delay_since_last_sr)),
                );
            }
            RtcpFeedback::Other(other) if other.packet_type == RTCP_BYE => bye = true,
            _ => {}
        });
        if parsed.is_err() {
            self.counters.drop(DropReason::MalformedRtcp);
            return;
        }
        for ask in asks {
            self.answer_edge(now, from, ask);
        }
        if bye {
            tracing::info!(?from, "the edge ended its relay");
            self.end_relay_out(from);
        }
    }

    fn answer_edge(&mut self, now: Instant, from: Remote, ask: Ask) {
        let Some(relay) = self.media_relays.outs.get_mut(&from) else {
            return;
        };
        match ask {
            Ask::Report(fraction_lost, last_sr, delay) => {
                let quality = &mut relay.quality;
                quality.fraction_lost = Some(fraction_lost);
                let sent = relay.reports.iter().find(|(ntp, _)| *ntp == last_sr);
                if let Some(&(_, at)) = sent.filter(|_| last_sr != 0) {
                    // The delay is in 65536ths of a second.
                    let held = Duration::from_micros(u64::from(delay) * 1_000_000 / 65_536);
                    quality.round_trip = now.saturating_duration_since(at).checked_sub(held);
                }
            }
            Ask::Keyframe(ssrc) => {
                let Some(track) = self.router.ssrc_track(relay.transport, ssrc) else {
                    return;
                };
                if self.router.request_keyframe_of(now, track, ssrc).is_ok() {
                    self.media_relays.counters.keyframes_asked += 1;
                }
            }
            Ask::Resend(ssrc, seq) => {
                let sent = relay
                    .sent
                    .iter()
                    .rev()
                    .find(|p| rtp_id(p) == Some((ssrc, seq)));
                if let Some(packet) = sent.cloned() {
                    self.media_relays.counters.resent += 1;
                    self.media_relays.queue.push_back((from, packet));
                }
            }
        }
    }

    /// A datagram from the origin of relay-in `id`: its media into the engine, its RTCP too
    /// unless it is the BYE that ends the relay. Whatever authenticates keeps the link alive.
    pub(super) fn handle_from_origin(&mut self, now: Instant, id: PeerId, data: &[u8]) {
        let heard = match classify(data) {
            PayloadKind::Rtp => self.handle_srtp(now, id, data),
            PayloadKind::Rtcp => match self.handle_srtcp(now, id, data) {
                Some(len) if has_bye(&self.plain[..len]) => {
                    tracing::info!(peer = %id, "the origin ended its relay");
                    let _ = self.remove_peer(id);
                    return;
                }
                Some(_) => true,
                None => false,
            },
            _ => {
                self.counters.drop(DropReason::NotWebRtc);
                false
            }
        };
        if let (true, Some(peer)) = (heard, self.peers.get_mut(&id)) {
            peer.last_seen = now;
        }
    }

    /// A session left: a relay-in's state goes with it, and the relays of a publisher end
    /// with a BYE to their edges.
    pub(super) fn forget_relays(&mut self, id: PeerId) {
        self.media_relays.ins.remove(&id);
        let ended: Vec<Remote> = self
            .media_relays
            .outs
            .iter()
            .filter(|(_, r)| r.publisher == id)
            .map(|(&to, _)| to)
            .collect();
        for to in ended {
            self.send_link_rtcp(to, RTCP_BYE);
            self.end_relay_out(to);
        }
    }

    fn end_relay_out(&mut self, to: Remote) {
        if self.media_relays.outs.remove(&to).is_some() {
            self.unbind(to);
        }
    }

    /// The links' keepalives, lost links, and relays nobody receives any more.
    pub(super) fn handle_relay_timeouts(&mut self, now: Instant) {
        if self.media_relays.next_tick.is_none_or(|at| at > now) {
            return;
        }
        self.media_relays.next_tick = Some(now + TICK);
        let lost: Vec<Remote> = self
            .media_relays
            .outs
            .iter()
            .filter(|(_, r)| now.saturating_duration_since(r.heard) > LINK_TIMEOUT)
            .map(|(&to, _)| to)
            .collect();
        for to in lost {
            tracing::warn!(?to, "a relay's link went silent");
            self.end_relay_out(to);
            self.media_relays.counters.links_lost += 1;
        }
        let due: Vec<Remote> = self
            .media_relays
            .outs
            .iter_mut()
            .filter(|(_, r)| r.next_keepalive <= now)
            .map(|(&to, r)| {
                r.next_keepalive = now + KEEPALIVE;
                to
            })
            .collect();
        for to in due {
            self.send_link_rtcp(to, RTCP_RR);
        }
        let ins: Vec<PeerId> = self.media_relays.ins.keys().copied().collect();
        for id in ins {
            self.check_relay_in(now, id);
        }
    }

    fn check_relay_in(&mut self, now: Instant, id: PeerId) {
        let Some(peer) = self.peers.get(&id) else {
            return;
        };
        if now.saturating_duration_since(peer.last_seen) > LINK_TIMEOUT {
            tracing::warn!(peer = %id, "a relay's link went silent");
            self.media_relays.counters.links_lost += 1;
            let _ = self.remove_peer(id);
            return;
        }
        let wanted = self
            .rooms
            .get(&peer.room)
            .is_some_and(|r| !r.viewers.is_empty() || !r.participants.is_empty());
        let Some(relay) = self.media_relays.ins.get_mut(&id) else {
            return;
        };
        let from = relay.from;
        if wanted {
            relay.idle_since = None;
        } else if now.saturating_duration_since(*relay.idle_since.get_or_insert(now)) >= LINGER {
            tracing::info!(peer = %id, "nobody receives a relay any more");
            self.send_link_rtcp(from, RTCP_BYE);
            self.media_relays.counters.ended_idle += 1;
            let _ = self.remove_peer(id);
            return;
        }
        if relay.next_keepalive <= now {
            relay.next_keepalive = now + KEEPALIVE;
            self.send_link_rtcp(from, RTCP_RR);
        }
    }

    /// An RTCP packet of the link's own (an empty receiver report, a BYE) protected at once
    /// under the link's keys, sent with the handshakes.
    fn send_link_rtcp(&mut self, to: Remote, packet_type: u8) {
        let mut packet = vec![0; 8 + MAX_OVERHEAD];
        let count = u8::from(packet_type == RTCP_BYE);
        packet[..8].copy_from_slice(&link_rtcp(packet_type, count));
        let srtp = match self.media_relays.outs.get_mut(&to) {
            Some(relay) => Some(&mut relay.srtp),
            None => self
                .by_addr
                .get(&to)
                .and_then(|id| self.peers.get_mut(id))
                .and_then(|p| p.srtp.as_mut()),
        };
        match srtp.map(|s| s.protect_rtcp(&mut packet, 8)) {
            Some(Ok(len)) => {
                packet.truncate(len);
                self.handshake_out.push_back((to, packet));
            }
            _ => self.counters.drop(DropReason::SrtpRejected),
        }
    }
}

/// What an edge asked of the origin in one RTCP packet.
enum Ask {
    Keyframe(u32),
    /// A report block: fraction lost, last SR, delay since it.
    Report(u8, u32, u32),
    Resend(u32, u16),
}

/// An RTCP header with no body past the sender's SSRC: a receiver report without blocks, or
/// a BYE of that SSRC.
fn link_rtcp(packet_type: u8, count: u8) -> [u8; 8] {
    let ssrc = LINK_SSRC.to_be_bytes();
    [
        0x80 | count,
        packet_type,
        0,
        1,
        ssrc[0],
        ssrc[1],
        ssrc[2],
        ssrc[3],
    ]
}

/// An RTP packet's SSRC and sequence number.
fn rtp_id(packet: &[u8]) -> Option<(u32, u16)> {
    let seq = u16::from_be_bytes(packet.get(2..4)?.try_into().ok()?);
    let ssrc = u32::from_be_bytes(packet.get(8..12)?.try_into().ok()?);
    Some((ssrc, seq))
}

/// Whether a compound RTCP packet holds a BYE.
fn has_bye(compound: &[u8]) -> bool {
    let mut bye = false;
    let _ = parse_compound(compound, |item| {
        if let RtcpFeedback::Other(other) = item {
            bye |= other.packet_type == RTCP_BYE;
        }
    });
    bye
}
