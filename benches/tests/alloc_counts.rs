//! Exact allocation counts of every benchmark case, asserted. Counts are deterministic (no
//! timing involved), so a new allocation on a hot path fails here.

use benches::alloc_counter::{AllocCount, CountingAllocator};

#[global_allocator]
static ALLOCATOR: CountingAllocator = CountingAllocator;

/// Expected allocations per operation, by case name.
const EXPECTED: &[(&str, u64)] = &[
    ("dd/parse/delta3", 0),
    ("dd/parse/delta5_mask", 0),
    // The template list and the `Arc` that shares the structure.
    ("dd/parse/keyframe95", 2),
    ("dd/marshal/delta_into", 0),
    // The `Bytes` buffer itself.
    ("dd/marshal/delta_bytes", 1),
    ("dd/marshal/mask_into", 0),
    ("dd/marshal/keyframe95_into", 0),
    ("rtp/parse/header_with_6_ext", 0),
    ("rtp/write/header_with_dd", 0),
    ("vp8/munge", 0),
    ("vp9/parse", 0),
    ("select/dd/l3t3_delta", 0),
    // The rewritten DD as `Bytes`.
    ("select/dd/l3t3_delta_bytes", 1),
    ("select/dd/l3t3_keyframe", 0),
    ("select/simulcast", 0),
    ("select/vp8", 0),
    ("select/vp9", 0),
    ("receive/av1_l3t3", 0),
    ("forward/av1_l3t3/subscriber", 0),
    ("forward/vp8/subscriber", 0),
    ("forward/h264/subscriber", 0),
    ("forward/opus/subscriber", 0),
    ("fanout/av1_l3t3/1", 0),
    ("fanout/av1_l3t3/10", 0),
    ("fanout/av1_l3t3/100", 0),
    ("fanout/av1_l3t3/1000", 0),
    ("nack/answer/av1_l3t3", 0),
    // The SRTP library's encrypt: the parsed header's extension list and its three extension
    // payloads, the IV, the AEAD's ciphertext and the output buffer.
    ("node/egress_srtp/library", 7),
    ("node/egress_srtp/in_place", 0),
    ("node/protect_srtp/library", 7),
    ("node/protect_srtp/in_place", 0),
];

#[test]
fn every_case_allocates_exactly_as_expected() {
    let cases = benches::all_cases();
    assert_eq!(
        cases.len(),
        EXPECTED.len(),
        "a case without an expected count"
    );
    for mut case in cases {
        let &(_, expected) = EXPECTED
            .iter()
            .find(|(name, _)| *name == case.name)
            .unwrap_or_else(|| panic!("no expected count for {}", case.name));
        // Warm up: the writer validates and caches a structure on first use.
        (case.op)();
        let runs = 100;
        let counted = AllocCount::during(|| (0..runs).for_each(|_| (case.op)()));
        assert_eq!(counted.allocs, expected * runs, "{}", case.name);
    }
}
