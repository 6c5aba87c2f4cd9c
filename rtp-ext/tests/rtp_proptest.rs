//! Property tests of the RTP view and header writer: random headers and extension lists
//! written and read back, cross-checked both ways against an independent RTP implementation,
//! and arbitrary bytes that must never panic.

use bytes::Bytes;
use proptest::prelude::*;
use rtp_ext::rtp::{
    write_header, ExtensionElement, ExtensionForm, ExtensionIds, ExtensionSelection, RtpFields,
    RtpPacket, ONE_BYTE_PROFILE, TWO_BYTE_PROFILE,
};
use webrtc_util::marshal::{Marshal, Unmarshal};

fn arb_fields() -> impl Strategy<Value = RtpFields> {
    (
        any::<bool>(),
        0..=127u8,
        any::<u16>(),
        any::<u32>(),
        any::<u32>(),
    )
        .prop_map(
            |(marker, payload_type, sequence_number, timestamp, ssrc)| RtpFields {
                marker,
                payload_type,
                sequence_number,
                timestamp,
                ssrc,
            },
        )
}

/// Up to 16 elements with distinct ids; `one_byte` keeps them within the one-byte form.
fn arb_elements(one_byte: bool) -> impl Strategy<Value = Vec<(u8, Vec<u8>)>> {
    let (ids, lens) = if one_byte {
        (1..=14u8, 1..=16usize)
    } else {
        (1..=255u8, 0..=255usize)
    };
    let element = (ids, prop::collection::vec(any::<u8>(), lens));
    prop::collection::vec(element, 0..=16).prop_map(|mut elements| {
        let mut seen = ExtensionIds::NONE;
        elements.retain(|(id, _)| {
            let fresh = !seen.contains(*id);
            seen = seen.with(*id);
            fresh
        });
        elements
    })
}

/// Fields, CSRCs, extension elements and payload of a packet.
type PacketParts = (RtpFields, Vec<u32>, Vec<(u8, Vec<u8>)>, Vec<u8>);

/// A packet without extensions: the source a header is rewritten from.
fn source_packet(csrcs: &[u32], payload: &[u8]) -> Vec<u8> {
    let mut out = vec![0x80 | csrcs.len() as u8, 96, 0, 1, 0, 0, 0, 2, 0, 0, 0, 3];
    csrcs
        .iter()
        .for_each(|c| out.extend_from_slice(&c.to_be_bytes()));
    out.extend_from_slice(payload);
    out
}

/// Our header for `fields` and `elements` over a source with `csrcs`, followed by `payload`.
fn write_packet(
    fields: &RtpFields,
    csrcs: &[u32],
    elements: &[(u8, Vec<u8>)],
    payload: &[u8],
) -> Vec<u8> {
    let source_bytes = source_packet(csrcs, payload);
    let source = RtpPacket::parse(&source_bytes).expect("a plain packet parses");
    let added: Vec<_> = elements
        .iter()
        .map(|(id, data)| ExtensionElement { id: *id, data })
        .collect();
    let selection = ExtensionSelection {
        keep: ExtensionIds::NONE,
        added: &added,
        two_byte_allowed: true,
    };
    let mut out = vec![0u8; 8192];
    let len = write_header(&source, fields, &selection, &mut out).expect("valid elements write");
    out.truncate(len);
    out.extend_from_slice(source.payload());
    out
}

fn element_pairs(p: &RtpPacket<'_>) -> Vec<(u8, Vec<u8>)> {
    p.extensions().map(|(id, b)| (id, b.to_vec())).collect()
}

fn arb_packet_parts() -> impl Strategy<Value = PacketParts> {
    (
        arb_fields(),
        prop::collection::vec(any::<u32>(), 0..=15),
        any::<bool>().prop_flat_map(arb_elements),
        prop::collection::vec(any::<u8>(), 0..64),
    )
}

proptest! {
    #[test]
    fn written_headers_read_back((fields, csrcs, elements, payload) in arb_packet_parts()) {
        let packet = write_packet(&fields, &csrcs, &elements, &payload);
        let p = RtpPacket::parse(&packet).unwrap();
        prop_assert_eq!(p.fields(), fields);
        prop_assert_eq!(p.csrcs().collect::<Vec<_>>(), csrcs);
        prop_assert_eq!(element_pairs(&p), elements.clone());
        prop_assert_eq!(p.payload(), &payload[..]);
        prop_assert_eq!(p.header_len() % 4, 0);
        let one_byte_fits = elements.iter().all(|(id, d)| *id <= 14 && (1..=16).contains(&d.len()));
        let expected_form = match (elements.is_empty(), one_byte_fits) {
            (true, _) => None,
            (false, true) => Some(ExtensionForm::OneByte),
            (false, false) => Some(ExtensionForm::TwoByte { appbits: 0 }),
        };
        prop_assert_eq!(p.extension_form(), expected_form);
    }

    /// What we write, the other implementation reads to the same header and payload.
    #[test]
    fn other_implementation_reads_what_we_write((fields, csrcs, elements, payload) in arb_packet_parts()) {
        let packet = write_packet(&fields, &csrcs, &elements, &payload);
        let theirs = rtp::packet::Packet::unmarshal(&mut &packet[..]).unwrap();
        let h = &theirs.header;
        prop_assert_eq!(h.version, 2);
        prop_assert_eq!(h.marker, fields.marker);
        prop_assert_eq!(h.payload_type, fields.payload_type);
        prop_assert_eq!(h.sequence_number, fields.sequence_number);
        prop_assert_eq!(h.timestamp, fields.timestamp);
        prop_assert_eq!(h.ssrc, fields.ssrc);
        prop_assert_eq!(&h.csrc, &csrcs);
        let their_elements: Vec<_> = h.extensions.iter().map(|e| (e.id, e.payload.to_vec())).collect();
        prop_assert_eq!(their_elements, elements);
        prop_assert_eq!(&theirs.payload[..], &payload[..]);
    }

    /// What the other implementation writes, we read to the same header and payload.
    #[test]
    fn we_read_what_the_other_implementation_writes(
        fields in arb_fields(),
        csrc in prop::collection::vec(any::<u32>(), 0..=15),
        (one_byte, elements) in any::<bool>().prop_flat_map(|one_byte| (Just(one_byte), arb_elements(one_byte))),
        padding: bool,
        payload in prop::collection::vec(any::<u8>(), 1..64),
    ) {
        let profile = if one_byte { ONE_BYTE_PROFILE } else { TWO_BYTE_PROFILE };
        let theirs = rtp::packet::Packet {
            header: rtp::header::Header {
                version: 2,
                padding,
                extension: !elements.is_empty(),
                marker: fields.marker,
                payload_type: fields.payload_type,
                sequence_number: fields.sequence_number,
                timestamp: fields.timestamp,
                ssrc: fields.ssrc,
                csrc: csrc.clone(),
                extension_profile: profile,
                extensions: elements
                    .iter()
                    .map(|(id, d)| rtp::header::Extension { id: *id, payload: Bytes::from(d.clone()) })
                    .collect(),
                extensions_padding: 0,
            },
            payload: Bytes::from(payload.clone()),
        };
        let wire = theirs.marshal().unwrap();
        let p = RtpPacket::parse(&wire).unwrap();
        prop_assert_eq!(p.fields(), fields);
        prop_assert_eq!(p.csrcs().collect::<Vec<_>>(), csrc);
        prop_assert_eq!(element_pairs(&p), elements.clone());
        prop_assert_eq!(p.payload(), &payload[..]);
        prop_assert_eq!(p.padding_len() > 0, padding);
        let expected_form = (!elements.is_empty()).then_some(if one_byte {
            ExtensionForm::OneByte
        } else {
            ExtensionForm::TwoByte { appbits: 0 }
        });
        prop_assert_eq!(p.extension_form(), expected_form);
        prop_assert_eq!(&wire.slice(p.payload_range())[..], &payload[..]);
    }

    /// Arbitrary bytes: parse never panics, and what parses stays inside the input.
    #[test]
    fn arbitrary_bytes_never_panic(data in prop::collection::vec(any::<u8>(), 0..300)) {
        if let Ok(p) = RtpPacket::parse(&data) {
            prop_assert!(p.payload_range().end <= data.len());
            prop_assert!(p.header_len() <= data.len());
            for (id, bytes) in p.extensions() {
                prop_assert!(p.extension(id).is_some());
                prop_assert!(bytes.len() <= 255);
            }
        }
    }

    /// Headers that look like RTP with an extension block reach the deeper paths more often than
    /// uniform bytes do.
    #[test]
    fn extension_shaped_bytes_never_panic(
        first in 0x80..=0xBFu8,
        profile in prop::sample::select(vec![[0xBE, 0xDE], [0x10, 0x00], [0x10, 0x07], [0x12, 0x34]]),
        words in 0..8u8,
        body in prop::collection::vec(any::<u8>(), 0..48),
    ) {
        let mut data = vec![first | 0x10, 96, 0, 1, 0, 0, 0, 2, 0, 0, 0, 3];
        data.extend((0..usize::from(first & 0x0F) * 4).map(|i| i as u8));
        data.extend_from_slice(&profile);
        data.extend_from_slice(&[0, words]);
        data.extend_from_slice(&body);
        let _ = RtpPacket::parse(&data);
        #[cfg(feature = "fuzzing")]
        rtp_ext::fuzz::rtp_packet(&data);
    }
}

#[cfg(feature = "fuzzing")]
proptest! {
    #[test]
    fn fuzz_body_holds_on_arbitrary_bytes(data in prop::collection::vec(any::<u8>(), 0..300)) {
        rtp_ext::fuzz::rtp_packet(&data);
    }

    #[test]
    fn fuzz_body_holds_on_written_packets((fields, csrcs, elements, payload) in arb_packet_parts()) {
        rtp_ext::fuzz::rtp_packet(&write_packet(&fields, &csrcs, &elements, &payload));
    }
}
