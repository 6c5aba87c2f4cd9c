//! Fuzz target bodies: `fuzz/` wraps each in three lines, and the tests run them over the real
//! captures.

use rtp_ext::codec::{parse_payload, Codec};
use rtp_ext::rtp::RtpPacket;

use crate::capture::{classify, udp_datagram, Capture, PayloadKind};

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
