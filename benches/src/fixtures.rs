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

/// Raw bytes of a DD vector by id.
pub fn dd_bytes(id: &str) -> Vec<u8> {
    let all = vectors();
    let vector = all["dd_vectors"]
        .as_array()
        .and_then(|list| list.iter().find(|v| v["id"] == id))
        .unwrap_or_else(|| panic!("no vector {id}"));
    hex_field(vector)
}

/// A real AV1 delta packet: one-byte extensions abs-send-time (3), transport-wide-cc (5) and a
/// 3-byte DD (11).
pub fn av1_packet_with_dd() -> Vec<u8> {
    hex_field(&vectors()["av1_rtp_packets_with_dd"]["packets"][2])
}

/// Real VP9 packet `index` of `vp9_rtp_packets` (0: a keyframe start carrying the scalability
/// structure).
pub fn vp9_packet(index: usize) -> Vec<u8> {
    hex_field(&vectors()["vp9_rtp_packets"]["packets"][index])
}

fn vectors() -> Value {
    let path = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../shared/vectors/dd-vectors.json"
    );
    let text = std::fs::read_to_string(path).expect("shared vectors beside the checkout");
    serde_json::from_str(&text).expect("vectors are JSON")
}

fn hex_field(v: &Value) -> Vec<u8> {
    hex::decode(v["hex"].as_str().expect("hex")).expect("hex digits")
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
