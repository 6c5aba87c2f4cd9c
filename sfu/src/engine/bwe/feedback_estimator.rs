//! The estimator of a viewer that sends transport-wide CC feedback: delay-based and
//! loss-based control over the feedback, probes to find room above the media rate, the
//! viewer's REMB as a ceiling, all within the configured bounds.

use std::time::{Duration, Instant};

use super::acknowledged::AcknowledgedBitrate;
use super::delay_based::DelayBasedControl;
use super::loss_based::LossBasedControl;
use super::probe::ProbeBitrate;
use super::{BandwidthEstimator, EstimatorConfig, PacketResult};

/// Estimates the path toward one viewer from its transport-wide CC feedback, in the manner
/// of draft-ietf-rmcat-gcc-02: the lesser of the delay-based and the loss-based estimates.
#[derive(Debug, Clone)]
pub struct FeedbackEstimator {
    config: EstimatorConfig,
    acknowledged: AcknowledgedBitrate,
    probe: ProbeBitrate,
    delay: DelayBasedControl,
    loss: LossBasedControl,
    /// The viewer's own estimate, if it sends REMB too.
    remb_bps: Option<u64>,
    estimate_bps: u64,
    /// When the last probe result came.
    probe_at: Option<Instant>,
    /// The viewer's round trip, once measured.
    rtt: Option<Duration>,
}

impl FeedbackEstimator {
    /// Starts at `config.initial_bps`; allocates its windows here, once.
    pub fn new(config: EstimatorConfig) -> Self {
        let min = config.min_bps as f64;
        let max = config.max_bps as f64;
        let initial = config.clamp(config.initial_bps) as f64;
        Self {
            config,
            acknowledged: AcknowledgedBitrate::default(),
            probe: ProbeBitrate::default(),
            delay: DelayBasedControl::new(initial, min, max),
            loss: LossBasedControl::new(initial, min, max),
            remb_bps: None,
            estimate_bps: config.clamp(config.initial_bps),
            probe_at: None,
            rtt: None,
        }
    }

    /// The lesser of the two controls and the REMB, within the bounds.
    fn update_estimate(&mut self) {
        let controls = self.delay.bitrate_bps().min(self.loss.bound_bps());
        let controls = self.config.clamp(controls as u64);
        self.estimate_bps = self
            .config
            .clamp(self.remb_bps.map_or(controls, |remb| remb.min(controls)));
    }
}

impl BandwidthEstimator for FeedbackEstimator {
    fn on_feedback(&mut self, now: Instant, packets: &[PacketResult]) {
        for packet in packets {
            let Some(arrival) = packet.arrival else {
                continue;
            };
            self.acknowledged.on_packet(arrival, packet.size);
        }
        self.probe.on_feedback(now, packets);
        let probe = self.probe.take_result_bps();
        self.probe_at = probe.map_or(self.probe_at, |_| Some(now));
        let acknowledged = self.acknowledged.bitrate_bps();
        if self.delay.on_feedback(now, packets, acknowledged, probe) {
            self.loss.on_probe(self.delay.bitrate_bps());
        }
        let (delay, estimate) = (self.delay.bitrate_bps(), self.estimate_bps as f64);
        self.loss.on_feedback(now, packets, delay, estimate);
        self.update_estimate();
    }

    /// The viewer's own estimate caps ours: it knows its downlink.
    fn on_remb(&mut self, _now: Instant, bitrate_bps: u64) {
        self.remb_bps = Some(bitrate_bps);
        self.update_estimate();
    }

    fn on_round_trip_time(&mut self, _now: Instant, rtt: Duration) {
        self.rtt = Some(rtt);
        self.delay.set_rtt(rtt);
        self.loss.set_rtt(rtt);
    }

    fn round_trip_time(&self) -> Option<Duration> {
        self.rtt
    }

    fn estimate_bps(&self) -> u64 {
        self.estimate_bps
    }

    fn probe_result_bps(&self) -> Option<u64> {
        self.probe.last_result_bps()
    }

    fn probe_result_at(&self) -> Option<Instant> {
        self.probe_at
    }

    fn capacity_bps(&self) -> Option<u64> {
        self.probe.capacity_bps()
    }
}
