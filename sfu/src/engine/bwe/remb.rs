//! The estimator of a viewer that sends REMB and no transport-wide CC feedback: the viewer
//! estimates for itself, and its word is the estimate.

use std::time::{Duration, Instant};

use super::{BandwidthEstimator, EstimatorConfig, PacketResult};

/// The estimate is the viewer's latest REMB, within the configured bounds.
#[derive(Debug, Clone)]
pub struct RembEstimator {
    config: EstimatorConfig,
    estimate_bps: u64,
}

impl RembEstimator {
    /// Starts at `config.initial_bps` until the first REMB.
    pub fn new(config: EstimatorConfig) -> Self {
        Self {
            config,
            estimate_bps: config.clamp(config.initial_bps),
        }
    }
}

impl BandwidthEstimator for RembEstimator {
    /// Without transport-wide CC there is no feedback to learn from; nothing to do.
    fn on_feedback(&mut self, _now: Instant, _packets: &[PacketResult]) {}

    fn on_remb(&mut self, _now: Instant, bitrate_bps: u64) {
        self.estimate_bps = self.config.clamp(bitrate_bps);
    }

    /// The viewer's own estimator already accounts for the round trip.
    fn on_round_trip_time(&mut self, _now: Instant, _rtt: Duration) {}

    fn estimate_bps(&self) -> u64 {
        self.estimate_bps
    }

    /// Probes would be measured by the viewer and show up in its next REMB.
    fn probe_result_bps(&self) -> Option<u64> {
        None
    }
}
