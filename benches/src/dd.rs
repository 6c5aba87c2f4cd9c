//! Dependency Descriptor cases: parse and marshal on real L3T3 descriptors.

use std::hint::black_box;

use rtp_ext::dd::{DependencyDescriptor, DependencyDescriptorWriter};

use crate::fixtures::{dd_bytes, l3t3_structure, parse, DELTA_3, DELTA_5_MASK, KEYFRAME_95};
use crate::Case;

pub fn cases() -> Vec<Case> {
    vec![
        parse_case("dd/parse/delta3", DELTA_3, true),
        parse_case("dd/parse/delta5_mask", DELTA_5_MASK, true),
        parse_case("dd/parse/keyframe95", KEYFRAME_95, false),
        marshal_into_case("dd/marshal/delta_into", DELTA_3),
        marshal_bytes_case("dd/marshal/delta_bytes", DELTA_3),
        marshal_into_case("dd/marshal/mask_into", DELTA_5_MASK),
        marshal_into_case("dd/marshal/keyframe95_into", KEYFRAME_95),
    ]
}

fn parse_case(name: &'static str, id: &str, with_structure: bool) -> Case {
    let bytes = dd_bytes(id);
    let structure = with_structure.then(l3t3_structure);
    Case::new(name, move || {
        let dd = DependencyDescriptor::parse(black_box(&bytes), structure.as_ref());
        black_box(dd).expect("vector parses");
    })
}

fn marshal_into_case(name: &'static str, id: &str) -> Case {
    let structure = l3t3_structure();
    let dd = parse(id, Some(&structure));
    let active = structure.active_chains(
        dd.active_decode_targets
            .unwrap_or(structure.all_decode_targets()),
    );
    let mut writer = DependencyDescriptorWriter::new();
    let mut buf = [0u8; 256];
    Case::new(name, move || {
        let n = writer.write_into(black_box(&dd), Some(&structure), active, &mut buf);
        black_box(n).expect("vector re-encodes");
    })
}

fn marshal_bytes_case(name: &'static str, id: &str) -> Case {
    let structure = l3t3_structure();
    let dd = parse(id, Some(&structure));
    let mut writer = DependencyDescriptorWriter::new();
    Case::new(name, move || {
        let bytes = writer.write_bytes(black_box(&dd), Some(&structure), u32::MAX);
        black_box(bytes).expect("vector re-encodes");
    })
}
