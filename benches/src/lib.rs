//! Strata's benchmark cases, shared by the criterion benches (`benches/`) and the
//! allocation-counting harness (`cargo run --release -p benches --bin allocs`). Each case is
//! defined once here; the drivers only run it.

pub mod alloc_counter;
pub mod bwe;
pub mod client;
pub mod codec;
pub mod data_relay;
pub mod data_room;
pub mod dd;
pub mod engine;
pub mod fixtures;
/// The load test reads `/proc` and waits on its sockets with epoll: Linux only.
#[cfg(target_os = "linux")]
pub mod load;
pub mod node;
pub mod node_core;
pub mod rtp;
pub mod select;
pub mod select_descriptors;

/// One benchmark: a name in the suite's `area/what/variant` form and the operation to repeat.
/// The operation owns its prepared state, so setup cost stays out of the measurement.
pub struct Case {
    pub name: &'static str,
    /// Units of work one operation does (subscriber packets of a fan-out), for per-unit figures.
    pub units: u64,
    pub op: Box<dyn FnMut()>,
    /// For a case that replays a stream: how its operations go through it.
    pub stream: Option<Stream>,
}

/// A case replaying a stream of packets, one per operation, from the stream's start. The
/// allocation test counts every operation of it by what its packet is.
#[derive(Debug, Clone, Default)]
pub struct Stream {
    /// Operations before the case starts the stream over on fresh state (a new router,
    /// DownTrack or session, built by that operation).
    pub pass: usize,
    /// The operations of a pass whose packet carries a keyframe's dependency structure.
    pub structures: Vec<usize>,
}

impl std::fmt::Debug for Case {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Case")
            .field("name", &self.name)
            .finish_non_exhaustive()
    }
}

impl Case {
    pub fn new(name: &'static str, op: impl FnMut() + 'static) -> Self {
        Self::per_unit(name, 1, op)
    }

    pub fn per_unit(name: &'static str, units: u64, op: impl FnMut() + 'static) -> Self {
        Self {
            name,
            units,
            op: Box::new(op),
            stream: None,
        }
    }

    /// Marks the case as replaying `stream`.
    pub fn over(self, stream: Stream) -> Self {
        Self {
            stream: Some(stream),
            ..self
        }
    }
}

/// Every case of the suite, in report order.
pub fn all_cases() -> Vec<Case> {
    let mut cases = forwarding_cases();
    cases.extend(node_cases());
    cases
}

/// The cases of the wire formats, selection and the engine.
pub fn forwarding_cases() -> Vec<Case> {
    let mut cases = dd::cases();
    cases.extend(rtp::cases());
    cases.extend(codec::cases());
    cases.extend(select::cases());
    cases.extend(select_descriptors::cases());
    cases.extend(engine::cases());
    cases.extend(bwe::cases());
    cases
}

/// The cases of the node: SRTP, its core's paths and the data relay.
pub fn node_cases() -> Vec<Case> {
    let mut cases = node::cases();
    cases.extend(node_core::cases());
    cases.extend(data_relay::cases());
    cases
}
