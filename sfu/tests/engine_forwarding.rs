//! The engine end to end, in memory and deterministic: generated AV1-style DD streams, a real
//! VP8 capture and audio through one publisher to several subscribers; loss on either side with
//! NACK recovery; a keyframe storm; simulcast switching; bad input.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use rtp_ext::codec::Codec;
use rtp_ext::dd::{DependencyDescriptor, FrameDependencyStructure};
use rtp_ext::rtp::{
    write_header, ExtensionElement, ExtensionIds, ExtensionSelection, RtpFields, RtpPacket,
};
use selector::scalability::{GeneratedPacket, GeneratorConfig, ScalabilityMode, StreamGenerator};
use selector::{Layer, LayerLimits};
use sfu::engine::rtcp::{
    compact_ntp, parse_compound, Nack, NackPairs, Pli, ReceiverReport, Remb, RembSsrcs,
    ReportBlock, ReportBlocks, RtcpFeedback, RtcpWireWriter, RtcpWriter, SenderReport,
};
use sfu::engine::{
    DownTrackConfig, DownTrackId, Event, KeyframeRequest, ReceiveError, Router, RouterConfig,
    RouterError, StreamConfig, TrackConfig, TrackId, TransportCc, TransportId,
};
use sfu::sim::{Delivery, LinkConfig, Network, Refusal};

mod common;

const DD_EXT: u8 = 11;
const FRAME: Duration = Duration::from_millis(33);

/// An RTP packet of a generated frame: the DD as extension 11, a payload naming the frame.
fn rtp_bytes(packet: &GeneratedPacket, structure: &Arc<FrameDependencyStructure>) -> Bytes {
    Bytes::from(packet.rtp_bytes(DD_EXT, structure))
}

/// What one subscriber received.
#[derive(Default)]
struct Received {
    packets: Vec<Vec<u8>>,
}

impl Received {
    fn headers(&self) -> Vec<RtpFields> {
        self.packets
            .iter()
            .map(|p| RtpPacket::parse(p).expect("valid RTP out").fields())
            .collect()
    }

    fn source_frame(packet: &[u8]) -> u64 {
        let parsed = RtpPacket::parse(packet).expect("valid RTP out");
        u64::from_be_bytes(parsed.payload()[..8].try_into().expect("frame number"))
    }
}

/// A router on the in-memory network with one published DD track, the subscribers' received
/// packets and the RTCP that reached the peers. The links are ideal: what is sent arrives at
/// the instant it is sent, so a test feeds packets at one instant and moves time on itself;
/// the router's timeouts run when it reports them due.
struct Session {
    network: Network,
    /// The publisher's transport; each subscriber has its own.
    publisher: TransportId,
    track: TrackId,
    subscribers: Vec<DownTrackId>,
    transports: HashMap<DownTrackId, TransportId>,
    received: HashMap<DownTrackId, Received>,
    rtcp_to_publisher: Vec<Vec<u8>>,
    /// When each of `rtcp_to_publisher` arrived.
    rtcp_to_publisher_at: Vec<Instant>,
    rtcp_to_subscribers: Vec<(DownTrackId, Vec<u8>)>,
}

impl Session {
    fn new(config: TrackConfig) -> Self {
        Self::with_router(RouterConfig::default(), config)
    }

    fn with_router(router: RouterConfig, config: TrackConfig) -> Self {
        let mut network = Network::new(router, Instant::now(), 0);
        let publisher = network.add_transport(LinkConfig::default(), LinkConfig::default());
        let track = network
            .with_router(|router| router.publish(publisher, config))
            .expect("new SSRCs");
        Self {
            network,
            publisher,
            track,
            subscribers: Vec::new(),
            transports: HashMap::new(),
            received: HashMap::new(),
            rtcp_to_publisher: Vec::new(),
            rtcp_to_publisher_at: Vec::new(),
            rtcp_to_subscribers: Vec::new(),
        }
    }

    fn router(&self) -> &Router {
        self.network.router()
    }

    fn subscribe(&mut self, target: Layer) -> DownTrackId {
        let mut config = DownTrackConfig::new(0x5000 + self.subscribers.len() as u32, 45);
        config.dd_ext_id = Some(DD_EXT);
        self.subscribe_with(config, limits(target))
    }

    /// A subscriber on a transport of its own.
    fn subscribe_with(&mut self, config: DownTrackConfig, limits: LayerLimits) -> DownTrackId {
        let transport = self
            .network
            .add_transport(LinkConfig::default(), LinkConfig::default());
        let track = self.track;
        let id = self
            .network
            .with_router(|router| router.subscribe(transport, track, config, limits))
            .expect("track exists");
        self.subscribers.push(id);
        self.transports.insert(id, transport);
        id
    }

    /// Another track on the publisher's transport.
    fn publish(&mut self, config: TrackConfig) -> Result<TrackId, RouterError> {
        let publisher = self.publisher;
        self.network
            .with_router(|router| router.publish(publisher, config))
    }

    fn bind_stream(
        &mut self,
        track: TrackId,
        index: usize,
        ssrcs: StreamConfig,
    ) -> Result<(), RouterError> {
        self.network
            .with_router(|router| router.bind_stream(track, index, ssrcs))
    }

    /// RTCP from the subscriber of `id`, on its transport.
    fn subscriber_rtcp(&mut self, id: DownTrackId, rtcp: &[u8]) {
        let transport = self.transports[&id];
        self.rtcp_from(transport, rtcp);
    }

    /// RTCP from the publisher.
    fn publisher_rtcp(&mut self, rtcp: &[u8]) {
        self.rtcp_from(self.publisher, rtcp);
    }

    fn rtcp_from(&mut self, transport: TransportId, rtcp: &[u8]) {
        self.network
            .send_rtcp(transport, Bytes::copy_from_slice(rtcp))
            .expect("on the network");
        self.drain(&|_, _| false);
        assert_eq!(self.network.take_refused(), [], "known");
    }

    /// Feeds packets the router must take, draining every output after each; `lose_out`
    /// drops output packets to a subscriber (by its output sequence number) before they arrive.
    fn feed(
        &mut self,
        packets: impl IntoIterator<Item = Bytes>,
        lose_out: &dyn Fn(DownTrackId, u16) -> bool,
    ) {
        let refused = self.feed_refusable(packets, lose_out);
        assert_eq!(refused, [], "packets the router refused");
    }

    /// Feeds packets of which the router may refuse some, as [`feed`](Self::feed) does;
    /// returns why it refused each it refused, in order.
    fn feed_refusable(
        &mut self,
        packets: impl IntoIterator<Item = Bytes>,
        lose_out: &dyn Fn(DownTrackId, u16) -> bool,
    ) -> Vec<ReceiveError> {
        let mut refused = Vec::new();
        for packet in packets {
            self.network
                .send_rtp(self.publisher, packet)
                .expect("on the network");
            self.drain(lose_out);
            refused.extend(self.network.take_refused().into_iter().map(|r| match r {
                Refusal::Rtp { error, .. } => error,
                Refusal::Rtcp { error, .. } => panic!("RTCP refused: {error:?}"),
            }));
        }
        refused
    }

    /// Runs what is due now and takes what arrived at the peers.
    fn drain(&mut self, lose_out: &dyn Fn(DownTrackId, u16) -> bool) {
        self.network.run_until(self.network.now());
        for arrival in self.network.take_arrivals(self.publisher) {
            if let Delivery::Rtcp { datagram, .. } = arrival.delivery {
                self.rtcp_to_publisher.push(datagram.to_vec());
                self.rtcp_to_publisher_at.push(arrival.at);
            }
        }
        for &id in &self.subscribers {
            for arrival in self.network.take_arrivals(self.transports[&id]) {
                match arrival.delivery {
                    Delivery::Media {
                        down_track,
                        retransmission,
                        packet,
                    } => {
                        let seq = RtpPacket::parse(&packet)
                            .expect("valid RTP out")
                            .fields()
                            .sequence_number;
                        if !lose_out(down_track, seq) || retransmission {
                            self.received
                                .entry(down_track)
                                .or_default()
                                .packets
                                .push(packet.to_vec());
                        }
                    }
                    Delivery::Rtcp { datagram, .. } => {
                        self.rtcp_to_subscribers.push((id, datagram.to_vec()));
                    }
                }
            }
        }
    }

    /// The router's events so far.
    fn events(&mut self) -> Vec<Event> {
        let events = self.network.take_events();
        events.into_iter().map(|(_, event)| event).collect()
    }

    /// The subscriber NACKs `lost` (its output sequence numbers); the repairs are drained.
    fn nack(&mut self, id: DownTrackId, media_ssrc: u32, lost: &[u16]) {
        let mut pairs = NackPairs::default();
        for &seq in lost {
            pairs.push(seq).expect("fits in one NACK");
        }
        let nack = RtcpFeedback::Nack(Nack {
            sender_ssrc: 9,
            media_ssrc,
            pairs,
        });
        self.subscriber_rtcp(id, &rtcp_bytes(&nack));
    }

    fn set_target(&mut self, id: DownTrackId, target: Layer) {
        self.network
            .with_router(|router| router.set_limits(id, limits(target)))
            .expect("a known subscription");
    }

    /// Lets time pass: the router's timeouts run when due, what they send arrives.
    fn advance(&mut self, by: Duration) {
        let until = self.network.now() + by;
        self.network.run_until(until);
        self.drain(&|_, _| false);
    }
}

fn limits(target: Layer) -> LayerLimits {
    LayerLimits {
        target,
        max: Layer::MAX,
    }
}

fn dd_track(ssrc: u32) -> TrackConfig {
    let mut config = TrackConfig::single(Codec::Av1, ssrc);
    config.dd_ext_id = Some(DD_EXT);
    config
}

fn generated(mode: ScalabilityMode, tus: usize) -> (Vec<GeneratedPacket>, Vec<Bytes>) {
    let config = GeneratorConfig {
        keyframe_interval_tus: 60,
        ssrc: 0x1000,
        first_seq: 65_000,
        ..Default::default()
    };
    let mut generator = StreamGenerator::new(mode, config);
    let structure = generator.structure().clone();
    let mut packets = Vec::new();
    let mut tu = 0;
    while tu < tus {
        let p = generator.next().expect("endless");
        tu += usize::from(p.marker);
        packets.push(p);
    }
    let bytes = packets.iter().map(|p| rtp_bytes(p, &structure)).collect();
    (packets, bytes)
}

/// Per subscriber: contiguous sequence numbers, monotonic timestamps, one marker per temporal
/// unit on the highest forwarded spatial layer, and every forwarded frame's references
/// forwarded before it.
fn check_subscriber(received: &Received, truth: &HashMap<u64, &GeneratedPacket>, top_spatial: u8) {
    let headers = received.headers();
    assert!(!headers.is_empty());
    for pair in headers.windows(2) {
        assert_eq!(
            pair[1].sequence_number,
            pair[0].sequence_number.wrapping_add(1),
            "contiguous"
        );
        assert!(
            pair[1].timestamp.wrapping_sub(pair[0].timestamp) < 1 << 31,
            "monotonic timestamps"
        );
    }
    let mut forwarded = HashSet::new();
    let mut markers_per_ts: HashMap<u32, u32> = HashMap::new();
    for (bytes, header) in received.packets.iter().zip(&headers) {
        let frame = Received::source_frame(bytes);
        let source = truth[&frame];
        for reference in source.references.iter() {
            assert!(
                forwarded.contains(reference),
                "frame {frame} before its reference {reference}"
            );
        }
        if source.end_of_frame() {
            forwarded.insert(frame);
        }
        *markers_per_ts.entry(header.timestamp).or_default() += u32::from(header.marker);
        if header.marker {
            assert_eq!(
                source.spatial_id(),
                top_spatial,
                "marker on the top forwarded layer"
            );
            assert!(source.end_of_frame());
        }
    }
    assert!(
        markers_per_ts.values().all(|&m| m == 1),
        "one marker per temporal unit"
    );
}

#[test]
fn l3t3_to_subscribers_at_three_layers() {
    let (packets, bytes) = generated(ScalabilityMode::L3T3, 200);
    let truth: HashMap<u64, &GeneratedPacket> =
        packets.iter().map(|p| (p.frame_number, p)).collect();
    let mut session = Session::new(dd_track(0x1000));
    let targets = [Layer::new(0, 0), Layer::new(1, 1), Layer::new(2, 2)];
    let subscribers: Vec<_> = targets.iter().map(|&t| session.subscribe(t)).collect();
    session.feed(bytes, &|_, _| false);
    let mut counts = Vec::new();
    for (id, target) in subscribers.iter().zip(targets) {
        let received = &session.received[id];
        check_subscriber(received, &truth, target.spatial);
        let structure = packets[0]
            .descriptor
            .attached_structure
            .clone()
            .expect("keyframe structure");
        for bytes in &received.packets {
            let packet = RtpPacket::parse(bytes).expect("RTP");
            let dd = DependencyDescriptor::parse(
                packet.extension(DD_EXT).expect("DD out"),
                Some(&structure),
            )
            .expect("DD");
            let layer = Layer::new(dd.spatial_id(), dd.temporal_id());
            assert!(target.covers(layer), "{layer:?} beyond {target:?}");
        }
        counts.push(received.packets.len());
    }
    assert!(counts[0] < counts[1] && counts[1] < counts[2] && counts[2] == bytes_len(&packets));
}

fn bytes_len(packets: &[GeneratedPacket]) -> usize {
    packets.len()
}

#[test]
fn subscriber_loss_is_repaired_with_the_same_bytes() {
    let (packets, bytes) = generated(ScalabilityMode::L3T3, 60);
    let truth: HashMap<u64, &GeneratedPacket> =
        packets.iter().map(|p| (p.frame_number, p)).collect();
    let mut session = Session::new(dd_track(0x1000));
    let id = session.subscribe(Layer::new(1, 2));
    // What a lossless subscriber gets, for comparison.
    let mut clean = Session::new(dd_track(0x1000));
    let clean_id = clean.subscribe(Layer::new(1, 2));
    clean.feed(bytes.clone(), &|_, _| false);
    // The keyframe's first packet is lost too: its DD carries the structure, too large to be
    // remembered inline.
    let first = &clean.received[&clean_id].packets[0];
    let first = RtpPacket::parse(first).expect("RTP");
    let dd_len = first.extension(DD_EXT).expect("a DD").len();
    assert!(dd_len > 24, "a structure DD of {dd_len} bytes");
    let keyframe_seq = first.fields().sequence_number;
    let lost = |seq: u16| seq % 7 == 3 || seq == keyframe_seq;
    session.feed(bytes, &|_, seq| lost(seq));
    let received_seqs: HashSet<u16> = session.received[&id]
        .headers()
        .iter()
        .map(|h| h.sequence_number)
        .collect();
    let missing: Vec<u16> = clean.received[&clean_id]
        .headers()
        .iter()
        .map(|h| h.sequence_number)
        .filter(|s| !received_seqs.contains(s))
        .collect();
    assert!(missing.len() > 10, "the subscriber lost packets");
    session.nack(id, 0x5000, &missing);
    let mut all = session.received.remove(&id).expect("received");
    // Retransmissions are byte-identical to what the lossless subscriber got.
    let clean_by_seq: HashMap<u16, &Vec<u8>> = clean.received[&clean_id]
        .packets
        .iter()
        .map(|p| {
            (
                RtpPacket::parse(p).expect("RTP").fields().sequence_number,
                p,
            )
        })
        .collect();
    for p in &all.packets {
        let seq = RtpPacket::parse(p).expect("RTP").fields().sequence_number;
        assert_eq!(
            p, clean_by_seq[&seq],
            "packet {seq} differs from the lossless run"
        );
    }
    all.packets.sort_by_key(|p| {
        RtpPacket::parse(p)
            .expect("RTP")
            .fields()
            .sequence_number
            .wrapping_sub(65_000)
    });
    assert_eq!(all.packets.len(), clean_by_seq.len(), "every loss repaired");
    check_subscriber(&all, &truth, 1);
}

#[test]
fn publisher_loss_is_nacked_and_nothing_deliberately_dropped_is() {
    let (packets, bytes) = generated(ScalabilityMode::L3T3, 60);
    let mut config = dd_track(0x1000);
    config.streams[0].rtx_ssrc = Some(0x1001);
    let mut session = Session::new(config);
    let low = session.subscribe(Layer::new(0, 0));
    let lost: Vec<u16> = packets
        .iter()
        .map(|p| p.sequence_number)
        .filter(|s| s % 11 == 5)
        .collect();
    let (kept, dropped): (Vec<_>, Vec<_>) = bytes
        .into_iter()
        .zip(&packets)
        .partition(|(_, p)| !lost.contains(&p.sequence_number));
    session.feed(kept.into_iter().map(|(b, _)| b), &|_, _| false);
    session.advance(Duration::from_millis(20));
    let nacked: HashSet<u16> = session
        .rtcp_to_publisher
        .iter()
        .flat_map(|datagram| {
            let mut seqs = Vec::new();
            parse_compound(datagram, |item| {
                if let RtcpFeedback::Nack(n) = item {
                    seqs.extend(n.pairs.lost());
                }
            })
            .expect("our RTCP parses");
            seqs
        })
        .collect();
    assert_eq!(
        nacked,
        lost.iter().copied().collect::<HashSet<u16>>(),
        "exactly the lost packets are NACKed"
    );
    assert_eq!(session.router().publisher_rtt(session.track), None);
    // The retransmissions arrive on RTX 30 ms after the NACKs (sent once the reorder delay was
    // over, all at one instant); the low subscriber's stream has no gap it would NACK, and the
    // round trip to the publisher is measured from them.
    let nack_times: Vec<Instant> = session
        .rtcp_to_publisher
        .iter()
        .zip(&session.rtcp_to_publisher_at)
        .filter(|(datagram, _)| {
            let mut nack = false;
            parse_compound(datagram, |item| {
                nack |= matches!(item, RtcpFeedback::Nack(_));
            })
            .expect("our RTCP parses");
            nack
        })
        .map(|(_, &at)| at)
        .collect();
    let nacked_at = nack_times[0];
    assert!(
        nack_times.iter().all(|&at| at == nacked_at),
        "{nack_times:?}"
    );
    // The packets were fed at the start: the gaps are NACKed once the NACK module's 5 ms
    // reorder delay is over, at the instant the router's timeout said, not at a later poll.
    assert_eq!(
        nacked_at - session.network.start(),
        Duration::from_millis(5)
    );
    let wait = nacked_at + Duration::from_millis(30) - session.network.now();
    session.advance(wait);
    let retransmissions = dropped
        .iter()
        .enumerate()
        .map(|(i, (b, _))| common::as_rtx(b, 0x1001, i as u16));
    session.feed(retransmissions, &|_, _| false);
    assert_eq!(
        session.router().publisher_rtt(session.track),
        Some(Duration::from_millis(30))
    );
    let headers = session.received[&low].headers();
    let mut seqs: Vec<u16> = headers
        .iter()
        .map(|h| h.sequence_number.wrapping_sub(headers[0].sequence_number))
        .collect();
    seqs.sort_unstable();
    assert!(
        seqs.windows(2).all(|w| w[1] == w[0] + 1),
        "no gap: deliberate drops are not NACKable"
    );
}

#[test]
fn a_hundred_subscribers_switching_up_send_one_pli_per_interval() {
    let (_, bytes) = generated(ScalabilityMode::L3T3Key, 90);
    let mut session = Session::new(dd_track(0x1000));
    for _ in 0..100 {
        session.subscribe(Layer::new(0, 2));
    }
    let (first, rest) = bytes.split_at(bytes.len() / 3);
    session.feed(first.to_vec(), &|_, _| false);
    let plis_before = session.router().counters().keyframe_requests_sent;
    for &id in &session.subscribers.clone() {
        session.set_target(id, Layer::new(2, 2));
    }
    // One temporal unit's packets per frame interval, for about two seconds.
    for chunk in rest.chunks(10) {
        session.feed(chunk.to_vec(), &|_, _| false);
        session.advance(FRAME);
    }
    let plis = session.router().counters().keyframe_requests_sent - plis_before;
    let elapsed_ms = (rest.len() / 10 + 1) as u64 * 33;
    assert!(plis >= 1, "the switch asked for a keyframe");
    assert!(
        plis <= elapsed_ms / 500 + 1,
        "{plis} PLIs in {elapsed_ms} ms"
    );
    let asked = session
        .router()
        .keyframe_counters(session.track)
        .expect("track")
        .asked;
    assert!(asked >= 100, "every subscriber asked ({asked})");
}

#[test]
fn subscriber_pli_becomes_one_throttled_request() {
    let (_, bytes) = generated(ScalabilityMode::L1T3, 10);
    let mut session = Session::new(dd_track(0x1000));
    let ids: Vec<_> = (0..5).map(|_| session.subscribe(Layer::MAX)).collect();
    session.feed(bytes, &|_, _| false);
    let pli = RtcpFeedback::Pli(Pli {
        sender_ssrc: 9,
        media_ssrc: 0x5000,
    });
    let rtcp = rtcp_bytes(&pli);
    // The first is asked of the publisher at once, the others fall in its interval.
    let before = session.router().counters().keyframe_requests_sent;
    for id in ids {
        session.subscriber_rtcp(id, &rtcp);
    }
    session.advance(Duration::from_millis(1));
    assert_eq!(
        session.router().counters().keyframe_requests_sent - before,
        1
    );
}

/// A subscriber's compound RTCP covers its audio and its video: the host hands it to each of
/// its DownTracks, and each takes only the feedback about its own SSRC.
#[test]
fn feedback_about_another_ssrc_is_ignored() {
    let (_, bytes) = generated(ScalabilityMode::L1T3, 10);
    let mut session = Session::new(dd_track(0x1000));
    let id = session.subscribe(Layer::MAX);
    session.feed(bytes, &|_, _| false);
    let sent = |s: &Session| {
        s.router()
            .down_track_counters(id)
            .expect("known")
            .retransmitted
    };
    let first = session.received[&id].headers()[0].sequence_number;
    session.nack(id, 0x7777, &[first]);
    assert_eq!(sent(&session), 0, "a NACK about another stream");
    session.nack(id, 0x5000, &[first]);
    assert_eq!(sent(&session), 1, "a NACK about this stream");
}

/// Found by the network property test: packets that overtake the keyframe packet carrying the
/// structure cannot have their DD read. They are not taken as received (counted, a keyframe
/// asked for), so they are NACKed, and their retransmissions are read with the structure: the
/// subscriber gets every frame whole.
#[test]
fn packets_ahead_of_their_structure_are_recovered_not_forwarded_blind() {
    let (packets, bytes) = generated(ScalabilityMode::L3T3, 40);
    let truth: HashMap<u64, &GeneratedPacket> =
        packets.iter().map(|p| (p.frame_number, p)).collect();
    let mut session = Session::new(dd_track(0x1000));
    let id = session.subscribe(Layer::MAX);
    // The keyframe's first packet (with the structure) arrives after the next three.
    let mut reordered = bytes.clone();
    reordered[..4].rotate_left(1);
    let refused = session.feed_refusable(reordered, &|_, _| false);
    assert_eq!(refused, [ReceiveError::UnreadableDd { stream: 0 }; 3]);
    let counters = session
        .router()
        .receiver_counters(session.track)
        .expect("track");
    assert_eq!(counters.bad_dd, 3, "{counters:?}");
    assert_eq!(
        session.router().counters().keyframe_requests_sent,
        1,
        "one request for the three"
    );
    session.advance(Duration::from_millis(20));
    let nacked: Vec<u16> = rtcp_items(&session.rtcp_to_publisher)
        .into_iter()
        .filter_map(|item| match item {
            RtcpFeedback::Nack(nack) => Some(nack.pairs.lost().collect::<Vec<_>>()),
            _ => None,
        })
        .flatten()
        .collect();
    let overtaking: Vec<u16> = packets[1..4].iter().map(|p| p.sequence_number).collect();
    assert_eq!(nacked, overtaking);
    session.feed(bytes[1..4].to_vec(), &|_, _| false);
    let received = session.received.get_mut(&id).expect("received");
    received.packets.sort_by_key(|p| {
        RtpPacket::parse(p)
            .expect("RTP")
            .fields()
            .sequence_number
            .wrapping_sub(65_000)
    });
    assert_eq!(received.packets.len(), packets.len(), "every packet");
    check_subscriber(received, &truth, 2);
}

#[test]
fn bad_input_is_counted_and_dropped_without_touching_other_tracks() {
    let (packets, bytes) = generated(ScalabilityMode::L1T3, 30);
    let truth: HashMap<u64, &GeneratedPacket> =
        packets.iter().map(|p| (p.frame_number, p)).collect();
    let mut session = Session::new(dd_track(0x1000));
    let id = session.subscribe(Layer::MAX);
    let other = session
        .publish(TrackConfig::single(Codec::Opus, 0x2000))
        .expect("new");
    let mut garbage: Vec<Bytes> = vec![
        Bytes::from_static(b""),
        Bytes::from_static(b"\x80"),
        Bytes::from_static(&[0x80, 45, 0, 1, 0, 0, 0, 1, 0, 0, 0x77, 0x77]),
        Bytes::from_static(&[0x40; 40]),
        Bytes::from_static(&[0x90, 45, 0, 1, 0, 0, 0, 1, 0, 0, 0x10, 0, 0xBE, 0xDE, 0, 9]),
    ];
    // The same track's SSRC with a huge sequence jump and a truncated extension.
    garbage.push(Bytes::from_static(&[
        0x80, 45, 0x80, 0, 0, 0, 0, 1, 0, 0, 0x10, 0, 1, 2,
    ]));
    for (i, b) in bytes.into_iter().enumerate() {
        session.feed([b], &|_, _| false);
        if let Some(g) = garbage.get(i % 40) {
            let refused = session.feed_refusable([g.clone()], &|_, _| false);
            // The jump is taken or refused depending on where the stream is; the rest never
            // parse, or name no track's SSRC.
            if i % 40 < 5 {
                assert_eq!(refused.len(), 1, "garbage {}: {refused:?}", i % 40);
            }
        }
    }
    let counters = session.router().counters();
    assert!(
        counters.unknown_ssrc + counters.dropped_in >= 4,
        "{counters:?}"
    );
    check_subscriber(&session.received[&id], &truth, 0);
    assert!(
        session
            .router()
            .receiver_counters(other)
            .expect("other track")
            .received
            == 0
    );
}

/// An AV1 track of three simulcast streams, SSRCs 0x100-0x102, with the DD.
fn simulcast_track() -> TrackConfig {
    let mut config = TrackConfig::single(Codec::Av1, 0x100);
    config.dd_ext_id = Some(DD_EXT);
    config.streams = (0..3)
        .map(|s| StreamConfig {
            ssrc: 0x100 + s,
            rtx_ssrc: None,
        })
        .collect();
    config
}

/// The generators of [`simulcast_track`]'s three L1T3 streams, a keyframe on each every 30
/// temporal units, with unrelated sequence numbers and timestamps.
fn simulcast_streams() -> Vec<(StreamGenerator, Arc<FrameDependencyStructure>)> {
    (0..3u32)
        .map(|s| {
            let g = StreamGenerator::new(
                ScalabilityMode::L1T3,
                GeneratorConfig {
                    keyframe_interval_tus: 30,
                    ssrc: 0x100 + s,
                    first_seq: (s * 20_000) as u16,
                    first_timestamp: s * 1_000_000_007,
                    seed: u64::from(s),
                    ..Default::default()
                },
            );
            let structure = g.structure().clone();
            (g, structure)
        })
        .collect()
}

/// Feeds one temporal unit of every stream, in stream order; returns, per stream, the
/// temporal id of each packet fed.
fn feed_simulcast_unit(
    session: &mut Session,
    streams: &mut [(StreamGenerator, Arc<FrameDependencyStructure>)],
) -> Vec<Vec<u8>> {
    let mut fed = Vec::new();
    for (g, structure) in streams {
        let mut temporal_ids = Vec::new();
        loop {
            let p = g.next().expect("endless");
            temporal_ids.push(p.temporal_id());
            session.feed([rtp_bytes(&p, structure)], &|_, _| false);
            if p.marker {
                break;
            }
        }
        fed.push(temporal_ids);
    }
    fed
}

#[test]
fn simulcast_switch_keeps_timestamps_smooth() {
    let mut session = Session::new(simulcast_track());
    let id = session.subscribe(Layer::new(0, 2));
    let mut streams = simulcast_streams();
    for tu in 0..150 {
        if tu == 50 {
            session.set_target(id, Layer::new(2, 2));
        }
        if tu == 100 {
            session.set_target(id, Layer::new(1, 2));
        }
        feed_simulcast_unit(&mut session, &mut streams);
        session.advance(FRAME);
    }
    let headers = session.received[&id].headers();
    let mut ts_steps = Vec::new();
    for pair in headers.windows(2) {
        assert_eq!(
            pair[1].sequence_number,
            pair[0].sequence_number.wrapping_add(1)
        );
        let step = pair[1].timestamp.wrapping_sub(pair[0].timestamp);
        assert!(step < 1 << 31, "timestamps never go back");
        ts_steps.push(step);
    }
    assert!(
        ts_steps.iter().all(|&s| s <= 3000 * 4),
        "no timestamp jump across switches: {:?}",
        ts_steps.iter().max()
    );
    assert_eq!(
        session
            .router()
            .down_track_info(id)
            .and_then(|d| d.layer)
            .map(|l| l.spatial),
        Some(1)
    );
}

/// A switch down to a lower stream waits for that stream's keyframe, which a publisher may
/// be slow to send (one ignores a request that comes soon after another). Meanwhile the
/// current stream goes on at its base temporal layer alone, a fraction of its rate, so the
/// link the switch is for drains instead of freezing the subscriber.
#[test]
fn a_switch_down_forwards_only_the_current_streams_base_layer_until_the_keyframe() {
    let mut session = Session::new(simulcast_track());
    let id = session.subscribe(Layer::new(2, 2));
    let mut streams = simulcast_streams();
    let forwarded = |session: &Session| session.received.get(&id).map_or(0, |r| r.packets.len());
    let layer = |session: &Session| session.router().down_track_info(id).and_then(|d| d.layer);
    // Up to the keyframes of temporal unit 30, then down 15 units before the next ones.
    for _ in 0..45 {
        feed_simulcast_unit(&mut session, &mut streams);
        session.advance(FRAME);
    }
    assert_eq!(layer(&session), Some(Layer::new(2, 2)));
    session.set_target(id, Layer::new(1, 2));
    let before = forwarded(&session);
    let mut base_packets = 0;
    for _ in 45..60 {
        let fed = feed_simulcast_unit(&mut session, &mut streams);
        base_packets += fed[2].iter().filter(|&&t| t == 0).count();
        session.advance(FRAME);
    }
    assert_eq!(layer(&session), Some(Layer::new(2, 0)));
    assert!(base_packets > 0);
    assert_eq!(
        forwarded(&session) - before,
        base_packets,
        "the top stream's base layer, nothing else"
    );
    // The lower stream's keyframe: its full rate from there.
    feed_simulcast_unit(&mut session, &mut streams);
    assert_eq!(layer(&session), Some(Layer::new(1, 2)));
}

/// Simulcast streams are announced by rid: the host publishes before it knows their SSRCs
/// and binds each one when its first packet names its rid.
#[test]
fn simulcast_streams_bound_after_publishing_are_forwarded() {
    let mut placeholder = simulcast_track();
    for (i, stream) in placeholder.streams.iter_mut().enumerate() {
        stream.ssrc = 0xF000 + i as u32;
    }
    let mut session = Session::new(placeholder);
    let id = session.subscribe(Layer::new(2, 2));
    let mut g = StreamGenerator::new(
        ScalabilityMode::L1T3,
        GeneratorConfig {
            keyframe_interval_tus: 30,
            ssrc: 0x102,
            ..Default::default()
        },
    );
    let structure = g.structure().clone();
    let mut next = || rtp_bytes(&g.next().expect("endless"), &structure);
    let refused = session.feed_refusable([next()], &|_, _| false);
    assert_eq!(refused, [ReceiveError::UnknownSsrc], "not bound yet");
    assert_eq!(session.router().counters().unknown_ssrc, 1);
    let bound = StreamConfig {
        ssrc: 0x102,
        rtx_ssrc: Some(0x202),
    };
    session
        .bind_stream(session.track, 2, bound)
        .expect("free SSRCs");
    assert_eq!(
        session.bind_stream(session.track, 3, bound),
        Err(RouterError::UnknownStream)
    );
    let other = session.publish(dd_track(0x300)).expect("free SSRC");
    assert_eq!(
        session.bind_stream(other, 0, bound),
        Err(RouterError::SsrcInUse),
        "an SSRC bound to one track cannot move to another"
    );
    // The first packet, with the structure, went to no stream: the stream's packets wait for
    // the next keyframe's.
    let refused = session.feed_refusable((0..200).map(|_| next()), &|_, _| false);
    assert!(
        refused
            .iter()
            .all(|&e| e == ReceiveError::UnreadableDd { stream: 2 }),
        "{refused:?}"
    );
    assert_eq!(session.router().counters().unknown_ssrc, 1);
    let before = session.received[&id].packets.len();
    assert!(before >= 30);
    // Found with a real browser: the RTX SSRC shows up with the first retransmission, long
    // after the media; binding it must not restart the stream under its subscribers.
    let with_rtx = StreamConfig {
        rtx_ssrc: Some(0x302),
        ..bound
    };
    session
        .bind_stream(session.track, 2, with_rtx)
        .expect("free SSRCs");
    session.feed((0..100).map(|_| next()), &|_, _| false);
    let headers = session.received[&id].headers();
    assert_eq!(headers.len(), before + 100, "every packet still forwarded");
    for pair in headers.windows(2) {
        assert_eq!(
            pair[1].sequence_number,
            pair[0].sequence_number.wrapping_add(1)
        );
    }
}

/// Opus packet `seq` of SSRC 0x3000 (20 ms frames) carrying one header extension.
fn opus_packet(seq: u16, ext_id: u8, ext: &[u8]) -> Bytes {
    let blank = [0x80u8, 111, 0, 0, 0, 0, 0, 0, 0, 0, 0x30, 0];
    let source = RtpPacket::parse(&blank).expect("bare header");
    let fields = RtpFields {
        marker: false,
        payload_type: 111,
        sequence_number: seq,
        timestamp: u32::from(seq) * 960,
        ssrc: 0x3000,
    };
    let added = [ExtensionElement {
        id: ext_id,
        data: ext,
    }];
    let selection = ExtensionSelection {
        keep: ExtensionIds::NONE,
        added: &added,
        two_byte_allowed: false,
    };
    let mut buf = vec![0u8; 200];
    let len = write_header(&source, &fields, &selection, &mut buf).expect("fits");
    buf.truncate(len);
    buf.extend_from_slice(&[0xF8; 40]);
    Bytes::from(buf)
}

#[test]
fn audio_passes_through_and_its_level_is_surfaced() {
    let mut config = TrackConfig::single(Codec::Opus, 0x3000);
    config.audio_level_ext_id = Some(1);
    let mut session = Session::new(config);
    let id = session.subscribe(Layer::MAX);
    let packets: Vec<Bytes> = (0..50u16)
        .map(|i| opus_packet(i, 1, &[0x80 | (i as u8 % 100)]))
        .collect();
    session.feed(packets, &|_, _| false);
    assert_eq!(session.received[&id].packets.len(), 50);
    let level = session.router().audio_level(session.track).expect("level");
    assert!(level.voice_activity);
    assert_eq!(level.level, 49);
}

#[test]
fn real_vp8_capture_to_two_subscribers() {
    let packets = common::rtp_packets("vp8.pcap");
    let ssrc = RtpPacket::parse(&packets[0]).expect("RTP").fields().ssrc;
    let mut session = Session::new(TrackConfig::single(Codec::Vp8, ssrc));
    let base = session.subscribe(Layer::new(0, 0));
    let all = session.subscribe(Layer::MAX);
    session.feed(
        packets.iter().map(|p| Bytes::copy_from_slice(p)),
        &|_, _| false,
    );
    for id in [base, all] {
        let headers = session.received[&id].headers();
        assert!(headers
            .windows(2)
            .all(|w| w[1].sequence_number == w[0].sequence_number.wrapping_add(1)));
    }
    assert!(session.received[&base].packets.len() < session.received[&all].packets.len());
    assert_eq!(
        session.received[&all].packets.len(),
        packets.len(),
        "every packet from the first keyframe"
    );
}

/// One RTCP packet, as a subscriber or publisher would send it.
fn rtcp_bytes(item: &RtcpFeedback<'_>) -> Vec<u8> {
    let mut buf = [0u8; 1500];
    let mut writer = RtcpWireWriter::new(b"peer").expect("a short CNAME");
    let len = writer.write(item, &mut buf).expect("fits");
    buf[..len].to_vec()
}

/// Every RTCP item of a list of datagrams.
fn rtcp_items(datagrams: &[Vec<u8>]) -> Vec<RtcpFeedback<'_>> {
    let mut items = Vec::new();
    for d in datagrams {
        parse_compound(d, |item| items.push(item)).expect("our RTCP parses");
    }
    items
}

#[test]
fn reports_both_ways_and_round_trip_time() {
    let (_, bytes) = generated(ScalabilityMode::L1T3, 30);
    let mut session = Session::new(dd_track(0x1000));
    // With transport-wide CC, so that its bandwidth estimator takes the round trip too.
    let mut config = DownTrackConfig::new(0x5000, 45);
    config.dd_ext_id = Some(DD_EXT);
    config.transport_cc_ext_id = Some(5);
    let id = session.subscribe_with(config, limits(Layer::MAX));
    // The publisher's sender report first: the receiver report must echo it as LSR.
    let publisher_sr = RtcpFeedback::SenderReport(SenderReport {
        ssrc: 0x1000,
        ntp_time: 0xE000_0000_8000_0000,
        rtp_time: 0,
        packet_count: 0,
        octet_count: 0,
    });
    session.publisher_rtcp(&rtcp_bytes(&publisher_sr));
    session.feed(bytes, &|_, _| false);
    session.rtcp_to_publisher.clear();
    session.rtcp_to_subscribers.clear();
    session.advance(Duration::from_secs(1));
    let to_publisher = rtcp_items(&session.rtcp_to_publisher);
    let rr = to_publisher.iter().find_map(|i| match i {
        RtcpFeedback::ReceiverReport(r) => Some(r),
        _ => None,
    });
    let block = rr.expect("a receiver report").blocks[0];
    assert_eq!(block.ssrc, 0x1000);
    assert_eq!(block.fraction_lost, 0);
    assert_eq!(block.last_sr, compact_ntp(0xE000_0000_8000_0000));
    assert!(
        block.delay_since_last_sr >= 65_536,
        "a second since the SR: {}",
        block.delay_since_last_sr
    );
    let datagrams: Vec<Vec<u8>> = session
        .rtcp_to_subscribers
        .iter()
        .filter(|(d, _)| *d == id)
        .map(|(_, b)| b.clone())
        .collect();
    let to_subscriber = rtcp_items(&datagrams);
    let sr = to_subscriber.iter().find_map(|i| match i {
        RtcpFeedback::SenderReport(r) => Some(*r),
        _ => None,
    });
    let sr = sr.expect("a sender report");
    let received = &session.received[&id];
    let last = received.headers().last().copied().expect("packets");
    assert_eq!(sr.ssrc, 0x5000);
    assert_eq!(sr.packet_count as usize, received.packets.len());
    let ahead = sr.rtp_time.wrapping_sub(last.timestamp);
    assert!(
        (89_000..=91_000).contains(&ahead),
        "RTP clock extrapolated by about 1 s: {ahead}"
    );
    // The subscriber answers 40 ms later with no delay of its own: RTT 40 ms.
    session.advance(Duration::from_millis(40));
    let mut blocks = ReportBlocks::default();
    blocks
        .push(ReportBlock {
            ssrc: 0x5000,
            fraction_lost: 12,
            total_lost: 3,
            highest_sequence: 0,
            jitter: 40,
            last_sr: compact_ntp(sr.ntp_time),
            delay_since_last_sr: 0,
        })
        .expect("room");
    let rr = RtcpFeedback::ReceiverReport(ReceiverReport {
        sender_ssrc: 9,
        blocks,
    });
    session.subscriber_rtcp(id, &rtcp_bytes(&rr));
    let reception = session.router().down_track_reception(id).expect("reported");
    let rtt = reception.rtt.expect("measured");
    assert_eq!(
        (
            reception.fraction_lost,
            reception.total_lost,
            reception.jitter
        ),
        (12, 3, 40)
    );
    assert!(
        rtt >= Duration::from_millis(39) && rtt <= Duration::from_millis(41),
        "{rtt:?}"
    );
    let transport = session.transports[&id];
    assert_eq!(session.router().viewer_round_trip(transport), Some(rtt));
}

/// Three simulcast streams with unrelated timestamp bases whose sender reports tie them to the
/// same wall clock: across a switch the subscriber's timestamps follow capture time exactly,
/// even when the last frame of the old stream was several frames back (a base-layer-only
/// subscriber).
#[test]
fn simulcast_switch_aligns_timestamps_by_sender_reports() {
    let mut session = Session::new(simulcast_track());
    let id = session.subscribe(Layer::new(0, 0));
    let mut unit_of_frame = HashMap::new();
    let mut streams: Vec<_> = (0..3u32)
        .map(|s| {
            let first_timestamp = s.wrapping_mul(1_234_567_891);
            let g = StreamGenerator::new(
                ScalabilityMode::L1T3,
                GeneratorConfig {
                    keyframe_interval_tus: 30,
                    ssrc: 0x100 + s,
                    first_seq: (s * 20_000) as u16,
                    first_frame_number: (s * 20_000) as u16,
                    first_timestamp,
                    seed: u64::from(s),
                    ..Default::default()
                },
            );
            let sr = RtcpFeedback::SenderReport(SenderReport {
                ssrc: 0x100 + s,
                ntp_time: 0xE000_0000_0000_0000,
                rtp_time: first_timestamp,
                packet_count: 0,
                octet_count: 0,
            });
            session.publisher_rtcp(&rtcp_bytes(&sr));
            let structure = g.structure().clone();
            (g, structure)
        })
        .collect();
    for tu in 0..100 {
        if tu == 40 {
            session.set_target(id, Layer::new(2, 0));
        }
        for (g, structure) in &mut streams {
            loop {
                let p = g.next().expect("endless");
                unit_of_frame.insert(p.frame_number, p.temporal_unit);
                let end = p.marker;
                session.feed([rtp_bytes(&p, structure)], &|_, _| false);
                if end {
                    break;
                }
            }
        }
        session.advance(FRAME);
    }
    let received = &session.received[&id];
    let base = received.headers()[0].timestamp;
    for bytes in &received.packets {
        let unit = unit_of_frame[&Received::source_frame(bytes)];
        let ts = RtpPacket::parse(bytes).expect("RTP").fields().timestamp;
        // Within one tick: when the old stream already sent a frame of the switch's capture
        // instant, the new stream starts one tick later so timestamps keep increasing. Without
        // the sender reports the switch would be a whole frame interval (3000) off.
        let off = ts.wrapping_sub(base).abs_diff(unit as u32 * 3000);
        assert!(
            off <= 1,
            "temporal unit {unit}: {off} ticks from its capture time"
        );
    }
    let layer = session.router().down_track_info(id).and_then(|d| d.layer);
    assert_eq!(layer.map(|l| l.spatial), Some(2), "switched");
}

/// Publisher side: a lost packet recovered through RTX (RFC 4588) is forwarded in its place,
/// and padding-only packets are absorbed without a gap. Subscriber side: retransmissions go
/// out on the negotiated RTX stream with the original sequence number first.
#[test]
fn rtx_both_ways_and_padding() {
    let (packets, bytes) = generated(ScalabilityMode::L1T3, 40);
    let mut config = dd_track(0x1000);
    config.streams[0].rtx_ssrc = Some(0x1001);
    let mut session = Session::new(config);
    let mut sub = DownTrackConfig::new(0x5000, 45);
    sub.dd_ext_id = Some(DD_EXT);
    sub.rtx = Some((0x5001, 46));
    let id = session.subscribe_with(sub, limits(Layer::MAX));
    let lost = packets[20].sequence_number;
    // After packet 25 the publisher sends a padding-only probe: later packets are numbered
    // one higher.
    let renumbered = |i: usize, b: &Bytes| -> Bytes {
        let mut v = b.to_vec();
        let seq = u16::from_be_bytes([v[2], v[3]]).wrapping_add(u16::from(i > 25));
        v[2..4].copy_from_slice(&seq.to_be_bytes());
        Bytes::from(v)
    };
    let mut incoming: Vec<Bytes> = Vec::new();
    for (i, (b, p)) in bytes.iter().zip(&packets).enumerate() {
        if p.sequence_number != lost {
            incoming.push(renumbered(i, b));
        }
        if i == 25 {
            let mut probe = b[..12].to_vec();
            // Version 2, padding, no extension.
            probe[0] = 0xA0;
            probe[2..4].copy_from_slice(&p.sequence_number.wrapping_add(1).to_be_bytes());
            probe.extend_from_slice(&[0, 0, 0, 4]);
            incoming.push(Bytes::from(probe));
        }
    }
    // The lost packet arrives later as RTX.
    incoming.push(common::as_rtx(&bytes[20], 0x1001, 7));
    session.feed(incoming, &|_, _| false);
    let received = &session.received[&id];
    assert_eq!(
        received.packets.len(),
        packets.len(),
        "every media packet, the recovered one too"
    );
    let mut seqs: Vec<u16> = received
        .headers()
        .iter()
        .map(|h| {
            h.sequence_number
                .wrapping_sub(received.headers()[0].sequence_number)
        })
        .collect();
    seqs.sort_unstable();
    assert!(
        seqs.windows(2).all(|w| w[1] == w[0] + 1),
        "no gap for the probe"
    );
    assert_eq!(
        session
            .router()
            .receiver_counters(session.track)
            .expect("track")
            .padding_only,
        1
    );
    // The subscriber NACKs one packet: it comes back on RTX.
    let wanted = received.headers()[5].sequence_number;
    let original_bytes = received.packets[5].clone();
    session.nack(id, 0x5000, &[wanted]);
    let resent = session.received[&id]
        .packets
        .last()
        .expect("a retransmission")
        .clone();
    let resent = RtpPacket::parse(&resent).expect("RTP");
    assert_eq!(resent.fields().ssrc, 0x5001);
    assert_eq!(resent.fields().payload_type, 46);
    assert_eq!(
        &resent.payload()[..2],
        &wanted.to_be_bytes(),
        "original sequence number first"
    );
    let original = RtpPacket::parse(&original_bytes).expect("RTP");
    assert_eq!(&resent.payload()[2..], original.payload(), "same payload");
    assert_eq!(
        resent.extension(DD_EXT),
        original.extension(DD_EXT),
        "same DD"
    );
    // Asked again, it goes again under the RTX stream's next sequence number: the RTX stream
    // numbers its own packets, or the subscriber's SRTP would take the copy for a replay.
    session.nack(id, 0x5000, &[wanted]);
    let again = session.received[&id]
        .packets
        .last()
        .expect("a retransmission")
        .clone();
    let again = RtpPacket::parse(&again).expect("RTP");
    assert_eq!(again.fields().ssrc, 0x5001);
    assert_eq!(
        again.fields().sequence_number,
        resent.fields().sequence_number.wrapping_add(1)
    );
    assert_eq!(&again.payload()[..2], &wanted.to_be_bytes());
}

/// Every real browser capture through the engine to subscribers at the lowest and the best
/// layer: sequence numbers contiguous, timestamps never going back, and the best-layer
/// subscriber getting every packet from its first keyframe on (the captures carry no DD; VP9
/// goes through its payload descriptor, AV1 and H264 pass through).
#[test]
fn real_captures_through_the_engine() {
    let captures = [
        ("av1.pcap", Codec::Av1),
        ("h264.pcap", Codec::H264),
        ("vp9.pcap", Codec::Vp9),
        ("contiguous_vp9.pcap", Codec::Vp9),
        ("vp8.pcap", Codec::Vp8),
    ];
    for (name, codec) in captures {
        let packets = common::rtp_packets(name);
        let ssrc = RtpPacket::parse(&packets[0]).expect("RTP").fields().ssrc;
        let mut session = Session::new(TrackConfig::single(codec, ssrc));
        let low = session.subscribe(Layer::BASE);
        let best = session.subscribe(Layer::MAX);
        session.feed(
            packets.iter().map(|p| Bytes::copy_from_slice(p)),
            &|_, _| false,
        );
        for id in [low, best] {
            let Some(received) = session.received.get(&id) else {
                // A capture without a keyframe (contiguous_vp9) forwards nothing: correct.
                continue;
            };
            let headers = received.headers();
            for pair in headers.windows(2) {
                // Gaps only where the publisher's stream has them (real loss in the capture).
                let step = pair[1]
                    .sequence_number
                    .wrapping_sub(pair[0].sequence_number);
                assert!((1..100).contains(&step), "{name}: step {step}");
                assert!(
                    pair[1].timestamp.wrapping_sub(pair[0].timestamp) < 1 << 31,
                    "{name}"
                );
            }
        }
        // The best-layer subscriber's numbering follows the source's exactly from its start.
        if let Some(received) = session.received.get(&best) {
            let source_seqs: Vec<u16> = packets
                .iter()
                .map(|p| RtpPacket::parse(p).expect("RTP").fields().sequence_number)
                .collect();
            let payload_of = |p: &[u8]| RtpPacket::parse(p).expect("RTP").payload().to_vec();
            let first = payload_of(&received.packets[0]);
            let start = packets
                .iter()
                .position(|p| payload_of(p) == first)
                .expect("from the capture");
            let out_first = received.headers()[0].sequence_number;
            for (h, p) in received.headers().iter().zip(&received.packets) {
                let source = packets
                    .iter()
                    .skip(start)
                    .position(|s| payload_of(s) == payload_of(p));
                let source_seq = source_seqs[start + source.expect("a source packet")];
                assert_eq!(
                    h.sequence_number.wrapping_sub(out_first),
                    source_seq.wrapping_sub(source_seqs[start]),
                    "{name}: output numbering follows the source's"
                );
            }
        }
        let counters = session
            .router()
            .receiver_counters(session.track)
            .expect("track");
        assert_eq!(
            counters.received + counters.duplicates + counters.malformed,
            packets.len() as u64,
            "{name}: every packet accounted for"
        );
        let best_count = session.received.get(&best).map_or(0, |r| r.packets.len());
        let low_count = session.received.get(&low).map_or(0, |r| r.packets.len());
        assert!(low_count <= best_count, "{name}");
        // Every capture but contiguous_vp9 (which starts without a keyframe) starts with one.
        if name != "contiguous_vp9.pcap" {
            assert!(
                best_count > packets.len() * 9 / 10,
                "{name}: {best_count} of {}",
                packets.len()
            );
        }
    }
}

#[test]
fn layer_changes_are_events_and_fir_can_replace_pli() {
    let (_, bytes) = generated(ScalabilityMode::L3T3, 20);
    let config = RouterConfig {
        keyframe_request: KeyframeRequest::Fir,
        ..Default::default()
    };
    let mut session = Session::with_router(config, dd_track(0x1000));
    let id = session.subscribe(Layer::new(0, 2));
    let (first, rest) = bytes.split_at(bytes.len() / 2);
    session.feed(first.to_vec(), &|_, _| false);
    session.set_target(id, Layer::new(2, 2));
    session.feed(rest.to_vec(), &|_, _| false);
    let events = session.events();
    let layers: Vec<_> = events
        .iter()
        .filter_map(|e| match e {
            Event::LayerChanged {
                down_track, layer, ..
            } if *down_track == id => Some(*layer),
            _ => None,
        })
        .collect();
    assert_eq!(
        layers.first(),
        Some(&Some(Layer::new(0, 2))),
        "the first layer is announced"
    );
    assert!(
        events.contains(&Event::KeyframeRequested {
            transport: session.publisher,
            track: session.track
        }),
        "L3T3 up-switch asks"
    );
    let firs: Vec<u8> = rtcp_items(&session.rtcp_to_publisher)
        .iter()
        .filter_map(|i| match i {
            RtcpFeedback::Fir(f) => Some(f.entries[0].seq_nr),
            RtcpFeedback::Pli(_) => panic!("FIR configured"),
            _ => None,
        })
        .collect();
    assert_eq!(firs.first(), Some(&1), "FIR sequence numbers start at 1");
    assert!(firs.windows(2).all(|w| w[1] == w[0].wrapping_add(1)));
}

/// A publisher's transport-wide sequence numbers come back as transport-wide CC feedback about
/// ten times a second, naming lost packets as not received.
/// An Opus track (SSRC 0x3000) whose publisher sends the transport-wide sequence number as
/// extension 5.
fn opus_track_with_transport_cc() -> TrackConfig {
    let mut config = TrackConfig::single(Codec::Opus, 0x3000);
    config.transport_cc = Some(TransportCc { ext_id: 5 });
    config
}

#[test]
fn transport_wide_cc_feedback_to_the_publisher() {
    let mut session = Session::new(opus_track_with_transport_cc());
    session.subscribe(Layer::MAX);
    for i in 0..30u16 {
        if i == 7 {
            continue; // lost
        }
        let packet = opus_packet(i, 5, &(1000 + i).to_be_bytes());
        session.feed([packet], &|_, _| false);
        session.advance(Duration::from_millis(20));
    }
    session.advance(Duration::from_millis(100));
    let feedback: Vec<(u16, u16)> = rtcp_items(&session.rtcp_to_publisher)
        .iter()
        .filter_map(|i| match i {
            RtcpFeedback::TransportCc(t) => Some((t.base_sequence, t.packet_status_count)),
            _ => None,
        })
        .collect();
    assert!(
        feedback.len() >= 4,
        "about every 100 ms over 600 ms: {feedback:?}"
    );
    assert_eq!(
        feedback[0].0, 1000,
        "starts at the first transport-wide number"
    );
    // Consecutive feedback covers consecutive ranges, the lost one included.
    for pair in feedback.windows(2) {
        assert_eq!(pair[1].0, pair[0].0 + pair[0].1);
    }
    let covered: u16 = feedback.iter().map(|f| f.1).sum();
    assert_eq!(covered, 30, "every number, the lost one too");
}

/// Found with a real browser: packets the receiver drops (duplicates here; padding probes and
/// late retransmissions in practice) still arrived, and feedback reporting them lost held the
/// publisher's bandwidth estimate, and with it the upper spatial layers, down.
#[test]
fn transport_wide_cc_reports_packets_the_receiver_drops_as_received() {
    use rtcp::transport_feedbacks::transport_layer_cc::TransportLayerCc;
    use webrtc_util::Unmarshal;

    let mut session = Session::new(opus_track_with_transport_cc());
    session.subscribe(Layer::MAX);
    for i in 0..10u16 {
        for copy in 0..2 {
            let twcc = 1000 + 2 * i + copy;
            let packet = opus_packet(i, 5, &twcc.to_be_bytes());
            let refused = session.feed_refusable([packet], &|_, _| false);
            let expected: &[ReceiveError] = match copy {
                0 => &[],
                _ => &[ReceiveError::Duplicate],
            };
            assert_eq!(refused, expected, "packet {i}, copy {copy}");
        }
        session.advance(Duration::from_millis(20));
    }
    session.advance(Duration::from_millis(100));
    assert!(
        session.router().counters().dropped_in >= 10,
        "the copies dropped"
    );
    let received: usize = session
        .rtcp_to_publisher
        .iter()
        .filter_map(|d| TransportLayerCc::unmarshal(&mut d.as_slice()).ok())
        .map(|t| t.recv_deltas.len())
        .sum();
    assert_eq!(received, 20, "every arrival reported received");
}

#[test]
fn a_subscriber_remb_becomes_a_bandwidth_event() {
    let mut session = Session::new(dd_track(0x1000));
    let id = session.subscribe(Layer::MAX);
    let mut ssrcs = RembSsrcs::default();
    ssrcs.push(0x5000).expect("room");
    let remb = RtcpFeedback::Remb(Remb {
        sender_ssrc: 9,
        bitrate_bps: 1_500_000,
        ssrcs,
    });
    session.subscriber_rtcp(id, &rtcp_bytes(&remb));
    let event = session.events().first().copied();
    assert_eq!(
        event,
        Some(Event::BandwidthEstimate {
            transport: session.transports[&id],
            bitrate_bps: 1_500_000
        })
    );
}
