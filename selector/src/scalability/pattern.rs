//! Each mode's frame pattern as data, the way an encoder's scalability controller configures
//! frames: per temporal unit and spatial layer, the temporal id, the reference buffers read and
//! written, the chains the frame is part of and its decode target indications. Frame diffs and
//! chain diffs are not written here: they follow from replaying the pattern (see `encoder.rs`).
//!
//! Decode target `d` is `spatial_id * temporal_layers + temporal_id`, and chain `s` protects the
//! decode targets of spatial layer `s`.

use rtp_ext::dd::DecodeTargetIndication::{
    self, Discardable as D, NotPresent as N, Required as R, Switch as S,
};

/// Reference buffers an encoder keeps (AV1 has eight).
pub(crate) const BUFFERS: usize = 8;

/// How one frame of a temporal unit is encoded.
#[derive(Debug)]
pub(crate) struct FrameSpec {
    pub spatial_id: u8,
    pub temporal_id: u8,
    /// Buffers the frame references, in the order its frame diffs list them.
    pub references: &'static [u8],
    /// Buffer the frame is stored into for later frames to reference.
    pub stores_into: Option<u8>,
    /// Bit `c` set when the frame is part of chain `c`.
    pub chains: u8,
    pub dtis: &'static [DecodeTargetIndication],
}

/// A mode's frames: a keyframe temporal unit, then a cycle of temporal units repeated until the
/// next keyframe.
#[derive(Debug)]
pub(crate) struct Pattern {
    pub spatial_layers: u8,
    pub temporal_layers: u8,
    /// Replaces position 0 of the cycle whenever a keyframe starts.
    pub keyframe: &'static [FrameSpec],
    pub cycle: &'static [&'static [FrameSpec]],
    /// Where a layer's keyframe template goes among the templates of the same layer. Either order
    /// is valid; this one keeps the structure identical to what a real browser sends.
    pub keyframe_templates_first: bool,
}

impl Pattern {
    /// The frames of the temporal unit `position` units after the last keyframe.
    pub fn temporal_unit(&self, position: u64) -> &'static [FrameSpec] {
        if position == 0 {
            return self.keyframe;
        }
        // Both are small: the cycle has at most a few entries.
        let index = (position % self.cycle.len() as u64) as usize;
        self.cycle[index]
    }

    pub fn decode_target_count(&self) -> u8 {
        self.spatial_layers * self.temporal_layers
    }

    /// One chain per spatial layer.
    pub fn chain_count(&self) -> u8 {
        self.spatial_layers
    }

    /// The chain that protects decode target `dt`: the one of its spatial layer.
    pub fn protecting_chain(&self, dt: u8) -> u8 {
        dt / self.temporal_layers
    }
}

const fn frame(
    (spatial_id, temporal_id): (u8, u8),
    references: &'static [u8],
    stores_into: Option<u8>,
    chains: u8,
    dtis: &'static [DecodeTargetIndication],
) -> FrameSpec {
    FrameSpec {
        spatial_id,
        temporal_id,
        references,
        stores_into,
        chains,
        dtis,
    }
}

/// Buffer 0: the previous frame.
pub(crate) const L1T1: Pattern = Pattern {
    spatial_layers: 1,
    temporal_layers: 1,
    keyframe: &[frame((0, 0), &[], Some(0), 0b1, &[S])],
    cycle: &[&[frame((0, 0), &[0], Some(0), 0b1, &[S])]],
    keyframe_templates_first: true,
};

/// Temporal pattern T0 T2 T1 T2. Buffer 0: last T0 frame, buffer 1: last T1 frame.
pub(crate) const L1T3: Pattern = Pattern {
    spatial_layers: 1,
    temporal_layers: 3,
    keyframe: &[frame((0, 0), &[], Some(0), 0b1, &[S, S, S])],
    cycle: &[
        &[frame((0, 0), &[0], Some(0), 0b1, &[S, S, S])],
        &[frame((0, 2), &[0], None, 0, &[N, N, D])],
        &[frame((0, 1), &[0], Some(1), 0, &[N, D, S])],
        &[frame((0, 2), &[1], None, 0, &[N, N, D])],
    ],
    keyframe_templates_first: true,
};

/// Full SVC keyframe: each spatial layer predicts from the one below, and every frame is part of
/// its own chain and of the chains above (a receiver of a higher layer needs it).
const FULL_SVC_KEYFRAME_3: &[FrameSpec] = &[
    frame((0, 0), &[], Some(0), 0b111, &[S, S, S, S, S, S, S, S, S]),
    frame((1, 0), &[0], Some(1), 0b110, &[N, N, N, S, S, S, S, S, S]),
    frame((2, 0), &[1], Some(2), 0b100, &[N, N, N, N, N, N, S, S, S]),
];

/// Buffers 0-2: last T0 frame of S0-S2; 3-5: last T1 frame of S0-S2; 6-7: the current T2 frame
/// of S0-S1, for the layer above. Delta frames reference their own layer, then the layer below.
pub(crate) const L3T3: Pattern = Pattern {
    spatial_layers: 3,
    temporal_layers: 3,
    keyframe: FULL_SVC_KEYFRAME_3,
    cycle: &[
        &[
            frame((0, 0), &[0], Some(0), 0b111, &[S, S, S, R, R, R, R, R, R]),
            frame(
                (1, 0),
                &[1, 0],
                Some(1),
                0b110,
                &[N, N, N, S, S, S, R, R, R],
            ),
            frame(
                (2, 0),
                &[2, 1],
                Some(2),
                0b100,
                &[N, N, N, N, N, N, S, S, S],
            ),
        ],
        &[
            frame((0, 2), &[0], Some(6), 0, &[N, N, D, N, N, R, N, N, R]),
            frame((1, 2), &[1, 6], Some(7), 0, &[N, N, N, N, N, D, N, N, R]),
            frame((2, 2), &[2, 7], None, 0, &[N, N, N, N, N, N, N, N, D]),
        ],
        &[
            frame((0, 1), &[0], Some(3), 0, &[N, D, S, N, R, R, N, R, R]),
            frame((1, 1), &[1, 3], Some(4), 0, &[N, N, N, N, D, S, N, R, R]),
            frame((2, 1), &[2, 4], Some(5), 0, &[N, N, N, N, N, N, N, D, S]),
        ],
        &[
            frame((0, 2), &[3], Some(6), 0, &[N, N, D, N, N, R, N, N, R]),
            frame((1, 2), &[4, 6], Some(7), 0, &[N, N, N, N, N, D, N, N, R]),
            frame((2, 2), &[5, 7], None, 0, &[N, N, N, N, N, N, N, N, D]),
        ],
    ],
    keyframe_templates_first: false,
};

/// Delta frames of three independent spatial layers (K-SVC and simulcast): each references only
/// its own layer and is part of its own chain only. Buffers 0-2: last T0 frame of S0-S2; 3-5:
/// last T1 frame of S0-S2.
const INDEPENDENT_LAYERS_CYCLE_3X3: &[&[FrameSpec]] = &[
    &[
        frame((0, 0), &[0], Some(0), 0b001, &[S, S, S, N, N, N, N, N, N]),
        frame((1, 0), &[1], Some(1), 0b010, &[N, N, N, S, S, S, N, N, N]),
        frame((2, 0), &[2], Some(2), 0b100, &[N, N, N, N, N, N, S, S, S]),
    ],
    &[
        frame((0, 2), &[0], None, 0, &[N, N, D, N, N, N, N, N, N]),
        frame((1, 2), &[1], None, 0, &[N, N, N, N, N, D, N, N, N]),
        frame((2, 2), &[2], None, 0, &[N, N, N, N, N, N, N, N, D]),
    ],
    &[
        frame((0, 1), &[0], Some(3), 0, &[N, D, S, N, N, N, N, N, N]),
        frame((1, 1), &[1], Some(4), 0, &[N, N, N, N, D, S, N, N, N]),
        frame((2, 1), &[2], Some(5), 0, &[N, N, N, N, N, N, N, D, S]),
    ],
    &[
        frame((0, 2), &[3], None, 0, &[N, N, D, N, N, N, N, N, N]),
        frame((1, 2), &[4], None, 0, &[N, N, N, N, N, D, N, N, N]),
        frame((2, 2), &[5], None, 0, &[N, N, N, N, N, N, N, N, D]),
    ],
];

/// K-SVC: the keyframe temporal unit is full SVC, delta frames are independent per layer.
pub(crate) const L3T3_KEY: Pattern = Pattern {
    spatial_layers: 3,
    temporal_layers: 3,
    keyframe: FULL_SVC_KEYFRAME_3,
    cycle: INDEPENDENT_LAYERS_CYCLE_3X3,
    keyframe_templates_first: true,
};

/// Simulcast in one stream: every spatial layer starts with its own intra frame.
pub(crate) const S3T3: Pattern = Pattern {
    spatial_layers: 3,
    temporal_layers: 3,
    keyframe: &[
        frame((0, 0), &[], Some(0), 0b001, &[S, S, S, N, N, N, N, N, N]),
        frame((1, 0), &[], Some(1), 0b010, &[N, N, N, S, S, S, N, N, N]),
        frame((2, 0), &[], Some(2), 0b100, &[N, N, N, N, N, N, S, S, S]),
    ],
    cycle: INDEPENDENT_LAYERS_CYCLE_3X3,
    keyframe_templates_first: false,
};

/// Full SVC keyframe with two spatial layers.
const FULL_SVC_KEYFRAME_2: &[FrameSpec] = &[
    frame((0, 0), &[], Some(0), 0b11, &[S, S, S, S]),
    frame((1, 0), &[0], Some(1), 0b10, &[N, N, S, S]),
];

/// Full SVC, two by two, as `L3T3` with one layer less of each kind. Buffers 0-1: last T0 frame
/// of S0-S1; 2: the current T1 frame of S0, for the layer above.
pub(crate) const L2T2: Pattern = Pattern {
    spatial_layers: 2,
    temporal_layers: 2,
    keyframe: FULL_SVC_KEYFRAME_2,
    cycle: &[
        &[
            frame((0, 0), &[0], Some(0), 0b11, &[S, S, R, R]),
            frame((1, 0), &[1, 0], Some(1), 0b10, &[N, N, S, S]),
        ],
        &[
            frame((0, 1), &[0], Some(2), 0, &[N, D, N, R]),
            frame((1, 1), &[1, 2], None, 0, &[N, N, N, D]),
        ],
    ],
    keyframe_templates_first: false,
};

/// After the shared keyframe the layers are independent, and S1's T0 frames come one temporal
/// unit after S0's. Buffers 0-1: last T0 frame of S0-S1.
pub(crate) const L2T2_KEY_SHIFT: Pattern = Pattern {
    spatial_layers: 2,
    temporal_layers: 2,
    keyframe: FULL_SVC_KEYFRAME_2,
    cycle: &[
        &[
            frame((0, 1), &[0], None, 0, &[N, D, N, N]),
            frame((1, 0), &[1], Some(1), 0b10, &[N, N, S, S]),
        ],
        &[
            frame((0, 0), &[0], Some(0), 0b01, &[S, S, N, N]),
            frame((1, 1), &[1], None, 0, &[N, N, N, D]),
        ],
    ],
    keyframe_templates_first: true,
};
