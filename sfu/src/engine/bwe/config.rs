//! The bounds and the starting point every estimator of a viewer works within.

/// What an estimator may answer: never below `min_bps` nor above `max_bps`, and `initial_bps`
/// until the viewer has told it anything.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct EstimatorConfig {
    /// The floor: below it video is not worth sending, and the estimate must stay able to
    /// climb back.
    pub min_bps: u64,
    /// The ceiling: what the server grants one viewer, whatever the path could carry.
    pub max_bps: u64,
    /// The estimate before any feedback: a guess the first feedback corrects.
    pub initial_bps: u64,
}

impl Default for EstimatorConfig {
    fn default() -> Self {
        Self {
            min_bps: 30_000,
            max_bps: 20_000_000,
            initial_bps: 1_000_000,
        }
    }
}

impl EstimatorConfig {
    /// `bps` within the bounds; a ceiling below the floor yields to the floor, so a
    /// misconfigured pair still bounds the answer instead of panicking.
    pub fn clamp(&self, bps: u64) -> u64 {
        bps.clamp(self.min_bps, self.max_bps.max(self.min_bps))
    }
}
