//! VP8 temporal layer selection on generated L1T2 and L1T3 streams: unit cases, then
//! properties through a seeded network with loss, late retransmissions, reordering and
//! duplicates while the subscriber changes its target:
//! - every forwarded frame is decodable: when the selector decides it, none of its references
//!   was seen and dropped;
//! - no frame is split, and every packet of a frame gets the same patch;
//! - the picture ids the subscriber sees increase by exactly one per forwarded frame, and
//!   TL0PICIDX by one per forwarded base layer frame, when nothing is lost upstream; under loss
//!   they still increase, by no more than the source's;
//! - after a target change the target is reached within a keyframe interval, or a keyframe
//!   request was raised, or that interval's keyframe never reached the selector as a new frame.

use std::collections::{BTreeMap, HashMap};

use common::{Network, NetworkConditions, Rng};
use proptest::prelude::*;
use rtp_ext::codec::{
    KeyIdx, PartitionId, PictureId, TemporalLayerId, Tl0PicIdx, Vp8Descriptor, Vp8Temporal,
};
use selector::vp8::{Vp8Packet, Vp8Selection, Vp8Selector};
use selector::{Layer, LayerLimits};

mod common;

const L1T2: &[u8] = &[0, 1];
const L1T3: &[u8] = &[0, 2, 1, 2];

#[derive(Debug, Clone, Copy)]
struct StreamConfig {
    pattern: &'static [u8],
    /// Frames between keyframes; 0 for none after the first.
    keyframe_interval: u64,
    /// Layer sync frames follow every this many base layer frames (and every keyframe).
    sync_every: u64,
    first_picture_id: u16,
    extended_picture_id: bool,
    seed: u64,
}

impl StreamConfig {
    fn new(pattern: &'static [u8], seed: u64) -> Self {
        Self {
            pattern,
            keyframe_interval: 48,
            sync_every: 1 + seed % 3,
            // Near the wrap of either width.
            first_picture_id: 32760 + (seed % 5) as u16,
            extended_picture_id: !seed.is_multiple_of(4),
            seed,
        }
    }
}

/// One generated packet, with what the tests know of its frame.
#[derive(Debug, Clone)]
struct Packet {
    frame: u64,
    tid: u8,
    references: Vec<u64>,
    sequence_number: u16,
    timestamp: u32,
    marker: bool,
    descriptor: Vp8Descriptor,
    keyframe: bool,
}

impl Packet {
    fn select(&self, selector: &mut Vp8Selector) -> Vp8Selection {
        selector.select(&Vp8Packet {
            sequence_number: self.sequence_number,
            timestamp: self.timestamp,
            marker: self.marker,
            descriptor: &self.descriptor,
            keyframe: self.keyframe,
        })
    }

    /// The descriptor the subscriber reads: written, patched in place, parsed again.
    fn munged(&self, selection: &Vp8Selection) -> Vp8Descriptor {
        let mut bytes = [0; Vp8Descriptor::MAX_SIZE + 1];
        let len = self
            .descriptor
            .write(&mut bytes)
            .expect("generated descriptors fit");
        selection
            .patch
            .apply(&self.descriptor, &mut bytes[..len])
            .expect("the patch fits the descriptor");
        Vp8Descriptor::parse(&bytes[..len]).expect("patched descriptor parses")
    }
}

/// An L1T2 or L1T3 encoder's output. A frame references the latest earlier frame whose TID is
/// at most its own and, above the base layer, the latest of its own layer; a layer sync frame
/// references only the latest base layer frame. The first frame of each layer after a base
/// layer frame is a layer sync frame every `sync_every` base layer frames and after keyframes.
struct Stream {
    config: StreamConfig,
    rng: Rng,
    frame: u64,
    position: usize,
    keyframe_pending: bool,
    /// Per TID, the latest frame since the last keyframe.
    latest: [Option<u64>; 4],
    /// Per TID, whether a frame of it followed the latest base layer frame.
    seen_since_tl0: [bool; 4],
    tl0_frames: u64,
    /// No base layer frame followed the last keyframe yet.
    since_keyframe: bool,
    tl0_pic_idx: u8,
    key_idx: u8,
    sequence_number: u16,
}

impl Stream {
    fn new(config: StreamConfig) -> Self {
        Self {
            config,
            rng: Rng(config.seed),
            frame: 0,
            position: 0,
            keyframe_pending: true,
            latest: [None; 4],
            seen_since_tl0: [false; 4],
            tl0_frames: 0,
            since_keyframe: true,
            tl0_pic_idx: config.seed as u8,
            key_idx: 31,
            sequence_number: config.seed as u16,
        }
    }

    fn request_keyframe(&mut self) {
        self.keyframe_pending = true;
    }

    /// The packets of the next frame.
    fn next_frame(&mut self) -> Vec<Packet> {
        let c = self.config;
        let interval_due =
            c.keyframe_interval > 0 && self.frame.is_multiple_of(c.keyframe_interval);
        let keyframe = std::mem::take(&mut self.keyframe_pending) || interval_due;
        if keyframe {
            self.position = 0;
            self.latest = [None; 4];
            self.since_keyframe = true;
        }
        let tid = c.pattern[self.position % c.pattern.len()];
        self.position += 1;
        let (sync, references) = self.references(tid, keyframe);
        self.advance_indexes(tid, keyframe);
        let packets = self.packets(tid, sync, keyframe, references);
        self.latest[usize::from(tid)] = Some(self.frame);
        self.frame += 1;
        packets
    }

    fn references(&mut self, tid: u8, keyframe: bool) -> (bool, Vec<u64>) {
        let t = usize::from(tid);
        if keyframe {
            return (false, Vec::new());
        }
        if tid == 0 {
            self.seen_since_tl0 = [false; 4];
            self.tl0_frames += 1;
            self.since_keyframe = false;
            return (false, self.latest[0].into_iter().collect());
        }
        let first_of_layer = !std::mem::replace(&mut self.seen_since_tl0[t], true);
        let sync_period =
            self.since_keyframe || self.tl0_frames.is_multiple_of(self.config.sync_every);
        if first_of_layer && sync_period || self.latest[t].is_none() {
            return (true, self.latest[0].into_iter().collect());
        }
        let below = self.latest[..=t].iter().flatten().max().copied();
        let mut refs: Vec<u64> = below.into_iter().chain(self.latest[t]).collect();
        refs.dedup();
        (false, refs)
    }

    fn advance_indexes(&mut self, tid: u8, keyframe: bool) {
        if tid == 0 {
            self.tl0_pic_idx = self.tl0_pic_idx.wrapping_add(1);
        }
        if keyframe {
            self.key_idx = (self.key_idx + 1) % 32;
        }
    }

    fn packets(&mut self, tid: u8, sync: bool, keyframe: bool, refs: Vec<u64>) -> Vec<Packet> {
        let c = self.config;
        let id = c.first_picture_id.wrapping_add(self.frame as u16);
        let picture_id = match c.extended_picture_id {
            true => PictureId::extended(id),
            false => PictureId::short(id),
        };
        let count = 1 + self.rng.below(3) as usize;
        (0..count)
            .map(|i| {
                self.sequence_number = self.sequence_number.wrapping_add(1);
                Packet {
                    frame: self.frame,
                    tid,
                    references: refs.clone(),
                    sequence_number: self.sequence_number,
                    timestamp: (self.frame as u32).wrapping_mul(3000),
                    marker: i + 1 == count,
                    descriptor: Vp8Descriptor {
                        extended: true,
                        non_reference: false,
                        start_of_partition: i == 0,
                        partition_id: PartitionId(0),
                        picture_id: Some(picture_id),
                        tl0_pic_idx: Some(Tl0PicIdx(self.tl0_pic_idx)),
                        temporal: Some(Vp8Temporal {
                            tid: TemporalLayerId(tid),
                            layer_sync: sync,
                        }),
                        key_idx: Some(KeyIdx(self.key_idx)),
                    },
                    keyframe: keyframe && i == 0,
                }
            })
            .collect()
    }
}

fn limits(temporal: u8) -> LayerLimits {
    LayerLimits {
        target: Layer::new(0, temporal),
        max: Layer::MAX,
    }
}

fn selector(temporal: u8) -> Vp8Selector {
    let mut s = Vp8Selector::new();
    s.set_limits(limits(temporal));
    s
}

/// Per frame, whether it was forwarded, with its packets' munged descriptors.
fn run_frames(
    stream: &mut Stream,
    selector: &mut Vp8Selector,
    frames: usize,
) -> Vec<(Packet, Vp8Selection)> {
    let mut out = Vec::new();
    for _ in 0..frames {
        for packet in stream.next_frame() {
            let selection = packet.select(selector);
            out.push((packet, selection));
        }
    }
    out
}

fn forwarded_frames(out: &[(Packet, Vp8Selection)]) -> Vec<u64> {
    let mut frames: Vec<u64> = out
        .iter()
        .filter(|(_, s)| s.selection.forward)
        .map(|(p, _)| p.frame)
        .collect();
    frames.dedup();
    frames
}

fn tid_of(out: &[(Packet, Vp8Selection)], frame: u64) -> u8 {
    out.iter()
        .find(|(p, _)| p.frame == frame)
        .expect("frame sent")
        .0
        .tid
}

#[test]
fn l1t3_target_one_forwards_base_and_middle_layer_with_source_markers() {
    let mut stream = Stream::new(StreamConfig::new(L1T3, 1));
    let mut s = selector(1);
    let out = run_frames(&mut stream, &mut s, 40);
    for (packet, selection) in &out {
        assert_eq!(selection.selection.forward, packet.tid <= 1, "{packet:?}");
        if selection.selection.forward {
            assert_eq!(selection.selection.marker, packet.marker);
        }
    }
    assert_eq!(s.current(), Some(Layer::new(0, 1)));
}

#[test]
fn decisions_hold_for_every_packet_and_retransmission() {
    let mut stream = Stream::new(StreamConfig::new(L1T3, 2));
    let mut s = selector(2);
    let first = run_frames(&mut stream, &mut s, 12);
    // Lower the target: new frames change, retransmissions of decided ones do not.
    s.set_limits(limits(0));
    for (packet, selection) in &first {
        assert_eq!(packet.select(&mut s), *selection, "frame {}", packet.frame);
    }
}

#[test]
fn down_switch_is_immediate() {
    let mut stream = Stream::new(StreamConfig::new(L1T3, 3));
    let mut s = selector(2);
    run_frames(&mut stream, &mut s, 9);
    assert_eq!(s.current(), Some(Layer::new(0, 2)));
    s.set_limits(limits(0));
    let out = run_frames(&mut stream, &mut s, 8);
    assert_eq!(s.current(), Some(Layer::BASE));
    for frame in forwarded_frames(&out) {
        assert_eq!(
            tid_of(&out, frame),
            0,
            "frame {frame} after the down-switch"
        );
    }
    assert_eq!(forwarded_frames(&out).len(), 2);
}

#[test]
fn up_switch_waits_for_a_layer_sync_frame_of_the_next_layer() {
    let mut config = StreamConfig::new(L1T3, 4);
    config.sync_every = 3;
    config.keyframe_interval = 0;
    let mut stream = Stream::new(config);
    let mut s = selector(0);
    run_frames(&mut stream, &mut s, 6);
    s.set_limits(limits(2));
    let out = run_frames(&mut stream, &mut s, 24);
    let forwarded = forwarded_frames(&out);
    // The first frame above the base layer forwarded is a TID 1 sync frame; the first TID 2
    // one a TID 2 sync frame after it.
    let first_of = |tid: u8| {
        let frame = *forwarded.iter().find(|&&f| tid_of(&out, f) == tid).unwrap();
        let packet = &out.iter().find(|(p, _)| p.frame == frame).unwrap().0;
        (frame, packet.descriptor.temporal.unwrap().layer_sync)
    };
    let (t1, t1_sync) = first_of(1);
    let (t2, t2_sync) = first_of(2);
    assert!(t1_sync && t2_sync && t1 < t2, "{t1} {t2}");
    // Sync frames come every third base layer frame: the switch waited for one.
    assert!(t1 > 6 + 4, "switched at frame {t1}");
    assert_eq!(s.current(), Some(Layer::new(0, 2)));
    assert_eq!(s.keyframe_requests().raised(), 0);
}

#[test]
fn a_keyframe_switches_up_at_once() {
    let mut config = StreamConfig::new(L1T3, 5);
    config.sync_every = 1000;
    config.keyframe_interval = 0;
    let mut stream = Stream::new(config);
    let mut s = selector(0);
    run_frames(&mut stream, &mut s, 20);
    s.set_limits(limits(2));
    run_frames(&mut stream, &mut s, 20);
    assert_eq!(s.current(), Some(Layer::BASE), "no sync frame, no keyframe");
    stream.request_keyframe();
    let out = run_frames(&mut stream, &mut s, 4);
    assert_eq!(forwarded_frames(&out).len(), 4);
    assert_eq!(s.current(), Some(Layer::new(0, 2)));
}

#[test]
fn waits_for_a_keyframe_and_requests_one() {
    let mut config = StreamConfig::new(L1T2, 6);
    config.keyframe_interval = 0;
    let mut stream = Stream::new(config);
    stream.next_frame(); // the keyframe, lost
    let mut s = selector(1);
    let out = run_frames(&mut stream, &mut s, 6);
    assert!(forwarded_frames(&out).is_empty());
    assert_eq!(s.current(), None);
    assert!(s.keyframe_requests().waiting());
    assert!(s.keyframe_requests().take());
    assert!(!s.keyframe_requests().take(), "raised once per wait");
    stream.request_keyframe();
    let out = run_frames(&mut stream, &mut s, 3);
    assert_eq!(forwarded_frames(&out).len(), 3);
    assert!(!s.keyframe_requests().waiting());
    assert_eq!(s.keyframe_requests().raised(), 1);
}

#[test]
fn late_frames_from_before_a_switch_point_are_dropped() {
    let mut config = StreamConfig::new(L1T2, 7);
    config.keyframe_interval = 0;
    let mut stream = Stream::new(config);
    let mut s = selector(0);
    run_frames(&mut stream, &mut s, 3);
    // Frame 3 (TID 1, not a sync frame) is delayed past a keyframe that switches up.
    let late = stream.next_frame();
    s.set_limits(limits(1));
    stream.request_keyframe();
    let after = run_frames(&mut stream, &mut s, 2);
    assert_eq!(forwarded_frames(&after).len(), 2);
    assert_eq!(late[0].tid, 1);
    for packet in &late {
        assert!(!packet.select(&mut s).selection.forward);
    }
}

/// Munged picture ids of forwarded frames in order, and their TL0PICIDX.
fn munged_indexes(out: &[(Packet, Vp8Selection)]) -> Vec<(u64, u8, u16, u8)> {
    let mut seen = Vec::new();
    for (packet, selection) in out.iter().filter(|(_, s)| s.selection.forward) {
        let d = packet.munged(selection);
        let entry = (
            packet.frame,
            packet.tid,
            d.picture_id.expect("generated with one").value(),
            d.tl0_pic_idx.expect("generated with one").0,
        );
        if seen.last() != Some(&entry) {
            seen.push(entry);
        }
    }
    seen
}

fn assert_continuous(indexes: &[(u64, u8, u16, u8)], modulus: u16) {
    for pair in indexes.windows(2) {
        let [(_, _, id0, tl0_0), (frame, tid, id1, tl0_1)] = [pair[0], pair[1]];
        assert_eq!(id1, (id0 + 1) % modulus, "picture id at frame {frame}");
        let step = u8::from(tid == 0);
        assert_eq!(
            tl0_1,
            tl0_0.wrapping_add(step),
            "TL0PICIDX at frame {frame}"
        );
    }
}

#[test]
fn picture_ids_and_tl0picidx_stay_continuous_across_drops_and_wraps() {
    for (extended, modulus) in [(true, 1 << 15), (false, 1 << 7)] {
        let mut config = StreamConfig::new(L1T3, 8);
        config.extended_picture_id = extended;
        let mut stream = Stream::new(config);
        let mut s = selector(1);
        let mut out = run_frames(&mut stream, &mut s, 150);
        s.set_limits(limits(0));
        out.extend(run_frames(&mut stream, &mut s, 150));
        s.set_limits(limits(2));
        out.extend(run_frames(&mut stream, &mut s, 150));
        let indexes = munged_indexes(&out);
        assert!(indexes.len() > 200);
        assert_continuous(&indexes, modulus);
        let wrapped = indexes.windows(2).any(|w| w[1].2 < w[0].2);
        assert!(wrapped, "the picture id wrapped");
    }
}

#[test]
fn a_source_switch_continues_the_numbering() {
    let mut s = selector(2);
    let mut first = Stream::new(StreamConfig::new(L1T3, 9));
    let mut out = run_frames(&mut first, &mut s, 10);
    s.switch_source();
    let mut config = StreamConfig::new(L1T2, 10);
    config.first_picture_id = 1234;
    let mut second = Stream::new(config);
    second.next_frame(); // its keyframe is missed: the selector waits for the next one
    out.extend(run_frames(&mut second, &mut s, 3));
    assert!(s.keyframe_requests().take());
    second.request_keyframe();
    out.extend(run_frames(&mut second, &mut s, 10));
    let indexes = munged_indexes(&out);
    assert_eq!(indexes.len(), 20);
    assert_continuous(&indexes, 1 << 15);
    let key_idx: Vec<u8> = out
        .iter()
        .filter(|(p, s)| s.selection.forward && p.keyframe)
        .map(|(p, s)| p.munged(s).key_idx.unwrap().0)
        .collect();
    assert_eq!(key_idx.len(), 2);
    assert_eq!(key_idx[1], (key_idx[0] + 1) % 32, "KEYIDX continues");
}

#[test]
fn hostile_descriptors_do_not_panic() {
    let mut s = selector(3);
    let mut rng = Rng(11);
    for i in 0..5000u32 {
        let bits = rng.next_u64();
        let descriptor = Vp8Descriptor {
            picture_id: match bits % 3 {
                0 => None,
                1 => Some(PictureId::short(bits as u16)),
                _ => Some(PictureId::extended((bits >> 8) as u16)),
            },
            tl0_pic_idx: (bits & 8 != 0).then_some(Tl0PicIdx((bits >> 16) as u8)),
            temporal: (bits & 16 != 0).then_some(Vp8Temporal {
                tid: TemporalLayerId((bits >> 24) as u8),
                layer_sync: bits & 32 != 0,
            }),
            key_idx: (bits & 64 != 0).then_some(KeyIdx((bits >> 32) as u8)),
            ..Vp8Descriptor::default()
        };
        let selection = s.select(&Vp8Packet {
            sequence_number: i as u16,
            timestamp: (bits >> 40) as u32,
            marker: bits & 128 != 0,
            descriptor: &descriptor,
            keyframe: bits & 256 != 0,
        });
        if selection.selection.forward && descriptor.key_idx.is_none_or(|k| k.0 < 32) {
            let mut bytes = [0; Vp8Descriptor::MAX_SIZE];
            if let Ok(len) = descriptor.write(&mut bytes) {
                selection
                    .patch
                    .apply(&descriptor, &mut bytes[..len])
                    .unwrap();
            }
        }
        if i % 1000 == 0 {
            s.switch_source();
        }
    }
}

/// What the subscriber side observed, for the properties.
#[derive(Default)]
struct Observed {
    /// Per frame, the decision of each of its packets that reached the selector.
    decisions: HashMap<u64, Vec<Vp8Selection>>,
    /// Per forwarded frame: TID, munged picture id and TL0PICIDX.
    munged: BTreeMap<u64, (u8, u16, u8)>,
    /// Newest frame whose packet reached the selector.
    newest: Option<u64>,
    /// Keyframes whose first packet reached the selector before any later frame's.
    usable_keyframes: Vec<u64>,
}

struct Simulation {
    stream: Stream,
    network: Network<Packet>,
    selector: Vp8Selector,
    observed: Observed,
    requests: u64,
    pending_keyframe: Option<u64>,
}

/// Frame steps a keyframe request takes to reach the publisher and come back.
const REQUEST_DELAY: u64 = 2;
const FRAMES: u64 = 400;

impl Simulation {
    fn new(config: StreamConfig, conditions: NetworkConditions) -> Self {
        Self {
            stream: Stream::new(config),
            network: Network::new(config.seed ^ 0xA5A5, conditions),
            selector: Vp8Selector::new(),
            observed: Observed::default(),
            requests: 0,
            pending_keyframe: None,
        }
    }

    fn step(&mut self, step: u64) {
        if self.pending_keyframe.is_some_and(|at| at <= step) {
            self.stream.request_keyframe();
            self.pending_keyframe = None;
        }
        for packet in self.stream.next_frame() {
            self.network.send(step, packet);
        }
        for packet in self.network.arrivals(step) {
            self.deliver(step, packet);
        }
    }

    fn deliver(&mut self, step: u64, packet: Packet) {
        let selection = packet.select(&mut self.selector);
        if self.selector.keyframe_requests().take() {
            self.requests += 1;
            self.pending_keyframe.get_or_insert(step + REQUEST_DELAY);
        }
        let frame = packet.frame;
        let first_packet = !self.observed.decisions.contains_key(&frame);
        if first_packet && packet.keyframe && self.observed.newest.is_none_or(|n| frame > n) {
            self.observed.usable_keyframes.push(frame);
        }
        self.observed.newest = self.observed.newest.max(Some(frame));
        if first_packet && selection.selection.forward {
            for reference in &packet.references {
                let dropped = self
                    .observed
                    .decisions
                    .get(reference)
                    .is_some_and(|d| !d[0].selection.forward);
                assert!(
                    !dropped,
                    "frame {frame} forwarded though its reference {reference} was dropped"
                );
            }
        }
        if selection.selection.forward {
            let d = packet.munged(&selection);
            let munged = (
                packet.tid,
                d.picture_id.expect("generated with one").value(),
                d.tl0_pic_idx.expect("generated with one").0,
            );
            self.observed.munged.insert(frame, munged);
        }
        self.observed
            .decisions
            .entry(frame)
            .or_default()
            .push(selection);
    }

    fn check_no_split(&self) {
        for (frame, decisions) in &self.observed.decisions {
            assert!(
                decisions
                    .iter()
                    .all(|d| d.selection.forward == decisions[0].selection.forward
                        && d.patch == decisions[0].patch),
                "frame {frame} split: {decisions:?}"
            );
        }
    }

    /// Clean: consecutive. Otherwise: increasing, by no more than the source's step.
    fn check_numbering(&self, clean: bool) {
        let modulus = match self.stream.config.extended_picture_id {
            true => 1 << 15,
            false => 1 << 7,
        };
        let indexes: Vec<_> = self.observed.munged.iter().collect();
        for pair in indexes.windows(2) {
            let [(&f0, &(_, id0, _)), (&f1, &(_, id1, _))] = [pair[0], pair[1]];
            let step = (id1 + modulus - id0) % modulus;
            assert!(
                step >= 1 && u64::from(step) <= f1 - f0,
                "picture id {id0} -> {id1} for frames {f0} -> {f1}"
            );
        }
        if clean {
            let flat: Vec<_> = indexes
                .iter()
                .map(|&(&f, &(tid, id, tl0))| (f, tid, id, tl0))
                .collect();
            assert_continuous(&flat, modulus);
        }
    }
}

fn run(config: StreamConfig, conditions: NetworkConditions, clean: bool) {
    let mut sim = Simulation::new(config, conditions);
    let mut rng = Rng(config.seed);
    let top = *config.pattern.iter().max().expect("patterns are not empty");
    let mut target = Layer::MAX;
    let mut deadline: Option<(u64, u64, usize)> = None;
    for step in 0..FRAMES {
        if step % 37 == 0 && rng.chance(60) {
            target = Layer::new(0, rng.below(4) as u8);
            sim.selector.set_limits(LayerLimits {
                target,
                max: Layer::MAX,
            });
            let keyframes = sim.observed.usable_keyframes.len();
            deadline = Some((step + config.keyframe_interval + 8, sim.requests, keyframes));
        }
        sim.step(step);
        if let Some((at, requests, keyframes)) = deadline.filter(|&(at, _, _)| at == step) {
            let wanted = Layer::new(0, target.temporal.min(top));
            let reached = sim.selector.current() == Some(wanted);
            let keyframe_missed = sim.observed.usable_keyframes.len() == keyframes;
            assert!(
                reached || sim.requests > requests || keyframe_missed,
                "at frame {at}: target {target:?} not reached ({:?}), no keyframe request",
                sim.selector.current()
            );
            assert!(reached || !clean, "{at}: clean network, target not reached");
            deadline = None;
        }
    }
    sim.check_no_split();
    sim.check_numbering(clean);
}

fn pattern() -> impl Strategy<Value = &'static [u8]> {
    prop::sample::select(vec![L1T2, L1T3])
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(48))]

    #[test]
    fn selection_stays_decodable_through_a_bad_network(
        pattern in pattern(),
        seed in any::<u64>(),
        loss in 0..15u32,
        recovered in 0..100u32,
        reorder in 0..20u32,
        duplicate in 0..5u32,
    ) {
        let conditions = NetworkConditions { loss, recovered, reorder, duplicate };
        run(StreamConfig::new(pattern, seed), conditions, false);
    }

    #[test]
    fn on_a_clean_network_targets_are_reached_and_numbering_is_continuous(
        pattern in pattern(),
        seed in any::<u64>(),
        duplicate in 0..5u32,
    ) {
        let conditions = NetworkConditions { duplicate, ..NetworkConditions::CLEAN };
        run(StreamConfig::new(pattern, seed), conditions, true);
    }
}
