//! Rewrites the running indexes of a VP8 stream (RFC 7741 section 4.2: picture id, TL0PICIDX,
//! KEYIDX) so that a subscriber sees them continuous across the frames it does not get and
//! across a change of source stream.

use rtp_ext::codec::{KeyIdx, Tl0PicIdx, Vp8Descriptor, Vp8Patch};

use crate::history::{FrameHistory, HISTORY_FRAMES};

/// KEYIDX is 5 bits.
const KEY_IDX_MASK: u8 = 0x1F;

/// What is subtracted from a source frame's indexes to give the subscriber's.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
struct Offsets {
    /// In units of the extended picture id.
    picture_id: i64,
    tl0_pic_idx: u8,
    key_idx: u8,
}

/// The indexes of the newest frame the subscriber got, which a new source continues from.
#[derive(Debug, Clone, Copy, Default)]
struct LastSent {
    picture_id: Option<i64>,
    tl0_pic_idx: Option<u8>,
    key_idx: Option<u8>,
}

/// Keeps one subscriber's picture ids, TL0PICIDX and KEYIDX continuous.
///
/// A receiver reads a gap in picture ids as a lost frame, and a gap in TL0PICIDX as a lost base
/// layer frame: either makes it wait for a frame that never comes. So each frame dropped as the
/// newest one shifts the numbering of every later frame down by one. A frame arriving late is
/// numbered with the offsets of the frame after it, so it fits where it belongs; dropping it
/// leaves the gap a loss would (the frames after it are already sent).
///
/// Frames are named by the caller's extended frame number: the extended picture id when the
/// stream has one, so that upstream losses stay visible to the subscriber as gaps.
#[derive(Debug, Clone, Default)]
pub struct Vp8Munger {
    /// Offsets for frames newer than any decided.
    offsets: Offsets,
    /// Offsets each decided frame was numbered with (before its own drop).
    frames: FrameHistory<Offsets>,
    highest: Option<i64>,
    last_sent: LastSent,
    /// Nothing of the current source was forwarded yet: the next forwarded frame continues
    /// the subscriber's numbering from `last_sent`.
    rebase: bool,
}

impl Vp8Munger {
    pub fn new() -> Self {
        Self {
            rebase: true,
            ..Self::default()
        }
    }

    /// The next frames come from another stream (simulcast switch), with indexes of their own:
    /// the first one forwarded continues the numbering the subscriber has seen.
    pub fn switch_source(&mut self) {
        self.frames.clear();
        self.highest = None;
        self.rebase = true;
    }

    /// The patch for a frame the selector forwards, decided at its first packet. Call it once
    /// per frame and reuse the patch for the frame's other packets and retransmissions.
    pub fn forward(&mut self, frame: i64, descriptor: &Vp8Descriptor) -> Vp8Patch {
        if self.rebase {
            self.rebase_at(frame, descriptor);
        }
        let offsets = self.record(frame);
        let patch = Vp8Patch {
            picture_id: descriptor
                .picture_id
                .map(|_| (frame - offsets.picture_id).rem_euclid(1 << 16) as u16),
            tl0_pic_idx: descriptor
                .tl0_pic_idx
                .map(|t| Tl0PicIdx(t.0.wrapping_sub(offsets.tl0_pic_idx))),
            key_idx: descriptor
                .key_idx
                .map(|k| KeyIdx(k.0.wrapping_sub(offsets.key_idx) & KEY_IDX_MASK)),
        };
        if self.highest == Some(frame) {
            self.last_sent = LastSent {
                picture_id: descriptor.picture_id.map(|_| frame - offsets.picture_id),
                tl0_pic_idx: patch.tl0_pic_idx.map(|t| t.0),
                key_idx: patch.key_idx.map(|k| k.0),
            };
        }
        patch
    }

    /// A frame the selector drops, decided at its first packet: the frames after it close up.
    pub fn drop_frame(&mut self, frame: i64, descriptor: &Vp8Descriptor) {
        if self.rebase {
            // Numbering starts at the first forwarded frame; nothing to close up before it.
            return;
        }
        let newest = self.highest.is_none_or(|h| frame > h);
        self.record(frame);
        if newest {
            self.offsets.picture_id += 1;
            if is_tl0(descriptor) {
                self.offsets.tl0_pic_idx = self.offsets.tl0_pic_idx.wrapping_add(1);
            }
        }
    }

    /// Remembers the offsets `frame` is numbered with and returns them.
    fn record(&mut self, frame: i64) -> Offsets {
        let offsets = self.offsets_at(frame);
        self.frames.insert(frame, offsets);
        if self.highest.is_none_or(|h| frame > h) {
            self.highest = Some(frame);
        }
        offsets
    }

    /// The offsets of the nearest decided frame after `frame`: nothing between them was
    /// dropped, so `frame` shares its numbering.
    fn offsets_at(&self, frame: i64) -> Offsets {
        let Some(highest) = self.highest.filter(|&h| frame < h) else {
            return self.offsets;
        };
        (frame + 1..=highest)
            .take(HISTORY_FRAMES)
            .find_map(|f| self.frames.get(f))
            .unwrap_or(self.offsets)
    }

    /// Sets the offsets so that `frame`, the first forwarded of its source, follows the last
    /// frame sent: next picture id, next TL0PICIDX if it is a base layer frame, next KEYIDX
    /// (a new source starts at a key frame). Without a previous frame, indexes pass unchanged.
    fn rebase_at(&mut self, frame: i64, descriptor: &Vp8Descriptor) {
        let last = self.last_sent;
        let next_tl0 = u8::from(is_tl0(descriptor));
        self.offsets = Offsets {
            picture_id: last.picture_id.map_or(0, |p| frame - (p + 1)),
            tl0_pic_idx: match (descriptor.tl0_pic_idx, last.tl0_pic_idx) {
                (Some(t), Some(l)) => t.0.wrapping_sub(l.wrapping_add(next_tl0)),
                _ => 0,
            },
            key_idx: match (descriptor.key_idx, last.key_idx) {
                (Some(k), Some(l)) => k.0.wrapping_sub(l.wrapping_add(1)),
                _ => 0,
            },
        };
        self.rebase = false;
    }
}

/// A base layer frame: TID 0, or no temporal layers at all.
fn is_tl0(descriptor: &Vp8Descriptor) -> bool {
    descriptor.temporal.is_none_or(|t| t.tid.0 == 0)
}

#[cfg(test)]
mod tests {
    use rtp_ext::codec::{PictureId, TemporalLayerId, Vp8Temporal};

    use super::*;

    fn frame(id: u16, tid: u8, tl0: u8) -> Vp8Descriptor {
        Vp8Descriptor {
            picture_id: Some(PictureId::short(id)),
            tl0_pic_idx: Some(Tl0PicIdx(tl0)),
            temporal: Some(Vp8Temporal {
                tid: TemporalLayerId(tid),
                layer_sync: false,
            }),
            ..Vp8Descriptor::default()
        }
    }

    #[test]
    fn dropped_base_frames_close_up_and_late_frames_fit_between() {
        let mut m = Vp8Munger::new();
        let p = m.forward(126, &frame(126, 0, 9));
        assert_eq!(
            (p.picture_id, p.tl0_pic_idx),
            (Some(126), Some(Tl0PicIdx(9)))
        );
        m.drop_frame(128, &frame(0, 0, 10));
        // Frame 127 arrives late, after 128 was dropped: numbered before the drop.
        assert_eq!(m.forward(127, &frame(127, 1, 9)).picture_id, Some(127));
        let p = m.forward(129, &frame(1, 0, 11));
        assert_eq!(
            (p.picture_id, p.tl0_pic_idx),
            (Some(128), Some(Tl0PicIdx(10)))
        );
    }
}
