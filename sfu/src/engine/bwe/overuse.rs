//! The overuse detector (draft-ietf-rmcat-gcc-02, section 5.4): the weighted trend against the
//! adaptive threshold, and overuse only once it is sustained and still growing, so one late
//! group does not halve the rate.

use super::threshold::AdaptiveThreshold;

/// The weight of the trend: the slope (milliseconds of delay per millisecond) times the deltas
/// seen times this is comparable with the threshold in milliseconds.
const THRESHOLD_GAIN: f64 = 4.0;
/// Overuse must last longer than this, milliseconds of send time, before it is signalled.
const OVERUSING_TIME_MS: f64 = 10.0;

/// The detector's hypothesis about the path.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum BandwidthUsage {
    /// The queue is steady.
    Normal,
    /// The queue is draining: something else let go of the bottleneck.
    Underusing,
    /// The queue is building: we send more than the path carries.
    Overusing,
}

/// Turns the trend of each group into a hypothesis.
#[derive(Debug, Clone)]
pub(super) struct OveruseDetector {
    threshold: AdaptiveThreshold,
    /// Send time spent above the threshold, milliseconds; `None` while below it.
    time_over_ms: Option<f64>,
    /// Groups above the threshold since it was last crossed or signalled.
    overuse_groups: u32,
    previous_trend: f64,
    usage: BandwidthUsage,
}

impl Default for OveruseDetector {
    fn default() -> Self {
        Self {
            threshold: AdaptiveThreshold::default(),
            time_over_ms: None,
            overuse_groups: 0,
            previous_trend: 0.0,
            usage: BandwidthUsage::Normal,
        }
    }
}

impl OveruseDetector {
    /// The hypothesis after one group: `trend` from the trendline, weighted by `deltas`,
    /// `send_delta_ms` the group's send spacing, `arrival_ms` its arrival on the viewer's
    /// clock.
    pub(super) fn detect(
        &mut self,
        trend: f64,
        deltas: u32,
        send_delta_ms: f64,
        arrival_ms: f64,
    ) -> BandwidthUsage {
        if deltas < 2 {
            self.usage = BandwidthUsage::Normal;
            return self.usage;
        }
        let weighted = f64::from(deltas) * trend * THRESHOLD_GAIN;
        let gamma = self.threshold.gamma_ms();
        if weighted > gamma {
            self.on_above(trend, send_delta_ms);
        } else {
            self.time_over_ms = None;
            self.overuse_groups = 0;
            self.usage = if weighted < -gamma {
                BandwidthUsage::Underusing
            } else {
                BandwidthUsage::Normal
            };
        }
        self.previous_trend = trend;
        self.threshold.update(weighted, arrival_ms);
        self.usage
    }

    /// The current hypothesis.
    pub(super) fn usage(&self) -> BandwidthUsage {
        self.usage
    }

    /// Above the threshold: overuse once sustained over more than one group and not
    /// receding; until then the previous hypothesis stands.
    fn on_above(&mut self, trend: f64, send_delta_ms: f64) {
        // The first group above counts half its spacing: it crossed somewhere inside it.
        let time_over_ms = self
            .time_over_ms
            .map_or(send_delta_ms / 2.0, |time| time + send_delta_ms);
        self.overuse_groups = self.overuse_groups.saturating_add(1);
        if time_over_ms > OVERUSING_TIME_MS
            && self.overuse_groups > 1
            && trend >= self.previous_trend
        {
            self.time_over_ms = Some(0.0);
            self.overuse_groups = 0;
            self.usage = BandwidthUsage::Overusing;
        } else {
            self.time_over_ms = Some(time_over_ms);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_sustained_growing_trend_is_overuse_a_single_one_is_not() {
        let mut detector = OveruseDetector::default();
        // Weighted: 60 * 0.1 * 4 = 24 ms, above the initial 12.5 ms.
        assert_eq!(detector.detect(0.1, 60, 5.0, 0.0), BandwidthUsage::Normal);
        assert_eq!(detector.detect(0.1, 60, 5.0, 5.0), BandwidthUsage::Normal);
        assert_eq!(
            detector.detect(0.11, 60, 5.0, 10.0),
            BandwidthUsage::Overusing
        );
        assert_eq!(detector.usage(), BandwidthUsage::Overusing);
        assert_eq!(
            detector.detect(-0.1, 60, 5.0, 15.0),
            BandwidthUsage::Underusing
        );
        assert_eq!(detector.detect(0.0, 60, 5.0, 20.0), BandwidthUsage::Normal);
    }

    #[test]
    fn too_few_deltas_are_normal() {
        let mut detector = OveruseDetector::default();
        assert_eq!(detector.detect(10.0, 1, 5.0, 0.0), BandwidthUsage::Normal);
    }
}
