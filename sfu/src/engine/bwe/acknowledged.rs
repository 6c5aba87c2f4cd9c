//! The acknowledged bitrate: what the viewer reports receiving, over a sliding window of its
//! arrivals. It is what the path demonstrably carried, so a decrease lands just under it and
//! an increase may not run far ahead of it.

use std::collections::VecDeque;
use std::time::Duration;

/// How far back the window reaches from the latest arrival.
const WINDOW: Duration = Duration::from_millis(500);
/// Arrivals spanning less than this give no rate: a few packets say nothing yet.
const MIN_SPAN: Duration = Duration::from_millis(50);
/// Arrivals kept at most: 500 ms at 20 Mbit/s of 1200-byte packets, with room. Past it the
/// oldest go first, and the window is simply shorter.
const CAPACITY: usize = 2048;

/// Bytes received per arrival, over the last [`WINDOW`] of the viewer's clock.
#[derive(Debug, Clone)]
pub(super) struct AcknowledgedBitrate {
    /// (arrival, bytes), in the order reported; allocated once.
    arrivals: VecDeque<(Duration, usize)>,
    /// Sum of the bytes in `arrivals`.
    bytes: usize,
    latest: Duration,
}

impl Default for AcknowledgedBitrate {
    fn default() -> Self {
        Self {
            arrivals: VecDeque::with_capacity(CAPACITY),
            bytes: 0,
            latest: Duration::ZERO,
        }
    }
}

impl AcknowledgedBitrate {
    /// Takes one received packet.
    pub(super) fn on_packet(&mut self, arrival: Duration, size: usize) {
        if self.arrivals.len() == CAPACITY {
            self.pop_oldest();
        }
        self.arrivals.push_back((arrival, size));
        self.bytes = self.bytes.saturating_add(size);
        self.latest = self.latest.max(arrival);
        while self
            .arrivals
            .front()
            .is_some_and(|&(oldest, _)| oldest.saturating_add(WINDOW) <= self.latest)
        {
            self.pop_oldest();
        }
    }

    /// Bits per second: the bytes after the oldest arrival over the time since it (the oldest
    /// packet's bytes were carried before its arrival, which opens the span); `None` until
    /// the arrivals span [`MIN_SPAN`].
    pub(super) fn bitrate_bps(&self) -> Option<u64> {
        let &(oldest, oldest_size) = self.arrivals.front()?;
        let span = self.latest.saturating_sub(oldest);
        if span < MIN_SPAN {
            return None;
        }
        let bits = self.bytes.saturating_sub(oldest_size) as f64 * 8.0;
        Some((bits / span.as_secs_f64()) as u64)
    }

    fn pop_oldest(&mut self) {
        if let Some((_, size)) = self.arrivals.pop_front() {
            self.bytes = self.bytes.saturating_sub(size);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn measures_the_rate_of_arrivals_over_the_window() {
        let mut acknowledged = AcknowledgedBitrate::default();
        assert_eq!(acknowledged.bitrate_bps(), None);
        // 1200 bytes every 10 ms: 960 kbit/s, for two seconds.
        for packet in 0..200u64 {
            acknowledged.on_packet(Duration::from_millis(5_000 + packet * 10), 1200);
        }
        assert_eq!(acknowledged.bitrate_bps(), Some(960_000));
        assert!(acknowledged.arrivals.len() <= 51);
    }

    #[test]
    fn never_grows_past_its_capacity() {
        let mut acknowledged = AcknowledgedBitrate::default();
        for packet in 0..(CAPACITY as u64 * 2) {
            // 100 bytes every 40 us: 20 Mbit/s of small packets.
            acknowledged.on_packet(Duration::from_micros(packet * 40), 100);
        }
        assert_eq!(acknowledged.arrivals.len(), CAPACITY);
        assert_eq!(acknowledged.arrivals.capacity(), CAPACITY);
        let rate = acknowledged.bitrate_bps().expect("a rate");
        assert!(rate.abs_diff(20_000_000) < 10, "{rate}");
    }
}
