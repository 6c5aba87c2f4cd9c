//! Receive-side bandwidth estimation toward a publisher that negotiated REMB and not
//! transport-wide CC: such a client estimates nothing for itself and sends at what the
//! receiver's REMB (draft-alvestrand-rmcat-remb-03) tells it. The send times come from the
//! publisher's abs-send-time extension, the arrival times are the router's `now`; the same
//! delay-based and loss-based estimator that runs toward viewers turns them into an estimate.
//!
//! A REMB goes out once a second, and sooner (at most every 200 ms) when the estimate fell
//! by 3 % or more since the last one, so a publisher behind a narrowing link slows down
//! within a few hundred milliseconds.

use std::time::{Duration, Instant};

use rtp_ext::ext::AbsSendTime;

use crate::engine::bwe::{BandwidthEstimator, EstimatorConfig, FeedbackEstimator, PacketResult};
use crate::engine::track::TrackId;

/// A REMB at least this often, to keep the publisher's target fresh.
pub const REMB_INTERVAL: Duration = Duration::from_secs(1);
/// A decrease goes out early, but no more often than this.
const MIN_REMB_SPACING: Duration = Duration::from_millis(200);
/// A decrease of this fraction of the last REMB or more goes out early.
const EARLY_DECREASE: f64 = 0.03;
/// Arrivals taken between two estimator runs; a burst beyond it runs the estimator early.
const MAX_PENDING: usize = 1000;
/// abs-send-time counts 2^-18 s units in 24 bits (6.18 fixed point), wrapping every 64 s.
const UNITS_PER_SECOND: i64 = 1 << 18;
const WRAP: i64 = 1 << 24;
/// Send times before the first packet's (reordering) map to the epoch plus this margin.
const SEND_MARGIN: i64 = 4 * UNITS_PER_SECOND;
/// Where the estimate starts, before the first arrivals move it: above what a camera sends,
/// so the first REMB does not pull a publisher down that nothing has shown to be congested
/// (the estimate falls fast on the first sign of a queue; it rises at 8 % a second).
pub const PUBLISHER_INITIAL_BPS: u64 = 5_000_000;

/// The estimate toward one publisher transport, from its packets' abs-send-time.
#[derive(Debug)]
pub struct PublisherEstimate {
    /// A track of the transport: where the REMB goes.
    pub track: TrackId,
    /// Arrivals are measured from the first one.
    epoch: Instant,
    /// The first packet's send time, extended, less [`SEND_MARGIN`].
    send_base: Option<i64>,
    last_send: i64,
    sequence: i64,
    pending: Vec<PacketResult>,
    estimator: FeedbackEstimator,
    /// The last REMB: when, and what it said.
    sent: Option<(Instant, u64)>,
}

impl PublisherEstimate {
    /// Starts at [`PUBLISHER_INITIAL_BPS`]; the first REMB goes out a [`REMB_INTERVAL`]
    /// after the first packet.
    pub fn new(track: TrackId, now: Instant) -> Self {
        let config = EstimatorConfig {
            initial_bps: PUBLISHER_INITIAL_BPS,
            ..EstimatorConfig::default()
        };
        Self {
            track,
            epoch: now,
            send_base: None,
            last_send: 0,
            sequence: 0,
            pending: Vec::with_capacity(MAX_PENDING),
            estimator: FeedbackEstimator::new(config),
            sent: Some((now, PUBLISHER_INITIAL_BPS)),
        }
    }

    /// A packet of `size` bytes on the wire that arrived at `now`, sent at `send_time`.
    pub fn record(&mut self, now: Instant, send_time: AbsSendTime, size: usize) {
        if self.pending.len() == MAX_PENDING {
            self.run(now);
        }
        let extended = self.extend(send_time.0);
        let base = *self.send_base.get_or_insert(extended - SEND_MARGIN);
        let sent = send_offset(extended - base);
        self.sequence += 1;
        self.pending.push(PacketResult {
            sequence: self.sequence,
            send_time: self.epoch + sent,
            size,
            probe_cluster: None,
            arrival: Some(now.saturating_duration_since(self.epoch)),
        });
    }

    /// The 24-bit send time extended past its wrap, nearest to the last one.
    fn extend(&mut self, value: u32) -> i64 {
        let value = i64::from(value & 0xFF_FFFF);
        if self.send_base.is_none() {
            self.last_send = value;
            return value;
        }
        let mut delta = (value - self.last_send).rem_euclid(WRAP);
        if delta >= WRAP / 2 {
            delta -= WRAP;
        }
        self.last_send += delta;
        self.last_send
    }

    /// Runs the estimator over what arrived since the last call; returns the bitrate a REMB
    /// should carry now, if one is due.
    pub fn poll_remb(&mut self, now: Instant) -> Option<u64> {
        self.run(now);
        let estimate = self.estimator.estimate_bps();
        let (at, last) = self.sent?;
        let since = now.saturating_duration_since(at);
        let fell = (estimate as f64) <= (1.0 - EARLY_DECREASE) * last as f64;
        let due = since >= REMB_INTERVAL || (fell && since >= MIN_REMB_SPACING);
        due.then(|| {
            self.sent = Some((now, estimate));
            estimate
        })
    }

    fn run(&mut self, now: Instant) {
        if !self.pending.is_empty() {
            self.estimator.on_feedback(now, &self.pending);
            self.pending.clear();
        }
    }
}

/// The time `units` of the send clock after its base (nothing before it), whole seconds
/// apart from the fraction: a product of all the units and a billion would pass `i64` after
/// some ten hours of a stream.
fn send_offset(units: i64) -> Duration {
    let units = u64::try_from(units).unwrap_or(0);
    let per_second = UNITS_PER_SECOND as u64;
    let fraction = units % per_second * 1_000_000_000 / per_second;
    Duration::from_secs(units / per_second) + Duration::from_nanos(fraction)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn units(d: Duration) -> u32 {
        (d.as_nanos() * UNITS_PER_SECOND as u128 / 1_000_000_000 % WRAP as u128) as u32
    }

    /// `seconds` of 1200-byte packets every `gap`, each waiting `growth` longer than the one
    /// before; the estimator runs every 100 ms. Returns every REMB and when.
    fn stream(
        estimate: &mut PublisherEstimate,
        start: Instant,
        seconds: u64,
        gap: Duration,
        growth: Duration,
    ) -> Vec<(Duration, u64)> {
        let mut rembs = Vec::new();
        let mut next_poll = start + Duration::from_millis(100);
        let count = Duration::from_secs(seconds).as_micros() / gap.as_micros();
        for i in 0..count as u32 {
            let sent = gap * i;
            // Sent 60 s into the publisher's clock, so the 24 bits wrap within the run.
            let arrival = start + sent + growth * i;
            while next_poll <= arrival {
                if let Some(bps) = estimate.poll_remb(next_poll) {
                    rembs.push((next_poll - start, bps));
                }
                next_poll += Duration::from_millis(100);
            }
            let send_time = AbsSendTime(units(Duration::from_secs(60) + sent));
            estimate.record(arrival, send_time, 1200);
        }
        rembs
    }

    #[test]
    fn a_steady_path_keeps_the_remb_above_what_is_sent_once_a_second() {
        let start = Instant::now();
        let mut estimate = PublisherEstimate::new(TrackId(1), start);
        // 1200 bytes every 5 ms: 1.92 Mbit/s, across the 64 s wrap of the send clock.
        let rembs = stream(
            &mut estimate,
            start,
            10,
            Duration::from_millis(5),
            Duration::ZERO,
        );
        assert!((9..=10).contains(&rembs.len()), "{rembs:?}");
        for pair in rembs.windows(2) {
            let gap = pair[1].0 - pair[0].0;
            assert!(gap >= Duration::from_millis(900), "{rembs:?}");
        }
        assert!(rembs.iter().all(|&(_, bps)| bps > 1_920_000), "{rembs:?}");
    }

    #[test]
    fn a_growing_queue_sends_a_lower_remb_within_half_a_second() {
        let start = Instant::now();
        let mut estimate = PublisherEstimate::new(TrackId(1), start);
        // Each packet waits 1 ms longer than the one before: the path carries less than sent.
        let rembs = stream(
            &mut estimate,
            start,
            3,
            Duration::from_millis(5),
            Duration::from_micros(1000),
        );
        let (at, bps) = rembs[0];
        assert!(at <= Duration::from_millis(500), "{rembs:?}");
        assert!(bps < 1_920_000, "{rembs:?}");
        for pair in rembs.windows(2) {
            assert!(pair[1].0 - pair[0].0 >= MIN_REMB_SPACING, "{rembs:?}");
        }
    }

    #[test]
    fn send_times_extend_across_the_wrap_and_back() {
        let start = Instant::now();
        let mut estimate = PublisherEstimate::new(TrackId(1), start);
        assert_eq!(estimate.extend(WRAP as u32 - 10), WRAP - 10);
        estimate.send_base = Some(0);
        assert_eq!(estimate.extend(5), WRAP + 5);
        assert_eq!(estimate.extend(WRAP as u32 - 20), WRAP - 20);
        assert_eq!(estimate.extend(7), WRAP + 7);
    }

    /// A stream of eleven hours, 30 s of its send clock between packets (the clock wraps
    /// every 64 s): every send time is where the clock says, past the ten hours after which
    /// nanoseconds of the whole span no longer fit a multiplication in 64 bits.
    #[test]
    fn send_times_of_a_long_stream_stay_exact() {
        let start = Instant::now();
        let mut estimate = PublisherEstimate::new(TrackId(1), start);
        let step = Duration::from_secs(30);
        let mut first = None;
        for n in 0..1_320 {
            estimate.record(start + step * n, AbsSendTime(units(step * n)), 1200);
            let sent = estimate.pending.last().expect("just recorded").send_time;
            let first = *first.get_or_insert(sent);
            assert_eq!(sent - first, step * n);
        }
    }
}
