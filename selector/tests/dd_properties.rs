//! Properties of DD selection on generated streams of every scalability mode, through a
//! seeded network with loss, late retransmissions, reordering and duplicates, while the
//! publisher turns layers off and on and the subscriber changes its target:
//! - every forwarded frame is decodable: when the selector forwards it, none of the frames it
//!   references was seen and dropped; on a clean network every reference was forwarded before
//!   it. (Under loss a reference may be missing or late, and a late one from before a later
//!   switch point is dropped by design.)
//! - every forwarded packet's active decode targets bitmask covers the decode target received;
//! - after a target change the subscriber reaches the target within a keyframe interval, or a
//!   keyframe request was raised;
//! - no frame is split: all or none of its received packets are forwarded.

use std::collections::HashMap;

use common::{DdSubscriber, Network, NetworkConditions, Rng};
use proptest::prelude::*;
use selector::scalability::{GeneratedPacket, GeneratorConfig, ScalabilityMode, StreamGenerator};
use selector::{Layer, LayerLimits};

mod common;

const KEYFRAME_INTERVAL: u64 = 48;
const TEMPORAL_UNITS: u64 = 400;
/// Temporal units a keyframe request takes to reach the publisher and come back.
const REQUEST_DELAY: u64 = 2;

/// What the subscriber side observed, for the properties.
#[derive(Default)]
struct Observed {
    /// Per frame, the decision of each of its packets that reached the selector.
    decisions: HashMap<u64, Vec<bool>>,
    references: HashMap<u64, Vec<u64>>,
    decided_target: HashMap<u64, usize>,
}

struct Simulation {
    mode: ScalabilityMode,
    generator: StreamGenerator,
    network: Network<GeneratedPacket>,
    subscriber: DdSubscriber,
    observed: Observed,
    pending_keyframe: Option<u64>,
}

impl Simulation {
    fn new(mode: ScalabilityMode, seed: u64, conditions: NetworkConditions) -> Self {
        let config = GeneratorConfig {
            keyframe_interval_tus: KEYFRAME_INTERVAL as u32,
            packets_per_frame: 1..=3,
            seed,
            first_seq: seed as u16,
            first_frame_number: (seed >> 16) as u16,
            ..Default::default()
        };
        let generator = StreamGenerator::new(mode, config);
        let subscriber = DdSubscriber::new(generator.structure().clone(), Layer::MAX);
        Self {
            mode,
            generator,
            network: Network::new(seed ^ 0xA5A5, conditions),
            subscriber,
            observed: Observed::default(),
            pending_keyframe: None,
        }
    }

    /// One temporal unit through the network into the selector.
    fn step(&mut self, tu: u64) {
        if self.pending_keyframe.is_some_and(|at| at <= tu) {
            self.generator.request_keyframe();
            self.pending_keyframe = None;
        }
        loop {
            let packet = self.generator.next().expect("endless");
            let end_of_tu = packet.marker;
            self.network.send(tu, packet);
            if end_of_tu {
                break;
            }
        }
        for packet in self.network.arrivals(tu) {
            self.deliver(tu, packet);
        }
    }

    fn deliver(&mut self, tu: u64, packet: GeneratedPacket) {
        let decided = self.subscriber.select(&packet);
        let selection = decided.selection;
        if decided.requested {
            self.pending_keyframe.get_or_insert(tu + REQUEST_DELAY);
        }
        if let Some(rewritten) = decided.rewritten {
            // The decode target when the frame was decided (its first packet), which every
            // later packet and retransmission of it keeps.
            let decided = self
                .observed
                .decided_target
                .get(&packet.frame_number)
                .copied();
            let dt = decided.unwrap_or_else(|| {
                let current = self
                    .subscriber
                    .selector
                    .current()
                    .expect("a new frame is forwarded for a target");
                self.mode.decode_target(current.spatial, current.temporal)
            });
            self.observed.decided_target.insert(packet.frame_number, dt);
            let mask = rewritten.active_decode_targets.expect("always told");
            assert!(
                mask & (1 << dt) != 0,
                "mask {mask:#b} lacks the received target {dt}"
            );
            assert!(
                packet.belongs_to(dt),
                "forwarded frame {} not part of d{dt}",
                packet.frame_number
            );
        }
        let frame = packet.frame_number;
        let first_packet = !self.observed.decisions.contains_key(&frame);
        if first_packet && selection.forward {
            for reference in packet.references.iter() {
                let dropped = self
                    .observed
                    .decisions
                    .get(reference)
                    .is_some_and(|d| !d[0]);
                assert!(
                    !dropped,
                    "frame {frame} forwarded though its reference {reference} was dropped"
                );
            }
        }
        self.observed
            .decisions
            .entry(frame)
            .or_default()
            .push(selection.forward);
        self.observed
            .references
            .entry(frame)
            .or_insert_with(|| packet.references.iter().copied().collect());
    }

    /// The decode target the selector should settle on: the best active one within `target`.
    fn wanted(&self, target: Layer) -> Option<Layer> {
        let active = self.generator.active_decode_targets();
        let t = self.mode.temporal_layers();
        (0..self.mode.decode_target_count())
            .filter(|&dt| active & (1 << dt) != 0)
            .map(|dt| Layer::new(dt / t, dt % t))
            .filter(|&l| target.covers(l))
            .max()
    }

    /// On a clean network: every reference of a forwarded frame was forwarded before it.
    fn check_strict_decodability(&self) {
        for (frame, decisions) in &self.observed.decisions {
            if !decisions[0] {
                continue;
            }
            for reference in &self.observed.references[frame] {
                let forwarded = self.observed.decisions.get(reference).is_some_and(|d| d[0]);
                assert!(
                    forwarded && reference < frame,
                    "frame {frame}: reference {reference} not forwarded"
                );
            }
        }
    }

    fn check_no_split(&self) {
        for (frame, decisions) in &self.observed.decisions {
            assert!(
                decisions.iter().all(|&d| d == decisions[0]),
                "frame {frame} split: {decisions:?}"
            );
        }
    }
}

fn run(mode: ScalabilityMode, seed: u64, conditions: NetworkConditions, clean: bool) {
    let mut sim = Simulation::new(mode, seed, conditions);
    let mut rng = Rng(seed);
    let mut target = Layer::MAX;
    let mut deadline: Option<(u64, u64)> = None;
    for tu in 0..TEMPORAL_UNITS {
        if tu % 37 == 0 && rng.chance(60) {
            target = Layer::new(rng.below(4) as u8, rng.below(4) as u8);
            sim.subscriber.selector.set_limits(LayerLimits {
                target,
                max: Layer::MAX,
            });
            deadline = Some((tu + KEYFRAME_INTERVAL + 8, sim.subscriber.requests));
        }
        if tu % 53 == 0 && rng.chance(30) {
            sim.generator
                .set_active_spatial_layers(1 + rng.below(3) as u8);
            deadline = Some((tu + KEYFRAME_INTERVAL + 8, sim.subscriber.requests));
        }
        sim.step(tu);
        if let Some((at, requests_before)) = deadline.filter(|&(at, _)| at == tu) {
            let reached = sim.subscriber.selector.current() == sim.wanted(target);
            // A request raised in this window, or one raised earlier that is still waiting.
            let requested = sim.subscriber.requests > requests_before
                || sim.subscriber.selector.keyframe_requests().waiting();
            assert!(
                reached || requested,
                "{mode} at TU {at}: target {target:?} not reached ({:?}) and no keyframe request",
                sim.subscriber.selector.current()
            );
            if clean {
                assert!(
                    reached,
                    "{mode}: without loss the target is reached within a keyframe interval"
                );
            }
            deadline = None;
        }
    }
    sim.check_no_split();
    if clean {
        sim.check_strict_decodability();
    }
}

fn mode() -> impl Strategy<Value = ScalabilityMode> {
    prop::sample::select(vec![
        ScalabilityMode::L1T3,
        ScalabilityMode::L2T2,
        ScalabilityMode::L3T3,
        ScalabilityMode::L3T3Key,
        ScalabilityMode::L2T2KeyShift,
        ScalabilityMode::S3T3,
    ])
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(48))]

    #[test]
    fn selection_stays_decodable_through_a_bad_network(
        mode in mode(),
        seed in any::<u64>(),
        loss in 0..15u32,
        recovered in 0..100u32,
        reorder in 0..20u32,
        duplicate in 0..5u32,
    ) {
        run(mode, seed, NetworkConditions { loss, recovered, reorder, duplicate }, false);
    }

    #[test]
    fn on_a_clean_network_every_target_is_reached(mode in mode(), seed in any::<u64>()) {
        run(mode, seed, NetworkConditions::CLEAN, true);
    }
}

/// Found by the property above: a move into a complete target (not at a switch point) used to
/// drop a late reference that a later frame of the target still needed.
#[test]
fn regression_late_reference_after_a_move_into_a_complete_target() {
    let conditions = NetworkConditions::new(7, 84, 11, 0);
    run(
        ScalabilityMode::L3T3,
        7970141272680066194,
        conditions,
        false,
    );
}

/// Found by the property above: a frame of the target's chain lost for good (its
/// retransmission lost too) left the subscriber waiting without asking for a keyframe.
#[test]
fn regression_a_chain_frame_lost_for_good_asks_for_a_keyframe() {
    let conditions = NetworkConditions::new(11, 15, 16, 0);
    run(
        ScalabilityMode::L2T2,
        12985274093333056150,
        conditions,
        false,
    );
}

/// Found by the property above: the keyframe that turned a layer back on was lost, and the
/// subscriber, still believing the layer off, neither switched nor asked for a keyframe.
#[test]
fn regression_a_layer_back_on_is_seen_from_its_frames() {
    let conditions = NetworkConditions::new(7, 0, 9, 1);
    run(
        ScalabilityMode::L2T2KeyShift,
        7854270171610479225,
        conditions,
        false,
    );
}

/// Found by the property above: on a single-layer stream (one frame per temporal unit) a frame
/// of the base chain lost for good was waited on longer than a keyframe interval before the
/// subscriber, stuck below its target, asked for a keyframe.
#[test]
fn regression_l2t2_key_shift_stuck_at_the_base() {
    let conditions = NetworkConditions::new(12, 83, 6, 0);
    run(
        ScalabilityMode::L2T2KeyShift,
        16302504311598541918,
        conditions,
        false,
    );
}

/// Found by the property above: a keyframe that arrived after the frames that follow it was
/// counted as missing from its own chain, so the subscriber could not switch at it.
#[test]
fn regression_a_late_keyframe_is_a_switch_point() {
    let conditions = NetworkConditions::new(12, 54, 13, 2);
    run(
        ScalabilityMode::L3T3,
        12999464940603953646,
        conditions,
        false,
    );
}
