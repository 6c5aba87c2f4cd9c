//! NTP timestamps (RFC 3550 section 4) and the clock mapping that produces them.
//!
//! The engine's `now` is an [`Instant`], which is not wall-clock time, so the node hands the
//! engine a [`WallClock`]: one instant paired with the Unix time read at that instant. Everything
//! else is arithmetic on that pair, which keeps the engine free of clock reads.

use std::time::{Duration, Instant};

/// Seconds from the NTP epoch (1900-01-01) to the Unix epoch (1970-01-01).
const NTP_UNIX_OFFSET_SECS: u64 = 2_208_988_800;
const NANOS_PER_SEC: u128 = 1_000_000_000;

/// Maps the engine's monotonic `now` to wall-clock NTP time.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct WallClock {
    /// A monotonic instant ...
    pub instant: Instant,
    /// ... and the time since the Unix epoch read at that instant.
    pub unix: Duration,
}

impl WallClock {
    /// The 64-bit NTP timestamp at `now`. An instant before the mapping's own counts as the
    /// mapping's instant: the clock never runs backwards.
    pub fn ntp(&self, now: Instant) -> u64 {
        ntp_from_unix(self.unix + now.saturating_duration_since(self.instant))
    }
}

/// The 64-bit NTP timestamp (32.32 fixed point seconds since 1900) for a Unix time. Wraps in
/// NTP era 1 (2036), as the wire format does.
pub fn ntp_from_unix(unix: Duration) -> u64 {
    let secs = unix.as_secs().wrapping_add(NTP_UNIX_OFFSET_SECS);
    let fraction = (u128::from(unix.subsec_nanos()) << 32) / NANOS_PER_SEC;
    (secs << 32) | fraction as u64
}

/// The Unix time for an NTP timestamp of era 0, or `None` for one before 1970.
pub fn unix_from_ntp(ntp: u64) -> Option<Duration> {
    let secs = (ntp >> 32).checked_sub(NTP_UNIX_OFFSET_SECS)?;
    let nanos = (u128::from(ntp & 0xFFFF_FFFF) * NANOS_PER_SEC) >> 32;
    // Below 1e9 because the fraction is below 2^32.
    Some(Duration::new(secs, nanos as u32))
}

/// The middle 32 bits of an NTP timestamp (16.16 fixed point): the unit of LSR, DLSR and the
/// round-trip time in a report block.
pub fn compact_ntp(ntp: u64) -> u32 {
    (ntp >> 16) as u32
}

/// A duration in compact NTP units (1/65536 s), saturating at the largest one, as DLSR needs.
pub fn compact_from_duration(duration: Duration) -> u32 {
    let units = (duration.as_nanos() << 16) / NANOS_PER_SEC;
    u32::try_from(units).unwrap_or(u32::MAX)
}

/// The duration of a count of compact NTP units.
pub fn duration_from_compact(units: u32) -> Duration {
    let nanos = (u128::from(units) * NANOS_PER_SEC) >> 16;
    // At most (2^32 * 1e9) >> 16, well inside u64 nanoseconds.
    Duration::from_nanos(nanos as u64)
}

/// The round-trip time from one report block (RFC 3550 section 6.4.1): the report's arrival
/// minus the LSR it echoes minus the DLSR the receiver held it for, all in compact NTP units and
/// modulo 2^32 as the fields wrap. `None` when the receiver has had no sender report yet
/// (LSR 0) or the result is negative, which only clock errors or a lying peer produce.
pub fn round_trip_time(arrival: u32, last_sr: u32, delay_since_last_sr: u32) -> Option<Duration> {
    if last_sr == 0 {
        return None;
    }
    let rtt = arrival
        .wrapping_sub(last_sr)
        .wrapping_sub(delay_since_last_sr);
    // A wrapped difference in the upper half is a negative one.
    (rtt < 1 << 31).then(|| duration_from_compact(rtt))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rfc3550_section_6_4_1_example() {
        // The figure in RFC 3550 section 6.4.1: A = 0xb710:8000 (46864.500 s),
        // LSR = 0xb705:2000 (46853.125 s), DLSR = 0x0005:4000 (5.250 s), RTT = 6.125 s.
        let rtt = round_trip_time(0xb710_8000, 0xb705_2000, 0x0005_4000);
        assert_eq!(rtt, Some(Duration::from_millis(6125)));
    }

    #[test]
    fn rtt_across_the_compact_wrap() {
        // LSR just before the 16.16 wrap, arrival 1.5 s later after it, held 0.25 s.
        let rtt = round_trip_time(0x0000_8000, 0xFFFF_0000, 0x0000_4000);
        assert_eq!(rtt, Some(Duration::from_millis(1250)));
    }

    #[test]
    fn rtt_without_sender_report_or_negative_is_none() {
        assert_eq!(round_trip_time(0x1_0000, 0, 0), None);
        assert_eq!(round_trip_time(0x1_0000, 0x1_0000, 0x10), None);
        assert_eq!(round_trip_time(0x1_0000, 0x1_0000, 0), Some(Duration::ZERO));
    }

    #[test]
    fn unix_epoch_and_back() {
        assert_eq!(ntp_from_unix(Duration::ZERO), NTP_UNIX_OFFSET_SECS << 32);
        let half = ntp_from_unix(Duration::from_millis(1_500));
        assert_eq!(half, ((NTP_UNIX_OFFSET_SECS + 1) << 32) | 0x8000_0000);
        assert_eq!(unix_from_ntp(half), Some(Duration::from_millis(1_500)));
        assert_eq!(unix_from_ntp(0), None);
    }

    #[test]
    fn unix_round_trip_loses_at_most_a_nanosecond() {
        let unix = Duration::new(1_700_000_000, 123_456_789);
        let back = unix_from_ntp(ntp_from_unix(unix)).unwrap();
        assert!(unix - back <= Duration::from_nanos(1), "{back:?}");
    }

    #[test]
    fn compact_units() {
        assert_eq!(compact_ntp(0x1234_5678_9ABC_DEF0), 0x5678_9ABC);
        assert_eq!(
            compact_from_duration(Duration::from_millis(5_250)),
            0x0005_4000
        );
        assert_eq!(
            duration_from_compact(0x0005_4000),
            Duration::from_millis(5_250)
        );
        assert_eq!(
            compact_from_duration(Duration::from_secs(1 << 20)),
            u32::MAX
        );
    }

    #[test]
    fn wall_clock_follows_now() {
        let instant = Instant::now();
        let clock = WallClock {
            instant,
            unix: Duration::from_secs(1_000),
        };
        let later = clock.ntp(instant + Duration::from_millis(250));
        assert_eq!(later, ((NTP_UNIX_OFFSET_SECS + 1_000) << 32) | 0x4000_0000);
        let earlier = instant
            .checked_sub(Duration::from_secs(1))
            .unwrap_or(instant);
        assert_eq!(clock.ntp(earlier), clock.ntp(instant));
    }
}
