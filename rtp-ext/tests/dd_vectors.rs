//! Conformance: every Dependency Descriptor captured from real Chrome traffic in
//! `../shared/vectors/dd-vectors.json` parses to the values upstream tests assert and to the full
//! decode made from the AV1 RTP spec, and re-encodes to the identical bytes.

use std::collections::HashMap;
use std::sync::Arc;

use common::{num, vectors};
use rtp_ext::dd::{
    DependencyDescriptor, DependencyDescriptorWriter, FrameDependencyStructure, MandatoryFields,
};
use serde_json::Value;

mod common;

fn nums(v: &Value) -> Vec<u64> {
    v.as_array().expect("array").iter().map(num).collect()
}

/// Parses every vector in file order, resolving `structure_from` against earlier vectors.
fn parsed_vectors() -> Vec<(Value, Vec<u8>, DependencyDescriptor)> {
    let all = vectors();
    let mut structures: HashMap<String, Arc<FrameDependencyStructure>> = HashMap::new();
    let mut out = Vec::new();
    for v in all["dd_vectors"].as_array().expect("dd_vectors") {
        let id = v["id"].as_str().expect("id").to_owned();
        let bytes = hex::decode(v["hex"].as_str().expect("hex")).expect("hex digits");
        let known = v["structure_from"]
            .as_str()
            .map(|from| structures[from].clone());
        let dd = DependencyDescriptor::parse(&bytes, known.as_ref())
            .unwrap_or_else(|e| panic!("{id}: {e}"));
        if let Some(s) = &dd.attached_structure {
            structures.insert(id, s.clone());
        }
        out.push((v.clone(), bytes, dd));
    }
    out
}

fn structure_of<'a>(
    dd: &'a DependencyDescriptor,
    all: &'a [(Value, Vec<u8>, DependencyDescriptor)],
    v: &Value,
) -> &'a Arc<FrameDependencyStructure> {
    if let Some(s) = &dd.attached_structure {
        return s;
    }
    let from = v["structure_from"].as_str().expect("structure_from");
    let (_, _, source) = all
        .iter()
        .find(|(w, _, _)| w["id"] == from)
        .expect("source vector");
    source
        .attached_structure
        .as_ref()
        .expect("source attaches a structure")
}

#[test]
fn all_29_vectors_are_present() {
    assert_eq!(vectors()["dd_vectors"].as_array().map(Vec::len), Some(29));
}

#[test]
fn upstream_expectations_hold() {
    let all = parsed_vectors();
    for (v, _, dd) in &all {
        let id = &v["id"];
        let s = structure_of(dd, &all, v);
        for (key, want) in v["upstream_expectations"].as_object().expect("object") {
            let got: Value = match key.as_str() {
                "start_of_frame" => u64::from(dd.start_of_frame).into(),
                "end_of_frame" => u64::from(dd.end_of_frame).into(),
                "frame_number" => dd.frame_number.into(),
                "frame_dependency_template_id" => dd.template_id.into(),
                "spatial_id" => dd.spatial_id().into(),
                "temporal_id" => dd.temporal_id().into(),
                "active_decode_targets_bitmask" => dd.active_decode_targets.into(),
                "dt_cnt" => s.decode_target_count.into(),
                "chain_cnt" => s.chain_count.into(),
                "template_cnt" => s.templates.len().into(),
                "template_id_offset" => s.template_id_offset.into(),
                "max_spatial_id" => s.max_spatial_id().into(),
                "max_temporal_id" => s.max_temporal_id().into(),
                "resolutions_present_flag" => u64::from(!s.resolutions.is_empty()).into(),
                "render_resolutions" => resolutions_json(s),
                "template_temporal_id" => s.templates.iter().map(|t| t.temporal_id).collect(),
                "template_dti" => template_dtis_json(s),
                "template_fdiff" => template_list_json(s, |t| t.frame_diffs.as_slice()),
                "template_chain_fdiff" => template_list_json(s, |t| t.chain_diffs.as_slice()),
                other => panic!("{id}: no check for upstream key {other}"),
            };
            assert_eq!(&got, want, "{id}: {key}");
        }
    }
}

#[test]
fn full_decode_matches() {
    let all = parsed_vectors();
    for (v, bytes, dd) in &all {
        let id = &v["id"];
        let want = &v["decoded"];
        let s = structure_of(dd, &all, v);
        let frame = &dd.frame_dependencies;
        assert_eq!(
            u64::from(dd.start_of_frame),
            num(&want["start_of_frame"]),
            "{id}"
        );
        assert_eq!(
            u64::from(dd.end_of_frame),
            num(&want["end_of_frame"]),
            "{id}"
        );
        assert_eq!(
            u64::from(dd.template_id),
            num(&want["frame_dependency_template_id"]),
            "{id}"
        );
        assert_eq!(
            u64::from(dd.frame_number),
            num(&want["frame_number"]),
            "{id}"
        );
        let index = s.template_index(dd.template_id).expect("template");
        assert_eq!(index as u64, num(&want["template_index"]), "{id}");
        assert_eq!(
            u64::from(frame.spatial_id),
            num(&want["spatial_id"]),
            "{id}"
        );
        assert_eq!(
            u64::from(frame.temporal_id),
            num(&want["temporal_id"]),
            "{id}"
        );
        let dtis: Vec<u64> = frame.dtis.iter().map(|d| d as u64).collect();
        assert_eq!(dtis, nums(&want["frame_dti"]), "{id}");
        assert_eq!(
            frame.dtis.to_string(),
            want["dti_str"].as_str().expect("str"),
            "{id}"
        );
        let fdiffs: Vec<u64> = frame.frame_diffs.iter().map(|&d| d.into()).collect();
        assert_eq!(fdiffs, nums(&want["frame_fdiff"]), "{id}");
        let chains: Vec<u64> = frame.chain_diffs.iter().map(|&d| d.into()).collect();
        assert_eq!(chains, nums(&want["frame_chain_fdiff"]), "{id}");
        let mask = want
            .get("active_decode_targets_bitmask")
            .and_then(Value::as_u64);
        assert_eq!(dd.active_decode_targets.map(u64::from), mask, "{id}");
        let max_res = s.resolutions.get(usize::from(frame.spatial_id));
        let max_res = max_res.map(|r| vec![u64::from(r.width), u64::from(r.height)]);
        assert_eq!(
            max_res,
            want["frame_max_resolution"]
                .as_array()
                .map(|_| nums(&want["frame_max_resolution"])),
            "{id}"
        );
        assert_eq!(
            dd.attached_structure.is_some(),
            num(&want["template_dependency_structure_present_flag"]) == 1,
            "{id}"
        );
        assert_eq!(
            bytes.len() > 3,
            want["extended"].as_bool().expect("bool"),
            "{id}"
        );
        if let Some(ws) = v.get("structure") {
            assert_structure(id, dd.attached_structure.as_ref().expect("attached"), ws);
        }
    }
}

fn assert_structure(id: &Value, s: &FrameDependencyStructure, want: &Value) {
    assert_eq!(
        u64::from(s.template_id_offset),
        num(&want["template_id_offset"]),
        "{id}"
    );
    assert_eq!(
        u64::from(s.decode_target_count),
        num(&want["dt_cnt"]),
        "{id}"
    );
    assert_eq!(s.templates.len() as u64, num(&want["template_cnt"]), "{id}");
    assert_eq!(
        u64::from(s.max_spatial_id()),
        num(&want["max_spatial_id"]),
        "{id}"
    );
    assert_eq!(
        u64::from(s.max_temporal_id()),
        num(&want["max_temporal_id"]),
        "{id}"
    );
    let spatial: Vec<u64> = s.templates.iter().map(|t| t.spatial_id.into()).collect();
    assert_eq!(spatial, nums(&want["template_spatial_id"]), "{id}");
    let temporal: Vec<u64> = s.templates.iter().map(|t| t.temporal_id.into()).collect();
    assert_eq!(temporal, nums(&want["template_temporal_id"]), "{id}");
    assert_eq!(template_dtis_json(s), want["template_dti"], "{id}");
    assert_eq!(
        template_list_json(s, |t| t.frame_diffs.as_slice()),
        want["template_fdiff"],
        "{id}"
    );
    assert_eq!(u64::from(s.chain_count), num(&want["chain_cnt"]), "{id}");
    let protected: Vec<u64> = s
        .decode_target_protected_by
        .iter()
        .map(|&c| c.into())
        .collect();
    assert_eq!(protected, nums(&want["decode_target_protected_by"]), "{id}");
    assert_eq!(
        template_list_json(s, |t| t.chain_diffs.as_slice()),
        want["template_chain_fdiff"],
        "{id}"
    );
    let layers = (0..usize::from(s.decode_target_count)).map(|dt| s.decode_target_layer(dt));
    let (dt_spatial, dt_temporal): (Vec<u64>, Vec<u64>) = layers
        .map(|l| (u64::from(l.spatial_id), u64::from(l.temporal_id)))
        .unzip();
    assert_eq!(dt_spatial, nums(&want["decode_target_spatial_id"]), "{id}");
    assert_eq!(
        dt_temporal,
        nums(&want["decode_target_temporal_id"]),
        "{id}"
    );
    assert_eq!(
        u64::from(!s.resolutions.is_empty()),
        num(&want["resolutions_present_flag"]),
        "{id}"
    );
    if !s.resolutions.is_empty() {
        assert_eq!(resolutions_json(s), want["render_resolutions"], "{id}");
    }
}

#[test]
fn every_vector_reencodes_bit_exactly() {
    let all = parsed_vectors();
    let mut writer = DependencyDescriptorWriter::new();
    for (v, bytes, dd) in &all {
        let id = &v["id"];
        let s = structure_of(dd, &all, v);
        let active = s.active_chains(dd.active_decode_targets.unwrap_or(s.all_decode_targets()));
        let prepared = writer
            .prepare(dd, Some(s), active)
            .unwrap_or_else(|e| panic!("{id}: {e}"));
        assert_eq!(
            prepared.len(),
            bytes.len(),
            "{id}: length reported before writing"
        );
        assert_eq!(
            prepared.template_id(),
            dd.template_id,
            "{id}: template choice"
        );
        let mut buf = [0xA5u8; 128];
        let written = prepared.write_into(&mut buf).expect("fits");
        assert_eq!(hex::encode(&buf[..written]), hex::encode(bytes), "{id}");
        assert_eq!(prepared.to_bytes().as_ref(), bytes.as_slice(), "{id}");
    }
}

#[test]
fn mandatory_fields_parse_without_structure() {
    for (v, bytes, dd) in parsed_vectors() {
        let m = MandatoryFields::parse(&bytes).expect("three bytes");
        assert_eq!(m, dd.mandatory_fields(), "{}", v["id"]);
        if v["structure_from"].is_string() {
            let err = DependencyDescriptor::parse(&bytes, None).expect_err("needs a structure");
            assert_eq!(err, rtp_ext::dd::ReadError::MissingStructure, "{}", v["id"]);
        }
    }
}

/// Every strict prefix of every vector is reported truncated (or, for a prefix that ends where
/// the mandatory part does, decodes as a mandatory-only descriptor), never a panic.
#[test]
fn truncated_vectors_error_cleanly() {
    let all = parsed_vectors();
    for (v, bytes, dd) in &all {
        let known = structure_of(dd, &all, v);
        for cut in 0..bytes.len() {
            let result = DependencyDescriptor::parse(&bytes[..cut], Some(known));
            match cut {
                0..=2 => assert_eq!(
                    result,
                    Err(rtp_ext::dd::ReadError::Truncated),
                    "{}",
                    v["id"]
                ),
                3 => {
                    let mandatory = result.unwrap_or_else(|e| panic!("{}: {e:?}", v["id"]));
                    assert_eq!(
                        mandatory.mandatory_fields(),
                        dd.mandatory_fields(),
                        "{}",
                        v["id"]
                    );
                    assert_eq!(mandatory.attached_structure, None, "{}", v["id"]);
                    assert_eq!(mandatory.active_decode_targets, None, "{}", v["id"]);
                }
                _ => assert_eq!(
                    result,
                    Err(rtp_ext::dd::ReadError::Truncated),
                    "{} cut {cut}",
                    v["id"]
                ),
            }
        }
    }
}

fn resolutions_json(s: &FrameDependencyStructure) -> Value {
    s.resolutions
        .iter()
        .map(|r| Value::from(vec![r.width, r.height]))
        .collect()
}

fn template_dtis_json(s: &FrameDependencyStructure) -> Value {
    s.templates
        .iter()
        .map(|t| t.dtis.iter().map(|d| d as u64).collect::<Value>())
        .collect()
}

fn template_list_json(
    s: &FrameDependencyStructure,
    f: impl Fn(&rtp_ext::dd::FrameDependencyTemplate) -> &[u16],
) -> Value {
    s.templates
        .iter()
        .map(|t| f(t).iter().map(|&d| u64::from(d)).collect::<Value>())
        .collect()
}
