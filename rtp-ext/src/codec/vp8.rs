//! The VP8 payload descriptor (RFC 7741 section 4.2), the key frame flag of the VP8 payload
//! header (section 4.3), and an in-place patch of the fields an SFU rewrites per subscriber.

use std::fmt;

use super::picture_id::PictureId;
use super::{field, PayloadSummary, TemporalLayerId, Tl0PicIdx, WriteError};
use crate::bits::{BitReader, BitWriter, BitsExhausted};

/// PID: the index of the VP8 partition the packet's first byte belongs to, 0 to 7.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq, Hash)]
pub struct PartitionId(pub u8);

/// KEYIDX: a running index of frames that update the temporal key frame, 0 to 31.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq, Hash)]
pub struct KeyIdx(pub u8);

/// The T-bit fields: temporal layer index (TID, 0 to 3) and layer sync (Y).
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Vp8Temporal {
    pub tid: TemporalLayerId,
    /// Y: the frame depends only on base layer frames, so a receiver may switch up here.
    pub layer_sync: bool,
}

/// A VP8 payload descriptor. Reserved bits are not kept; the writer zeroes them.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Vp8Descriptor {
    /// X: the extension byte is present. The writer also sets it whenever an optional field is
    /// present; keeping it lets an extension byte that announces nothing survive a round trip.
    pub extended: bool,
    /// N: no other frame references this one, so it can be dropped.
    pub non_reference: bool,
    /// S: the packet starts a VP8 partition.
    pub start_of_partition: bool,
    pub partition_id: PartitionId,
    /// I, with M choosing 7 or 15 bits.
    pub picture_id: Option<PictureId>,
    /// L.
    pub tl0_pic_idx: Option<Tl0PicIdx>,
    /// T.
    pub temporal: Option<Vp8Temporal>,
    /// K.
    pub key_idx: Option<KeyIdx>,
}

/// Why a payload does not hold a VP8 descriptor.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Vp8Error {
    /// The descriptor ends before a field its flags announce.
    Truncated,
    /// A packet that starts a frame has no VP8 payload header after the descriptor.
    MissingPayloadHeader,
}

/// New values for the fields an SFU rewrites when it forwards a VP8 stream, computed once per
/// subscriber and applied to each forwarded copy without parsing it again. `None` leaves a
/// field as it is.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Vp8Patch {
    /// Reduced modulo the width the sender chose, which the packet keeps.
    pub picture_id: Option<u16>,
    pub tl0_pic_idx: Option<Tl0PicIdx>,
    pub key_idx: Option<KeyIdx>,
}

impl Vp8Descriptor {
    /// The largest descriptor: both bytes of flags, a 15-bit picture id, TL0PICIDX, TID/KEYIDX.
    pub const MAX_SIZE: usize = 6;

    /// Parses the descriptor at the start of `payload`; the VP8 payload follows it at
    /// [`Vp8Descriptor::size`].
    pub fn parse(payload: &[u8]) -> Result<Self, Vp8Error> {
        let mut r = BitReader::new(payload);
        let extended = r.read_bit()?;
        r.read(1)?; // R
        let non_reference = r.read_bit()?;
        let start_of_partition = r.read_bit()?;
        r.read(1)?; // R
        let partition_id = PartitionId(r.read(3)? as u8);
        let mut d = Self {
            extended,
            non_reference,
            start_of_partition,
            partition_id,
            ..Self::default()
        };
        if extended {
            d.read_extension(&mut r)?;
        }
        Ok(d)
    }

    fn read_extension(&mut self, r: &mut BitReader<'_>) -> Result<(), BitsExhausted> {
        let [i, l, t, k] = [r.read_bit()?, r.read_bit()?, r.read_bit()?, r.read_bit()?];
        r.read(4)?; // RSV
        if i {
            self.picture_id = Some(PictureId::read(r)?);
        }
        if l {
            self.tl0_pic_idx = Some(Tl0PicIdx(r.read(8)? as u8));
        }
        if t || k {
            // T and K share one byte; the half whose flag is clear is ignored.
            let tid = TemporalLayerId(r.read(2)? as u8);
            let layer_sync = r.read_bit()?;
            let key_idx = KeyIdx(r.read(5)? as u8);
            self.temporal = t.then_some(Vp8Temporal { tid, layer_sync });
            self.key_idx = k.then_some(key_idx);
        }
        Ok(())
    }

    /// Whether the extension byte goes on the wire.
    fn has_extension(&self) -> bool {
        self.extended
            || self.picture_id.is_some()
            || self.tl0_pic_idx.is_some()
            || self.temporal.is_some()
            || self.key_idx.is_some()
    }

    /// Bytes on the wire.
    pub fn size(&self) -> usize {
        1 + usize::from(self.has_extension())
            + self.picture_id.map_or(0, PictureId::size)
            + usize::from(self.tl0_pic_idx.is_some())
            + usize::from(self.temporal.is_some() || self.key_idx.is_some())
    }

    /// S = 1 and PID = 0: the packet starts a frame and so carries the payload header.
    pub fn is_start_of_frame(&self) -> bool {
        self.start_of_partition && self.partition_id.0 == 0
    }

    /// Whether `payload`, which this descriptor was parsed from, starts a key frame: the P bit
    /// (inverse key frame flag) of the payload header is 0. Only a frame's first packet tells,
    /// so every other packet gives `false`.
    pub fn is_keyframe(&self, payload: &[u8]) -> Result<bool, Vp8Error> {
        if !self.is_start_of_frame() {
            return Ok(false);
        }
        let header = payload
            .get(self.size())
            .ok_or(Vp8Error::MissingPayloadHeader)?;
        Ok(header & 0x01 == 0)
    }

    pub(crate) fn summary(&self, keyframe: bool) -> PayloadSummary {
        PayloadSummary {
            keyframe,
            start_of_frame: Some(self.is_start_of_frame()),
            // The descriptor has no end bit; the RTP marker bit ends a frame.
            end_of_frame: None,
            picture_id: self.picture_id,
            spatial_layer: None,
            temporal_layer: self.temporal.map(|t| t.tid),
        }
    }

    /// Writes the descriptor to the start of `buf` and returns its length.
    pub fn write(&self, buf: &mut [u8]) -> Result<usize, WriteError> {
        let mut w = BitWriter::new(buf);
        let extended = self.has_extension();
        w.write_bit(extended)?;
        w.write(0, 1)?;
        w.write_bit(self.non_reference)?;
        w.write_bit(self.start_of_partition)?;
        w.write(0, 1)?;
        w.write(field(self.partition_id.0, 3)?, 3)?;
        if extended {
            self.write_extension(&mut w)?;
        }
        Ok(w.finish()?)
    }

    fn write_extension(&self, w: &mut BitWriter<'_>) -> Result<(), WriteError> {
        w.write_bit(self.picture_id.is_some())?;
        w.write_bit(self.tl0_pic_idx.is_some())?;
        w.write_bit(self.temporal.is_some())?;
        w.write_bit(self.key_idx.is_some())?;
        w.write(0, 4)?;
        if let Some(id) = self.picture_id {
            id.write(w)?;
        }
        if let Some(tl0) = self.tl0_pic_idx {
            w.write(u32::from(tl0.0), 8)?;
        }
        if self.temporal.is_some() || self.key_idx.is_some() {
            w.write(self.tid_y_bits()?, 3)?;
            w.write(field(self.key_idx.unwrap_or_default().0, 5)?, 5)?;
        }
        Ok(())
    }

    /// TID and Y as the top three bits of their byte, zero when T is clear.
    fn tid_y_bits(&self) -> Result<u32, WriteError> {
        let t = self.temporal.unwrap_or_default();
        Ok(field(t.tid.0, 2)? << 1 | u32::from(t.layer_sync))
    }
}

impl Vp8Patch {
    /// Rewrites the patched fields in `payload`, which `descriptor` was parsed from, keeping
    /// every length: a 7-bit picture id stays 7 bits and wraps. Nothing is written unless the
    /// whole patch applies.
    pub fn apply(&self, descriptor: &Vp8Descriptor, payload: &mut [u8]) -> Result<(), WriteError> {
        self.check(descriptor)?;
        let head = payload
            .get_mut(..descriptor.size())
            .ok_or(WriteError::BufferTooSmall)?;
        // Optional fields follow the two flag bytes in a fixed order. Indexing below stays
        // within `head`: `size()` counts every field the descriptor has, and `check` refused
        // patches of fields it lacks.
        let mut offset = 2;
        if let Some(id) = descriptor.picture_id {
            if let Some(value) = self.picture_id {
                let mut w = BitWriter::new(&mut head[offset..offset + id.size()]);
                id.with_value(value).write(&mut w)?;
            }
            offset += id.size();
        }
        if descriptor.tl0_pic_idx.is_some() {
            if let Some(tl0) = self.tl0_pic_idx {
                head[offset] = tl0.0;
            }
            offset += 1;
        }
        if let Some(key_idx) = self.key_idx {
            // KEYIDX is the low five bits; TID and Y above it stay.
            head[offset] = (head[offset] & 0xE0) | key_idx.0;
        }
        Ok(())
    }

    /// Refuses a patch for a field the descriptor lacks, or a KEYIDX past 5 bits.
    fn check(&self, d: &Vp8Descriptor) -> Result<(), WriteError> {
        let lacks = (self.picture_id.is_some() && d.picture_id.is_none())
            || (self.tl0_pic_idx.is_some() && d.tl0_pic_idx.is_none())
            || (self.key_idx.is_some() && d.key_idx.is_none());
        if lacks {
            return Err(WriteError::Inconsistent);
        }
        if let Some(key_idx) = self.key_idx {
            field(key_idx.0, 5)?;
        }
        Ok(())
    }
}

impl From<BitsExhausted> for Vp8Error {
    fn from(_: BitsExhausted) -> Self {
        Self::Truncated
    }
}

impl fmt::Display for Vp8Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Self::Truncated => "payload descriptor truncated",
            Self::MissingPayloadHeader => "no payload header after a frame's first descriptor",
        })
    }
}

impl std::error::Error for Vp8Error {}

#[cfg(test)]
mod tests {
    use super::*;

    /// Payload header first byte with P = 0 (key frame): size0 = 0, H = 1, VER = 0.
    const KEY_HEADER: u8 = 0x10;
    /// The same with P = 1 (interframe).
    const INTER_HEADER: u8 = 0x11;

    /// RFC 7741 section 4.2, every optional field present: X=1 S=1 PID=0; I L T K; M=1 picture
    /// id 0x0123; TL0PICIDX 0x42; TID 2, Y 1, KEYIDX 21.
    const FULL: [u8; 6] = [0x90, 0xF0, 0x81, 0x23, 0x42, 0b1011_0101];

    #[test]
    fn rfc7741_4_2_minimal_descriptor() {
        let d = Vp8Descriptor::parse(&[0x10, KEY_HEADER]).unwrap();
        assert!(d.start_of_partition && !d.extended && !d.non_reference);
        assert_eq!(d.size(), 1);
        assert_eq!(d.picture_id, None);
        assert_eq!(d.is_keyframe(&[0x10, KEY_HEADER]), Ok(true));
        assert_eq!(d.is_keyframe(&[0x10, INTER_HEADER]), Ok(false));
    }

    #[test]
    fn rfc7741_4_2_all_fields() {
        let d = Vp8Descriptor::parse(&FULL).unwrap();
        assert_eq!(d.picture_id, Some(PictureId::extended(0x0123)));
        assert_eq!(d.tl0_pic_idx, Some(Tl0PicIdx(0x42)));
        assert_eq!(
            d.temporal,
            Some(Vp8Temporal {
                tid: TemporalLayerId(2),
                layer_sync: true
            })
        );
        assert_eq!(d.key_idx, Some(KeyIdx(21)));
        assert_eq!(d.size(), 6);
        let mut buf = [0xFF; Vp8Descriptor::MAX_SIZE];
        assert_eq!(d.write(&mut buf), Ok(6));
        assert_eq!(buf, FULL);
    }

    /// N=1, PID=3, short picture id 0x7F, and a T/K byte whose unannounced half is ignored.
    #[test]
    fn rfc7741_4_2_t_and_k_share_a_byte() {
        let t_only = Vp8Descriptor::parse(&[0xA3, 0xA0, 0x7F, 0b0101_1111]).unwrap();
        assert!(t_only.non_reference && !t_only.start_of_partition);
        assert_eq!(t_only.partition_id, PartitionId(3));
        assert_eq!(t_only.picture_id, Some(PictureId::short(0x7F)));
        assert_eq!(t_only.temporal.map(|t| t.tid), Some(TemporalLayerId(1)));
        assert_eq!(t_only.key_idx, None);
        let k_only = Vp8Descriptor::parse(&[0x80, 0x10, 0b1110_0111]).unwrap();
        assert_eq!(k_only.temporal, None);
        assert_eq!(k_only.key_idx, Some(KeyIdx(7)));
        let mut buf = [0; 3];
        assert_eq!(k_only.write(&mut buf), Ok(3));
        assert_eq!(buf, [0x80, 0x10, 0b0000_0111]);
    }

    #[test]
    fn bare_extension_byte_keeps_its_length() {
        let d = Vp8Descriptor::parse(&[0x80, 0x00, 0x42]).unwrap();
        assert!(d.extended);
        assert_eq!(d.size(), 2);
        let mut buf = [0; 2];
        assert_eq!(d.write(&mut buf), Ok(2));
        assert_eq!(Vp8Descriptor::parse(&buf), Ok(d));
    }

    #[test]
    fn truncated_descriptors() {
        for bytes in [
            &[][..],
            &[0x80],
            &[0x80, 0x80],
            &[0x80, 0x80, 0x80],
            &[0x80, 0x40],
        ] {
            assert_eq!(
                Vp8Descriptor::parse(bytes),
                Err(Vp8Error::Truncated),
                "{bytes:02x?}"
            );
        }
        assert_eq!(
            Vp8Error::Truncated.to_string(),
            "payload descriptor truncated"
        );
    }

    #[test]
    fn keyframe_needs_the_payload_header_of_a_frame_start() {
        let start = Vp8Descriptor::parse(&[0x10]).unwrap();
        assert_eq!(
            start.is_keyframe(&[0x10]),
            Err(Vp8Error::MissingPayloadHeader)
        );
        // Later partitions and continuations carry no payload header, and are never keyframes.
        let later = [0x11, KEY_HEADER];
        assert_eq!(
            Vp8Descriptor::parse(&later).unwrap().is_keyframe(&later),
            Ok(false)
        );
        let cont = [0x00, KEY_HEADER];
        assert_eq!(
            Vp8Descriptor::parse(&cont).unwrap().is_keyframe(&cont),
            Ok(false)
        );
    }

    #[test]
    fn writer_refuses_wide_fields_and_small_buffers() {
        let mut d = Vp8Descriptor::parse(&FULL).unwrap();
        assert_eq!(d.write(&mut [0; 5]), Err(WriteError::BufferTooSmall));
        d.key_idx = Some(KeyIdx(32));
        assert_eq!(d.write(&mut [0; 6]), Err(WriteError::FieldOutOfRange));
        d.key_idx = None;
        d.temporal = Some(Vp8Temporal {
            tid: TemporalLayerId(4),
            layer_sync: false,
        });
        assert_eq!(d.write(&mut [0; 6]), Err(WriteError::FieldOutOfRange));
        let pid = Vp8Descriptor {
            partition_id: PartitionId(8),
            ..Vp8Descriptor::default()
        };
        assert_eq!(pid.write(&mut [0; 1]), Err(WriteError::FieldOutOfRange));
    }

    fn patched(bytes: &[u8], patch: Vp8Patch) -> (Vec<u8>, Vp8Descriptor) {
        let d = Vp8Descriptor::parse(bytes).unwrap();
        let mut copy = bytes.to_vec();
        patch.apply(&d, &mut copy).unwrap();
        let back = Vp8Descriptor::parse(&copy).unwrap();
        assert_eq!(back.size(), d.size(), "patch changed the length");
        (copy, back)
    }

    #[test]
    fn patch_rewrites_fields_in_place() {
        let mut packet = FULL.to_vec();
        packet.extend_from_slice(&[KEY_HEADER, 0xAB]);
        let patch = Vp8Patch {
            picture_id: Some(0x7FFE),
            tl0_pic_idx: Some(Tl0PicIdx(9)),
            key_idx: Some(KeyIdx(30)),
        };
        let (bytes, back) = patched(&packet, patch);
        assert_eq!(back.picture_id, Some(PictureId::extended(0x7FFE)));
        assert_eq!(back.tl0_pic_idx, Some(Tl0PicIdx(9)));
        assert_eq!(back.key_idx, Some(KeyIdx(30)));
        // TID and Y share KEYIDX's byte and stay; the payload after the descriptor too.
        assert_eq!(back.temporal, Vp8Descriptor::parse(&FULL).unwrap().temporal);
        assert_eq!(&bytes[6..], &[KEY_HEADER, 0xAB]);
    }

    #[test]
    fn patch_wraps_picture_ids_within_their_width() {
        let short = [0x90, 0x80, 0x05, KEY_HEADER];
        let (bytes, back) = patched(
            &short,
            Vp8Patch {
                picture_id: Some(130),
                ..Default::default()
            },
        );
        assert_eq!(back.picture_id, Some(PictureId::short(2)));
        assert_eq!(bytes, [0x90, 0x80, 0x02, KEY_HEADER]);
        let long = [0x90, 0x80, 0x80, 0x05, KEY_HEADER];
        let (bytes, back) = patched(
            &long,
            Vp8Patch {
                picture_id: Some(0x8001),
                ..Default::default()
            },
        );
        assert_eq!(back.picture_id, Some(PictureId::extended(1)));
        assert_eq!(bytes, [0x90, 0x80, 0x80, 0x01, KEY_HEADER]);
    }

    #[test]
    fn patch_refusals_write_nothing() {
        let bytes = [0x90, 0x80, 0x05];
        let d = Vp8Descriptor::parse(&bytes).unwrap();
        let mut copy = bytes;
        let absent = Vp8Patch {
            tl0_pic_idx: Some(Tl0PicIdx(1)),
            picture_id: Some(9),
            ..Default::default()
        };
        assert_eq!(absent.apply(&d, &mut copy), Err(WriteError::Inconsistent));
        assert_eq!(copy, bytes);
        let full = Vp8Descriptor::parse(&FULL).unwrap();
        let mut copy = FULL;
        let wide = Vp8Patch {
            picture_id: Some(1),
            key_idx: Some(KeyIdx(32)),
            ..Default::default()
        };
        assert_eq!(
            wide.apply(&full, &mut copy),
            Err(WriteError::FieldOutOfRange)
        );
        assert_eq!(copy, FULL);
        let short = Vp8Patch {
            picture_id: Some(1),
            ..Default::default()
        };
        assert_eq!(
            short.apply(&full, &mut copy[..5]),
            Err(WriteError::BufferTooSmall)
        );
        assert_eq!(copy, FULL);
    }

    #[test]
    fn summary_reports_start_picture_id_and_temporal_layer() {
        let mut packet = FULL.to_vec();
        packet.push(KEY_HEADER);
        let d = Vp8Descriptor::parse(&packet).unwrap();
        let s = d.summary(d.is_keyframe(&packet).unwrap());
        assert!(s.keyframe);
        assert_eq!(s.start_of_frame, Some(true));
        assert_eq!(s.end_of_frame, None);
        assert_eq!(s.picture_id, Some(PictureId::extended(0x0123)));
        assert_eq!(s.temporal_layer, Some(TemporalLayerId(2)));
    }
}
