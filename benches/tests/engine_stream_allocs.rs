//! The Router over a whole simulated call, allocations counted per call into it: an L3T3
//! publisher with transport-wide sequence numbers losing one packet in fifty, three
//! subscribers sending receiver reports and NACKs, the publisher's sender reports, and the
//! timers run when `poll_timeout` says, over more than two keyframe intervals. Every kind of
//! call is held to an exact budget, and the call shown to do what is counted.

use std::time::{Duration, Instant};

use benches::alloc_counter::{AllocCount, CountingAllocator};
use bytes::Bytes;
use rtp_ext::codec::Codec;
use rtp_ext::rtp::{write_header, ExtensionElement, ExtensionIds, ExtensionSelection, RtpPacket};
use selector::scalability::{GeneratorConfig, ScalabilityMode, StreamGenerator};
use selector::{Layer, LayerLimits};
use sfu::engine::rtcp::{
    write_compound, Nack, NackPairs, ReceiverReport, ReportBlock, ReportBlocks, RtcpFeedback,
    RtcpWireWriter, SenderReport,
};
use sfu::engine::{
    DownTrackConfig, DownTrackId, Router, RouterConfig, RtcpTarget, TrackConfig, TrackId,
    TransportCc, TransportId,
};

#[global_allocator]
static ALLOCATOR: CountingAllocator = CountingAllocator;

const SSRC: u32 = 0x1000;
const DD_EXT: u8 = 11;
const TWCC_EXT: u8 = 3;
/// Temporal units of the call at 30 fps: 23 s, keyframes at 0, 300 and 600.
const TUS: u64 = 700;
const FRAME: Duration = Duration::from_micros(33_333);
/// The first second is not counted: the router's queues grow to their working size.
const WARM_UP_TUS: u64 = 30;
/// Subscribers report (a receiver report and a NACK) every this many temporal units.
const REPORT_EVERY: u64 = 10;
/// Publisher packets lost on the way in: those whose sequence number is 7 modulo this (but
/// not a keyframe's structure, without which nothing is forwarded until the next).
const LOSS_EVERY: u16 = 50;
const SUBSCRIBERS: [Layer; 3] = [Layer::MAX, Layer::new(1, 1), Layer::new(0, 0)];

/// The receiver's parse of a keyframe's structure: its template list and the `Arc` sharing it.
const PARSED_STRUCTURE: u64 = 2;
/// A keyframe's structure packet goes to every subscriber, each DownTrack keeping its large
/// DD in slots of its own: nothing per subscriber.
const STRUCTURE_PACKET: u64 = PARSED_STRUCTURE;

/// A publisher packet: its bytes, and whether it carries the keyframe's structure.
struct Packet {
    tu: u64,
    seq: u16,
    bytes: Bytes,
    structure: bool,
}

/// The L3T3 stream with a transport-wide sequence number added to each packet.
fn stream() -> Vec<Packet> {
    let config = GeneratorConfig {
        keyframe_interval_tus: 300,
        ssrc: SSRC,
        ..Default::default()
    };
    let generator = StreamGenerator::new(ScalabilityMode::L3T3, config);
    let structure = generator.structure().clone();
    let mut out = [0u8; 1500];
    generator
        .take_while(|p| p.temporal_unit < TUS)
        .map(|p| {
            let plain = p.rtp_bytes(DD_EXT, &structure);
            let source = RtpPacket::parse(&plain).expect("a generated packet");
            let twcc = p.sequence_number.to_be_bytes();
            let added = [ExtensionElement {
                id: TWCC_EXT,
                data: &twcc,
            }];
            let selection = ExtensionSelection {
                keep: ExtensionIds::of(&[DD_EXT]),
                added: &added,
                two_byte_allowed: true,
            };
            let len = write_header(&source, &source.fields(), &selection, &mut out).expect("fits");
            let mut bytes = out[..len].to_vec();
            bytes.extend_from_slice(source.payload());
            Packet {
                tu: p.temporal_unit,
                seq: p.sequence_number,
                bytes: shared(bytes),
                structure: p.descriptor.attached_structure.is_some(),
            }
        })
        .collect()
}

/// `Bytes` in their shared form, as a socket's receive buffer hands them out (a `Bytes` made
/// from a `Vec` allocates its shared header on its first clone).
fn shared(packet: Vec<u8>) -> Bytes {
    let bytes = Bytes::from(packet);
    drop(bytes.clone());
    bytes
}

/// Allocations and what came out, by kind of call, over the counted part of the call.
#[derive(Debug, Default)]
struct Tally {
    /// (allocations, operations) of each kind.
    delta_packets: (u64, u64),
    structure_packets: (u64, u64),
    /// Timer runs that queued no transport-wide feedback, and those that did.
    timers: (u64, u64),
    twcc_timers: (u64, u64),
    subscriber_rtcp: (u64, u64),
    publisher_rtcp: (u64, u64),
    /// Outputs.
    forwarded: u64,
    retransmitted: u64,
    twcc_feedback: u64,
    nacks_to_publisher: u64,
    receiver_reports: u64,
    sender_reports: u64,
    /// Publisher packets lost on the way in.
    lost: u64,
}

fn add(kind: &mut (u64, u64), allocs: u64) {
    kind.0 += allocs;
    kind.1 += 1;
}

struct Call {
    router: Router,
    track: TrackId,
    publisher: TransportId,
    subscribers: Vec<DownTrackId>,
    /// Each subscriber's transport, in the order of `subscribers`.
    viewers: Vec<TransportId>,
    /// The latest sequence number sent to each subscriber, which its NACK asks again.
    last_sent: Vec<Option<u16>>,
    writer: RtcpWireWriter,
    buf: [u8; 1500],
    counting: bool,
    tally: Tally,
}

impl Call {
    fn new() -> Self {
        let mut router = Router::new(RouterConfig::default());
        let mut track = TrackConfig::single(Codec::Av1, SSRC);
        track.dd_ext_id = Some(DD_EXT);
        track.transport_cc = Some(TransportCc { ext_id: TWCC_EXT });
        let publisher = router.add_transport();
        let track = router.publish(publisher, track).expect("fresh router");
        let viewers: Vec<TransportId> =
            SUBSCRIBERS.iter().map(|_| router.add_transport()).collect();
        let subscribers = (0..SUBSCRIBERS.len())
            .map(|i| {
                let mut config = DownTrackConfig::new(0x5000 + i as u32, 45);
                config.dd_ext_id = Some(DD_EXT);
                let limits = LayerLimits {
                    target: SUBSCRIBERS[i],
                    max: Layer::MAX,
                };
                router
                    .subscribe(viewers[i], track, config, limits)
                    .expect("track")
            })
            .collect();
        Self {
            router,
            track,
            publisher,
            subscribers,
            viewers,
            last_sent: vec![None; SUBSCRIBERS.len()],
            writer: RtcpWireWriter::new(b"viewer").expect("a short CNAME"),
            buf: [0; 1500],
            counting: false,
            tally: Tally::default(),
        }
    }

    /// Media out of the router: (forwarded, retransmitted).
    fn drain_media(&mut self) -> (u64, u64) {
        let (mut forwarded, mut retransmitted) = (0, 0);
        while let Some(out) = self.router.poll_transmit(&mut self.buf) {
            if out.transmit.retransmission {
                retransmitted += 1;
            } else {
                forwarded += 1;
                let seq = u16::from_be_bytes([self.buf[2], self.buf[3]]);
                let i = self.subscribers.iter().position(|&d| d == out.down_track);
                self.last_sent[i.expect("ours")] = Some(seq);
            }
        }
        while self.router.poll_event().is_some() {}
        (forwarded, retransmitted)
    }

    fn publisher_packet(&mut self, now: Instant, packet: &Packet) {
        let mut forwarded = 0;
        let allocs = AllocCount::during(|| {
            self.router
                .handle_rtp(now, self.publisher, packet.bytes.clone())
                .expect("a packet of the track");
            forwarded = self.drain_media().0;
        })
        .allocs;
        // The first subscriber takes every layer.
        assert!(forwarded >= 1, "packet {} went nowhere", packet.seq);
        if self.counting {
            self.tally.forwarded += forwarded;
            let kind = match packet.structure {
                true => &mut self.tally.structure_packets,
                false => &mut self.tally.delta_packets,
            };
            add(kind, allocs);
        }
    }

    /// What `poll_rtcp` wrote, counted by kind; returns the transport-wide feedback packets.
    fn drain_rtcp(&mut self) -> u64 {
        let mut feedback = 0;
        while let Some(out) = self.router.poll_rtcp(&mut self.buf) {
            let packet = &self.buf[..out.len];
            let to_publisher = out.to == RtcpTarget::Publisher(self.track);
            match (packet[1], packet[0] & 0x1F) {
                (205, 15) => feedback += 1,
                (205, 1) if to_publisher => {
                    self.tally.nacks_to_publisher += u64::from(self.counting)
                }
                (201, _) if to_publisher => self.tally.receiver_reports += u64::from(self.counting),
                (200, _) => self.tally.sender_reports += u64::from(self.counting),
                _ => {}
            }
        }
        feedback
    }

    fn timers(&mut self, now: Instant) {
        while self.router.poll_timeout().is_some_and(|at| at <= now) {
            let mut feedback = 0;
            let allocs = AllocCount::during(|| {
                self.router.handle_timeout(now);
                feedback = self.drain_rtcp();
            })
            .allocs;
            if !self.counting {
                continue;
            }
            self.tally.twcc_feedback += feedback;
            match feedback {
                0 => add(&mut self.tally.timers, allocs),
                _ => add(&mut self.tally.twcc_timers, allocs),
            }
        }
    }

    /// Each subscriber's receiver report and a NACK for the latest packet it was sent.
    fn subscriber_reports(&mut self, now: Instant) {
        for i in 0..self.subscribers.len() {
            let ssrc = 0x5000 + i as u32;
            let Some(seq) = self.last_sent[i] else {
                continue;
            };
            let block = ReportBlock {
                ssrc,
                fraction_lost: 0,
                total_lost: 0,
                highest_sequence: u32::from(seq),
                jitter: 10,
                last_sr: 0,
                delay_since_last_sr: 0,
            };
            let report = RtcpFeedback::ReceiverReport(ReceiverReport {
                sender_ssrc: 0x9000,
                blocks: ReportBlocks::try_from(&[block][..]).expect("one block"),
            });
            let mut pairs = NackPairs::default();
            pairs.push(seq).expect("room for one");
            let nack = RtcpFeedback::Nack(Nack {
                sender_ssrc: 0x9000,
                media_ssrc: ssrc,
                pairs,
            });
            let len =
                write_compound(&mut self.writer, &[report], &[nack], &mut self.buf).expect("fits");
            let datagram = self.buf[..len].to_vec();
            let viewer = self.viewers[i];
            let mut retransmitted = 0;
            let allocs = AllocCount::during(|| {
                self.router
                    .handle_rtcp(now, viewer, &datagram)
                    .expect("a subscriber");
                retransmitted = self.drain_media().1;
            })
            .allocs;
            assert_eq!(retransmitted, 1, "the NACK of subscriber {i} answered");
            if self.counting {
                self.tally.retransmitted += retransmitted;
                add(&mut self.tally.subscriber_rtcp, allocs);
            }
        }
    }

    fn publisher_report(&mut self, now: Instant, tu: u64) {
        let report = RtcpFeedback::SenderReport(SenderReport {
            ssrc: SSRC,
            ntp_time: (0xE8F0_0000 + tu) << 32,
            rtp_time: (tu * 3000) as u32,
            packet_count: tu as u32,
            octet_count: tu as u32 * 1000,
        });
        let len = write_compound(&mut self.writer, &[report], &[], &mut self.buf).expect("fits");
        let datagram = self.buf[..len].to_vec();
        let publisher = self.publisher;
        let allocs = AllocCount::during(|| {
            self.router
                .handle_rtcp(now, publisher, &datagram)
                .expect("the track");
        })
        .allocs;
        if self.counting {
            add(&mut self.tally.publisher_rtcp, allocs);
        }
    }
}

fn run() -> Tally {
    let start = Instant::now();
    let mut call = Call::new();
    let packets = stream();
    let mut tu = 0;
    for packet in &packets {
        while tu < packet.tu {
            // The temporal unit is over: its time passes, timers and reports run.
            tu += 1;
            let now = start + FRAME * tu as u32;
            call.counting = tu >= WARM_UP_TUS;
            call.timers(now);
            if tu % REPORT_EVERY == 0 {
                call.subscriber_reports(now);
            }
            if tu % 30 == 0 {
                call.publisher_report(now, tu);
            }
        }
        if packet.structure || packet.seq % LOSS_EVERY != 7 {
            call.publisher_packet(start + FRAME * tu as u32, packet);
        } else if call.counting {
            call.tally.lost += 1;
        }
    }
    call.tally
}

#[test]
fn a_whole_call_allocates_only_for_keyframe_structures() {
    let tally = run();
    let counted_tus = TUS - WARM_UP_TUS;
    let counted_seconds = counted_tus / 30;
    // What each counted kind produced: none of the budgets below holds vacuously.
    assert!(tally.delta_packets.1 > counted_tus, "{tally:?}");
    assert_eq!(tally.structure_packets.1, 2, "keyframes at 300 and 600");
    assert!(tally.forwarded > tally.delta_packets.1, "{tally:?}");
    assert!(tally.timers.1 > 0, "{tally:?}");
    assert!(tally.nacks_to_publisher >= tally.lost, "{tally:?}");
    assert!(tally.receiver_reports >= counted_seconds, "{tally:?}");
    let sender_reports = counted_seconds * SUBSCRIBERS.len() as u64;
    assert!(tally.sender_reports >= sender_reports, "{tally:?}");
    // Due every 100 ms, sent at the next timer run: every fourth frame at the latest.
    assert!(tally.twcc_feedback >= counted_tus / 4, "{tally:?}");
    assert_eq!(
        tally.twcc_timers.1, tally.twcc_feedback,
        "one per timer run"
    );
    assert_eq!(tally.retransmitted, tally.subscriber_rtcp.1);
    assert!(tally.publisher_rtcp.1 >= counted_seconds, "{tally:?}");

    assert_eq!(tally.delta_packets.0, 0, "delta packets: {tally:?}");
    assert_eq!(
        tally.structure_packets.0,
        STRUCTURE_PACKET * tally.structure_packets.1,
        "keyframe structures: {tally:?}"
    );
    assert_eq!(
        tally.timers.0, 0,
        "NACKs, keyframe requests, reports: {tally:?}"
    );
    // Transport-wide feedback is built in buffers its recorder sized once
    // (`engine/transport/twcc.rs`) and written into the host's: it allocated 5 a feedback
    // while it was built into `Vec`s of its own (the arrivals taken out, the symbols, the
    // deltas, the body, the packet).
    assert_eq!(tally.twcc_timers.0, 0, "transport-wide feedback: {tally:?}");
    assert_eq!(tally.subscriber_rtcp.0, 0, "reports and NACKs: {tally:?}");
    assert_eq!(tally.publisher_rtcp.0, 0, "sender reports: {tally:?}");
}
