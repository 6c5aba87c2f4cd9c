//! RTP payload descriptors of the video codecs the SFU forwards: VP8 (RFC 7741), VP9 (RFC 9628),
//! H264 (RFC 6184) and AV1 (AV1 RTP spec section 4.4). Parsers borrow the payload and never
//! allocate; VP8 and VP9 descriptors also write back, and a VP8 descriptor can be patched in
//! place per subscriber.
//!
//! [`parse_payload`] dispatches on [`Codec`] and gives a [`PayloadDescriptor`], whose
//! [`PayloadSummary`] is what a selector needs: keyframe, frame boundaries, picture id, layers.

mod av1;
mod h264;
mod picture_id;
mod vp8;
mod vp9;

use std::fmt;

pub use av1::{Av1Descriptor, Av1Error, ObuExtension, ObuHeader, ObuType};
pub use h264::{H264Descriptor, H264Error, NalUnitType, NalUnitTypes, Packetization};
pub use picture_id::PictureId;
pub use vp8::{KeyIdx, PartitionId, Vp8Descriptor, Vp8Error, Vp8Patch, Vp8Temporal};
pub use vp9::{
    PDiff, PictureGroupEntry, Resolution, ScalabilityStructure, Vp9Descriptor, Vp9Error,
    Vp9LayerIndices, VP9_MAX_DESCRIPTOR_SIZE, VP9_MAX_PICTURE_GROUP, VP9_MAX_REFERENCE_DIFFS,
    VP9_MAX_SPATIAL_LAYERS,
};

use crate::bits::BufferFull;

/// Whether a codec carries sound or pictures.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum MediaKind {
    Audio,
    Video,
}

/// The codecs the SFU forwards.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Codec {
    Av1,
    Vp9,
    Vp8,
    H264,
    Opus,
    /// G.711 mu-law.
    Pcmu,
    /// G.711 A-law.
    Pcma,
    G722,
}

impl Codec {
    pub fn kind(self) -> MediaKind {
        match self {
            Self::Av1 | Self::Vp9 | Self::Vp8 | Self::H264 => MediaKind::Video,
            Self::Opus | Self::Pcmu | Self::Pcma | Self::G722 => MediaKind::Audio,
        }
    }

    /// The codec named by an SDP `a=rtpmap` encoding name, compared case-insensitively as
    /// RFC 4855 section 3 requires.
    pub fn from_encoding_name(name: &str) -> Option<Self> {
        Self::ALL
            .into_iter()
            .find(|codec| codec.encoding_name().eq_ignore_ascii_case(name))
    }

    /// The encoding name as the RTP payload format registers it (and SDP writes it).
    pub fn encoding_name(self) -> &'static str {
        match self {
            Self::Av1 => "AV1",
            Self::Vp9 => "VP9",
            Self::Vp8 => "VP8",
            Self::H264 => "H264",
            Self::Opus => "opus",
            Self::Pcmu => "PCMU",
            Self::Pcma => "PCMA",
            Self::G722 => "G722",
        }
    }

    const ALL: [Codec; 8] = [
        Self::Av1,
        Self::Vp9,
        Self::Vp8,
        Self::H264,
        Self::Opus,
        Self::Pcmu,
        Self::Pcma,
        Self::G722,
    ];
}

/// A temporal layer index (VP8 and VP9 TID, AV1 `temporal_id`).
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct TemporalLayerId(pub u8);

/// A spatial layer index (VP9 SID, AV1 `spatial_id`).
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct SpatialLayerId(pub u8);

/// TL0PICIDX: a running index of base temporal layer frames (VP8, VP9 non-flexible mode).
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Tl0PicIdx(pub u8);

/// A parsed payload descriptor of any codec.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PayloadDescriptor {
    Vp8 {
        descriptor: Vp8Descriptor,
        /// From the VP8 payload header after the descriptor (RFC 7741 section 4.3), which only
        /// the first packet of a frame carries.
        keyframe: bool,
    },
    Vp9(Vp9Descriptor),
    H264(H264Descriptor),
    Av1(Av1Descriptor),
    /// Audio codecs have no descriptor.
    Audio,
}

/// What a selector needs from any codec's descriptor. Frame boundaries are `None` when the
/// payload does not say: the RTP marker bit or the Dependency Descriptor tells instead.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PayloadSummary {
    /// The packet belongs to a frame decodable without earlier frames. For audio every packet
    /// is, so a selector waiting for a keyframe may switch at once.
    pub keyframe: bool,
    pub start_of_frame: Option<bool>,
    pub end_of_frame: Option<bool>,
    pub picture_id: Option<PictureId>,
    pub spatial_layer: Option<SpatialLayerId>,
    pub temporal_layer: Option<TemporalLayerId>,
}

/// Why a payload does not parse as the codec it was sent as.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CodecError {
    Vp8(Vp8Error),
    Vp9(Vp9Error),
    H264(H264Error),
    Av1(Av1Error),
}

/// Why a descriptor cannot be written or patched. These are caller errors.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WriteError {
    /// The buffer, or the payload to patch, is shorter than the descriptor.
    BufferTooSmall,
    /// A value does not fit its wire field.
    FieldOutOfRange,
    /// Fields disagree with each other or with the descriptor being patched.
    Inconsistent,
}

/// Parses the payload descriptor of an RTP payload sent as `codec`.
pub fn parse_payload(codec: Codec, payload: &[u8]) -> Result<PayloadDescriptor, CodecError> {
    Ok(match codec {
        Codec::Vp8 => {
            let descriptor = Vp8Descriptor::parse(payload)?;
            let keyframe = descriptor.is_keyframe(payload)?;
            PayloadDescriptor::Vp8 {
                descriptor,
                keyframe,
            }
        }
        Codec::Vp9 => PayloadDescriptor::Vp9(Vp9Descriptor::parse(payload)?),
        Codec::H264 => PayloadDescriptor::H264(H264Descriptor::parse(payload)?),
        Codec::Av1 => PayloadDescriptor::Av1(Av1Descriptor::parse(payload)?),
        Codec::Opus | Codec::Pcmu | Codec::Pcma | Codec::G722 => PayloadDescriptor::Audio,
    })
}

impl PayloadDescriptor {
    pub fn summary(&self) -> PayloadSummary {
        match self {
            Self::Vp8 {
                descriptor,
                keyframe,
            } => descriptor.summary(*keyframe),
            Self::Vp9(d) => d.summary(),
            Self::H264(d) => d.summary(),
            Self::Av1(d) => d.summary(),
            Self::Audio => PayloadSummary {
                keyframe: true,
                start_of_frame: Some(true),
                end_of_frame: Some(true),
                picture_id: None,
                spatial_layer: None,
                temporal_layer: None,
            },
        }
    }
}

impl fmt::Display for CodecError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Vp8(e) => write!(f, "vp8: {e}"),
            Self::Vp9(e) => write!(f, "vp9: {e}"),
            Self::H264(e) => write!(f, "h264: {e}"),
            Self::Av1(e) => write!(f, "av1: {e}"),
        }
    }
}

impl std::error::Error for CodecError {}

impl From<Vp8Error> for CodecError {
    fn from(e: Vp8Error) -> Self {
        Self::Vp8(e)
    }
}

impl From<Vp9Error> for CodecError {
    fn from(e: Vp9Error) -> Self {
        Self::Vp9(e)
    }
}

impl From<H264Error> for CodecError {
    fn from(e: H264Error) -> Self {
        Self::H264(e)
    }
}

impl From<Av1Error> for CodecError {
    fn from(e: Av1Error) -> Self {
        Self::Av1(e)
    }
}

impl fmt::Display for WriteError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Self::BufferTooSmall => "buffer too small for the descriptor",
            Self::FieldOutOfRange => "value does not fit its field",
            Self::Inconsistent => "fields disagree with the descriptor",
        })
    }
}

impl std::error::Error for WriteError {}

impl From<BufferFull> for WriteError {
    fn from(_: BufferFull) -> Self {
        Self::BufferTooSmall
    }
}

/// `value` as a `bits`-wide wire field, refused rather than truncated when it does not fit.
fn field(value: u8, bits: u32) -> Result<u32, WriteError> {
    match u32::from(value) < 1 << bits {
        true => Ok(u32::from(value)),
        false => Err(WriteError::FieldOutOfRange),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn audio_codecs_need_no_descriptor() {
        for codec in [Codec::Opus, Codec::Pcmu, Codec::Pcma, Codec::G722] {
            assert_eq!(codec.kind(), MediaKind::Audio);
            // Even an empty payload: there is nothing to parse.
            let parsed = parse_payload(codec, &[]).unwrap();
            assert_eq!(parsed, PayloadDescriptor::Audio);
            assert!(parsed.summary().keyframe);
        }
        for codec in [Codec::Av1, Codec::Vp9, Codec::Vp8, Codec::H264] {
            assert_eq!(codec.kind(), MediaKind::Video);
            assert!(parse_payload(codec, &[]).is_err(), "{codec:?}");
        }
    }

    #[test]
    fn encoding_names_match_case_insensitively() {
        assert_eq!(Codec::from_encoding_name("vp8"), Some(Codec::Vp8));
        assert_eq!(Codec::from_encoding_name("OPUS"), Some(Codec::Opus));
        assert_eq!(Codec::from_encoding_name("h264"), Some(Codec::H264));
        assert_eq!(Codec::from_encoding_name("AV1"), Some(Codec::Av1));
        assert_eq!(Codec::from_encoding_name("H265"), None);
        assert_eq!(Codec::from_encoding_name(""), None);
    }

    #[test]
    fn errors_name_the_codec() {
        let e = parse_payload(Codec::Vp9, &[0x80]).unwrap_err();
        assert_eq!(e, CodecError::Vp9(Vp9Error::Truncated));
        assert_eq!(e.to_string(), "vp9: payload descriptor truncated");
    }

    #[test]
    fn field_refuses_values_wider_than_the_field() {
        assert_eq!(field(7, 3), Ok(7));
        assert_eq!(field(8, 3), Err(WriteError::FieldOutOfRange));
        assert_eq!(field(255, 8), Ok(255));
    }
}
