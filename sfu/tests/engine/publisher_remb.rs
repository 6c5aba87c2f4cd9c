//! REMB toward a publisher that negotiated REMB and not transport-wide CC, over the simulated
//! network: the publisher here does what such a client does, sending at the latest REMB (up
//! to what its encoder wants), and the router estimates its uplink from the abs-send-time
//! its packets carry. Behind a narrow uplink it is brought under the uplink's rate and the
//! queue stops overflowing; on a wide one it is never held below what it wants to send.

use std::time::{Duration, Instant};

use bytes::Bytes;
use rtp_ext::codec::Codec;
use sfu::engine::rtcp::{parse_compound, RtcpFeedback};
use sfu::engine::{PublisherRemb, RouterConfig, TrackConfig, TransportCc, TransportId};
use sfu::sim::{Bottleneck, Delivery, Direction, LinkConfig, Network, QueueLimit};

const SSRC: u32 = 0x00C0_FFEE;
const ABS_SEND_TIME_EXT: u8 = 2;
const TWCC_EXT: u8 = 3;
const PACKET: usize = 1200;
/// What the publisher's encoder would send with no REMB holding it down.
const WANTED_BPS: u64 = 2_000_000;
const ONE_WAY: Duration = Duration::from_millis(25);

/// A REMB the publisher got: when, the bitrate, and the SSRCs it names.
#[derive(Debug, Clone)]
struct Remb {
    at: Duration,
    bps: u64,
    ssrcs: Vec<u32>,
}

/// A VP8 packet of [`PACKET`] bytes with the abs-send-time of `sent` (a one-byte header
/// extension, RFC 8285) and, when `twcc` is set, a transport-wide sequence number.
fn packet(seq: u16, sent: Duration, twcc: bool) -> Bytes {
    let units = (sent.as_nanos() * (1 << 18) / 1_000_000_000) as u32 & 0xFF_FFFF;
    let [_, a, b, c] = units.to_be_bytes();
    let mut p = vec![0x90, 96];
    p.extend_from_slice(&seq.to_be_bytes());
    p.extend_from_slice(&(u32::from(seq) * 3000).to_be_bytes());
    p.extend_from_slice(&SSRC.to_be_bytes());
    p.extend_from_slice(&[0xBE, 0xDE, 0, 2]);
    p.extend_from_slice(&[(ABS_SEND_TIME_EXT << 4) | 2, a, b, c]);
    let [s0, s1] = seq.to_be_bytes();
    let twcc_element = if twcc {
        [(TWCC_EXT << 4) | 1, s0, s1, 0]
    } else {
        [0; 4]
    };
    p.extend_from_slice(&twcc_element);
    // A VP8 payload descriptor of one octet (S=1, partition 0): a keyframe's first packet
    // looks no different to the receiver than any other here.
    p.push(0x10);
    p.resize(PACKET, 0);
    Bytes::from(p)
}

struct Publisher {
    transport: TransportId,
    target_bps: u64,
    rembs: Vec<Remb>,
    seq: u16,
}

impl Publisher {
    fn new(net: &mut Network, up: LinkConfig, twcc: bool) -> Self {
        let transport = net.add_transport(up, LinkConfig::delayed(ONE_WAY));
        let mut config = TrackConfig::single(Codec::Vp8, SSRC);
        config.remb = Some(PublisherRemb {
            abs_send_time_ext_id: ABS_SEND_TIME_EXT,
        });
        config.transport_cc = twcc.then_some(TransportCc { ext_id: TWCC_EXT });
        net.with_router(|r| r.publish(transport, config))
            .expect("a new transport");
        Self {
            transport,
            target_bps: WANTED_BPS,
            rembs: Vec::new(),
            seq: 0,
        }
    }

    /// Sends for `span` at its target, taking the REMBs that arrive as it goes.
    fn run(&mut self, net: &mut Network, span: Duration, twcc: bool) {
        let start = net.start();
        let end = net.now() + span;
        while net.now() < end {
            let gap = Duration::from_secs_f64((PACKET * 8) as f64 / self.target_bps as f64);
            let at = net.now() + gap;
            net.run_until(at);
            self.take_rembs(net);
            self.seq = self.seq.wrapping_add(1);
            let sent = net.now() - start + Duration::from_secs(7);
            net.send_rtp(self.transport, packet(self.seq, sent, twcc))
                .expect("on the network");
        }
    }

    fn take_rembs(&mut self, net: &mut Network) {
        for arrival in net.take_arrivals(self.transport) {
            let Delivery::Rtcp { datagram, .. } = arrival.delivery else {
                continue;
            };
            let at = arrival.at - net.start();
            let mut rembs = Vec::new();
            parse_compound(&datagram, |item| {
                if let RtcpFeedback::Remb(remb) = item {
                    rembs.push(Remb {
                        at,
                        bps: remb.bitrate_bps,
                        ssrcs: remb.ssrcs.iter().copied().collect(),
                    });
                }
            })
            .expect("the router's RTCP parses");
            for remb in rembs {
                // Like a client without its own estimate: the REMB is its target.
                self.target_bps = remb.bps.min(WANTED_BPS);
                self.rembs.push(remb);
            }
        }
    }

    /// What the REMBs said from `from` on.
    fn rembs_since(&self, from: Duration) -> impl Iterator<Item = &Remb> {
        self.rembs.iter().filter(move |r| r.at >= from)
    }
}

fn network(seed: u64) -> Network {
    Network::new(RouterConfig::default(), Instant::now(), seed)
}

fn uplink(rate_bps: u64) -> LinkConfig {
    LinkConfig {
        bottleneck: Some(Bottleneck::new(
            rate_bps,
            QueueLimit::Delay(Duration::from_millis(300)),
        )),
        ..LinkConfig::delayed(ONE_WAY)
    }
}

/// The same link read as a node with spaced reads reads its socket (`udp_read_spacing_us`):
/// each packet taken up to the spacing and the runtime timer's millisecond after it came,
/// never before one that came ahead of it.
fn read_in_spells(link: LinkConfig) -> LinkConfig {
    LinkConfig {
        jitter: Duration::from_millis(2),
        reorder: false,
        ..link
    }
}

/// How the node reads a link: the link as it reads it.
type Reading = fn(LinkConfig) -> LinkConfig;

/// Each packet read as it comes, and read in spells (with the simulation's seed for each).
const READINGS: [(u64, Reading); 2] = [(7, |link| link), (11, read_in_spells)];

#[test]
fn a_publisher_behind_a_narrow_uplink_is_brought_under_its_rate() {
    for (seed, read) in READINGS {
        brought_under_the_uplink(seed, read);
    }
}

/// A publisher behind a 1 Mbit/s uplink (`read` as the node reads it) is brought under the
/// uplink's rate within 2 s, kept under it and near it, and its queue stops overflowing.
fn brought_under_the_uplink(seed: u64, read: Reading) {
    let mut net = network(seed);
    let capacity = 1_000_000;
    let mut publisher = Publisher::new(&mut net, read(uplink(capacity)), false);
    publisher.run(&mut net, Duration::from_secs(30), false);

    let first_low = publisher
        .rembs
        .iter()
        .find(|r| r.bps < capacity)
        .unwrap_or_else(|| panic!("no REMB under the uplink: {:?}", publisher.rembs));
    assert!(
        first_low.at <= Duration::from_secs(2),
        "{first_low:?} of {:?}",
        publisher.rembs
    );
    let settled: Vec<u64> = publisher
        .rembs_since(Duration::from_secs(10))
        .map(|r| r.bps)
        .collect();
    assert!(settled.len() >= 19, "a REMB a second at least: {settled:?}");
    // Under the link (the queue drains) and not far under it (the link is used).
    assert!(
        settled.iter().all(|&bps| bps <= capacity * 11 / 10),
        "{settled:?}"
    );
    let mean = settled.iter().sum::<u64>() / settled.len() as u64;
    assert!(mean >= capacity / 2, "{mean}: {settled:?}");
    // Once brought down, the uplink's queue stops overflowing.
    let dropped_early = net
        .link_counters(publisher.transport, Direction::Up)
        .expect("on the network")
        .queue_dropped;
    publisher.run(&mut net, Duration::from_secs(10), false);
    let dropped = net
        .link_counters(publisher.transport, Direction::Up)
        .expect("on the network")
        .queue_dropped;
    assert!(
        dropped - dropped_early <= 5,
        "{} dropped at the uplink's queue in the last 10 s",
        dropped - dropped_early
    );
    assert!(publisher.rembs.iter().all(|r| r.ssrcs == [SSRC]));
}

#[test]
fn a_publisher_on_a_wide_uplink_is_never_held_below_what_it_sends() {
    for (seed, read) in READINGS {
        never_held_below(seed + 1, read);
    }
}

/// A publisher on a 10 Mbit/s uplink (`read` as the node reads it) gets a REMB a second,
/// none under what it wants to send.
fn never_held_below(seed: u64, read: Reading) {
    let mut net = network(seed);
    let mut publisher = Publisher::new(&mut net, read(uplink(10_000_000)), false);
    publisher.run(&mut net, Duration::from_secs(20), false);
    assert!(publisher.rembs.len() >= 18, "{:?}", publisher.rembs);
    assert!(
        publisher.rembs.iter().all(|r| r.bps >= WANTED_BPS),
        "{:?}",
        publisher.rembs
    );
    let counters = net.router().counters();
    assert_eq!(counters.rembs_sent, publisher.rembs.len() as u64);
}

#[test]
fn a_publisher_with_transport_wide_cc_gets_its_feedback_and_no_remb() {
    let mut net = network(9);
    let mut publisher = Publisher::new(&mut net, uplink(1_000_000), true);
    publisher.run(&mut net, Duration::from_secs(5), true);
    assert!(publisher.rembs.is_empty(), "{:?}", publisher.rembs);
    assert_eq!(net.router().counters().rembs_sent, 0);
}

#[test]
fn unpublishing_the_track_ends_the_remb() {
    let mut net = network(10);
    let mut publisher = Publisher::new(&mut net, uplink(1_000_000), false);
    publisher.run(&mut net, Duration::from_secs(3), false);
    let before = publisher.rembs.len();
    assert!(before >= 2, "{:?}", publisher.rembs);
    let track = net
        .router()
        .ssrc_track(publisher.transport, SSRC)
        .expect("published");
    net.with_router(|r| r.unpublish(track)).expect("published");
    assert_eq!(
        net.router().table_entries(),
        1,
        "only the transport is left"
    );
    publisher.run(&mut net, Duration::from_secs(3), false);
    assert_eq!(publisher.rembs.len(), before);
}
