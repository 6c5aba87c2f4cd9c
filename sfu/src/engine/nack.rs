//! Which lost packets of a published stream to NACK (RFC 4585 generic NACK), and when.
//!
//! The publisher side of loss recovery: every received sequence number goes in, the numbers due
//! for a NACK come out. A gap is NACKed only after a short reorder delay (a packet a few
//! milliseconds late is not lost), retried once per round trip, and given up after a number of
//! retries or an age after which a retransmission would arrive too late to be of use.
//!
//! The round trip toward the publisher is measured here, from NACK to retransmission: the SFU
//! receives no reports that would tell it otherwise (a publisher only sends). Only packets
//! that came back on the RTX stream are sampled, and only those NACKed once: a late original
//! arriving just after its first NACK would say the round trip is a few milliseconds, and with
//! several NACKs out it is unknown which one was answered.

use std::collections::VecDeque;
use std::time::{Duration, Instant};

use selector::Unwrapper;

/// When and how often to NACK.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct NackConfig {
    /// How long a gap may stay open before the first NACK: reordering shorter than this costs
    /// nothing.
    pub reorder_delay: Duration,
    /// The shortest spacing of retries, used while the round-trip time is smaller.
    pub min_retry_interval: Duration,
    /// NACKs sent per missing packet at most.
    pub max_retries: u8,
    /// Age of a gap after which a retransmission would be too late to play, so it is given up.
    pub max_age: Duration,
    /// Missing packets tracked at most; beyond it the oldest is evicted, so memory stays bounded
    /// whatever the loss.
    pub max_missing: usize,
    /// A jump of more sequence numbers than this, either way, restarts tracking instead of
    /// NACKing thousands of packets: the sender restarted or the stream was replaced.
    pub reset_jump: u16,
}

impl Default for NackConfig {
    fn default() -> Self {
        Self {
            reorder_delay: Duration::from_millis(5),
            min_retry_interval: Duration::from_millis(10),
            max_retries: 10,
            max_age: Duration::from_secs(1),
            max_missing: 512,
            reset_jump: 1000,
        }
    }
}

/// What a received sequence number meant.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Arrival {
    /// The newest so far, possibly opening a gap.
    New,
    /// A missing packet arrived: late, or retransmitted.
    Recovered,
    /// Already received, or missing so long ago that it is no longer tracked.
    Old,
    /// A jump beyond [`NackConfig::reset_jump`]: tracking restarted at this packet.
    Reset,
}

/// Counters since creation.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct NackStats {
    /// NACKs handed out by [`NackGenerator::poll_nacks`], retries included.
    pub nacked: u64,
    /// Missing packets that arrived after all.
    pub recovered: u64,
    /// Missing packets dropped after the last retry or the maximum age.
    pub given_up: u64,
    /// Missing packets dropped unasked-for: beyond [`NackConfig::max_missing`], or by a reset.
    pub evicted: u64,
    /// Restarts after a jump (see [`Arrival::Reset`]).
    pub resets: u64,
}

/// Tracks the missing sequence numbers of one incoming stream and says when to NACK them.
///
/// Feed every received packet to [`on_packet`](Self::on_packet), including retransmissions once
/// unwrapped from RTX. Call [`poll_nacks`](Self::poll_nacks) when [`next_timeout`](Self::next_timeout)
/// is reached (or after each packet) and send what it yields.
#[derive(Debug)]
pub struct NackGenerator {
    config: NackConfig,
    unwrapper: Unwrapper,
    /// Missing packets in increasing extended sequence number, at most `config.max_missing`; the
    /// capacity is reserved at construction.
    missing: VecDeque<Missing>,
    /// The round-trip time that spaces retries: the measured one, else the one last given to
    /// `poll_nacks`.
    rtt: Duration,
    /// Smoothed NACK-to-retransmission time, once a retransmission was seen.
    measured_rtt: Option<Duration>,
    stats: NackStats,
}

#[derive(Debug, Clone, Copy)]
struct Missing {
    ext_seq: i64,
    /// When the gap was seen, the start of the reorder delay and of the age.
    detected: Instant,
    /// When the last NACK for it was handed out.
    last_nacked: Option<Instant>,
    nacks: u8,
}

/// What `poll_nacks` does with a missing packet that is due.
enum Due {
    Nack,
    GiveUp,
}

impl NackGenerator {
    /// A generator with the given settings; `max_missing` is at least 1.
    pub fn new(mut config: NackConfig) -> Self {
        config.max_missing = config.max_missing.max(1);
        Self {
            config,
            unwrapper: Unwrapper::default(),
            missing: VecDeque::with_capacity(config.max_missing),
            rtt: Duration::ZERO,
            measured_rtt: None,
            stats: NackStats::default(),
        }
    }

    /// Records a received sequence number.
    pub fn on_packet(&mut self, seq: u16, now: Instant) -> Arrival {
        self.arrive(seq, now, false)
    }

    /// Records a sequence number that came back as a retransmission on the RTX stream: as
    /// [`on_packet`](Self::on_packet), and a round-trip sample.
    pub fn on_retransmission(&mut self, seq: u16, now: Instant) -> Arrival {
        self.arrive(seq, now, true)
    }

    fn arrive(&mut self, seq: u16, now: Instant, retransmission: bool) -> Arrival {
        let Some(highest) = self.unwrapper.highest() else {
            self.unwrapper.unwrap(seq);
            return Arrival::New;
        };
        // Probe on a copy: a jump must not move the highest before it is judged.
        let mut probe = self.unwrapper;
        let ext_seq = probe.unwrap(seq);
        let delta = ext_seq - highest;
        if delta.unsigned_abs() > u64::from(self.config.reset_jump) {
            self.reset(seq);
            return Arrival::Reset;
        }
        self.unwrapper = probe;
        if delta > 0 {
            self.open_gap(highest + 1, ext_seq, now);
            Arrival::New
        } else if let Some(missing) = self.remove(ext_seq) {
            self.stats.recovered += 1;
            if retransmission {
                self.sample_rtt(&missing, now);
            }
            Arrival::Recovered
        } else {
            Arrival::Old
        }
    }

    /// Hands out the sequence numbers due for a NACK now, in increasing order, and gives up those
    /// past their last retry or maximum age. Retries are spaced by the larger of the round-trip
    /// time (the measured one, else `default_rtt`) and [`NackConfig::min_retry_interval`].
    /// Numbers are marked as NACKed as the iterator yields them, so a caller that stops early
    /// gets the rest on the next poll.
    pub fn poll_nacks(
        &mut self,
        now: Instant,
        default_rtt: Duration,
    ) -> impl Iterator<Item = u16> + '_ {
        self.rtt = self.measured_rtt.unwrap_or(default_rtt);
        self.give_up_expired(now);
        let config = self.config;
        let interval = self.retry_interval();
        let stats = &mut self.stats;
        self.missing
            .iter_mut()
            .filter(move |m| matches!(m.due(&config, interval, now), Some(Due::Nack)))
            .map(move |m| {
                m.nacks += 1;
                m.last_nacked = Some(now);
                stats.nacked += 1;
                // Truncation intended: the wire carries the low 16 bits.
                m.ext_seq as u16
            })
    }

    /// When `poll_nacks` next has something to do, given the last round-trip time it was given;
    /// None while nothing is missing.
    pub fn next_timeout(&self) -> Option<Instant> {
        let interval = self.retry_interval();
        self.missing
            .iter()
            .map(|m| m.deadline(&self.config, interval))
            .min()
    }

    /// How many packets are missing and still tracked.
    #[cfg(test)]
    pub fn missing_count(&self) -> usize {
        self.missing.len()
    }

    /// Counters since creation.
    pub fn stats(&self) -> NackStats {
        self.stats
    }

    /// The smoothed round-trip time to the sender, from NACKs answered; None before the first.
    pub fn measured_rtt(&self) -> Option<Duration> {
        self.measured_rtt
    }

    /// Folds one NACK-to-arrival time into the estimate, weighting it by 1/8 (the usual
    /// smoothing of round-trip estimates) so that one late answer does not swing the retries.
    fn sample_rtt(&mut self, missing: &Missing, now: Instant) {
        let Some(nacked) = missing.last_nacked.filter(|_| missing.nacks == 1) else {
            return;
        };
        let sample = now.saturating_duration_since(nacked);
        let smoothed = match self.measured_rtt {
            None => sample,
            Some(smoothed) => (smoothed * 7 + sample) / 8,
        };
        self.measured_rtt = Some(smoothed);
        self.rtt = smoothed;
    }

    fn retry_interval(&self) -> Duration {
        self.rtt.max(self.config.min_retry_interval)
    }

    fn reset(&mut self, seq: u16) {
        self.stats.resets += 1;
        self.stats.evicted += self.missing.len() as u64;
        self.missing.clear();
        self.unwrapper = Unwrapper::default();
        self.unwrapper.unwrap(seq);
    }

    /// Records `from..to` as missing. Only the newest `max_missing` of a long gap are kept: the
    /// older ones would be evicted at once.
    fn open_gap(&mut self, from: i64, to: i64, now: Instant) {
        let cap = self.config.max_missing as i64;
        let kept_from = from.max(to - cap);
        self.stats.evicted += (kept_from - from) as u64;
        for ext_seq in kept_from..to {
            if self.missing.len() == self.config.max_missing {
                self.missing.pop_front();
                self.stats.evicted += 1;
            }
            self.missing.push_back(Missing {
                ext_seq,
                detected: now,
                last_nacked: None,
                nacks: 0,
            });
        }
    }

    fn remove(&mut self, ext_seq: i64) -> Option<Missing> {
        let index = self
            .missing
            .binary_search_by_key(&ext_seq, |m| m.ext_seq)
            .ok()?;
        self.missing.remove(index)
    }

    fn give_up_expired(&mut self, now: Instant) {
        let config = self.config;
        let interval = self.retry_interval();
        let before = self.missing.len();
        self.missing
            .retain(|m| !matches!(m.due(&config, interval, now), Some(Due::GiveUp)));
        self.stats.given_up += (before - self.missing.len()) as u64;
    }
}

impl Default for NackGenerator {
    fn default() -> Self {
        Self::new(NackConfig::default())
    }
}

impl Missing {
    /// What to do with this packet at `now`, or None while waiting for [`Self::deadline`].
    fn due(&self, config: &NackConfig, interval: Duration, now: Instant) -> Option<Due> {
        let next = self.next_nack(config, interval);
        if now >= self.detected + config.max_age
            || (self.nacks >= config.max_retries && now >= next)
        {
            Some(Due::GiveUp)
        } else if now >= next {
            Some(Due::Nack)
        } else {
            None
        }
    }

    /// When this packet is next due for a NACK or to be given up.
    fn deadline(&self, config: &NackConfig, interval: Duration) -> Instant {
        self.next_nack(config, interval)
            .min(self.detected + config.max_age)
    }

    /// When the next NACK is due; after the last retry, when giving up is. The extra interval
    /// after the last retry lets its retransmission arrive before the packet is given up.
    fn next_nack(&self, config: &NackConfig, interval: Duration) -> Instant {
        match self.last_nacked {
            None => self.detected + config.reorder_delay,
            Some(last) => last + interval,
        }
    }
}

#[cfg(test)]
mod tests {
    use std::collections::{BTreeMap, HashSet};

    use proptest::prelude::*;

    use super::*;

    const RTT: Duration = Duration::from_millis(50);

    fn ms(t0: Instant, millis: u64) -> Instant {
        t0 + Duration::from_millis(millis)
    }

    fn poll(nack: &mut NackGenerator, now: Instant) -> Vec<u16> {
        nack.poll_nacks(now, RTT).collect()
    }

    fn fed(seqs: &[u16], now: Instant) -> NackGenerator {
        let mut nack = NackGenerator::default();
        for &seq in seqs {
            nack.on_packet(seq, now);
        }
        nack
    }

    #[test]
    fn a_single_loss_is_nacked_after_the_reorder_delay_then_once_per_rtt() {
        let t0 = Instant::now();
        let mut nack = fed(&[10, 11, 13], t0);
        assert_eq!(nack.next_timeout(), Some(ms(t0, 5)));
        assert_eq!(poll(&mut nack, ms(t0, 4)), Vec::<u16>::new());
        assert_eq!(poll(&mut nack, ms(t0, 5)), vec![12]);
        assert_eq!(
            poll(&mut nack, ms(t0, 6)),
            Vec::<u16>::new(),
            "not again within the rtt"
        );
        assert_eq!(nack.next_timeout(), Some(ms(t0, 55)));
        assert_eq!(poll(&mut nack, ms(t0, 55)), vec![12]);
        assert_eq!(nack.stats().nacked, 2);
    }

    #[test]
    fn a_burst_is_nacked_at_once_in_order() {
        let t0 = Instant::now();
        let mut nack = fed(&[0, 5], t0);
        assert_eq!(poll(&mut nack, ms(t0, 5)), vec![1, 2, 3, 4]);
        assert_eq!(nack.missing_count(), 4);
    }

    #[test]
    fn reordering_within_the_delay_costs_no_nack() {
        let t0 = Instant::now();
        let mut nack = fed(&[0, 2], t0);
        assert_eq!(nack.on_packet(1, ms(t0, 3)), Arrival::Recovered);
        assert_eq!(poll(&mut nack, ms(t0, 100)), Vec::<u16>::new());
        assert_eq!(nack.next_timeout(), None);
        assert_eq!(nack.stats().recovered, 1);
        assert_eq!(nack.stats().nacked, 0);
    }

    #[test]
    fn retries_are_spaced_by_the_rtt_but_no_closer_than_the_minimum() {
        let t0 = Instant::now();
        let mut nack = fed(&[0, 2], t0);
        assert_eq!(
            nack.poll_nacks(ms(t0, 5), Duration::from_millis(1)).count(),
            1
        );
        assert_eq!(
            nack.poll_nacks(ms(t0, 14), Duration::from_millis(1))
                .count(),
            0
        );
        assert_eq!(
            nack.poll_nacks(ms(t0, 15), Duration::from_millis(1))
                .count(),
            1,
            "10 ms"
        );
        assert_eq!(
            nack.poll_nacks(ms(t0, 115), Duration::from_millis(200))
                .count(),
            0
        );
        assert_eq!(
            nack.poll_nacks(ms(t0, 215), Duration::from_millis(200))
                .count(),
            1
        );
    }

    #[test]
    fn the_rtt_is_measured_from_nack_to_retransmission_and_spaces_retries() {
        let t0 = Instant::now();
        let mut nack = fed(&[0, 2, 4], t0);
        assert_eq!(nack.measured_rtt(), None);
        assert_eq!(poll(&mut nack, ms(t0, 5)), vec![1, 3]);
        assert_eq!(nack.on_retransmission(1, ms(t0, 205)), Arrival::Recovered);
        assert_eq!(nack.measured_rtt(), Some(Duration::from_millis(200)));
        // 3 is still missing: its retry waits the measured 200 ms, not the 50 ms given.
        assert_eq!(nack.next_timeout(), Some(ms(t0, 205)));
        assert_eq!(poll(&mut nack, ms(t0, 205)), vec![3]);
        assert_eq!(nack.next_timeout(), Some(ms(t0, 405)));
        assert_eq!(poll(&mut nack, ms(t0, 404)), Vec::<u16>::new());
        assert_eq!(poll(&mut nack, ms(t0, 405)), vec![3]);
    }

    #[test]
    fn a_late_original_is_no_rtt_sample() {
        let t0 = Instant::now();
        let mut nack = fed(&[0, 2], t0);
        assert_eq!(poll(&mut nack, ms(t0, 5)), vec![1]);
        assert_eq!(nack.on_packet(1, ms(t0, 7)), Arrival::Recovered);
        assert_eq!(
            nack.measured_rtt(),
            None,
            "2 ms is reordering, not a round trip"
        );
    }

    #[test]
    fn rtt_samples_are_smoothed_and_skip_packets_nacked_twice() {
        let t0 = Instant::now();
        let mut nack = fed(&[0, 2, 4, 6], t0);
        assert_eq!(poll(&mut nack, ms(t0, 5)), vec![1, 3, 5]);
        nack.on_retransmission(1, ms(t0, 85));
        assert_eq!(nack.measured_rtt(), Some(Duration::from_millis(80)));
        nack.on_retransmission(3, ms(t0, 165));
        assert_eq!(
            nack.measured_rtt(),
            Some(Duration::from_millis(90)),
            "7/8 of 80 plus 1/8 of 160"
        );
        assert_eq!(poll(&mut nack, ms(t0, 100)), vec![5], "second NACK");
        nack.on_retransmission(5, ms(t0, 110));
        assert_eq!(
            nack.measured_rtt(),
            Some(Duration::from_millis(90)),
            "which NACK was answered is unknown: no sample"
        );
    }

    #[test]
    fn a_packet_is_given_up_one_interval_after_its_last_retry() {
        let t0 = Instant::now();
        let config = NackConfig {
            max_retries: 3,
            ..NackConfig::default()
        };
        let mut nack = NackGenerator::new(config);
        nack.on_packet(0, t0);
        nack.on_packet(2, t0);
        for at in [5, 55, 105] {
            assert_eq!(poll(&mut nack, ms(t0, at)), vec![1], "retry at {at} ms");
        }
        assert_eq!(nack.next_timeout(), Some(ms(t0, 155)));
        assert_eq!(poll(&mut nack, ms(t0, 154)), Vec::<u16>::new());
        assert_eq!(nack.stats().given_up, 0);
        assert_eq!(poll(&mut nack, ms(t0, 155)), Vec::<u16>::new());
        assert_eq!(nack.stats().given_up, 1);
        assert_eq!(nack.stats().nacked, 3);
        assert_eq!(nack.next_timeout(), None);
        assert_eq!(
            nack.on_packet(1, ms(t0, 200)),
            Arrival::Old,
            "no longer tracked"
        );
    }

    #[test]
    fn a_packet_is_given_up_at_its_maximum_age() {
        let t0 = Instant::now();
        let mut nack = fed(&[0, 2], t0);
        let rtt = Duration::from_millis(400);
        let mut sent = vec![];
        for at in (0..=1000).step_by(5) {
            if nack.poll_nacks(ms(t0, at), rtt).count() > 0 {
                sent.push(at);
            }
        }
        assert_eq!(sent, vec![5, 405, 805]);
        assert_eq!(nack.stats().given_up, 1);
        assert_eq!(nack.missing_count(), 0);
    }

    #[test]
    fn a_retransmission_removes_the_packet() {
        let t0 = Instant::now();
        let mut nack = fed(&[0, 3], t0);
        assert_eq!(poll(&mut nack, ms(t0, 5)), vec![1, 2]);
        assert_eq!(nack.on_packet(2, ms(t0, 40)), Arrival::Recovered);
        assert_eq!(poll(&mut nack, ms(t0, 55)), vec![1]);
        assert_eq!(nack.on_packet(2, ms(t0, 60)), Arrival::Old, "a second copy");
        assert_eq!(nack.stats().recovered, 1);
    }

    #[test]
    fn gaps_across_the_wrap_are_nacked_with_their_16_bit_numbers() {
        let t0 = Instant::now();
        let mut nack = fed(&[65_533, 65_534, 1], t0);
        assert_eq!(poll(&mut nack, ms(t0, 5)), vec![65_535, 0]);
        assert_eq!(nack.on_packet(65_535, ms(t0, 6)), Arrival::Recovered);
        assert_eq!(nack.on_packet(0, ms(t0, 6)), Arrival::Recovered);
        assert_eq!(nack.missing_count(), 0);
    }

    #[test]
    fn a_huge_jump_either_way_resets_instead_of_nacking_thousands() {
        let t0 = Instant::now();
        let mut nack = fed(&[100, 102], t0);
        assert_eq!(nack.on_packet(5_000, t0), Arrival::Reset);
        assert_eq!(nack.missing_count(), 0);
        assert_eq!(nack.stats().evicted, 1, "101 was pending");
        assert_eq!(nack.on_packet(5_002, t0), Arrival::New);
        assert_eq!(
            poll(&mut nack, ms(t0, 5)),
            vec![5_001],
            "tracking goes on from 5000"
        );
        assert_eq!(nack.on_packet(3_000, t0), Arrival::Reset, "backward");
        assert_eq!(nack.stats().resets, 2);
        assert_eq!(
            nack.on_packet(4_000, t0),
            Arrival::New,
            "1000 ahead is still a gap"
        );
        assert_eq!(nack.missing_count(), 512, "the newest 512 of 999");
    }

    #[test]
    fn duplicates_change_nothing() {
        let t0 = Instant::now();
        let mut nack = fed(&[0, 1], t0);
        assert_eq!(nack.on_packet(1, t0), Arrival::Old);
        assert_eq!(nack.on_packet(0, t0), Arrival::Old);
        assert_eq!(nack.missing_count(), 0);
        assert_eq!(poll(&mut nack, ms(t0, 50)), Vec::<u16>::new());
    }

    #[test]
    fn missing_packets_are_bounded_and_the_oldest_evicted_are_counted() {
        let t0 = Instant::now();
        let mut nack = NackGenerator::new(NackConfig {
            max_missing: 8,
            ..NackConfig::default()
        });
        nack.on_packet(0, t0);
        nack.on_packet(20, t0);
        assert_eq!(nack.missing_count(), 8);
        assert_eq!(nack.stats().evicted, 11);
        nack.on_packet(22, t0);
        assert_eq!(nack.stats().evicted, 12, "12 made room for 21");
        assert_eq!(
            poll(&mut nack, ms(t0, 5)),
            vec![13, 14, 15, 16, 17, 18, 19, 21]
        );
    }

    #[test]
    fn a_caller_that_stops_early_gets_the_rest_next_time() {
        let t0 = Instant::now();
        let mut nack = fed(&[0, 4], t0);
        assert_eq!(
            nack.poll_nacks(ms(t0, 5), RTT).take(2).collect::<Vec<_>>(),
            vec![1, 2]
        );
        assert_eq!(poll(&mut nack, ms(t0, 6)), vec![3]);
    }

    #[test]
    fn a_missing_entry_stays_small() {
        // Up to `max_missing` of these per published stream.
        assert!(size_of::<Missing>() <= 48, "{}", size_of::<Missing>());
    }

    /// One packet of a simulated stream: when it arrives, if ever, and whether twice.
    #[derive(Debug, Clone)]
    struct Fate {
        delay_ms: Option<u64>,
        duplicate: bool,
    }

    fn fate() -> impl Strategy<Value = Fate> {
        let delay = prop_oneof![
            6 => (0u64..20).prop_map(Some),
            1 => Just(None),
            1 => (20u64..1500).prop_map(Some),
        ];
        (delay, proptest::bool::weighted(0.05)).prop_map(|(delay_ms, duplicate)| Fate {
            delay_ms,
            duplicate,
        })
    }

    proptest! {
        #[test]
        fn nacks_only_missing_packets_within_the_retry_budget_and_forget_none_silently(
            start in any::<u16>(),
            fates in proptest::collection::vec(fate(), 1..300),
            rtt_ms in 0u64..200,
            max_retries in 1u8..6,
        ) {
            let t0 = Instant::now();
            let rtt = Duration::from_millis(rtt_ms);
            let mut arrivals: BTreeMap<(u64, usize), u16> = BTreeMap::new();
            for (i, fate) in fates.iter().enumerate() {
                let seq = start.wrapping_add(i as u16);
                if let Some(delay) = fate.delay_ms {
                    let sent = i as u64 * 5;
                    arrivals.insert((sent + delay, i), seq);
                    if fate.duplicate {
                        arrivals.insert((sent + delay + 7, i + fates.len()), seq);
                    }
                }
            }
            let mut nack = NackGenerator::new(NackConfig { max_retries, ..NackConfig::default() });
            let mut received = HashSet::new();
            let mut nacks_per_seq: BTreeMap<u16, u8> = BTreeMap::new();
            let mut highest: Option<usize> = None;
            let mut opened = 0u64;
            let mut poll_at = |nack: &mut NackGenerator, received: &HashSet<u16>, at: u64| {
                for seq in nack.poll_nacks(ms(t0, at), rtt) {
                    assert!(!received.contains(&seq), "{seq} NACKed after it arrived");
                    let count = nacks_per_seq.entry(seq).or_default();
                    *count += 1;
                    assert!(*count <= max_retries, "{seq} NACKed {count} times");
                }
            };
            for (&(at, i), &seq) in &arrivals {
                let index = i % fates.len();
                nack.on_packet(seq, ms(t0, at));
                received.insert(seq);
                if highest.is_none_or(|h| index > h) {
                    opened += highest.map_or(0, |h| (index - h - 1) as u64);
                    highest = Some(index);
                }
                poll_at(&mut nack, &received, at);
                let stats = nack.stats();
                prop_assert_eq!(
                    opened,
                    stats.recovered + stats.given_up + stats.evicted + nack.missing_count() as u64
                );
            }
            poll_at(&mut nack, &received, 1_000_000);
            let stats = nack.stats();
            prop_assert_eq!(nack.missing_count(), 0);
            prop_assert_eq!(stats.resets, 0);
            // Packets before the first arrival were never known to be missing.
            let first = arrivals.values().next().map(|&seq| seq.wrapping_sub(start) as usize);
            let never_arrived = match (first, highest) {
                (Some(first), Some(h)) => (first..=h)
                    .filter(|&i| !received.contains(&start.wrapping_add(i as u16)))
                    .count(),
                _ => 0,
            };
            prop_assert!(stats.given_up + stats.evicted >= never_arrived as u64);
            prop_assert_eq!(opened, stats.recovered + stats.given_up + stats.evicted);
        }
    }
}
