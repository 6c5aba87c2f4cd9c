//! The adaptive threshold the weighted trend is compared against
//! (draft-ietf-rmcat-gcc-02, section 5.4).
//!
//! A fixed threshold either starves against a loss-based flow sharing the bottleneck (which
//! keeps the queue full, so the trend keeps crossing a low threshold) or misses real queues
//! (when high). The threshold follows the trend's magnitude instead: up slowly when the trend
//! exceeds it, down fast when it falls below, and not at all for a spike far above it.

/// The threshold before any adaptation, milliseconds.
const INITIAL_MS: f64 = 12.5;
/// Bounds of the threshold, milliseconds.
const MIN_MS: f64 = 6.0;
const MAX_MS: f64 = 600.0;
/// Adaptation gain, per millisecond, while the trend is above the threshold.
const K_UP: f64 = 0.0087;
/// Adaptation gain, per millisecond, while the trend is below it.
const K_DOWN: f64 = 0.039;
/// A trend this far above the threshold is a spike the threshold ignores.
const MAX_ADAPT_OFFSET_MS: f64 = 15.0;
/// Longest time step of one adaptation: a pause in the feedback is not a long trend.
const MAX_TIME_STEP_MS: f64 = 100.0;

/// Gamma: the threshold on the weighted trend, in milliseconds.
#[derive(Debug, Clone)]
pub(super) struct AdaptiveThreshold {
    gamma_ms: f64,
    /// The viewer's clock at the last adaptation, milliseconds.
    last_update_ms: Option<f64>,
}

impl Default for AdaptiveThreshold {
    fn default() -> Self {
        Self {
            gamma_ms: INITIAL_MS,
            last_update_ms: None,
        }
    }
}

impl AdaptiveThreshold {
    /// The current threshold, milliseconds.
    pub(super) fn gamma_ms(&self) -> f64 {
        self.gamma_ms
    }

    /// Moves the threshold toward the magnitude of `trend_ms`, observed at `at_ms` on the
    /// viewer's clock.
    pub(super) fn update(&mut self, trend_ms: f64, at_ms: f64) {
        let last_ms = *self.last_update_ms.get_or_insert(at_ms);
        self.last_update_ms = Some(at_ms);
        let magnitude = trend_ms.abs();
        if !magnitude.is_finite() || magnitude > self.gamma_ms + MAX_ADAPT_OFFSET_MS {
            return;
        }
        let gain = if magnitude < self.gamma_ms {
            K_DOWN
        } else {
            K_UP
        };
        let step_ms = (at_ms - last_ms).clamp(0.0, MAX_TIME_STEP_MS);
        self.gamma_ms =
            (self.gamma_ms + gain * (magnitude - self.gamma_ms) * step_ms).clamp(MIN_MS, MAX_MS);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn follows_the_trend_within_its_bounds() {
        let mut quiet = AdaptiveThreshold::default();
        let mut busy = AdaptiveThreshold::default();
        for step in 0..1000 {
            let at_ms = f64::from(step) * 20.0;
            quiet.update(0.0, at_ms);
            // Always a little above: the threshold climbs behind it, never jumping.
            busy.update(busy.gamma_ms() + 10.0, at_ms);
        }
        assert_eq!(quiet.gamma_ms(), MIN_MS);
        assert_eq!(busy.gamma_ms(), MAX_MS);
    }

    #[test]
    fn a_spike_far_above_is_ignored() {
        let mut threshold = AdaptiveThreshold::default();
        threshold.update(0.0, 0.0);
        threshold.update(INITIAL_MS + MAX_ADAPT_OFFSET_MS + 1.0, 50.0);
        threshold.update(f64::NAN, 60.0);
        assert_eq!(threshold.gamma_ms(), INITIAL_MS);
    }
}
