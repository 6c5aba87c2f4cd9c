//! The AV1 aggregation header (AV1 RTP spec section 4.4) and the header of the first OBU
//! element (AV1 spec section 5.3), enough to spot keyframes and layers without decoding.

use std::fmt;

use super::{PayloadSummary, SpatialLayerId, TemporalLayerId};

/// `obu_type` (AV1 spec section 6.2.2).
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq, Hash)]
pub struct ObuType(pub u8);

impl ObuType {
    pub const SEQUENCE_HEADER: Self = Self(1);
    pub const TEMPORAL_DELIMITER: Self = Self(2);
    pub const FRAME_HEADER: Self = Self(3);
    pub const TILE_GROUP: Self = Self(4);
    pub const METADATA: Self = Self(5);
    pub const FRAME: Self = Self(6);
    pub const REDUNDANT_FRAME_HEADER: Self = Self(7);
    pub const TILE_LIST: Self = Self(8);
    pub const PADDING: Self = Self(15);
}

/// `obu_extension_header`: the layer the OBU belongs to.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq, Hash)]
pub struct ObuExtension {
    pub temporal_id: TemporalLayerId,
    pub spatial_id: SpatialLayerId,
}

/// `obu_header`, without its reserved bits.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq, Hash)]
pub struct ObuHeader {
    pub obu_type: ObuType,
    pub extension: Option<ObuExtension>,
    /// `obu_has_size_field`; the RTP spec asks senders to clear it, but receivers accept it.
    pub has_size_field: bool,
}

/// The aggregation header `|Z|Y| W |N|-|-|-|` and the first OBU's header.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Av1Descriptor {
    /// Z: the first OBU element continues an OBU fragment of the previous packet.
    pub first_is_continuation: bool,
    /// Y: the last OBU element continues in the next packet.
    pub last_continues: bool,
    /// W: the number of OBU elements, 1 to 3; 0 when each element carries its length.
    pub element_count: u8,
    /// N: the packet is the first of a coded video sequence.
    pub new_coded_video_sequence: bool,
    /// The header of the first OBU element, absent when that element is a continuation.
    pub first_obu: Option<ObuHeader>,
}

/// Why a payload does not hold an AV1 aggregation header and first OBU element.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Av1Error {
    /// The payload ends inside a header or before the length an element announces.
    Truncated,
    /// An element length runs past the 8 bytes `leb128()` allows.
    Leb128TooLong,
    /// The first OBU element is empty.
    EmptyElement,
    /// The first OBU header sets `obu_forbidden_bit`.
    ForbiddenBit,
}

impl Av1Descriptor {
    pub fn parse(payload: &[u8]) -> Result<Self, Av1Error> {
        let (&header, rest) = payload.split_first().ok_or(Av1Error::Truncated)?;
        let first_is_continuation = header & 0x80 != 0;
        let element_count = (header >> 4) & 0x03;
        let first_obu = match first_is_continuation {
            true => None,
            false => Some(ObuHeader::parse(first_element(rest, element_count)?)?),
        };
        Ok(Self {
            first_is_continuation,
            last_continues: header & 0x40 != 0,
            element_count,
            new_coded_video_sequence: header & 0x08 != 0,
            first_obu,
        })
    }

    /// N is set, or the packet opens with a sequence header, which encoders send with each
    /// keyframe even when N is not set.
    pub fn is_keyframe(&self) -> bool {
        self.new_coded_video_sequence
            || self
                .first_obu
                .is_some_and(|obu| obu.obu_type == ObuType::SEQUENCE_HEADER)
    }

    pub(crate) fn summary(&self) -> PayloadSummary {
        let start_of_frame = match (self.first_is_continuation, self.new_coded_video_sequence) {
            (true, _) => Some(false),
            (false, true) => Some(true),
            // A whole OBU may open a frame or follow another OBU of it: the Dependency
            // Descriptor tells.
            (false, false) => None,
        };
        let extension = self.first_obu.and_then(|obu| obu.extension);
        PayloadSummary {
            keyframe: self.is_keyframe(),
            start_of_frame,
            end_of_frame: self.last_continues.then_some(false),
            picture_id: None,
            spatial_layer: extension.map(|e| e.spatial_id),
            temporal_layer: extension.map(|e| e.temporal_id),
        }
    }
}

/// The first OBU element: all of `rest` when W is 1, otherwise a `leb128()` length and that
/// many bytes.
fn first_element(rest: &[u8], element_count: u8) -> Result<&[u8], Av1Error> {
    let element = match element_count {
        1 => rest,
        _ => {
            let (len, tail) = read_leb128(rest)?;
            let len = usize::try_from(len).map_err(|_| Av1Error::Truncated)?;
            tail.get(..len).ok_or(Av1Error::Truncated)?
        }
    };
    match element.is_empty() {
        true => Err(Av1Error::EmptyElement),
        false => Ok(element),
    }
}

/// `leb128()` (AV1 spec section 4.10.5): little-endian groups of 7 bits, at most 8 bytes.
/// Returns the value and the bytes after it.
fn read_leb128(data: &[u8]) -> Result<(u64, &[u8]), Av1Error> {
    const MAX_BYTES: usize = 8;
    let mut value = 0u64;
    for (i, &byte) in data.iter().enumerate().take(MAX_BYTES) {
        value |= u64::from(byte & 0x7F) << (7 * i);
        if byte & 0x80 == 0 {
            return Ok((value, &data[i + 1..]));
        }
    }
    match data.len() < MAX_BYTES {
        true => Err(Av1Error::Truncated),
        false => Err(Av1Error::Leb128TooLong),
    }
}

impl ObuHeader {
    /// `|F| type |X|S|-|`, then `|TID|SID|-|-|-|` when X is set.
    fn parse(element: &[u8]) -> Result<Self, Av1Error> {
        let (&byte, rest) = element.split_first().ok_or(Av1Error::EmptyElement)?;
        if byte & 0x80 != 0 {
            return Err(Av1Error::ForbiddenBit);
        }
        let extension = match byte & 0x04 != 0 {
            true => {
                let &ext = rest.first().ok_or(Av1Error::Truncated)?;
                Some(ObuExtension {
                    temporal_id: TemporalLayerId(ext >> 5),
                    spatial_id: SpatialLayerId((ext >> 3) & 0x03),
                })
            }
            false => None,
        };
        Ok(Self {
            obu_type: ObuType((byte >> 3) & 0x0F),
            extension,
            has_size_field: byte & 0x02 != 0,
        })
    }
}

impl fmt::Display for Av1Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Self::Truncated => "payload truncated",
            Self::Leb128TooLong => "element length longer than 8 bytes",
            Self::EmptyElement => "empty obu element",
            Self::ForbiddenBit => "obu forbidden bit set",
        })
    }
}

impl std::error::Error for Av1Error {}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(bytes: &[u8]) -> Av1Descriptor {
        Av1Descriptor::parse(bytes).unwrap()
    }

    /// AV1 RTP spec section 4.4: N=1, W=1, then a sequence header OBU (`obu_type` 1).
    #[test]
    fn av1_rtp_4_4_new_coded_video_sequence() {
        let d = parse(&[0x18, 0x08, 0x00]);
        assert!(d.new_coded_video_sequence && !d.first_is_continuation && !d.last_continues);
        assert_eq!(d.element_count, 1);
        let obu = d.first_obu.unwrap();
        assert_eq!(obu.obu_type, ObuType::SEQUENCE_HEADER);
        assert!(d.is_keyframe());
        assert_eq!(d.summary().start_of_frame, Some(true));
    }

    #[test]
    fn av1_rtp_4_4_sequence_header_without_n_is_a_keyframe() {
        let d = parse(&[0x10, 0x0A, 0x00]);
        assert!(!d.new_coded_video_sequence && d.is_keyframe());
        assert!(d.first_obu.unwrap().has_size_field);
        assert_eq!(d.summary().start_of_frame, None);
    }

    /// W=0: every element has a `leb128()` length. A FRAME OBU with an extension header:
    /// temporal id 2, spatial id 1.
    #[test]
    fn av1_rtp_4_4_length_prefixed_element_with_extension() {
        let d = parse(&[0x00, 0x03, 0x34, 0x48, 0x00, 0x01, 0x08]);
        let obu = d.first_obu.unwrap();
        assert_eq!(obu.obu_type, ObuType::FRAME);
        assert!(!d.is_keyframe());
        let s = d.summary();
        assert_eq!(s.temporal_layer, Some(TemporalLayerId(2)));
        assert_eq!(s.spatial_layer, Some(SpatialLayerId(1)));
        // A two-byte length: 128 bytes of element.
        let mut long = vec![0x20, 0x80, 0x01, 0x08];
        long.resize(3 + 128, 0);
        assert_eq!(
            parse(&long).first_obu.unwrap().obu_type,
            ObuType::SEQUENCE_HEADER
        );
        long.pop();
        assert_eq!(Av1Descriptor::parse(&long), Err(Av1Error::Truncated));
    }

    #[test]
    fn av1_rtp_4_4_fragments() {
        let d = parse(&[0xD0, 0xFF]);
        assert!(d.first_is_continuation && d.last_continues);
        assert_eq!(d.first_obu, None);
        let s = d.summary();
        assert!(!s.keyframe);
        assert_eq!(
            (s.start_of_frame, s.end_of_frame),
            (Some(false), Some(false))
        );
    }

    #[test]
    fn every_error() {
        let mut too_long = vec![0x00];
        too_long.extend_from_slice(&[0x80; 8]);
        too_long.push(0x01);
        let cases: [(&[u8], Av1Error); 8] = [
            (&[], Av1Error::Truncated),
            (&[0x00, 0x80], Av1Error::Truncated),
            (&[0x00, 0x05, 0x08], Av1Error::Truncated),
            (&[0x10, 0x0C], Av1Error::Truncated),
            (&too_long, Av1Error::Leb128TooLong),
            (&[0x10], Av1Error::EmptyElement),
            (&[0x00, 0x00, 0x08], Av1Error::EmptyElement),
            (&[0x10, 0x88], Av1Error::ForbiddenBit),
        ];
        for (bytes, error) in cases {
            assert_eq!(Av1Descriptor::parse(bytes), Err(error), "{bytes:02x?}");
        }
        assert_eq!(Av1Error::ForbiddenBit.to_string(), "obu forbidden bit set");
    }
}
