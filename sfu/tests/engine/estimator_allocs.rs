//! Allocations of the bandwidth estimators, counted per thread by a global allocator: once
//! constructed, an estimator allocates nothing per feedback, however many packets, clusters
//! or losses the feedback reports.

use crate::alloc_counter;

use std::time::{Duration, Instant};

use alloc_counter::allocs_during;
use sfu::engine::bwe::{
    BandwidthEstimator, EstimatorConfig, FeedbackEstimator, PacketResult, RembEstimator,
};

/// 30 s of feedback every 100 ms: a packet every `spacing`, every 13th lost, a probe cluster
/// each second, and the queue growing by 1 ms a batch then draining, so every branch of the
/// controls runs (overuse, underuse, loss, probes).
fn batches(start: Instant, spacing: Duration, size: usize) -> Vec<(Instant, Vec<PacketResult>)> {
    let per_batch = (Duration::from_millis(100).as_nanos() / spacing.as_nanos()) as usize;
    let mut sequence = 0i64;
    (0..300u32)
        .map(|batch| {
            let queue =
                Duration::from_millis(u64::from(batch % 40).min(40 - u64::from(batch % 40)));
            let packets = (0..per_batch)
                .map(|index| {
                    let send_time = start + spacing * (batch * per_batch as u32 + index as u32);
                    sequence += 1;
                    PacketResult {
                        sequence,
                        send_time,
                        size,
                        probe_cluster: (index < 10 && batch % 10 == 0).then_some(batch),
                        arrival: (sequence % 13 != 0)
                            .then(|| send_time - start + Duration::from_millis(30) + queue),
                    }
                })
                .collect();
            (
                start + Duration::from_millis(100 * u64::from(batch + 1)),
                packets,
            )
        })
        .collect()
}

fn feed_allocs(
    estimator: &mut impl BandwidthEstimator,
    batches: &[(Instant, Vec<PacketResult>)],
) -> u64 {
    allocs_during(|| {
        for (now, packets) in batches {
            estimator.on_feedback(*now, packets);
            estimator.on_round_trip_time(*now, Duration::from_millis(60));
            estimator.on_remb(*now, 3_000_000);
            std::hint::black_box(estimator.estimate_bps());
            std::hint::black_box(estimator.probe_result_bps());
        }
    })
}

#[test]
fn feedback_allocates_nothing_once_constructed() {
    let start = Instant::now();
    // Ordinary media, then small packets at 20 Mbit/s: more arrivals than the acknowledged
    // bitrate's window holds.
    for (spacing, size) in [
        (Duration::from_millis(4), 1200),
        (Duration::from_micros(40), 100),
    ] {
        let batches = batches(start, spacing, size);
        let mut estimator = FeedbackEstimator::new(EstimatorConfig::default());
        assert_eq!(
            feed_allocs(&mut estimator, &batches),
            0,
            "{spacing:?} x {size} B"
        );
        let mut estimator = RembEstimator::new(EstimatorConfig::default());
        assert_eq!(feed_allocs(&mut estimator, &batches), 0);
    }
}
