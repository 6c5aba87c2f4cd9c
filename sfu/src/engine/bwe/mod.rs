//! Bandwidth estimation toward a viewer transport: what the engine sent, what the viewer's
//! transport-wide CC feedback says arrived, and the estimate made from both.
//!
//! The types here are the contract between the send side (the transport-wide sequence, the
//! send history and the feedback it is matched against) and the estimator. The send history
//! stamps the packets sent and matches feedback into [`PacketResult`]s.
//!
//! The estimators are our own rather than a library's: they are sans-IO like the rest of the
//! engine (every input carries `now`; nothing reads a clock), allocate nothing per feedback
//! (every window is sized once, at construction), and are tuned for a forwarding server,
//! where the media rate is what the publishers send and cannot be encoded up to the
//! estimate: the estimate rises past what the path acknowledges only when a probe shows room.

mod acknowledged;
mod aimd;
mod config;
mod delay_based;
mod feedback_estimator;
mod inter_arrival;
mod link_capacity;
mod loss_based;
mod overuse;
mod probe;
mod queue_growth;
mod remb;
mod send_history;
mod threshold;
mod trendline;

pub use config::EstimatorConfig;
pub use feedback_estimator::FeedbackEstimator;
pub use remb::RembEstimator;
// The send history is the router's; benches measure it on its own.
#[cfg(not(feature = "internal"))]
pub(crate) use send_history::SendHistory;
// The fuzz body checks the history's bound.
#[cfg(all(feature = "fuzzing", not(feature = "internal")))]
pub(crate) use send_history::SEND_HISTORY_CAPACITY;
#[cfg(feature = "internal")]
pub use send_history::{
    acknowledged_bitrate, FeedbackSummary, SendHistory, SendHistoryCounters, SEND_HISTORY_CAPACITY,
};

use std::time::{Duration, Instant};

/// Estimates the bitrate the path toward one viewer carries, from what the viewer reports.
///
/// Fed by the transport's RTCP handling; read by whoever shares the estimate out among the
/// viewer's tracks and decides when to probe. Every method takes the caller's `now`.
pub trait BandwidthEstimator {
    /// One transport-wide CC feedback, matched against the send history: the packets it
    /// reports, received or lost, in sequence order.
    fn on_feedback(&mut self, now: Instant, packets: &[PacketResult]);

    /// The viewer's REMB: its own estimate of what it can receive.
    fn on_remb(&mut self, now: Instant, bitrate_bps: u64);

    /// A round-trip time measured toward the viewer (from its receiver reports).
    fn on_round_trip_time(&mut self, now: Instant, rtt: Duration);

    /// The estimate, bit/s, within the configured bounds.
    fn estimate_bps(&self) -> u64;

    /// The rate the last probe cluster showed the path can carry, if any has; packets sent
    /// with a `probe_cluster` feed it, and a result above the estimate raises it.
    fn probe_result_bps(&self) -> Option<u64>;

    /// The round trip last given to [`on_round_trip_time`](Self::on_round_trip_time).
    fn round_trip_time(&self) -> Option<Duration> {
        None
    }

    /// When that result came (the `now` of the feedback that completed it).
    fn probe_result_at(&self) -> Option<Instant> {
        None
    }

    /// The path's capacity, bit/s, when the last probe saturated the path (it arrived slower
    /// than it was sent): more than a rate the path carries, what it carries at most.
    fn capacity_bps(&self) -> Option<u64> {
        None
    }
}

/// One sent packet, as its feedback reports it: the unit every estimator consumes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PacketResult {
    /// Transport-wide sequence number, extended past 16 bits.
    pub sequence: i64,
    /// When the engine handed it to the host for sending.
    pub send_time: Instant,
    /// Bytes on the wire: RTP header, extensions, payload and padding (not SRTP's tag).
    pub size: usize,
    /// The probe cluster it belonged to, if it was sent to probe.
    pub probe_cluster: Option<u32>,
    /// When it arrived, on the viewer's clock (only differences between arrivals mean
    /// anything); `None` when the feedback reported it lost.
    pub arrival: Option<Duration>,
}

impl PacketResult {
    /// Whether the feedback reported it received.
    pub fn received(&self) -> bool {
        self.arrival.is_some()
    }
}
