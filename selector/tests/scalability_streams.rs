//! Generated streams, per mode: the pattern's own decodability, chains, wrap-around, keyframes,
//! layers switched off and on, and descriptors that survive a write and parse.

use std::collections::HashMap;

use rtp_ext::dd::{DecodeTargetIndication, DependencyDescriptor, DependencyDescriptorWriter};
use selector::scalability::{
    GeneratedPacket, GeneratorConfig, ScalabilityMode, StreamGenerator, TIMESTAMP_STEP,
};

const TEMPORAL_UNITS: u64 = 240;
const KEYFRAME_INTERVAL: u32 = 50;

/// Starts just below every wrap so each run crosses it.
fn config(seed: u64) -> GeneratorConfig {
    GeneratorConfig {
        keyframe_interval_tus: KEYFRAME_INTERVAL,
        packets_per_frame: 1..=4,
        seed,
        ssrc: 7,
        first_seq: 65_400,
        first_frame_number: 65_500,
        first_timestamp: u32::MAX - 10_000,
    }
}

/// All packets of the first `tus` temporal units. `on_start(t, generator)` runs when the first
/// packet of temporal unit `t` comes out, so what it changes applies from `t + 1`.
fn generate(
    mode: ScalabilityMode,
    tus: u64,
    mut on_start: impl FnMut(u64, &mut StreamGenerator),
) -> Vec<GeneratedPacket> {
    let mut generator = StreamGenerator::new(mode, config(mode as u64));
    let mut out: Vec<GeneratedPacket> = Vec::new();
    while let Some(packet) = generator.next() {
        if packet.temporal_unit == tus {
            break;
        }
        if out
            .last()
            .is_none_or(|p| p.temporal_unit != packet.temporal_unit)
        {
            on_start(packet.temporal_unit, &mut generator);
        }
        out.push(packet);
    }
    out
}

fn frame_starts(packets: &[GeneratedPacket]) -> impl Iterator<Item = &GeneratedPacket> {
    packets.iter().filter(|p| p.start_of_frame())
}

/// The decodability invariant of the pattern: a frame of decode target `d` references only
/// frames that exist, came before it and are of `d` too; references match the frame diffs.
fn assert_decodable(mode: ScalabilityMode, packets: &[GeneratedPacket]) {
    let mut present: HashMap<u64, u32> = HashMap::new();
    for p in frame_starts(packets) {
        let deps = &p.descriptor.frame_dependencies;
        let from_diffs: Vec<u64> = deps
            .frame_diffs
            .iter()
            .map(|&d| p.frame_number - u64::from(d))
            .collect();
        assert_eq!(p.references.as_slice(), from_diffs, "{mode} {p:?}");
        let mask = deps.dtis.present_mask();
        for reference in p.references.iter() {
            let referenced = present
                .get(reference)
                .unwrap_or_else(|| panic!("{mode}: frame {reference} missing, {p:?}"));
            assert_eq!(mask & !referenced, 0, "{mode}: {p:?} refs {reference}");
        }
        if p.keyframe && p.descriptor.attached_structure.is_some() {
            assert!(p.references.is_empty(), "{mode}: keyframe references");
        }
        present.insert(p.frame_number, mask);
    }
}

/// Each active chain's diff points at the previous frame of that chain: targets never go
/// backwards, and a new target's own diff points at the previous target (or starts the chain
/// in the keyframe's temporal unit). Targets are part of every decode target the chain protects,
/// and never discardable for them.
fn assert_chains(mode: ScalabilityMode, packets: &[GeneratedPacket]) {
    let structure = mode.template_structure();
    let mut frames: HashMap<u64, &GeneratedPacket> = HashMap::new();
    let mut last_target: Vec<Option<u64>> = vec![None; usize::from(structure.chain_count)];
    let target = |p: &GeneratedPacket, chain: usize| {
        let diff = p.descriptor.frame_dependencies.chain_diffs[chain];
        (diff != 0).then(|| p.frame_number - u64::from(diff))
    };
    for p in frame_starts(packets) {
        frames.insert(p.frame_number, p);
        if p.descriptor.attached_structure.is_some() {
            last_target.fill(None);
        }
        let active = p.descriptor.active_decode_targets.unwrap_or(!0);
        let active_chains = structure.active_chains(active);
        for (chain, last) in last_target.iter_mut().enumerate() {
            if active_chains & 1 << chain == 0 {
                continue;
            }
            let Some(now) = target(p, chain) else {
                assert!(p.keyframe, "{mode}: chain {chain} restarts at {p:?}");
                continue;
            };
            assert!(
                Some(now) >= *last,
                "{mode}: chain {chain} goes back at {p:?}"
            );
            let linked = frames[&now];
            if Some(now) != *last {
                assert_eq!(target(linked, chain), *last, "{mode}: chain {chain} {p:?}");
            }
            for dt in 0..usize::from(structure.decode_target_count) {
                if structure.decode_target_protected_by[dt] == chain as u8 {
                    let dti = linked.descriptor.frame_dependencies.dtis.get(dt);
                    assert!(
                        matches!(
                            dti,
                            DecodeTargetIndication::Switch | DecodeTargetIndication::Required
                        ),
                        "{mode}: chain {chain} frame {now} is {dti:?} for {dt}"
                    );
                }
            }
            *last = Some(now);
        }
    }
}

/// Sequence numbers, frame numbers and timestamps wrap; markers end temporal units; packets of
/// a frame are contiguous and bounded by start and end of frame.
fn assert_rtp_fields(mode: ScalabilityMode, packets: &[GeneratedPacket]) {
    for (i, pair) in packets.windows(2).enumerate() {
        let (a, b) = (&pair[0], &pair[1]);
        assert_eq!(b.sequence_number, a.sequence_number.wrapping_add(1));
        assert_eq!(a.marker, a.temporal_unit != b.temporal_unit, "{mode} #{i}");
        assert_eq!(a.end_of_frame(), b.start_of_frame(), "{mode} #{i}");
        let step = if a.temporal_unit == b.temporal_unit {
            0
        } else {
            TIMESTAMP_STEP
        };
        assert_eq!(b.timestamp, a.timestamp.wrapping_add(step), "{mode} #{i}");
        let next_frame = u64::from(b.start_of_frame());
        assert_eq!(b.frame_number, a.frame_number + next_frame, "{mode} #{i}");
    }
    for p in packets {
        assert_eq!(p.descriptor.frame_number, p.frame_number as u16);
    }
    let last = packets.last().expect("packets");
    assert!(
        last.frame_number > 65_535,
        "{mode}: frame numbers did not wrap"
    );
    assert!(
        last.sequence_number < 65_400,
        "{mode}: sequence numbers did not wrap"
    );
}

/// Writes every descriptor and parses it back with the structure the receiver has; steady-state
/// frames of a full stream match a template exactly.
fn assert_writable(mode: ScalabilityMode, packets: &[GeneratedPacket]) {
    let structure = mode.template_structure().into();
    let mut writer = DependencyDescriptorWriter::new();
    for p in packets {
        let dd = &p.descriptor;
        let active = dd.active_decode_targets.unwrap_or(!0);
        let active_chains = structure_active_chains(&structure, active);
        let bytes = writer
            .write_bytes(dd, Some(&structure), active_chains)
            .unwrap_or_else(|e| panic!("{mode}: {e:?} writing {p:?}"));
        let parsed = DependencyDescriptor::parse(&bytes, Some(&structure)).expect("parses");
        let (got, want) = (&parsed.frame_dependencies, &dd.frame_dependencies);
        assert_eq!(
            (got.spatial_id, got.temporal_id),
            (want.spatial_id, want.temporal_id)
        );
        assert_eq!(
            (got.dtis, got.frame_diffs),
            (want.dtis, want.frame_diffs),
            "{mode}"
        );
        for (chain, (g, w)) in got
            .chain_diffs
            .iter()
            .zip(want.chain_diffs.iter())
            .enumerate()
        {
            if active_chains & 1 << chain != 0 {
                assert_eq!(g, w, "{mode} chain {chain}");
            }
        }
        assert_eq!(
            parsed.active_decode_targets, dd.active_decode_targets,
            "{mode}"
        );
        assert_eq!(
            parsed.attached_structure.is_some(),
            dd.attached_structure.is_some()
        );
        let sof_eof_number =
            |d: &DependencyDescriptor| (d.start_of_frame, d.end_of_frame, d.frame_number);
        assert_eq!(sof_eof_number(&parsed), sof_eof_number(dd));
        if dd.attached_structure.is_none() && dd.active_decode_targets.is_none() {
            assert_eq!(bytes.len(), 3, "{mode}: {p:?} matches no template");
            assert_eq!(parsed.template_id, dd.template_id, "{mode} {p:?}");
        }
    }
}

fn structure_active_chains(
    structure: &std::sync::Arc<rtp_ext::dd::FrameDependencyStructure>,
    active: u32,
) -> u32 {
    structure.active_chains(active & structure.all_decode_targets())
}

#[test]
fn every_mode_generates_a_consistent_stream() {
    for mode in ScalabilityMode::ALL {
        let packets = generate(mode, TEMPORAL_UNITS, |_, _| {});
        assert_decodable(mode, &packets);
        assert_chains(mode, &packets);
        assert_rtp_fields(mode, &packets);
        assert_writable(mode, &packets);
        // One frame per spatial layer in every temporal unit.
        let frames = frame_starts(&packets).count() as u64;
        assert_eq!(
            frames,
            u64::from(mode.spatial_layers()) * TEMPORAL_UNITS,
            "{mode}"
        );
    }
}

#[test]
fn keyframes_come_every_interval_and_carry_the_structure() {
    for mode in ScalabilityMode::ALL {
        let packets = generate(mode, TEMPORAL_UNITS, |_, _| {});
        let first = &packets[0];
        assert!(first.keyframe && first.start_of_frame(), "{mode}");
        assert_eq!(first.spatial_id(), 0);
        let with_structure: Vec<u64> = packets
            .iter()
            .filter(|p| p.descriptor.attached_structure.is_some())
            .map(|p| p.temporal_unit)
            .collect();
        assert_eq!(with_structure, [0, 50, 100, 150, 200], "{mode}");
        for p in packets
            .iter()
            .filter(|p| p.descriptor.attached_structure.is_some())
        {
            assert!(p.keyframe && p.start_of_frame() && p.spatial_id() == 0);
            let structure = p
                .descriptor
                .attached_structure
                .as_deref()
                .expect("attached");
            assert_eq!(*structure, mode.template_structure());
        }
        let keyframe_tus = packets
            .iter()
            .filter(|p| p.keyframe)
            .all(|p| p.temporal_unit % 50 == 0);
        assert!(keyframe_tus, "{mode}");
    }
}

#[test]
fn switching_spatial_layers_off_shrinks_the_active_decode_targets() {
    for mode in [
        ScalabilityMode::L3T3,
        ScalabilityMode::L3T3Key,
        ScalabilityMode::S3T3,
    ] {
        let packets = generate(mode, 120, |tu, g| match tu {
            20 => g.set_active_spatial_layers(2),
            30 => g.set_active_spatial_layers(1),
            70 => g.set_active_spatial_layers(3),
            _ => {}
        });
        assert_decodable(mode, &packets);
        assert_chains(mode, &packets);
        assert_rtp_fields(mode, &packets);
        assert_writable(mode, &packets);
        for p in &packets {
            let (mask, layers) = match p.temporal_unit {
                21..=30 => (Some(0b111_111), 2),
                31..=70 => (Some(0b111), 1),
                _ => (None, 3),
            };
            // A structure states the mask whatever it is; the keyframes are checked below.
            if p.descriptor.attached_structure.is_none() {
                assert_eq!(p.descriptor.active_decode_targets, mask, "{mode} {p:?}");
            }
            let spatial_id = p.spatial_id();
            assert!(
                spatial_id < layers,
                "{mode}: S{spatial_id} at {}",
                p.temporal_unit
            );
        }
        // The keyframe while one layer is active announces the shrunk mask with the structure.
        let key_at_50 = packets
            .iter()
            .find(|p| p.temporal_unit == 50)
            .expect("tu 50");
        assert!(key_at_50.descriptor.attached_structure.is_some());
        assert_eq!(key_at_50.descriptor.active_decode_targets, Some(0b111));
        let back = packets
            .iter()
            .find(|p| p.temporal_unit == 71)
            .expect("tu 71");
        assert!(
            back.keyframe && back.descriptor.attached_structure.is_some(),
            "{mode}"
        );
        assert!(packets
            .iter()
            .any(|p| p.temporal_unit == 71 && p.spatial_id() == 2));
    }
}

#[test]
fn the_same_seed_gives_the_same_stream() {
    let take = |seed| -> Vec<GeneratedPacket> {
        let config = GeneratorConfig {
            seed,
            ..GeneratorConfig::default()
        };
        StreamGenerator::new(ScalabilityMode::L3T3, config)
            .take(500)
            .collect()
    };
    assert_eq!(take(3), take(3));
    assert_ne!(take(3), take(4));
    let counts: Vec<u64> = take(3)
        .iter()
        .filter(|p| p.start_of_frame())
        .map(|p| p.frame_number)
        .collect();
    assert!(
        counts.len() > 500 / 3 && counts.len() < 500,
        "1..=3 packets per frame"
    );
}

#[test]
fn membership_follows_the_indications() {
    let packets = generate(ScalabilityMode::L3T3, 4, |_, _| {});
    let s2t2 = packets
        .iter()
        .find(|p| (p.spatial_id(), p.temporal_id()) == (2, 2))
        .expect("an S2T2 frame");
    assert!(s2t2.belongs_to(8));
    assert!((0..8).all(|dt| !s2t2.belongs_to(dt)));
    let s0t0 = &packets[0];
    assert!((0..9).all(|dt| s0t0.belongs_to(dt)));
    assert!(!s0t0.belongs_to(9));
}
