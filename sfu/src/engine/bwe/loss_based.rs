//! Loss-based control (draft-ietf-rmcat-gcc-02, section 6): a bound on the estimate from the
//! fraction of packets the feedback reports lost. Little loss lets the bound grow, some holds
//! it, much cuts it in proportion. Delay reacts first on a queue that fills; loss is what is
//! left when the queue is too short to show delay, or the loss is not a queue's.

use std::time::{Duration, Instant};

use super::PacketResult;

/// A loss window closes once it holds this many packets...
const WINDOW_PACKETS: u32 = 20;
/// ...and spans this long: a few packets' chance losses must not swing the bound.
const WINDOW_SPAN: Duration = Duration::from_millis(500);
/// Under this fraction lost the bound may grow.
const LOW_LOSS: f64 = 0.02;
/// Over this fraction lost the bound falls.
const HIGH_LOSS: f64 = 0.1;
/// Growth per second of the bound under low loss, and its least growth.
const INCREASE_PER_SECOND: f64 = 1.08;
const MIN_INCREASE_BPS_PER_SECOND: f64 = 1_000.0;
/// Growth over one window spans at most this long.
const MAX_STEP: Duration = Duration::from_secs(1);
/// Decreases are this far apart, plus a round trip: the last one must show first.
const DECREASE_INTERVAL: Duration = Duration::from_millis(300);

/// The loss-based bound and the window it is counting.
#[derive(Debug, Clone)]
pub(super) struct LossBasedControl {
    bound_bps: f64,
    min_bps: f64,
    max_bps: f64,
    /// Packets reported in the open window, and of them lost.
    reported: u32,
    lost: u32,
    window_start: Option<Instant>,
    last_decrease: Option<Instant>,
    rtt: Duration,
}

impl LossBasedControl {
    /// Starts at `initial_bps`, within `min_bps..=max_bps`.
    pub(super) fn new(initial_bps: f64, min_bps: f64, max_bps: f64) -> Self {
        let max_bps = max_bps.max(min_bps);
        Self {
            bound_bps: initial_bps.clamp(min_bps, max_bps),
            min_bps,
            max_bps,
            reported: 0,
            lost: 0,
            window_start: None,
            last_decrease: None,
            rtt: Duration::ZERO,
        }
    }

    /// The bound, bit/s.
    pub(super) fn bound_bps(&self) -> f64 {
        self.bound_bps
    }

    /// The round trip, which spaces decreases.
    pub(super) fn set_rtt(&mut self, rtt: Duration) {
        self.rtt = rtt;
    }

    /// A probe showed the path carries `bps`: the bound makes room for it.
    pub(super) fn on_probe(&mut self, bps: f64) {
        self.set_bound(self.bound_bps.max(bps));
    }

    /// Counts one feedback's packets; when the window closes, moves the bound: growing
    /// toward `delay_bps` (never past both it and the current bound: the bound is no reason
    /// to send more) or falling from `estimate_bps`, what is being sent.
    pub(super) fn on_feedback(
        &mut self,
        now: Instant,
        packets: &[PacketResult],
        delay_bps: f64,
        estimate_bps: f64,
    ) {
        let lost = packets.iter().filter(|packet| !packet.received()).count();
        self.reported = self.reported.saturating_add(saturating_u32(packets.len()));
        self.lost = self.lost.saturating_add(saturating_u32(lost));
        let start = *self.window_start.get_or_insert(now);
        let span = now.saturating_duration_since(start);
        if self.reported < WINDOW_PACKETS || span < WINDOW_SPAN {
            return;
        }
        let loss = f64::from(self.lost) / f64::from(self.reported);
        self.reported = 0;
        self.lost = 0;
        self.window_start = Some(now);
        if loss < LOW_LOSS {
            self.grow(span.min(MAX_STEP), delay_bps);
        } else if loss > HIGH_LOSS && self.decrease_due(now) {
            self.set_bound(self.bound_bps.min(estimate_bps) * (1.0 - 0.5 * loss));
            self.last_decrease = Some(now);
        }
    }

    fn grow(&mut self, step: Duration, delay_bps: f64) {
        let seconds = step.as_secs_f64();
        let grown = self.bound_bps * INCREASE_PER_SECOND.powf(seconds)
            + MIN_INCREASE_BPS_PER_SECOND * seconds;
        self.set_bound(grown.min(self.bound_bps.max(delay_bps)));
    }

    fn decrease_due(&self, now: Instant) -> bool {
        let interval = DECREASE_INTERVAL.saturating_add(self.rtt);
        self.last_decrease
            .is_none_or(|last| now.saturating_duration_since(last) >= interval)
    }

    fn set_bound(&mut self, bps: f64) {
        self.bound_bps = if bps.is_nan() {
            self.min_bps
        } else {
            bps.clamp(self.min_bps, self.max_bps)
        };
    }
}

fn saturating_u32(count: usize) -> u32 {
    u32::try_from(count).unwrap_or(u32::MAX)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `count` packets of which the first `lost` were lost.
    fn batch(start: Instant, count: usize, lost: usize) -> Vec<PacketResult> {
        (0..count)
            .map(|index| PacketResult {
                sequence: index as i64,
                send_time: start,
                size: 1200,
                probe_cluster: None,
                arrival: (index >= lost).then_some(Duration::from_millis(index as u64)),
            })
            .collect()
    }

    fn after(control: &mut LossBasedControl, start: Instant, windows: u64, lost_of_fifty: usize) {
        for window in 1..=windows {
            let now = start + Duration::from_millis(window * 500);
            control.on_feedback(
                now,
                &batch(start, 50, lost_of_fifty),
                1e9,
                control.bound_bps(),
            );
        }
    }

    #[test]
    fn low_loss_grows_some_holds_much_cuts() {
        let start = Instant::now();
        let mut grows = LossBasedControl::new(1e6, 3e4, 2e7);
        let mut holds = LossBasedControl::new(1e6, 3e4, 2e7);
        let mut cuts = LossBasedControl::new(1e6, 3e4, 2e7);
        // The first feedback opens each window; then two windows of a second.
        for control in [&mut grows, &mut holds, &mut cuts] {
            control.on_feedback(start, &[], 1e9, 1e6);
        }
        after(&mut grows, start, 2, 0);
        after(&mut holds, start, 2, 3);
        after(&mut cuts, start, 2, 10);
        let grown = grows.bound_bps();
        assert!((1_080_000.0..1_082_000.0).contains(&grown), "{grown}");
        assert_eq!(holds.bound_bps(), 1e6);
        // 20 % lost, twice: times 0.9 each.
        assert!(
            (cuts.bound_bps() - 810_000.0).abs() < 1.0,
            "{}",
            cuts.bound_bps()
        );
    }

    #[test]
    fn growth_stops_at_the_delay_based_estimate() {
        let start = Instant::now();
        let mut control = LossBasedControl::new(1e6, 3e4, 2e7);
        control.on_feedback(start, &[], 1e9, 1e6);
        for window in 1..=20u64 {
            let now = start + Duration::from_millis(window * 500);
            control.on_feedback(now, &batch(start, 50, 0), 1.2e6, 1e6);
        }
        assert_eq!(control.bound_bps(), 1.2e6);
        control.on_probe(3e6);
        assert_eq!(control.bound_bps(), 3e6);
    }
}
