//! Reception statistics of one incoming RTP stream, as an RTCP report block needs them
//! (RFC 3550 6.4.1, algorithms of appendix A.3 and A.8).

use std::time::{Duration, Instant};

use selector::Unwrapper;

/// Source numbers behind the newest in which a second copy is recognised as a duplicate.
const DUPLICATE_WINDOW: i64 = u128::BITS as i64;

/// The cumulative number of packets lost is a signed 24-bit field (RFC 3550 6.4.1).
const MAX_CUMULATIVE_LOST: i64 = (1 << 23) - 1;
const MIN_CUMULATIVE_LOST: i64 = -(1 << 23);

/// One received packet, as far as statistics are concerned.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ReceivedPacket {
    pub seq: u16,
    /// RTP timestamp.
    pub ts: u32,
    /// Bytes counted for the stream (the caller decides: RTP packet or payload).
    pub len: usize,
    /// A packet with only padding (bandwidth probing): it uses a sequence number but carries no
    /// media, and its timestamp is a repeat, so it is kept out of the jitter.
    pub padding_only: bool,
}

/// The fields of a reception report block (RFC 3550 6.4.1) for one source.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ReceptionReport {
    pub ssrc: u32,
    /// Lost fraction of the packets expected since the previous report, in 1/256.
    pub fraction_lost: u8,
    /// Expected minus received since the start, clamped to 24 bits signed.
    pub cumulative_lost: i32,
    /// Highest sequence number received, with the count of wraps (cycles) in the high 16 bits.
    pub extended_highest_seq: u32,
    /// Interarrival jitter in RTP timestamp units.
    pub jitter: u32,
    /// The middle 32 bits of the NTP timestamp of the last sender report, 0 if none.
    pub last_sr: u32,
    /// Time since that sender report in 1/65536 s, 0 if none.
    pub delay_since_last_sr: u32,
}

/// Counts, loss and jitter of one incoming stream (one SSRC).
///
/// Feed every received packet to [`on_packet`](Self::on_packet) and every sender report of the
/// stream to [`on_sender_report`](Self::on_sender_report); [`report`](Self::report) at each RTCP
/// interval starts a new interval for the fraction lost.
#[derive(Debug, Clone)]
pub struct ReceiveStats {
    ssrc: u32,
    clock_rate: u32,
    unwrapper: Unwrapper,
    /// Extended number of the first packet: expected counts from it.
    base_ext: i64,
    /// Packets received, duplicates excepted so that they do not hide losses.
    received: u64,
    bytes: u64,
    duplicates: u64,
    padding_packets: u64,
    /// Bit i set: the packet `i` behind the newest arrived.
    recent: u128,
    expected_prior: i64,
    received_prior: u64,
    /// Jitter scaled by 16, the integer form of RFC 3550 A.8.
    jitter_q4: u64,
    /// Arrival time minus RTP timestamp of the last packet, in timestamp units.
    last_transit: Option<u32>,
    /// Arrival times are measured from here, so they fit the 32-bit timestamp arithmetic.
    epoch: Option<Instant>,
    last_sr: Option<(u32, Instant)>,
}

impl ReceiveStats {
    /// Statistics of stream `ssrc`, whose RTP clock runs at `clock_rate` Hz.
    pub fn new(ssrc: u32, clock_rate: u32) -> Self {
        Self {
            ssrc,
            clock_rate,
            unwrapper: Unwrapper::default(),
            base_ext: 0,
            received: 0,
            bytes: 0,
            duplicates: 0,
            padding_packets: 0,
            recent: 0,
            expected_prior: 0,
            received_prior: 0,
            jitter_q4: 0,
            last_transit: None,
            epoch: None,
            last_sr: None,
        }
    }

    /// Records a packet received at `now`.
    pub fn on_packet(&mut self, packet: ReceivedPacket, now: Instant) {
        let first = self.unwrapper.highest().is_none();
        let highest = self.unwrapper.highest();
        let ext = self.unwrapper.unwrap(packet.seq);
        if first {
            self.base_ext = ext;
        }
        if !self.mark_received(ext, highest.unwrap_or(ext)) {
            self.duplicates += 1;
            return;
        }
        self.received += 1;
        self.bytes += packet.len as u64;
        if packet.padding_only {
            self.padding_packets += 1;
        } else {
            self.update_jitter(packet.ts, now);
        }
    }

    /// Records a sender report of this stream: `ntp_compact` is the middle 32 bits of its NTP
    /// timestamp, echoed in the next report blocks with the delay since `now`.
    pub fn on_sender_report(&mut self, ntp_compact: u32, now: Instant) {
        self.last_sr = Some((ntp_compact, now));
    }

    /// The report block at `now`, and the start of a new interval for the fraction lost; None
    /// before the first packet.
    pub fn report(&mut self, now: Instant) -> Option<ReceptionReport> {
        let highest = self.unwrapper.highest()?;
        let expected = highest - self.base_ext + 1;
        let expected_interval = expected - self.expected_prior;
        let received_interval = self.received as i64 - self.received_prior as i64;
        let lost_interval = expected_interval - received_interval;
        self.expected_prior = expected;
        self.received_prior = self.received;
        let (last_sr, delay_since_last_sr) = self.last_sr.map_or((0, 0), |(ntp, at)| {
            (ntp, to_ntp_short(now.saturating_duration_since(at)))
        });
        Some(ReceptionReport {
            ssrc: self.ssrc,
            fraction_lost: fraction_lost(lost_interval, expected_interval),
            cumulative_lost: clamp_24(expected - self.received as i64),
            // Truncation intended: the field is 32 bits, cycles in the high half.
            extended_highest_seq: highest as u32,
            // Truncation intended: a jitter beyond 2^32 units is meaningless anyway.
            jitter: (self.jitter_q4 >> 4) as u32,
            last_sr,
            delay_since_last_sr,
        })
    }

    /// Packets received, duplicates excepted, padding-only included.
    #[cfg(test)]
    pub fn packets(&self) -> u64 {
        self.received
    }

    /// Bytes of the packets counted by [`packets`](Self::packets).
    #[cfg(test)]
    pub fn bytes(&self) -> u64 {
        self.bytes
    }

    /// Second copies recognised (within 128 packets of the newest).
    #[cfg(test)]
    pub fn duplicates(&self) -> u64 {
        self.duplicates
    }

    /// Packets that carried only padding.
    #[cfg(test)]
    pub fn padding_packets(&self) -> u64 {
        self.padding_packets
    }

    /// Sets the bit of `ext` in the recent window; false if it was already set.
    fn mark_received(&mut self, ext: i64, highest: i64) -> bool {
        let behind = highest - ext;
        if behind < 0 {
            let ahead = (-behind) as u32;
            self.recent = self.recent.checked_shl(ahead).unwrap_or(0) | 1;
            return true;
        }
        if behind >= DUPLICATE_WINDOW {
            // Too old to tell: counted as a late arrival.
            return true;
        }
        let bit = 1u128 << behind;
        let fresh = self.recent & bit == 0;
        self.recent |= bit;
        fresh
    }

    /// RFC 3550 A.8: J += (|D| - J) / 16, where D is the change in transit time.
    fn update_jitter(&mut self, ts: u32, now: Instant) {
        let epoch = *self.epoch.get_or_insert(now);
        let arrival = self.in_ts_units(now.saturating_duration_since(epoch));
        let transit = arrival.wrapping_sub(ts);
        if let Some(last) = self.last_transit.replace(transit) {
            // Truncation intended: the wrapping difference read as signed.
            let d = u64::from((transit.wrapping_sub(last) as i32).unsigned_abs());
            self.jitter_q4 = self.jitter_q4 + d - ((self.jitter_q4 + 8) >> 4);
        }
    }

    fn in_ts_units(&self, elapsed: Duration) -> u32 {
        // Truncation intended: arrival times wrap like RTP timestamps, and only differences count.
        (elapsed.as_nanos() * u128::from(self.clock_rate) / 1_000_000_000) as u32
    }
}

/// RFC 3550 A.3: the lost fraction in 1/256, zero when packets were gained (duplicates, late
/// packets from before the interval).
fn fraction_lost(lost: i64, expected: i64) -> u8 {
    if expected <= 0 || lost <= 0 {
        return 0;
    }
    // An interval lost whole is 256/256, which the 8-bit field can only show as 255.
    ((lost << 8) / expected).min(255) as u8
}

fn clamp_24(lost: i64) -> i32 {
    // The clamp keeps it within 24 bits, so within i32.
    lost.clamp(MIN_CUMULATIVE_LOST, MAX_CUMULATIVE_LOST) as i32
}

/// A duration in the 1/65536 s units of the RTCP delay since last SR, saturated at 32 bits.
fn to_ntp_short(delay: Duration) -> u32 {
    let units = delay.as_nanos() * 65_536 / 1_000_000_000;
    u32::try_from(units).unwrap_or(u32::MAX)
}

#[cfg(test)]
mod tests {
    use super::*;

    const VIDEO: u32 = 90_000;

    fn media(seq: u16, ts: u32) -> ReceivedPacket {
        ReceivedPacket {
            seq,
            ts,
            len: 1000,
            padding_only: false,
        }
    }

    fn ms(t0: Instant, millis: u64) -> Instant {
        t0 + Duration::from_millis(millis)
    }

    /// Receives `seqs`, all at `now` with timestamp 0.
    fn received(stats: &mut ReceiveStats, seqs: impl IntoIterator<Item = u16>, now: Instant) {
        for seq in seqs {
            stats.on_packet(media(seq, 0), now);
        }
    }

    #[test]
    fn nothing_to_report_before_the_first_packet() {
        let mut stats = ReceiveStats::new(1, VIDEO);
        assert_eq!(stats.report(Instant::now()), None);
    }

    #[test]
    fn rfc3550_a3_loss_cumulative_and_per_interval() {
        let t0 = Instant::now();
        let mut stats = ReceiveStats::new(7, VIDEO);
        // 0..10 expected, 3 and 4 lost: fraction (2 << 8) / 10 = 51.
        received(&mut stats, (0..10).filter(|s| ![3, 4].contains(s)), t0);
        let report = stats.report(t0).unwrap();
        assert_eq!(report.ssrc, 7);
        assert_eq!(report.fraction_lost, 51);
        assert_eq!(report.cumulative_lost, 2);
        assert_eq!(report.extended_highest_seq, 9);
        // Next interval: 10..20 whole, and 3 arrives late: gained one, fraction 0.
        received(&mut stats, 10..20, t0);
        stats.on_packet(media(3, 0), t0);
        let report = stats.report(t0).unwrap();
        assert_eq!(report.fraction_lost, 0);
        assert_eq!(report.cumulative_lost, 1);
        // Next interval: 20..24, of which 3 lost: (3 << 8) / 4 = 192.
        received(&mut stats, [23], t0);
        assert_eq!(stats.report(t0).unwrap().fraction_lost, 192);
        // 24..=30 expected, only 30 received: (6 << 8) / 7 = 219.
        received(&mut stats, [30], t0);
        let report = stats.report(t0).unwrap();
        assert_eq!(report.fraction_lost, 219);
        assert_eq!(report.cumulative_lost, 1 + 3 + 6);
        assert_eq!(fraction_lost(5, 5), 255, "an interval lost whole");
        assert_eq!(stats.packets(), 8 + 10 + 1 + 1 + 1);
        assert_eq!(stats.bytes(), 21_000);
    }

    #[test]
    fn the_extended_highest_sequence_number_counts_cycles() {
        let t0 = Instant::now();
        let mut stats = ReceiveStats::new(1, VIDEO);
        received(&mut stats, (65_530..=65_535).chain(0..=5), t0);
        let report = stats.report(t0).unwrap();
        assert_eq!(report.extended_highest_seq, 0x0001_0005);
        assert_eq!(report.cumulative_lost, 0);
        received(&mut stats, [65_534], t0);
        assert_eq!(stats.duplicates(), 1, "a copy from before the wrap");
    }

    #[test]
    fn duplicates_are_counted_apart_and_do_not_hide_losses() {
        let t0 = Instant::now();
        let mut stats = ReceiveStats::new(1, VIDEO);
        received(&mut stats, [0, 1, 1, 3, 3, 0], t0);
        assert_eq!(stats.duplicates(), 3);
        assert_eq!(stats.packets(), 3);
        let report = stats.report(t0).unwrap();
        assert_eq!(report.cumulative_lost, 1, "2 is still lost");
        assert_eq!(report.fraction_lost, 64);
    }

    #[test]
    fn cumulative_loss_saturates_at_24_bits() {
        let t0 = Instant::now();
        let mut stats = ReceiveStats::new(1, VIDEO);
        let mut seq = 0u16;
        for _ in 0..300 {
            received(&mut stats, [seq], t0);
            seq = seq.wrapping_add(30_000);
        }
        assert_eq!(stats.report(t0).unwrap().cumulative_lost, (1 << 23) - 1);
        assert_eq!(clamp_24(-(1 << 30)), -(1 << 23));
    }

    #[test]
    fn rfc3550_a8_jitter_of_one_late_packet() {
        let t0 = Instant::now();
        let mut stats = ReceiveStats::new(1, VIDEO);
        // 20 ms apart, 1800 timestamp units apart: constant transit, no jitter.
        for i in 0..5u16 {
            stats.on_packet(media(i, u32::from(i) * 1800), ms(t0, u64::from(i) * 20));
        }
        assert_eq!(stats.report(t0).unwrap().jitter, 0);
        // 10 ms late, 900 units: J = 900 / 16 = 56.25.
        stats.on_packet(media(5, 5 * 1800), ms(t0, 5 * 20 + 10));
        assert_eq!(stats.report(t0).unwrap().jitter, 56);
        // Back on time, |D| = 900 again: J = 56.25 + (900 - 56.25) / 16 = 108.98.
        stats.on_packet(media(6, 6 * 1800), ms(t0, 6 * 20));
        assert_eq!(stats.report(t0).unwrap().jitter, 109);
    }

    #[test]
    fn jitter_survives_the_timestamp_wrap() {
        let t0 = Instant::now();
        let mut stats = ReceiveStats::new(1, VIDEO);
        let base = u32::MAX - 1800;
        for i in 0..4u16 {
            let ts = base.wrapping_add(u32::from(i) * 1800);
            stats.on_packet(media(i, ts), ms(t0, u64::from(i) * 20));
        }
        assert_eq!(stats.report(t0).unwrap().jitter, 0);
    }

    #[test]
    fn padding_only_packets_are_counted_but_kept_out_of_the_jitter() {
        let t0 = Instant::now();
        let mut stats = ReceiveStats::new(1, VIDEO);
        stats.on_packet(media(0, 0), t0);
        let padding = ReceivedPacket {
            padding_only: true,
            len: 200,
            ..media(1, 0)
        };
        stats.on_packet(padding, ms(t0, 500));
        stats.on_packet(media(2, 1800), ms(t0, 20));
        assert_eq!(stats.padding_packets(), 1);
        assert_eq!(stats.packets(), 3);
        assert_eq!(stats.bytes(), 2200);
        let report = stats.report(ms(t0, 20)).unwrap();
        assert_eq!(
            report.jitter, 0,
            "the padding's stale timestamp did not count"
        );
        assert_eq!(report.cumulative_lost, 0);
    }

    #[test]
    fn the_last_sender_report_is_echoed_with_the_delay_since() {
        let t0 = Instant::now();
        let mut stats = ReceiveStats::new(1, VIDEO);
        stats.on_packet(media(0, 0), t0);
        let report = stats.report(t0).unwrap();
        assert_eq!((report.last_sr, report.delay_since_last_sr), (0, 0));
        stats.on_sender_report(0xDEAD_BEEF, ms(t0, 100));
        let report = stats.report(ms(t0, 1600)).unwrap();
        assert_eq!(report.last_sr, 0xDEAD_BEEF);
        assert_eq!(report.delay_since_last_sr, 98_304, "1.5 s in 1/65536 s");
    }

    #[test]
    fn the_state_per_stream_stays_small() {
        // One per published stream, touched on every packet: a few cache lines.
        assert!(
            size_of::<ReceiveStats>() <= 192,
            "{}",
            size_of::<ReceiveStats>()
        );
    }
}
