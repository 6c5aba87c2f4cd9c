//! A Receiver: one per published track. It parses each incoming packet once, keeps the recent
//! ones for retransmission, unwraps RTX, tracks loss for NACKs and reception statistics, and
//! keeps each stream's DD template structure.

use std::fmt;
use std::ops::Range;
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use rtp_ext::dd::FrameDependencyStructure;
use rtp_ext::ext::AudioLevel;
use rtp_ext::rtp::{unwrap_rtx, ParseError, RtpFields, RtpPacket};
use selector::Unwrapper;
use smallvec::SmallVec;

use super::layer_rates::{LayerBitrates, LayerRates};
use super::nack::{Arrival, NackGenerator};
use super::packet::{
    describe, is_keyframe_start, Described, ParseContext, ParsedPacket, SenderClock,
};
use super::packet_ring::PacketRing;
use super::receive_stats::{ReceiveStats, ReceivedPacket};
use super::rtcp::{compact_ntp, ReportBlock, ReportBlocks, SenderReport};
use super::stream_activity::StreamActivity;
use super::track::{StreamConfig, TrackConfig};

/// Packets kept per stream for retransmission.
pub const RECEIVE_RING: usize = 512;

/// Why an incoming packet was dropped. The packet is counted and nothing else changes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ReceiveError {
    /// The RTP header, an extension or the payload descriptor did not parse.
    Malformed(ParseError),
    /// No stream of this track (or no track of the transport) has the SSRC.
    UnknownSsrc,
    /// The host named a transport the router does not have.
    UnknownTransport,
    /// An RTX packet with a payload too short for its original sequence number.
    BadRtx,
    /// Padding alone on the repair (RTX) stream, with no original sequence number: a
    /// sender's bandwidth probe (RFC 4588 streams carry it as senders pace). Counted for
    /// the transport's feedback, then absorbed: it repairs nothing.
    Padding,
    /// Seen already (a duplicate, or a retransmission of a packet that arrived).
    Duplicate,
    /// Older than anything kept, or a jump so large the stream was reset.
    OutOfWindow,
    /// The Dependency Descriptor of stream `stream` cannot be read: the keyframe with its
    /// structure has not arrived (reordered, or lost), or it is malformed. The packet is not
    /// taken as received: it is NACKed like a lost one, and its retransmission is read once the
    /// structure is known. Forwarding it without its DD could split its frame.
    UnreadableDd {
        /// The stream index within the track.
        stream: u8,
    },
}

impl fmt::Display for ReceiveError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Malformed(e) => write!(f, "malformed rtp: {e}"),
            Self::UnknownSsrc => f.write_str("unknown ssrc"),
            Self::UnknownTransport => f.write_str("unknown transport"),
            Self::BadRtx => f.write_str("rtx packet without an original sequence number"),
            Self::Padding => f.write_str("padding on the repair stream"),
            Self::Duplicate => f.write_str("duplicate packet"),
            Self::OutOfWindow => f.write_str("sequence number out of window"),
            Self::UnreadableDd { .. } => f.write_str("unreadable dependency descriptor"),
        }
    }
}

impl std::error::Error for ReceiveError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            Self::Malformed(e) => Some(e),
            _ => None,
        }
    }
}

/// Where a stored packet is: stream index and extended sequence number.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PacketRef {
    /// The stream index within the track: the simulcast layer.
    pub stream: u8,
    /// Sequence number extended past 16 bits.
    pub ext_seq: i64,
}

/// One RTP stream of the track (one simulcast layer).
#[derive(Debug)]
struct Stream {
    ssrc: u32,
    rtx_ssrc: Option<u32>,
    sequence: Unwrapper,
    ring: PacketRing<ParsedPacket>,
    nack: NackGenerator,
    stats: ReceiveStats,
    structure: Option<Arc<FrameDependencyStructure>>,
    sender_clock: Option<SenderClock>,
}

impl Stream {
    fn new(config: StreamConfig, clock_rate: u32) -> Self {
        Self {
            ssrc: config.ssrc,
            rtx_ssrc: config.rtx_ssrc,
            sequence: Unwrapper::default(),
            ring: PacketRing::new(RECEIVE_RING),
            nack: NackGenerator::default(),
            stats: ReceiveStats::new(config.ssrc, clock_rate),
            structure: None,
            sender_clock: None,
        }
    }
}

/// Counters of what a receiver took in, dropped by reason, and asked to have repaired.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ReceiverCounters {
    /// Packets stored for fan-out.
    pub received: u64,
    /// Packets whose RTP header or payload descriptor did not parse.
    pub malformed: u64,
    /// Packets under an SSRC none of the track's streams has.
    pub unknown_ssrc: u64,
    /// Packets already stored (a copy, or a retransmission that arrived after the original).
    pub duplicates: u64,
    /// Packets too old or too far ahead for the receive window.
    pub out_of_window: u64,
    /// Packets whose Dependency Descriptor did not parse against the known structure.
    pub bad_dd: u64,
    /// Padding-only packets, absorbed without a sequence gap (on the media stream) or
    /// without a trace (on the repair stream).
    pub padding_only: u64,
    /// NACKs sent to the publisher, retries included (RFC 4585).
    pub nacked: u64,
    /// Missing packets that arrived after all, by retransmission or late.
    pub recovered: u64,
    /// Missing packets given up on after the last retry or the maximum age.
    pub given_up: u64,
}

/// One published track's reception: its streams' sequence tracking, NACK generation, reception
/// statistics and recent packets (for retransmissions and late subscribers' switch points).
#[derive(Debug)]
pub struct Receiver {
    config: TrackConfig,
    streams: SmallVec<[Stream; 4]>,
    counters: ReceiverCounters,
    /// The latest audio level (RFC 6464) received, for active-speaker detection.
    audio_level: Option<AudioLevel>,
    /// What each target layer costs a subscriber, for layer allocation.
    layer_rates: LayerRates,
    /// Which streams of a simulcast track are sent now.
    activity: Option<StreamActivity>,
    /// The streams sent, when that changed since the router last took it.
    activity_changed: Option<u8>,
}

impl Receiver {
    /// A receiver for a track published with `config`.
    pub fn new(config: TrackConfig) -> Self {
        let streams = config
            .streams
            .iter()
            .map(|&s| Stream::new(s, config.clock_rate))
            .collect();
        let activity = config
            .is_simulcast()
            .then(|| StreamActivity::new(config.streams.len()));
        Self {
            config,
            streams,
            counters: ReceiverCounters::default(),
            audio_level: None,
            layer_rates: LayerRates::default(),
            activity,
            activity_changed: None,
        }
    }

    /// What the track was published with (simulcast SSRCs as bound so far).
    pub fn config(&self) -> &TrackConfig {
        &self.config
    }

    /// Gives stream `index` the SSRCs learned from its packets (simulcast streams are
    /// announced by rid, not SSRC). A new media SSRC starts the stream's reception afresh; an
    /// RTX SSRC learned later (at the first retransmission) keeps it, or the packets kept for
    /// NACKs and the sequence the subscribers follow would be lost mid-stream.
    pub(super) fn bind_stream(&mut self, index: usize, ssrcs: StreamConfig) -> Option<()> {
        let clock_rate = self.config.clock_rate;
        *self.config.streams.get_mut(index)? = ssrcs;
        let stream = self.streams.get_mut(index)?;
        if stream.ssrc == ssrcs.ssrc {
            stream.rtx_ssrc = ssrcs.rtx_ssrc;
        } else {
            *stream = Stream::new(ssrcs, clock_rate);
        }
        Some(())
    }

    /// What the receiver took in, dropped and asked to have repaired, over all its streams.
    pub fn counters(&self) -> ReceiverCounters {
        self.streams
            .iter()
            .map(|s| s.nack.stats())
            .fold(self.counters, |c, n| ReceiverCounters {
                nacked: c.nacked + n.nacked,
                recovered: c.recovered + n.recovered,
                given_up: c.given_up + n.given_up,
                ..c
            })
    }

    /// What a subscriber receiving each layer would be sent, over the last two seconds; a
    /// simulcast stream the publisher paused costs nothing, since it cannot be had.
    pub fn layer_bitrates(&self, now: Instant) -> LayerBitrates {
        let rates = self.layer_rates.bitrates(now);
        match &self.activity {
            Some(activity) => LayerBitrates::from_fn(|layer| {
                let sent = layer.spatial < 8 && activity.active() & (1 << layer.spatial) != 0;
                if sent {
                    rates.bps(layer)
                } else {
                    0
                }
            }),
            None => rates,
        }
    }

    /// The simulcast streams the publisher sends now (bit `i`: stream `i`), when that changed
    /// since the last call.
    pub fn take_activity_change(&mut self) -> Option<u8> {
        self.activity_changed.take()
    }

    /// The latest audio level the publisher sent (RFC 6464).
    pub fn audio_level(&self) -> Option<AudioLevel> {
        self.audio_level
    }

    /// Parses and stores one packet; on success it is ready for fan-out under the returned
    /// reference. Errors are counted.
    #[cfg_attr(
        not(any(test, feature = "internal")),
        expect(dead_code, reason = "used by tests and through the internal API only")
    )]
    pub fn receive(&mut self, now: Instant, bytes: Bytes) -> Result<PacketRef, ReceiveError> {
        let result = match RtpPacket::parse(&bytes) {
            Ok(packet) => self.receive_inner(now, now, &packet, bytes.clone()),
            Err(e) => Err(ReceiveError::Malformed(e)),
        };
        self.count(result)
    }

    /// [`receive`](Self::receive) of a packet the caller has parsed already (`packet` is the
    /// view of `bytes`): the header is read once, whoever needs it. It `arrived` at or before
    /// `now`: the interarrival jitter (RFC 3550 A.8) runs on arrivals, everything else on `now`.
    pub fn receive_parsed(
        &mut self,
        now: Instant,
        arrived: Instant,
        packet: &RtpPacket<'_>,
        bytes: Bytes,
    ) -> Result<PacketRef, ReceiveError> {
        let result = self.receive_inner(now, arrived, packet, bytes);
        self.count(result)
    }

    /// Counts a packet refused before it reached the receiver (its header did not parse).
    pub fn refuse(&mut self, error: ReceiveError) -> ReceiveError {
        let _ = self.count(Err(error));
        error
    }

    fn count(
        &mut self,
        result: Result<PacketRef, ReceiveError>,
    ) -> Result<PacketRef, ReceiveError> {
        match result {
            Ok(_) => self.counters.received += 1,
            Err(ReceiveError::Malformed(_) | ReceiveError::BadRtx) => self.counters.malformed += 1,
            // A receiver is never handed a packet for no transport.
            Err(ReceiveError::UnknownSsrc | ReceiveError::UnknownTransport) => {
                self.counters.unknown_ssrc += 1
            }
            Err(ReceiveError::Duplicate) => self.counters.duplicates += 1,
            Err(ReceiveError::Padding) => self.counters.padding_only += 1,
            Err(ReceiveError::OutOfWindow) => self.counters.out_of_window += 1,
            Err(ReceiveError::UnreadableDd { .. }) => self.counters.bad_dd += 1,
        }
        result
    }

    /// A stored packet, if still kept.
    pub fn packet(&self, at: PacketRef) -> Option<&ParsedPacket> {
        self.streams
            .get(usize::from(at.stream))?
            .ring
            .get(at.ext_seq)
    }

    /// The round trip to the publisher measured from NACKs answered (the largest over the
    /// track's streams); None before the first retransmission.
    pub fn publisher_rtt(&self) -> Option<Duration> {
        self.streams
            .iter()
            .filter_map(|s| s.nack.measured_rtt())
            .max()
    }

    /// Sequence numbers due for a NACK, per stream SSRC, into `out`.
    pub fn poll_nacks(&mut self, now: Instant, default_rtt: Duration, out: &mut Vec<(u32, u16)>) {
        for stream in &mut self.streams {
            let ssrc = stream.ssrc;
            out.extend(
                stream
                    .nack
                    .poll_nacks(now, default_rtt)
                    .map(|seq| (ssrc, seq)),
            );
        }
    }

    /// A publisher's sender report: its reception statistics learn the LSR for the next
    /// report block, and its stream's packets carry the NTP/RTP mapping from now on.
    pub fn on_sender_report(&mut self, report: &SenderReport, now: Instant) {
        if let Some(stream) = self.streams.iter_mut().find(|s| s.ssrc == report.ssrc) {
            stream
                .stats
                .on_sender_report(compact_ntp(report.ntp_time), now);
            stream.sender_clock = Some(SenderClock {
                ntp: report.ntp_time,
                rtp: report.rtp_time,
                clock_rate: self.config.clock_rate,
            });
        }
    }

    /// One report block per stream that has received anything, starting new loss intervals.
    #[must_use = "what it returns is lost otherwise"]
    pub fn report_blocks(&mut self, now: Instant) -> ReportBlocks {
        let mut blocks = ReportBlocks::default();
        for report in self.streams.iter_mut().filter_map(|s| s.stats.report(now)) {
            let block = ReportBlock {
                ssrc: report.ssrc,
                fraction_lost: report.fraction_lost,
                total_lost: report.cumulative_lost,
                highest_sequence: report.extended_highest_seq,
                jitter: report.jitter,
                last_sr: report.last_sr,
                delay_since_last_sr: report.delay_since_last_sr,
            };
            // At most four streams: far below the 31 blocks a report holds.
            let _ = blocks.push(block);
        }
        blocks
    }

    /// When a NACK may next be due.
    pub fn next_timeout(&self) -> Option<Instant> {
        self.streams
            .iter()
            .filter_map(|s| s.nack.next_timeout())
            .min()
    }

    fn receive_inner(
        &mut self,
        now: Instant,
        arrived: Instant,
        packet: &RtpPacket<'_>,
        bytes: Bytes,
    ) -> Result<PacketRef, ReceiveError> {
        let (index, fields, payload) = self.original(packet)?;
        let stream = &mut self.streams[index];
        let ctx = ParseContext {
            codec: self.config.codec,
            dd_ext_id: self.config.dd_ext_id,
            audio_level_ext_id: self.config.audio_level_ext_id,
            structure: stream.structure.as_ref(),
        };
        let Described {
            descriptor,
            dd,
            audio_level,
        } = describe(packet, &bytes[payload.clone()], &ctx);
        let dd_sent = self
            .config
            .dd_ext_id
            .and_then(|id| packet.extension(id))
            .is_some();
        if dd_sent && dd.is_none() {
            // Before the packet counts as received anywhere (NACK state, ring, statistics).
            return Err(ReceiveError::UnreadableDd {
                stream: index as u8,
            });
        }
        let arrival = if packet.fields().ssrc == fields.ssrc {
            stream.nack.on_packet(fields.sequence_number, now)
        } else {
            stream.nack.on_retransmission(fields.sequence_number, now)
        };
        if arrival == Arrival::Old {
            return Err(ReceiveError::Duplicate);
        }
        let ext_seq = stream.sequence.unwrap(fields.sequence_number);
        if stream.ring.get(ext_seq).is_some() {
            return Err(ReceiveError::Duplicate);
        }
        let received = ReceivedPacket {
            seq: fields.sequence_number,
            ts: fields.timestamp,
            len: bytes.len(),
            padding_only: payload.is_empty(),
        };
        stream.stats.on_packet(received, arrived);
        self.counters.padding_only += u64::from(payload.is_empty());
        if audio_level.is_some() {
            self.audio_level = audio_level;
        }
        if let Some(structure) = dd.as_ref().and_then(|d| d.attached_structure.clone()) {
            stream.structure = Some(structure);
        }
        let parsed = ParsedPacket {
            fields,
            ext_seq,
            // At most four streams (the SmallVec's inline size is the simulcast limit).
            stream: index as u8,
            arrival: now,
            payload,
            layout: packet.layout(),
            keyframe_start: is_keyframe_start(descriptor.as_ref(), dd.as_ref()),
            descriptor,
            structure: dd.as_ref().and(stream.structure.clone()),
            dd,
            audio_level,
            sender_clock: stream.sender_clock,
            bytes,
        };
        // Padding is absorbed, never forwarded: it is no layer's rate, nor a stream's sign
        // of life; nor is a retransmission, which may come after its stream paused.
        if !parsed.is_padding_only() {
            let simulcast = self.config.is_simulcast();
            self.layer_rates.record(now, &parsed, simulcast);
            let original = packet.fields().ssrc == fields.ssrc;
            if let Some(activity) = self.activity.as_mut().filter(|_| original) {
                let changed = activity.on_media(now, index as u8, fields.timestamp);
                self.activity_changed = changed.or(self.activity_changed);
            }
        }
        if !stream.ring.insert(ext_seq, parsed) {
            return Err(ReceiveError::OutOfWindow);
        }
        Ok(PacketRef {
            stream: index as u8,
            ext_seq,
        })
    }

    /// The stream a packet belongs to, and its original header fields and payload: for an RTX
    /// packet (RFC 4588), the original sequence number and SSRC, and the payload after the OSN.
    fn original(
        &self,
        packet: &RtpPacket<'_>,
    ) -> Result<(usize, RtpFields, Range<usize>), ReceiveError> {
        let ssrc = packet.fields().ssrc;
        let index = self
            .streams
            .iter()
            .position(|s| s.ssrc == ssrc || s.rtx_ssrc == Some(ssrc))
            .ok_or(ReceiveError::UnknownSsrc)?;
        let stream = &self.streams[index];
        if stream.rtx_ssrc != Some(ssrc) || stream.ssrc == ssrc {
            return Ok((index, packet.fields(), packet.payload_range()));
        }
        if packet.payload().is_empty() {
            return Err(ReceiveError::Padding);
        }
        let rtx = unwrap_rtx(packet).map_err(|_| ReceiveError::BadRtx)?;
        let fields = RtpFields {
            ssrc: stream.ssrc,
            sequence_number: rtx.original_sequence_number,
            ..packet.fields()
        };
        Ok((index, fields, rtx.payload))
    }
}

#[cfg(test)]
mod tests {
    use rtp_ext::codec::Codec;

    use super::*;

    /// An RTP header of SSRC `ssrc` and sequence `seq` followed by `payload`.
    fn packet(ssrc: u32, seq: u16, padding: bool, payload: &[u8]) -> Bytes {
        let first = if padding { 0xA0 } else { 0x80 };
        let mut bytes = vec![first, 97];
        bytes.extend_from_slice(&seq.to_be_bytes());
        bytes.extend_from_slice(&[0, 0, 0, 9]);
        bytes.extend_from_slice(&ssrc.to_be_bytes());
        bytes.extend_from_slice(payload);
        Bytes::from(bytes)
    }

    /// A sender's probes: padding alone on the RTX stream, with no original sequence number.
    /// They are told apart from a retransmission cut short, and each is counted as what it is.
    #[test]
    fn padding_on_the_repair_stream_is_absorbed_not_taken_for_a_bad_retransmission() {
        let mut config = TrackConfig::single(Codec::Vp8, 1);
        config.streams[0].rtx_ssrc = Some(2);
        let mut receiver = Receiver::new(config);
        let now = Instant::now();
        // Four bytes of padding, the last one its count (RFC 3550 section 5.1).
        let probe = packet(2, 7, true, &[0, 0, 0, 4]);
        assert_eq!(receiver.receive(now, probe), Err(ReceiveError::Padding));
        let cut_short = packet(2, 8, false, &[0x12]);
        assert_eq!(receiver.receive(now, cut_short), Err(ReceiveError::BadRtx));
        let counters = receiver.counters();
        assert_eq!((counters.padding_only, counters.malformed), (1, 1));
        assert_eq!(counters.received, 0);
    }
}
