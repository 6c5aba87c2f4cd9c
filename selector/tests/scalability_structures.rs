//! The template structures derived from each mode's frame pattern equal the ones real browser
//! keyframes carry (`shared/vectors/dd-vectors.json`).

use rtp_ext::dd::{DependencyDescriptor, FrameDependencyStructure};
use selector::scalability::ScalabilityMode;
use serde_json::Value;

fn browser_structure(id: &str) -> FrameDependencyStructure {
    let path = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../shared/vectors/dd-vectors.json"
    );
    let text = std::fs::read_to_string(path).expect("shared vectors beside the checkout");
    let all: Value = serde_json::from_str(&text).expect("vectors are JSON");
    let vector = all["dd_vectors"]
        .as_array()
        .expect("dd_vectors")
        .iter()
        .find(|v| v["id"] == id)
        .unwrap_or_else(|| panic!("no vector {id}"));
    let bytes = hex::decode(vector["hex"].as_str().expect("hex")).expect("hex digits");
    let dd = DependencyDescriptor::parse(&bytes, None).expect("a keyframe DD parses alone");
    (*dd.attached_structure
        .expect("a keyframe DD attaches its structure"))
    .clone()
}

/// Everything but the template id offset and the resolutions, which are the sender's choice.
fn assert_same_dependencies(mode: ScalabilityMode, id: &str) {
    let derived = mode.template_structure();
    let browser = browser_structure(id);
    assert_eq!(derived.validate(), Ok(()), "{mode}");
    assert_eq!(
        derived.decode_target_count, browser.decode_target_count,
        "{mode}"
    );
    assert_eq!(derived.chain_count, browser.chain_count, "{mode}");
    assert_eq!(
        derived.decode_target_protected_by, browser.decode_target_protected_by,
        "{mode}"
    );
    assert_eq!(derived.templates, browser.templates, "{mode}");
}

#[test]
fn l1t1_matches_the_browser() {
    assert_same_dependencies(ScalabilityMode::L1T1, "jitsi.descL1T1");
}

#[test]
fn l1t3_matches_the_browser() {
    assert_same_dependencies(ScalabilityMode::L1T3, "jitsi.descL1T3");
}

#[test]
fn l3t3_matches_the_browser() {
    assert_same_dependencies(ScalabilityMode::L3T3, "jitsi.descL3T3");
}

#[test]
fn l3t3_key_matches_the_browser() {
    assert_same_dependencies(ScalabilityMode::L3T3Key, "jitsi.descL3T3Key");
}

#[test]
fn l2t2_key_shift_matches_the_browser() {
    assert_same_dependencies(ScalabilityMode::L2T2KeyShift, "jitsi.descL2T2KeyShift");
}

#[test]
fn s3t3_matches_the_browser() {
    assert_same_dependencies(ScalabilityMode::S3T3, "jitsi.descS3T3");
}

/// No browser vector for L2T2: it is L3T3 with one spatial and one temporal layer less.
#[test]
fn l2t2_is_full_svc_two_by_two() {
    let s = ScalabilityMode::L2T2.template_structure();
    assert_eq!(s.validate(), Ok(()));
    assert_eq!((s.decode_target_count, s.chain_count), (4, 2));
    assert_eq!(s.decode_target_protected_by.as_slice(), &[0, 0, 1, 1]);
    let summary: Vec<String> = s
        .templates
        .iter()
        .map(|t| {
            format!(
                "S{}T{} {} {:?} {:?}",
                t.spatial_id, t.temporal_id, t.dtis, t.frame_diffs, t.chain_diffs
            )
        })
        .collect();
    assert_eq!(
        summary,
        [
            // Delta T0 before the keyframe template, as in the browser's full SVC structures.
            "S0T0 SSRR [4] [4, 3]",
            "S0T0 SSSS [] [0, 0]",
            "S0T1 -D-R [2] [2, 1]",
            // S1 references its own layer first, then the layer below.
            "S1T0 --SS [4, 1] [1, 1]",
            "S1T0 --SS [1] [1, 1]",
            "S1T1 ---D [2, 1] [3, 2]",
        ]
    );
    let resolutions: Vec<_> = s.resolutions.iter().map(|r| (r.width, r.height)).collect();
    assert_eq!(resolutions, [(640, 360), (1280, 720)]);
}

#[test]
fn three_layer_modes_carry_three_resolutions() {
    for mode in [
        ScalabilityMode::L3T3,
        ScalabilityMode::L3T3Key,
        ScalabilityMode::S3T3,
    ] {
        let s = mode.template_structure();
        let resolutions: Vec<_> = s.resolutions.iter().map(|r| (r.width, r.height)).collect();
        assert_eq!(resolutions, [(320, 180), (640, 360), (1280, 720)], "{mode}");
    }
}
