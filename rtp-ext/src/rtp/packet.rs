//! The RTP packet view (RFC 3550 section 5.1): fixed header, CSRCs, extension block, payload and
//! padding, found in one pass over borrowed bytes.

use std::ops::Range;

use super::error::ParseError;
use super::extensions::{ExtensionBlock, ExtensionForm};

/// Length of the fixed header, before CSRCs.
pub const FIXED_HEADER_LEN: usize = 12;

/// The only RTP version (RFC 3550 section 5.1).
pub(super) const VERSION: u8 = 2;

/// The fixed-header fields a forwarder rewrites per subscriber.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct RtpFields {
    pub marker: bool,
    /// 7 bits.
    pub payload_type: u8,
    pub sequence_number: u16,
    pub timestamp: u32,
    pub ssrc: u32,
}

/// A parsed RTP packet borrowing its bytes. Parsing checks every length once, so the accessors
/// cannot fail. Ranges are offsets into the parsed slice: a caller holding the packet as
/// `bytes::Bytes` takes the payload with `bytes.slice(packet.payload_range())`, without a copy.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RtpPacket<'a> {
    data: &'a [u8],
    fields: RtpFields,
    csrc_count: u8,
    extension: Option<ExtensionBlock>,
    payload_start: usize,
    payload_end: usize,
}

/// Where everything of a parsed packet sits, without the bytes: keep it beside the packet's
/// `Bytes` and [`attach`](PacketLayout::attach) it again later, instead of parsing once more.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PacketLayout {
    len: usize,
    fields: RtpFields,
    csrc_count: u8,
    extension: Option<ExtensionBlock>,
    payload_start: usize,
    payload_end: usize,
}

impl PacketLayout {
    /// The view of `data`, which must be the bytes this layout was parsed from (checked by
    /// length: every offset was validated against that length, so any slice of it stays in
    /// bounds).
    pub fn attach<'a>(&self, data: &'a [u8]) -> Option<RtpPacket<'a>> {
        (data.len() == self.len).then_some(RtpPacket {
            data,
            fields: self.fields,
            csrc_count: self.csrc_count,
            extension: self.extension,
            payload_start: self.payload_start,
            payload_end: self.payload_end,
        })
    }
}

impl<'a> RtpPacket<'a> {
    /// The packet's layout without its bytes, to [`attach`](PacketLayout::attach) again.
    pub fn layout(&self) -> PacketLayout {
        PacketLayout {
            len: self.data.len(),
            fields: self.fields,
            csrc_count: self.csrc_count,
            extension: self.extension,
            payload_start: self.payload_start,
            payload_end: self.payload_end,
        }
    }

    pub fn parse(data: &'a [u8]) -> Result<Self, ParseError> {
        let Some(fixed) = data.first_chunk::<FIXED_HEADER_LEN>() else {
            return Err(ParseError::TooShort);
        };
        if fixed[0] >> 6 != VERSION {
            return Err(ParseError::BadVersion);
        }
        let has_padding = fixed[0] & 0x20 != 0;
        let has_extension = fixed[0] & 0x10 != 0;
        let csrc_count = fixed[0] & 0x0F;
        let fields = RtpFields {
            marker: fixed[1] & 0x80 != 0,
            payload_type: fixed[1] & 0x7F,
            sequence_number: u16::from_be_bytes([fixed[2], fixed[3]]),
            timestamp: u32::from_be_bytes([fixed[4], fixed[5], fixed[6], fixed[7]]),
            ssrc: u32::from_be_bytes([fixed[8], fixed[9], fixed[10], fixed[11]]),
        };
        let csrc_end = FIXED_HEADER_LEN + 4 * usize::from(csrc_count);
        if csrc_end > data.len() {
            return Err(ParseError::CsrcPastEnd);
        }
        let (extension, payload_start) = if has_extension {
            let (block, end) = ExtensionBlock::parse(data, csrc_end)?;
            (Some(block), end)
        } else {
            (None, csrc_end)
        };
        let padding = if has_padding {
            padding_len(data, payload_start)?
        } else {
            0
        };
        Ok(Self {
            data,
            fields,
            csrc_count,
            extension,
            payload_start,
            payload_end: data.len() - padding,
        })
    }

    pub fn fields(&self) -> RtpFields {
        self.fields
    }

    /// The contributing sources, in packet order.
    pub fn csrcs(&self) -> impl ExactSizeIterator<Item = u32> + 'a {
        self.csrc_bytes()
            .chunks_exact(4)
            .map(|c| u32::from_be_bytes([c[0], c[1], c[2], c[3]]))
    }

    /// The CSRC list as it sits on the wire, 4 bytes per source.
    pub fn csrc_bytes(&self) -> &'a [u8] {
        let end = FIXED_HEADER_LEN + 4 * usize::from(self.csrc_count);
        &self.data[FIXED_HEADER_LEN..end]
    }

    /// The extension block's form, or `None` without the extension bit.
    pub fn extension_form(&self) -> Option<ExtensionForm> {
        self.extension.map(|b| b.form)
    }

    /// The extension block's body (after its 4-byte header), padding included. For an opaque
    /// profile this is the only way to reach its content.
    pub fn extension_body(&self) -> Option<&'a [u8]> {
        self.extension.map(|b| &self.data[b.body_range()])
    }

    /// RFC 8285 elements as `(id, bytes)`, in packet order.
    pub fn extensions(&self) -> impl Iterator<Item = (u8, &'a [u8])> + '_ {
        self.extension
            .iter()
            .flat_map(|b| b.elements.iter())
            .map(|e| (e.id, &self.data[e.range()]))
    }

    /// Number of RFC 8285 elements.
    pub fn extension_count(&self) -> usize {
        self.extension.map_or(0, |b| b.elements.len())
    }

    /// The first element with `id`.
    pub fn extension(&self, id: u8) -> Option<&'a [u8]> {
        self.extension_range(id).map(|r| &self.data[r])
    }

    /// Where the first element with `id` sits in the packet.
    pub fn extension_range(&self, id: u8) -> Option<Range<usize>> {
        let block = self.extension.as_ref()?;
        block
            .elements
            .iter()
            .find(|e| e.id == id)
            .map(|e| e.range())
    }

    /// Length of everything before the payload.
    pub fn header_len(&self) -> usize {
        self.payload_start
    }

    pub fn payload(&self) -> &'a [u8] {
        &self.data[self.payload_range()]
    }

    /// The payload without padding, as offsets into the parsed bytes.
    pub fn payload_range(&self) -> Range<usize> {
        self.payload_start..self.payload_end
    }

    /// Padding bytes at the end, count byte included; 0 without the padding bit.
    pub fn padding_len(&self) -> usize {
        self.data.len() - self.payload_end
    }

    /// The whole packet as parsed.
    pub fn as_bytes(&self) -> &'a [u8] {
        self.data
    }
}

/// The padding count in the last byte (RFC 3550 section 5.1): it counts itself, so 0 is
/// malformed, and it cannot reach back into the header.
fn padding_len(data: &[u8], payload_start: usize) -> Result<usize, ParseError> {
    let count = match data.last() {
        Some(&count) if data.len() > payload_start && count > 0 => usize::from(count),
        _ => return Err(ParseError::PaddingMissing),
    };
    if count > data.len() - payload_start {
        return Err(ParseError::PaddingTooLarge);
    }
    Ok(count)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// V=2, no padding, no extension, PT 96, seq 0x1234, ts 0x01020304, SSRC 0xAABBCCDD.
    const PLAIN: [u8; 12] = [0x80, 0x60, 0x12, 0x34, 1, 2, 3, 4, 0xAA, 0xBB, 0xCC, 0xDD];

    fn with(first: u8, rest: &[u8]) -> Vec<u8> {
        let mut p = PLAIN.to_vec();
        p[0] = first;
        p.extend_from_slice(rest);
        p
    }

    #[test]
    fn reads_fixed_header() {
        let mut bytes = PLAIN.to_vec();
        bytes[1] = 0x80 | 111;
        bytes.extend_from_slice(&[9, 8, 7]);
        let p = RtpPacket::parse(&bytes).unwrap();
        assert_eq!(
            p.fields(),
            RtpFields {
                marker: true,
                payload_type: 111,
                sequence_number: 0x1234,
                timestamp: 0x0102_0304,
                ssrc: 0xAABB_CCDD,
            }
        );
        assert_eq!(p.payload(), &[9, 8, 7]);
        assert_eq!(p.header_len(), 12);
        assert_eq!(p.extension_form(), None);
        assert_eq!(p.extension(1), None);
        assert_eq!(p.padding_len(), 0);
    }

    #[test]
    fn reads_csrcs_extension_and_padding() {
        // Two CSRCs, a one-byte block with id 3 (2 bytes), payload [5, 6], 3 padding bytes.
        let rest = [
            0, 0, 0, 1, 0xFF, 0, 0, 2, // CSRCs
            0xBE, 0xDE, 0, 1, 0x31, 0xAB, 0xCD, 0, // extension block
            5, 6, 0, 0, 3, // payload, padding
        ];
        let bytes = with(0x80 | 0x20 | 0x10 | 2, &rest);
        let p = RtpPacket::parse(&bytes).unwrap();
        assert_eq!(p.csrcs().collect::<Vec<_>>(), vec![1, 0xFF00_0002]);
        assert_eq!(p.extension_form(), Some(ExtensionForm::OneByte));
        assert_eq!(p.extension(3), Some(&[0xAB, 0xCD][..]));
        assert_eq!(p.extension_range(3), Some(25..27));
        assert_eq!(p.extension_count(), 1);
        assert_eq!(p.header_len(), 28);
        assert_eq!(p.payload(), &[5, 6]);
        assert_eq!(p.padding_len(), 3);
    }

    #[test]
    fn payload_slices_out_of_bytes_without_copy() {
        let bytes = bytes::Bytes::from(with(0x80, &[1, 2, 3]));
        let p = RtpPacket::parse(&bytes).unwrap();
        let payload = bytes.slice(p.payload_range());
        assert_eq!(&payload[..], &[1, 2, 3]);
        assert_eq!(payload.as_ptr(), bytes[12..].as_ptr());
    }

    #[test]
    fn padding_may_fill_the_whole_payload() {
        let bytes = with(0xA0, &[0, 0, 0, 4]);
        let p = RtpPacket::parse(&bytes).unwrap();
        assert!(p.payload().is_empty());
        assert_eq!(p.padding_len(), 4);
    }

    #[test]
    fn every_malformation_has_its_error() {
        let cases: [(Vec<u8>, ParseError); 8] = [
            (PLAIN[..11].to_vec(), ParseError::TooShort),
            (with(0x40, &[]), ParseError::BadVersion),
            (with(0x81, &[0, 0, 0]), ParseError::CsrcPastEnd),
            (
                with(0x90, &[0xBE, 0xDE, 0, 1]),
                ParseError::ExtensionPastEnd,
            ),
            (
                with(0x90, &[0xBE, 0xDE, 0, 1, 0x14, 0, 0, 0]),
                ParseError::BadExtensionLength,
            ),
            (
                with(
                    0x90,
                    &[0x10, 0x00, 0, 17]
                        .iter()
                        .copied()
                        .chain([0x10, 0].repeat(34))
                        .collect::<Vec<_>>(),
                ),
                ParseError::TooManyExtensions,
            ),
            (with(0xA0, &[1, 2, 0]), ParseError::PaddingMissing),
            (with(0xA0, &[1, 2, 4]), ParseError::PaddingTooLarge),
        ];
        for (bytes, expected) in cases {
            assert_eq!(RtpPacket::parse(&bytes), Err(expected), "{bytes:02x?}");
            assert!(!expected.to_string().is_empty());
        }
        assert_eq!(
            RtpPacket::parse(&with(0xA0, &[])),
            Err(ParseError::PaddingMissing)
        );
    }

    /// The view stays small enough to keep on the stack per packet.
    #[test]
    fn view_size_is_bounded() {
        assert!(size_of::<RtpPacket<'_>>() <= 256);
    }
}

#[cfg(test)]
mod layout_tests {
    use super::*;

    #[test]
    fn a_layout_reattaches_to_its_bytes_only() {
        let packet = [
            0x90, 0x60, 0, 1, 0, 0, 0, 2, 0, 0, 0, 3, 0xBE, 0xDE, 0, 1, 0x12, 0xAA, 0xBB, 0xCC, 9,
        ];
        let parsed = RtpPacket::parse(&packet).unwrap();
        let layout = parsed.layout();
        assert_eq!(layout.attach(&packet), Some(parsed));
        assert_eq!(layout.attach(&packet[..20]), None);
    }
}
