//! A viewer's side of transport-wide CC over the simulated network, as a browser does it:
//! it notes the arrival of every packet by its transport-wide sequence and sends feedback on
//! what arrived every 100 ms.

use std::time::{Duration, Instant};

use bytes::Bytes;
use rtp_ext::codec::Codec;
use rtp_ext::rtp::RtpPacket;
use selector::scalability::{GeneratorConfig, ScalabilityMode, StreamGenerator};
use selector::LayerLimits;
use sfu::engine::rtcp::{
    write_chunks_and_deltas, RtcpFeedback, RtcpWireWriter, RtcpWriter, TransportCc, DELTA_UNIT,
    REFERENCE_TIME_UNIT,
};
use sfu::engine::{DownTrackConfig, TrackConfig, TrackId, TransportId};
use sfu::sim::{Delivery, LinkConfig, Network};

pub const DD_EXT: u8 = 11;
pub const TWCC_EXT: u8 = 3;
pub const FEEDBACK_INTERVAL: Duration = Duration::from_millis(100);

/// The SSRC of the publisher's stream.
pub const PUBLISHER_SSRC: u32 = 0x5151;

/// A publisher of an AV1 L3T3 stream with its DD on an ideal link, and the stream's generator
/// (`generator`, with the publisher's SSRC).
pub fn publish_l3t3(
    net: &mut Network,
    generator: GeneratorConfig,
) -> (TransportId, TrackId, StreamGenerator) {
    let publisher = net.add_transport(LinkConfig::default(), LinkConfig::default());
    let mut config = TrackConfig::single(Codec::Av1, PUBLISHER_SSRC);
    config.dd_ext_id = Some(DD_EXT);
    let track = net
        .with_router(|r| r.publish(publisher, config))
        .expect("a new transport");
    let generator = StreamGenerator::new(
        ScalabilityMode::L3T3,
        GeneratorConfig {
            ssrc: PUBLISHER_SSRC,
            ..generator
        },
    );
    (publisher, track, generator)
}

/// A viewer's side of transport-wide CC: what arrived since its last feedback.
pub struct Viewer {
    pub transport: TransportId,
    /// (transport-wide sequence, arrival), not yet reported.
    arrivals: Vec<(u16, Instant)>,
    /// The first sequence the next feedback reports.
    next_base: Option<u16>,
    feedback_count: u8,
    /// Bytes received in the last stretch, for the rate it was sent.
    pub bytes: u64,
}

impl Viewer {
    pub fn take(&mut self, net: &mut Network) {
        for arrival in net.take_arrivals(self.transport) {
            let Delivery::Media { packet, .. } = arrival.delivery else {
                continue;
            };
            let parsed = RtpPacket::parse(&packet).expect("the router's RTP");
            let seq = parsed.extension(TWCC_EXT).expect("every packet stamped");
            self.arrivals
                .push((u16::from_be_bytes([seq[0], seq[1]]), arrival.at));
            self.bytes += packet.len() as u64;
        }
    }

    /// Feedback on everything since the last, as RTCP, on the viewer's own clock (`epoch`).
    pub fn feedback(&mut self, epoch: Instant) -> Option<Vec<u8>> {
        self.arrivals.sort_by_key(|&(seq, _)| seq);
        let &(first, first_at) = self.arrivals.first()?;
        let base = self.next_base.unwrap_or(first);
        let last = self.arrivals.last()?.0;
        let reference = first_at.duration_since(epoch).as_micros() as u64
            / REFERENCE_TIME_UNIT.as_micros() as u64;
        let mut previous = epoch + REFERENCE_TIME_UNIT * reference as u32;
        let mut packets = Vec::new();
        let mut arrived = self.arrivals.iter().peekable();
        for seq in base..=last {
            match arrived.next_if(|&&(s, _)| s == seq) {
                Some(&(_, at)) => {
                    let units =
                        (at.duration_since(previous).as_micros() / DELTA_UNIT.as_micros()) as i16;
                    previous += DELTA_UNIT * units as u32;
                    packets.push(Some(units));
                }
                None => packets.push(None),
            }
        }
        let mut body = Vec::new();
        let count = write_chunks_and_deltas(&packets, &mut body).expect("fits");
        let feedback = RtcpFeedback::TransportCc(TransportCc {
            sender_ssrc: 9,
            media_ssrc: 0,
            base_sequence: base,
            packet_status_count: count,
            reference_time: reference as u32,
            fb_count: self.feedback_count,
            chunks_and_deltas: &body,
        });
        self.feedback_count = self.feedback_count.wrapping_add(1);
        self.next_base = Some(last.wrapping_add(1));
        self.arrivals.clear();
        let mut out = vec![0; 1500];
        let len = RtcpWireWriter::new(b"viewer")
            .expect("a short CNAME")
            .write(&feedback, &mut out)
            .expect("fits");
        out.truncate(len);
        Some(out)
    }
}

/// Subscribes a viewer on a new transport (uplink `up`, downlink `down`) to the best layer
/// of `track`, with the DD, transport-wide CC and RTX (which probes go out on).
pub fn subscribe(
    net: &mut Network,
    track: TrackId,
    up: LinkConfig,
    down: LinkConfig,
    ssrc: u32,
) -> Viewer {
    let transport = net.add_transport(up, down);
    let mut config = DownTrackConfig::new(ssrc, 45);
    config.dd_ext_id = Some(DD_EXT);
    config.transport_cc_ext_id = Some(TWCC_EXT);
    // Probes go out as RTX copies of what was sent.
    config.rtx = Some((ssrc + 1, 46));
    net.with_router(|r| r.subscribe(transport, track, config, LayerLimits::default()))
        .expect("a new transport");
    Viewer {
        transport,
        arrivals: Vec::new(),
        next_base: None,
        feedback_count: 0,
        bytes: 0,
    }
}

impl Viewer {
    /// Takes what arrived and, when it has any, sends its feedback up its link.
    pub fn report(&mut self, net: &mut Network, epoch: Instant) {
        self.take(net);
        if let Some(feedback) = self.feedback(epoch) {
            net.send_rtcp(self.transport, Bytes::from(feedback))
                .expect("a transport of the network");
        }
    }
}
