//! Bandwidth estimation toward a viewer transport: what the engine sent, what the viewer's
//! transport-wide CC feedback says arrived, and the estimate made from both.
//!
//! The types here are the contract between the send side (the transport-wide sequence, the
//! send history and the feedback it is matched against) and the estimator. [`SendHistory`]
//! stamps the packets sent and matches feedback into [`PacketResult`]s.

use std::time::{Duration, Instant};

mod send_history;

pub use send_history::{
    acknowledged_bitrate, FeedbackSummary, SendHistory, SendHistoryCounters, SEND_HISTORY_CAPACITY,
};

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
