//! The switching tables of `docs/dd-forwarding-rules.md` section 4, on generated
//! streams of each scalability mode.

use common::DdSubscriber;
use rtp_ext::dd::DependencyDescriptor;
use selector::scalability::{GeneratedPacket, GeneratorConfig, ScalabilityMode, StreamGenerator};
use selector::{Layer, LayerLimits, Selection};

mod common;

/// A generator feeding one subscriber's selector, temporal unit by temporal unit.
struct Run {
    generator: StreamGenerator,
    subscriber: DdSubscriber,
}

/// What the subscriber got of one packet.
struct Forwarded {
    packet: GeneratedPacket,
    selection: Selection,
    rewritten: DependencyDescriptor,
}

impl Run {
    fn new(mode: ScalabilityMode, target: Layer) -> Self {
        let config = GeneratorConfig {
            keyframe_interval_tus: 0,
            ..Default::default()
        };
        let generator = StreamGenerator::new(mode, config);
        let subscriber = DdSubscriber::new(generator.structure().clone(), target);
        Self {
            generator,
            subscriber,
        }
    }

    fn set_target(&mut self, target: Layer) {
        self.subscriber.selector.set_limits(LayerLimits {
            target,
            max: Layer::MAX,
        });
    }

    /// Runs `tus` temporal units; returns what was forwarded.
    fn run(&mut self, tus: usize) -> Vec<Forwarded> {
        let mut out = Vec::new();
        for _ in 0..tus {
            loop {
                let packet = self.generator.next().expect("endless");
                let decided = self.subscriber.select(&packet);
                let end_of_tu = packet.marker;
                if let Some(rewritten) = decided.rewritten {
                    out.push(Forwarded {
                        packet,
                        selection: decided.selection,
                        rewritten,
                    });
                }
                if end_of_tu {
                    break;
                }
            }
        }
        out
    }
}

fn top(mode: ScalabilityMode, spatial: u8) -> Layer {
    Layer::new(spatial, mode.temporal_layers() - 1)
}

/// Whether switching from spatial layer `from` to `to` (top temporal layer) needs a keyframe:
/// `true` when the selector cannot reach `to` within four pattern cycles by itself. A keyframe
/// request must then be raised, and the next keyframe must get it there.
fn needs_keyframe(mode: ScalabilityMode, from: u8, to: u8) -> bool {
    let mut run = Run::new(mode, top(mode, from));
    run.run(20);
    assert_eq!(
        run.subscriber.selector.current(),
        Some(top(mode, from)),
        "{mode} settles on S{from}"
    );
    let before = run.subscriber.requests;
    run.set_target(top(mode, to));
    run.run(16);
    let reached = run.subscriber.selector.current() == Some(top(mode, to));
    if reached {
        assert_eq!(
            run.subscriber.requests, before,
            "{mode} S{from}->S{to}: no keyframe request for a free switch"
        );
        return false;
    }
    assert_eq!(
        run.subscriber.requests,
        before + 1,
        "{mode} S{from}->S{to}: exactly one keyframe request"
    );
    assert!(run.subscriber.selector.keyframe_requests().waiting());
    run.generator.request_keyframe();
    run.run(4);
    assert_eq!(
        run.subscriber.selector.current(),
        Some(top(mode, to)),
        "{mode} S{from}->S{to} after the keyframe"
    );
    assert!(!run.subscriber.selector.keyframe_requests().waiting());
    true
}

#[test]
fn l3t3_switches_down_freely_and_up_with_a_keyframe() {
    for from in 0..3 {
        for to in 0..3 {
            let expected = from < to;
            assert_eq!(
                needs_keyframe(ScalabilityMode::L3T3, from, to),
                expected,
                "L3T3 S{from}->S{to}"
            );
        }
    }
}

#[test]
fn l2t2_behaves_like_full_svc() {
    assert!(!needs_keyframe(ScalabilityMode::L2T2, 1, 0));
    assert!(needs_keyframe(ScalabilityMode::L2T2, 0, 1));
}

#[test]
fn k_svc_simulcast_and_shifted_modes_switch_spatially_only_with_a_keyframe() {
    let modes = [
        ScalabilityMode::L3T3Key,
        ScalabilityMode::S3T3,
        ScalabilityMode::L2T2KeyShift,
    ];
    for mode in modes {
        for from in 0..mode.spatial_layers() {
            for to in 0..mode.spatial_layers() {
                assert_eq!(
                    needs_keyframe(mode, from, to),
                    from != to,
                    "{mode} S{from}->S{to}"
                );
            }
        }
    }
}

#[test]
fn temporal_switches_are_free_in_every_mode() {
    for mode in ScalabilityMode::ALL {
        let top_t = mode.temporal_layers() - 1;
        for (from, to) in [(top_t, 0), (0, top_t)] {
            let spatial = mode.spatial_layers() - 1;
            let mut run = Run::new(mode, Layer::new(spatial, from));
            run.run(20);
            let before = run.subscriber.requests;
            run.set_target(Layer::new(spatial, to));
            run.run(8);
            assert_eq!(
                run.subscriber.selector.current(),
                Some(Layer::new(spatial, to)),
                "{mode} T{from}->T{to}"
            );
            assert_eq!(
                run.subscriber.requests, before,
                "{mode} T{from}->T{to} needs no keyframe"
            );
        }
    }
}

/// Section 4's table: the decode targets a subscriber can decode (the active decode targets
/// bitmask it is told) while it receives decode target `d`.
#[test]
fn active_decode_targets_told_per_target() {
    let full = [
        0b1,
        0b11,
        0b111,
        0b1001,
        0b11011,
        0b111111,
        0b1001001,
        0b11011011,
        0b111111111,
    ];
    let key = [
        0b1,
        0b11,
        0b111,
        0b1000,
        0b11000,
        0b111000,
        0b1000000,
        0b11000000,
        0b111000000,
    ];
    let shift = [0b0001, 0b0011, 0b0100, 0b1100];
    let tables: [(ScalabilityMode, &[u32]); 4] = [
        (ScalabilityMode::L3T3, &full),
        (ScalabilityMode::L3T3Key, &key),
        (ScalabilityMode::S3T3, &key),
        (ScalabilityMode::L2T2KeyShift, &shift),
    ];
    for (mode, expected) in tables {
        for (dt, &mask) in expected.iter().enumerate() {
            let t = mode.temporal_layers();
            let layer = Layer::new(dt as u8 / t, dt as u8 % t);
            let mut run = Run::new(mode, layer);
            let forwarded = run.run(12);
            assert_eq!(
                run.subscriber.selector.current(),
                Some(layer),
                "{mode} d{dt}"
            );
            assert!(!forwarded.is_empty());
            for f in &forwarded {
                assert_eq!(
                    f.rewritten.active_decode_targets,
                    Some(mask),
                    "{mode} d{dt}"
                );
                assert!(
                    f.packet.belongs_to(dt),
                    "{mode} d{dt}: forwarded a frame not part of it"
                );
            }
        }
    }
}

#[test]
fn marker_on_the_last_packet_of_the_highest_forwarded_spatial_layer() {
    for mode in [ScalabilityMode::L3T3, ScalabilityMode::L3T3Key] {
        for spatial in 0..3 {
            let mut run = Run::new(mode, top(mode, spatial));
            let forwarded = run.run(12);
            let mut markers_per_tu = std::collections::BTreeMap::new();
            for f in &forwarded {
                let expected = f.packet.end_of_frame() && f.packet.spatial_id() == spatial;
                assert_eq!(
                    f.selection.marker, expected,
                    "{mode} S{spatial} frame {}",
                    f.packet.frame_number
                );
                *markers_per_tu.entry(f.packet.temporal_unit).or_insert(0) +=
                    u32::from(f.selection.marker);
            }
            assert!(
                markers_per_tu.values().all(|&m| m == 1),
                "{mode} S{spatial}: one marker per temporal unit"
            );
        }
    }
}

#[test]
fn the_structure_is_passed_on_keyframes_and_frame_numbers_are_kept() {
    let mut run = Run::new(ScalabilityMode::L3T3, Layer::new(1, 1));
    for f in run.run(10) {
        assert_eq!(f.rewritten.frame_number, f.packet.descriptor.frame_number);
        assert_eq!(
            f.rewritten.frame_dependencies,
            f.packet.descriptor.frame_dependencies
        );
        assert_eq!(
            f.rewritten.attached_structure.is_some(),
            f.packet.descriptor.attached_structure.is_some()
        );
    }
}
