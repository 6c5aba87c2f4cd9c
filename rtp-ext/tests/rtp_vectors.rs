//! Conformance: every browser RTP packet in `../shared/vectors/dd-vectors.json` (AV1 with a
//! Dependency Descriptor, VP9 from Chrome and Firefox) parses to the header fields and
//! extension elements listed beside it, in both the one-byte and two-byte forms, and its
//! header rewritten with every element kept is byte-identical to the original.

use common::{bytes, num};
use rtp_ext::ext::{AbsSendTime, HeaderExtension, TransportSequenceNumber, VideoLayersAllocation};
use rtp_ext::rtp::{write_header, ExtensionForm, ExtensionIds, ExtensionSelection, RtpPacket};
use serde_json::Value;

mod common;

fn packets() -> Vec<Value> {
    ["av1_rtp_packets_with_dd", "vp9_rtp_packets"]
        .iter()
        .flat_map(|list| common::packets(list))
        .collect()
}

fn hex_num(v: &Value) -> u64 {
    let text = v.as_str().expect("hex number").trim_start_matches("0x");
    u64::from_str_radix(text, 16).expect("hex digits")
}

#[test]
fn all_24_packets_are_present() {
    assert_eq!(packets().len(), 5 + 19);
}

#[test]
fn header_fields_and_elements_match() {
    for v in packets() {
        let data = bytes(&v["hex"]);
        let p = RtpPacket::parse(&data).unwrap_or_else(|e| panic!("{}: {e}", v["hex"]));
        let f = p.fields();
        assert_eq!(u64::from(f.ssrc), hex_num(&v["ssrc"]));
        assert_eq!(u64::from(f.sequence_number), num(&v["seq"]));
        assert_eq!(u64::from(f.timestamp), num(&v["ts"]));
        assert_eq!(f.marker, num(&v["marker"]) == 1);
        assert_eq!(u64::from(f.payload_type), num(&v["pt"]));
        let form = match hex_num(&v["ext_profile"]) {
            0xBEDE => ExtensionForm::OneByte,
            0x1000 => ExtensionForm::TwoByte { appbits: 0 },
            other => panic!("profile {other:x}"),
        };
        assert_eq!(p.extension_form(), Some(form));
        let expected: Vec<(u8, Vec<u8>)> = v["ext"]
            .as_array()
            .expect("ext list")
            .iter()
            .map(|e| (num(&e[0]) as u8, bytes(&e[1])))
            .collect();
        let got: Vec<(u8, Vec<u8>)> = p.extensions().map(|(id, b)| (id, b.to_vec())).collect();
        assert_eq!(got, expected, "{}", v["hex"]);
        for (id, b) in &expected {
            assert_eq!(p.extension(*id), Some(&b[..]));
        }
        assert!(p.payload().starts_with(&bytes(&v["payload_prefix"])));
        assert_eq!(p.header_len() + p.payload().len(), data.len());
    }
}

/// Ids 3, 5 and 12 are abs-send-time, transport-wide cc and VLA in these captures.
#[test]
fn typed_extensions_read_from_real_packets() {
    let mut vla_count = 0;
    for v in packets() {
        let data = bytes(&v["hex"]);
        let p = RtpPacket::parse(&data).unwrap();
        let ast = AbsSendTime::parse(p.extension(3).expect("id 3")).unwrap();
        assert_eq!(ast.0 >> 24, 0);
        if let Some(tcc) = p.extension(5) {
            assert_eq!(
                TransportSequenceNumber::parse(tcc).map(|t| t.0.to_be_bytes().to_vec()),
                Ok(tcc.to_vec())
            );
        }
        if let Some(vla) = p.extension(12) {
            let allocation = VideoLayersAllocation::parse(vla).unwrap();
            assert!(allocation.active_layers().all(|l| l.resolution.is_some()));
            let mut out = [0u8; 64];
            let len = allocation.write(&mut out).unwrap();
            assert_eq!(&out[..len], vla);
            vla_count += 1;
        }
    }
    assert_eq!(vla_count, 2);
}

/// Browsers pad the block only at its end and pick the same form the writer picks, so keeping
/// every element reproduces the captured header exactly.
#[test]
fn rewriting_with_every_element_reproduces_the_header() {
    for v in packets() {
        let data = bytes(&v["hex"]);
        let p = RtpPacket::parse(&data).unwrap();
        let selection = ExtensionSelection {
            keep: ExtensionIds::ALL,
            added: &[],
            two_byte_allowed: true,
        };
        let mut out = [0u8; 256];
        let len = write_header(&p, &p.fields(), &selection, &mut out).unwrap();
        assert_eq!(&out[..len], &data[..p.header_len()], "{}", v["hex"]);
    }
}
