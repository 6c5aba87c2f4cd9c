//! The typed view of RTCP the engine works with, independent of any codec crate's types.

use super::generic_nack::Nack;
use super::inline_list::InlineList;
use super::report::{ReceiverReport, SenderReport};

/// FIR entries one request carries here: one per media sender the request names.
pub const MAX_FIR_ENTRIES: usize = 8;

/// SSRCs one REMB carries here: the streams of one transport.
pub const MAX_REMB_SSRCS: usize = 16;

/// RTCP packet types (RFC 3550 section 12.1, RFC 4585 section 6.1).
pub(super) mod packet_type {
    pub const SENDER_REPORT: u8 = 200;
    pub const RECEIVER_REPORT: u8 = 201;
    pub const TRANSPORT_FEEDBACK: u8 = 205;
    pub const PAYLOAD_FEEDBACK: u8 = 206;
}

/// Feedback message types (FMT) inside transport and payload feedback.
pub(super) mod format {
    /// Generic NACK, RFC 4585 section 6.2.1 (transport feedback).
    pub const GENERIC_NACK: u8 = 1;
    /// Transport-wide congestion control feedback (transport feedback).
    pub const TRANSPORT_CC: u8 = 15;
    /// Picture loss indication, RFC 4585 section 6.3.1 (payload feedback).
    pub const PLI: u8 = 1;
    /// Full intra request, RFC 5104 section 4.3.1 (payload feedback).
    pub const FIR: u8 = 4;
    /// Application layer feedback, RFC 4585 section 6.4, which REMB uses (payload feedback).
    pub const APPLICATION: u8 = 15;
}

/// One RTCP packet of a compound packet, as the engine sees it. `'a` borrows the datagram for
/// the one variant kept as bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[expect(
    clippy::large_enum_variant,
    reason = "boxing the 31 inline report blocks would allocate per packet; items stay inline"
)]
pub enum RtcpFeedback<'a> {
    /// A sender report, with its report blocks parsed into a receiver report of the same sender.
    SenderReport(SenderReport),
    /// A receiver report.
    ReceiverReport(ReceiverReport),
    /// Generic NACK (RFC 4585 section 6.2.1).
    Nack(Nack),
    /// Picture loss indication.
    Pli(Pli),
    /// Full intra request.
    Fir(Fir),
    /// Receiver estimated maximum bitrate.
    Remb(Remb),
    /// Transport-wide congestion control feedback.
    TransportCc(TransportCc<'a>),
    /// Any other packet (SDES, BYE, APP, XR, unknown feedback): skipped, counted.
    Other(Other),
}

/// Picture loss indication (RFC 4585 section 6.3.1): the decoder lost a picture, send a keyframe.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Pli {
    /// Who asks.
    pub sender_ssrc: u32,
    /// The media sender asked for a keyframe.
    pub media_ssrc: u32,
}

/// Full intra request (RFC 5104 section 4.3.1): a keyframe, now, from each named sender.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Fir {
    /// Who asks.
    pub sender_ssrc: u32,
    /// The senders asked, each with its command sequence number.
    pub entries: FirEntries,
}

/// The entries of one FIR, inline.
pub type FirEntries = InlineList<FirEntry, MAX_FIR_ENTRIES>;

/// One FIR entry: the media sender asked, and the request's command sequence number, which
/// tells a repeated request from a new one.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct FirEntry {
    /// The media sender asked.
    pub ssrc: u32,
    /// Command sequence number: the same for a repeated request.
    pub seq_nr: u8,
}

/// Receiver estimated maximum bitrate: the receiver's bandwidth estimate for the listed
/// streams, carried as application layer feedback.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Remb {
    /// Who estimates.
    pub sender_ssrc: u32,
    /// The wire's 18-bit mantissa and 6-bit exponent, saturated at `u64::MAX`.
    pub bitrate_bps: u64,
    /// The streams the estimate covers.
    pub ssrcs: RembSsrcs,
}

/// The SSRCs of one REMB, inline.
pub type RembSsrcs = InlineList<u32, MAX_REMB_SSRCS>;

/// Transport-wide congestion control feedback: the fixed fields, and the packet status chunks
/// and receive deltas kept as the bytes they arrived as, for the bandwidth estimator to walk.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TransportCc<'a> {
    /// The feedback's sender (the media receiver).
    pub sender_ssrc: u32,
    /// The media source it was sent for (often 0 or arbitrary).
    pub media_ssrc: u32,
    /// Transport-wide sequence number of the first packet reported.
    pub base_sequence: u16,
    /// Packets reported, from `base_sequence` on.
    pub packet_status_count: u16,
    /// 24 bits, in multiples of 64 ms.
    pub reference_time: u32,
    /// Counts feedback packets, so the receiver can tell lost feedback.
    pub fb_count: u8,
    /// Packet status chunks, receive deltas and padding up to the packet's end.
    pub chunks_and_deltas: &'a [u8],
}

/// A packet the engine does not act on: its type and count/format field, for counting.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Other {
    /// The RTCP packet type.
    pub packet_type: u8,
    /// The count or format field (FMT, RC).
    pub count_or_format: u8,
}
