//! The engine between a publisher and subscribers over the seeded in-memory network
//! (`sfu::sim`): latency with jitter (so reordering), loss and duplicates on every link, both
//! ways. The publisher answers the router's NACKs and keyframe requests; each subscriber NACKs
//! its own gaps until they are filled. Time jumps from one thing due to the next, the router's
//! timeouts included. After a lossy stretch and a clean tail, per subscriber:
//! - every output sequence number from its first to its last arrived (repaired or filler);
//! - no frame is split: a frame that arrived at all arrived whole;
//! - every frame that arrived has every frame it references arrived too: it decodes;
//! - at most one marker per output timestamp;
//! - the router asked the publisher for keyframes no more often than once per interval;
//! - and the round trip to the publisher was measured from its RTX answers.

use crate::common;

use std::collections::{BTreeMap, HashMap, HashSet};
use std::time::{Duration, Instant};

use bytes::Bytes;
use proptest::prelude::*;
use rtp_ext::codec::Codec;
use rtp_ext::rtp::RtpPacket;
use selector::scalability::{GeneratedPacket, GeneratorConfig, ScalabilityMode, StreamGenerator};
use selector::{Layer, LayerLimits};
use sfu::engine::rtcp::{
    parse_compound, Nack, NackPairs, RtcpFeedback, RtcpWireWriter, RtcpWriter,
};
use sfu::engine::{
    DownTrackConfig, DownTrackId, Event, ReceiveError, RouterConfig, TrackConfig, TrackId,
    TransportId, DEFAULT_KEYFRAME_INTERVAL,
};
use sfu::sim::{Delivery, Direction, LinkConfig, Network, Refusal};

const DD_EXT: u8 = 11;
const SSRC: u32 = 0x1000;
const RTX_SSRC: u32 = 0x1001;
const FRAME: Duration = Duration::from_millis(33);
/// Loss starts once the subscribers have their first packets: a subscriber cannot know of a
/// lost packet before the first it receives (a browser would ask for a keyframe instead).
const JOIN: Duration = Duration::from_millis(300);
const LOSSY: Duration = Duration::from_millis(8_000);
const CLEAN_TAIL: Duration = Duration::from_millis(3_000);
/// How often a subscriber NACKs a gap again while it stays open.
const SUBSCRIBER_RETRY: Duration = Duration::from_millis(60);

/// Every link, each way: 20 to 45 ms, each packet its own jitter (so reordering). Loss and
/// duplicates are set for the lossy stretch only.
const LINK: LinkConfig = LinkConfig {
    delay: Duration::from_millis(20),
    jitter: Duration::from_millis(25),
    reorder: true,
    loss: 0.0,
    duplicate: 0.0,
    bottleneck: None,
};

/// The publisher: a generated L3T3 stream, kept for retransmission.
struct Publisher {
    generator: StreamGenerator,
    sent: HashMap<u16, Bytes>,
    frames: HashMap<u64, GeneratedPacket>,
    /// Packets per frame, to tell a whole frame from a split one.
    packets_per_frame: HashMap<u64, usize>,
    keyframe_requests: u64,
    /// The RTX stream's next sequence number.
    rtx_seq: u16,
}

impl Publisher {
    fn new(seed: u64) -> Self {
        let config = GeneratorConfig {
            keyframe_interval_tus: 90,
            packets_per_frame: 1..=3,
            seed,
            ssrc: SSRC,
            first_seq: seed as u16,
            ..Default::default()
        };
        Self {
            generator: StreamGenerator::new(ScalabilityMode::L3T3, config),
            sent: HashMap::new(),
            frames: HashMap::new(),
            packets_per_frame: HashMap::new(),
            keyframe_requests: 0,
            rtx_seq: 0,
        }
    }

    /// One temporal unit's packets.
    fn temporal_unit(&mut self) -> Vec<Bytes> {
        let structure = self.generator.structure().clone();
        let mut out = Vec::new();
        loop {
            let packet = self.generator.next().expect("endless");
            let bytes = Bytes::from(packet.rtp_bytes(DD_EXT, &structure));
            self.sent.insert(packet.sequence_number, bytes.clone());
            *self
                .packets_per_frame
                .entry(packet.frame_number)
                .or_default() += 1;
            let end_of_tu = packet.marker;
            self.frames.insert(packet.frame_number, packet);
            out.push(bytes);
            if end_of_tu {
                return out;
            }
        }
    }

    /// The router's RTCP: NACKed packets to send again as RTX, keyframe requests taken.
    fn on_rtcp(&mut self, datagram: &[u8]) -> Vec<Bytes> {
        let mut nacked = Vec::new();
        parse_compound(datagram, |item| match item {
            RtcpFeedback::Nack(nack) => nacked.extend(nack.pairs.lost()),
            RtcpFeedback::Pli(_) | RtcpFeedback::Fir(_) => {
                self.keyframe_requests += 1;
                self.generator.request_keyframe();
            }
            _ => {}
        })
        .expect("the router's RTCP parses");
        nacked
            .into_iter()
            .filter_map(|seq| {
                let original = self.sent.get(&seq)?;
                self.rtx_seq = self.rtx_seq.wrapping_add(1);
                Some(common::as_rtx(original, RTX_SSRC, self.rtx_seq))
            })
            .collect()
    }
}

/// What one subscriber received, and the gaps it is NACKing.
#[derive(Default)]
struct Subscriber {
    /// Output sequence number to its packet (the first copy).
    packets: BTreeMap<u16, Bytes>,
    first: Option<u16>,
    highest: Option<u16>,
    /// Missing output sequence numbers and when they were last NACKed.
    missing: BTreeMap<u16, Option<Instant>>,
}

impl Subscriber {
    fn receive(&mut self, packet: Bytes) {
        let seq = RtpPacket::parse(&packet)
            .expect("valid RTP out")
            .fields()
            .sequence_number;
        self.missing.remove(&seq);
        // Reordering may bring an earlier packet after the first received.
        if self.first.is_none_or(|f| f.wrapping_sub(seq) < 1 << 15) {
            self.first = Some(seq);
        }
        match self.highest {
            None => {}
            Some(h) if (1..1 << 15).contains(&seq.wrapping_sub(h)) => {
                let mut gap = h.wrapping_add(1);
                while gap != seq {
                    self.missing.entry(gap).or_insert(None);
                    gap = gap.wrapping_add(1);
                }
            }
            Some(_) => {}
        }
        if self.highest.is_none_or(|h| seq.wrapping_sub(h) < 1 << 15) {
            self.highest = Some(seq);
        }
        self.packets.entry(seq).or_insert(packet);
    }

    /// The gaps due for a NACK now, marked as NACKed.
    fn due(&mut self, now: Instant) -> Vec<u16> {
        let due: Vec<u16> = self
            .missing
            .iter()
            .filter(|&(_, &last)| last.is_none_or(|last| now >= last + SUBSCRIBER_RETRY))
            .map(|(&seq, _)| seq)
            .take(16)
            .collect();
        for seq in &due {
            self.missing.insert(*seq, Some(now));
        }
        due
    }

    /// When a gap is next due for a NACK, if one is open.
    fn next_due(&self, now: Instant) -> Option<Instant> {
        self.missing
            .values()
            .map(|last| last.map_or(now, |last| last + SUBSCRIBER_RETRY))
            .min()
    }
}

/// A subscription: its transport, its DownTrack and the subscriber.
type Leg = (TransportId, DownTrackId, Subscriber);

/// The call: the network with the router, the publisher and the subscribers.
struct Call {
    network: Network,
    /// The publisher's transport (each subscriber's is in its leg).
    publishing: TransportId,
    track: TrackId,
    loss: u32,
    duplicate: u32,
    publisher: Publisher,
    subscribers: Vec<Leg>,
    rtcp_writer: RtcpWireWriter,
    /// When the router sent each keyframe request, since the start.
    keyframe_requests: Vec<Duration>,
}

impl Call {
    fn new(seed: u64, loss: u32, duplicate: u32, targets: &[Layer]) -> Self {
        let mut network = Network::new(RouterConfig::default(), Instant::now(), seed);
        let mut track = TrackConfig::single(Codec::Av1, SSRC);
        track.dd_ext_id = Some(DD_EXT);
        track.streams[0].rtx_ssrc = Some(RTX_SSRC);
        let publishing = network.add_transport(LINK, LINK);
        let track = network
            .with_router(|router| router.publish(publishing, track))
            .expect("a fresh router");
        let subscribers = targets
            .iter()
            .enumerate()
            .map(|(i, &target)| {
                let mut config = DownTrackConfig::new(0x5000 + i as u32, 45);
                config.dd_ext_id = Some(DD_EXT);
                let limits = LayerLimits {
                    target,
                    max: Layer::MAX,
                };
                let transport = network.add_transport(LINK, LINK);
                let id = network
                    .with_router(|router| router.subscribe(transport, track, config, limits))
                    .expect("track");
                (transport, id, Subscriber::default())
            })
            .collect();
        Self {
            network,
            publishing,
            track,
            loss,
            duplicate,
            publisher: Publisher::new(seed),
            subscribers,
            rtcp_writer: RtcpWireWriter::new(b"subscriber").expect("a short CNAME"),
            keyframe_requests: Vec::new(),
        }
    }

    /// Loss and duplicates on every link, each way, or none.
    fn set_lossy(&mut self, lossy: bool) {
        let transports = self.subscribers.iter().map(|leg| leg.0);
        for transport in transports.chain([self.publishing]).collect::<Vec<_>>() {
            for direction in [Direction::Up, Direction::Down] {
                let link = self
                    .network
                    .link_config_mut(transport, direction)
                    .expect("on the network");
                link.loss = f64::from(self.loss * u32::from(lossy)) / 100.0;
                link.duplicate = f64::from(self.duplicate * u32::from(lossy)) / 100.0;
            }
        }
    }

    /// Frames every 33 ms until half a second before the end; the peers act on what arrived
    /// when it arrives, and the subscribers wake when a NACK is due again.
    fn run(&mut self) {
        let start = self.network.start();
        let end = start + LOSSY + CLEAN_TAIL;
        let last_frame = end - Duration::from_millis(500);
        let phases = [start + JOIN, start + LOSSY];
        let mut next_frame = start;
        let mut lossy = false;
        loop {
            let now = self.network.now();
            if (phases[0]..phases[1]).contains(&now) != lossy {
                lossy = !lossy;
                self.set_lossy(lossy);
            }
            if now >= next_frame && next_frame < last_frame {
                for packet in self.publisher.temporal_unit() {
                    self.network
                        .send_rtp(self.publishing, packet)
                        .expect("on the network");
                }
                next_frame += FRAME;
            }
            self.router_outcomes();
            self.publisher_step();
            self.subscribers_step(now);
            if now >= end {
                break;
            }
            let subscribers = self.subscribers.iter().filter_map(|s| s.2.next_due(now));
            let phase = phases.into_iter().filter(|&p| p > now);
            let frame = Some(next_frame).filter(|&f| f < last_frame);
            let wake = subscribers
                .chain(phase)
                .chain(frame)
                .fold(end, Instant::min);
            self.network.step(wake);
        }
        assert_eq!(self.network.counters().stale_timeouts, 0);
    }

    /// The router's refusals and keyframe requests since the last look.
    fn router_outcomes(&mut self) {
        for refusal in self.network.take_refused() {
            match refusal {
                // What the network does to well-formed packets: a copy or a repair of one
                // that arrived, one from far behind, one ahead of its keyframe's structure.
                Refusal::Rtp {
                    error:
                        ReceiveError::Duplicate
                        | ReceiveError::OutOfWindow
                        | ReceiveError::UnreadableDd { .. },
                    ..
                } => {}
                refusal => panic!("the router refused {refusal:?}"),
            }
        }
        let start = self.network.start();
        for (at, event) in self.network.take_events() {
            if let Event::KeyframeRequested { .. } = event {
                self.keyframe_requests.push(at - start);
            }
        }
    }

    /// The publisher answers the router's RTCP that arrived.
    fn publisher_step(&mut self) {
        for arrival in self.network.take_arrivals(self.publishing) {
            if let Delivery::Rtcp { datagram, .. } = arrival.delivery {
                for packet in self.publisher.on_rtcp(&datagram) {
                    self.network
                        .send_rtp(self.publishing, packet)
                        .expect("on the network");
                }
            }
        }
    }

    /// Subscribers receive what arrived, then NACK their gaps over their uplinks.
    fn subscribers_step(&mut self, now: Instant) {
        let mut buf = [0u8; 1500];
        for (transport, id, subscriber) in &mut self.subscribers {
            for arrival in self.network.take_arrivals(*transport) {
                if let Delivery::Media { packet, .. } = arrival.delivery {
                    subscriber.receive(packet);
                }
            }
            let due = subscriber.due(now);
            if !due.is_empty() {
                let mut pairs = NackPairs::default();
                for seq in due {
                    // A NACK holds 16 packets per pair and many pairs: these fit.
                    let _ = pairs.push(seq);
                }
                let media_ssrc = self.network.router().down_track_info(*id).map(|d| d.ssrc);
                let nack = RtcpFeedback::Nack(Nack {
                    sender_ssrc: 9,
                    media_ssrc: media_ssrc.expect("a known subscriber"),
                    pairs,
                });
                let len = self.rtcp_writer.write(&nack, &mut buf).expect("fits");
                self.network
                    .send_rtcp(*transport, Bytes::copy_from_slice(&buf[..len]))
                    .expect("on the network");
            }
        }
    }

    fn check(&self) {
        for (_, id, subscriber) in &self.subscribers {
            self.check_subscriber(*id, subscriber);
        }
        for pair in self.keyframe_requests.windows(2) {
            assert!(
                pair[1] - pair[0] >= DEFAULT_KEYFRAME_INTERVAL,
                "keyframe requests at {pair:?}: {:?}",
                self.keyframe_requests
            );
        }
        // Each the publisher got (the uplink may lose or duplicate some) was one of these.
        let sent = self.keyframe_requests.len() as u64;
        assert!(
            self.publisher.keyframe_requests <= 2 * sent,
            "{} requests arrived, {sent} sent",
            self.publisher.keyframe_requests
        );
        // Each way 20 to 45 ms.
        let rtt = self.network.router().publisher_rtt(self.track);
        if self.loss > 0 {
            let rtt = rtt.expect("retransmissions came back on RTX");
            assert!(
                (40..=90).contains(&rtt.as_millis()),
                "publisher round trip {rtt:?}"
            );
        }
    }

    fn check_subscriber(&self, id: DownTrackId, subscriber: &Subscriber) {
        let (Some(first), Some(highest)) = (subscriber.first, subscriber.highest) else {
            panic!("{id:?} received nothing");
        };
        let span = highest.wrapping_sub(first);
        assert_eq!(
            subscriber.packets.len(),
            usize::from(span) + 1,
            "{id:?}: every output sequence number arrived ({:?} still missing)",
            subscriber.missing.keys().take(8).collect::<Vec<_>>()
        );
        let mut packets_of: HashMap<u64, usize> = HashMap::new();
        let mut markers: HashMap<u32, u32> = HashMap::new();
        for packet in subscriber.packets.values() {
            let parsed = RtpPacket::parse(packet).expect("valid RTP out");
            let payload = parsed.payload();
            let Some(frame) = payload.first_chunk::<8>() else {
                continue; // A filler: padding only.
            };
            *packets_of.entry(u64::from_be_bytes(*frame)).or_default() += 1;
            *markers.entry(parsed.fields().timestamp).or_default() +=
                u32::from(parsed.fields().marker);
        }
        let arrived: HashSet<u64> = packets_of.keys().copied().collect();
        for (frame, &count) in &packets_of {
            assert_eq!(
                count, self.publisher.packets_per_frame[frame],
                "{id:?}: frame {frame} split"
            );
            for reference in self.publisher.frames[frame].references.iter() {
                assert!(
                    arrived.contains(reference),
                    "{id:?}: frame {frame} without its reference {reference}"
                );
            }
        }
        assert!(
            markers.values().all(|&m| m <= 1),
            "{id:?}: two markers in one temporal unit"
        );
        assert!(arrived.len() > 100, "{id:?}: only {} frames", arrived.len());
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(8))]

    #[test]
    fn subscribers_get_decodable_contiguous_streams_through_a_lossy_network(
        seed in any::<u64>(),
        loss in 0..12u32,
        duplicate in 0..4u32,
    ) {
        let targets = [Layer::new(0, 2), Layer::new(1, 1), Layer::MAX];
        let mut call = Call::new(seed, loss, duplicate, &targets);
        call.run();
        call.check();
    }
}
