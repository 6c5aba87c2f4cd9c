//! The media relay between nodes of a cluster: a publisher's tracks sent once from the node
//! that has the publisher (the *origin*) to a node whose sessions receive them (the *edge*),
//! over an SRTP link between the two nodes' workers that serve the room.
//!
//! A *link* is one per origin and edge worker (two nodes that relay each other's publishers
//! have two, one each way), between the two workers' relay sockets, which carry links alone
//! (the peer at a link's end is a [`Remote::Link`]): its keys, keepalives, loss detection and measures are the pair's. Any
//! number of *relays* (up to [`RELAYS_PER_LINK`]) share it, told apart by their SSRCs: a relay
//! carries one publisher, and no two relays of a link may share an SSRC.
//!
//! On the edge the relayed publisher is a publishing session like any other (a *relay-in*):
//! its tracks are published in its engine with the origin's SSRCs, payload types and
//! extension ids, so the edge's receivers, selectors and allocation work on the packets as
//! the origin sent them, and its NACKs, PLIs and receiver reports go back on the link. On the
//! origin a *relay-out* takes every packet of the publisher that the engine took, unchanged
//! (every layer, the original sequence numbers and Dependency Descriptor), and the
//! publisher's sender reports as they came, and answers the link's NACKs from the packets it
//! sent and its PLIs and FIRs through the track's keyframe throttle. Each end of a link sends
//! an empty receiver report every [`KEEPALIVE`] and ends the link, with every relay on it,
//! when nothing authenticated came for [`LINK_TIMEOUT`]. A relay ends alone with a BYE that
//! names one of its SSRCs: the edge's once the room has had nobody to receive it for
//! [`LINGER`], the origin's when its publisher leaves. A link ends with its last relay, a
//! relay of a room's data alone (`data_relays.rs`) counted among them.
//!
//! The datagrams of links are in `relay_wire.rs`; what an edge asks for, and when, in
//! `relay_pulls.rs`.

use std::collections::{HashSet, VecDeque};
use std::time::{Duration, Instant};

use bytes::Bytes;

use super::data_relays::DataIn;
use super::followed::Names;
use super::relay_pulls::Pulls;
use super::relay_resend::ResendRing;
use super::{CoreError, NodeCore};
use crate::engine::id_map::IdMap;
use crate::engine::{StreamIds, TransportId};
use crate::node::metrics::RelayFigures;
use crate::node::participant::ParticipantId;
use crate::node::peer::{IceCredentials, Join, PeerId, PublishedTrack, Publisher};
use crate::node::remote::Remote;
use crate::node::sdp::{random_ice_credentials, RoomCodec};
use crate::node::srtp::SrtpContext;

/// How often each end of a link sends a keepalive.
pub const KEEPALIVE: Duration = Duration::from_millis(500);
/// A link from which nothing authenticated came for this long is lost; the links are looked at
/// every 250 ms, so a loss is noticed within 2 s.
pub const LINK_TIMEOUT: Duration = Duration::from_millis(1500);
/// How long an edge keeps a relay after its room's last receiving session left: a viewer
/// that reloads finds it still there.
pub const LINGER: Duration = Duration::from_secs(3);
/// Relays one link carries at most: publishers one edge receives from one origin.
pub const RELAYS_PER_LINK: usize = 32;
/// Links a core holds at most each way: nodes it relays to, and nodes it relays from.
pub const LINKS_PER_NODE: usize = 64;
/// How often the links are looked at.
pub(super) const TICK: Duration = Duration::from_millis(250);
/// Packets a relay-out keeps to answer its link's NACKs: a second of a high-rate stream.
pub(super) const RESEND_RING: usize = 1024;
/// Sender reports kept per relay to match the edge's reports against.
pub(super) const REPORTS_KEPT: usize = 8;

/// What an origin answers for a relay: the publisher's tracks as the edge publishes them.
#[derive(Debug, Clone)]
pub struct RelayOffer {
    /// The name the publisher goes by in its room, for viewers that name whom they watch.
    pub name: Option<String>,
    /// Its public id on the origin, which the relay-in goes by on the edge: the room's state
    /// names the publisher by it on every node, and the edge's participants receive its
    /// tracks under it (their stream `p<id>`).
    pub participant: Option<ParticipantId>,
    /// Its tracks, with the SSRCs the origin bound and without transport-wide CC or REMB
    /// (the edge's estimate of the link is not the publisher's to hear).
    pub tracks: Vec<PublishedTrack>,
    /// What its answer accepted: the edge's viewers negotiate against it.
    pub codecs: Vec<RoomCodec>,
    /// The relay's tag on its link, by which the origin names it when its track set changed.
    pub tag: u32,
}

impl RelayOffer {
    /// Every SSRC the relay carries, media and RTX, bound ones only.
    pub fn ssrcs(&self) -> Vec<u32> {
        let streams = self.tracks.iter().flat_map(|t| t.config.streams.iter());
        streams
            .flat_map(|s| [Some(s.ssrc), s.rtx_ssrc])
            .flatten()
            .filter(|&ssrc| ssrc != 0)
            .collect()
    }
}

/// A link to make, should the relay not join one its two ends hold: its id (the origin's
/// nonce, which both ends name it by) and its keys.
pub struct NewLink {
    /// The link's id.
    pub id: String,
    /// Its keys, derived from the secret and both nonces.
    pub srtp: Box<dyn SrtpContext>,
}

impl std::fmt::Debug for NewLink {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("NewLink")
            .field("id", &self.id)
            .finish_non_exhaustive()
    }
}

/// Why a relay was refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum RelayRefusal {
    /// Its link carries [`RELAYS_PER_LINK`] relays already.
    #[error("the link between these nodes carries its most relays")]
    LinkFull,
    /// This node has [`LINKS_PER_NODE`] links that way already.
    #[error("this node holds its most relay links")]
    TooManyLinks,
    /// Another relay of the link has one of its SSRCs: the link could not tell them apart.
    #[error("an SSRC of the publisher is another relayed publisher's on the link")]
    SsrcTaken,
}

/// What the relays did, for `/metrics`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct RelayCounters {
    /// Relays started toward another node (this node the origin).
    pub started_out: u64,
    /// Relays started from another node (this node the edge).
    pub started_in: u64,
    /// Relays an edge renewed in place: their streams bound SSRCs their origin learned since.
    pub rebound: u64,
    /// Relays an edge ended after [`LINGER`] without a receiving session.
    pub ended_idle: u64,
    /// Links lost: silent for [`LINK_TIMEOUT`], each with every relay on it.
    pub links_lost: u64,
    /// Packets sent on links (media and NACKed packets again).
    pub packets_out: u64,
    /// Packets sent again for a link's NACK.
    pub resent: u64,
    /// Sequence numbers a link's NACK named and were not answered: named again in the same
    /// datagram, past a ring's worth of it, or of a packet already sent again
    /// [`MAX_RESENDS`](crate::engine::MAX_RESENDS) times.
    pub resends_refused: u64,
    /// PLIs and FIRs from links passed to a publisher's keyframe throttle.
    pub keyframes_asked: u64,
    /// Relays refused: a link full, too many links, an SSRC taken.
    pub refused: [u64; 3],
    /// Relays of a room's data started toward another node ...
    pub data_started_out: u64,
    /// ... and from another node.
    pub data_started_in: u64,
    /// Relays of a room's data an edge ended: nobody in the room on one of the two nodes for
    /// [`LINGER`].
    pub data_ended: u64,
    /// Pulls the core asked of its node, by why (see
    /// [`PullReason`](super::relay_pulls::PullReason)).
    pub pulls: [u64; 4],
    /// Pulls the node's queue had no room for: asked again later.
    pub pulls_dropped: u64,
    /// Origins' words that a relay's track set changed, heard while a pull of it was asked
    /// already: no second pull.
    pub changes_held: u64,
}

impl RelayCounters {
    /// The refusals' labels, in [`refused`](Self::refused)'s order.
    pub const REFUSALS: [&'static str; 3] = ["link_full", "links", "ssrc_taken"];

    fn refuse(&mut self, why: RelayRefusal) -> CoreError {
        self.refused[why as usize] += 1;
        CoreError::RelayRefused(why)
    }
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

/// The origin's end of a link: toward one edge.
pub(super) struct LinkOut {
    pub id: String,
    pub srtp: Box<dyn SrtpContext>,
    pub heard: Instant,
    pub next_keepalive: Instant,
    pub relays: Vec<RelayOut>,
    /// The rooms whose data alone it relays, each with its tag.
    pub data_rooms: Vec<(String, u32)>,
    /// The tag the next relay on the link takes.
    pub next_tag: u32,
    /// What the edge's last report said of the link.
    pub quality: LinkQuality,
    /// The link's SCTP association, in the data channel relay.
    pub data: PeerId,
}

/// One publisher relayed on a link.
pub(super) struct RelayOut {
    pub publisher: PeerId,
    pub tag: u32,
    pub transport: TransportId,
    pub ssrcs: Vec<u32>,
    /// The last packets sent, to answer NACKs with the same bytes: protected again under the
    /// same SRTP index, they encrypt to the same datagram, so no keystream is used twice on
    /// different bytes.
    pub sent: ResendRing,
    /// The last sender reports relayed (their compact NTP time) and when: the edge's report
    /// blocks name one, and the time since, less the delay they state, is the round trip.
    pub reports: VecDeque<(u32, Instant)>,
}

impl std::fmt::Debug for LinkOut {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LinkOut")
            .field("id", &self.id)
            .field("relays", &self.relays.len())
            .field("heard", &self.heard)
            .finish_non_exhaustive()
    }
}

/// The edge's end of a link: from one origin. Its relay-ins are sessions in the core's tables.
pub(super) struct LinkIn {
    pub id: String,
    pub srtp: Box<dyn SrtpContext>,
    pub heard: Instant,
    pub next_keepalive: Instant,
    /// Each relay-in, and since when its room has had nobody to receive it.
    pub relays: IdMap<PeerId, Option<Instant>>,
    /// Whose each SSRC on the link is.
    pub by_ssrc: IdMap<u32, PeerId>,
    /// Whose each tag on the link is.
    pub by_tag: IdMap<u32, PeerId>,
    /// The relay-ins whose origin said their track set changed: their node asks again.
    pub changed: HashSet<PeerId>,
    /// The relays of a room's data alone it carries.
    pub data_rooms: Vec<DataIn>,
    /// The link's SCTP association, in the data channel relay.
    pub data: PeerId,
}

impl LinkOut {
    /// The relays it carries, of publishers and of rooms' data.
    pub fn len(&self) -> usize {
        self.relays.len() + self.data_rooms.len()
    }

    /// The tag of a relay it starts now.
    pub fn take_tag(&mut self) -> u32 {
        let tag = self.next_tag;
        self.next_tag = self.next_tag.wrapping_add(1).max(1);
        tag
    }
}

impl LinkIn {
    /// The relays it carries, of publishers and of rooms' data.
    pub fn len(&self) -> usize {
        self.relays.len() + self.data_rooms.len()
    }
}

impl std::fmt::Debug for LinkIn {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LinkIn")
            .field("id", &self.id)
            .field("relays", &self.relays.len())
            .field("heard", &self.heard)
            .finish_non_exhaustive()
    }
}

/// The core's links and relays, both ends.
#[derive(Debug, Default)]
pub(super) struct Relays {
    pub outs: IdMap<Remote, LinkOut>,
    pub ins: IdMap<Remote, LinkIn>,
    /// Each relay-in's link.
    pub in_peers: IdMap<PeerId, Remote>,
    /// Packets for links, to be protected as they are polled.
    pub queue: VecDeque<(Remote, Bytes)>,
    pub next_tick: Option<Instant>,
    pub counters: RelayCounters,
    /// Each link's SCTP association: the link's other end, and whether this end is its
    /// origin.
    pub data_links: IdMap<PeerId, (Remote, bool)>,
    /// What the edge asks its node to pull.
    pub pulls: Pulls,
}

impl Relays {
    pub fn entries(&self) -> usize {
        self.outs.len()
            + self.ins.len()
            + self.in_peers.len()
            + self.queue.len()
            + self.data_links.len()
            + self.pulls.len()
    }

    pub fn poll_timeout(&self) -> Option<Instant> {
        self.next_tick
            .filter(|_| !self.outs.is_empty() || !self.ins.is_empty())
    }

    fn relays_out(&self) -> usize {
        self.outs.values().map(|l| l.relays.len()).sum()
    }

    /// Relays of rooms' data toward edges, and from origins.
    fn data_relays(&self) -> (usize, usize) {
        let out = self.outs.values().map(|l| l.data_rooms.len()).sum();
        let into = self.ins.values().map(|l| l.data_rooms.len()).sum();
        (out, into)
    }
}

impl NodeCore {
    /// What the relays did.
    pub fn relay_counters(&self) -> RelayCounters {
        self.media_relays.counters
    }

    /// Relays this core is the origin of, and the edge of.
    pub fn relay_count(&self) -> (usize, usize) {
        let relays = &self.media_relays;
        (relays.relays_out(), relays.in_peers.len())
    }

    /// Links this core holds toward edges, and from origins.
    pub fn link_count(&self) -> (usize, usize) {
        (self.media_relays.outs.len(), self.media_relays.ins.len())
    }

    /// The ids of the links this core receives relays on: an edge names them in its request,
    /// so that the origin puts the new relay on the link they share.
    pub fn links_in(&self) -> Vec<String> {
        let ins = self.media_relays.ins.values();
        ins.map(|link| link.id.clone()).collect()
    }

    pub(super) fn relay_figures(&self) -> RelayFigures {
        let relays = &self.media_relays;
        RelayFigures {
            out: relays.relays_out(),
            into: relays.in_peers.len(),
            links_out: relays.outs.len(),
            links_in: relays.ins.len(),
            data_links: self.data.nodes_up(),
            data_relays: relays.data_relays(),
            counters: relays.counters,
            links: relays
                .outs
                .iter()
                .map(|(to, link)| (to.addr(), link.quality))
                .collect(),
        }
    }

    /// Starts relaying the publisher a viewer of `room` would watch (the one named `source`,
    /// or the room's first that publishes) to the node at `to`: on the link to it whose id is
    /// among `known` (the edge's), or on `link`, a new one, which replaces a link to `to`
    /// the edge no longer knows. The same publisher relayed there already is renewed (the
    /// edge asks again for a changed track set). What the edge publishes, and the link's id.
    pub fn relay_out(
        &mut self,
        now: Instant,
        room: &str,
        source: Option<&str>,
        to: Remote,
        known: &[String],
        link: NewLink,
    ) -> Result<(RelayOffer, String), CoreError> {
        let publisher = self.relayed_publisher(room, source)?;
        let peer = self.peers.get(&publisher).ok_or(CoreError::UnknownPeer)?;
        let (transport, mut offer) = (peer.transport, self.offer_of(peer));
        let ssrcs = offer.ssrcs();
        let out = self.join_link_out(now, to, known, link, |existing| {
            let others = existing.relays.iter().filter(|r| r.publisher != publisher);
            if others.clone().count() + existing.data_rooms.len() >= RELAYS_PER_LINK {
                return Err(RelayRefusal::LinkFull);
            }
            match others.flat_map(|r| &r.ssrcs).any(|s| ssrcs.contains(s)) {
                true => Err(RelayRefusal::SsrcTaken),
                false => Ok(()),
            }
        })?;
        // Renewed, it keeps its tag and what it sent (to answer the link's NACKs across).
        let renewed = out.relays.iter().position(|r| r.publisher == publisher);
        let relay = match renewed.map(|at| out.relays.remove(at)) {
            Some(old) => RelayOut { ssrcs, ..old },
            None => RelayOut {
                publisher,
                tag: out.take_tag(),
                transport,
                ssrcs,
                sent: ResendRing::default(),
                reports: VecDeque::with_capacity(REPORTS_KEPT),
            },
        };
        offer.tag = relay.tag;
        out.relays.push(relay);
        let id = out.id.clone();
        self.sync_data_rooms(to);
        self.media_relays.counters.started_out += 1;
        self.arm_relay_tick(now);
        tracing::info!(room, ?to, link = %id, "relaying a publisher to another node");
        Ok((offer, id))
    }

    /// The link toward `to` a new relay goes on: the one whose id is among `known` (the
    /// edge's), once `fits` takes it, or else `link`, made now, which replaces a link to `to`
    /// the edge no longer knows.
    pub(super) fn join_link_out(
        &mut self,
        now: Instant,
        to: Remote,
        known: &[String],
        link: NewLink,
        fits: impl FnOnce(&LinkOut) -> Result<(), RelayRefusal>,
    ) -> Result<&mut LinkOut, CoreError> {
        let joined = self
            .media_relays
            .outs
            .get(&to)
            .filter(|l| known.contains(&l.id));
        if let Some(existing) = joined {
            if let Err(refused) = fits(existing) {
                return Err(self.media_relays.counters.refuse(refused));
            }
        } else {
            self.check_new_link(to, self.media_relays.outs.len())?;
            if let Some(stale) = self.remove_link_out(to) {
                tracing::info!(?to, relays = stale.len(), "the edge forgot a link");
            }
            let data = self.start_data_link(now, to, true);
            let fresh = LinkOut {
                id: link.id,
                srtp: link.srtp,
                heard: now,
                next_keepalive: now,
                relays: Vec::new(),
                data_rooms: Vec::new(),
                next_tag: 1,
                quality: LinkQuality::default(),
                data,
            };
            self.media_relays.outs.insert(to, fresh);
        }
        self.media_relays
            .outs
            .get_mut(&to)
            .ok_or(CoreError::UnknownPeer)
    }

    /// Refuses a new link past [`LINKS_PER_NODE`] (`held` that way now, one to replace not
    /// counted).
    fn check_new_link(&mut self, at: Remote, held: usize) -> Result<(), CoreError> {
        let replaces = self.media_relays.outs.contains_key(&at);
        if held - usize::from(replaces) >= LINKS_PER_NODE {
            return Err(self
                .media_relays
                .counters
                .refuse(RelayRefusal::TooManyLinks));
        }
        Ok(())
    }

    pub(super) fn has_tracks(&self, id: &PeerId) -> bool {
        self.peers
            .get(id)
            .and_then(|p| p.role.publisher())
            .is_some_and(|p| !p.tracks.is_empty())
    }

    /// The publisher named `source` in `room`, or the room's first with tracks; never one
    /// relayed in from elsewhere (relays do not chain).
    fn relayed_publisher(&self, room: &str, source: Option<&str>) -> Result<PeerId, CoreError> {
        let members = self.rooms.get(room).ok_or(CoreError::NoSuchParticipant)?;
        let local = |id: &&PeerId| !self.media_relays.in_peers.contains_key(id);
        let found = match source {
            Some(name) => members.names.get(name).filter(local),
            None => members
                .publishers
                .iter()
                .filter(local)
                .find(|id| self.has_tracks(id)),
        };
        found.copied().ok_or(CoreError::NoSuchParticipant)
    }

    /// A publisher's tracks as the engine has them now (simulcast streams with the SSRCs
    /// their packets bound), for an edge to publish.
    pub(super) fn offer_of(&self, peer: &crate::node::peer::Peer) -> RelayOffer {
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
                    origin: track.id.map(|t| t.0),
                    ..track.clone()
                })
            })
            .collect();
        RelayOffer {
            name: peer.identity.as_ref().map(|i| i.name.clone()),
            participant: peer.identity.as_ref().map(|i| i.public),
            tracks,
            codecs: publisher.map(|p| p.codecs.clone()).unwrap_or_default(),
            tag: 0,
        }
    }

    /// Publishes what the origin at `from` relays as `offer` in `room`: the room's viewers
    /// that wait for a publisher get it at once. On the link from `from` named `link.id`, or a
    /// new one under `link`'s keys (which replaces, with its relays, a link from `from` the
    /// origin no longer knows).
    pub fn relay_in(
        &mut self,
        now: Instant,
        room: &str,
        offer: RelayOffer,
        from: Remote,
        link: NewLink,
    ) -> Result<PeerId, CoreError> {
        let (ssrcs, tag) = (offer.ssrcs(), offer.tag);
        if let Some(old) = self.renewed(room, &offer, from, &link.id) {
            if self.rebind_relay_in(from, old, &offer) {
                return Ok(old);
            }
            self.retire_relay_in(from, old);
        }
        self.join_link_in(now, from, link, |held| {
            if held.len() >= RELAYS_PER_LINK {
                return Err(RelayRefusal::LinkFull);
            }
            match ssrcs.iter().any(|s| held.by_ssrc.contains_key(s)) {
                true => Err(RelayRefusal::SsrcTaken),
                false => Ok(()),
            }
        })?;
        let id = match self.add_relay_in(now, room, offer) {
            Ok(id) => id,
            Err(refused) => {
                self.end_link_if_empty(from);
                return Err(refused);
            }
        };
        let Some(held) = self.media_relays.ins.get_mut(&from) else {
            return Err(CoreError::UnknownPeer);
        };
        held.relays.insert(id, None);
        held.by_ssrc.extend(ssrcs.into_iter().map(|s| (s, id)));
        held.by_tag.insert(tag, id);
        self.media_relays.in_peers.insert(id, from);
        self.media_relays.counters.started_in += 1;
        self.arm_relay_tick(now);
        tracing::info!(room, ?from, peer = %id, "relaying a publisher from another node");
        Ok(id)
    }

    /// The link from `from` a new relay comes on: the one named `link.id` if this core holds
    /// it, once `fits` takes it, or else `link`, made now (replacing, with its relays, a link
    /// from `from` the origin no longer knows).
    pub(super) fn join_link_in(
        &mut self,
        now: Instant,
        from: Remote,
        link: NewLink,
        fits: impl FnOnce(&LinkIn) -> Result<(), RelayRefusal>,
    ) -> Result<(), CoreError> {
        let held = self.media_relays.ins.get(&from);
        let joins = held.is_some_and(|held| held.id == link.id);
        let refused = match held {
            Some(held) if joins => fits(held).err(),
            held => {
                let kept = self.media_relays.ins.len() - usize::from(held.is_some());
                (kept >= LINKS_PER_NODE).then_some(RelayRefusal::TooManyLinks)
            }
        };
        if let Some(refused) = refused {
            return Err(self.media_relays.counters.refuse(refused));
        }
        if joins {
            return Ok(());
        }
        // A name the relays on the forgotten link held is free for the new one.
        self.end_link_in(from);
        let data = self.start_data_link(now, from, false);
        let fresh = LinkIn {
            id: link.id,
            srtp: link.srtp,
            heard: now,
            next_keepalive: now,
            relays: IdMap::default(),
            by_ssrc: IdMap::default(),
            by_tag: IdMap::default(),
            changed: HashSet::new(),
            data_rooms: Vec::new(),
            data,
        };
        self.media_relays.ins.insert(from, fresh);
        // The association's INIT goes on the link now there.
        self.after_data(now);
        Ok(())
    }

    /// The relay-in's session: a publisher, connected from the start (its keys are its
    /// link's).
    fn add_relay_in(
        &mut self,
        now: Instant,
        room: &str,
        offer: RelayOffer,
    ) -> Result<PeerId, CoreError> {
        let (local_ufrag, local_pwd) = random_ice_credentials();
        let join = Join {
            name: offer.name,
            public: offer.participant,
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
        // The relayed publisher goes by its name on its own node: that is no clash.
        let id = self.add_named_publisher(now, join, publisher, Names::Here)?;
        self.connected_without_keys(id);
        Ok(id)
    }

    pub(super) fn arm_relay_tick(&mut self, now: Instant) {
        self.media_relays.next_tick.get_or_insert(now + TICK);
    }

    /// Whether session `id` is a relay-in.
    pub(super) fn is_relay_in(&self, id: PeerId) -> bool {
        !self.media_relays.in_peers.is_empty() && self.media_relays.in_peers.contains_key(&id)
    }

    /// A session left: a relay-in leaves its link with a BYE to its origin (the link ends
    /// with its last relay), and the relays of a publisher end with a BYE to their edges.
    pub(super) fn forget_relays(&mut self, id: PeerId) {
        if let Some(from) = self.media_relays.in_peers.remove(&id) {
            self.leave_link_in(from, id);
        }
        let links: Vec<Remote> = self
            .media_relays
            .outs
            .iter()
            .filter(|(_, l)| l.relays.iter().any(|r| r.publisher == id))
            .map(|(&to, _)| to)
            .collect();
        for to in links {
            self.end_relay_out(to, |r| r.publisher == id, true);
        }
    }

    /// Relay-in `id` off its link, with a BYE naming one of its SSRCs; the link ends with
    /// its last relay.
    fn leave_link_in(&mut self, from: Remote, id: PeerId) {
        let Some(link) = self.media_relays.ins.get_mut(&from) else {
            return;
        };
        link.relays.remove(&id);
        let named = link.by_ssrc.iter().find(|(_, &p)| p == id).map(|(&s, _)| s);
        link.by_ssrc.retain(|_, p| *p != id);
        link.by_tag.retain(|_, p| *p != id);
        link.changed.remove(&id);
        if let Some(ssrc) = named {
            self.send_bye(from, false, ssrc);
        }
        self.end_link_if_empty(from);
    }

    pub(super) fn end_link_if_empty(&mut self, from: Remote) {
        if self
            .media_relays
            .ins
            .get(&from)
            .is_some_and(|l| l.len() == 0)
        {
            if let Some(link) = self.media_relays.ins.remove(&from) {
                self.end_data_link(link.data);
            }
        }
    }

    /// Ends the relays on the link to `to` that `which` picks, each with a BYE (when `bye`)
    /// naming one of its SSRCs; the link ends with its last relay.
    pub(super) fn end_relay_out(
        &mut self,
        to: Remote,
        which: impl Fn(&RelayOut) -> bool,
        bye: bool,
    ) {
        let Some(link) = self.media_relays.outs.get_mut(&to) else {
            return;
        };
        let named: Vec<u32> = link
            .relays
            .iter()
            .filter(|r| which(r))
            .filter_map(|r| r.ssrcs.first().copied())
            .collect();
        link.relays.retain(|r| !which(r));
        let empty = link.len() == 0;
        for ssrc in named.into_iter().filter(|_| bye) {
            self.send_bye(to, true, ssrc);
        }
        if empty {
            self.remove_link_out(to);
        } else {
            self.sync_data_rooms(to);
        }
    }

    /// The link toward `to` gone, with its association.
    pub(super) fn remove_link_out(&mut self, to: Remote) -> Option<LinkOut> {
        let link = self.media_relays.outs.remove(&to)?;
        self.end_data_link(link.data);
        Some(link)
    }

    /// The link from `from`, with every relay-in on it, gone (lost, or replaced).
    pub(super) fn end_link_in(&mut self, from: Remote) {
        let Some(link) = self.media_relays.ins.remove(&from) else {
            return;
        };
        self.end_data_link(link.data);
        // Each leaves the tables as any session; its BYE has no link to go on.
        for id in link.relays.into_keys() {
            let _ = self.remove_peer(id);
        }
    }
}
