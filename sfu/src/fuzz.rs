//! Fuzz target bodies: `fuzz/` wraps each in three lines, and the tests run them over the real
//! captures.

use rtp_ext::codec::{parse_payload, Codec};
use rtp_ext::rtp::RtpPacket;

use crate::capture::{classify, udp_datagram, Capture, PayloadKind};
use crate::engine::rtcp::{parse_compound, RtcpCrateWriter, RtcpFeedback, RtcpWriter};

/// `capture`: the bytes as a capture file; every record down to its UDP payload, and every
/// RTP payload through each video codec's descriptor parser.
pub fn capture(data: &[u8]) {
    let Ok(capture) = Capture::open(data) else {
        return;
    };
    for record in capture.flatten() {
        assert!(
            record.data.len() <= data.len(),
            "a record lies inside the file"
        );
        let Ok(datagram) = udp_datagram(record.link_type, record.data) else {
            continue;
        };
        if classify(datagram.payload) != PayloadKind::Rtp {
            continue;
        }
        if let Ok(packet) = RtpPacket::parse(datagram.payload) {
            for codec in [Codec::Av1, Codec::Vp9, Codec::Vp8, Codec::H264] {
                if let Ok(descriptor) = parse_payload(codec, packet.payload()) {
                    let _ = descriptor.summary();
                }
            }
        }
    }
}

/// `rtcp`: the bytes as an RTCP datagram; every item parsed from it, written back and parsed
/// again, gives itself.
pub fn rtcp(data: &[u8]) {
    let mut writer = RtcpCrateWriter::new(b"fuzz").expect("a 4-octet cname fits");
    // An item's bytes never outgrow the datagram by more than the padding writing adds.
    let mut out = vec![0; data.len() + 64];
    let _ = parse_compound(data, |item| {
        if matches!(item, RtcpFeedback::Other(_)) {
            return;
        }
        let len = writer
            .write(&item, &mut out)
            .expect("a parsed item can be written");
        let mut again = Vec::new();
        let summary = parse_compound(&out[..len], |item| again.push(item));
        assert_eq!(summary.map(|s| s.items), Ok(1), "{item:?}");
        assert_eq!(again, [item]);
    });
}
