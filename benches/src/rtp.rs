//! RTP header cases: the one-pass packet view and the per-subscriber header writer.

use std::hint::black_box;

use rtp_ext::rtp::{
    write_header, ExtensionElement, ExtensionIds, ExtensionSelection, RtpFields, RtpPacket,
};

use crate::fixtures::{av1_packet_with_dd, dd_bytes, DELTA_5_MASK};
use crate::Case;

/// Extension ids of the real AV1 packet: abs-send-time, transport-wide-cc, and the DD.
const ABS_SEND_TIME: u8 = 3;
const TRANSPORT_CC: u8 = 5;
const DD: u8 = 11;

pub fn cases() -> Vec<Case> {
    vec![parse_with_6_extensions(), write_with_dd()]
}

/// The real AV1 packet rewritten to carry six elements: its own three plus mid, rid and
/// audio-level-sized filler, as a browser's video packet commonly does.
fn packet_with_6_extensions() -> Vec<u8> {
    let source = av1_packet_with_dd();
    let packet = RtpPacket::parse(&source).expect("real packet parses");
    let added = [
        ExtensionElement { id: 1, data: b"0" },
        ExtensionElement { id: 2, data: b"q" },
        ExtensionElement {
            id: 4,
            data: &[0x12, 0x34],
        },
    ];
    let selection = ExtensionSelection {
        keep: ExtensionIds::ALL,
        added: &added,
        two_byte_allowed: false,
    };
    let mut out = vec![0u8; 1500];
    let len = write_header(&packet, &packet.fields(), &selection, &mut out).expect("fits");
    out.truncate(len);
    out.extend_from_slice(packet.payload());
    out
}

fn parse_with_6_extensions() -> Case {
    let bytes = packet_with_6_extensions();
    assert_eq!(RtpPacket::parse(&bytes).map(|p| p.extension_count()), Ok(6));
    Case::new("rtp/parse/header_with_6_ext", move || {
        let packet = RtpPacket::parse(black_box(&bytes));
        black_box(packet).expect("parses");
    })
}

/// A forwarded header: new SSRC, sequence number and timestamp, abs-send-time and
/// transport-wide-cc kept, and a rewritten 5-byte DD in place of the source's.
fn write_with_dd() -> Case {
    // Leaked so the parsed view, which borrows it, can live in the case: once per run.
    let source: &'static [u8] = av1_packet_with_dd().leak();
    let packet = RtpPacket::parse(source).expect("real packet parses");
    let dd = dd_bytes(DELTA_5_MASK);
    let mut out = [0u8; 256];
    Case::new("rtp/write/header_with_dd", move || {
        let fields = RtpFields {
            ssrc: 0x1234_5678,
            sequence_number: 4242,
            timestamp: 90_000,
            ..packet.fields()
        };
        let added = [ExtensionElement { id: DD, data: &dd }];
        let selection = ExtensionSelection {
            keep: ExtensionIds::of(&[ABS_SEND_TIME, TRANSPORT_CC]),
            added: &added,
            two_byte_allowed: true,
        };
        let len = write_header(black_box(&packet), &fields, &selection, &mut out);
        black_box(len).expect("fits");
    })
}
