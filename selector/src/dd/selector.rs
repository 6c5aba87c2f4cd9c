//! Layer selection driven by the Dependency Descriptor, whatever the codec.

use std::sync::Arc;

use bytes::Bytes;
use rtp_ext::dd::{
    DecodeTargetIndication, DependencyDescriptor, DependencyDescriptorWriter,
    FrameDependencyStructure, WriteError,
};

use super::chains::{Chains, Fate};
use super::targets::DecodeTargets;
use crate::history::FrameHistory;
use crate::layer::{Layer, LayerLimits};
use crate::selection::{KeyframeRequests, Selection};
use crate::unwrap::Unwrapper;

/// Largest DD the selector writes: the two-byte RTP header extension form's limit.
pub const MAX_DD_SIZE: usize = 255;

/// One packet of a DD stream, parsed once by the receiver and shared by every subscriber.
#[derive(Debug, Clone, Copy)]
pub struct DdPacket<'a> {
    pub sequence_number: u16,
    pub marker: bool,
    pub descriptor: &'a DependencyDescriptor,
    /// The structure `descriptor` was parsed with: attached to it, or the receiver's latest.
    pub structure: &'a Arc<FrameDependencyStructure>,
}

/// Why a selected packet's DD could not be rewritten. The packet is dropped and counted.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SelectError {
    Descriptor(WriteError),
}

/// How a decode target was reached.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Switch {
    /// Staying on the current target.
    Kept,
    /// Into a target whose every frame the subscriber already has.
    Held,
    /// At a switch point of the target, its chain intact.
    AtSwitchPoint,
}

/// What the selector decided for one frame: kept for all its packets and retransmissions.
#[derive(Debug, Clone, Copy)]
struct FrameDecision {
    forwarded: bool,
    /// Spatial id of the decode target forwarded when the frame was decided: its last packet
    /// carries the marker.
    top_spatial: u8,
    /// Active decode targets told to the subscriber with this frame.
    active_decode_targets: u32,
}

/// Selects the decode target one subscriber receives from a DD stream and rewrites the DD of
/// each forwarded packet. See the crate docs for the rules it keeps.
#[derive(Debug)]
pub struct DdSelector {
    limits: LayerLimits,
    structure: Option<Arc<FrameDependencyStructure>>,
    targets: Option<DecodeTargets>,
    chains: Chains,
    /// Decode targets the publisher sends, from its last active decode targets bitmask.
    publisher_active: u32,
    /// The newest frame whose packet carried that bitmask.
    mask_frame: i64,
    /// The decode target forwarded now.
    current: Option<usize>,
    /// Bit `d` set while every frame of decode target `d` since it last started afresh (a frame
    /// with no references, or one that restarts `d`'s chain) reached the subscriber: `d` can be
    /// switched to at any frame. This is what lets a subscriber fall back at once when the
    /// publisher turns its layer off.
    complete: u32,
    /// Frames older than this (the last switch) that were never decided are dropped: a late
    /// packet from before a switch would reference frames the subscriber never got.
    switch_frame: i64,
    frames: FrameHistory<FrameDecision>,
    frame_numbers: Unwrapper,
    keyframes: KeyframeRequests,
    writer: DependencyDescriptorWriter,
}

impl Default for DdSelector {
    fn default() -> Self {
        Self::new()
    }
}

impl DdSelector {
    pub fn new() -> Self {
        Self {
            limits: LayerLimits::default(),
            structure: None,
            targets: None,
            chains: Chains::new(0),
            publisher_active: 0,
            mask_frame: i64::MIN,
            current: None,
            complete: 0,
            switch_frame: i64::MIN,
            frames: FrameHistory::default(),
            frame_numbers: Unwrapper::default(),
            keyframes: KeyframeRequests::default(),
            writer: DependencyDescriptorWriter::new(),
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
        Some(self.targets.as_ref()?.layer(self.current?))
    }

    pub fn keyframe_requests(&mut self) -> &mut KeyframeRequests {
        &mut self.keyframes
    }

    /// Decides `packet` and, when it is forwarded, writes its rewritten DD into `dd_out`.
    pub fn select(
        &mut self,
        packet: &DdPacket<'_>,
        dd_out: &mut [u8],
    ) -> Result<Selection, SelectError> {
        let Some((selection, mask)) = self.decide(packet) else {
            return Ok(Selection::DROP);
        };
        let len = self
            .rewrite(packet, mask)?
            .write_into(dd_out)
            .map_err(SelectError::Descriptor)?;
        Ok(Selection {
            descriptor_len: len,
            ..selection
        })
    }

    /// As [`select`](Self::select), with the rewritten DD in a new `Bytes` (one allocation).
    pub fn select_bytes(
        &mut self,
        packet: &DdPacket<'_>,
    ) -> Result<(Selection, Option<Bytes>), SelectError> {
        let Some((selection, mask)) = self.decide(packet) else {
            return Ok((Selection::DROP, None));
        };
        let bytes = self.rewrite(packet, mask)?.to_bytes();
        Ok((
            Selection {
                descriptor_len: bytes.len(),
                ..selection
            },
            Some(bytes),
        ))
    }

    /// Forward or drop, the marker, and the active decode targets to tell the subscriber.
    fn decide(&mut self, packet: &DdPacket<'_>) -> Option<(Selection, u32)> {
        self.adopt_structure(packet);
        let dd = packet.descriptor;
        let frame = self.frame_numbers.unwrap(dd.frame_number);
        self.learn_publisher_active(frame, dd);
        let decision = match self.frames.get(frame) {
            Some(decision) => decision,
            None if frame < self.switch_frame => {
                self.drop_late_frame(frame);
                return None;
            }
            None => self.decide_frame(frame, dd),
        };
        if !decision.forwarded {
            return None;
        }
        let marker = dd.end_of_frame && (packet.marker || dd.spatial_id() >= decision.top_spatial);
        Some((Selection::forward(marker), decision.active_decode_targets))
    }

    /// The publisher's active decode targets: its bitmask when a packet carries one. A newer
    /// frame of a layer it had turned off shows the layer is back on, even when the packets
    /// that said so (the keyframe with the structure) were lost; a late frame from before the
    /// bitmask shows nothing.
    fn learn_publisher_active(&mut self, frame: i64, dd: &DependencyDescriptor) {
        if let Some(mask) = dd.active_decode_targets {
            self.publisher_active = mask;
            self.mask_frame = self.mask_frame.max(frame);
            return;
        }
        if let Some(targets) = self.targets.as_ref().filter(|_| frame > self.mask_frame) {
            let layer = Layer::new(dd.spatial_id(), dd.temporal_id());
            self.publisher_active |= targets.of_layer(layer);
        }
    }

    /// Takes the packet's structure. A structure whose content differs starts everything over:
    /// decode target indexes may mean other layers now.
    fn adopt_structure(&mut self, packet: &DdPacket<'_>) {
        let same_arc = self
            .structure
            .as_ref()
            .is_some_and(|s| Arc::ptr_eq(s, packet.structure));
        if same_arc {
            return;
        }
        let same_content = self.structure.as_deref() == Some(&**packet.structure);
        self.structure = Some(Arc::clone(packet.structure));
        if same_content {
            return;
        }
        self.targets = Some(DecodeTargets::new(packet.structure));
        self.chains = Chains::new(packet.structure.chain_count);
        self.publisher_active = packet.structure.all_decode_targets();
        self.current = None;
        self.complete = 0;
        self.frames.clear();
    }

    fn decide_frame(&mut self, frame: i64, dd: &DependencyDescriptor) -> FrameDecision {
        let deps = &dd.frame_dependencies;
        let history = &self.frames;
        let fate = |f: i64| match history.get(f) {
            Some(d) if d.forwarded => Fate::Forwarded,
            Some(_) => Fate::Dropped,
            None => Fate::Unknown,
        };
        self.chains.observe(frame, &deps.chain_diffs, fate);
        self.choose_target(frame, dd);
        let decision = self.forward_decision(frame, dd);
        self.track_completeness(dd, decision.forwarded);
        self.frames.insert(frame, decision);
        self.chains.resolve(frame, decision.forwarded);
        decision
    }

    /// Moves to the best decode target this frame allows, and asks for a keyframe when the
    /// wanted one cannot be reached without it.
    fn choose_target(&mut self, frame: i64, dd: &DependencyDescriptor) {
        let Some(targets) = &self.targets else { return };
        let limit = self.limits.effective();
        let wanted = targets.candidates(limit, self.publisher_active).next();
        if wanted == self.current {
            self.keyframes.satisfied();
            return;
        }
        let current_usable = self
            .current
            .is_some_and(|c| self.publisher_active & (1 << c) != 0);
        // On the way to the wanted target, only targets it contains: their frames are part of
        // it anyway. Anything else (another simulcast layer in one stream) would be a detour
        // that costs a keyframe's bandwidth for nothing.
        let on_the_way = wanted.map_or(0, |w| targets.contained_in(w));
        let reachable = targets
            .candidates(limit, self.publisher_active & on_the_way)
            .take_while(|&dt| !current_usable || Some(dt) != self.current)
            .find_map(|dt| Some((dt, self.switch_kind(targets, dt, frame, dd)?)));
        let stay = self
            .current
            .filter(|_| current_usable)
            .map(|dt| (dt, Switch::Kept));
        if let Some((dt, kind)) = reachable.or(stay) {
            // At a switch point nothing before the frame matters to the new target: late
            // frames from before it are dropped. A move into a target the subscriber already
            // has every frame of keeps them, since later frames may still reference them.
            if kind == Switch::AtSwitchPoint {
                self.switch_frame = frame;
            }
            self.current = Some(dt);
        } else {
            // Nothing decodable remains: stop rather than forward frames that cannot decode.
            self.current = None;
        }
        match wanted {
            Some(dt) if self.current != Some(dt) && self.needs_keyframe(targets, dt) => {
                self.keyframes.request();
            }
            _ => self.keyframes.satisfied(),
        }
    }

    /// Updates which decode targets the subscriber has every frame of.
    fn track_completeness(&mut self, dd: &DependencyDescriptor, forwarded: bool) {
        let Some(targets) = &self.targets else { return };
        let deps = &dd.frame_dependencies;
        for dt in (0..deps.dtis.len())
            .filter(|&dt| deps.dtis.get(dt) != DecodeTargetIndication::NotPresent)
        {
            let chain_restarts = targets
                .protected_by(dt)
                .and_then(|c| deps.chain_diffs.get(usize::from(c)))
                .is_some_and(|&diff| diff == 0);
            let fresh_start = deps.frame_diffs.is_empty() || chain_restarts;
            if !forwarded {
                self.complete &= !(1 << dt);
            } else if fresh_start {
                self.complete |= 1 << dt;
            }
        }
    }

    /// How forwarding may move to `dt` at this frame, if it may: into a target the subscriber
    /// already has every frame of, or at a switch point of `dt` with its chain intact.
    fn switch_kind(
        &self,
        targets: &DecodeTargets,
        dt: usize,
        frame: i64,
        dd: &DependencyDescriptor,
    ) -> Option<Switch> {
        let contained = self
            .current
            .is_some_and(|c| targets.contained_in(c) & (1 << dt) != 0);
        let complete = self.complete & (1 << dt) != 0
            && targets
                .protected_by(dt)
                .is_none_or(|c| self.chains.intact(c));
        if contained || complete {
            return Some(Switch::Held);
        }
        let switch_point = dd.frame_dependencies.dtis.get(dt) == DecodeTargetIndication::Switch;
        let chain_intact = match targets.protected_by(dt) {
            Some(chain) => self.chains.intact(chain),
            // No chains to tell: a switch point is trusted, its references are checked.
            None => !targets.has_chains() && self.references_forwarded(frame, dd),
        };
        (switch_point && chain_intact).then_some(Switch::AtSwitchPoint)
    }

    /// A frame older than the last switch point, never seen before: nothing the subscriber
    /// decodes needs it. Recorded as dropped so that anything referencing it is dropped too.
    fn drop_late_frame(&mut self, frame: i64) {
        let dropped = FrameDecision {
            forwarded: false,
            top_spatial: 0,
            active_decode_targets: 0,
        };
        self.frames.insert(frame, dropped);
        self.chains.resolve(frame, false);
    }

    /// A keyframe is needed when `dt`'s chain lost a frame for good (waiting cannot help), or
    /// when nothing is forwarded yet and the chain is not intact.
    fn needs_keyframe(&self, targets: &DecodeTargets, dt: usize) -> bool {
        match targets.protected_by(dt) {
            Some(chain) => {
                self.chains.broken_for_good(chain)
                    || (self.current.is_none() && !self.chains.intact(chain))
            }
            None => self.current.is_none(),
        }
    }

    /// Every frame `frame` references reached the subscriber.
    fn references_forwarded(&self, frame: i64, dd: &DependencyDescriptor) -> bool {
        dd.frame_dependencies.frame_diffs.iter().all(|&diff| {
            self.frames
                .get(frame - i64::from(diff))
                .is_some_and(|d| d.forwarded)
        })
    }

    fn forward_decision(&self, frame: i64, dd: &DependencyDescriptor) -> FrameDecision {
        let targets = self.targets.as_ref();
        let (Some(targets), Some(current)) = (targets, self.current) else {
            return FrameDecision {
                forwarded: false,
                top_spatial: 0,
                active_decode_targets: 0,
            };
        };
        let deps = &dd.frame_dependencies;
        let part_of_target = deps.dtis.get(current) != DecodeTargetIndication::NotPresent;
        let references_kept = deps.frame_diffs.iter().all(|&diff| {
            self.frames
                .get(frame - i64::from(diff))
                .is_none_or(|d| d.forwarded)
        });
        FrameDecision {
            forwarded: part_of_target && references_kept,
            top_spatial: targets.layer(current).spatial,
            active_decode_targets: targets.contained_in(current) & self.publisher_active,
        }
    }

    fn rewrite<'a>(
        &'a mut self,
        packet: &'a DdPacket<'_>,
        active_decode_targets: u32,
    ) -> Result<rtp_ext::dd::PreparedDescriptor<'a>, SelectError> {
        let structure = packet.structure;
        let active_chains = self
            .targets
            .as_ref()
            .map_or(u32::MAX, |t| t.chains_of(active_decode_targets));
        self.writer
            .prepare_with_mask(
                packet.descriptor,
                Some(structure),
                active_chains,
                Some(active_decode_targets),
            )
            .map_err(SelectError::Descriptor)
    }
}
