//! Selection cases: one packet through a subscriber's selector, with the DD rewrite.

use std::hint::black_box;
use std::sync::Arc;

use rtp_ext::dd::FrameDependencyStructure;
use selector::dd::{DdSelector, MAX_DD_SIZE};
use selector::scalability::{GeneratedPacket, GeneratorConfig, ScalabilityMode, StreamGenerator};
use selector::simulcast::{SimulcastSelector, StreamChoice};
use selector::{Layer, LayerLimits};

use crate::Case;

/// Packets replayed per pass; the selector starts afresh at each pass (no allocation), since
/// frame numbers repeat.
const PASS_PACKETS: usize = 20_000;

pub fn cases() -> Vec<Case> {
    vec![
        dd_delta("select/dd/l3t3_delta", false),
        dd_delta("select/dd/l3t3_delta_bytes", true),
        dd_keyframe(),
        simulcast(),
    ]
}

/// A steady-state L3T3 stream after its keyframe.
fn l3t3_stream() -> (Vec<GeneratedPacket>, Arc<FrameDependencyStructure>) {
    let config = GeneratorConfig {
        keyframe_interval_tus: 0,
        ..Default::default()
    };
    let mut generator = StreamGenerator::new(ScalabilityMode::L3T3, config);
    let structure = generator.structure().clone();
    let packets = generator.by_ref().take(PASS_PACKETS).collect();
    (packets, structure)
}

fn selector_at(target: Layer) -> DdSelector {
    let mut selector = DdSelector::new();
    selector.set_limits(LayerLimits {
        target,
        max: Layer::MAX,
    });
    selector
}

/// One L3T3 delta packet through a subscriber at S2T2 (every packet forwarded and rewritten),
/// the DD written into a buffer, or into a new `Bytes`.
fn dd_delta(name: &'static str, as_bytes: bool) -> Case {
    let (packets, structure) = l3t3_stream();
    let mut selector = selector_at(Layer::MAX);
    let mut next = 0;
    let mut buf = [0u8; MAX_DD_SIZE];
    Case::new(name, move || {
        if next == packets.len() {
            next = 0;
            selector = selector_at(Layer::MAX);
        }
        let p = &packets[next];
        next += 1;
        let packet = p.dd_packet(&structure);
        if as_bytes {
            black_box(selector.select_bytes(black_box(&packet))).expect("rewrites");
        } else {
            black_box(selector.select(black_box(&packet), &mut buf)).expect("rewrites");
        }
    })
}

/// The first packet of an L3T3 keyframe (95-byte structure attached), a new frame each time.
fn dd_keyframe() -> Case {
    let (packets, structure) = l3t3_stream();
    let mut keyframe = packets[0].clone();
    assert!(keyframe.descriptor.attached_structure.is_some());
    let mut selector = selector_at(Layer::MAX);
    let mut buf = [0u8; MAX_DD_SIZE];
    Case::new("select/dd/l3t3_keyframe", move || {
        keyframe.descriptor.frame_number = keyframe.descriptor.frame_number.wrapping_add(1);
        let packet = keyframe.dd_packet(&structure);
        black_box(selector.select(black_box(&packet), &mut buf)).expect("rewrites");
    })
}

/// Three interleaved L1T3 simulcast streams; the subscriber takes the middle one at T1: one
/// packet through the stream choice and, for the chosen stream, DD selection.
fn simulcast() -> Case {
    let streams: Vec<_> = (0..3u8)
        .map(|s| {
            let config = GeneratorConfig {
                keyframe_interval_tus: 0,
                ssrc: u32::from(s),
                ..Default::default()
            };
            StreamGenerator::new(ScalabilityMode::L1T3, config)
        })
        .collect();
    let structure = streams[0].structure().clone();
    let mut packets = Vec::with_capacity(PASS_PACKETS);
    let mut streams: Vec<_> = streams.into_iter().map(|g| g.peekable()).collect();
    while packets.len() < PASS_PACKETS {
        for (s, g) in streams.iter_mut().enumerate() {
            packets.push((s as u8, g.next().expect("endless")));
        }
    }
    let limits = LayerLimits {
        target: Layer::new(1, 1),
        max: Layer::MAX,
    };
    let fresh = move || {
        let mut simulcast = SimulcastSelector::new(3);
        simulcast.set_limits(limits);
        (simulcast, DdSelector::new())
    };
    let (mut simulcast, mut inner) = fresh();
    let mut next = 0;
    let mut buf = [0u8; MAX_DD_SIZE];
    Case::new("select/simulcast", move || {
        if next == packets.len() {
            next = 0;
            (simulcast, inner) = fresh();
        }
        let (stream, p) = &packets[next];
        next += 1;
        let keyframe_start = p.keyframe && p.start_of_frame();
        match simulcast.choose(*stream, p.sequence_number, keyframe_start) {
            StreamChoice::Drop => return,
            StreamChoice::SwitchTo => {
                inner = DdSelector::new();
                inner.set_limits(simulcast.stream_limits());
            }
            StreamChoice::Forward => {}
        }
        let packet = p.dd_packet(&structure);
        black_box(inner.select(black_box(&packet), &mut buf)).expect("rewrites");
    })
}
