//! The RFC 8285 header extension block: its one-byte and two-byte forms, read into a fixed-size
//! table of element offsets so the view never allocates.

use std::ops::Range;

use super::error::ParseError;
use crate::dd::InlineVec;

/// Most extension elements one packet may carry. Browsers send about ten; a packet with more is
/// refused with [`ParseError::TooManyExtensions`] rather than read in part, and the writer
/// refuses to write more, so everything it writes reads back.
pub const MAX_EXTENSIONS: usize = 16;

/// The "defined by profile" value of the one-byte form (RFC 8285 section 4.2).
pub const ONE_BYTE_PROFILE: u16 = 0xBEDE;

/// The two-byte form's profile with zero appbits: `0x100` in the upper 12 bits, the
/// application's 4 bits in the low nibble (RFC 8285 section 4.3).
pub const TWO_BYTE_PROFILE: u16 = 0x1000;

/// The one-byte form's id 15 ends the block: the rest is not read (RFC 8285 section 4.2).
const ONE_BYTE_STOP_ID: u8 = 15;

/// How the extension block is laid out, from its profile.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ExtensionForm {
    OneByte,
    TwoByte {
        appbits: u8,
    },
    /// A profile other than RFC 8285's: the block is kept whole, as one opaque body.
    Opaque {
        profile: u16,
    },
}

impl ExtensionForm {
    fn from_profile(profile: u16) -> Self {
        match profile {
            ONE_BYTE_PROFILE => Self::OneByte,
            p if p & 0xFFF0 == TWO_BYTE_PROFILE => Self::TwoByte {
                appbits: (p & 0x0F) as u8,
            },
            profile => Self::Opaque { profile },
        }
    }
}

/// Where one element's bytes sit in the packet. `u32` is enough: the block ends within the
/// first 12 + 60 + 4 + 4 * 65535 bytes of any packet.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(super) struct Element {
    pub id: u8,
    pub len: u8,
    pub start: u32,
}

impl Element {
    pub fn range(&self) -> Range<usize> {
        let start = self.start as usize;
        start..start + usize::from(self.len)
    }
}

/// A parsed extension block: its form, the byte range of its body (after the 4-byte block
/// header) and, for the RFC 8285 forms, its elements in packet order.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct ExtensionBlock {
    pub form: ExtensionForm,
    pub body_start: u32,
    pub body_len: u32,
    pub elements: InlineVec<Element, MAX_EXTENSIONS>,
}

impl ExtensionBlock {
    /// Parses the block whose 4-byte header starts at `offset`; returns it with the offset just
    /// past the block.
    pub fn parse(packet: &[u8], offset: usize) -> Result<(Self, usize), ParseError> {
        let Some(&[p0, p1, l0, l1]) = packet.get(offset..offset + 4) else {
            return Err(ParseError::ExtensionPastEnd);
        };
        let body_start = offset + 4;
        let body_len = usize::from(u16::from_be_bytes([l0, l1])) * 4;
        let body = packet
            .get(body_start..body_start + body_len)
            .ok_or(ParseError::ExtensionPastEnd)?;
        let form = ExtensionForm::from_profile(u16::from_be_bytes([p0, p1]));
        let elements = match form {
            ExtensionForm::OneByte => parse_elements(body, body_start, one_byte_step)?,
            ExtensionForm::TwoByte { .. } => parse_elements(body, body_start, two_byte_step)?,
            ExtensionForm::Opaque { .. } => InlineVec::new(),
        };
        let block = Self {
            form,
            // Both fit: `body_start` is at most 76 and `body_len` at most 4 * 65535.
            body_start: body_start as u32,
            body_len: body_len as u32,
            elements,
        };
        Ok((block, body_start + body_len))
    }

    pub fn body_range(&self) -> Range<usize> {
        let start = self.body_start as usize;
        start..start + self.body_len as usize
    }
}

/// What the byte at an element boundary says.
enum Step {
    /// A padding byte: skip it.
    Padding,
    /// The one-byte form's reserved id 15: ignore the rest of the block.
    Stop,
    /// An element with `id` whose `len` data bytes follow a `header_len`-byte element header.
    Element {
        id: u8,
        len: usize,
        header_len: usize,
    },
}

/// Reads the element header at the start of `rest` (never empty) in the one-byte form.
fn one_byte_step(rest: &[u8]) -> Result<Step, ParseError> {
    let first = rest.first().copied().unwrap_or_default();
    let id = first >> 4;
    Ok(match id {
        // A zero id is padding whatever its length nibble says: the nibble has no meaning there.
        0 => Step::Padding,
        ONE_BYTE_STOP_ID => Step::Stop,
        id => Step::Element {
            id,
            len: usize::from(first & 0x0F) + 1,
            header_len: 1,
        },
    })
}

/// Reads the element header at the start of `rest` (never empty) in the two-byte form.
fn two_byte_step(rest: &[u8]) -> Result<Step, ParseError> {
    match rest {
        [0, ..] => Ok(Step::Padding),
        [id, len, ..] => Ok(Step::Element {
            id: *id,
            len: usize::from(*len),
            header_len: 2,
        }),
        _ => Err(ParseError::BadExtensionLength),
    }
}

/// Walks the body element by element; `body_start` turns body offsets into packet offsets.
fn parse_elements(
    body: &[u8],
    body_start: usize,
    step: fn(&[u8]) -> Result<Step, ParseError>,
) -> Result<InlineVec<Element, MAX_EXTENSIONS>, ParseError> {
    let mut elements = InlineVec::new();
    let mut pos = 0;
    while let Some(rest) = body.get(pos..).filter(|rest| !rest.is_empty()) {
        match step(rest)? {
            Step::Padding => pos += 1,
            Step::Stop => break,
            Step::Element {
                id,
                len,
                header_len,
            } => {
                let start = pos + header_len;
                if start + len > body.len() {
                    return Err(ParseError::BadExtensionLength);
                }
                let element = Element {
                    id,
                    // At most 255 by both forms' length fields.
                    len: len as u8,
                    // Within the block, which ends below 2^32 (see `Element`).
                    start: (body_start + start) as u32,
                };
                elements
                    .push(element)
                    .map_err(|_| ParseError::TooManyExtensions)?;
                pos = start + len;
            }
        }
    }
    Ok(elements)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A block at offset 0 of `bytes`: profile, length in words, body.
    fn block(profile: u16, body: &[u8]) -> Vec<u8> {
        assert_eq!(body.len() % 4, 0, "test bodies are whole words");
        let mut out = profile.to_be_bytes().to_vec();
        out.extend_from_slice(&((body.len() / 4) as u16).to_be_bytes());
        out.extend_from_slice(body);
        out
    }

    fn ids_and_bytes(packet: &[u8], b: &ExtensionBlock) -> Vec<(u8, Vec<u8>)> {
        b.elements
            .iter()
            .map(|e| (e.id, packet[e.range()].to_vec()))
            .collect()
    }

    #[test]
    fn profiles_map_to_forms() {
        assert_eq!(ExtensionForm::from_profile(0xBEDE), ExtensionForm::OneByte);
        assert_eq!(
            ExtensionForm::from_profile(0x1000),
            ExtensionForm::TwoByte { appbits: 0 }
        );
        assert_eq!(
            ExtensionForm::from_profile(0x100F),
            ExtensionForm::TwoByte { appbits: 15 }
        );
        assert_eq!(
            ExtensionForm::from_profile(0x1010),
            ExtensionForm::Opaque { profile: 0x1010 }
        );
    }

    #[test]
    fn one_byte_skips_padding_and_stops_at_id_15() {
        // id 1 len 2, two padding bytes, id 2 len 1, then id 15: the element after it is ignored.
        let bytes = block(
            0xBEDE,
            &[0x11, 0xAA, 0xBB, 0, 0, 0x20, 0xCC, 0xF0, 0x30, 0xDD, 0, 0],
        );
        let (b, end) = ExtensionBlock::parse(&bytes, 0).unwrap();
        assert_eq!(end, bytes.len());
        assert_eq!(
            ids_and_bytes(&bytes, &b),
            vec![(1, vec![0xAA, 0xBB]), (2, vec![0xCC])]
        );
    }

    #[test]
    fn two_byte_reads_zero_length_and_long_elements() {
        let mut body = vec![0x01, 0x00, 0x00, 200, 20];
        body.extend(std::iter::repeat_n(7, 20));
        body.extend([0, 0, 0]);
        let bytes = block(0x1003, &body);
        let (b, _) = ExtensionBlock::parse(&bytes, 0).unwrap();
        assert_eq!(b.form, ExtensionForm::TwoByte { appbits: 3 });
        assert_eq!(
            ids_and_bytes(&bytes, &b),
            vec![(1, vec![]), (200, vec![7; 20])]
        );
    }

    #[test]
    fn opaque_block_keeps_its_body() {
        let bytes = block(0xABCD, &[1, 2, 3, 4]);
        let (b, _) = ExtensionBlock::parse(&bytes, 0).unwrap();
        assert_eq!(b.form, ExtensionForm::Opaque { profile: 0xABCD });
        assert!(b.elements.is_empty());
        assert_eq!(&bytes[b.body_range()], &[1, 2, 3, 4]);
    }

    #[test]
    fn block_past_end_is_refused() {
        assert_eq!(
            ExtensionBlock::parse(&[0xBE, 0xDE, 0], 0),
            Err(ParseError::ExtensionPastEnd)
        );
        let mut bytes = block(0xBEDE, &[0x10, 1, 0, 0]);
        bytes.pop();
        assert_eq!(
            ExtensionBlock::parse(&bytes, 0),
            Err(ParseError::ExtensionPastEnd)
        );
    }

    #[test]
    fn element_past_block_is_refused() {
        // One-byte id 1 announcing 4 bytes with 3 left.
        let bytes = block(0xBEDE, &[0x13, 1, 2, 3]);
        assert_eq!(
            ExtensionBlock::parse(&bytes, 0),
            Err(ParseError::BadExtensionLength)
        );
        // Two-byte element header cut by the end of the block.
        let bytes = block(0x1000, &[0, 0, 0, 5]);
        assert_eq!(
            ExtensionBlock::parse(&bytes, 0),
            Err(ParseError::BadExtensionLength)
        );
    }

    #[test]
    fn more_elements_than_the_table_are_refused() {
        let fits = block(0xBEDE, &[0x10, 0xAA].repeat(MAX_EXTENSIONS));
        assert_eq!(
            ExtensionBlock::parse(&fits, 0).map(|(b, _)| b.elements.len()),
            Ok(MAX_EXTENSIONS)
        );
        let over = block(0xBEDE, &[0x10, 0xAA].repeat(MAX_EXTENSIONS + 2));
        assert_eq!(
            ExtensionBlock::parse(&over, 0),
            Err(ParseError::TooManyExtensions)
        );
    }
}
