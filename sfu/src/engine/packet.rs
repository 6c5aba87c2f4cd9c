//! A published packet parsed once: header, codec descriptor and DD, with the payload shared as
//! `Bytes`. Every subscriber reads the same parse.

use std::ops::Range;
use std::sync::Arc;
use std::time::Instant;

use bytes::Bytes;
use rtp_ext::codec::{parse_payload, Codec, PayloadDescriptor};
use rtp_ext::dd::{DependencyDescriptor, FrameDependencyStructure};
use rtp_ext::ext::{AudioLevel, HeaderExtension};
use rtp_ext::rtp::{PacketLayout, RtpFields, RtpPacket};

/// One received packet, parsed. Retransmissions (RTX) are stored as the original packet.
#[derive(Debug, Clone)]
pub struct ParsedPacket {
    /// The packet as received (for RTX: the RTX packet; `payload` points past the OSN).
    pub bytes: Bytes,
    /// Header fields of the original stream (for RTX: the original SSRC and sequence number).
    pub fields: RtpFields,
    /// Sequence number extended past 16 bits, in the stream's own order.
    #[cfg_attr(
        not(feature = "internal"),
        expect(dead_code, reason = "used through the internal API only")
    )]
    pub ext_seq: i64,
    /// Index of the track's stream: the simulcast layer.
    pub stream: u8,
    /// When the engine was given it.
    pub arrival: Instant,
    /// Where the payload sits in `bytes`.
    pub payload: Range<usize>,
    /// Where the header fields, CSRCs and extensions sit in `bytes`: parsed once, reattached
    /// per subscriber to copy kept extensions.
    pub layout: PacketLayout,
    /// The codec payload descriptor (VP8, VP9, H264, AV1 aggregation header), parsed once.
    pub descriptor: Option<PayloadDescriptor>,
    /// The first packet of a frame decodable on its own.
    pub keyframe_start: bool,
    /// The Dependency Descriptor, if the packet carried one and it was readable.
    pub dd: Option<DependencyDescriptor>,
    /// The structure `dd` was read with.
    pub structure: Option<Arc<FrameDependencyStructure>>,
    /// The audio level (RFC 6464) it carried.
    #[cfg_attr(
        not(feature = "internal"),
        expect(dead_code, reason = "used through the internal API only")
    )]
    pub audio_level: Option<AudioLevel>,
    /// The stream's clock as its latest sender report gave it, for aligning simulcast streams.
    pub sender_clock: Option<SenderClock>,
}

/// An NTP time and the RTP timestamp of the same instant, from a sender report.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SenderClock {
    pub ntp: u64,
    pub rtp: u32,
    pub clock_rate: u32,
}

impl SenderClock {
    /// The NTP time of RTP timestamp `ts` on this clock.
    pub fn ntp_of(&self, ts: u32) -> u64 {
        // The wrapping distance read as signed: timestamps near the report, either side.
        let ticks = i64::from(ts.wrapping_sub(self.rtp) as i32);
        let ntp_delta = (i128::from(ticks) << 32) / i128::from(self.clock_rate.max(1));
        // Truncation intended: NTP time wraps at 64 bits.
        (i128::from(self.ntp) + ntp_delta) as u64
    }

    /// The RTP timestamp on this clock of NTP time `ntp`.
    pub fn rtp_of(&self, ntp: u64) -> u32 {
        // The wrapping distance read as signed.
        let ntp_delta = i128::from(ntp.wrapping_sub(self.ntp) as i64);
        let ticks = (ntp_delta * i128::from(self.clock_rate)) >> 32;
        // Truncation intended: RTP timestamps wrap at 32 bits.
        self.rtp.wrapping_add(ticks as u32)
    }
}

/// What the receiver knows when parsing a packet of one stream.
#[derive(Debug, Clone, Copy)]
pub struct ParseContext<'a> {
    pub codec: Codec,
    pub dd_ext_id: Option<u8>,
    pub audio_level_ext_id: Option<u8>,
    /// The stream's latest template structure.
    pub structure: Option<&'a Arc<FrameDependencyStructure>>,
}

impl ParsedPacket {
    /// The payload, shared with every subscriber.
    #[cfg_attr(
        not(feature = "internal"),
        expect(dead_code, reason = "used through the internal API only")
    )]
    pub fn payload(&self) -> &[u8] {
        &self.bytes[self.payload.clone()]
    }

    /// The source packet's view (for its CSRCs and extensions), without parsing it again.
    pub fn source_header(&self) -> Option<RtpPacket<'_>> {
        self.layout.attach(&self.bytes)
    }

    /// Whether it carries padding only: absorbed, never forwarded.
    pub fn is_padding_only(&self) -> bool {
        self.payload.is_empty()
    }
}

/// What the receiver reads of a packet beyond its header.
#[derive(Debug, Clone)]
pub struct Described {
    pub descriptor: Option<PayloadDescriptor>,
    pub dd: Option<DependencyDescriptor>,
    pub audio_level: Option<AudioLevel>,
}

/// The codec and DD view of a payload and its extensions. A DD that does not parse is left
/// out (counted by the caller): the packet still carries media.
pub fn describe(packet: &RtpPacket<'_>, payload: &[u8], ctx: &ParseContext<'_>) -> Described {
    let descriptor = (!payload.is_empty())
        .then(|| parse_payload(ctx.codec, payload).ok())
        .flatten();
    let dd = ctx
        .dd_ext_id
        .and_then(|id| packet.extension(id))
        .and_then(|bytes| DependencyDescriptor::parse(bytes, ctx.structure).ok());
    let audio_level = ctx
        .audio_level_ext_id
        .and_then(|id| packet.extension(id))
        .and_then(|bytes| AudioLevel::parse(bytes).ok());
    Described {
        descriptor,
        dd,
        audio_level,
    }
}

/// Whether a packet starts a keyframe: a DD that attaches a structure, or the codec's own
/// descriptor.
pub fn is_keyframe_start(
    descriptor: Option<&PayloadDescriptor>,
    dd: Option<&DependencyDescriptor>,
) -> bool {
    if let Some(dd) = dd {
        return dd.start_of_frame && dd.attached_structure.is_some();
    }
    descriptor.is_some_and(|d| {
        let s = d.summary();
        s.keyframe && s.start_of_frame != Some(false)
    })
}
