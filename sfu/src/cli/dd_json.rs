//! The JSON shape of a decoded Dependency Descriptor, shared by `sfu dd decode` and
//! `sfu inspect`.

use rtp_ext::dd::{DependencyDescriptor, FrameDependencyStructure, FrameDependencyTemplate};
use serde_json::{json, Value};

/// One descriptor, already resolved against its structure; the structure is printed only when
/// the descriptor attaches it.
pub fn descriptor_json(dd: &DependencyDescriptor) -> Value {
    let frame = &dd.frame_dependencies;
    json!({
        "start_of_frame": dd.start_of_frame,
        "end_of_frame": dd.end_of_frame,
        "template_id": dd.template_id,
        "frame_number": dd.frame_number,
        "spatial_id": frame.spatial_id,
        "temporal_id": frame.temporal_id,
        "dtis": frame.dtis.to_string(),
        "frame_diffs": frame.frame_diffs.as_slice(),
        "chain_diffs": frame.chain_diffs.as_slice(),
        "active_decode_targets": dd.active_decode_targets,
        "structure": dd.attached_structure.as_deref().map(structure_json),
    })
}

fn structure_json(s: &FrameDependencyStructure) -> Value {
    json!({
        "template_id_offset": s.template_id_offset,
        "decode_targets": s.decode_target_count,
        "chains": s.chain_count,
        "protected_by": s.decode_target_protected_by.as_slice(),
        "resolutions": s.resolutions.iter().map(|r| [r.width, r.height]).collect::<Vec<_>>(),
        "templates": s.templates.iter().map(template_json).collect::<Vec<_>>(),
    })
}

fn template_json(t: &FrameDependencyTemplate) -> Value {
    json!({
        "spatial_id": t.spatial_id,
        "temporal_id": t.temporal_id,
        "dtis": t.dtis.to_string(),
        "frame_diffs": t.frame_diffs.as_slice(),
        "chain_diffs": t.chain_diffs.as_slice(),
    })
}
