//! `sfu dd decode` against the shared Chrome vectors.

use std::process::Output;

use serde_json::Value;

use crate::common::{sfu, vectors};

fn lines(out: &Output) -> Vec<Value> {
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(|l| serde_json::from_str(l).expect("one JSON object per line"))
        .collect()
}

const L3T3_KEY: &str = "jitsi.descL3T3";

fn vector(id: &str) -> Value {
    vectors()["dd_vectors"]
        .as_array()
        .expect("list")
        .iter()
        .find(|v| v["id"] == id)
        .expect("vector")
        .clone()
}

fn hex_of(id: &str) -> String {
    vector(id)["hex"].as_str().expect("hex").to_owned()
}

#[test]
fn structure_then_follower_on_one_command_line() {
    let out = sfu(&[
        "dd",
        "decode",
        &hex_of(L3T3_KEY),
        &hex_of("jitsi.midDescScalable"),
    ]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let rows = lines(&out);
    assert_eq!(rows.len(), 2);
    let key = &rows[0];
    assert_eq!(key["frame_number"], 308);
    assert_eq!(
        key["active_decode_targets"], 511,
        "all ones: structure attached, no bitmask"
    );
    let s = &key["structure"];
    assert_eq!(s["template_id_offset"], 15);
    assert_eq!(s["decode_targets"], 9);
    assert_eq!(s["chains"], 3);
    assert_eq!(
        s["protected_by"],
        serde_json::json!([0, 0, 0, 1, 1, 1, 2, 2, 2])
    );
    assert_eq!(
        s["resolutions"],
        serde_json::json!([[320, 180], [640, 360], [1280, 720]])
    );
    assert_eq!(s["templates"].as_array().map(Vec::len), Some(15));
    let mid = &rows[1];
    let keys: Vec<&str> = mid
        .as_object()
        .expect("object")
        .keys()
        .map(String::as_str)
        .collect();
    assert_eq!(
        keys,
        [
            "start_of_frame",
            "end_of_frame",
            "template_id",
            "frame_number",
            "spatial_id",
            "temporal_id",
            "dtis",
            "frame_diffs",
            "chain_diffs",
            "active_decode_targets",
            "structure"
        ]
    );
    assert_eq!(mid["start_of_frame"], true);
    assert_eq!(mid["template_id"], 17);
    assert_eq!(mid["frame_number"], 326);
    assert_eq!(
        (mid["spatial_id"].clone(), mid["temporal_id"].clone()),
        (0.into(), 1.into())
    );
    assert_eq!(mid["dtis"], "-DS-RR-RR");
    assert_eq!(mid["frame_diffs"], serde_json::json!([6]));
    assert_eq!(mid["chain_diffs"], serde_json::json!([6, 5, 4]));
    assert_eq!(mid["active_decode_targets"], 7);
    assert_eq!(mid["structure"], Value::Null);
}

#[test]
fn structure_flag_decodes_followers_and_null_mask_when_absent() {
    let out = sfu(&[
        "dd",
        "decode",
        "--structure",
        &hex_of("livekit.seq1.0"),
        &hex_of("livekit.seq2.3"),
    ]);
    assert!(out.status.success());
    let row = &lines(&out)[0];
    assert_eq!(row["dtis"], "------SSS");
    assert_eq!(row["spatial_id"], 2);
    assert_eq!(row["active_decode_targets"], Value::Null);
}

#[test]
fn bad_input_prints_an_error_object_and_fails_at_the_end() {
    let out = sfu(&[
        "dd",
        "decode",
        "zz",
        &hex_of("jitsi.descL1T1"),
        "40",
        &hex_of("jitsi.shortDesc"),
    ]);
    assert_eq!(out.status.code(), Some(1));
    let rows = lines(&out);
    assert_eq!(rows.len(), 4, "every DD gets a line");
    assert!(rows[0]["error"].as_str().expect("error").contains("hex"));
    assert_eq!(rows[1]["frame_number"], 1);
    assert_eq!(rows[2]["error"], "dependency descriptor truncated");
    assert_eq!(
        rows[3]["end_of_frame"], true,
        "structure from the first good DD still applies"
    );
}

#[test]
fn follower_without_structure_is_an_error() {
    let out = sfu(&["dd", "decode", &hex_of("jitsi.shortDesc")]);
    assert!(!out.status.success());
    assert!(lines(&out)[0]["error"]
        .as_str()
        .expect("error")
        .contains("structure"));
}
