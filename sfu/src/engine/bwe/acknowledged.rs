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
/// Bits of an [`Arrival`] that hold the packet's size.
const SIZE_BITS: u32 = 16;

/// One received packet in eight bytes: its arrival in microseconds on the viewer's clock
/// (48 bits: nine years) above its size in bytes (16 bits; an MTU is 1,500). Every viewer
/// keeps thousands and each packet reported writes one and drops one: at eight bytes, a
/// viewer's window is 16 KiB, and a cache line holds eight.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Arrival(u64);

impl Arrival {
    fn new(at: Duration, size: usize) -> Self {
        let micros = u64::try_from(at.as_micros()).unwrap_or(u64::MAX);
        let micros = micros.min(u64::MAX >> SIZE_BITS);
        let size = u16::try_from(size).unwrap_or(u16::MAX);
        Self(micros << SIZE_BITS | u64::from(size))
    }

    fn at(self) -> Duration {
        Duration::from_micros(self.0 >> SIZE_BITS)
    }

    fn size(self) -> usize {
        // Truncation intended: the low bits are the size.
        usize::from(self.0 as u16)
    }
}

/// Bytes received per arrival, over the last [`WINDOW`] of the viewer's clock.
#[derive(Debug, Clone)]
pub(super) struct AcknowledgedBitrate {
    /// In the order reported; allocated once.
    arrivals: VecDeque<Arrival>,
    /// Sum of the sizes in `arrivals`.
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
        let kept = Arrival::new(arrival, size);
        self.arrivals.push_back(kept);
        self.bytes = self.bytes.saturating_add(kept.size());
        self.latest = self.latest.max(kept.at());
        while self
            .arrivals
            .front()
            .is_some_and(|oldest| oldest.at().saturating_add(WINDOW) <= self.latest)
        {
            self.pop_oldest();
        }
    }

    /// Bits per second: the bytes after the oldest arrival over the time since it (the oldest
    /// packet's bytes were carried before its arrival, which opens the span); `None` until
    /// the arrivals span [`MIN_SPAN`].
    pub(super) fn bitrate_bps(&self) -> Option<u64> {
        let oldest = *self.arrivals.front()?;
        let span = self.latest.saturating_sub(oldest.at());
        if span < MIN_SPAN {
            return None;
        }
        let bits = self.bytes.saturating_sub(oldest.size()) as f64 * 8.0;
        Some((bits / span.as_secs_f64()) as u64)
    }

    fn pop_oldest(&mut self) {
        if let Some(oldest) = self.arrivals.pop_front() {
            self.bytes = self.bytes.saturating_sub(oldest.size());
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
    fn an_arrival_keeps_its_microsecond_and_size_in_eight_bytes() {
        assert_eq!(size_of::<Arrival>(), 8);
        let at = Duration::from_micros(1_234_567_890_123);
        let kept = Arrival::new(at, 1_188);
        assert_eq!((kept.at(), kept.size()), (at, 1_188));
        // Past what the bits hold, each saturates instead of spilling into the other.
        let big = Arrival::new(Duration::MAX, 70_000);
        assert_eq!(big.size(), usize::from(u16::MAX));
        assert_eq!(big.at().as_micros(), u128::from(u64::MAX >> SIZE_BITS));
        // Sub-microsecond parts of an arrival are dropped (feedback has 250 us steps).
        assert_eq!(
            Arrival::new(Duration::from_nanos(2_999), 1).at(),
            Duration::from_micros(2)
        );
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
