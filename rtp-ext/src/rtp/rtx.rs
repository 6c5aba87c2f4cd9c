//! RFC 4588 retransmission payloads: the original sequence number (OSN) in the first two bytes,
//! then the original payload.

use std::ops::Range;

use super::error::RtxError;
use super::packet::RtpPacket;

/// Length of the OSN in front of the original payload.
const OSN_LEN: usize = 2;

/// What an RTX packet carries for its original stream.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RtxPayload {
    pub original_sequence_number: u16,
    /// The original payload, as offsets into the RTX packet's bytes.
    pub payload: Range<usize>,
}

/// Reads the OSN and locates the original payload of an RTX packet (RFC 4588 section 4).
pub fn unwrap_rtx(packet: &RtpPacket<'_>) -> Result<RtxPayload, RtxError> {
    let Some(&[hi, lo]) = packet.payload().first_chunk::<OSN_LEN>() else {
        return Err(RtxError::NoOriginalSequenceNumber);
    };
    let range = packet.payload_range();
    Ok(RtxPayload {
        original_sequence_number: u16::from_be_bytes([hi, lo]),
        payload: range.start + OSN_LEN..range.end,
    })
}

/// Writes the RTX payload, OSN then `payload`, into `out`; returns its length. The header comes
/// from [`write_header`](super::write_header) with the RTX stream's SSRC and payload type.
pub fn wrap_rtx(
    original_sequence_number: u16,
    payload: &[u8],
    out: &mut [u8],
) -> Result<usize, RtxError> {
    let len = OSN_LEN + payload.len();
    let out = out.get_mut(..len).ok_or(RtxError::BufferTooSmall)?;
    let (osn, rest) = out.split_at_mut(OSN_LEN);
    osn.copy_from_slice(&original_sequence_number.to_be_bytes());
    rest.copy_from_slice(payload);
    Ok(len)
}

#[cfg(test)]
mod tests {
    use super::*;

    const HEADER: [u8; 12] = [0x80, 97, 0, 9, 0, 0, 0, 1, 0, 0, 0, 2];

    #[test]
    fn wrap_then_unwrap_gives_the_original() {
        let mut packet = HEADER.to_vec();
        packet.resize(12 + 2 + 3, 0);
        let n = wrap_rtx(0xABCD, &[1, 2, 3], &mut packet[12..]).unwrap();
        assert_eq!(n, 5);
        assert_eq!(&packet[12..], &[0xAB, 0xCD, 1, 2, 3]);
        let rtx = unwrap_rtx(&RtpPacket::parse(&packet).unwrap()).unwrap();
        assert_eq!(rtx.original_sequence_number, 0xABCD);
        assert_eq!(&packet[rtx.payload], &[1, 2, 3]);
    }

    #[test]
    fn unwrap_ignores_padding() {
        // OSN 0x0102, payload [7], two padding bytes.
        let mut packet = HEADER.to_vec();
        packet[0] |= 0x20;
        packet.extend_from_slice(&[1, 2, 7, 0, 2]);
        let rtx = unwrap_rtx(&RtpPacket::parse(&packet).unwrap()).unwrap();
        assert_eq!(rtx.original_sequence_number, 0x0102);
        assert_eq!(rtx.payload, 14..15);
    }

    #[test]
    fn short_payload_and_small_buffer_are_refused() {
        let mut packet = HEADER.to_vec();
        packet.push(1);
        let parsed = RtpPacket::parse(&packet).unwrap();
        assert_eq!(unwrap_rtx(&parsed), Err(RtxError::NoOriginalSequenceNumber));
        let mut out = [0; 4];
        assert_eq!(
            wrap_rtx(1, &[1, 2, 3], &mut out),
            Err(RtxError::BufferTooSmall)
        );
        assert!(!RtxError::BufferTooSmall.to_string().is_empty());
    }
}
