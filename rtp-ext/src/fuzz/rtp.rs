//! RTP packet fuzz body.

use std::fmt::Debug;

use crate::ext::{
    AbsCaptureTime, AbsSendTime, AudioLevel, HeaderExtension, Mid, PlayoutDelay,
    RepairedRtpStreamId, RtpStreamId, TransportSequenceNumber, VideoLayersAllocation,
    VideoOrientation,
};
use crate::rtp::{
    unwrap_rtx, write_header, ExtensionIds, ExtensionSelection, RtpFields, RtpPacket, WriteError,
    FIXED_HEADER_LEN,
};

/// The longest header the writer can produce: 15 CSRCs and 16 two-byte elements of 255 bytes.
const MAX_HEADER_LEN: usize = FIXED_HEADER_LEN + 15 * 4 + 4 + 16 * (2 + 255);

/// `rtp_packet`: arbitrary bytes as an RTP packet. Whatever parses has every element tried as
/// every typed extension (each value that reads must write back to itself), is tried as RTX,
/// and has its header rewritten, which must read back with the new fields and the same CSRCs
/// and elements.
pub fn rtp_packet(data: &[u8]) {
    let Ok(packet) = RtpPacket::parse(data) else {
        return;
    };
    for (_, bytes) in packet.extensions() {
        typed_round_trips(bytes);
    }
    if let Ok(rtx) = unwrap_rtx(&packet) {
        let payload = packet.payload_range();
        assert!(rtx.payload.start == payload.start + 2 && rtx.payload.end == payload.end);
    }
    rewrite(&packet, true);
    rewrite(&packet, false);
}

fn typed_round_trips(bytes: &[u8]) {
    round_trip::<AbsSendTime>(bytes);
    round_trip::<TransportSequenceNumber>(bytes);
    round_trip::<AudioLevel>(bytes);
    round_trip::<PlayoutDelay>(bytes);
    round_trip::<AbsCaptureTime>(bytes);
    round_trip::<VideoOrientation>(bytes);
    round_trip::<VideoLayersAllocation>(bytes);
    // The three identifiers share one implementation: their texts must agree.
    let mid = Mid::parse(bytes).map(|m| m.0);
    assert_eq!(mid, RtpStreamId::parse(bytes).map(|r| r.0));
    assert_eq!(mid, RepairedRtpStreamId::parse(bytes).map(|r| r.0));
    if let Ok(text) = mid {
        let mut buf = [0u8; 256];
        let len = Mid(text).write(&mut buf).expect("a parsed mid is writable");
        assert_eq!(Mid::parse(&buf[..len]), Ok(Mid(text)));
    }
}

fn round_trip<T>(bytes: &[u8])
where
    T: for<'a> HeaderExtension<'a> + PartialEq + Debug,
{
    let Ok(value) = T::parse(bytes) else {
        return;
    };
    let mut buf = [0u8; 512];
    let len = value.write(&mut buf).expect("a parsed value is writable");
    assert_eq!(T::parse(&buf[..len]), Ok(value));
}

/// Rewrites the header with every field changed and every element kept.
fn rewrite(packet: &RtpPacket<'_>, two_byte_allowed: bool) {
    let source = packet.fields();
    let fields = RtpFields {
        marker: !source.marker,
        payload_type: source.payload_type ^ 0x55,
        sequence_number: source.sequence_number.wrapping_add(1),
        timestamp: source.timestamp.wrapping_add(3000),
        ssrc: !source.ssrc,
    };
    let selection = ExtensionSelection {
        keep: ExtensionIds::ALL,
        added: &[],
        two_byte_allowed,
    };
    let mut buf = [0u8; MAX_HEADER_LEN];
    let needs_two_byte = packet
        .extensions()
        .any(|(id, bytes)| id > 14 || bytes.is_empty() || bytes.len() > 16);
    let len = match write_header(packet, &fields, &selection, &mut buf) {
        Err(WriteError::TwoByteNotNegotiated) if needs_two_byte && !two_byte_allowed => return,
        other => other.expect("every parsed header is writable"),
    };
    let written = RtpPacket::parse(&buf[..len]).expect("a written header reads back");
    assert_eq!(written.fields(), fields);
    assert_eq!(written.header_len(), len);
    assert!(written.csrcs().eq(packet.csrcs()));
    assert!(written.extensions().eq(packet.extensions()));
}
