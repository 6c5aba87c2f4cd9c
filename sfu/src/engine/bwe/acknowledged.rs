//! The acknowledged bitrate: what the viewer reports receiving, over a sliding window of its
//! arrivals. It is what the path demonstrably carried, so a decrease lands just under it and
//! an increase may not run far ahead of it.
//!
//! The window is kept as the bytes of each [`BUCKET`] of the viewer's clock, not packet by
//! packet: every viewer keeps one, and every packet its feedback reports lands in it. A ring
//! of buckets is a few cache lines whatever the rate, where a ring of arrivals held thousands
//! (16 KiB a viewer, each packet a write and a drop on lines not touched for half a second).
//! The window's far edge moves a bucket at a time; its rate stays exact, since each bucket
//! remembers when its first arrival came.

use std::time::Duration;

/// How far back the window reaches from the latest arrival, at most.
const WINDOW: Duration = Duration::from_millis(500);
/// Arrivals spanning less than this give no rate: a few packets say nothing yet.
const MIN_SPAN: Duration = Duration::from_millis(50);
/// The window's grain: arrivals within one bucket are summed.
const BUCKET: Duration = Duration::from_millis(10);
/// Buckets in the window: the latest arrival's and those before it.
const BUCKETS: usize = (WINDOW.as_micros() / BUCKET.as_micros()) as usize;
/// [`BUCKET`] in microseconds, the unit of the viewer's clock kept here.
const BUCKET_MICROS: u64 = BUCKET.as_micros() as u64;

/// The arrivals of one [`BUCKET`] of the viewer's clock in eight bytes: their bytes, and the
/// first's offset into the bucket (microseconds) and size, which open the window's span when
/// it is the oldest.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
struct Bucket {
    bytes: u32,
    first_offset: u16,
    first_size: u16,
}

impl Bucket {
    fn is_empty(self) -> bool {
        self.bytes == 0
    }

    /// Adds an arrival `offset` microseconds into the bucket.
    fn add(&mut self, offset: u16, size: u16) {
        if self.is_empty() || offset < self.first_offset {
            (self.first_offset, self.first_size) = (offset, size);
        }
        self.bytes = self.bytes.saturating_add(u32::from(size));
    }
}

/// Bytes received per bucket, over the last [`WINDOW`] of the viewer's clock.
#[derive(Debug, Clone)]
pub(super) struct AcknowledgedBitrate {
    /// Bucket `n` (the viewer's clock over [`BUCKET`]) at `n % BUCKETS`.
    buckets: [Bucket; BUCKETS],
    /// The latest arrival's bucket number; `None` before any arrival.
    latest_bucket: Option<u64>,
    /// The latest arrival, microseconds on the viewer's clock.
    latest: u64,
    /// Sum of the buckets' bytes.
    bytes: u64,
}

impl Default for AcknowledgedBitrate {
    fn default() -> Self {
        Self {
            buckets: [Bucket::default(); BUCKETS],
            latest_bucket: None,
            latest: 0,
            bytes: 0,
        }
    }
}

impl AcknowledgedBitrate {
    /// Takes one received packet. An arrival older than the window's buckets is not counted,
    /// nor is a packet of no bytes (it carried nothing).
    pub(super) fn on_packet(&mut self, arrival: Duration, size: usize) {
        let size = u16::try_from(size).unwrap_or(u16::MAX);
        if size == 0 {
            return;
        }
        let micros = u64::try_from(arrival.as_micros()).unwrap_or(u64::MAX);
        let number = micros / BUCKET_MICROS;
        let latest_bucket = *self.latest_bucket.get_or_insert(number);
        if number > latest_bucket {
            self.advance(latest_bucket, number);
        } else if latest_bucket - number >= BUCKETS as u64 {
            return;
        }
        self.latest = self.latest.max(micros);
        // Below BUCKET_MICROS, 10,000: fits.
        let offset = (micros % BUCKET_MICROS) as u16;
        self.buckets[Self::index(number)].add(offset, size);
        self.bytes = self.bytes.saturating_add(u64::from(size));
    }

    /// Bits per second: the bytes after the oldest bucket's first arrival over the time since
    /// it (that packet's bytes were carried before its arrival, which opens the span); `None`
    /// until the arrivals span [`MIN_SPAN`].
    pub(super) fn bitrate_bps(&self) -> Option<u64> {
        let latest_bucket = self.latest_bucket?;
        let oldest = (latest_bucket.saturating_sub(BUCKETS as u64 - 1)..=latest_bucket)
            .find(|&number| !self.buckets[Self::index(number)].is_empty())?;
        let first = self.buckets[Self::index(oldest)];
        let first_at = oldest * BUCKET_MICROS + u64::from(first.first_offset);
        let span = Duration::from_micros(self.latest.saturating_sub(first_at));
        if span < MIN_SPAN {
            return None;
        }
        let bits = self.bytes.saturating_sub(u64::from(first.first_size)) as f64 * 8.0;
        Some((bits / span.as_secs_f64()) as u64)
    }

    /// Moves the window on to end at bucket `to`, emptying the buckets it leaves behind.
    fn advance(&mut self, from: u64, to: u64) {
        let leaving = (to - from).min(BUCKETS as u64);
        for number in to - leaving + 1..=to {
            let bucket = std::mem::take(&mut self.buckets[Self::index(number)]);
            self.bytes = self.bytes.saturating_sub(u64::from(bucket.bytes));
        }
        self.latest_bucket = Some(to);
    }

    fn index(number: u64) -> usize {
        // Below BUCKETS: fits.
        (number % BUCKETS as u64) as usize
    }
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    proptest! {
        /// Over arrivals in order, at any pace and size, the rate is the exact one over the
        /// arrivals in the window's buckets: bytes after the first over the time since it.
        #[test]
        fn the_rate_is_that_of_the_arrivals_kept(
            arrivals in proptest::collection::vec((0u64..40_000, 1usize..1_500), 1..400),
        ) {
            let mut acknowledged = AcknowledgedBitrate::default();
            let mut at = 1_000_000;
            let mut kept = Vec::new();
            for (gap, size) in arrivals {
                at += gap;
                acknowledged.on_packet(Duration::from_micros(at), size);
                kept.push((at, size));
            }
            let window_starts = (at / BUCKET_MICROS + 1).saturating_sub(BUCKETS as u64);
            kept.retain(|&(arrival, _)| arrival / BUCKET_MICROS >= window_starts);
            let (first_at, first_size) = kept[0];
            let bytes: usize = kept.iter().map(|&(_, size)| size).sum();
            prop_assert_eq!(acknowledged.bytes, bytes as u64);
            let span = at - first_at;
            let expected = (span >= MIN_SPAN.as_micros() as u64).then(|| {
                ((bytes - first_size) as f64 * 8.0 / Duration::from_micros(span).as_secs_f64()) as u64
            });
            prop_assert_eq!(acknowledged.bitrate_bps(), expected);
        }
    }

    #[test]
    fn measures_the_rate_of_arrivals_over_the_window() {
        let mut acknowledged = AcknowledgedBitrate::default();
        assert_eq!(acknowledged.bitrate_bps(), None);
        // 1200 bytes every 10 ms: 960 kbit/s, for two seconds.
        for packet in 0..200u64 {
            acknowledged.on_packet(Duration::from_millis(5_000 + packet * 10), 1200);
        }
        assert_eq!(acknowledged.bitrate_bps(), Some(960_000));
        // The last 500 ms: 50 packets.
        assert_eq!(acknowledged.bytes, 50 * 1200);
    }

    #[test]
    fn holds_any_rate_in_its_buckets() {
        assert!(size_of::<AcknowledgedBitrate>() <= 448);
        let mut acknowledged = AcknowledgedBitrate::default();
        // 100 bytes every 40 us: 20 Mbit/s of small packets, for two seconds.
        for packet in 0..50_000u64 {
            acknowledged.on_packet(Duration::from_micros(packet * 40), 100);
        }
        let rate = acknowledged.bitrate_bps().expect("a rate");
        assert!(rate.abs_diff(20_000_000) < 10, "{rate}");
        // 500 ms of it, to the bucket.
        assert_eq!(acknowledged.bytes, 500 * 25 * 100);
    }

    #[test]
    fn the_span_opens_at_the_oldest_arrival_kept() {
        let mut acknowledged = AcknowledgedBitrate::default();
        // 60 ms apart, mid-bucket: the span is the arrivals' own, not the buckets'.
        acknowledged.on_packet(Duration::from_micros(1_003_700), 500);
        acknowledged.on_packet(Duration::from_micros(1_063_700), 750);
        assert_eq!(acknowledged.bitrate_bps(), Some(750 * 8 * 1_000 / 60));
        // Less than MIN_SPAN apart: no rate yet.
        let mut young = AcknowledgedBitrate::default();
        young.on_packet(Duration::from_millis(1_000), 500);
        young.on_packet(Duration::from_millis(1_049), 500);
        assert_eq!(young.bitrate_bps(), None);
    }

    #[test]
    fn late_and_reordered_arrivals() {
        let mut acknowledged = AcknowledgedBitrate::default();
        acknowledged.on_packet(Duration::from_micros(2_000_500), 1_000);
        // Reported after it but arrived before, in the same bucket: it opens the span.
        acknowledged.on_packet(Duration::from_micros(2_000_100), 1_000);
        acknowledged.on_packet(Duration::from_micros(2_100_100), 1_000);
        assert_eq!(acknowledged.bitrate_bps(), Some(160_000));
        // Before them, in the bucket before: it opens the span instead.
        acknowledged.on_packet(Duration::from_micros(1_990_100), 1_000);
        assert_eq!(
            acknowledged.bitrate_bps(),
            Some(3_000 * 8 * 1_000_000 / 110_000)
        );
        // Older than the window: not counted.
        acknowledged.on_packet(Duration::from_millis(1_500), 9_000);
        assert_eq!(acknowledged.bytes, 4_000);
        // Nothing for longer than the window: the old buckets are gone.
        acknowledged.on_packet(Duration::from_millis(9_000), 1_000);
        acknowledged.on_packet(Duration::from_millis(9_100), 1_000);
        assert_eq!(acknowledged.bytes, 2_000);
        assert_eq!(acknowledged.bitrate_bps(), Some(80_000));
    }

    #[test]
    fn the_far_ends_of_the_clock_and_of_sizes() {
        let mut acknowledged = AcknowledgedBitrate::default();
        acknowledged.on_packet(Duration::MAX, 70_000);
        acknowledged.on_packet(Duration::ZERO, 0);
        assert_eq!(acknowledged.bytes, u64::from(u16::MAX));
        assert_eq!(acknowledged.bitrate_bps(), None);
        let mut empty = AcknowledgedBitrate::default();
        empty.on_packet(Duration::from_secs(1), 0);
        assert_eq!(empty.bitrate_bps(), None);
    }
}
