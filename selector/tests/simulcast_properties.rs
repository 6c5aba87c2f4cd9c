//! Simulcast selection on three generated L1T3 streams (each stream's DD says spatial id 0, as
//! browsers send it), through a seeded lossy, reordering network, with subscriber target
//! changes and the publisher stopping and resuming its top stream:
//! - the subscriber receives one stream at a time, and enters a stream only at a keyframe;
//! - within a stream the DD selection stays decodable (no frame forwarded whose reference was
//!   seen and dropped) and no frame is split while the stream is current (leaving a stream cuts
//!   its frame in flight by design: the new stream starts with a keyframe);
//! - after a target change the wanted stream is reached within a keyframe interval, or a
//!   keyframe request was raised for it.

use std::collections::HashMap;
use std::sync::Arc;

use common::{DdSubscriber, Network, NetworkConditions, Rng};
use proptest::prelude::*;
use rtp_ext::dd::FrameDependencyStructure;
use selector::scalability::{GeneratedPacket, GeneratorConfig, ScalabilityMode, StreamGenerator};
use selector::simulcast::{SimulcastSelector, StreamChoice};
use selector::{Layer, LayerLimits};

mod common;

const STREAMS: u8 = 3;
const KEYFRAME_INTERVAL: u64 = 40;
const TEMPORAL_UNITS: u64 = 360;

#[derive(Clone)]
struct StreamPacket {
    stream: u8,
    packet: GeneratedPacket,
}

struct Simulation {
    generators: Vec<StreamGenerator>,
    structures: Vec<Arc<FrameDependencyStructure>>,
    network: Network<StreamPacket>,
    simulcast: SimulcastSelector,
    inner: DdSubscriber,
    requests: Vec<u64>,
    pending_keyframe: Option<(u8, u64)>,
    /// Per (stream, frame): decisions of its packets that reached the selector. Entering a
    /// stream at keyframe K forgets its frames before K (a past stay), not those after K that
    /// arrived early.
    decisions: HashMap<(u8, u64), Vec<bool>>,
    /// Forwarded packets' streams, in order.
    forwarded_streams: Vec<u8>,
}

impl Simulation {
    fn new(seed: u64, conditions: NetworkConditions) -> Self {
        let generators: Vec<_> = (0..STREAMS)
            .map(|s| {
                let config = GeneratorConfig {
                    keyframe_interval_tus: KEYFRAME_INTERVAL as u32,
                    seed: seed.wrapping_add(u64::from(s)),
                    ssrc: 1000 + u32::from(s),
                    first_seq: (seed >> (16 * s)) as u16,
                    ..Default::default()
                };
                StreamGenerator::new(ScalabilityMode::L1T3, config)
            })
            .collect();
        let structures: Vec<_> = generators.iter().map(|g| g.structure().clone()).collect();
        let inner = DdSubscriber::new(structures[0].clone(), Layer::MAX);
        Self {
            generators,
            structures,
            network: Network::new(seed ^ 0x5A5A, conditions),
            simulcast: SimulcastSelector::new(STREAMS),
            inner,
            requests: vec![0; usize::from(STREAMS)],
            pending_keyframe: None,
            decisions: HashMap::new(),
            forwarded_streams: Vec::new(),
        }
    }

    fn step(&mut self, tu: u64, sending: u8) {
        if let Some((stream, at)) = self.pending_keyframe.filter(|&(_, at)| at <= tu) {
            self.generators[usize::from(stream)].request_keyframe();
            self.pending_keyframe = None;
            let _ = at;
        }
        for stream in 0..sending {
            loop {
                let packet = self.generators[usize::from(stream)]
                    .next()
                    .expect("endless");
                let end = packet.marker;
                self.network.send(tu, StreamPacket { stream, packet });
                if end {
                    break;
                }
            }
        }
        for arrived in self.network.arrivals(tu) {
            self.deliver(tu, arrived);
        }
    }

    fn deliver(&mut self, tu: u64, StreamPacket { stream, packet }: StreamPacket) {
        let s = usize::from(stream);
        if let Some(structure) = &packet.descriptor.attached_structure {
            self.structures[s] = structure.clone();
        }
        let keyframe_start = packet.keyframe && packet.start_of_frame();
        let choice = self
            .simulcast
            .choose(stream, packet.sequence_number, keyframe_start);
        if self.simulcast.keyframe_requests().take() {
            let wanted = self
                .simulcast
                .requested_stream()
                .expect("a request names its stream");
            self.requests[usize::from(wanted)] += 1;
            self.pending_keyframe.get_or_insert((wanted, tu + 2));
        }
        let forward = match choice {
            StreamChoice::Drop => false,
            StreamChoice::SwitchTo => {
                assert!(keyframe_start, "stream {stream} entered off a keyframe");
                let keyframe = packet.frame_number;
                self.decisions
                    .retain(|&(st, f), _| st != stream || f >= keyframe);
                self.inner = DdSubscriber::new(self.structures[s].clone(), Layer::MAX);
                self.inner
                    .selector
                    .set_limits(self.simulcast.stream_limits());
                self.select_inner(&packet, s)
            }
            StreamChoice::Forward => {
                self.inner
                    .selector
                    .set_limits(self.simulcast.stream_limits());
                self.select_inner(&packet, s)
            }
        };
        if forward {
            self.forwarded_streams.push(stream);
            assert_eq!(self.simulcast.current(), Some(stream));
        }
        let entry = self
            .decisions
            .entry((stream, packet.frame_number))
            .or_default();
        if choice != StreamChoice::Drop || entry.is_empty() {
            entry.push(forward);
        }
    }

    fn select_inner(&mut self, packet: &GeneratedPacket, stream: usize) -> bool {
        let selection = self.inner.select(packet).selection;
        // The first packet of a frame decides it: none of its references may have been seen
        // and dropped in this stream.
        let key = |frame: u64| (stream as u8, frame);
        if selection.forward && !self.decisions.contains_key(&key(packet.frame_number)) {
            for r in packet.references.iter() {
                let dropped = self.decisions.get(&key(*r)).is_some_and(|d| !d[0]);
                assert!(
                    !dropped,
                    "stream {stream} frame {} forwarded over dropped {r}",
                    packet.frame_number
                );
            }
        }
        selection.forward
    }
}

fn run(seed: u64, conditions: NetworkConditions, clean: bool) {
    let mut sim = Simulation::new(seed, conditions);
    let mut rng = Rng(seed);
    let mut sending = STREAMS;
    let mut target = Layer::MAX;
    let mut deadline: Option<(u64, u64)> = None;
    for tu in 0..TEMPORAL_UNITS {
        if tu % 29 == 0 && rng.chance(70) {
            target = Layer::new(rng.below(3) as u8, rng.below(3) as u8);
            sim.simulcast.set_limits(LayerLimits {
                target,
                max: Layer::MAX,
            });
            deadline = Some((tu + KEYFRAME_INTERVAL + 6, sim.requests.iter().sum()));
        }
        if tu % 71 == 0 && rng.chance(40) {
            sending = if sending == STREAMS {
                STREAMS - 1
            } else {
                STREAMS
            };
            sim.simulcast.set_active_streams((1 << sending) - 1);
            deadline = Some((tu + KEYFRAME_INTERVAL + 6, sim.requests.iter().sum()));
        }
        sim.step(tu, sending);
        if let Some((at, before)) = deadline.filter(|&(at, _)| at == tu) {
            let wanted = target.spatial.min(sending - 1);
            let reached = sim.simulcast.current() == Some(wanted);
            // A request raised in this window, or one raised earlier that is still waiting.
            let requested = sim.requests.iter().sum::<u64>() > before
                || sim.simulcast.keyframe_requests().waiting();
            assert!(
                reached || requested,
                "TU {at}: stream {wanted} not reached, no request"
            );
            if clean {
                assert!(
                    reached,
                    "clean network: stream {wanted} reached within a keyframe interval"
                );
            }
            deadline = None;
        }
    }
    for ((stream, frame), d) in &sim.decisions {
        assert!(
            d.iter().all(|&x| x == d[0]),
            "stream {stream} frame {frame} split"
        );
    }
    let switches = sim
        .forwarded_streams
        .windows(2)
        .filter(|w| w[0] != w[1])
        .count();
    assert!(
        switches <= 40,
        "one stream at a time, switching only on target changes: {switches}"
    );
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(32))]

    #[test]
    fn simulcast_switches_cleanly_through_a_bad_network(
        seed in any::<u64>(),
        loss in 0..12u32,
        recovered in 0..100u32,
        reorder in 0..15u32,
        duplicate in 0..5u32,
    ) {
        run(seed, NetworkConditions { loss, recovered, reorder, duplicate }, false);
    }

    #[test]
    fn simulcast_reaches_every_target_on_a_clean_network(seed in any::<u64>()) {
        run(seed, NetworkConditions::CLEAN, true);
    }
}
