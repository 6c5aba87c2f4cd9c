//! The header writer of the forwarding path: a parsed packet's header rewritten for one
//! subscriber (new SSRC, payload type, sequence number, timestamp, marker and extension list)
//! into the caller's buffer. The payload is not copied: the engine sends it as a shared `Bytes`.

use super::error::WriteError;
use super::extensions::{MAX_EXTENSIONS, ONE_BYTE_PROFILE, TWO_BYTE_PROFILE};
use super::id_set::ExtensionIds;
use super::packet::{RtpFields, RtpPacket, FIXED_HEADER_LEN, VERSION};

/// One extension element to write: a local id and its bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ExtensionElement<'a> {
    pub id: u8,
    pub data: &'a [u8],
}

/// Which extensions a written header carries.
#[derive(Debug, Clone, Copy)]
pub struct ExtensionSelection<'a> {
    /// Ids of source elements to copy. A source element whose id is also in `added` is dropped
    /// in favour of the added one, so a value can be replaced in place.
    pub keep: ExtensionIds,
    /// New elements, written after the kept ones, in this order.
    pub added: &'a [ExtensionElement<'a>],
    /// Whether the receiver negotiated `a=extmap-allow-mixed`, without which only the
    /// one-byte form may be sent.
    pub two_byte_allowed: bool,
}

/// Writes the header for `source`'s payload with `fields`, the source's CSRCs and the selected
/// extensions into `out`; returns the header length. The one-byte form is used whenever every
/// element fits it (id 1-14, 1-16 bytes), the two-byte form otherwise. The padding bit is
/// never set: the source's padding is not part of [`RtpPacket::payload`]. A source block with
/// a profile other than RFC 8285's is not forwarded.
pub fn write_header(
    source: &RtpPacket<'_>,
    fields: &RtpFields,
    selection: &ExtensionSelection<'_>,
    out: &mut [u8],
) -> Result<usize, WriteError> {
    if fields.payload_type > 0x7F {
        return Err(WriteError::PayloadTypeOutOfRange);
    }
    let layout = BlockLayout::measure(selected(source, selection), selection.two_byte_allowed)?;
    let csrcs = source.csrc_bytes();
    let fixed_len = FIXED_HEADER_LEN + csrcs.len();
    let header_len = fixed_len + layout.map_or(0, |l| l.len());
    let out = out
        .get_mut(..header_len)
        .ok_or(WriteError::BufferTooSmall)?;
    let (fixed, block) = out.split_at_mut(fixed_len);
    write_fixed(fixed, fields, csrcs, layout.is_some());
    if let Some(layout) = layout {
        layout.write(selected(source, selection), block);
    }
    Ok(header_len)
}

/// The elements to write, kept source ones first. Called once to measure and once to write.
fn selected<'x>(
    source: &'x RtpPacket<'x>,
    selection: &'x ExtensionSelection<'x>,
) -> impl Iterator<Item = (u8, &'x [u8])> + 'x {
    let replaced = |id: u8| selection.added.iter().any(|a| a.id == id);
    source
        .extensions()
        .filter(move |&(id, _)| selection.keep.contains(id) && !replaced(id))
        .chain(selection.added.iter().map(|a| (a.id, a.data)))
}

/// The fixed header and CSRCs; `out` is exactly their length.
fn write_fixed(out: &mut [u8], fields: &RtpFields, csrcs: &[u8], has_extension: bool) {
    // At most 15 CSRCs: they come from a parsed header.
    let csrc_count = (csrcs.len() / 4) as u8;
    out[0] = (VERSION << 6) | (u8::from(has_extension) << 4) | csrc_count;
    out[1] = (u8::from(fields.marker) << 7) | fields.payload_type;
    out[2..4].copy_from_slice(&fields.sequence_number.to_be_bytes());
    out[4..8].copy_from_slice(&fields.timestamp.to_be_bytes());
    out[8..12].copy_from_slice(&fields.ssrc.to_be_bytes());
    out[FIXED_HEADER_LEN..].copy_from_slice(csrcs);
}

/// The extension block's form and unpadded body length.
#[derive(Debug, Clone, Copy)]
struct BlockLayout {
    two_byte: bool,
    body_len: usize,
}

impl BlockLayout {
    /// Checks the elements and picks the form; `None` when there are none to write.
    fn measure<'x>(
        elements: impl Iterator<Item = (u8, &'x [u8])>,
        two_byte_allowed: bool,
    ) -> Result<Option<Self>, WriteError> {
        let (mut count, mut data_len, mut one_byte_fits) = (0, 0, true);
        for (id, data) in elements {
            if id == 0 {
                return Err(WriteError::InvalidExtensionId);
            }
            if data.len() > usize::from(u8::MAX) {
                return Err(WriteError::ExtensionTooLong);
            }
            count += 1;
            data_len += data.len();
            one_byte_fits &= (1..=14).contains(&id) && (1..=16).contains(&data.len());
        }
        if count == 0 {
            return Ok(None);
        }
        if count > MAX_EXTENSIONS {
            return Err(WriteError::TooManyExtensions);
        }
        if !one_byte_fits && !two_byte_allowed {
            return Err(WriteError::TwoByteNotNegotiated);
        }
        let element_header_len = if one_byte_fits { 1 } else { 2 };
        Ok(Some(Self {
            two_byte: !one_byte_fits,
            body_len: data_len + count * element_header_len,
        }))
    }

    /// The block's length: 4-byte block header, body padded to 32 bits.
    fn len(&self) -> usize {
        4 + self.body_len.next_multiple_of(4)
    }

    /// Writes the block; `out` is exactly [`Self::len`] long and `elements` are those measured.
    fn write<'x>(&self, elements: impl Iterator<Item = (u8, &'x [u8])>, out: &mut [u8]) {
        let profile = if self.two_byte {
            TWO_BYTE_PROFILE
        } else {
            ONE_BYTE_PROFILE
        };
        // At most 16 elements of 257 bytes: far below 65535 words.
        let words = (self.len() / 4 - 1) as u16;
        out[0..2].copy_from_slice(&profile.to_be_bytes());
        out[2..4].copy_from_slice(&words.to_be_bytes());
        let mut pos = 4;
        for (id, data) in elements {
            // Lengths were checked by `measure`: 1-16 in the one-byte form, 0-255 in the other.
            let len = data.len() as u8;
            if self.two_byte {
                out[pos..pos + 2].copy_from_slice(&[id, len]);
                pos += 2;
            } else {
                out[pos] = (id << 4) | (len - 1);
                pos += 1;
            }
            out[pos..pos + data.len()].copy_from_slice(data);
            pos += data.len();
        }
        out[pos..].fill(0);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rtp::ExtensionForm;

    /// CSRC 0x01020304, one-byte block with id 1 = [0xA1], id 2 = [0xB1, 0xB2], payload [0xEE].
    const SOURCE: [u8; 29] = [
        0x91, 0x60, 0, 1, 0, 0, 0, 2, 0, 0, 0, 3, // V=2 X CC=1, PT 96, seq 1, ts 2, ssrc 3
        1, 2, 3, 4, // CSRC
        0xBE, 0xDE, 0, 2, 0x10, 0xA1, 0x21, 0xB1, 0xB2, 0, 0, 0, // extensions
        0xEE,
    ];

    const FIELDS: RtpFields = RtpFields {
        marker: true,
        payload_type: 100,
        sequence_number: 0xBEEF,
        timestamp: 0x1122_3344,
        ssrc: 0x5566_7788,
    };

    fn write(selection: &ExtensionSelection<'_>) -> Result<Vec<u8>, WriteError> {
        let source = RtpPacket::parse(&SOURCE).unwrap();
        // Garbage first: every byte of the header must be written.
        let mut out = [0x5A; 600];
        let n = write_header(&source, &FIELDS, selection, &mut out)?;
        Ok(out[..n].to_vec())
    }

    fn selection<'a>(keep: &[u8], added: &'a [ExtensionElement<'a>]) -> ExtensionSelection<'a> {
        ExtensionSelection {
            keep: ExtensionIds::of(keep),
            added,
            two_byte_allowed: true,
        }
    }

    #[test]
    fn writes_one_byte_form_with_kept_and_added_elements() {
        let added = [ExtensionElement {
            id: 5,
            data: &[0xC1, 0xC2, 0xC3],
        }];
        let header = write(&selection(&[2], &added)).unwrap();
        let expected = [
            0x91,
            0x80 | 100,
            0xBE,
            0xEF,
            0x11,
            0x22,
            0x33,
            0x44,
            0x55,
            0x66,
            0x77,
            0x88, //
            1,
            2,
            3,
            4, //
            0xBE,
            0xDE,
            0,
            2,
            0x21,
            0xB1,
            0xB2,
            0x52,
            0xC1,
            0xC2,
            0xC3,
            0,
        ];
        assert_eq!(header, expected);
    }

    #[test]
    fn added_element_replaces_kept_one_with_same_id() {
        let added = [ExtensionElement { id: 1, data: &[9] }];
        let header = write(&selection(&[1, 2], &added)).unwrap();
        let p = RtpPacket::parse(&header).unwrap();
        let got: Vec<_> = p.extensions().collect();
        assert_eq!(got, vec![(2, &[0xB1, 0xB2][..]), (1, &[9][..])]);
    }

    #[test]
    fn no_elements_means_no_extension_bit() {
        let header = write(&selection(&[], &[])).unwrap();
        assert_eq!(header.len(), 16);
        assert_eq!(header[0], 0x81);
        let p = RtpPacket::parse(&header).unwrap();
        assert_eq!(p.extension_form(), None);
        assert_eq!(p.csrcs().collect::<Vec<_>>(), vec![0x0102_0304]);
        assert_eq!(p.fields(), FIELDS);
    }

    #[test]
    fn two_byte_form_when_an_element_needs_it() {
        let long = [7u8; 17];
        let needs_two_byte: [ExtensionElement<'_>; 3] = [
            ExtensionElement { id: 15, data: &[1] },
            ExtensionElement { id: 3, data: &[] },
            ExtensionElement { id: 3, data: &long },
        ];
        for element in needs_two_byte {
            let added = [element];
            let header = write(&selection(&[1], &added)).unwrap();
            let p = RtpPacket::parse(&header).unwrap();
            assert_eq!(
                p.extension_form(),
                Some(ExtensionForm::TwoByte { appbits: 0 })
            );
            assert_eq!(p.extension(1), Some(&[0xA1][..]));
            assert_eq!(p.extension(element.id), Some(element.data));
            assert_eq!(header.len() % 4, 0);
            let refused = ExtensionSelection {
                two_byte_allowed: false,
                ..selection(&[1], &added)
            };
            assert_eq!(write(&refused), Err(WriteError::TwoByteNotNegotiated));
        }
    }

    #[test]
    fn caller_errors_are_reported() {
        let long = [0u8; 256];
        let zero_id = [ExtensionElement { id: 0, data: &[1] }];
        let too_long = [ExtensionElement { id: 1, data: &long }];
        let many: Vec<_> = (1..=17)
            .map(|id| ExtensionElement { id, data: &[1] })
            .collect();
        assert_eq!(
            write(&selection(&[], &zero_id)),
            Err(WriteError::InvalidExtensionId)
        );
        assert_eq!(
            write(&selection(&[], &too_long)),
            Err(WriteError::ExtensionTooLong)
        );
        assert_eq!(
            write(&selection(&[], &many)),
            Err(WriteError::TooManyExtensions)
        );
        assert_eq!(write(&selection(&[], &many[..16])).map(|_| ()), Ok(()));

        let source = RtpPacket::parse(&SOURCE).unwrap();
        let bad_pt = RtpFields {
            payload_type: 128,
            ..FIELDS
        };
        let all = selection(&[1, 2], &[]);
        let mut out = [0; 64];
        assert_eq!(
            write_header(&source, &bad_pt, &all, &mut out),
            Err(WriteError::PayloadTypeOutOfRange)
        );
        assert_eq!(
            write_header(&source, &FIELDS, &all, &mut out[..27]),
            Err(WriteError::BufferTooSmall)
        );
        assert_eq!(write_header(&source, &FIELDS, &all, &mut out[..28]), Ok(28));
        for e in [WriteError::BufferTooSmall, WriteError::TwoByteNotNegotiated] {
            assert!(!e.to_string().is_empty());
        }
    }

    #[test]
    fn opaque_source_block_is_not_forwarded() {
        let bytes = [
            0x90, 0x60, 0, 1, 0, 0, 0, 2, 0, 0, 0, 3, 0xAB, 0xCD, 0, 1, 1, 2, 3, 4,
        ];
        let source = RtpPacket::parse(&bytes).unwrap();
        let mut out = [0; 32];
        let n = write_header(&source, &FIELDS, &selection(&[0, 1], &[]), &mut out).unwrap();
        assert_eq!(n, 12);
        assert_eq!(out[0], 0x80);
    }
}
