//! The shared test vectors (`../shared/vectors/dd-vectors.json`, beside the checkout) and the
//! small readers every conformance test uses on them.

#![allow(
    dead_code,
    reason = "each test crate that includes this module uses a different part of it"
)]

use serde_json::Value;

pub fn vectors() -> Value {
    let path = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../shared/vectors/dd-vectors.json"
    );
    let text = std::fs::read_to_string(path).expect("shared vectors beside the checkout");
    serde_json::from_str(&text).expect("vectors are JSON")
}

/// The packets of one list of real RTP packets (`av1_rtp_packets_with_dd`, `vp9_rtp_packets`).
pub fn packets(list: &str) -> Vec<Value> {
    vectors()[list]["packets"]
        .as_array()
        .expect("packets")
        .clone()
}

/// A hex string's bytes.
pub fn bytes(v: &Value) -> Vec<u8> {
    hex::decode(v.as_str().expect("hex string")).expect("hex digits")
}

pub fn num(v: &Value) -> u64 {
    v.as_u64().unwrap_or_else(|| panic!("not a number: {v}"))
}
