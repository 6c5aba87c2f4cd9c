//! The send side of transport-wide CC toward a viewer that negotiated it: the sequence stamped
//! on every packet sent to it, what was sent, the estimate its feedback gives, and the probe
//! clusters that test the path above it.

use std::time::{Duration, Instant};

use super::prober::Prober;
use crate::engine::bwe::{
    BandwidthEstimator, EstimatorConfig, FeedbackEstimator, PacketResult, SendHistory,
};
use crate::engine::prefetch::prefetch;
use crate::engine::rtcp::{TransportCc, TransportCcError};

/// Feedback of a few hundred packets matches without growing the results.
pub(in crate::engine) const RESULTS_CAPACITY: usize = 512;
/// A transport-wide estimate is handed to allocation when it moves by more than one part in
/// this many ...
const REPORT_CHANGE: u64 = 20;
/// ... or this long after the last one.
const REPORT_INTERVAL: Duration = Duration::from_secs(1);

#[derive(Debug)]
pub(in crate::engine) struct SendSide {
    history: SendHistory,
    estimator: FeedbackEstimator,
    /// The estimate last handed to allocation, and when.
    reported: Option<(Instant, u64)>,
    /// Probe clusters toward it.
    prober: Prober,
}

impl SendSide {
    /// A send side whose estimate starts at `initial_bps`.
    pub fn new(initial_bps: u64) -> Self {
        let config = EstimatorConfig {
            initial_bps,
            ..EstimatorConfig::default()
        };
        Self {
            history: SendHistory::new(),
            estimator: FeedbackEstimator::new(config),
            reported: None,
            prober: Prober::default(),
        }
    }

    /// The estimator, for allocation to read what the path has shown.
    pub fn estimator(&self) -> &FeedbackEstimator {
        &self.estimator
    }

    /// Asks for what sending the next packet reads and writes (the history's head and next
    /// slot, the running probe cluster) ahead of it.
    pub fn touch(&self) {
        self.history.touch();
        prefetch(&self.prober);
    }

    /// The transport-wide sequence number the next packet sent carries.
    pub fn next_sequence(&self) -> u16 {
        self.history.next_sequence()
    }

    /// A media packet or retransmission of `size` bytes went out at `now`: a running probe
    /// cluster counts it too, so its result is what the path carried of all.
    pub fn on_sent(&mut self, now: Instant, size: usize) {
        let cluster = self.prober.running();
        self.history.on_send(now, size, cluster);
    }

    /// A probe packet of `cluster`, of `size` bytes, went out at `now`.
    pub fn on_probe_sent(&mut self, now: Instant, size: usize, cluster: u32) {
        self.history.on_send(now, size, Some(cluster));
        self.prober.on_sent(now, size);
    }

    /// The viewer's transport-wide CC feedback: matched against what was sent, into
    /// `results` (the caller's, reused for every viewer: they are read once, right away, so
    /// one set of lines in cache serves them all instead of a set per viewer), and fed to the
    /// estimator. Returns the estimate to hand to allocation when it moved by more than
    /// [`REPORT_CHANGE`] since the last one handed over, or [`REPORT_INTERVAL`] passed.
    pub fn handle_feedback(
        &mut self,
        now: Instant,
        feedback: &TransportCc<'_>,
        results: &mut Vec<PacketResult>,
    ) -> Result<Option<u64>, TransportCcError> {
        self.history.on_feedback(feedback, results)?;
        self.estimator.on_feedback(now, results);
        let estimate = self.estimator.estimate_bps();
        let due = self.reported.is_none_or(|(at, last)| {
            now >= at + REPORT_INTERVAL || estimate.abs_diff(last) > last / REPORT_CHANGE
        });
        Ok(due.then(|| {
            self.reported = Some((now, estimate));
            estimate
        }))
    }

    /// The viewer's REMB: a ceiling on the estimate. Returns the estimate, handed to
    /// allocation.
    pub fn handle_remb(&mut self, now: Instant, bitrate_bps: u64) -> u64 {
        self.estimator.on_remb(now, bitrate_bps);
        let estimate = self.estimator.estimate_bps();
        self.reported = Some((now, estimate));
        estimate
    }

    /// The viewer's round trip spaces its estimator's decreases: without it they wait the
    /// estimator's default (200 ms) after each change, and a viewer whose link just narrowed
    /// is sent too much for that much longer.
    pub fn handle_round_trip(&mut self, now: Instant, rtt: Duration) {
        self.estimator.on_round_trip_time(now, rtt);
    }

    /// Starts a cluster that brings what the viewer is sent up to `target_bps`, media
    /// (`media_bps`) included; `last_down`: its allocation's last forced downgrade. Not before
    /// the viewer's first feedback: until it reports, nothing would measure the cluster.
    /// Whether one started.
    pub fn start_probe(
        &mut self,
        now: Instant,
        target_bps: u64,
        media_bps: u64,
        last_down: Option<Instant>,
    ) -> bool {
        if self.history.counters().matched == 0 {
            return false;
        }
        self.prober
            .start_toward(now, target_bps, media_bps, &self.estimator, last_down)
    }

    /// The probe cluster a packet is due for at `now`, if any.
    pub fn probe_due(&self, now: Instant) -> Option<u32> {
        self.prober.due(now)
    }

    /// When the running cluster's next packet is due.
    pub fn next_probe(&self) -> Option<Instant> {
        self.prober.next_due()
    }

    /// Gives up the running cluster (nothing to send it with).
    pub fn abandon_probe(&mut self) {
        self.prober.abandon();
    }
}
