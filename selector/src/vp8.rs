//! Temporal layer selection on the VP8 payload descriptor (RFC 7741 section 4.2), for streams
//! without a Dependency Descriptor. VP8 has no spatial layers (simulcast streams are chosen
//! elsewhere), so a subscriber's layer is a temporal layer index (TID).

use rtp_ext::codec::{PictureId, Vp8Descriptor, Vp8Patch};

use crate::history::{FrameHistory, HISTORY_FRAMES};
use crate::layer::{Layer, LayerLimits};
use crate::selection::{KeyframeRequests, Selection};
use crate::unwrap::Unwrapper;

mod munger;

pub use munger::Vp8Munger;

/// The highest TID the descriptor's two bits can carry.
const MAX_TID: u8 = 3;

/// One packet of a VP8 stream, parsed once by the receiver and shared by every subscriber.
#[derive(Debug, Clone, Copy)]
pub struct Vp8Packet<'a> {
    pub sequence_number: u16,
    pub timestamp: u32,
    pub marker: bool,
    pub descriptor: &'a Vp8Descriptor,
    /// From [`Vp8Descriptor::is_keyframe`]: only a frame's first packet tells.
    pub keyframe: bool,
}

/// The decision for one packet, and the descriptor fields to rewrite when it is forwarded.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Vp8Selection {
    pub selection: Selection,
    /// Empty when the packet is dropped.
    pub patch: Vp8Patch,
}

impl Vp8Selection {
    pub const DROP: Vp8Selection = Vp8Selection {
        selection: Selection::DROP,
        patch: Vp8Patch {
            picture_id: None,
            tl0_pic_idx: None,
            key_idx: None,
        },
    };
}

/// What the selector decided for one frame: kept for all its packets and retransmissions.
#[derive(Debug, Clone, Copy)]
struct FrameDecision {
    forwarded: bool,
    /// Highest TID whose frames all reached the subscriber, from its last sync point up to
    /// this frame: what a late frame right after this one may be forwarded at.
    layer: Option<u8>,
    patch: Vp8Patch,
    /// Finds the frame again in a stream without picture ids.
    timestamp: u32,
}

/// Selects the temporal layers one subscriber receives from a VP8 stream and numbers its
/// frames continuously. See the crate docs for the rules it keeps.
///
/// A frame is forwarded when its TID is at most the current layer's. The layer moves down at
/// once, and up at a key frame or one layer at a time at a layer sync frame (Y = 1) of the
/// next layer: such a frame references only base layer frames, and the frames of its layer
/// after it reference nothing before it. Skipping a layer at a sync frame would not do: the
/// skipped layer's frames may reference its earlier frames, which were dropped.
#[derive(Debug)]
pub struct Vp8Selector {
    limits: LayerLimits,
    /// Highest TID forwarded; `None` until a key frame.
    current: Option<u8>,
    /// Highest TID the stream has shown, which caps the layer reported.
    top_tid: u8,
    /// The newest frame decided.
    highest: Option<i64>,
    frames: FrameHistory<FrameDecision>,
    picture_ids: Unwrapper,
    /// Without picture ids: the newest frame's timestamp and number.
    last_timestamp: Option<(u32, i64)>,
    keyframes: KeyframeRequests,
    munger: Vp8Munger,
}

impl Default for Vp8Selector {
    fn default() -> Self {
        Self::new()
    }
}

impl Vp8Selector {
    pub fn new() -> Self {
        Self {
            limits: LayerLimits::default(),
            current: None,
            top_tid: 0,
            highest: None,
            frames: FrameHistory::default(),
            picture_ids: Unwrapper::default(),
            last_timestamp: None,
            keyframes: KeyframeRequests::default(),
            munger: Vp8Munger::new(),
        }
    }

    pub fn set_limits(&mut self, limits: LayerLimits) {
        self.limits = limits;
    }

    pub fn limits(&self) -> LayerLimits {
        self.limits
    }

    /// The layer forwarded now, if any: spatial 0, and no temporal layer above what the stream
    /// has shown.
    pub fn current(&self) -> Option<Layer> {
        self.current.map(|t| Layer::new(0, t.min(self.top_tid)))
    }

    pub fn keyframe_requests(&mut self) -> &mut KeyframeRequests {
        &mut self.keyframes
    }

    /// The packets that follow come from another stream (simulcast switch): start over at its
    /// next key frame, keeping the subscriber's numbering continuous.
    pub fn switch_source(&mut self) {
        self.current = None;
        self.top_tid = 0;
        self.highest = None;
        self.frames.clear();
        self.picture_ids = Unwrapper::default();
        self.last_timestamp = None;
        self.munger.switch_source();
    }

    /// Decides `packet`, and gives the descriptor patch to apply to it when forwarded.
    pub fn select(&mut self, packet: &Vp8Packet<'_>) -> Vp8Selection {
        let Some(frame) = self.frame_number(packet) else {
            return Vp8Selection::DROP;
        };
        let decision = match self.frames.get(frame) {
            Some(decision) => decision,
            None if self.too_old(frame) => return Vp8Selection::DROP,
            None => self.decide_frame(frame, packet),
        };
        if !decision.forwarded {
            return Vp8Selection::DROP;
        }
        Vp8Selection {
            // Without spatial layers, the source's marker already ends each frame.
            selection: Selection::forward(packet.marker),
            patch: decision.patch,
        }
    }

    /// The frame's extended picture id, or without one a number given by its timestamp.
    fn frame_number(&mut self, packet: &Vp8Packet<'_>) -> Option<i64> {
        match packet.descriptor.picture_id {
            Some(id) => Some(self.extend_picture_id(id)),
            None => self.frame_of_timestamp(packet.timestamp),
        }
    }

    fn extend_picture_id(&mut self, id: PictureId) -> i64 {
        // Scaled to 16 bits, a 7 or 15-bit id wraps where the unwrapper expects, and its
        // tolerance to reordering scales with it.
        let shift = 16 - id.modulus().trailing_zeros();
        self.picture_ids.unwrap(id.value() << shift) >> shift
    }

    /// Frames without picture ids are numbered in order of their timestamps. A late frame is
    /// found again only if it was decided: one never seen has no number to take.
    fn frame_of_timestamp(&mut self, timestamp: u32) -> Option<i64> {
        let Some((last, number)) = self.last_timestamp else {
            self.last_timestamp = Some((timestamp, 0));
            return Some(0);
        };
        if timestamp == last {
            return Some(number);
        }
        // Truncation intended: the 32-bit distance, read as signed.
        if timestamp.wrapping_sub(last) as i32 > 0 {
            self.last_timestamp = Some((timestamp, number + 1));
            return Some(number + 1);
        }
        (1..HISTORY_FRAMES as i64)
            .map(|back| number - back)
            .find(|&f| self.frames.get(f).is_some_and(|d| d.timestamp == timestamp))
    }

    /// A frame older than the history, which could not keep its decision.
    fn too_old(&self, frame: i64) -> bool {
        self.highest
            .is_some_and(|h| h - frame >= HISTORY_FRAMES as i64)
    }

    fn decide_frame(&mut self, frame: i64, packet: &Vp8Packet<'_>) -> FrameDecision {
        let descriptor = packet.descriptor;
        let tid = descriptor.temporal.map_or(0, |t| t.tid.0);
        self.top_tid = self.top_tid.max(tid.min(MAX_TID));
        // Only the newest frame may move the layer: frames after a late one are decided. A late
        // frame goes where it belongs: forwarded only if its layer reached the subscriber
        // without a break up to it (a late frame from before a switch up is not).
        let layer = if self.highest.is_none_or(|h| frame > h) {
            self.highest = Some(frame);
            self.choose_layer(packet, tid);
            self.current
        } else {
            // None orders below any layer: nothing forwarded before, nothing now.
            self.layer_before(frame).min(self.current)
        };
        let forwarded = layer.is_some_and(|l| tid <= l);
        let patch = if forwarded {
            self.munger.forward(frame, descriptor)
        } else {
            self.munger.drop_frame(frame, descriptor);
            Vp8Selection::DROP.patch
        };
        let decision = FrameDecision {
            forwarded,
            // A dropped frame breaks its layer and those above it.
            layer: match forwarded {
                true => layer,
                false => layer.min(tid.checked_sub(1)),
            },
            patch,
            timestamp: packet.timestamp,
        };
        self.frames.insert(frame, decision);
        decision
    }

    /// The layer in effect at the nearest decided frame before `frame`.
    fn layer_before(&self, frame: i64) -> Option<u8> {
        (1..HISTORY_FRAMES as i64)
            .find_map(|back| self.frames.get(frame - back))
            .and_then(|d| d.layer)
    }

    /// Moves the layer toward the target where this frame allows it, and asks for a key frame
    /// while nothing can be forwarded.
    fn choose_layer(&mut self, packet: &Vp8Packet<'_>, tid: u8) {
        let target = self.limits.effective().temporal.min(MAX_TID);
        let layer_sync = packet.descriptor.temporal.is_some_and(|t| t.layer_sync);
        match self.current {
            _ if packet.keyframe => {
                self.current = Some(target);
                self.keyframes.satisfied();
            }
            None => self.keyframes.request(),
            Some(c) if target < c => self.current = Some(target),
            Some(c) if target > c && layer_sync && tid.checked_sub(1) == Some(c) => {
                self.current = Some(tid);
            }
            Some(_) => {}
        }
    }
}
