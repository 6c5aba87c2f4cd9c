//! AIMD rate control (draft-ietf-rmcat-gcc-02, section 5.5): the delay-based estimate moves
//! by the detector's hypothesis. Increase while the queue is steady (multiplicatively, about
//! 8 % a second, far from the known link capacity; additively, about a packet per response
//! time, near it), hold while it drains, decrease to just under the acknowledged bitrate when
//! it builds.

use std::time::{Duration, Instant};

use super::link_capacity::LinkCapacity;
use super::overuse::BandwidthUsage;

/// On overuse the rate drops to this fraction of the acknowledged bitrate.
const BETA: f64 = 0.85;
/// Taken off a decrease as well, so the queue the overuse built drains.
const DECREASE_MARGIN_BPS: f64 = 5_000.0;
/// Multiplicative increase per second.
const INCREASE_PER_SECOND: f64 = 1.08;
/// The least multiplicative step: low rates still climb.
const MIN_MULTIPLICATIVE_STEP_BPS: f64 = 1_000.0;
/// The least additive increase per second.
const MIN_ADDITIVE_BPS_PER_SECOND: f64 = 4_000.0;
/// The frame rate and packet size the additive increase reckons in: one more packet per
/// frame each response time.
const FRAMES_PER_SECOND: f64 = 30.0;
const PACKET_BITS: f64 = 1200.0 * 8.0;
/// Added to the round trip for the time the path takes to show the effect of a change.
const RESPONSE_MARGIN: Duration = Duration::from_millis(100);
/// The estimate may rise only up to this multiple of the acknowledged bitrate, plus the
/// margin: beyond it, nothing says the path carries more (a probe must show it).
const INCREASE_LIMIT_FACTOR: f64 = 1.5;
const INCREASE_LIMIT_MARGIN_BPS: f64 = 10_000.0;
/// The round trip assumed until one is measured.
const DEFAULT_RTT: Duration = Duration::from_millis(200);
/// Bounds of the interval between decreases, which is the round trip: a decrease shows
/// after one.
const MIN_REDUCTION_INTERVAL: Duration = Duration::from_millis(10);
const MAX_REDUCTION_INTERVAL: Duration = Duration::from_millis(200);
/// An increase step spans at most this much time: a pause in feedback is not a long
/// steady queue.
const MAX_STEP: Duration = Duration::from_secs(1);

/// The state machine of the draft's figure 2.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum RateControlState {
    Hold,
    Increase,
    Decrease,
}

/// The delay-based estimate and how it moves.
#[derive(Debug, Clone)]
pub(super) struct AimdRateControl {
    bitrate_bps: f64,
    min_bps: f64,
    max_bps: f64,
    state: RateControlState,
    capacity: LinkCapacity,
    last_change: Option<Instant>,
    rtt: Duration,
    /// The last acknowledged bitrate, for updates without one.
    last_throughput_bps: Option<f64>,
}

impl AimdRateControl {
    /// Starts at `initial_bps`, within `min_bps..=max_bps`.
    pub(super) fn new(initial_bps: f64, min_bps: f64, max_bps: f64) -> Self {
        Self {
            bitrate_bps: initial_bps.clamp(min_bps, max_bps.max(min_bps)),
            min_bps,
            max_bps: max_bps.max(min_bps),
            state: RateControlState::Hold,
            capacity: LinkCapacity::default(),
            last_change: None,
            rtt: DEFAULT_RTT,
            last_throughput_bps: None,
        }
    }

    /// The estimate, bit/s.
    pub(super) fn bitrate_bps(&self) -> f64 {
        self.bitrate_bps
    }

    /// The round trip, which paces decreases and sizes additive increases.
    pub(super) fn set_rtt(&mut self, rtt: Duration) {
        self.rtt = rtt;
    }

    /// Sets the estimate outright: a probe measured the path.
    pub(super) fn set_estimate(&mut self, now: Instant, bps: f64) {
        self.set_bitrate(bps);
        self.last_change = Some(now);
    }

    /// Whether an overuse may decrease again: a round trip has passed since the last change
    /// (the last decrease has had time to show), or the path now carries under half the
    /// estimate.
    pub(super) fn time_to_reduce_further(&self, now: Instant, throughput_bps: f64) -> bool {
        let interval = self
            .rtt
            .clamp(MIN_REDUCTION_INTERVAL, MAX_REDUCTION_INTERVAL);
        let waited = self
            .last_change
            .is_none_or(|last| now.saturating_duration_since(last) >= interval);
        waited || throughput_bps < 0.5 * self.bitrate_bps
    }

    /// Moves the estimate by the detector's hypothesis, with the acknowledged bitrate if one
    /// is known.
    pub(super) fn update(
        &mut self,
        now: Instant,
        usage: BandwidthUsage,
        throughput_bps: Option<f64>,
    ) {
        let throughput = throughput_bps
            .or(self.last_throughput_bps)
            .unwrap_or(self.bitrate_bps);
        self.last_throughput_bps = Some(throughput);
        self.state = match (usage, self.state) {
            (BandwidthUsage::Normal, RateControlState::Hold) => RateControlState::Increase,
            (BandwidthUsage::Normal, state) => state,
            (BandwidthUsage::Overusing, _) => RateControlState::Decrease,
            (BandwidthUsage::Underusing, _) => RateControlState::Hold,
        };
        match self.state {
            RateControlState::Hold => {}
            RateControlState::Increase => self.increase(now, throughput),
            RateControlState::Decrease => self.decrease(now, throughput),
        }
    }

    fn increase(&mut self, now: Instant, throughput: f64) {
        if self.capacity.is_exceeded_by(throughput) {
            self.capacity.reset();
        }
        let limit = INCREASE_LIMIT_FACTOR * throughput + INCREASE_LIMIT_MARGIN_BPS;
        if self.bitrate_bps < limit {
            let step = self
                .last_change
                .map_or(Duration::ZERO, |last| now.saturating_duration_since(last))
                .min(MAX_STEP);
            let increase = if self.capacity.estimate_bps().is_some() {
                self.additive_bps_per_second() * step.as_secs_f64()
            } else {
                self.multiplicative_step_bps(step)
            };
            self.set_bitrate((self.bitrate_bps + increase).min(limit));
        }
        self.last_change = Some(now);
    }

    /// Just under the acknowledged bitrate, never up; the link capacity learns from it.
    fn decrease(&mut self, now: Instant, throughput: f64) {
        let mut decreased = BETA * throughput;
        if decreased > DECREASE_MARGIN_BPS {
            decreased -= DECREASE_MARGIN_BPS;
        }
        if decreased > self.bitrate_bps {
            if let Some(capacity) = self.capacity.estimate_bps() {
                decreased = BETA * capacity;
            }
        }
        if decreased < self.bitrate_bps {
            self.set_bitrate(decreased);
        }
        if self.capacity.is_far_above(throughput) {
            // The path carries far less than it did: start the capacity over from here.
            self.capacity.reset();
        }
        self.capacity.on_overuse(throughput);
        // Hold until the queue the overuse built has drained.
        self.state = RateControlState::Hold;
        self.last_change = Some(now);
    }

    fn multiplicative_step_bps(&self, step: Duration) -> f64 {
        let factor = INCREASE_PER_SECOND.powf(step.as_secs_f64());
        (self.bitrate_bps * (factor - 1.0)).max(MIN_MULTIPLICATIVE_STEP_BPS)
    }

    /// About one packet more per frame each response time.
    fn additive_bps_per_second(&self) -> f64 {
        let bits_per_frame = self.bitrate_bps / FRAMES_PER_SECOND;
        let packets_per_frame = (bits_per_frame / PACKET_BITS).ceil().max(1.0);
        let packet_bits = bits_per_frame / packets_per_frame;
        let response = self.rtt.saturating_add(RESPONSE_MARGIN).as_secs_f64();
        (packet_bits / response).max(MIN_ADDITIVE_BPS_PER_SECOND)
    }

    fn set_bitrate(&mut self, bps: f64) {
        self.bitrate_bps = if bps.is_nan() {
            self.min_bps
        } else {
            bps.clamp(self.min_bps, self.max_bps)
        };
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn control() -> AimdRateControl {
        AimdRateControl::new(1_000_000.0, 30_000.0, 20_000_000.0)
    }

    #[test]
    fn increases_about_eight_percent_a_second_far_from_capacity() {
        let start = Instant::now();
        let mut rate = control();
        for tenth in 0..=10 {
            rate.update(
                start + Duration::from_millis(tenth * 100),
                BandwidthUsage::Normal,
                Some(1e7),
            );
        }
        let bitrate = rate.bitrate_bps();
        assert!((1_075_000.0..1_085_000.0).contains(&bitrate), "{bitrate}");
    }

    #[test]
    fn overuse_decreases_under_the_acknowledged_bitrate_then_holds() {
        let start = Instant::now();
        let mut rate = control();
        rate.update(start, BandwidthUsage::Overusing, Some(800_000.0));
        assert_eq!(rate.bitrate_bps(), 0.85 * 800_000.0 - 5_000.0);
        assert!(!rate.time_to_reduce_further(start + Duration::from_millis(50), 800_000.0));
        assert!(rate.time_to_reduce_further(start + Duration::from_millis(50), 300_000.0));
        assert!(rate.time_to_reduce_further(start + Duration::from_millis(200), 800_000.0));
        // Underuse holds, as does the first normal after it (which moves to increase).
        rate.update(
            start + Duration::from_millis(300),
            BandwidthUsage::Underusing,
            None,
        );
        assert_eq!(rate.bitrate_bps(), 675_000.0);
        // Near the capacity now known: additive, a few kbit/s in a second.
        for tenth in 4..=14 {
            rate.update(
                start + Duration::from_millis(tenth * 100),
                BandwidthUsage::Normal,
                None,
            );
        }
        let bitrate = rate.bitrate_bps();
        assert!((680_000.0..720_000.0).contains(&bitrate), "{bitrate}");
    }

    #[test]
    fn increase_stops_at_one_and_a_half_times_the_acknowledged_bitrate() {
        let start = Instant::now();
        let mut rate = control();
        for second in 0..30 {
            rate.update(
                start + Duration::from_secs(second),
                BandwidthUsage::Normal,
                Some(400_000.0),
            );
        }
        assert_eq!(rate.bitrate_bps(), 1_000_000.0);
        rate.set_estimate(start, f64::NAN);
        assert_eq!(rate.bitrate_bps(), 30_000.0);
        for second in 0..60 {
            rate.update(
                start + Duration::from_secs(second),
                BandwidthUsage::Normal,
                Some(400_000.0),
            );
        }
        assert_eq!(rate.bitrate_bps(), 610_000.0);
    }
}
