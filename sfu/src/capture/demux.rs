//! What a UDP payload carries, from its first bytes (RFC 7983 section 7, with RFC 5761
//! section 4 to tell RTCP from RTP on a shared port).

/// The protocols a WebRTC port multiplexes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum PayloadKind {
    Stun,
    Zrtp,
    Dtls,
    TurnChannel,
    Rtp,
    Rtcp,
    /// An empty payload or a first byte no range claims.
    Unknown,
}

/// RTCP packet types 192-223 take the place of RTP's marker bit and payload type; RTP payload
/// types in that range are forbidden so the two can share a port.
const RTCP_PACKET_TYPES: std::ops::RangeInclusive<u8> = 192..=223;

pub fn classify(payload: &[u8]) -> PayloadKind {
    match payload {
        [0..=3, ..] => PayloadKind::Stun,
        [16..=19, ..] => PayloadKind::Zrtp,
        [20..=63, ..] => PayloadKind::Dtls,
        [64..=79, ..] => PayloadKind::TurnChannel,
        [128..=191, second, ..] if RTCP_PACKET_TYPES.contains(second) => PayloadKind::Rtcp,
        [128..=191, ..] => PayloadKind::Rtp,
        _ => PayloadKind::Unknown,
    }
}

impl PayloadKind {
    /// A lowercase name for reports.
    pub fn name(self) -> &'static str {
        match self {
            Self::Stun => "stun",
            Self::Zrtp => "zrtp",
            Self::Dtls => "dtls",
            Self::TurnChannel => "turn channel",
            Self::Rtp => "rtp",
            Self::Rtcp => "rtcp",
            Self::Unknown => "unknown udp payload",
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn first_byte_ranges_of_rfc_7983() {
        let cases: [(&[u8], PayloadKind); 11] = [
            (&[0x00, 0x01], PayloadKind::Stun),
            (&[3], PayloadKind::Stun),
            (&[16], PayloadKind::Zrtp),
            (&[22, 0xFE, 0xFD], PayloadKind::Dtls),
            (&[63], PayloadKind::Dtls),
            (&[0x40, 0x00], PayloadKind::TurnChannel),
            (&[0x80, 96], PayloadKind::Rtp),
            (&[0x90, 0x80 | 111], PayloadKind::Rtp),
            (&[0x81, 200], PayloadKind::Rtcp),
            (&[0x80, 223], PayloadKind::Rtcp),
            (&[4], PayloadKind::Unknown),
        ];
        for (payload, kind) in cases {
            assert_eq!(classify(payload), kind, "{payload:02x?}");
        }
        assert_eq!(classify(&[]), PayloadKind::Unknown);
        assert_eq!(classify(&[0xC0, 96]), PayloadKind::Unknown, "version 3");
        assert_eq!(
            classify(&[0x80]),
            PayloadKind::Rtp,
            "too short is for RTP to say"
        );
    }
}
