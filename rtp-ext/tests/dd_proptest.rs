//! Properties of the DD codec: random valid structures and frames survive write -> read, and
//! arbitrary bytes never panic the reader.

use std::sync::Arc;

use proptest::collection::vec;
use proptest::option;
use proptest::prelude::*;
use rtp_ext::dd::{
    ChainDiffs, DecodeTargetIndication, DecodeTargetIndications, DependencyDescriptor,
    DependencyDescriptorWriter, FrameDependencyStructure, FrameDependencyTemplate, FrameDiffs,
    InlineVec, RenderResolution,
};

/// A template's own fields before its layer is known.
type TemplateFields = (Vec<u8>, Vec<u16>, Vec<u16>);

fn dtis_of(raw: &[u8]) -> DecodeTargetIndications {
    let dtis: Vec<_> = raw
        .iter()
        .map(|&b| DecodeTargetIndication::from_bits(b))
        .collect();
    DecodeTargetIndications::from_slice(&dtis)
}

fn template_fields(dts: usize, chains: usize) -> impl Strategy<Value = TemplateFields> {
    (
        vec(0..4u8, dts),
        vec(1..=16u16, 0..=3),
        vec(0..=15u16, chains),
    )
}

/// 1-4 spatial x 1-4 temporal layers, 1-4 templates per layer, 1-32 decode targets, 0 up to
/// the decode target count of chains, with or without resolutions.
fn structure() -> impl Strategy<Value = FrameDependencyStructure> {
    (1..=4usize, 1..=4usize, 1..=32usize, 0..64u8)
        .prop_flat_map(|(spatial, temporal, dts, offset)| {
            (0..=dts).prop_flat_map(move |chains| {
                let layers = spatial * temporal;
                (
                    Just((spatial, temporal, dts, offset, chains)),
                    vec(1..=4usize, layers),
                    vec(template_fields(dts, chains), layers * 4),
                    vec(0..chains.max(1) as u8, dts),
                    option::of(vec((1..=65536u32, 1..=65536u32), spatial)),
                )
            })
        })
        .prop_map(
            |((spatial, temporal, dts, offset, chains), counts, fields, protected, res)| {
                let mut fields = fields.into_iter();
                let mut templates = Vec::new();
                for s in 0..spatial {
                    for t in 0..temporal {
                        for _ in 0..counts[s * temporal + t] {
                            let (dtis, fdiffs, cdiffs) = fields.next().expect("4 per layer");
                            templates.push(FrameDependencyTemplate {
                                spatial_id: s as u8,
                                temporal_id: t as u8,
                                dtis: dtis_of(&dtis),
                                frame_diffs: FrameDiffs::from_slice(&fdiffs).expect("<= 3"),
                                chain_diffs: ChainDiffs::from_slice(&cdiffs).expect("<= 32"),
                            });
                        }
                    }
                }
                let resolutions = res.unwrap_or_default();
                let resolutions: Vec<_> = resolutions
                    .into_iter()
                    .map(|(width, height)| RenderResolution { width, height })
                    .collect();
                FrameDependencyStructure {
                    template_id_offset: offset,
                    decode_target_count: dts as u8,
                    chain_count: chains as u8,
                    decode_target_protected_by: if chains > 0 {
                        InlineVec::from_slice(&protected).expect("<= 32")
                    } else {
                        InlineVec::new()
                    },
                    templates,
                    resolutions: InlineVec::from_slice(&resolutions).expect("<= 4"),
                }
            },
        )
}

fn frame_diff() -> impl Strategy<Value = u16> {
    prop_oneof![
        prop::sample::select(vec![1u16, 16, 17, 256, 257, 4096]),
        1..=4096u16,
    ]
}

#[derive(Debug, Clone)]
struct Frame {
    template: usize,
    custom_dtis: Option<Vec<u8>>,
    custom_fdiffs: Option<Vec<u16>>,
    custom_chains: Option<Vec<u16>>,
    active_decode_targets: Option<u32>,
    attach: bool,
    start_of_frame: bool,
    end_of_frame: bool,
    frame_number: u16,
    active_chains: u32,
}

fn frame(s: &FrameDependencyStructure) -> impl Strategy<Value = Frame> {
    let dts = usize::from(s.decode_target_count);
    let chains = usize::from(s.chain_count);
    (
        (
            0..s.templates.len(),
            option::of(vec(0..4u8, dts)),
            option::of(vec(frame_diff(), 0..=8)),
        ),
        (
            option::of(vec(0..=255u16, chains)),
            option::of(any::<u32>()),
            any::<bool>(),
        ),
        (any::<bool>(), any::<bool>(), any::<u16>(), any::<u32>()),
    )
        .prop_map(
            move |((template, custom_dtis, custom_fdiffs), (custom_chains, mask, attach), rest)| {
                let (start_of_frame, end_of_frame, frame_number, active_chains) = rest;
                Frame {
                    template,
                    custom_dtis,
                    custom_fdiffs,
                    custom_chains,
                    active_decode_targets: mask.map(|m| {
                        if dts == 32 {
                            m
                        } else {
                            m & ((1 << dts) - 1)
                        }
                    }),
                    attach,
                    start_of_frame,
                    end_of_frame,
                    frame_number,
                    active_chains,
                }
            },
        )
}

fn structure_and_frames() -> impl Strategy<Value = (Arc<FrameDependencyStructure>, Vec<Frame>)> {
    structure().prop_flat_map(|s| {
        let frames = vec(frame(&s), 1..=8);
        (Just(Arc::new(s)), frames)
    })
}

fn descriptor(s: &Arc<FrameDependencyStructure>, f: &Frame) -> DependencyDescriptor {
    let mut deps = s.templates[f.template];
    if let Some(dtis) = &f.custom_dtis {
        deps.dtis = dtis_of(dtis);
    }
    if let Some(fdiffs) = &f.custom_fdiffs {
        deps.frame_diffs = FrameDiffs::from_slice(fdiffs).expect("<= 8");
    }
    if let Some(chains) = &f.custom_chains {
        deps.chain_diffs = ChainDiffs::from_slice(chains).expect("<= 32");
    }
    DependencyDescriptor {
        start_of_frame: f.start_of_frame,
        end_of_frame: f.end_of_frame,
        template_id: 0,
        frame_number: f.frame_number,
        frame_dependencies: deps,
        active_decode_targets: f.active_decode_targets,
        attached_structure: f.attach.then(|| s.clone()),
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    #[test]
    fn generated_structures_are_valid(s in structure()) {
        prop_assert_eq!(s.validate(), Ok(()));
    }

    #[test]
    fn a_mask_given_apart_writes_as_the_descriptor_carrying_it(
        (s, frames) in structure_and_frames(),
        mask in any::<u32>(),
    ) {
        let mask = mask & s.all_decode_targets();
        let mut writer = DependencyDescriptorWriter::new();
        let (mut apart, mut carried) = ([0u8; 4096], [0u8; 4096]);
        for f in &frames {
            let dd = descriptor(&s, f);
            let with_mask = DependencyDescriptor { active_decode_targets: Some(mask), ..dd.clone() };
            let prepared = writer
                .prepare_with_mask(&dd, Some(&s), f.active_chains, Some(mask))
                .expect("valid frame");
            let len = prepared.write_into(&mut apart).expect("fits");
            let prepared = writer.prepare(&with_mask, Some(&s), f.active_chains).expect("valid");
            let want = prepared.write_into(&mut carried).expect("fits");
            prop_assert_eq!(&apart[..len], &carried[..want]);
        }
    }

    #[test]
    fn write_then_read_gives_the_same_descriptor((s, frames) in structure_and_frames()) {
        let mut writer = DependencyDescriptorWriter::new();
        let mut buf = [0u8; 4096];
        for f in &frames {
            let dd = descriptor(&s, f);
            let prepared = writer.prepare(&dd, Some(&s), f.active_chains).expect("valid frame");
            let len = prepared.len();
            prop_assert_eq!(prepared.write_into(&mut buf), Ok(len));
            let known = if f.attach { None } else { Some(&s) };
            let back = DependencyDescriptor::parse(&buf[..len], known).expect("reads back");
            prop_assert_eq!(back.start_of_frame, dd.start_of_frame);
            prop_assert_eq!(back.end_of_frame, dd.end_of_frame);
            prop_assert_eq!(back.frame_number, dd.frame_number);
            prop_assert_eq!(back.template_id, prepared.template_id());
            let (got, want) = (&back.frame_dependencies, &dd.frame_dependencies);
            prop_assert_eq!((got.spatial_id, got.temporal_id), (want.spatial_id, want.temporal_id));
            prop_assert_eq!(got.dtis, want.dtis);
            prop_assert_eq!(got.frame_diffs, want.frame_diffs);
            // Only the chains the receiver needs must survive: inactive ones may come back as
            // the template's value or 0.
            let active = f.active_chains & s.all_decode_targets();
            for (chain, (g, w)) in got.chain_diffs.iter().zip(want.chain_diffs.iter()).enumerate() {
                if active & (1 << chain) != 0 {
                    prop_assert_eq!(g, w, "chain {}", chain);
                }
            }
            let implied = f.attach.then(|| s.all_decode_targets());
            prop_assert_eq!(back.active_decode_targets, dd.active_decode_targets.or(implied));
            prop_assert_eq!(back.attached_structure.as_deref(), dd.attached_structure.as_deref());
            // The Bytes convenience writes the same bytes.
            let bytes = prepared.to_bytes();
            prop_assert_eq!(bytes.as_ref(), &buf[..len]);
        }
    }

    #[test]
    fn arbitrary_bytes_never_panic_the_reader(
        (s, _) in structure_and_frames(),
        bytes in vec(any::<u8>(), 0..200),
    ) {
        let _ = DependencyDescriptor::parse(&bytes, None);
        let _ = DependencyDescriptor::parse(&bytes, Some(&s));
        let _ = rtp_ext::dd::MandatoryFields::parse(&bytes);
    }

    /// Whatever the reader accepts, the writer can write back.
    #[test]
    fn parsed_descriptors_are_writable(
        (s, _) in structure_and_frames(),
        bytes in vec(any::<u8>(), 3..40),
    ) {
        if let Ok(dd) = DependencyDescriptor::parse(&bytes, Some(&s)) {
            let mut writer = DependencyDescriptorWriter::new();
            prop_assert!(writer.prepare(&dd, Some(&s), u32::MAX).is_ok());
        }
    }
}
