//! Derives a mode's template structure by replaying its pattern: every distinct frame a stream
//! of the mode can carry with all layers active becomes one template.

use rtp_ext::dd::{
    FrameDependencyStructure, FrameDependencyTemplate, InlineVec, RenderResolution,
    MAX_SPATIAL_LAYERS,
};

use super::encoder::EncoderState;
use super::pattern::Pattern;

/// Resolution of the top spatial layer; each layer below halves it.
const TOP_WIDTH: u32 = 1280;
const TOP_HEIGHT: u32 = 720;

/// The structure a stream of `pattern` carries on its keyframes.
pub(crate) fn derive(pattern: &Pattern) -> FrameDependencyStructure {
    let dt_count = pattern.decode_target_count();
    FrameDependencyStructure {
        template_id_offset: 0,
        decode_target_count: dt_count,
        chain_count: pattern.chain_count(),
        decode_target_protected_by: InlineVec::from_slice(
            &(0..dt_count)
                .map(|dt| pattern.protecting_chain(dt))
                .collect::<Vec<_>>(),
        )
        // Cannot fail: patterns have at most 9 decode targets, below MAX_DECODE_TARGETS.
        .expect("few decode targets"),
        templates: templates(pattern),
        resolutions: resolutions(pattern.spatial_layers),
    }
}

/// Templates in wire order: by spatial id, then temporal id; within a layer, keyframe templates
/// first or last as the pattern says, then in the order the stream first uses them.
fn templates(pattern: &Pattern) -> Vec<FrameDependencyTemplate> {
    let all_chains = u32::MAX;
    let mut encoder = EncoderState::new(0);
    encoder.start_keyframe();
    let mut encode = |position: u64| -> Vec<FrameDependencyTemplate> {
        pattern
            .temporal_unit(position)
            .iter()
            .map(|spec| encoder.encode(spec, pattern, all_chains).dependencies)
            .collect()
    };
    let keyframe = encode(0);
    // Two cycles: the first may differ from the steady state because it follows the keyframe.
    let cycle_len = pattern.cycle.len() as u64;
    let delta: Vec<_> = (1..=2 * cycle_len).flat_map(&mut encode).collect();
    let ordered = if pattern.keyframe_templates_first {
        [keyframe, delta].concat()
    } else {
        [delta, keyframe].concat()
    };
    let mut templates: Vec<FrameDependencyTemplate> = Vec::new();
    for template in ordered {
        if !templates.contains(&template) {
            templates.push(template);
        }
    }
    // Stable: keeps the order chosen above within a layer.
    templates.sort_by_key(|t| (t.spatial_id, t.temporal_id));
    templates
}

fn resolutions(spatial_layers: u8) -> InlineVec<RenderResolution, MAX_SPATIAL_LAYERS> {
    let mut out = InlineVec::new();
    for below_top in (0..spatial_layers).rev() {
        let resolution = RenderResolution {
            width: TOP_WIDTH >> below_top,
            height: TOP_HEIGHT >> below_top,
        };
        // Cannot fail: patterns have at most MAX_SPATIAL_LAYERS spatial layers.
        out.push(resolution).expect("few spatial layers");
    }
    out
}
