//! The writer rules of `docs/dd-forwarding-rules.md` section 2, one test each.

use std::sync::Arc;

use rtp_ext::dd::DecodeTargetIndication::{Discardable as D, NotPresent as N, Switch as S};
use rtp_ext::dd::{
    ChainDiffs, DecodeTargetIndication, DecodeTargetIndications, DependencyDescriptor,
    DependencyDescriptorWriter, FrameDependencyStructure, FrameDependencyTemplate, FrameDiffs,
    InlineVec, WriteError,
};

const ALL_CHAINS: u32 = u32::MAX;

fn template(
    spatial_id: u8,
    temporal_id: u8,
    dtis: &[DecodeTargetIndication],
    fdiffs: &[u16],
    chains: &[u16],
) -> FrameDependencyTemplate {
    FrameDependencyTemplate {
        spatial_id,
        temporal_id,
        dtis: DecodeTargetIndications::from_slice(dtis),
        frame_diffs: FrameDiffs::from_slice(fdiffs).expect("few diffs"),
        chain_diffs: ChainDiffs::from_slice(chains).expect("few chains"),
    }
}

/// Two spatial layers, the first with two temporal layers; one chain per spatial layer.
/// Decode targets: 0 = S0T0, 1 = S0T1, 2 = S1T0.
fn structure() -> Arc<FrameDependencyStructure> {
    Arc::new(FrameDependencyStructure {
        template_id_offset: 5,
        decode_target_count: 3,
        chain_count: 2,
        decode_target_protected_by: InlineVec::from_slice(&[0, 0, 1]).expect("3 targets"),
        templates: vec![
            template(0, 0, &[S, S, S], &[], &[0, 0]),
            template(0, 0, &[S, S, S], &[2], &[2, 1]),
            template(0, 1, &[N, D, N], &[1], &[1, 2]),
            template(1, 0, &[N, N, S], &[1], &[1, 1]),
        ],
        resolutions: InlineVec::new(),
    })
}

fn frame_like(t: &FrameDependencyTemplate, frame_number: u16) -> DependencyDescriptor {
    DependencyDescriptor {
        start_of_frame: true,
        end_of_frame: true,
        frame_number,
        frame_dependencies: *t,
        ..Default::default()
    }
}

fn write(dd: &DependencyDescriptor, active_chains: u32) -> Result<Vec<u8>, WriteError> {
    let s = structure();
    let mut buf = [0u8; 64];
    let n = DependencyDescriptorWriter::new().write_into(dd, Some(&s), active_chains, &mut buf)?;
    Ok(buf[..n].to_vec())
}

fn read(bytes: &[u8]) -> DependencyDescriptor {
    DependencyDescriptor::parse(bytes, Some(&structure())).expect("reads back")
}

#[test]
fn exact_template_match_is_three_bytes() {
    let s = structure();
    for (index, t) in s.templates.iter().enumerate() {
        let bytes = write(&frame_like(t, 1000), ALL_CHAINS).expect("writable");
        assert_eq!(bytes.len(), 3, "template {index}");
        let template_id = bytes[0] & 0x3F;
        assert_eq!(
            usize::from(template_id),
            (index + 5) % 64,
            "template {index}"
        );
    }
}

#[test]
fn inactive_chain_diffs_are_ignored_when_matching() {
    let s = structure();
    let mut dd = frame_like(&s.templates[3], 7);
    dd.frame_dependencies.chain_diffs.as_mut_slice()[0] = 200;
    // Chain 0 active: its diff no longer matches, so custom chains are written.
    assert!(write(&dd, 0b11).expect("writable").len() > 3);
    // Only chain 1 active: the mismatch on chain 0 does not count.
    assert_eq!(write(&dd, 0b10).expect("writable").len(), 3);
}

#[test]
fn unused_bits_after_the_value_are_zero() {
    let s = structure();
    let mut dd = frame_like(&s.templates[2], 9);
    dd.frame_dependencies.frame_diffs = FrameDiffs::from_slice(&[3]).expect("one");
    let mut writer = DependencyDescriptorWriter::new();
    let prepared = writer.prepare(&dd, Some(&s), ALL_CHAINS).expect("writable");
    let mut zeros = [0x00u8; 16];
    let mut ones = [0xFFu8; 16];
    let n = prepared.write_into(&mut zeros).expect("fits");
    assert_eq!(prepared.write_into(&mut ones), Ok(n));
    // 24 mandatory + 5 flags + 2+4 diff + 2 end = 37 bits: three padding bits, all zero.
    assert_eq!(n, 5);
    assert_eq!(
        zeros[..n],
        ones[..n],
        "garbage in the buffer leaks into padding"
    );
    assert_eq!(zeros[4] & 0b111, 0);
    assert_eq!(ones[n], 0xFF, "bytes past the descriptor are untouched");
}

#[test]
fn fails_without_a_template_for_the_layer() {
    let s = structure();
    let mut dd = frame_like(&s.templates[3], 1);
    dd.frame_dependencies.temporal_id = 1; // S1T1 has no template
    assert_eq!(write(&dd, ALL_CHAINS), Err(WriteError::NoTemplateForLayer));
}

#[test]
fn fails_when_dti_or_chain_counts_differ() {
    let s = structure();
    let mut dd = frame_like(&s.templates[0], 1);
    dd.frame_dependencies.dtis = DecodeTargetIndications::from_slice(&[S, S]);
    assert_eq!(write(&dd, ALL_CHAINS), Err(WriteError::DtiCount));
    let mut dd = frame_like(&s.templates[0], 1);
    dd.frame_dependencies.chain_diffs = ChainDiffs::from_slice(&[0, 0, 0]).expect("3");
    assert_eq!(write(&dd, ALL_CHAINS), Err(WriteError::ChainDiffCount));
}

/// Negative diffs cannot be expressed: the frame diff type is unsigned.
#[test]
fn fails_on_frame_diff_zero_or_above_4096() {
    let s = structure();
    for bad in [0, 4097, u16::MAX] {
        let mut dd = frame_like(&s.templates[0], 1);
        dd.frame_dependencies.frame_diffs = FrameDiffs::from_slice(&[1, bad]).expect("two");
        assert_eq!(
            write(&dd, ALL_CHAINS),
            Err(WriteError::InvalidFrameDiff),
            "diff {bad}"
        );
    }
}

/// Negative diffs cannot be expressed: the chain diff type is unsigned.
#[test]
fn fails_on_active_chain_diff_above_255_but_inactive_may_be_anything() {
    let s = structure();
    let mut dd = frame_like(&s.templates[1], 1);
    dd.frame_dependencies.chain_diffs = ChainDiffs::from_slice(&[3, 256]).expect("two");
    assert_eq!(write(&dd, ALL_CHAINS), Err(WriteError::InvalidChainDiff));
    let bytes = write(&dd, 0b01).expect("chain 1 inactive");
    let back = read(&bytes);
    assert_eq!(back.frame_dependencies.chain_diffs[0], 3);
    // An inactive chain's custom diff is written as 0.
    assert_eq!(back.frame_dependencies.chain_diffs[1], 0);
}

#[test]
fn frame_diff_size_boundaries_and_chain_diff_255_round_trip() {
    let s = structure();
    let diffs = [1, 16, 17, 256, 257, 4096];
    let mut dd = frame_like(&s.templates[1], 60000);
    dd.frame_dependencies.frame_diffs = FrameDiffs::from_slice(&diffs).expect("six");
    dd.frame_dependencies.chain_diffs = ChainDiffs::from_slice(&[255, 0]).expect("two");
    let bytes = write(&dd, ALL_CHAINS).expect("writable");
    let back = read(&bytes);
    assert_eq!(back.frame_dependencies.frame_diffs.as_slice(), &diffs);
    assert_eq!(back.frame_dependencies.chain_diffs.as_slice(), &[255, 0]);
    assert_eq!(back.frame_number, 60000);
}

#[test]
fn template_search_stays_within_the_frames_layer() {
    let s = structure();
    // An S0T1 frame whose fields equal template 0 (S0T0) exactly: it must still be written
    // against the S0T1 template, with custom fields, so that its layer survives.
    let mut dd = frame_like(&s.templates[0], 5);
    dd.frame_dependencies.temporal_id = 1;
    let bytes = write(&dd, ALL_CHAINS).expect("writable");
    assert_eq!(bytes[0] & 0x3F, 2 + 5, "template 2 at offset 5");
    assert!(bytes.len() > 3);
    let back = read(&bytes);
    assert_eq!(back.frame_dependencies, dd.frame_dependencies);
}

#[test]
fn picks_the_same_layer_template_needing_fewest_custom_bits() {
    let s = structure();
    let mut dd = frame_like(&s.templates[1], 5);
    dd.frame_dependencies.chain_diffs = ChainDiffs::from_slice(&[0, 0]).expect("two");
    // Template 0 needs custom fdiffs (6 bits); template 1 needs custom chains (16 bits).
    let bytes = write(&dd, ALL_CHAINS).expect("writable");
    assert_eq!(usize::from(bytes[0] & 0x3F), 5);
    assert_eq!(read(&bytes).frame_dependencies, dd.frame_dependencies);
}

#[test]
fn length_is_reported_before_writing_and_checked_against_the_buffer() {
    let s = structure();
    let dd = DependencyDescriptor {
        attached_structure: Some(s.clone()),
        active_decode_targets: Some(0b011),
        ..frame_like(&s.templates[0], 1)
    };
    let mut writer = DependencyDescriptorWriter::new();
    let prepared = writer.prepare(&dd, None, ALL_CHAINS).expect("writable");
    let len = prepared.len();
    let mut small = vec![0u8; len - 1];
    assert_eq!(
        prepared.write_into(&mut small),
        Err(WriteError::BufferTooSmall)
    );
    let mut exact = vec![0u8; len];
    assert_eq!(prepared.write_into(&mut exact), Ok(len));
    let back = DependencyDescriptor::parse(&exact, None).expect("attached structure");
    assert_eq!(back.active_decode_targets, Some(0b011));
    assert_eq!(back.attached_structure.as_deref(), Some(&*s));
}

#[test]
fn active_mask_is_omitted_when_the_structure_implies_it() {
    let s = structure();
    let with_all = DependencyDescriptor {
        attached_structure: Some(s.clone()),
        active_decode_targets: Some(0b111),
        ..frame_like(&s.templates[0], 1)
    };
    let without = DependencyDescriptor {
        active_decode_targets: None,
        ..with_all.clone()
    };
    assert_eq!(write(&with_all, ALL_CHAINS), write(&without, ALL_CHAINS));
    let mut bad = with_all;
    bad.active_decode_targets = Some(0b1000);
    assert_eq!(
        write(&bad, ALL_CHAINS),
        Err(WriteError::ActiveDecodeTargets)
    );
}

#[test]
fn invalid_structures_are_refused() {
    use rtp_ext::dd::StructureError;
    let mut s = (*structure()).clone();
    s.templates.swap(2, 3);
    let dd = DependencyDescriptor {
        attached_structure: Some(Arc::new(s)),
        ..frame_like(&structure().templates[0], 1)
    };
    let err = DependencyDescriptorWriter::new()
        .prepare(&dd, None, ALL_CHAINS)
        .map(|p| p.len());
    assert_eq!(
        err,
        Err(WriteError::InvalidStructure(StructureError::TemplateOrder))
    );
    assert_eq!(
        DependencyDescriptorWriter::new()
            .prepare(&frame_like(&structure().templates[0], 1), None, 0)
            .map(|p| p.len()),
        Err(WriteError::MissingStructure)
    );
}
