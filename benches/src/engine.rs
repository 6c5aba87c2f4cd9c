//! Engine cases: packets through the Router, from a publisher's packet to each subscriber's
//! header in a caller buffer.

use std::time::{Duration, Instant};

use bytes::Bytes;
use rtp_ext::codec::{Codec, PictureId, TemporalLayerId, Tl0PicIdx, Vp8Descriptor, Vp8Temporal};
use selector::scalability::{GeneratorConfig, ScalabilityMode, StreamGenerator};
use selector::{Layer, LayerLimits};
use sfu::engine::rtcp::{Nack, NackPairs, RtcpFeedback, RtcpWireWriter, RtcpWriter};
use sfu::engine::{
    DownTrack, DownTrackConfig, PacketRef, ParsedPacket, Receiver, Router, RouterConfig,
    TrackConfig, TrackId, TransportId, MAX_RESENDS,
};
use sfu::sim::{LinkConfig, Network};

use crate::{Case, Stream};

const DD_EXT: u8 = 11;
const TWCC_EXT: u8 = 3;
/// Packets replayed per pass; a fresh router starts each pass (sequence numbers repeat).
const PASS_PACKETS: usize = 20_000;
/// Packets per pass of the single-DownTrack cases. In the engine the packet a DownTrack writes
/// was parsed just before and is in cache; a short pass keeps the pre-parsed packets in cache
/// too, where 20,000 of them would measure memory instead. The fresh DownTrack per pass costs
/// its few allocations once per pass.
const FORWARD_PASS: usize = 1_000;

pub fn cases() -> Vec<Case> {
    let mut cases = vec![
        receive(),
        forward("forward/av1_l3t3/subscriber", l3t3_track(), l3t3_packets()),
        forward(
            "forward/vp8/subscriber",
            TrackConfig::single(Codec::Vp8, SSRC),
            synthetic(vp8_payload),
        ),
        forward(
            "forward/h264/subscriber",
            TrackConfig::single(Codec::H264, SSRC),
            synthetic(h264_payload),
        ),
        forward(
            "forward/opus/subscriber",
            TrackConfig::single(Codec::Opus, SSRC),
            synthetic(opus_payload),
        ),
    ];
    cases.extend([1, 10, 100, 1000].map(fanout));
    // Each subscriber packet also stamped with its transport's sequence, recorded in the
    // send history and charged to the transport's pacer.
    cases.push(replay(
        "paced/av1_l3t3/100",
        l3t3_track(),
        l3t3_packets(),
        100,
        true,
    ));
    cases.push(nack_answer());
    cases
}

/// A subscriber's NACK for one packet it was sent, parsed, looked up and answered: the
/// retransmission's header written into the caller's buffer. Cycles over the last packets a
/// subscriber was sent; a packet is resent at most `MAX_RESENDS` times, so after that many
/// rounds the next packets of the stream are forwarded (their cost spread over the rounds,
/// about a tenth of an answer), and the stream starts over on a fresh router once used up.
fn nack_answer() -> Case {
    let mut state = NackAnswer::new();
    Case::new("nack/answer/av1_l3t3", move || state.answer())
}

/// Packets in the subscriber's window of NACKed packets.
const NACKED: usize = 200;

struct NackAnswer {
    /// Every input's time: nothing here is timed.
    now: Instant,
    router: Router,
    publisher: TransportId,
    viewer: TransportId,
    /// The stream's packets; `next` is the first not forwarded yet.
    packets: Vec<Bytes>,
    next: usize,
    /// A NACK of each of the last packets sent, and how many were answered since they were.
    nacks: Vec<Vec<u8>>,
    asked: usize,
    writer: RtcpWireWriter,
    buf: [u8; 1500],
}

impl NackAnswer {
    /// A router with the stream's subscriber, sent its first packets (through a session on
    /// the network).
    fn new() -> Self {
        let now = Instant::now();
        let ideal = LinkConfig::default();
        let mut network = Network::new(RouterConfig::default(), now, 0);
        let publisher = network.add_transport(ideal, ideal);
        let viewer = network.add_transport(ideal, ideal);
        let mut config = DownTrackConfig::new(0x5000, 45);
        config.dd_ext_id = Some(DD_EXT);
        let limits = LayerLimits {
            target: Layer::MAX,
            max: Layer::MAX,
        };
        network.with_router(|router| {
            let track = router
                .publish(publisher, l3t3_track())
                .expect("fresh router");
            router
                .subscribe(viewer, track, config, limits)
                .expect("track");
        });
        let mut state = Self {
            now,
            router: network.into_router(),
            publisher,
            viewer,
            packets: l3t3_packets().bytes,
            next: 0,
            nacks: Vec::new(),
            asked: 0,
            writer: RtcpWireWriter::new(b"bench").expect("a short CNAME"),
            buf: [0; 1500],
        };
        state.forward_next();
        state
    }

    /// Forwards the stream's next packets to the subscriber and NACKs those from now on,
    /// written over the last NACKs, so the answers' figures count no allocation of the
    /// bench's own.
    fn forward_next(&mut self) {
        let now = self.now;
        let mut sent = 0;
        for packet in &self.packets[self.next..self.next + NACKED] {
            (self.router.handle_rtp(now, self.publisher, packet.clone()))
                .expect("a known publisher");
            while let Some(out) = self.router.poll_transmit(&mut self.buf) {
                let seq = u16::from_be_bytes([self.buf[2], self.buf[3]]);
                if self.nacks.len() == sent {
                    self.nacks.push(Vec::new());
                }
                nack_into(&mut self.writer, seq, &mut self.nacks[sent]);
                sent += 1;
                std::hint::black_box(out);
            }
        }
        self.nacks.truncate(sent);
        self.next += NACKED;
        self.asked = 0;
    }

    fn answer(&mut self) {
        if self.asked == self.nacks.len() * usize::from(MAX_RESENDS) {
            if self.next + NACKED > self.packets.len() {
                *self = Self::new();
            } else {
                self.forward_next();
            }
        }
        let nack = &self.nacks[self.asked % self.nacks.len()];
        self.asked += 1;
        (self.router.handle_rtcp(self.now, self.viewer, nack)).expect("a known subscriber");
        let mut answered = 0;
        while let Some(out) = self.router.poll_transmit(&mut self.buf) {
            answered += u32::from(std::hint::black_box(&out).transmit.retransmission);
        }
        assert_eq!(answered, 1, "every NACK is answered");
    }
}

/// A NACK of `seq` from the subscriber of SSRC 0x5000, as it comes on the wire, into `out`.
fn nack_into(writer: &mut RtcpWireWriter, seq: u16, out: &mut Vec<u8>) {
    let mut pairs = NackPairs::default();
    pairs.push(seq).expect("room for one");
    let nack = RtcpFeedback::Nack(Nack {
        sender_ssrc: 9,
        media_ssrc: 0x5000,
        pairs,
    });
    let mut buf = [0; 64];
    let len = writer.write(&nack, &mut buf).expect("fits");
    out.clear();
    out.extend_from_slice(&buf[..len]);
}

fn l3t3_track() -> TrackConfig {
    let mut config = TrackConfig::single(Codec::Av1, 0x1000);
    config.dd_ext_id = Some(DD_EXT);
    config
}

/// A stream's packets, and which of them carry a keyframe's dependency structure.
struct Packets {
    bytes: Vec<Bytes>,
    structures: Vec<usize>,
}

/// An L3T3 stream from its first keyframe on (a keyframe every 300 temporal units).
fn l3t3_packets() -> Packets {
    let config = GeneratorConfig {
        keyframe_interval_tus: 300,
        ssrc: 0x1000,
        ..Default::default()
    };
    let generator = StreamGenerator::new(ScalabilityMode::L3T3, config);
    let structure = generator.structure().clone();
    let packets: Vec<_> = generator.take(PASS_PACKETS).collect();
    Packets {
        bytes: packets
            .iter()
            .map(|p| shared(p.rtp_bytes(DD_EXT, &structure)))
            .collect(),
        structures: (0..packets.len())
            .filter(|&i| packets[i].descriptor.attached_structure.is_some())
            .collect(),
    }
}

/// SSRC of the synthetic single-stream tracks.
const SSRC: u32 = 0x3000;

/// One packet per frame (or audio frame), 3000 ticks apart, each with `payload(i)`; no DD.
fn synthetic(payload: fn(usize) -> Vec<u8>) -> Packets {
    let bytes = (0..PASS_PACKETS)
        .map(|i| {
            let mut p = vec![0x80, 0x80 | 96];
            p.extend_from_slice(&(i as u16).to_be_bytes());
            p.extend_from_slice(&(i as u32 * 3000).to_be_bytes());
            p.extend_from_slice(&SSRC.to_be_bytes());
            p.extend_from_slice(&payload(i));
            shared(p)
        })
        .collect();
    Packets {
        bytes,
        structures: Vec::new(),
    }
}

/// `Bytes` already in its shared form, as a socket's receive buffer hands them out: a `Bytes`
/// made from a `Vec` allocates its shared header on its first clone, which would otherwise be
/// charged to the engine.
fn shared(packet: Vec<u8>) -> Bytes {
    let bytes = Bytes::from(packet);
    drop(bytes.clone());
    bytes
}

/// VP8 (RFC 7741): a descriptor with a 15-bit picture id, TL0PICIDX and TID 0, the payload
/// header (a keyframe first), then frame data.
fn vp8_payload(i: usize) -> Vec<u8> {
    let descriptor = Vp8Descriptor {
        extended: true,
        start_of_partition: true,
        picture_id: Some(PictureId::extended(i as u16 & 0x7FFF)),
        tl0_pic_idx: Some(Tl0PicIdx(i as u8)),
        temporal: Some(Vp8Temporal {
            tid: TemporalLayerId(0),
            layer_sync: false,
        }),
        ..Default::default()
    };
    let mut out = vec![0u8; Vp8Descriptor::MAX_SIZE];
    let len = descriptor.write(&mut out).expect("fits");
    out.truncate(len);
    // P bit: 0 on the keyframe, 1 after.
    out.push(u8::from(i > 0));
    out.extend_from_slice(&[0x9D; 900]);
    out
}

/// H264 (RFC 6184): single NAL units, an IDR slice first, then non-IDR slices.
fn h264_payload(i: usize) -> Vec<u8> {
    let nal_type = if i == 0 { 5 } else { 1 };
    let mut out = vec![0x60 | nal_type, 0x88];
    out.extend_from_slice(&[0x84; 900]);
    out
}

/// Opus: 20 ms frames, the payload as it is.
fn opus_payload(_: usize) -> Vec<u8> {
    vec![0xF8; 80]
}

/// Targets of a fan-out's subscribers, in turn: every fourth takes every layer.
const TARGETS: [Layer; 4] = [
    Layer::MAX,
    Layer::new(1, 1),
    Layer::new(0, 2),
    Layer::new(2, 0),
];

/// A router with `subscribers` subscriptions to one track, each on a transport of its own,
/// their targets spread over the layers; and the publisher's transport. Paced, every viewer
/// negotiates transport-wide CC and is paced to an estimate far above the stream (so its
/// bucket is open), allocated as it subscribes at `now`.
fn router_with(
    track: &TrackConfig,
    subscribers: usize,
    paced: Option<Instant>,
) -> (Router, TransportId) {
    let config = RouterConfig {
        initial_estimate_bps: 1_000_000_000,
        ..RouterConfig::default()
    };
    let mut router = Router::new(config);
    let publisher = router.add_transport();
    let id = router
        .publish(publisher, track.clone())
        .expect("fresh router");
    if let Some(now) = paced {
        // The time the subscriptions start at.
        router.handle_timeout(now);
    }
    for s in 0..subscribers {
        let viewer = router.add_transport();
        let mut config = DownTrackConfig::new(0x5000 + s as u32, 45);
        config.dd_ext_id = Some(DD_EXT);
        config.transport_cc_ext_id = paced.map(|_| TWCC_EXT);
        let target = TARGETS[s % TARGETS.len()];
        router
            .subscribe(
                viewer,
                id,
                config,
                LayerLimits {
                    target,
                    max: Layer::MAX,
                },
            )
            .expect("track");
    }
    (router, publisher)
}

/// Replays `packets` through a router; each op is one publisher packet and every subscriber
/// packet it yields, headers written into one buffer. Paced, a millisecond passes per op and
/// the router's timers run when due, as a host runs them (its first allocation, made before
/// any layer was measured, rises at the first report interval).
fn replay(
    name: &'static str,
    track: TrackConfig,
    packets: Packets,
    subscribers: usize,
    paced: bool,
) -> Case {
    let mut now = Instant::now();
    let setup = move |now: Instant| router_with(&track, subscribers, paced.then_some(now));
    let (mut router, mut publisher) = setup(now);
    let mut next = 0;
    let mut buf = [0u8; 1500];
    let stream = Stream {
        pass: packets.bytes.len(),
        structures: packets.structures,
    };
    let packets = packets.bytes;
    // Those that take every layer are sent every packet.
    let full = (0..subscribers).step_by(TARGETS.len()).count();
    Case::per_unit(name, subscribers.max(1) as u64, move || {
        if next == packets.len() {
            next = 0;
            (router, publisher) = setup(now);
        }
        if paced {
            now += Duration::from_millis(1);
        }
        let accepted = router.handle_rtp(now, publisher, packets[next].clone());
        assert!(accepted.is_ok(), "{name}: packet {next} refused");
        next += 1;
        if paced && router.poll_timeout().is_some_and(|at| at <= now) {
            router.handle_timeout(now);
        }
        let mut sent = 0;
        while let Some(out) = router.poll_transmit(&mut buf) {
            std::hint::black_box(&out);
            sent += 1;
        }
        assert!(paced || sent >= full, "{name}: {sent} subscriber packets");
        if paced {
            while router.poll_rtcp(&mut buf).is_some() {}
            while router.poll_event().is_some() {}
        }
    })
    .over(stream)
}

/// Parse and store only: a track without subscribers.
fn receive() -> Case {
    replay("receive/av1_l3t3", l3t3_track(), l3t3_packets(), 0, false)
}

/// One subscriber's share only: each op is one packet, parsed beforehand by a Receiver,
/// through one DownTrack (select, DD rewrite, munge, header write into the caller's buffer).
/// A pass is [`FORWARD_PASS`] packets, then a fresh DownTrack starts over.
fn forward(name: &'static str, track: TrackConfig, packets: Packets) -> Case {
    let now = Instant::now();
    let mut receiver = Receiver::new(track.clone());
    let parsed: Vec<(ParsedPacket, PacketRef)> = packets
        .bytes
        .into_iter()
        .filter_map(|bytes| {
            let at = receiver.receive(now, bytes).ok()?;
            Some((receiver.packet(at)?.clone(), at))
        })
        .take(FORWARD_PASS)
        .collect();
    let stream = Stream {
        pass: parsed.len(),
        structures: (0..parsed.len())
            .filter(|&i| {
                let dd = parsed[i].0.dd.as_ref();
                dd.is_some_and(|dd| dd.attached_structure.is_some())
            })
            .collect(),
    };
    let down_track = move || {
        let mut config = DownTrackConfig::new(0x5000, 45);
        config.dd_ext_id = Some(DD_EXT);
        let limits = LayerLimits {
            target: Layer::MAX,
            max: Layer::MAX,
        };
        DownTrack::new(TransportId(0), TrackId(0), &track, config, limits)
    };
    let mut subscriber = down_track();
    let mut next = 0;
    let mut buf = [0u8; 1500];
    Case::new(name, move || {
        if next == parsed.len() {
            next = 0;
            subscriber = down_track();
        }
        let (packet, at) = &parsed[next];
        let written = std::hint::black_box(subscriber.write(packet, *at, None, &mut buf));
        // Every layer is forwarded: every packet goes out.
        assert!(
            matches!(written.result, Ok(Some(_))),
            "{name}: packet {next} not written"
        );
        next += 1;
    })
    .over(stream)
}

fn fanout(subscribers: usize) -> Case {
    let name: &'static str = match subscribers {
        1 => "fanout/av1_l3t3/1",
        10 => "fanout/av1_l3t3/10",
        100 => "fanout/av1_l3t3/100",
        _ => "fanout/av1_l3t3/1000",
    };
    replay(name, l3t3_track(), l3t3_packets(), subscribers, false)
}
