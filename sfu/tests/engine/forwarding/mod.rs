//! The engine end to end, in memory and deterministic: generated AV1-style DD streams, a real
//! VP8 capture and audio through one publisher to several subscribers over `sfu::sim` with
//! ideal links. One module per concept: layers and keyframe requests, repair of loss on either
//! side, simulcast switching, RTCP both ways, and the kinds of media and input.

mod feedback;
mod layers;
mod media;
mod repair;
mod simulcast;

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
    RouterError, StreamConfig, TrackConfig, TrackId, TransportCc, TransportId, MAX_RESENDS,
    SEND_HISTORY,
};
use sfu::sim::{Delivery, LinkConfig, Network, Refusal};

use crate::common;

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

/// The generated packets by their frame number: what the subscribers' packets are checked
/// against.
fn by_frame(packets: &[GeneratedPacket]) -> HashMap<u64, &GeneratedPacket> {
    packets.iter().map(|p| (p.frame_number, p)).collect()
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
