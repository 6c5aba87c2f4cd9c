//! Delay-based control (draft-ietf-rmcat-gcc-02, section 5): packet groups, their delay
//! variation, its trend, the detector's hypothesis and the rate controller, run over each
//! feedback.

use std::time::{Duration, Instant};

use super::aimd::AimdRateControl;
use super::inter_arrival::InterArrival;
use super::overuse::{BandwidthUsage, OveruseDetector};
use super::queue_growth::{QueueReading, QueueSurge};
use super::trendline::Trendline;
use super::PacketResult;

/// Sending paused this long leaves nothing to compare with: the groups and the trend start
/// over.
const STREAM_TIMEOUT: Duration = Duration::from_secs(2);
/// A probe cluster is sent above what the path may carry, on purpose: the queue it builds
/// shows as overuse in the feedback on it and for a little after. Its result, not that
/// overuse, says what the path carries, so overuse this soon after feedback on probe packets
/// does not lower the estimate; overuse that outlasts it does.
const PROBE_GRACE: Duration = Duration::from_millis(500);
/// A probe's queue drains once the cluster has ended: media packets sent after it arrive
/// sooner and sooner. A feedback without probe packets whose media packets show the queue
/// growing by more than this, from the first of them to the last, is the media's own overuse
/// (the path's capacity fell), and the grace does not hide it.
const GROWING_QUEUE: Duration = Duration::from_millis(10);

/// The delay-based estimate.
#[derive(Debug, Clone)]
pub(super) struct DelayBasedControl {
    inter_arrival: InterArrival,
    trendline: Trendline,
    detector: OveruseDetector,
    rate: AimdRateControl,
    last_send: Option<Instant>,
    /// Until when overuse is the last probe's queue.
    probe_grace: Option<Instant>,
    surge: QueueSurge,
}

impl DelayBasedControl {
    /// Starts at `initial_bps`, within `min_bps..=max_bps`.
    pub(super) fn new(initial_bps: f64, min_bps: f64, max_bps: f64) -> Self {
        Self {
            inter_arrival: InterArrival::default(),
            trendline: Trendline::default(),
            detector: OveruseDetector::default(),
            rate: AimdRateControl::new(initial_bps, min_bps, max_bps),
            last_send: None,
            probe_grace: None,
            surge: QueueSurge::default(),
        }
    }

    /// The estimate, bit/s.
    pub(super) fn bitrate_bps(&self) -> f64 {
        self.rate.bitrate_bps()
    }

    /// The round trip, for the rate controller.
    pub(super) fn set_rtt(&mut self, rtt: Duration) {
        self.rate.set_rtt(rtt);
    }

    /// Runs one feedback's packets through the detector, then moves the estimate: down on
    /// overuse (once per round trip), up to a probe's rate when one showed more room, else
    /// by the hypothesis. `acknowledged_bps` is what the viewer received lately; whether a
    /// probe was taken is returned.
    pub(super) fn on_feedback(
        &mut self,
        now: Instant,
        packets: &[PacketResult],
        acknowledged_bps: Option<u64>,
        probe_bps: Option<u64>,
    ) -> bool {
        for packet in packets {
            self.on_packet(packet);
        }
        let probed = packets.iter().any(|p| p.probe_cluster.is_some());
        if probed {
            self.probe_grace = Some(now + PROBE_GRACE);
        }
        let acknowledged = acknowledged_bps.map(|bps| bps as f64);
        let reading = (!probed).then(|| QueueReading::of(packets)).flatten();
        // A queue growing fast is overuse now, whatever the trendline has taken in yet.
        let usage = match self.surge.on_reading(reading) {
            true => BandwidthUsage::Overusing,
            false => self.detector.usage(),
        };
        let grows = reading.is_some_and(|r| r.growth > GROWING_QUEUE);
        let probe_queue = self.probe_grace.is_some_and(|until| now < until) && (probed || !grows);
        if usage == BandwidthUsage::Overusing && probe_queue {
            // Neither down (the queue is the probe's) nor up (it is a queue).
            return probe_bps.is_some_and(|probe| self.take_probe(now, probe as f64));
        }
        if usage == BandwidthUsage::Overusing {
            let throughput = acknowledged.unwrap_or(self.rate.bitrate_bps());
            if self.rate.time_to_reduce_further(now, throughput) {
                self.rate.update(now, usage, Some(throughput));
            }
            return false;
        }
        if probe_bps.is_some_and(|probe| self.take_probe(now, probe as f64)) {
            return true;
        }
        self.rate.update(now, usage, acknowledged);
        false
    }

    /// A probe's result: the estimate if it is above it.
    fn take_probe(&mut self, now: Instant, probe_bps: f64) -> bool {
        let above = probe_bps > self.rate.bitrate_bps();
        if above {
            self.rate.set_estimate(now, probe_bps);
        }
        above
    }

    fn on_packet(&mut self, packet: &PacketResult) {
        let Some(arrival) = packet.arrival else {
            return;
        };
        let paused = self
            .last_send
            .is_some_and(|last| packet.send_time.saturating_duration_since(last) > STREAM_TIMEOUT);
        if paused {
            self.inter_arrival = InterArrival::default();
            self.trendline = Trendline::default();
            self.detector = OveruseDetector::default();
        }
        self.last_send = Some(
            self.last_send
                .map_or(packet.send_time, |last| last.max(packet.send_time)),
        );
        let Some(delta) = self.inter_arrival.on_packet(packet.send_time, arrival) else {
            return;
        };
        let trend = self.trendline.update(&delta);
        self.detector.detect(
            trend,
            self.trendline.deltas(),
            delta.send_delta_ms,
            delta.arrival_ms,
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// One second of feedback from `from`: a 1200-byte packet every 10 ms, each waiting
    /// `growth_us` longer than the one before, arriving on a viewer clock `offset` ahead.
    fn second(
        control: &mut DelayBasedControl,
        start: Instant,
        from: Duration,
        offset: Duration,
        growth_us: u64,
    ) {
        for batch in 0..10u64 {
            let packets: Vec<PacketResult> = (0..10u64)
                .map(|index| {
                    let sent = from + Duration::from_millis(batch * 100 + index * 10);
                    let queued = Duration::from_micros(growth_us * (batch * 10 + index));
                    PacketResult {
                        sequence: 0,
                        send_time: start + sent,
                        size: 1200,
                        probe_cluster: None,
                        arrival: Some(offset + sent + queued),
                    }
                })
                .collect();
            let now = start + from + Duration::from_millis(batch * 100 + 150);
            control.on_feedback(now, &packets, Some(960_000), None);
        }
    }

    /// A control fed one second of feedback whose queue grows by `growth_us` per batch.
    fn after_a_second(growth_us: u64) -> (DelayBasedControl, Instant) {
        let start = Instant::now();
        let mut control = DelayBasedControl::new(1e6, 3e4, 2e7);
        let clock = Duration::from_secs(100);
        second(&mut control, start, Duration::ZERO, clock, growth_us);
        (control, start)
    }

    #[test]
    fn a_building_queue_decreases_under_the_acknowledged_bitrate() {
        let (control, _) = after_a_second(500);
        assert_eq!(control.bitrate_bps(), 0.85 * 960_000.0 - 5_000.0);
    }

    #[test]
    fn a_pause_and_a_clock_jump_are_not_a_queue() {
        let (mut control, start) = after_a_second(0);
        let steady = control.bitrate_bps();
        assert!(steady > 1e6, "{steady}");
        // Three seconds without sending, and the viewer's clock 50 s further on.
        second(
            &mut control,
            start,
            Duration::from_secs(4),
            Duration::from_secs(150),
            0,
        );
        assert!(control.bitrate_bps() > steady, "{}", control.bitrate_bps());
    }

    /// 100 ms of feedback from `from_ms` (a 1200-byte packet every 10 ms, each waiting
    /// `growth_us` longer than the one before, from a queue of `queued_us`), reported 50 ms
    /// after its last packet; returns the queue its last packet left.
    fn batch(
        control: &mut DelayBasedControl,
        start: Instant,
        from_ms: u64,
        (queued_us, growth_us): (u64, u64),
        probe: bool,
    ) -> u64 {
        let packets: Vec<PacketResult> = (0..10u64)
            .map(|index| {
                let sent = Duration::from_millis(from_ms + index * 10);
                let queued = Duration::from_micros(queued_us + growth_us * index);
                PacketResult {
                    sequence: 0,
                    send_time: start + sent,
                    size: 1200,
                    probe_cluster: probe.then_some(7),
                    arrival: Some(Duration::from_secs(100) + sent + queued),
                }
            })
            .collect();
        let now = start + Duration::from_millis(from_ms + 140);
        control.on_feedback(now, &packets, Some(960_000), None);
        queued_us + growth_us * 9
    }

    /// A steady second, then a probe cluster whose queue grows fast, then a feedback of media
    /// within the probe's grace whose queue grows by `after_us` a packet; returns the
    /// estimate before that feedback, and the control after it.
    fn probe_then(after_us: u64) -> (f64, DelayBasedControl) {
        let (mut control, start) = after_a_second(0);
        let mut queued = 0;
        for from_ms in [1_000, 1_100, 1_200] {
            queued = batch(&mut control, start, from_ms, (queued, 1_500), true);
        }
        let before = control.bitrate_bps();
        batch(&mut control, start, 1_300, (queued, after_us), false);
        (before, control)
    }

    #[test]
    fn the_queue_a_probe_left_does_not_lower_the_estimate() {
        let (before, control) = probe_then(0);
        assert_eq!(control.detector.usage(), BandwidthUsage::Overusing);
        assert_eq!(control.bitrate_bps(), before);
    }

    #[test]
    fn a_queue_that_grows_after_the_probe_lowers_the_estimate_at_once() {
        let (before, control) = probe_then(1_500);
        assert!(control.bitrate_bps() < before, "{}", control.bitrate_bps());
        assert_eq!(control.bitrate_bps(), 0.85 * 960_000.0 - 5_000.0);
    }

    /// After a pause the trendline starts over and takes several feedbacks to call a queue;
    /// two feedbacks of a queue growing fast are overuse at once.
    #[test]
    fn a_queue_that_grows_fast_lowers_the_estimate_at_the_second_feedback() {
        let (mut control, start) = after_a_second(0);
        let steady = control.bitrate_bps();
        // A round trip short enough that a decrease need not wait for the last change.
        control.set_rtt(Duration::from_millis(20));
        // Three seconds without sending, then packets waiting 4 ms longer each: 36 ms over
        // each feedback's 90 ms.
        let mut queued = 0;
        for from_ms in [4_000, 4_100] {
            queued = batch(&mut control, start, from_ms, (queued, 4_000), false);
        }
        assert_eq!(
            control.bitrate_bps(),
            0.85 * 960_000.0 - 5_000.0,
            "from {steady}"
        );
    }

    #[test]
    fn a_probe_above_the_estimate_raises_it() {
        let start = Instant::now();
        let mut control = DelayBasedControl::new(1e6, 3e4, 2e7);
        assert!(!control.on_feedback(start, &[], None, Some(900_000)));
        assert!(control.on_feedback(start, &[], None, Some(2_500_000)));
        assert_eq!(control.bitrate_bps(), 2_500_000.0);
    }
}
