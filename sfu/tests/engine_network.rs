//! The engine between a publisher and subscribers over a seeded in-memory network: latency
//! with jitter (so reordering), loss and duplicates on every link, both ways. The publisher
//! answers the router's NACKs and keyframe requests; each subscriber NACKs its own gaps until
//! they are filled. After a lossy stretch and a clean tail, per subscriber:
//! - every output sequence number from its first to its last arrived (repaired or filler);
//! - no frame is split: a frame that arrived at all arrived whole;
//! - every frame that arrived has every frame it references arrived too: it decodes;
//! - at most one marker per output timestamp;
//! - the router asked the publisher for keyframes no more often than once per interval;
//! - and the round trip to the publisher was measured from its RTX answers.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::time::{Duration, Instant};

use bytes::Bytes;
use proptest::prelude::*;
use rtp_ext::codec::Codec;
use rtp_ext::rtp::RtpPacket;
use selector::scalability::{
    GeneratedPacket, GeneratorConfig, ScalabilityMode, SeededRng, StreamGenerator,
};
use selector::{Layer, LayerLimits};
use sfu::engine::rtcp::{
    parse_compound, Nack, NackPairs, RtcpFeedback, RtcpWireWriter, RtcpWriter,
};
use sfu::engine::{
    DownTrackConfig, DownTrackId, ReceiveError, Router, RouterConfig, RtcpTarget, TrackConfig,
    TrackId, TransportId, DEFAULT_KEYFRAME_INTERVAL,
};

const DD_EXT: u8 = 11;
const SSRC: u32 = 0x1000;
const RTX_SSRC: u32 = 0x1001;
const FRAME_MS: u64 = 33;
/// Loss starts once the subscribers have their first packets: a subscriber cannot know of a
/// lost packet before the first it receives (a browser would ask for a keyframe instead).
const JOIN_MS: u64 = 300;
const LOSSY_MS: u64 = 8_000;
const CLEAN_TAIL_MS: u64 = 3_000;
/// How often a subscriber NACKs a gap again while it stays open.
const SUBSCRIBER_RETRY_MS: u64 = 60;

/// One direction of one path: what is sent arrives after a base latency plus jitter, unless
/// lost; some packets arrive twice. Loss stops after the lossy stretch.
struct Link<T> {
    rng: SeededRng,
    loss: u32,
    duplicate: u32,
    in_flight: BTreeMap<(u64, u64), T>,
    sent: u64,
}

impl<T: Clone> Link<T> {
    fn new(seed: u64, loss: u32, duplicate: u32) -> Self {
        Self {
            rng: SeededRng(seed),
            loss,
            duplicate,
            in_flight: BTreeMap::new(),
            sent: 0,
        }
    }

    fn send(&mut self, now_ms: u64, item: T) {
        let lossy = (JOIN_MS..LOSSY_MS).contains(&now_ms);
        if lossy && self.rng.chance(self.loss) {
            return;
        }
        let copies = if lossy && self.rng.chance(self.duplicate) {
            2
        } else {
            1
        };
        for _ in 0..copies {
            let at = now_ms + 20 + self.rng.below(25);
            self.sent += 1;
            self.in_flight.insert((at, self.sent), item.clone());
        }
    }

    fn arrivals(&mut self, now_ms: u64) -> Vec<T> {
        let later = self.in_flight.split_off(&(now_ms + 1, 0));
        std::mem::replace(&mut self.in_flight, later)
            .into_values()
            .collect()
    }
}

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
                Some(as_rtx(original, self.rtx_seq))
            })
            .collect()
    }
}

/// `packet` as RTX (RFC 4588): its header on the RTX SSRC with the RTX sequence number, then
/// the original sequence number and payload.
fn as_rtx(packet: &[u8], rtx_seq: u16) -> Bytes {
    let original = RtpPacket::parse(packet).expect("our packet");
    let mut rtx = packet[..original.header_len()].to_vec();
    rtx[8..12].copy_from_slice(&RTX_SSRC.to_be_bytes());
    rtx[2..4].copy_from_slice(&rtx_seq.to_be_bytes());
    rtx.extend_from_slice(&original.fields().sequence_number.to_be_bytes());
    rtx.extend_from_slice(original.payload());
    Bytes::from(rtx)
}

/// What one subscriber received, and the gaps it is NACKing.
#[derive(Default)]
struct Subscriber {
    /// Output sequence number to its packet (the first copy).
    packets: BTreeMap<u16, Vec<u8>>,
    first: Option<u16>,
    highest: Option<u16>,
    /// Missing output sequence numbers and when they were last NACKed.
    missing: BTreeMap<u16, u64>,
}

impl Subscriber {
    fn receive(&mut self, packet: Vec<u8>) {
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
                    self.missing.entry(gap).or_insert(0);
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
    fn due(&mut self, now_ms: u64) -> Vec<u16> {
        let due: Vec<u16> = self
            .missing
            .iter()
            .filter(|&(_, &last)| last == 0 || now_ms >= last + SUBSCRIBER_RETRY_MS)
            .map(|(&seq, _)| seq)
            .take(16)
            .collect();
        for seq in &due {
            self.missing.insert(*seq, now_ms.max(1));
        }
        due
    }
}

/// A subscription: its transport and DownTrack, the subscriber, the link to it and the link
/// back.
type Leg = (
    TransportId,
    DownTrackId,
    Subscriber,
    Link<Vec<u8>>,
    Link<Vec<u8>>,
);

struct Network {
    now: Instant,
    router: Router,
    /// The publisher's transport (each subscriber's is in its leg).
    publishing: TransportId,
    track: TrackId,
    loss: u32,
    publisher: Publisher,
    uplink: Link<Bytes>,
    to_publisher: Link<Vec<u8>>,
    subscribers: Vec<Leg>,
    rtcp_writer: RtcpWireWriter,
    /// When the router sent each keyframe request (ms).
    keyframe_requests: Vec<u64>,
}

impl Network {
    fn new(seed: u64, loss: u32, duplicate: u32, targets: &[Layer]) -> Self {
        let mut router = Router::new(RouterConfig::default());
        let mut track = TrackConfig::single(Codec::Av1, SSRC);
        track.dd_ext_id = Some(DD_EXT);
        track.streams[0].rtx_ssrc = Some(RTX_SSRC);
        let publishing = router.add_transport();
        let track = router.publish(publishing, track).expect("a fresh router");
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
                let transport = router.add_transport();
                let id = router
                    .subscribe(transport, track, config, limits)
                    .expect("track");
                let seed = seed ^ (i as u64 + 1) << 32;
                let down = Link::new(seed, loss, duplicate);
                let up = Link::new(seed ^ 0xFF, loss, duplicate);
                (transport, id, Subscriber::default(), down, up)
            })
            .collect();
        Self {
            now: Instant::now(),
            router,
            publishing,
            track,
            loss,
            publisher: Publisher::new(seed),
            uplink: Link::new(seed ^ 1, loss, duplicate),
            to_publisher: Link::new(seed ^ 2, loss, duplicate),
            subscribers,
            rtcp_writer: RtcpWireWriter::new(b"subscriber").expect("a short CNAME"),
            keyframe_requests: Vec::new(),
        }
    }

    fn run(&mut self) {
        let start = self.now;
        for ms in 0..LOSSY_MS + CLEAN_TAIL_MS {
            let now = start + Duration::from_millis(ms);
            if ms % FRAME_MS == 0 && ms < LOSSY_MS + CLEAN_TAIL_MS - 500 {
                for packet in self.publisher.temporal_unit() {
                    self.uplink.send(ms, packet);
                }
            }
            for packet in self.uplink.arrivals(ms) {
                match self.router.handle_rtp(now, self.publishing, packet) {
                    // What the network does to well-formed packets: a copy or a repair of
                    // one that arrived, one from far behind, one ahead of its keyframe's
                    // structure.
                    Ok(())
                    | Err(ReceiveError::Duplicate)
                    | Err(ReceiveError::OutOfWindow)
                    | Err(ReceiveError::UnreadableDd { .. }) => {}
                    Err(e) => panic!("at {ms} ms the router refused a packet: {e:?}"),
                }
            }
            for datagram in self.to_publisher.arrivals(ms) {
                for packet in self.publisher.on_rtcp(&datagram) {
                    self.uplink.send(ms, packet);
                }
            }
            self.subscribers_step(now, ms);
            self.router.handle_timeout(now);
            self.drain(ms);
        }
    }

    /// Subscribers receive what arrived, then NACK their gaps over their uplinks.
    fn subscribers_step(&mut self, now: Instant, ms: u64) {
        let mut buf = [0u8; 1500];
        for (transport, id, subscriber, down, up) in &mut self.subscribers {
            for packet in down.arrivals(ms) {
                subscriber.receive(packet);
            }
            let due = subscriber.due(ms);
            if !due.is_empty() {
                let mut pairs = NackPairs::default();
                for seq in due {
                    // A NACK holds 16 packets per pair and many pairs: these fit.
                    let _ = pairs.push(seq);
                }
                let media_ssrc = self.router.down_track_info(*id).map(|d| d.ssrc);
                let nack = RtcpFeedback::Nack(Nack {
                    sender_ssrc: 9,
                    media_ssrc: media_ssrc.expect("a known subscriber"),
                    pairs,
                });
                let len = self.rtcp_writer.write(&nack, &mut buf).expect("fits");
                up.send(ms, buf[..len].to_vec());
            }
            for datagram in up.arrivals(ms) {
                self.router
                    .handle_rtcp(now, *transport, &datagram)
                    .expect("a known subscriber");
            }
        }
    }

    fn drain(&mut self, ms: u64) {
        let mut buf = [0u8; 1500];
        while let Some(out) = self.router.poll_transmit(&mut buf) {
            let mut bytes = buf[..out.transmit.len].to_vec();
            bytes.extend_from_slice(&out.transmit.payload);
            if let Some((.., down, _)) = self.subscribers.iter_mut().find(|s| s.0 == out.transport)
            {
                down.send(ms, bytes);
            }
        }
        while let Some(rtcp) = self.router.poll_rtcp(&mut buf) {
            if let RtcpTarget::Publisher(_) = rtcp.to {
                let datagram = &buf[..rtcp.len];
                let mut keyframe = false;
                parse_compound(datagram, |item| {
                    keyframe |= matches!(item, RtcpFeedback::Pli(_) | RtcpFeedback::Fir(_));
                })
                .expect("the router's RTCP parses");
                if keyframe {
                    self.keyframe_requests.push(ms);
                }
                self.to_publisher.send(ms, datagram.to_vec());
            }
        }
    }

    fn check(&self) {
        for (_, id, subscriber, _, _) in &self.subscribers {
            self.check_subscriber(*id, subscriber);
        }
        let interval_ms = DEFAULT_KEYFRAME_INTERVAL.as_millis() as u64;
        for pair in self.keyframe_requests.windows(2) {
            assert!(
                pair[1] - pair[0] >= interval_ms,
                "keyframe requests at {pair:?} ms: {:?}",
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
        // Each way 20-44 ms, and the router polls every millisecond.
        let rtt = self.router.publisher_rtt(self.track);
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
        let mut network = Network::new(seed, loss, duplicate, &targets);
        network.run();
        network.check();
    }
}
