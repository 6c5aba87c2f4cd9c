//! The link capacity estimate of the rate controller: a running average of the acknowledged
//! bitrate at each overuse, with its normalized variance. Near it the rate controller
//! increases additively (the capacity is known, probe gently); far from it multiplicatively.

/// Weight of each new overuse sample.
const ALPHA: f64 = 0.05;
/// Bounds of the normalized variance, kbit/s: about 14 to 35 kbit/s of deviation at
/// 500 kbit/s.
const MIN_DEVIATION_KBPS: f64 = 0.4;
const MAX_DEVIATION_KBPS: f64 = 2.5;
/// The bounds lie this many deviations from the estimate.
const BOUND_DEVIATIONS: f64 = 3.0;

/// Where the path's capacity was last seen, in kbit/s.
#[derive(Debug, Clone)]
pub(super) struct LinkCapacity {
    estimate_kbps: Option<f64>,
    deviation_kbps: f64,
}

impl Default for LinkCapacity {
    fn default() -> Self {
        Self {
            estimate_kbps: None,
            deviation_kbps: MIN_DEVIATION_KBPS,
        }
    }
}

impl LinkCapacity {
    /// Takes the acknowledged bitrate at an overuse: the path's capacity, as it showed.
    pub(super) fn on_overuse(&mut self, throughput_bps: f64) {
        let sample_kbps = throughput_bps / 1000.0;
        let estimate_kbps = self.estimate_kbps.map_or(sample_kbps, |estimate| {
            (1.0 - ALPHA) * estimate + ALPHA * sample_kbps
        });
        let error_kbps = estimate_kbps - sample_kbps;
        let variance = error_kbps * error_kbps / estimate_kbps.max(1.0);
        self.deviation_kbps = ((1.0 - ALPHA) * self.deviation_kbps + ALPHA * variance)
            .clamp(MIN_DEVIATION_KBPS, MAX_DEVIATION_KBPS);
        self.estimate_kbps = Some(estimate_kbps);
    }

    /// Forgets the estimate: the path has changed.
    pub(super) fn reset(&mut self) {
        self.estimate_kbps = None;
    }

    /// The estimate, bit/s.
    pub(super) fn estimate_bps(&self) -> Option<f64> {
        self.estimate_kbps.map(|estimate| estimate * 1000.0)
    }

    /// Whether `throughput_bps` lies above the estimate's upper bound: the path now carries
    /// more than it did.
    pub(super) fn is_exceeded_by(&self, throughput_bps: f64) -> bool {
        self.bound_kbps()
            .is_some_and(|(_, upper)| throughput_bps / 1000.0 > upper)
    }

    /// Whether `throughput_bps` lies below the estimate's lower bound: the path now carries
    /// much less than it did.
    pub(super) fn is_far_above(&self, throughput_bps: f64) -> bool {
        self.bound_kbps()
            .is_some_and(|(lower, _)| throughput_bps / 1000.0 < lower)
    }

    /// (lower, upper), kbit/s.
    fn bound_kbps(&self) -> Option<(f64, f64)> {
        let estimate = self.estimate_kbps?;
        let margin = BOUND_DEVIATIONS * (self.deviation_kbps * estimate.max(0.0)).sqrt();
        Some(((estimate - margin).max(0.0), estimate + margin))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bounds_surround_the_estimate() {
        let mut capacity = LinkCapacity::default();
        assert!(!capacity.is_exceeded_by(1e9));
        assert!(!capacity.is_far_above(0.0));
        capacity.on_overuse(1_000_000.0);
        assert_eq!(capacity.estimate_bps(), Some(1_000_000.0));
        // 3 * sqrt(0.4 * 1000) = 60 kbit/s either side.
        assert!(capacity.is_exceeded_by(1_070_000.0));
        assert!(!capacity.is_exceeded_by(1_050_000.0));
        assert!(capacity.is_far_above(930_000.0));
        capacity.reset();
        assert_eq!(capacity.estimate_bps(), None);
    }
}
