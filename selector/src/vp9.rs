//! Layer selection driven by the VP9 payload descriptor (RFC 9628), for VP9 streams that carry
//! no Dependency Descriptor. The crate's rules, expressed with VP9's own signals:
//! - A frame is one spatial layer of a picture, keyed by (extended picture id, SID), and is
//!   decided at its first packet seen.
//! - A keyframe (P=0 in the base layer) restarts every layer: the selector moves to its target.
//! - A spatial layer is started at a frame that is not inter-picture predicted (P=0) whose
//!   inter-layer reference (D) was forwarded; in practice only keyframes, so moving up asks for
//!   one. Moving down is at once when the lower layer was forwarded all along (full SVC, where
//!   D=1 makes upper layers need it); in K-SVC the upper layers stop needing the lower ones
//!   after the keyframe (D=0), so they are not forwarded and moving down asks for a keyframe.
//! - A temporal layer is started at a switching up point (U=1) of that layer, one layer at a
//!   time, since such a frame references only lower temporal layers; moving down is at once.
//! - Switches happen at picture boundaries; the marker goes on the last packet of the highest
//!   forwarded spatial layer of each picture.

use rtp_ext::codec::{Vp9Descriptor, VP9_MAX_SPATIAL_LAYERS};

use crate::history::{FrameHistory, HISTORY_FRAMES};
use crate::layer::{Layer, LayerLimits};
use crate::selection::{KeyframeRequests, Selection};
use crate::unwrap::Unwrapper;

/// Frames of one picture take this many history slots: one per possible SID.
const SLOTS_PER_PICTURE: i64 = VP9_MAX_SPATIAL_LAYERS as i64;
/// Pictures whose frames' decisions are remembered. An older frame never decided is dropped:
/// it cannot be told from one decided and forgotten, and deciding it again could split it.
const PICTURES_REMEMBERED: i64 = HISTORY_FRAMES as i64 / SLOTS_PER_PICTURE;

/// Pictures a late frame's decodability is judged over: its layer's frames this far back, to a
/// P=0 frame it can decode from.
const LATE_FRAME_WINDOW: i64 = 16;

/// One packet of a VP9 stream, parsed once by the receiver and shared by every subscriber.
#[derive(Debug, Clone, Copy)]
pub struct Vp9Packet<'a> {
    pub sequence_number: u16,
    pub timestamp: u32,
    pub marker: bool,
    pub descriptor: &'a Vp9Descriptor,
}

/// What the selector decided for one frame: kept for all its packets and retransmissions.
#[derive(Debug, Clone, Copy)]
struct FrameDecision {
    forwarded: bool,
    /// Spatial layer forwarded when the frame was decided: its last packet carries the marker.
    top_spatial: u8,
    /// The frame's TID and whether it had P=0, for judging late frames of its layer.
    tid: u8,
    intra: bool,
}

impl FrameDecision {
    fn dropped(frame: Frame) -> Self {
        Self {
            forwarded: false,
            top_spatial: 0,
            tid: frame.tid,
            intra: !frame.inter_picture_predicted,
        }
    }
}

/// The fields of a packet's descriptor that describe its frame.
#[derive(Debug, Clone, Copy)]
struct Frame {
    picture: i64,
    sid: u8,
    tid: u8,
    /// P.
    inter_picture_predicted: bool,
    /// D.
    inter_layer_dependency: bool,
    /// U.
    switching_up_point: bool,
}

impl Frame {
    fn key(&self) -> i64 {
        self.picture * SLOTS_PER_PICTURE + i64::from(self.sid)
    }

    /// A keyframe: the base layer not predicted from earlier pictures, which VP9 encoders
    /// send only after refreshing every reference.
    fn is_keyframe(&self) -> bool {
        self.sid == 0 && !self.inter_picture_predicted
    }
}

/// Selects the layer one subscriber receives from a VP9 stream by its payload descriptors.
/// See the module docs for the rules it keeps.
#[derive(Debug)]
pub struct Vp9Selector {
    limits: LayerLimits,
    /// The layer forwarded now; none until a keyframe.
    current: Option<Layer>,
    /// Spatial layers the publisher sends: its last SS, raised by higher SIDs seen since.
    publisher_spatial: u8,
    /// Temporal layers the publisher sends: its last SS's picture group, raised by higher TIDs
    /// seen since.
    publisher_temporal: u8,
    /// The picture of the last SS: frames of older pictures do not describe the stream now.
    structure_picture: i64,
    /// Per spatial layer, D of its last frame: whether it needs the layer below.
    inter_layer: [bool; VP9_MAX_SPATIAL_LAYERS],
    /// Per spatial layer, the picture of its newest forwarded frame with P=0 (which decodes on
    /// its own) and of its newest frame dropped at a forwarded temporal layer. The layer's next
    /// frames decode while the first is the newer: comparing pictures, not keeping a flag,
    /// keeps a late P=0 frame from hiding a newer drop.
    intra_at: [i64; VP9_MAX_SPATIAL_LAYERS],
    dropped_at: [i64; VP9_MAX_SPATIAL_LAYERS],
    /// The newest picture a frame was decided for.
    last_picture: Option<i64>,
    /// Pictures older than this (the last switch up) that were never decided are dropped: a
    /// late frame from before a switch references frames the subscriber never got.
    switch_picture: i64,
    /// When the last switch was a temporal one up, the temporal layer forwarded before it: late
    /// frames up to it were due to the subscriber, and later frames may reference them.
    temporal_before_switch: Option<u8>,
    frames: FrameHistory<FrameDecision>,
    picture_ids: Unwrapper,
    keyframes: KeyframeRequests,
}

impl Default for Vp9Selector {
    fn default() -> Self {
        Self::new()
    }
}

impl Vp9Selector {
    pub fn new() -> Self {
        Self {
            limits: LayerLimits::default(),
            current: None,
            publisher_spatial: 1,
            publisher_temporal: 1,
            structure_picture: i64::MIN,
            // Until an upper layer says otherwise, assume it needs the one below (full SVC):
            // forwarding a frame too many costs bandwidth, one too few costs the layer.
            inter_layer: [true; VP9_MAX_SPATIAL_LAYERS],
            intra_at: [i64::MIN; VP9_MAX_SPATIAL_LAYERS],
            dropped_at: [i64::MIN; VP9_MAX_SPATIAL_LAYERS],
            last_picture: None,
            switch_picture: i64::MIN,
            temporal_before_switch: None,
            frames: FrameHistory::default(),
            picture_ids: Unwrapper::default(),
            keyframes: KeyframeRequests::default(),
        }
    }

    pub fn set_limits(&mut self, limits: LayerLimits) {
        self.limits = limits;
    }

    pub fn limits(&self) -> LayerLimits {
        self.limits
    }

    /// The layer forwarded now, if any.
    pub fn current(&self) -> Option<Layer> {
        self.current
    }

    pub fn keyframe_requests(&mut self) -> &mut KeyframeRequests {
        &mut self.keyframes
    }

    /// Forward or drop `packet`, and the marker to send it with.
    pub fn select(&mut self, packet: &Vp9Packet<'_>) -> Selection {
        let descriptor = packet.descriptor;
        let Some(frame) = self.frame(descriptor) else {
            return Selection::DROP;
        };
        let decision = match self.frames.get(frame.key()) {
            Some(decision) => decision,
            None if self.is_stale(frame) => {
                // Remembered, so the frame's later packets get the same answer even when what
                // made it stale (the switch point) has moved on.
                self.frames
                    .insert(frame.key(), FrameDecision::dropped(frame));
                return Selection::DROP;
            }
            None => self.decide_frame(frame, descriptor),
        };
        if !decision.forwarded {
            return Selection::DROP;
        }
        let marker =
            descriptor.end_of_frame && (packet.marker || frame.sid >= decision.top_spatial);
        Selection::forward(marker)
    }

    /// The packet's frame. Without a picture id, frames cannot be told apart, so the packet is
    /// dropped; without layer indices the stream has one layer.
    fn frame(&mut self, descriptor: &Vp9Descriptor) -> Option<Frame> {
        let picture_id = descriptor.picture_id?;
        let layer = descriptor.layer.unwrap_or_default();
        let sid = layer.sid.0;
        if usize::from(sid) >= VP9_MAX_SPATIAL_LAYERS {
            return None;
        }
        // Shifting the 7- or 15-bit id to the top of 16 bits lets the 16-bit unwrapper handle
        // its wrap; every extended value is then a multiple of the shift, so none is lost.
        let shift = 16 - picture_id.modulus().trailing_zeros();
        let picture = self.picture_ids.unwrap(picture_id.value() << shift) >> shift;
        Some(Frame {
            picture,
            sid,
            tid: layer.tid.0,
            inter_picture_predicted: descriptor.inter_picture_predicted,
            inter_layer_dependency: layer.inter_layer_dependency,
            switching_up_point: layer.switching_up_point,
        })
    }

    fn is_stale(&self, frame: Frame) -> bool {
        let picture = frame.picture;
        let before_switch = picture < self.switch_picture
            && self.temporal_before_switch.is_none_or(|t| frame.tid > t);
        before_switch
            || self
                .last_picture
                .is_some_and(|newest| picture <= newest - PICTURES_REMEMBERED)
    }

    fn decide_frame(&mut self, frame: Frame, descriptor: &Vp9Descriptor) -> FrameDecision {
        let newest = self.last_picture.is_none_or(|p| frame.picture >= p);
        let new_picture = self.last_picture.is_none_or(|p| frame.picture > p);
        if newest {
            self.last_picture = Some(frame.picture);
        }
        self.observe(frame, descriptor);
        if frame.is_keyframe() && newest {
            self.restart(frame);
        } else if new_picture {
            self.switch_at_picture_start(frame);
        }
        self.switch_up_spatially(frame);
        let decision = self.forward_decision(frame, descriptor);
        self.frames.insert(frame.key(), decision);
        self.track_continuity(frame, decision.forwarded);
        self.update_keyframe_request();
        decision
    }

    /// Learns the layers the publisher sends and whether each needs the one below.
    fn observe(&mut self, frame: Frame, descriptor: &Vp9Descriptor) {
        if let Some(ss) = &descriptor.scalability_structure {
            self.structure_picture = frame.picture;
            self.publisher_spatial = ss.spatial_layers.max(1);
            self.publisher_temporal = ss.picture_group.as_ref().map_or(1, |group| {
                group
                    .iter()
                    .map(|entry| entry.tid.0)
                    .max()
                    .unwrap_or(0)
                    .saturating_add(1)
            });
        }
        if frame.picture >= self.structure_picture {
            self.publisher_spatial = self.publisher_spatial.max(frame.sid + 1);
            self.publisher_temporal = self.publisher_temporal.max(frame.tid.saturating_add(1));
        }
        if frame.sid > 0 {
            self.inter_layer[usize::from(frame.sid)] = frame.inter_layer_dependency;
        }
        if let Some(current) = self.current {
            if current.spatial >= self.publisher_spatial {
                self.fall_back(self.publisher_spatial - 1);
            }
        }
    }

    /// A keyframe refreshes every reference: every layer up to the target decodes from here.
    /// Late frames from before it are dropped: what tells whether they decode (continuity)
    /// now describes the frames after it.
    fn restart(&mut self, frame: Frame) {
        self.current = Some(self.wanted());
        self.switch_picture = frame.picture;
        self.temporal_before_switch = None;
    }

    /// Temporal moves, and spatial moves down, at the first frame seen of a new picture.
    fn switch_at_picture_start(&mut self, frame: Frame) {
        let Some(mut current) = self.current else {
            return;
        };
        let wanted = self.wanted();
        if wanted.temporal < current.temporal {
            current.temporal = wanted.temporal;
        } else if frame.switching_up_point
            && frame.tid <= wanted.temporal
            && frame.tid == current.temporal.saturating_add(1)
        {
            // Such a frame references only lower temporal layers, all forwarded; a layer
            // further up may reference this one's earlier frames, never forwarded.
            self.temporal_before_switch = Some(current.temporal);
            current.temporal = frame.tid;
            self.switch_picture = frame.picture;
        }
        if wanted.spatial < current.spatial && self.decodable(wanted.spatial) {
            current.spatial = wanted.spatial;
        }
        self.current = Some(current);
    }

    /// An upper layer's frame that is not inter-picture predicted starts that layer, if the
    /// lower layer's frame it references was forwarded.
    fn switch_up_spatially(&mut self, frame: Frame) {
        let Some(current) = self.current else {
            return;
        };
        let up = frame.sid > current.spatial
            && frame.sid <= self.wanted().spatial
            && frame.tid <= current.temporal
            && !frame.inter_picture_predicted
            && (!frame.inter_layer_dependency || self.forwarded(frame.key() - 1));
        if up {
            self.current = Some(Layer::new(frame.sid, current.temporal));
            self.switch_picture = frame.picture;
            self.temporal_before_switch = None;
        }
    }

    fn forward_decision(&self, frame: Frame, descriptor: &Vp9Descriptor) -> FrameDecision {
        let Some(current) = self.current else {
            return FrameDecision::dropped(frame);
        };
        let in_layer = current.covers(Layer::new(frame.sid, frame.tid));
        // A frame with P=0 references no earlier picture, so it decodes whatever came before.
        // A late frame is judged by its own past, not the layer's state now.
        let late = self
            .last_picture
            .is_some_and(|newest| frame.picture < newest);
        let decodes = !frame.inter_picture_predicted
            || if late {
                self.late_frame_decodes(frame)
            } else {
                self.continuous(frame.sid)
            };
        let needed = frame.sid == current.spatial
            || !frame.inter_picture_predicted
            || self.supports(current.spatial, frame.sid);
        FrameDecision {
            forwarded: in_layer && decodes && needed && self.references_kept(frame, descriptor),
            top_spatial: current.spatial,
            tid: frame.tid,
            intra: !frame.inter_picture_predicted,
        }
    }

    /// A frame older than the newest picture, seen for the first time: judged by its own
    /// layer's past. Walking back through the layer's recent pictures, a forwarded P=0 frame
    /// (decodable on its own) before anything missing means it decodes; a frame at or below its
    /// TID that the subscriber did not get means it may not. Frames not seen yet may still
    /// arrive (retransmission), so they do not block, as for new frames; a walk that reaches
    /// pictures no longer remembered cannot tell, and drops the frame.
    fn late_frame_decodes(&self, frame: Frame) -> bool {
        let layer_frame = |picture: i64| {
            self.frames
                .get(picture * SLOTS_PER_PICTURE + i64::from(frame.sid))
        };
        // Pictures older than this are forgotten: nothing can be known of them.
        let oldest_remembered = self
            .last_picture
            .map_or(i64::MIN, |newest| newest - PICTURES_REMEMBERED + 1);
        for k in 1..=LATE_FRAME_WINDOW {
            if frame.picture - k < oldest_remembered {
                return false;
            }
            match layer_frame(frame.picture - k) {
                Some(d) if d.forwarded && d.intra => return true,
                Some(d) if !d.forwarded && d.tid <= frame.tid => return false,
                _ => {}
            }
        }
        true
    }

    /// No frame `frame` references was dropped: the lower layer's frame of the same picture
    /// when D=1, and in flexible mode the pictures its P_DIFFs name. One not seen yet may still
    /// arrive, so it does not block.
    fn references_kept(&self, frame: Frame, descriptor: &Vp9Descriptor) -> bool {
        let not_dropped = |key: i64| self.frames.get(key).is_none_or(|d| d.forwarded);
        let lower = !frame.inter_layer_dependency || frame.sid == 0 || not_dropped(frame.key() - 1);
        let diffs = !descriptor.flexible_mode
            || descriptor
                .reference_diffs
                .iter()
                .all(|diff| not_dropped(frame.key() - i64::from(diff.0) * SLOTS_PER_PICTURE));
        lower && diffs
    }

    /// A dropped frame of a forwarded temporal layer breaks its spatial layer until the next
    /// frame with P=0; if the forwarded layer needs it, fall back to one that still decodes.
    fn track_continuity(&mut self, frame: Frame, forwarded: bool) {
        // With nothing forwarded yet, every frame counts as missing: a keyframe's upper layer
        // dropped before its late base layer arrived must not look received later.
        let forwarded_temporal = self.current.map_or(u8::MAX, |c| c.temporal);
        if frame.tid > forwarded_temporal {
            return;
        }
        let sid = usize::from(frame.sid);
        if forwarded {
            if !frame.inter_picture_predicted {
                self.intra_at[sid] = self.intra_at[sid].max(frame.picture);
            }
            return;
        }
        self.dropped_at[sid] = self.dropped_at[sid].max(frame.picture);
        let Some(current) = self.current else {
            return;
        };
        let needed = frame.sid == current.spatial || self.supports(current.spatial, frame.sid);
        if frame.sid <= current.spatial && needed {
            self.fall_back(current.spatial);
        }
    }

    /// Moves to the highest spatial layer up to `ceiling` that still decodes, or to none.
    fn fall_back(&mut self, ceiling: u8) {
        let Some(current) = self.current else {
            return;
        };
        let spatial = (0..=ceiling.min(current.spatial))
            .rev()
            .find(|&s| self.decodable(s));
        self.current = spatial.map(|s| Layer::new(s, current.temporal));
    }

    /// The subscriber can keep decoding `spatial`: it and every layer it needs are continuous.
    fn decodable(&self, spatial: u8) -> bool {
        let mut s = usize::from(spatial);
        loop {
            if !self.continuous(s as u8) {
                return false;
            }
            if s == 0 || !self.inter_layer[s] {
                return true;
            }
            s -= 1;
        }
    }

    /// Every frame of `spatial` at the forwarded temporal layers since its newest P=0 frame
    /// reached the subscriber.
    fn continuous(&self, spatial: u8) -> bool {
        let s = usize::from(spatial);
        self.intra_at[s] != i64::MIN && self.intra_at[s] > self.dropped_at[s]
    }

    /// Whether forwarding `top` needs the frames of `lower`: every layer between them refers to
    /// the one below.
    fn supports(&self, top: u8, lower: u8) -> bool {
        (lower + 1..=top).all(|s| self.inter_layer[usize::from(s)])
    }

    /// Asks for a keyframe while the wanted layer can only be reached through one: nothing
    /// forwarded yet, an upper spatial layer, or a lower one the subscriber does not have.
    /// Temporal moves only wait for a switching up point.
    fn update_keyframe_request(&mut self) {
        let wanted = self.wanted();
        let reachable = self.current.is_some_and(|c| {
            c.spatial == wanted.spatial
                || (wanted.spatial < c.spatial && self.decodable(wanted.spatial))
        });
        if reachable {
            self.keyframes.satisfied();
        } else {
            self.keyframes.request();
        }
    }

    /// The target within the layers the publisher sends.
    fn wanted(&self) -> Layer {
        self.limits.effective().capped(Layer::new(
            self.publisher_spatial - 1,
            self.publisher_temporal - 1,
        ))
    }

    fn forwarded(&self, key: i64) -> bool {
        self.frames.get(key).is_some_and(|d| d.forwarded)
    }
}
