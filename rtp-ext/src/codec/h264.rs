//! H264 payloads (RFC 6184, packetization modes 0 and 1): single NAL unit packets, STAP-A and
//! FU-A. Reports the NAL unit types a packet carries and what they say about keyframes and
//! frame starts; slice data is never decoded beyond its first bit.

use std::fmt;

use super::PayloadSummary;

/// `nal_unit_type`, the low five bits of a NAL unit header (H.264 table 7-1, RFC 6184
/// section 5.4).
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq, Hash)]
pub struct NalUnitType(pub u8);

impl NalUnitType {
    pub const NON_IDR_SLICE: Self = Self(1);
    pub const IDR_SLICE: Self = Self(5);
    pub const SEI: Self = Self(6);
    pub const SPS: Self = Self(7);
    pub const PPS: Self = Self(8);
    pub const ACCESS_UNIT_DELIMITER: Self = Self(9);
    pub const STAP_A: Self = Self(24);
    pub const STAP_B: Self = Self(25);
    pub const MTAP16: Self = Self(26);
    pub const MTAP24: Self = Self(27);
    pub const FU_A: Self = Self(28);
    pub const FU_B: Self = Self(29);

    fn of_header(byte: u8) -> Self {
        Self(byte & 0x1F)
    }

    /// Types 1 to 23 are NAL units of H.264 itself; 0 and 24 to 31 belong to the payload
    /// format or are undefined.
    fn is_h264_nal_unit(self) -> bool {
        (1..=23).contains(&self.0)
    }

    /// Whether the NAL unit precedes the first slice of an access unit (H.264 section
    /// 7.4.1.2.3), so a packet starting with it starts a frame.
    fn opens_access_unit(self) -> bool {
        [Self::SEI, Self::SPS, Self::PPS, Self::ACCESS_UNIT_DELIMITER].contains(&self)
    }

    fn is_slice(self) -> bool {
        self == Self::NON_IDR_SLICE || self == Self::IDR_SLICE
    }
}

/// A set of NAL unit types, one bit per type: a STAP-A may carry many NAL units.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq, Hash)]
pub struct NalUnitTypes(u32);

impl NalUnitTypes {
    pub fn contains(self, t: NalUnitType) -> bool {
        self.0 & (1 << (t.0 & 0x1F)) != 0
    }

    pub fn is_empty(self) -> bool {
        self.0 == 0
    }

    fn insert(&mut self, t: NalUnitType) {
        self.0 |= 1 << (t.0 & 0x1F);
    }
}

/// How the packet carries NAL units (RFC 6184 section 5.2).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Packetization {
    /// One whole NAL unit (section 5.6).
    SingleNalUnit,
    /// Several whole NAL units (section 5.7.1).
    StapA,
    /// A fragment of one NAL unit (section 5.8), with the FU header's S and E bits.
    FuA { start: bool, end: bool },
}

/// What an H264 payload carries.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct H264Descriptor {
    pub packetization: Packetization,
    /// The types of the NAL units the packet carries or fragments.
    pub nal_types: NalUnitTypes,
    /// Whether the packet starts a frame (access unit): `Some(true)` when the first NAL unit
    /// starting here is a parameter set, SEI or delimiter, or a slice with
    /// `first_mb_in_slice` 0; `Some(false)` for a later slice or an FU-A continuation; `None`
    /// when the payload does not say.
    pub start_of_frame: Option<bool>,
}

/// Why a payload is not H264 as RFC 6184 packetization modes 0 and 1 carry it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum H264Error {
    /// The payload ends inside a header or an aggregated NAL unit.
    Truncated,
    /// A STAP-A holds no NAL unit, or one of size 0.
    EmptyNalUnit,
    /// A NAL unit type that cannot appear where it is (0, 30, 31, or 24 to 31 inside a
    /// STAP-A or FU-A).
    InvalidNalType(u8),
    /// STAP-B, MTAP or FU-B, which only interleaved mode uses.
    UnsupportedPacketization(u8),
    /// An FU header with both S and E set (RFC 6184 section 5.8).
    FragmentStartAndEnd,
}

impl H264Descriptor {
    pub fn parse(payload: &[u8]) -> Result<Self, H264Error> {
        let (&header, rest) = payload.split_first().ok_or(H264Error::Truncated)?;
        match NalUnitType::of_header(header) {
            NalUnitType::STAP_A => parse_stap_a(rest),
            NalUnitType::FU_A => parse_fu_a(rest),
            t @ (NalUnitType::STAP_B
            | NalUnitType::MTAP16
            | NalUnitType::MTAP24
            | NalUnitType::FU_B) => Err(H264Error::UnsupportedPacketization(t.0)),
            t => {
                check_nal_type(t)?;
                let mut nal_types = NalUnitTypes::default();
                nal_types.insert(t);
                Ok(Self {
                    packetization: Packetization::SingleNalUnit,
                    nal_types,
                    start_of_frame: starts_frame(t, rest),
                })
            }
        }
    }

    /// The packet carries an IDR slice or a parameter set, which browsers send only with
    /// keyframes. FU-A continuations give `false`: only the first fragment counts.
    pub fn is_keyframe(&self) -> bool {
        if let Packetization::FuA { start: false, .. } = self.packetization {
            return false;
        }
        [NalUnitType::IDR_SLICE, NalUnitType::SPS, NalUnitType::PPS]
            .into_iter()
            .any(|t| self.nal_types.contains(t))
    }

    pub(crate) fn summary(&self) -> PayloadSummary {
        let end_of_frame = match self.packetization {
            Packetization::FuA { end: false, .. } => Some(false),
            // A whole NAL unit may still be followed by more of the frame; the RTP marker
            // bit tells.
            _ => None,
        };
        PayloadSummary {
            keyframe: self.is_keyframe(),
            start_of_frame: self.start_of_frame,
            end_of_frame,
            picture_id: None,
            spatial_layer: None,
            temporal_layer: None,
        }
    }
}

fn check_nal_type(t: NalUnitType) -> Result<(), H264Error> {
    match t.is_h264_nal_unit() {
        true => Ok(()),
        false => Err(H264Error::InvalidNalType(t.0)),
    }
}

/// Whether a NAL unit of type `t` whose bytes after the header start with `body` starts a
/// frame. `first_mb_in_slice` is the slice header's first field, an Exp-Golomb code that is
/// 0 exactly when its first bit is 1.
fn starts_frame(t: NalUnitType, body: &[u8]) -> Option<bool> {
    if t.opens_access_unit() {
        return Some(true);
    }
    if t.is_slice() {
        return body.first().map(|b| b & 0x80 != 0);
    }
    None
}

/// `STAP-A NAL HDR` already taken; then `|NALU size (16 bits)| NALU |` until the end.
fn parse_stap_a(mut rest: &[u8]) -> Result<H264Descriptor, H264Error> {
    let mut nal_types = NalUnitTypes::default();
    let mut start_of_frame = None;
    let mut first = true;
    while !rest.is_empty() {
        let (size, tail) = rest.split_at_checked(2).ok_or(H264Error::Truncated)?;
        let size = usize::from(u16::from_be_bytes([size[0], size[1]]));
        let (nal, tail) = tail.split_at_checked(size).ok_or(H264Error::Truncated)?;
        let (&header, body) = nal.split_first().ok_or(H264Error::EmptyNalUnit)?;
        let t = NalUnitType::of_header(header);
        check_nal_type(t)?;
        nal_types.insert(t);
        if first {
            start_of_frame = starts_frame(t, body);
            first = false;
        }
        rest = tail;
    }
    if nal_types.is_empty() {
        return Err(H264Error::EmptyNalUnit);
    }
    Ok(H264Descriptor {
        packetization: Packetization::StapA,
        nal_types,
        start_of_frame,
    })
}

/// `FU indicator` already taken; then `|S|E|R| Type |` and the fragment.
fn parse_fu_a(rest: &[u8]) -> Result<H264Descriptor, H264Error> {
    let (&fu_header, body) = rest.split_first().ok_or(H264Error::Truncated)?;
    let start = fu_header & 0x80 != 0;
    let end = fu_header & 0x40 != 0;
    if start && end {
        return Err(H264Error::FragmentStartAndEnd);
    }
    let t = NalUnitType::of_header(fu_header);
    check_nal_type(t)?;
    let mut nal_types = NalUnitTypes::default();
    nal_types.insert(t);
    Ok(H264Descriptor {
        packetization: Packetization::FuA { start, end },
        nal_types,
        // Only the first fragment holds the start of the NAL unit's body.
        start_of_frame: match start {
            true => starts_frame(t, body),
            false => Some(false),
        },
    })
}

impl fmt::Display for H264Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Truncated => f.write_str("payload truncated"),
            Self::EmptyNalUnit => f.write_str("empty nal unit in aggregation packet"),
            Self::InvalidNalType(t) => write!(f, "nal unit type {t} not allowed here"),
            Self::UnsupportedPacketization(t) => {
                write!(f, "interleaved packetization type {t} not supported")
            }
            Self::FragmentStartAndEnd => f.write_str("fragment with both start and end bits"),
        }
    }
}

impl std::error::Error for H264Error {}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(bytes: &[u8]) -> H264Descriptor {
        H264Descriptor::parse(bytes).unwrap()
    }

    /// RFC 6184 section 5.6: the payload is the NAL unit; `0x88` opens a slice header with
    /// `first_mb_in_slice` 0, `0x40` one with a later macroblock.
    #[test]
    fn rfc6184_5_6_single_nal_unit() {
        let idr = parse(&[0x65, 0x88, 0x84]);
        assert_eq!(idr.packetization, Packetization::SingleNalUnit);
        assert!(idr.nal_types.contains(NalUnitType::IDR_SLICE));
        assert!(idr.is_keyframe());
        assert_eq!(idr.start_of_frame, Some(true));
        let second_slice = parse(&[0x41, 0x40]);
        assert!(!second_slice.is_keyframe());
        assert_eq!(second_slice.start_of_frame, Some(false));
        assert_eq!(parse(&[0x09, 0xF0]).start_of_frame, Some(true));
        assert_eq!(parse(&[0x41]).start_of_frame, None);
        assert_eq!(parse(&[0x0C]).start_of_frame, None);
    }

    /// RFC 6184 section 5.7.1: SPS, PPS and an IDR slice in one STAP-A, as browsers send them.
    #[test]
    fn rfc6184_5_7_1_stap_a() {
        let d = parse(&[0x78, 0, 2, 0x67, 0x42, 0, 2, 0x68, 0xCE, 0, 2, 0x65, 0x88]);
        assert_eq!(d.packetization, Packetization::StapA);
        for t in [NalUnitType::SPS, NalUnitType::PPS, NalUnitType::IDR_SLICE] {
            assert!(d.nal_types.contains(t), "{t:?}");
        }
        assert!(!d.nal_types.contains(NalUnitType::NON_IDR_SLICE));
        assert!(d.is_keyframe());
        assert_eq!(d.start_of_frame, Some(true));
    }

    /// RFC 6184 section 5.8: FU indicator (type 28), FU header `|S|E|R|Type|`.
    #[test]
    fn rfc6184_5_8_fu_a() {
        let start = parse(&[0x7C, 0x85, 0x88]);
        assert_eq!(
            start.packetization,
            Packetization::FuA {
                start: true,
                end: false
            }
        );
        assert!(start.is_keyframe());
        assert_eq!(start.summary().start_of_frame, Some(true));
        assert_eq!(start.summary().end_of_frame, Some(false));
        let middle = parse(&[0x7C, 0x05, 0x00]);
        assert!(middle.nal_types.contains(NalUnitType::IDR_SLICE));
        assert!(!middle.is_keyframe());
        assert_eq!(middle.summary().start_of_frame, Some(false));
        let end = parse(&[0x7C, 0x45]);
        assert_eq!(end.summary().end_of_frame, None);
    }

    #[test]
    fn every_error() {
        let cases: [(&[u8], H264Error); 14] = [
            (&[], H264Error::Truncated),
            (&[0x78, 0x00], H264Error::Truncated),
            (&[0x78, 0, 5, 0x65], H264Error::Truncated),
            (&[0x7C], H264Error::Truncated),
            (&[0x78], H264Error::EmptyNalUnit),
            (&[0x78, 0, 0], H264Error::EmptyNalUnit),
            (&[0x00], H264Error::InvalidNalType(0)),
            (&[0x1E], H264Error::InvalidNalType(30)),
            (&[0x78, 0, 1, 0x18], H264Error::InvalidNalType(24)),
            (&[0x7C, 0x9C], H264Error::InvalidNalType(28)),
            (&[0x19], H264Error::UnsupportedPacketization(25)),
            (&[0x1A], H264Error::UnsupportedPacketization(26)),
            (&[0x1D], H264Error::UnsupportedPacketization(29)),
            (&[0x7C, 0xC5], H264Error::FragmentStartAndEnd),
        ];
        for (bytes, error) in cases {
            assert_eq!(H264Descriptor::parse(bytes), Err(error), "{bytes:02x?}");
        }
        assert_eq!(
            H264Error::InvalidNalType(30).to_string(),
            "nal unit type 30 not allowed here"
        );
    }
}
