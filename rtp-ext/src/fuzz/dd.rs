//! Dependency Descriptor fuzz bodies.

use std::sync::Arc;

use crate::dd::{DependencyDescriptor, DependencyDescriptorWriter, FrameDependencyStructure};

/// `dd_parse`: arbitrary bytes, read without a structure and with one. The first byte picks a
/// split: the bytes before it are tried as a structure-carrying DD whose structure then serves
/// the rest.
pub fn dd_parse(data: &[u8]) {
    let _ = DependencyDescriptor::parse(data, None);
    let Some((&split, rest)) = data.split_first() else {
        return;
    };
    let split = usize::from(split).min(rest.len());
    let (head, tail) = rest.split_at(split);
    if let Some(structure) = DependencyDescriptor::parse(head, None)
        .ok()
        .and_then(|dd| dd.attached_structure)
    {
        let _ = DependencyDescriptor::parse(tail, Some(&structure));
    }
}

/// `dd_roundtrip`: whatever parses must write back and read back to the same descriptor, with
/// the length the writer announced.
pub fn dd_roundtrip(data: &[u8]) {
    let Some((&split, rest)) = data.split_first() else {
        return;
    };
    let split = usize::from(split).min(rest.len());
    let (head, tail) = rest.split_at(split);
    let Ok(first) = DependencyDescriptor::parse(head, None) else {
        return;
    };
    let structure = first.attached_structure.clone();
    roundtrip_one(&first, structure.as_ref());
    if let Ok(second) = DependencyDescriptor::parse(tail, structure.as_ref()) {
        roundtrip_one(&second, structure.as_ref());
    }
}

fn roundtrip_one(dd: &DependencyDescriptor, known: Option<&Arc<FrameDependencyStructure>>) {
    let Some(structure) = dd.attached_structure.as_ref().or(known) else {
        return;
    };
    let mut writer = DependencyDescriptorWriter::new();
    // Every chain active, so every chain diff must survive. Everything the reader accepts obeys the writer's rules: a failure here is a bug.
    let prepared = writer
        .prepare(dd, Some(structure), u32::MAX)
        .expect("a parsed DD is writable");
    let mut buf = vec![0u8; prepared.len()];
    let written = prepared.write_into(&mut buf).expect("sized by len()");
    assert_eq!(written, buf.len());
    let back = DependencyDescriptor::parse(&buf, Some(structure)).expect("written DD reads back");
    assert_eq!(back.start_of_frame, dd.start_of_frame);
    assert_eq!(back.end_of_frame, dd.end_of_frame);
    assert_eq!(back.frame_number, dd.frame_number);
    assert_eq!(back.frame_dependencies, dd.frame_dependencies);
    let expected_mask = dd.active_decode_targets.or(dd
        .attached_structure
        .as_ref()
        .map(|s| s.all_decode_targets()));
    assert_eq!(back.active_decode_targets, expected_mask);
    assert_eq!(back.attached_structure, dd.attached_structure);
}
