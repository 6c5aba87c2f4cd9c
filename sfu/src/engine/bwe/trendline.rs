//! The trendline filter: the slope of the queueing delay over the last groups, by linear
//! regression of the smoothed accumulated delay variation against arrival time.
//!
//! The slope is what a queue does: positive while it builds, negative while it drains. A
//! regression over a window (rather than the draft's Kalman filter of section 5.3) is what
//! current practice converged on: it needs no noise model and reacts within a window.

use super::inter_arrival::GroupDelta;

/// Groups in the regression window.
const WINDOW: usize = 20;
/// Weight of the previous smoothed delay: the exponential filter under the regression.
const SMOOTHING: f64 = 0.9;
/// The detector weighs the slope by the number of deltas seen, up to this many.
pub(super) const MAX_WEIGHTED_DELTAS: u32 = 60;

/// The slope of the accumulated delay variation over the last [`WINDOW`] groups.
#[derive(Debug, Clone)]
pub(super) struct Trendline {
    /// (arrival since the first group, smoothed accumulated delay), milliseconds; a ring.
    samples: [(f64, f64); WINDOW],
    /// Samples filled, up to [`WINDOW`].
    filled: usize,
    /// Where the next sample goes.
    next: usize,
    /// Deltas seen, capped at [`MAX_WEIGHTED_DELTAS`].
    deltas: u32,
    first_arrival_ms: Option<f64>,
    accumulated_ms: f64,
    smoothed_ms: f64,
    slope: f64,
}

impl Default for Trendline {
    fn default() -> Self {
        Self {
            samples: [(0.0, 0.0); WINDOW],
            filled: 0,
            next: 0,
            deltas: 0,
            first_arrival_ms: None,
            accumulated_ms: 0.0,
            smoothed_ms: 0.0,
            slope: 0.0,
        }
    }
}

impl Trendline {
    /// Takes one group's delta; the slope, which stays 0 until the window is full and keeps
    /// its last value while the regression is undefined.
    pub(super) fn update(&mut self, delta: &GroupDelta) -> f64 {
        self.deltas = self.deltas.saturating_add(1).min(MAX_WEIGHTED_DELTAS);
        let first_arrival_ms = *self.first_arrival_ms.get_or_insert(delta.arrival_ms);
        self.accumulated_ms += delta.arrival_delta_ms - delta.send_delta_ms;
        self.smoothed_ms = SMOOTHING * self.smoothed_ms + (1.0 - SMOOTHING) * self.accumulated_ms;
        self.samples[self.next] = (delta.arrival_ms - first_arrival_ms, self.smoothed_ms);
        self.next = (self.next + 1) % WINDOW;
        self.filled = (self.filled + 1).min(WINDOW);
        if self.filled == WINDOW {
            if let Some(slope) = regression_slope(&self.samples) {
                self.slope = slope;
            }
        }
        self.slope
    }

    /// Deltas seen, capped at [`MAX_WEIGHTED_DELTAS`]: the detector's confidence weight.
    pub(super) fn deltas(&self) -> u32 {
        self.deltas
    }
}

/// Least-squares slope of y on x; `None` when every x is the same or the input is not finite.
fn regression_slope(samples: &[(f64, f64)]) -> Option<f64> {
    let count = samples.len() as f64;
    let (sum_x, sum_y) = samples
        .iter()
        .fold((0.0, 0.0), |(x, y), &(sx, sy)| (x + sx, y + sy));
    let (mean_x, mean_y) = (sum_x / count, sum_y / count);
    let (numerator, denominator) = samples.iter().fold((0.0, 0.0), |(n, d), &(x, y)| {
        (
            n + (x - mean_x) * (y - mean_y),
            d + (x - mean_x) * (x - mean_x),
        )
    });
    let slope = numerator / denominator;
    (denominator > 0.0 && slope.is_finite()).then_some(slope)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_slope_of_a_line_is_exact() {
        let line: Vec<(f64, f64)> = (0..10)
            .map(|x| (f64::from(x), 3.0 * f64::from(x) + 1.0))
            .collect();
        let slope = regression_slope(&line).expect("a slope");
        assert!((slope - 3.0).abs() < 1e-9);
        assert_eq!(regression_slope(&[(1.0, 1.0), (1.0, 2.0)]), None);
    }

    #[test]
    fn a_building_queue_has_a_positive_slope_a_steady_one_none() {
        let mut building = Trendline::default();
        let mut steady = Trendline::default();
        let (mut building_slope, mut steady_slope) = (0.0, 0.0);
        for group in 0..40 {
            let arrival_ms = 1000.0 + 20.0 * f64::from(group);
            // Each group waits 2 ms longer than the one before.
            building_slope = building.update(&GroupDelta {
                send_delta_ms: 20.0,
                arrival_delta_ms: 22.0,
                arrival_ms,
            });
            steady_slope = steady.update(&GroupDelta {
                send_delta_ms: 20.0,
                arrival_delta_ms: 20.0,
                arrival_ms,
            });
        }
        assert!(building_slope > 0.05, "{building_slope}");
        assert!(steady_slope.abs() < 1e-9, "{steady_slope}");
        assert_eq!(building.deltas(), 40);
    }
}
