//! Real Dependency Descriptors from `shared/vectors/dd-vectors.json`, the data every DD case
//! runs on.

use std::sync::Arc;

use rtp_ext::dd::{DependencyDescriptor, FrameDependencyStructure};
use serde_json::Value;

/// The real 95-byte L3T3 keyframe DD (template structure attached).
pub const KEYFRAME_95: &str = "livekit.seq1.0";
/// A 3-byte follower: mandatory fields only.
pub const DELTA_3: &str = "livekit.seq2.3";
/// A 5-byte follower carrying an active decode targets bitmask.
pub const DELTA_5_MASK: &str = "livekit.seq1.1";

/// Raw bytes of a vector by id.
pub fn dd_bytes(id: &str) -> Vec<u8> {
    let path = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../shared/vectors/dd-vectors.json"
    );
    let text = std::fs::read_to_string(path).expect("shared vectors beside the checkout");
    let all: Value = serde_json::from_str(&text).expect("vectors are JSON");
    let vector = all["dd_vectors"]
        .as_array()
        .and_then(|list| list.iter().find(|v| v["id"] == id))
        .unwrap_or_else(|| panic!("no vector {id}"));
    hex::decode(vector["hex"].as_str().expect("hex")).expect("hex digits")
}

/// The L3T3 structure the followers refer to.
pub fn l3t3_structure() -> Arc<FrameDependencyStructure> {
    parse(KEYFRAME_95, None)
        .attached_structure
        .expect("the keyframe attaches its structure")
}

/// A vector parsed with `structure`.
pub fn parse(id: &str, structure: Option<&Arc<FrameDependencyStructure>>) -> DependencyDescriptor {
    DependencyDescriptor::parse(&dd_bytes(id), structure).expect("vector parses")
}
