//! Replays a pattern the way an encoder would: numbers frames, remembers which frame each
//! reference buffer and chain last saw, and turns that into frame diffs and chain diffs.

use rtp_ext::dd::{
    ChainDiffs, DecodeTargetIndications, FrameDependencyTemplate, FrameDiffs, InlineVec,
    MAX_SPATIAL_LAYERS,
};

use super::pattern::{FrameSpec, Pattern, BUFFERS};

/// Most frames one frame of the patterns references.
pub const MAX_REFERENCES: usize = 4;

/// Absolute frame numbers of the frames a frame references.
pub type References = InlineVec<u64, MAX_REFERENCES>;

/// One encoded frame: its number and its dependency information.
#[derive(Debug)]
pub(crate) struct EncodedFrame {
    pub frame_number: u64,
    pub dependencies: FrameDependencyTemplate,
    pub references: References,
}

/// Frame numbering and reference state, without wrap: frame numbers are extended to 64 bits.
#[derive(Debug)]
pub(crate) struct EncoderState {
    next_frame_number: u64,
    buffers: [Option<u64>; BUFFERS],
    /// Per chain, the last frame that was part of it since the keyframe.
    chain_last: [Option<u64>; MAX_SPATIAL_LAYERS],
}

impl EncoderState {
    pub fn new(first_frame_number: u64) -> Self {
        Self {
            next_frame_number: first_frame_number,
            buffers: [None; BUFFERS],
            chain_last: [None; MAX_SPATIAL_LAYERS],
        }
    }

    /// A keyframe references nothing from before it, and every chain restarts with it.
    pub fn start_keyframe(&mut self) {
        self.buffers = [None; BUFFERS];
        self.chain_last = [None; MAX_SPATIAL_LAYERS];
    }

    /// Encodes one frame. Chains not in `active_chains` protect only decode targets nobody
    /// receives: their diff means nothing, so it is 0, which is always in range.
    pub fn encode(
        &mut self,
        spec: &FrameSpec,
        pattern: &Pattern,
        active_chains: u32,
    ) -> EncodedFrame {
        let frame_number = self.next_frame_number;
        self.next_frame_number += 1;
        let references = self.references(spec);
        let diff_to = |earlier: u64| u16::try_from(frame_number - earlier).unwrap_or(u16::MAX);
        let mut frame_diffs = FrameDiffs::new();
        let mut chain_diffs = ChainDiffs::new();
        for &reference in references.iter() {
            // Cannot fail: `references` holds at most MAX_REFERENCES < MAX_FRAME_DIFFS entries.
            frame_diffs
                .push(diff_to(reference))
                .expect("few references");
        }
        for chain in 0..usize::from(pattern.chain_count()) {
            let diff = match self.chain_last[chain] {
                Some(last) if active_chains & 1 << chain != 0 => diff_to(last),
                _ => 0,
            };
            // Cannot fail: one chain per spatial layer, at most MAX_SPATIAL_LAYERS < MAX_CHAINS.
            chain_diffs.push(diff).expect("one chain per spatial layer");
            if spec.chains & 1 << chain != 0 {
                self.chain_last[chain] = Some(frame_number);
            }
        }
        if let Some(buffer) = spec.stores_into {
            self.buffers[usize::from(buffer)] = Some(frame_number);
        }
        EncodedFrame {
            frame_number,
            dependencies: FrameDependencyTemplate {
                spatial_id: spec.spatial_id,
                temporal_id: spec.temporal_id,
                dtis: DecodeTargetIndications::from_slice(spec.dtis),
                frame_diffs,
                chain_diffs,
            },
            references,
        }
    }

    /// The frames in the buffers `spec` reads. The patterns only read buffers written since the
    /// keyframe (tested), so an empty buffer contributes nothing.
    fn references(&self, spec: &FrameSpec) -> References {
        let mut references = References::new();
        for frame in spec
            .references
            .iter()
            .filter_map(|&buffer| self.buffers[usize::from(buffer)])
        {
            // Cannot fail: no pattern frame reads more than MAX_REFERENCES buffers.
            references.push(frame).expect("few references per frame");
        }
        references
    }
}
