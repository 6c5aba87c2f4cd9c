//! Allocation-counting harness: for every benchmark case, allocations and bytes per operation
//! (exact, from a counting global allocator) and nanoseconds per operation (wall clock).
//!
//! `cargo run --release -p benches --bin allocs -- [--json] [--ops N] [FILTER]`
//!
//! `--ops N` times exactly N operations instead of a fixed wall-clock budget, so that an
//! instruction counter (`valgrind --tool=callgrind`) sees the same work on every run.

use std::time::{Duration, Instant};

use benches::alloc_counter::{AllocCount, CountingAllocator};
use benches::{all_cases, Case};

#[global_allocator]
static ALLOCATOR: CountingAllocator = CountingAllocator;

/// Operations run before measuring, so lazily built state (caches, first-use allocations) is
/// not charged to the steady state.
const WARMUP_OPS: u64 = 10_000;
/// Operations whose allocations are counted.
const COUNTED_OPS: u64 = 10_000;
/// Wall-clock time spent per case on timing.
const TIMING_BUDGET: Duration = Duration::from_millis(400);

struct Report {
    name: &'static str,
    ns_per_op: f64,
    allocs_per_op: f64,
    bytes_per_op: f64,
    /// Units of work per op (subscriber packets of a fan-out).
    units: u64,
}

impl Report {
    fn ns_per_unit(&self) -> f64 {
        self.ns_per_op / self.units as f64
    }
}

fn main() {
    let mut json = false;
    let mut filter = None;
    let mut fixed_ops = None;
    let mut args = std::env::args().skip(1);
    while let Some(arg) = args.next() {
        match arg.as_str() {
            "--json" => json = true,
            "--ops" => fixed_ops = args.next().and_then(|n| n.parse().ok()),
            "-h" | "--help" => {
                println!("usage: allocs [--json] [--ops N] [FILTER]");
                return;
            }
            other => filter = Some(other.to_owned()),
        }
    }
    if !json {
        println!(
            "{:<36} {:>10} {:>10} {:>10} {:>10} {:>14}",
            "name", "ns/op", "allocs/op", "B/op", "ns/unit", "units/s"
        );
    }
    let selected = all_cases()
        .into_iter()
        .filter(|c| filter.as_deref().is_none_or(|f| c.name.contains(f)));
    for case in selected {
        let r = measure(case, fixed_ops);
        if json {
            let mut line = serde_json::json!({
                "name": r.name,
                "ns_per_op": round1(r.ns_per_op),
                "allocs_per_op": r.allocs_per_op,
                "bytes_per_op": r.bytes_per_op,
            });
            if r.units > 1 {
                line["units_per_op"] = r.units.into();
                line["ns_per_unit"] = round1(r.ns_per_unit()).into();
                line["units_per_second"] = (1e9 / r.ns_per_unit()).round().into();
            }
            println!("{line}");
        } else {
            println!(
                "{:<36} {:>10.1} {:>10} {:>10} {:>10.1} {:>14.0}",
                r.name,
                r.ns_per_op,
                r.allocs_per_op,
                r.bytes_per_op,
                r.ns_per_unit(),
                1e9 / r.ns_per_unit()
            );
        }
    }
}

fn round1(x: f64) -> f64 {
    (x * 10.0).round() / 10.0
}

fn measure(mut case: Case, fixed_ops: Option<u64>) -> Report {
    for _ in 0..WARMUP_OPS {
        (case.op)();
    }
    let counted = AllocCount::during(|| {
        for _ in 0..COUNTED_OPS {
            (case.op)();
        }
    });
    let mut ops = 0u64;
    let start = Instant::now();
    while fixed_ops.map_or(start.elapsed() < TIMING_BUDGET, |n| ops < n) {
        for _ in 0..1_000 {
            (case.op)();
        }
        ops += 1_000;
    }
    let elapsed = start.elapsed();
    Report {
        name: case.name,
        ns_per_op: elapsed.as_nanos() as f64 / ops as f64,
        allocs_per_op: counted.allocs as f64 / COUNTED_OPS as f64,
        bytes_per_op: counted.bytes as f64 / COUNTED_OPS as f64,
        units: case.units,
    }
}
