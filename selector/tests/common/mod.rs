//! Shared by the selector property tests: a seeded in-memory network (loss, late
//! retransmissions, reordering, duplicates, deterministic for a seed) and a DD subscriber.

#![allow(
    dead_code,
    reason = "each test crate that includes this module uses a different part of it"
)]

use std::collections::BTreeMap;
use std::sync::Arc;

use rtp_ext::dd::{DependencyDescriptor, FrameDependencyStructure};
use selector::dd::{DdSelector, MAX_DD_SIZE};
use selector::scalability::GeneratedPacket;
use selector::{Layer, LayerLimits, Selection};

/// The network's choices, from a seed.
pub use selector::scalability::SeededRng as Rng;

#[derive(Debug, Clone, Copy)]
pub struct NetworkConditions {
    pub loss: u32,
    /// Of lost packets, the share that a retransmission brings back later.
    pub recovered: u32,
    pub reorder: u32,
    pub duplicate: u32,
}

impl NetworkConditions {
    pub const CLEAN: Self = Self::new(0, 0, 0, 0);

    /// Percentages: packets lost, of those the share recovered later, reordered, duplicated.
    pub const fn new(loss: u32, recovered: u32, reorder: u32, duplicate: u32) -> Self {
        Self {
            loss,
            recovered,
            reorder,
            duplicate,
        }
    }
}

/// Packets in flight, keyed by the step at which they arrive.
pub struct Network<P> {
    rng: Rng,
    conditions: NetworkConditions,
    in_flight: BTreeMap<(u64, u64), P>,
    sent: u64,
}

impl<P: Clone> Network<P> {
    pub fn new(seed: u64, conditions: NetworkConditions) -> Self {
        Self {
            rng: Rng(seed),
            conditions,
            in_flight: BTreeMap::new(),
            sent: 0,
        }
    }

    /// Sends `packet` at `step`: it is lost, arrives now, or arrives a few steps later (a
    /// reordering or a retransmission), maybe twice.
    pub fn send(&mut self, step: u64, packet: P) {
        let c = self.conditions;
        let delay = if self.rng.chance(c.loss) {
            if !self.rng.chance(c.recovered) {
                return;
            }
            3 + self.rng.below(30)
        } else if self.rng.chance(c.reorder) {
            1 + self.rng.below(4)
        } else {
            0
        };
        if self.rng.chance(c.duplicate) {
            let at = step + self.rng.below(6);
            self.schedule(at, packet.clone());
        }
        self.schedule(step + delay, packet);
    }

    fn schedule(&mut self, at: u64, packet: P) {
        self.sent += 1;
        self.in_flight.insert((at, self.sent), packet);
    }

    /// Packets arriving at `step`, in arrival order.
    pub fn arrivals(&mut self, step: u64) -> Vec<P> {
        let later = self.in_flight.split_off(&(step + 1, 0));
        std::mem::replace(&mut self.in_flight, later)
            .into_values()
            .collect()
    }
}

/// One subscriber's DD selection over generated packets: its selector, the structure the
/// stream last attached, and every forwarded packet's rewritten DD read back.
pub struct DdSubscriber {
    pub selector: DdSelector,
    pub structure: Arc<FrameDependencyStructure>,
    /// Keyframe requests raised so far.
    pub requests: u64,
}

/// One packet's decision, with its rewritten DD when forwarded.
pub struct Decided {
    pub selection: Selection,
    pub rewritten: Option<DependencyDescriptor>,
    /// A keyframe request was raised with this packet.
    pub requested: bool,
}

impl DdSubscriber {
    pub fn new(structure: Arc<FrameDependencyStructure>, target: Layer) -> Self {
        let mut selector = DdSelector::new();
        selector.set_limits(LayerLimits {
            target,
            max: Layer::MAX,
        });
        Self {
            selector,
            structure,
            requests: 0,
        }
    }

    pub fn select(&mut self, packet: &GeneratedPacket) -> Decided {
        if let Some(s) = &packet.descriptor.attached_structure {
            self.structure = s.clone();
        }
        let mut buf = [0u8; MAX_DD_SIZE];
        let selection = self
            .selector
            .select(&packet.dd_packet(&self.structure), &mut buf)
            .expect("rewrites");
        let requested = self.selector.keyframe_requests().take();
        self.requests += u64::from(requested);
        let rewritten = selection.forward.then(|| {
            DependencyDescriptor::parse(&buf[..selection.descriptor_len], Some(&self.structure))
                .expect("the rewritten DD parses")
        });
        Decided {
            selection,
            rewritten,
            requested,
        }
    }
}
