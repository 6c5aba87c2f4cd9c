//! Exact allocation counts of every benchmark case, asserted for each operation. Counts are
//! deterministic (no timing involved), so a new allocation on a hot path fails here, however
//! rarely it happens within the operations counted.

use std::panic::resume_unwind;

use benches::alloc_counter::{AllocCount, CountingAllocator};
use benches::Case;

#[global_allocator]
static ALLOCATOR: CountingAllocator = CountingAllocator;

/// Allocations of one operation: any operation, and for a stream case one whose packet carries
/// a keyframe's dependency structure.
#[derive(Debug, Clone, Copy)]
struct Budget {
    each: u64,
    structure: u64,
    /// Allocations an operation may add once in a while, by growing a table of a library's
    /// that is seeded at random (see `data_relay`); 0 for every case of our own.
    growth: u64,
}

const fn each(each: u64) -> Budget {
    Budget {
        each,
        structure: each,
        growth: 0,
    }
}

/// Of the operations counted, at most one in this many may use its budget's `growth`.
const GROWTH_RARITY: usize = 100;

/// The receiver's parse of a keyframe's structure: its template list and the `Arc` that
/// shares it.
const PARSED_STRUCTURE: u64 = 2;
/// A packet through the engine to any number of subscribers: nothing per subscriber, a
/// keyframe's packet included (each DownTrack keeps its large DD in slots of its own).
const FANOUT: Budget = Budget {
    each: 0,
    structure: PARSED_STRUCTURE,
    growth: 0,
};

/// A publisher's packet through the node: the buffer it is decrypted in, which the engine
/// keeps and every subscriber's payload shares, and the reference count `Bytes` shares it
/// under. A datagram a reader copied to hand it over is that buffer: the same two.
const KEPT_PACKET: u64 = 2;

/// One publisher packet through the node's core to any number of viewers: nothing per
/// viewer.
const NODE_PATH: Budget = Budget {
    each: KEPT_PACKET,
    structure: KEPT_PACKET + PARSED_STRUCTURE,
    growth: 0,
};

/// One data channel message relayed to `receivers` at the SCTP layer
/// (`data_relay_allocs.rs` takes it apart): the message's own cost, and per receiver the
/// stack's chunks, packets and SACK, nothing of the relay's. The stack keeps each
/// association's chunks in flight in a std `HashMap` keyed by TSN (random hash seed, random
/// initial TSN): every chunk sent is inserted and every one acknowledged removed, and where
/// the removals leave tombstones depends on the seed, so now and then the table grows (one
/// allocation, then the larger table stays) in a few operations of a thousand. Each
/// association (the sender's and each receiver's) may grow its table once in an operation.
const fn data_relay(message: u64, write: u64, receivers: u64) -> Budget {
    let shared = if receivers > 0 { 1 } else { 0 };
    let each = message + shared + receivers * (write + 3);
    Budget {
        each,
        structure: each,
        growth: receivers + 1,
    }
}

/// Expected allocations per operation, by case name.
const EXPECTED: &[(&str, Budget)] = &[
    ("dd/parse/delta3", each(0)),
    ("dd/parse/delta5_mask", each(0)),
    // The template list and the `Arc` that shares the structure.
    ("dd/parse/keyframe95", each(PARSED_STRUCTURE)),
    ("dd/marshal/delta_into", each(0)),
    // The `Bytes` buffer itself.
    ("dd/marshal/delta_bytes", each(1)),
    ("dd/marshal/mask_into", each(0)),
    ("dd/marshal/keyframe95_into", each(0)),
    ("rtp/parse/header_with_6_ext", each(0)),
    ("rtp/write/header_with_dd", each(0)),
    ("vp8/munge", each(0)),
    ("vp9/parse", each(0)),
    ("select/dd/l3t3_delta", each(0)),
    // The rewritten DD as `Bytes`.
    ("select/dd/l3t3_delta_bytes", each(1)),
    ("select/dd/l3t3_keyframe", each(0)),
    ("select/simulcast", each(0)),
    ("select/vp8", each(0)),
    ("select/vp9", each(0)),
    ("receive/av1_l3t3", FANOUT),
    // A keyframe's packets start each pass (on a fresh DownTrack, not counted): the stream
    // test in `engine_stream_allocs.rs` counts keyframes through a DownTrack.
    ("forward/av1_l3t3/subscriber", each(0)),
    ("forward/vp8/subscriber", each(0)),
    ("forward/h264/subscriber", each(0)),
    ("forward/opus/subscriber", each(0)),
    ("fanout/av1_l3t3/1", FANOUT),
    ("fanout/av1_l3t3/10", FANOUT),
    ("fanout/av1_l3t3/100", FANOUT),
    ("fanout/av1_l3t3/1000", FANOUT),
    // Stamping, the send history, the pacer and the timers add none.
    ("paced/av1_l3t3/100", FANOUT),
    ("nack/answer/av1_l3t3", each(0)),
    // The send history is preallocated once; the results `Vec` keeps its capacity.
    ("bwe/send_record", each(0)),
    ("bwe/feedback", each(0)),
    // SRTP in place, per profile and direction (`srtp_allocs.rs` covers RTCP and rollovers).
    ("node/egress_srtp/in_place", each(0)),
    ("node/egress_srtp/batched", each(0)),
    ("node/egress_srtp/batched_fanout", each(0)),
    ("node/protect_srtp/gcm", each(0)),
    ("node/protect_srtp/gcm256", each(0)),
    ("node/protect_srtp/aes_cm", each(0)),
    ("node/unprotect_srtp/gcm", each(0)),
    ("node/unprotect_srtp/gcm256", each(0)),
    ("node/unprotect_srtp/aes_cm", each(0)),
    // The whole path through the core, SRTP both ways: each viewer's datagram is written,
    // protected and polled in place.
    ("node/ingress/av1_l3t3", NODE_PATH),
    ("node/ingress/handed_over/av1_l3t3", NODE_PATH),
    ("node/fanout/av1_l3t3/8", NODE_PATH),
    ("node/fanout/av1_l3t3/100", NODE_PATH),
    ("data/relay/100B/0", data_relay(11, 10, 0)),
    ("data/relay/100B/1", data_relay(11, 10, 1)),
    ("data/relay/100B/10", data_relay(11, 10, 10)),
    ("data/relay/100B/50", data_relay(11, 10, 50)),
    ("data/relay/16KiB/0", data_relay(122, 130, 0)),
    ("data/relay/16KiB/1", data_relay(122, 130, 1)),
    ("data/relay/16KiB/10", data_relay(122, 130, 10)),
    ("data/relay/16KiB/50", data_relay(122, 130, 50)),
];

/// Operations counted of a case repeating one input, after one that warms it up (the first
/// send on a socket, a writer's first use).
const REPEATED_OPS: usize = 1_000;
/// Operations counted of a stream case, from the stream's first packet: two of the L3T3
/// stream's keyframe intervals (300 temporal units, about 1,800 packets), several passes of
/// the cases that start over sooner.
const STREAM_OPS: usize = 4_000;

/// Allocations of each of the first `ops` operations of `case`.
fn per_op(case: &mut Case, ops: usize) -> Vec<u64> {
    let mut counts = Vec::with_capacity(ops);
    for _ in 0..ops {
        counts.push(AllocCount::during(|| (case.op)()).allocs);
    }
    counts
}

/// Where `counts` differ from `budget`, as (operation, allocations, expected).
fn over_budget(case: &mut Case, budget: Budget) -> Vec<(usize, u64, u64)> {
    let Some(stream) = case.stream.clone() else {
        (case.op)();
        let counts = per_op(case, REPEATED_OPS);
        // An operation over its budget is wrong unless the budget allows growth and such
        // operations stay rare.
        let grown = counts.iter().filter(|&&n| n > budget.each).count();
        let rare = grown * GROWTH_RARITY <= REPEATED_OPS;
        let allowed = |n: u64| {
            n == budget.each || (rare && n > budget.each && n - budget.each <= budget.growth)
        };
        return (counts.iter().enumerate())
            .filter(|&(_, &n)| !allowed(n))
            .map(|(i, &n)| (i + 1, n, budget.each))
            .collect();
    };
    let counts = per_op(case, STREAM_OPS);
    let mut wrong = Vec::new();
    let mut structures = 0;
    for (i, &n) in counts.iter().enumerate() {
        // The operation that starts a pass builds the fresh state it runs on: setup, not
        // the stream's cost.
        if i % stream.pass == 0 {
            continue;
        }
        let expected = if stream.structures.contains(&(i % stream.pass)) {
            structures += 1;
            budget.structure
        } else {
            budget.each
        };
        if n != expected {
            wrong.push((i, n, expected));
        }
    }
    let structured = stream.structures.iter().any(|&s| s != 0 && s < STREAM_OPS);
    assert!(
        !structured || structures > 0,
        "{}: no keyframe counted",
        case.name
    );
    wrong
}

#[test]
fn every_case_allocates_exactly_as_expected() {
    // The two halves of the suite, each built and counted on a thread of its own (the counts
    // are per thread), side by side: the test takes half the time.
    let checked: Vec<&str> = std::thread::scope(|scope| {
        let halves = [
            benches::forwarding_cases as fn() -> Vec<Case>,
            benches::node_cases,
        ];
        let running = halves.map(|cases| scope.spawn(move || check(cases())));
        (running.into_iter())
            .flat_map(|half| half.join().unwrap_or_else(|panic| resume_unwind(panic)))
            .collect()
    });
    assert_eq!(
        checked.len(),
        EXPECTED.len(),
        "an expected count without a case"
    );
}

/// Each of `cases` counted against its budget; their names.
fn check(cases: Vec<Case>) -> Vec<&'static str> {
    let mut names = Vec::with_capacity(cases.len());
    for mut case in cases {
        let &(_, budget) = EXPECTED
            .iter()
            .find(|(name, _)| *name == case.name)
            .unwrap_or_else(|| panic!("no expected count for {}", case.name));
        let wrong = over_budget(&mut case, budget);
        assert!(
            wrong.is_empty(),
            "{}: (operation, allocations, expected) {:?}",
            case.name,
            &wrong[..wrong.len().min(20)]
        );
        names.push(case.name);
    }
    names
}
