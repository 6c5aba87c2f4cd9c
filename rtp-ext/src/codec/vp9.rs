//! The VP9 payload descriptor (RFC 9628 section 4.2) with its scalability structure
//! (section 4.2.1), stored inline so a parsed descriptor is `Copy` and never allocates.

use std::fmt;

use super::picture_id::PictureId;
use super::{field, PayloadSummary, SpatialLayerId, TemporalLayerId, Tl0PicIdx, WriteError};
use crate::bits::{BitReader, BitWriter, BitsExhausted};
use crate::dd::InlineVec;

/// Flexible mode P_DIFFs per packet: the N bit may chain at most three.
pub const VP9_MAX_REFERENCE_DIFFS: usize = 3;
/// N_S is 3 bits: up to 8 spatial layers.
pub const VP9_MAX_SPATIAL_LAYERS: usize = 8;
/// Pictures per picture group (N_G) this parser keeps. The wire allows 255, but a dyadic
/// pattern of 5 temporal layers has 16 and browsers send at most 4; a larger group is refused
/// with [`Vp9Error::PictureGroupTooLarge`] rather than growing every descriptor.
pub const VP9_MAX_PICTURE_GROUP: usize = 16;
/// An upper bound on a descriptor's size: flags, 15-bit picture id, layer indices with
/// TL0PICIDX, three P_DIFFs, and the largest scalability structure kept.
pub const VP9_MAX_DESCRIPTOR_SIZE: usize = 1
    + 2
    + 2
    + VP9_MAX_REFERENCE_DIFFS
    + 1
    + 4 * VP9_MAX_SPATIAL_LAYERS
    + 1
    + VP9_MAX_PICTURE_GROUP * (1 + VP9_MAX_REFERENCE_DIFFS);

/// P_DIFF: how many pictures back a reference is, by picture id. 7 bits in flexible mode,
/// 8 bits in a picture group.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq, Hash)]
pub struct PDiff(pub u8);

/// The L-bit fields.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Vp9LayerIndices {
    /// TID, 0 to 7.
    pub tid: TemporalLayerId,
    /// U: a receiver may switch up to a higher temporal layer at this frame.
    pub switching_up_point: bool,
    /// SID, 0 to 7.
    pub sid: SpatialLayerId,
    /// D: the frame references the lower spatial layer of the same picture.
    pub inter_layer_dependency: bool,
}

#[derive(Debug, Default, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Resolution {
    pub width: u16,
    pub height: u16,
}

/// One picture of the picture group a scalability structure describes.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct PictureGroupEntry {
    pub tid: TemporalLayerId,
    /// U.
    pub switching_up_point: bool,
    /// 8-bit P_DIFFs; R, their count, is at most 3.
    pub reference_diffs: InlineVec<PDiff, VP9_MAX_REFERENCE_DIFFS>,
}

/// SS (RFC 9628 section 4.2.1): the layers of the stream and the picture group pattern.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ScalabilityStructure {
    /// N_S + 1, 1 to 8.
    pub spatial_layers: u8,
    /// Y: one resolution per spatial layer.
    pub resolutions: Option<InlineVec<Resolution, VP9_MAX_SPATIAL_LAYERS>>,
    /// G: the picture group, N_G entries.
    pub picture_group: Option<InlineVec<PictureGroupEntry, VP9_MAX_PICTURE_GROUP>>,
}

/// A VP9 payload descriptor. Reserved bits are not kept; the writer zeroes them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Vp9Descriptor {
    /// P: the picture references earlier pictures.
    pub inter_picture_predicted: bool,
    /// F: flexible mode, references given as P_DIFFs instead of a picture group.
    pub flexible_mode: bool,
    /// B.
    pub start_of_frame: bool,
    /// E.
    pub end_of_frame: bool,
    /// Z: no frame of a higher spatial layer of this picture references this frame.
    pub not_upper_layer_reference: bool,
    /// I, with M choosing 7 or 15 bits.
    pub picture_id: Option<PictureId>,
    /// L.
    pub layer: Option<Vp9LayerIndices>,
    /// Present exactly when L is set in non-flexible mode.
    pub tl0_pic_idx: Option<Tl0PicIdx>,
    /// 7-bit P_DIFFs, one to three exactly when F and P are set.
    pub reference_diffs: InlineVec<PDiff, VP9_MAX_REFERENCE_DIFFS>,
    /// V.
    pub scalability_structure: Option<ScalabilityStructure>,
}

/// Why a payload does not hold a VP9 descriptor.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Vp9Error {
    /// The descriptor ends before a field its flags announce.
    Truncated,
    /// A third P_DIFF sets N, announcing a fourth.
    TooManyReferenceDiffs,
    /// N_G is above [`VP9_MAX_PICTURE_GROUP`].
    PictureGroupTooLarge,
}

impl Vp9Descriptor {
    /// Parses the descriptor at the start of `payload`; the VP9 frame data follows it at
    /// [`Vp9Descriptor::size`].
    pub fn parse(payload: &[u8]) -> Result<Self, Vp9Error> {
        let mut r = BitReader::new(payload);
        let [i, p, l, f, b, e, v, z] = read_flags(&mut r)?;
        let picture_id = i.then(|| PictureId::read(&mut r)).transpose()?;
        let layer = l.then(|| read_layer(&mut r)).transpose()?;
        let tl0_pic_idx = (l && !f)
            .then(|| r.read(8).map(|v| Tl0PicIdx(v as u8)))
            .transpose()?;
        let reference_diffs = match f && p {
            true => read_flexible_diffs(&mut r)?,
            false => InlineVec::new(),
        };
        let scalability_structure = v.then(|| ScalabilityStructure::read(&mut r)).transpose()?;
        Ok(Self {
            inter_picture_predicted: p,
            flexible_mode: f,
            start_of_frame: b,
            end_of_frame: e,
            not_upper_layer_reference: z,
            picture_id,
            layer,
            tl0_pic_idx,
            reference_diffs,
            scalability_structure,
        })
    }

    /// Bytes on the wire.
    pub fn size(&self) -> usize {
        1 + self.picture_id.map_or(0, PictureId::size)
            + usize::from(self.layer.is_some())
            + usize::from(self.tl0_pic_idx.is_some())
            + self.reference_diffs.len()
            + self
                .scalability_structure
                .as_ref()
                .map_or(0, ScalabilityStructure::size)
    }

    /// A packet of a keyframe: not inter-picture predicted, in the base spatial layer (or with
    /// no layer indices). Upper spatial layers of a keyframe picture depend on the base layer,
    /// so they are not keyframes themselves. Every packet of the frame counts, not only the
    /// first; combine with `start_of_frame` to find where decoding can begin.
    pub fn is_keyframe(&self) -> bool {
        !self.inter_picture_predicted && self.layer.map_or(0, |l| l.sid.0) == 0
    }

    pub(crate) fn summary(&self) -> PayloadSummary {
        PayloadSummary {
            keyframe: self.is_keyframe(),
            start_of_frame: Some(self.start_of_frame),
            end_of_frame: Some(self.end_of_frame),
            picture_id: self.picture_id,
            spatial_layer: self.layer.map(|l| l.sid),
            temporal_layer: self.layer.map(|l| l.tid),
        }
    }

    /// Writes the descriptor to the start of `buf` and returns its length. TL0PICIDX and the
    /// P_DIFFs must be present exactly when the flags call for them.
    pub fn write(&self, buf: &mut [u8]) -> Result<usize, WriteError> {
        self.check()?;
        let mut w = BitWriter::new(buf);
        for flag in [
            self.picture_id.is_some(),
            self.inter_picture_predicted,
            self.layer.is_some(),
            self.flexible_mode,
            self.start_of_frame,
            self.end_of_frame,
            self.scalability_structure.is_some(),
            self.not_upper_layer_reference,
        ] {
            w.write_bit(flag)?;
        }
        if let Some(id) = self.picture_id {
            id.write(&mut w)?;
        }
        if let Some(layer) = self.layer {
            write_layer(&mut w, layer)?;
        }
        if let Some(tl0) = self.tl0_pic_idx {
            w.write(u32::from(tl0.0), 8)?;
        }
        write_flexible_diffs(&mut w, &self.reference_diffs)?;
        if let Some(ss) = &self.scalability_structure {
            ss.write(&mut w)?;
        }
        Ok(w.finish()?)
    }

    fn check(&self) -> Result<(), WriteError> {
        let tl0_expected = self.layer.is_some() && !self.flexible_mode;
        let diffs_expected = self.flexible_mode && self.inter_picture_predicted;
        if self.tl0_pic_idx.is_some() != tl0_expected
            || self.reference_diffs.is_empty() == diffs_expected
        {
            return Err(WriteError::Inconsistent);
        }
        Ok(())
    }
}

/// I, P, L, F, B, E, V, Z in wire order.
fn read_flags(r: &mut BitReader<'_>) -> Result<[bool; 8], BitsExhausted> {
    let byte = r.read(8)?;
    Ok(std::array::from_fn(|i| byte & (0x80 >> i) != 0))
}

/// `|TID|U| SID |D|`
fn read_layer(r: &mut BitReader<'_>) -> Result<Vp9LayerIndices, BitsExhausted> {
    Ok(Vp9LayerIndices {
        tid: TemporalLayerId(r.read(3)? as u8),
        switching_up_point: r.read_bit()?,
        sid: SpatialLayerId(r.read(3)? as u8),
        inter_layer_dependency: r.read_bit()?,
    })
}

fn write_layer(w: &mut BitWriter<'_>, layer: Vp9LayerIndices) -> Result<(), WriteError> {
    w.write(field(layer.tid.0, 3)?, 3)?;
    w.write_bit(layer.switching_up_point)?;
    w.write(field(layer.sid.0, 3)?, 3)?;
    w.write_bit(layer.inter_layer_dependency)?;
    Ok(())
}

/// `|P_DIFF|N|` repeated while N is set, at most three times.
fn read_flexible_diffs(
    r: &mut BitReader<'_>,
) -> Result<InlineVec<PDiff, VP9_MAX_REFERENCE_DIFFS>, Vp9Error> {
    let mut diffs = InlineVec::new();
    loop {
        let diff = PDiff(r.read(7)? as u8);
        let more = r.read_bit()?;
        diffs
            .push(diff)
            .expect("a fourth P_DIFF is refused below before it is read");
        if !more {
            return Ok(diffs);
        }
        if diffs.len() == VP9_MAX_REFERENCE_DIFFS {
            return Err(Vp9Error::TooManyReferenceDiffs);
        }
    }
}

fn write_flexible_diffs(w: &mut BitWriter<'_>, diffs: &[PDiff]) -> Result<(), WriteError> {
    for (i, diff) in diffs.iter().enumerate() {
        w.write(field(diff.0, 7)?, 7)?;
        w.write_bit(i + 1 < diffs.len())?;
    }
    Ok(())
}

impl ScalabilityStructure {
    /// Bytes on the wire.
    pub fn size(&self) -> usize {
        1 + self.resolutions.as_ref().map_or(0, |r| 4 * r.len())
            + self.picture_group.as_ref().map_or(0, |group| {
                1 + group
                    .iter()
                    .map(|entry| 1 + entry.reference_diffs.len())
                    .sum::<usize>()
            })
    }

    fn read(r: &mut BitReader<'_>) -> Result<Self, Vp9Error> {
        let spatial_layers = r.read(3)? as u8 + 1;
        let y = r.read_bit()?;
        let g = r.read_bit()?;
        r.read(3)?; // reserved
        let resolutions = y.then(|| read_resolutions(r, spatial_layers)).transpose()?;
        let picture_group = g.then(|| read_picture_group(r)).transpose()?;
        Ok(Self {
            spatial_layers,
            resolutions,
            picture_group,
        })
    }

    fn write(&self, w: &mut BitWriter<'_>) -> Result<(), WriteError> {
        let n_s = self
            .spatial_layers
            .checked_sub(1)
            .ok_or(WriteError::FieldOutOfRange)?;
        w.write(field(n_s, 3)?, 3)?;
        w.write_bit(self.resolutions.is_some())?;
        w.write_bit(self.picture_group.is_some())?;
        w.write(0, 3)?;
        if let Some(resolutions) = &self.resolutions {
            if resolutions.len() != usize::from(self.spatial_layers) {
                return Err(WriteError::Inconsistent);
            }
            for res in resolutions.iter() {
                w.write(u32::from(res.width), 16)?;
                w.write(u32::from(res.height), 16)?;
            }
        }
        if let Some(group) = &self.picture_group {
            write_picture_group(w, group)?;
        }
        Ok(())
    }
}

fn read_resolutions(
    r: &mut BitReader<'_>,
    spatial_layers: u8,
) -> Result<InlineVec<Resolution, VP9_MAX_SPATIAL_LAYERS>, BitsExhausted> {
    let mut resolutions = InlineVec::new();
    for _ in 0..spatial_layers {
        let res = Resolution {
            width: r.read(16)? as u16,
            height: r.read(16)? as u16,
        };
        resolutions
            .push(res)
            .expect("N_S is 3 bits, so at most 8 spatial layers");
    }
    Ok(resolutions)
}

/// `N_G`, then per picture `|TID|U| R |-|-|` and R 8-bit P_DIFFs.
fn read_picture_group(
    r: &mut BitReader<'_>,
) -> Result<InlineVec<PictureGroupEntry, VP9_MAX_PICTURE_GROUP>, Vp9Error> {
    let n_g = r.read(8)?;
    let mut group = InlineVec::new();
    for _ in 0..n_g {
        let tid = TemporalLayerId(r.read(3)? as u8);
        let switching_up_point = r.read_bit()?;
        let count = r.read(2)?;
        r.read(2)?; // reserved
        let mut reference_diffs = InlineVec::new();
        for _ in 0..count {
            reference_diffs
                .push(PDiff(r.read(8)? as u8))
                .expect("R is 2 bits, so at most 3 P_DIFFs");
        }
        let entry = PictureGroupEntry {
            tid,
            switching_up_point,
            reference_diffs,
        };
        group
            .push(entry)
            .map_err(|_| Vp9Error::PictureGroupTooLarge)?;
    }
    Ok(group)
}

fn write_picture_group(
    w: &mut BitWriter<'_>,
    group: &[PictureGroupEntry],
) -> Result<(), WriteError> {
    // At most VP9_MAX_PICTURE_GROUP entries, so N_G fits its byte.
    w.write(group.len() as u32, 8)?;
    for entry in group {
        w.write(field(entry.tid.0, 3)?, 3)?;
        w.write_bit(entry.switching_up_point)?;
        w.write(entry.reference_diffs.len() as u32, 2)?;
        w.write(0, 2)?;
        for diff in entry.reference_diffs.iter() {
            w.write(u32::from(diff.0), 8)?;
        }
    }
    Ok(())
}

impl From<BitsExhausted> for Vp9Error {
    fn from(_: BitsExhausted) -> Self {
        Self::Truncated
    }
}

impl fmt::Display for Vp9Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Self::Truncated => "payload descriptor truncated",
            Self::TooManyReferenceDiffs => "more than 3 reference diffs",
            Self::PictureGroupTooLarge => "picture group larger than 16",
        })
    }
}

impl std::error::Error for Vp9Error {}

#[cfg(test)]
mod tests {
    use super::*;

    fn round_trips(bytes: &[u8]) -> Vp9Descriptor {
        let d = Vp9Descriptor::parse(bytes).unwrap();
        assert_eq!(d.size(), bytes.len());
        let mut buf = [0xFF; VP9_MAX_DESCRIPTOR_SIZE];
        assert_eq!(d.write(&mut buf), Ok(bytes.len()));
        assert_eq!(&buf[..bytes.len()], bytes);
        d
    }

    /// RFC 9628 section 4.2, non-flexible mode: I P L B E; 15-bit picture id 5; TID 2, U, SID 1,
    /// D; TL0PICIDX 7.
    #[test]
    fn rfc9628_4_2_non_flexible_mode() {
        let d = round_trips(&[0xEC, 0x80, 0x05, 0b0101_0011, 0x07]);
        assert!(d.inter_picture_predicted && !d.flexible_mode);
        assert!(d.start_of_frame && d.end_of_frame && !d.not_upper_layer_reference);
        assert_eq!(d.picture_id, Some(PictureId::extended(5)));
        let layer = Vp9LayerIndices {
            tid: TemporalLayerId(2),
            switching_up_point: true,
            sid: SpatialLayerId(1),
            inter_layer_dependency: true,
        };
        assert_eq!(d.layer, Some(layer));
        assert_eq!(d.tl0_pic_idx, Some(Tl0PicIdx(7)));
        assert!(d.reference_diffs.is_empty());
        assert!(!d.is_keyframe());
    }

    /// RFC 9628 section 4.2, flexible mode: I P L F B Z; 7-bit picture id; TID 1; three P_DIFFs
    /// chained by N, and no TL0PICIDX.
    #[test]
    fn rfc9628_4_2_flexible_mode() {
        let d = round_trips(&[0xF9, 0x12, 0x20, 0x03, 0x05, 0x06]);
        assert!(d.flexible_mode && d.not_upper_layer_reference && !d.end_of_frame);
        assert_eq!(d.picture_id, Some(PictureId::short(0x12)));
        assert_eq!(d.tl0_pic_idx, None);
        assert_eq!(
            d.reference_diffs.as_slice(),
            &[PDiff(1), PDiff(2), PDiff(3)]
        );
        let s = d.summary();
        assert_eq!(s.temporal_layer, Some(TemporalLayerId(1)));
        assert_eq!(s.spatial_layer, Some(SpatialLayerId(0)));
        assert_eq!(
            Vp9Descriptor::parse(&[0xF9, 0x12, 0x20, 0x03, 0x05, 0x07]),
            Err(Vp9Error::TooManyReferenceDiffs)
        );
    }

    /// RFC 9628 section 4.2.1: two spatial layers with resolutions, a picture group of two.
    #[test]
    fn rfc9628_4_2_1_scalability_structure() {
        let bytes = [
            0x0A, 0x38, 0x01, 0x40, 0x00, 0xB4, 0x02, 0x80, 0x01, 0x68, 0x02, 0x04, 0x02, 0x30,
        ];
        let d = round_trips(&bytes);
        assert!(d.is_keyframe());
        let ss = d.scalability_structure.unwrap();
        assert_eq!(ss.spatial_layers, 2);
        let resolutions = ss.resolutions.unwrap();
        assert_eq!(
            resolutions[1],
            Resolution {
                width: 640,
                height: 360
            }
        );
        let group = ss.picture_group.unwrap();
        assert_eq!(group.len(), 2);
        assert_eq!(group[0].reference_diffs.as_slice(), &[PDiff(2)]);
        assert_eq!(group[1].tid, TemporalLayerId(1));
        assert!(group[1].switching_up_point && group[1].reference_diffs.is_empty());
        // Without Y and G, only the N_S byte.
        let bare = round_trips(&[0x02, 0xE0]);
        assert_eq!(bare.scalability_structure.unwrap().spatial_layers, 8);
    }

    #[test]
    fn picture_group_beyond_the_bound_is_refused() {
        let mut bytes = vec![0x02, 0x08, VP9_MAX_PICTURE_GROUP as u8 + 1];
        bytes.resize(bytes.len() + VP9_MAX_PICTURE_GROUP + 1, 0);
        assert_eq!(
            Vp9Descriptor::parse(&bytes),
            Err(Vp9Error::PictureGroupTooLarge)
        );
        bytes[2] -= 1;
        bytes.pop();
        assert_eq!(round_trips(&bytes).size(), bytes.len());
    }

    #[test]
    fn truncated_descriptors() {
        let cases: [&[u8]; 6] = [
            &[],
            &[0x80],
            &[0x20, 0x00],
            &[0x50, 0x03],
            &[0x02, 0x10, 0x01, 0x40, 0x00],
            &[0x02, 0x08, 0x01, 0x04],
        ];
        for bytes in cases {
            assert_eq!(
                Vp9Descriptor::parse(bytes),
                Err(Vp9Error::Truncated),
                "{bytes:02x?}"
            );
        }
    }

    #[test]
    fn keyframe_is_any_packet_of_a_base_layer_intra_frame() {
        // End of frame, no picture id, P = 0, no layer indices.
        assert!(Vp9Descriptor::parse(&[0x04]).unwrap().is_keyframe());
        // P = 0 but spatial layer 1 of the keyframe picture: predicted from layer 0.
        assert!(!Vp9Descriptor::parse(&[0x28, 0x02, 0x00])
            .unwrap()
            .is_keyframe());
    }

    #[test]
    fn writer_refuses_inconsistent_or_wide_fields() {
        let base = Vp9Descriptor::parse(&[0xEC, 0x80, 0x05, 0x53, 0x07]).unwrap();
        let mut buf = [0; VP9_MAX_DESCRIPTOR_SIZE];
        let no_tl0 = Vp9Descriptor {
            tl0_pic_idx: None,
            ..base
        };
        assert_eq!(no_tl0.write(&mut buf), Err(WriteError::Inconsistent));
        let flexible = Vp9Descriptor {
            flexible_mode: true,
            tl0_pic_idx: None,
            ..base
        };
        assert_eq!(flexible.write(&mut buf), Err(WriteError::Inconsistent));
        let mut wide_diff = flexible;
        wide_diff.reference_diffs = InlineVec::from_slice(&[PDiff(128)]).unwrap();
        assert_eq!(wide_diff.write(&mut buf), Err(WriteError::FieldOutOfRange));
        let mut wide_tid = base;
        wide_tid.layer = base.layer.map(|l| Vp9LayerIndices {
            tid: TemporalLayerId(8),
            ..l
        });
        assert_eq!(wide_tid.write(&mut buf), Err(WriteError::FieldOutOfRange));
        assert_eq!(base.write(&mut buf[..4]), Err(WriteError::BufferTooSmall));
    }

    #[test]
    fn writer_refuses_a_malformed_scalability_structure() {
        let mut d = Vp9Descriptor::parse(&[0x02, 0x00]).unwrap();
        let mut buf = [0; VP9_MAX_DESCRIPTOR_SIZE];
        let ss = d.scalability_structure.as_mut().unwrap();
        ss.spatial_layers = 0;
        assert_eq!(d.write(&mut buf), Err(WriteError::FieldOutOfRange));
        let ss = d.scalability_structure.as_mut().unwrap();
        ss.spatial_layers = 2;
        ss.resolutions = Some(InlineVec::from_slice(&[Resolution::default()]).unwrap());
        assert_eq!(d.write(&mut buf), Err(WriteError::Inconsistent));
    }

    #[test]
    fn error_messages() {
        assert_eq!(
            Vp9Error::Truncated.to_string(),
            "payload descriptor truncated"
        );
        assert_eq!(
            Vp9Error::TooManyReferenceDiffs.to_string(),
            "more than 3 reference diffs"
        );
        assert_eq!(
            Vp9Error::PictureGroupTooLarge.to_string(),
            "picture group larger than 16"
        );
    }
}
