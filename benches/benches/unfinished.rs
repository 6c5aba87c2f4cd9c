//! What a hostile data channel sender costs the node: one-byte fragments of messages it never
//! finishes, at the SCTP layer of the data relay (`sfu::node::datachannel`). Each iteration
//! is one sender's whole attempt, on a relay set up outside the measurement.

use benches::data_relay::RelayRoom;
use criterion::{criterion_group, criterion_main, BatchSize, Criterion};

/// The chunks of one attempt, and how many a packet carries (a 1,200-byte packet holds 60).
const CHUNKS: usize = 40_000;
const PER_PACKET: usize = 50;

fn unfinished(c: &mut Criterion) {
    let mut group = c.benchmark_group("data/unfinished");
    group.sample_size(10);
    for (name, unordered) in [("ordered", false), ("unordered", true)] {
        group.bench_function(name, |b| {
            b.iter_batched(
                || RelayRoom::new(0),
                |mut room| room.send_unfinished(CHUNKS, PER_PACKET, unordered),
                BatchSize::PerIteration,
            );
        });
    }
    group.finish();
}

criterion_group!(suite, unfinished);
criterion_main!(suite);
