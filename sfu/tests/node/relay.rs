//! The media relay between two nodes' cores, in memory: a publisher on the origin, viewers on
//! the edge, and the link between them carried by the test (real SRTP on the link, so bad
//! keys are bad). What crosses the link is counted; what the edge's viewers get is read.

use std::net::SocketAddr;
use std::time::Duration;

use rtp_ext::rtp::RtpPacket;
use selector::Layer;
use sfu::engine::MAX_RESENDS;
use sfu::node::core::{CoreError, NewLink, NodeCore, LINGER, LINK_TIMEOUT};
use sfu::node::metrics::DropReason;
use sfu::node::peer::PeerId;
use sfu::node::remote::Remote;
use sfu::node::srtp::{session, SrtpContext, SrtpKeys, SrtpProfile, MAX_OVERHEAD};
use sfu::node::testing::{av1_track, av1_viewer, keys, publisher, Harness};

use crate::fixtures::{addr, harness, l3t3, spatial_ids, DD_IN, DD_OUT};

/// The origin's relay socket, as the edge sees it.
pub(crate) const ORIGIN: Remote = Remote::Link(SocketAddr::new(
    std::net::IpAddr::V4(std::net::Ipv4Addr::new(10, 0, 0, 1)),
    50_000,
));
/// The edge's relay socket, as the origin sees it.
pub(crate) const EDGE: Remote = Remote::Link(SocketAddr::new(
    std::net::IpAddr::V4(std::net::Ipv4Addr::new(10, 0, 0, 2)),
    50_000,
));
const PUBLISHER_SSRC: u32 = 0xA1;

/// Two cores on one clock, a publisher on the origin (`a`), and two viewers on the edge
/// (`b`): one of every layer, one of the base spatial layer.
pub(crate) struct Pair {
    pub(crate) a: Harness,
    pub(crate) b: Harness,
    pub(crate) viewers: [PeerId; 2],
    pub(crate) link: SrtpKeys,
}

impl Pair {
    pub(crate) fn new() -> Self {
        let mut a = harness();
        let mut b = harness();
        b.now = a.now;
        a.publisher(
            "room",
            publisher([av1_track(PUBLISHER_SSRC, DD_IN)]),
            addr(5000),
        );
        let viewers = [
            b.viewer(
                "room",
                av1_viewer(0x10, Some(DD_OUT), Layer::MAX),
                addr(6001),
            ),
            b.viewer(
                "room",
                av1_viewer(0x20, Some(DD_OUT), Layer::new(0, 2)),
                addr(6002),
            ),
        ];
        let link = keys(SrtpProfile::AeadAes128Gcm, 7);
        Self {
            a,
            b,
            viewers,
            link,
        }
    }

    /// The relay of the room's first publisher started as the edge asks for it.
    pub(crate) fn start(&mut self, edge_keys: &SrtpKeys) -> PeerId {
        self.relay(None, edge_keys)
            .expect("a publisher to relay, a place on the link")
    }

    /// The relay of `source` started as the edge asks for it: the origin's offer, on the
    /// link the edge names or a new one, published on the edge under `edge_keys` (the
    /// origin's mirrored, unless a test breaks them) when the link is new.
    pub(crate) fn relay(
        &mut self,
        source: Option<&str>,
        edge_keys: &SrtpKeys,
    ) -> Result<PeerId, CoreError> {
        let link = new_link("origin-nonce", &self.link);
        let known = self.b.core.links_in();
        let (offer, id) = self
            .a
            .core
            .relay_out(self.a.now, "room", source, EDGE, &known, link)?;
        let relayed =
            self.b
                .core
                .relay_in(self.b.now, "room", offer, ORIGIN, new_link(&id, edge_keys))?;
        self.b.drain();
        self.shuttle();
        Ok(relayed)
    }

    /// Carries what each core sent the other until nothing is left: the RTP datagrams that
    /// went from the origin to the edge.
    pub(crate) fn shuttle(&mut self) -> usize {
        let mut media = 0;
        loop {
            let to_b = self.a.sent.remove(&EDGE).unwrap_or_default();
            let to_a = self.b.sent.remove(&ORIGIN).unwrap_or_default();
            if to_b.is_empty() && to_a.is_empty() {
                return media;
            }
            media += to_b.iter().filter(|d| is_rtp(d)).count();
            for datagram in to_b {
                self.b.send(ORIGIN, &datagram);
            }
            for datagram in to_a {
                self.a.send(EDGE, &datagram);
            }
        }
    }

    /// The publisher's packets into the origin, carried across: how many went on the link.
    pub(crate) fn publish(&mut self, packets: &[Vec<u8>]) -> usize {
        let mut relayed = 0;
        for packet in packets {
            self.a.send(addr(5000), packet);
            relayed += self.shuttle();
        }
        relayed
    }

    /// Both clocks moved by `step`, `steps` times, each core's due timers run and the link
    /// carried (unless `cut`).
    pub(crate) fn run(&mut self, step: Duration, steps: u32, cut: bool) {
        for _ in 0..steps {
            for h in [&mut self.a, &mut self.b] {
                h.now += step;
                if h.core.poll_timeout().is_some_and(|at| at <= h.now) {
                    h.core.handle_timeout(h.now);
                }
                h.drain();
            }
            if cut {
                self.a.sent.remove(&EDGE);
                self.b.sent.remove(&ORIGIN);
            } else {
                self.shuttle();
            }
        }
    }

    /// PLIs the origin sent its publisher.
    fn plis_to_publisher(&self) -> usize {
        let sent = self.a.sent.get(&Remote::Udp(addr(5000)));
        sent.into_iter().flatten().filter(|d| has_pli(d)).count()
    }
}

/// A new link named `id` under `keys`.
pub(crate) fn new_link(id: &str, keys: &SrtpKeys) -> NewLink {
    NewLink {
        id: id.to_owned(),
        srtp: Box::new(session(keys).expect("keys")),
    }
}

fn is_rtp(datagram: &[u8]) -> bool {
    datagram.get(1).is_some_and(|pt| !(192..=223).contains(pt))
}

/// Whether a compound RTCP packet (sent unprotected to a test session) holds a PLI.
fn has_pli(datagram: &[u8]) -> bool {
    let mut rest = datagram;
    while rest.len() >= 4 {
        if rest[1] == 206 && rest[0] & 0x1f == 1 {
            return true;
        }
        let len = (usize::from(u16::from_be_bytes([rest[2], rest[3]])) + 1) * 4;
        rest = rest.get(len..).unwrap_or_default();
    }
    false
}

/// `packet` protected by `srtp`, as RTCP or RTP.
fn protected(srtp: &mut dyn SrtpContext, mut packet: Vec<u8>, rtcp: bool) -> Vec<u8> {
    let len = packet.len();
    packet.resize(len + MAX_OVERHEAD, 0);
    let len = match rtcp {
        true => srtp.protect_rtcp(&mut packet, len),
        false => srtp.protect_rtp(&mut packet, len),
    };
    packet.truncate(len.expect("protects"));
    packet
}

/// A generic NACK from `sender` for the publisher's `seqs`, a pair each (RFC 4585 section
/// 6.2.1).
fn nack(sender: u32, seqs: &[u16]) -> Vec<u8> {
    let words = u16::try_from(2 + seqs.len()).expect("a short NACK");
    let mut packet = vec![0x81, 205];
    packet.extend_from_slice(&words.to_be_bytes());
    packet.extend_from_slice(&sender.to_be_bytes());
    packet.extend_from_slice(&PUBLISHER_SSRC.to_be_bytes());
    for seq in seqs {
        packet.extend_from_slice(&seq.to_be_bytes());
        packet.extend_from_slice(&[0, 0]);
    }
    packet
}

fn pli(sender: u32, media: u32) -> Vec<u8> {
    let mut packet = vec![0x81, 206, 0, 2];
    packet.extend_from_slice(&sender.to_be_bytes());
    packet.extend_from_slice(&media.to_be_bytes());
    packet
}

#[test]
fn each_packet_crosses_once_and_each_edge_viewer_gets_its_layers_with_a_valid_dd() {
    let mut pair = Pair::new();
    let link = pair.link.mirrored();
    pair.start(&link);
    assert_eq!(pair.a.core.relay_count(), (1, 0));
    assert_eq!(pair.b.core.relay_count(), (0, 1));
    assert_eq!(
        pair.b.core.snapshot().subscriptions,
        2,
        "both viewers served"
    );

    let packets = l3t3(PUBLISHER_SSRC, 30);
    let relayed = pair.publish(&packets);
    assert_eq!(relayed, packets.len(), "each packet once, for two viewers");
    assert_eq!(
        pair.a.core.relay_counters().packets_out,
        packets.len() as u64
    );

    let full = pair.b.media_to(addr(6001));
    let spatial = spatial_ids(&full, DD_OUT);
    assert_eq!(
        spatial.len(),
        full.len(),
        "every packet with a DD that parses"
    );
    assert!((0..3).all(|s| spatial.contains(&s)), "{spatial:?}");
    let base = pair.b.media_to(addr(6002));
    let spatial = spatial_ids(&base, DD_OUT);
    assert!(!base.is_empty());
    assert_eq!(spatial.len(), base.len());
    assert!(spatial.iter().all(|&s| s == 0), "{spatial:?}");
    for p in [&full, &base].into_iter().flatten() {
        let ssrc = RtpPacket::parse(p).expect("RTP").fields().ssrc;
        assert!(ssrc == 0x10 || ssrc == 0x20, "the viewers' own SSRCs");
    }
}

#[test]
fn an_edge_viewers_pli_reaches_the_origins_publisher_through_its_throttle() {
    let mut pair = Pair::new();
    let link = pair.link.mirrored();
    pair.start(&link);
    pair.publish(&l3t3(PUBLISHER_SSRC, 10));
    // Past the keyframe interval of whatever subscribing asked.
    pair.run(Duration::from_millis(100), 10, false);
    let before = pair.plis_to_publisher();
    let asked = pair.a.core.relay_counters().keyframes_asked;

    pair.b.send(addr(6001), &pli(0x99, 0x10));
    pair.shuttle();
    pair.run(Duration::from_millis(10), 2, false);
    assert_eq!(
        pair.a.core.relay_counters().keyframes_asked,
        asked + 1,
        "the edge's PLI crossed"
    );
    assert_eq!(pair.plis_to_publisher(), before + 1, "the publisher asked");

    // Both viewers at once, again within the interval: one request at most.
    pair.b.send(addr(6001), &pli(0x99, 0x10));
    pair.b.send(addr(6002), &pli(0x98, 0x20));
    pair.shuttle();
    pair.run(Duration::from_millis(10), 2, false);
    assert!(pair.plis_to_publisher() <= before + 2);
}

#[test]
fn the_relay_lingers_after_the_last_edge_viewer_then_ends_on_both_nodes() {
    let mut pair = Pair::new();
    let link = pair.link.mirrored();
    pair.start(&link);
    pair.publish(&l3t3(PUBLISHER_SSRC, 5));
    for viewer in pair.viewers {
        pair.b.core.remove_peer(viewer).expect("a viewer");
    }
    let tick = Duration::from_millis(250);
    pair.run(
        tick,
        (LINGER.as_millis() / tick.as_millis()) as u32 - 2,
        false,
    );
    assert_eq!(pair.b.core.relay_count(), (0, 1), "still lingering");
    assert_eq!(
        pair.a.core.relay_count(),
        (1, 0),
        "kept alive by keepalives"
    );

    pair.run(tick, 4, false);
    assert_eq!(pair.b.core.relay_count(), (0, 0));
    assert_eq!(pair.a.core.relay_count(), (0, 0), "the edge's BYE ended it");
    assert_eq!(pair.b.core.relay_counters().ended_idle, 1);
    assert_eq!(pair.a.core.relay_counters().links_lost, 0);
    assert_eq!(pair.b.core.table_entries(), 0, "nothing left on the edge");
    let relayed = pair.publish(&l3t3(PUBLISHER_SSRC, 10)[5..]);
    assert_eq!(relayed, 0, "nothing relayed any more");
}

#[test]
fn a_silent_link_is_lost_on_both_ends_within_two_seconds_and_can_start_again() {
    let mut pair = Pair::new();
    let link = pair.link.mirrored();
    pair.start(&link);
    pair.run(Duration::from_millis(100), 15, false);
    assert_eq!(pair.a.core.relay_count(), (1, 0), "keepalives keep it");
    assert_eq!(pair.b.core.relay_count(), (0, 1));

    pair.run(Duration::from_millis(100), 20, true);
    assert_eq!(pair.a.core.relay_count(), (0, 0));
    assert_eq!(pair.b.core.relay_count(), (0, 0));
    assert_eq!(pair.a.core.relay_counters().links_lost, 1);
    assert_eq!(pair.b.core.relay_counters().links_lost, 1);
    assert!(LINK_TIMEOUT < Duration::from_secs(2));

    pair.start(&link);
    let packets = l3t3(PUBLISHER_SSRC, 10);
    assert_eq!(pair.publish(&packets), packets.len());
    assert!(!pair.b.media_to(addr(6001)).is_empty(), "served again");
}

#[test]
fn link_packets_under_other_keys_or_an_unknown_ssrc_are_counted_and_dropped() {
    let mut pair = Pair::new();
    let wrong = keys(SrtpProfile::AeadAes128Gcm, 8).mirrored();
    pair.start(&wrong);
    let packets = l3t3(PUBLISHER_SSRC, 5);
    pair.publish(&packets);
    let dropped = pair.b.core.counters().dropped(DropReason::SrtpRejected);
    assert!(dropped >= packets.len() as u64, "{dropped}");
    assert!(pair.b.media_to(addr(6001)).is_empty());

    let mut pair = Pair::new();
    let link = pair.link.mirrored();
    pair.start(&link);
    // Protected as the origin would, under an SSRC it never offered.
    let mut origin = session(&pair.link).expect("keys");
    let forged = protected(&mut origin, l3t3(0xBAD, 1).remove(0), false);
    let before = pair.b.core.counters().dropped(DropReason::UnknownSsrc);
    pair.b.send(ORIGIN, &forged);
    let after = pair.b.core.counters().dropped(DropReason::UnknownSsrc);
    assert_eq!(after, before + 1);
    // And RTCP to the origin from the edge's address under other keys.
    let mut edge = session(&wrong).expect("keys");
    let rtcp = protected(&mut edge, pli(1, PUBLISHER_SSRC), true);
    let before = pair.a.core.counters().dropped(DropReason::SrtpRejected);
    pair.a.send(EDGE, &rtcp);
    let after = pair.a.core.counters().dropped(DropReason::SrtpRejected);
    assert_eq!(after, before + 1);
    assert_eq!(pair.a.core.relay_counters().keyframes_asked, 0);
}

#[test]
fn a_packet_lost_on_the_link_is_nacked_by_the_edge_and_sent_again_by_the_origin() {
    let mut pair = Pair::new();
    let link = pair.link.mirrored();
    let relayed = pair.start(&link);
    let packets = l3t3(PUBLISHER_SSRC, 20);
    let (first, rest) = packets.split_at(10);
    pair.publish(first);
    // The link loses the next packet.
    pair.a.send(addr(5000), &rest[0]);
    pair.a.sent.remove(&EDGE);
    pair.publish(&rest[1..]);
    pair.run(Duration::from_millis(20), 10, false);
    assert_eq!(pair.a.core.relay_counters().resent, 1, "the lost one, once");
    let track = pair
        .b
        .core
        .peer(relayed)
        .and_then(|p| p.role.publisher())
        .and_then(|p| p.tracks[0].id)
        .expect("published on the edge");
    let counters = pair
        .b
        .core
        .router()
        .receiver_counters(track)
        .expect("a track");
    assert_eq!(counters.nacked, 1);
    assert_eq!(counters.recovered, 1);
}

/// An edge's NACKs are answered within bounds: a packet named many times in one datagram is
/// sent again once, and none more than `MAX_RESENDS` times however often it is named.
#[test]
fn an_edges_repeated_nacks_are_answered_within_bounds() {
    let mut pair = Pair::new();
    let link = pair.link.mirrored();
    pair.start(&link);
    let packets = l3t3(PUBLISHER_SSRC, 10);
    pair.publish(&packets);
    let seq = u16::from_be_bytes([packets[3][2], packets[3][3]]);
    // The edge's keys, under an SSRC of the test's own (its replay window starts afresh).
    let mut edge = session(&link).expect("keys");
    let mut nack_times = |times: usize| protected(&mut edge, nack(1, &vec![seq; times]), true);
    let before = pair.a.core.relay_counters();
    pair.a.send(EDGE, &nack_times(20));
    let once = pair.a.core.relay_counters();
    assert_eq!(
        once.resent - before.resent,
        1,
        "named 20 times in one datagram"
    );
    assert_eq!(once.resends_refused - before.resends_refused, 19);
    for _ in 0..10 {
        pair.a.send(EDGE, &nack_times(1));
    }
    let end = pair.a.core.relay_counters();
    assert_eq!(end.resent - before.resent, u64::from(MAX_RESENDS));
    assert_eq!(end.resends_refused - before.resends_refused, 19 + 3);
}

#[test]
fn the_publishers_sender_reports_reach_the_edge_and_its_reports_measure_the_link() {
    let mut pair = Pair::new();
    let link = pair.link.mirrored();
    pair.start(&link);
    pair.publish(&l3t3(PUBLISHER_SSRC, 3));
    let before = pair.b.core.router().counters().rtcp_in;
    // A sender report without blocks: NTP time, RTP time, counts.
    let mut report = vec![0x80, 200, 0, 6];
    report.extend_from_slice(&PUBLISHER_SSRC.to_be_bytes());
    report.extend_from_slice(&0xE000_0001_8000_0000_u64.to_be_bytes());
    report.extend_from_slice(&[0; 12]);
    pair.a.send(addr(5000), &report);
    pair.shuttle();
    assert_eq!(pair.b.core.router().counters().rtcp_in, before + 1);
    // A report under an SSRC none of the publisher's streams has is not relayed: the link
    // keeps an SRTCP index per SSRC it sends under.
    let unknown = |core: &NodeCore| core.snapshot().node.dropped(DropReason::UnknownSsrc);
    let dropped = unknown(&pair.a.core);
    report[4..8].copy_from_slice(&0x0BAD_5551_u32.to_be_bytes());
    pair.a.send(addr(5000), &report);
    pair.shuttle();
    assert_eq!(pair.b.core.router().counters().rtcp_in, before + 1);
    assert_eq!(unknown(&pair.a.core), dropped + 1);

    // The edge's receiver reports of it measure the link on the origin.
    pair.run(Duration::from_millis(100), 30, false);
    let links = pair.a.core.snapshot().media_relay.links;
    let [(peer, quality)] = links.as_slice() else {
        panic!("one link: {links:?}");
    };
    assert_eq!(Remote::Link(*peer), EDGE);
    assert_eq!(quality.fraction_lost, Some(0));
    let round_trip = quality.round_trip.expect("a report of the relayed SR");
    assert!(
        round_trip < Duration::from_millis(5),
        "{round_trip:?}: a link without delay"
    );
    let metrics = pair.a.core.snapshot().render();
    let series = "strata_media_relay_link_loss_percent{peer=\"10.0.0.2:50000\"} 0";
    assert!(metrics.contains(series), "{metrics}");
}
