//! The send history of one viewer transport: the transport-wide sequence number stamped on
//! every packet sent to it, in send order, and what each was (when, how big, which probe), so
//! that the viewer's transport-wide CC feedback can be matched back into [`PacketResult`]s.
//!
//! The history is a ring preallocated once, indexed by sequence number: recording a packet and
//! matching a feedback allocate nothing (the caller's result `Vec` aside, which keeps its
//! capacity from one feedback to the next).

use std::num::NonZeroU64;
use std::time::{Duration, Instant};

use super::PacketResult;
use crate::engine::prefetch::prefetch;
use crate::engine::rtcp::{
    PacketReports, TransportCc, TransportCcError, DELTA_UNIT, REFERENCE_TIME_UNIT,
};

/// Packets remembered: two seconds at 4096 packets a second, some 40 Mbit/s of full-size
/// packets, well past the round trip a feedback takes.
pub const SEND_HISTORY_CAPACITY: usize = 8192;

/// The reference time has 24 bits.
const REFERENCE_WRAP: i64 = 1 << 24;
const REFERENCE_UNIT_US: i64 = REFERENCE_TIME_UNIT.as_micros() as i64;
const DELTA_UNIT_US: i64 = DELTA_UNIT.as_micros() as i64;

/// One packet sent, as remembered, in 16 bytes: 8,192 of them per viewer are 128 KiB, and a
/// cache line holds four.
#[derive(Debug, Clone, Copy)]
struct Sent {
    /// Its send time in microseconds after the history's epoch (46 bits: two years), its
    /// bytes on the wire (16 bits: an MTU is 1,500) and whether a feedback reported it
    /// already (it is given once), above a bit always set: the word is never zero, so an
    /// `Option<Sent>` takes no more room than a `Sent` (a slot never written is all zeros).
    stamp: NonZeroU64,
    /// The extended sequence number's low 32 bits: a slot holds the packet asked for when
    /// they match (an older occupant is a multiple of the capacity behind, far less than 2^32).
    sequence: u32,
    /// The probe cluster's id plus one; 0 for a packet not sent to probe.
    probe: u32,
}

/// Where [`Sent::stamp`] keeps what, above the bit always set (bit 0).
const REPORTED_BIT: u64 = 1 << 1;
const SIZE_SHIFT: u32 = 2;
const SEND_US_SHIFT: u32 = 18;

impl Sent {
    fn new(send_us: u64, size: usize, sequence: u32, probe: u32) -> Self {
        let send_us = send_us.min(u64::MAX >> SEND_US_SHIFT);
        let size = u64::from(u16::try_from(size).unwrap_or(u16::MAX));
        Self {
            stamp: NonZeroU64::MIN | send_us << SEND_US_SHIFT | size << SIZE_SHIFT,
            sequence,
            probe,
        }
    }

    fn send_us(self) -> u64 {
        self.stamp.get() >> SEND_US_SHIFT
    }

    fn size(self) -> u16 {
        // Truncation intended: the 16 bits above the flags.
        (self.stamp.get() >> SIZE_SHIFT) as u16
    }

    fn reported(self) -> bool {
        self.stamp.get() & REPORTED_BIT != 0
    }

    fn mark_reported(&mut self) {
        self.stamp |= REPORTED_BIT;
    }
}

/// What matching one feedback gave.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct FeedbackSummary {
    /// Packets given as results.
    pub matched: usize,
    /// Reported sequence numbers the history no longer holds, or never sent.
    pub unknown: usize,
    /// Reported sequence numbers an earlier feedback already reported.
    pub duplicates: usize,
}

/// Totals over the history's life.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct SendHistoryCounters {
    /// Packets stamped.
    pub sent: u64,
    /// Packets given as results.
    pub matched: u64,
    /// Reported packets skipped as unknown or too old.
    pub unknown: u64,
    /// Reported packets skipped as already given.
    pub duplicates: u64,
    /// Feedback whose chunks and deltas could not be read.
    pub malformed: u64,
}

/// The transport-wide sequence numbers and send history of one viewer transport.
#[derive(Debug)]
pub struct SendHistory {
    /// By extended sequence number modulo the capacity.
    slots: Box<[Option<Sent>]>,
    /// Send times count from the first packet's.
    epoch: Option<Instant>,
    /// The extended sequence number the next packet gets; the first is 0.
    next_sequence: i64,
    /// The highest reference time of the feedback so far, extended past 24 bits.
    reference: Option<i64>,
    counters: SendHistoryCounters,
}

impl Default for SendHistory {
    fn default() -> Self {
        Self::new()
    }
}

impl SendHistory {
    /// An empty history of [`SEND_HISTORY_CAPACITY`] packets, allocated here once.
    pub fn new() -> Self {
        Self {
            slots: vec![None; SEND_HISTORY_CAPACITY].into_boxed_slice(),
            epoch: None,
            next_sequence: 0,
            reference: None,
            counters: SendHistoryCounters::default(),
        }
    }

    /// The transport-wide sequence number the next packet sent gets: written into its header
    /// before [`on_send`](Self::on_send) records it.
    pub fn next_sequence(&self) -> u16 {
        // Truncation intended: the extension carries the low 16 bits.
        self.next_sequence as u16
    }

    /// Asks for what [`on_send`](Self::on_send) writes next (this head and the next slot)
    /// ahead of it: a viewer's history is 128 KiB, out of cache by its next packet.
    pub fn touch(&self) {
        prefetch(self);
        if let Some(next) = self.slots.get(slot(self.next_sequence)) {
            prefetch(next);
        }
    }

    /// Stamps the next packet sent, at `now`, of `size` bytes on the wire, probing for
    /// `probe_cluster` if any: returns the transport-wide sequence number to write into its
    /// header extension. Call in send order.
    pub fn on_send(&mut self, now: Instant, size: usize, probe_cluster: Option<u32>) -> u16 {
        let sequence = self.next_sequence;
        let epoch = *self.epoch.get_or_insert(now);
        self.slots[slot(sequence)] = Some(Sent::new(
            now.saturating_duration_since(epoch).as_micros() as u64,
            size,
            // Truncation intended: see `Sent::sequence`.
            sequence as u32,
            probe_cluster.map_or(0, |c| c.saturating_add(1)),
        ));
        self.next_sequence += 1;
        self.counters.sent += 1;
        // Truncation intended: the extension carries the low 16 bits.
        sequence as u16
    }

    /// Matches `feedback` against the history: `results` is cleared, then given each reported
    /// packet still remembered and not reported before, in sequence order. Arrivals are on
    /// the viewer's clock: the reference time, extended across feedbacks past its 24 bits,
    /// plus the deltas up to the packet. A feedback whose body cannot be read gives nothing.
    pub fn on_feedback(
        &mut self,
        feedback: &TransportCc<'_>,
        results: &mut Vec<PacketResult>,
    ) -> Result<FeedbackSummary, TransportCcError> {
        results.clear();
        // A viewer reports what arrived since its last feedback, a few hundred packets; one
        // that says 65,535 (a few bytes of run-length chunks) would cost a walk of the ring.
        if usize::from(feedback.packet_status_count) > SEND_HISTORY_CAPACITY {
            self.counters.malformed += 1;
            return Err(TransportCcError::TooManyPackets);
        }
        let reports = PacketReports::new(feedback).inspect_err(|_| self.counters.malformed += 1)?;
        let base = self.extend_sequence(feedback.base_sequence);
        // Saturating: a viewer that steps its reference time half a wrap ahead in every
        // feedback moves it on without bound, past what microseconds of it can hold.
        let reference = self.extend_reference(feedback.reference_time);
        let mut arrival_us = reference.saturating_mul(REFERENCE_UNIT_US);
        // Nothing past the last packet sent can match, nor move the clock of one that does:
        // those are counted unknown without a walk.
        let count = i64::from(feedback.packet_status_count);
        let ahead = (base + count - self.next_sequence).clamp(0, count);
        let mut summary = FeedbackSummary {
            unknown: ahead as usize,
            ..FeedbackSummary::default()
        };
        for (sequence, report) in (base..self.next_sequence).zip(reports) {
            // Every received packet moves the clock on, remembered or not.
            let delta = report.status.delta();
            if let Some(delta) = delta {
                arrival_us = arrival_us.saturating_add(i64::from(delta) * DELTA_UNIT_US);
            }
            let epoch = self.epoch;
            let Some((sent, epoch)) = self.remembered(sequence).zip(epoch) else {
                summary.unknown += 1;
                continue;
            };
            if sent.reported() {
                summary.duplicates += 1;
                continue;
            }
            sent.mark_reported();
            summary.matched += 1;
            results.push(PacketResult {
                sequence,
                send_time: epoch + Duration::from_micros(sent.send_us()),
                size: usize::from(sent.size()),
                probe_cluster: sent.probe.checked_sub(1),
                arrival: delta.map(|_| micros(arrival_us)),
            });
        }
        self.count(summary);
        Ok(summary)
    }

    /// Totals so far.
    pub fn counters(&self) -> SendHistoryCounters {
        self.counters
    }

    fn count(&mut self, summary: FeedbackSummary) {
        self.counters.matched += summary.matched as u64;
        self.counters.unknown += summary.unknown as u64;
        self.counters.duplicates += summary.duplicates as u64;
    }

    /// The packet sent as `sequence`, if the ring still holds it.
    fn remembered(&mut self, sequence: i64) -> Option<&mut Sent> {
        if !(0..self.next_sequence).contains(&sequence) {
            return None;
        }
        self.slots[slot(sequence)]
            .as_mut()
            // Truncation intended: see `Sent::sequence`.
            .filter(|sent| sent.sequence == sequence as u32)
    }

    /// The extended sequence number of a feedback's base: the latest one sent with those low
    /// 16 bits. A feedback only reports packets already sent, so the base is taken as up to
    /// 65535 behind the last one, never ahead; anything past the ring is unknown anyway.
    fn extend_sequence(&self, base: u16) -> i64 {
        let last = self.next_sequence - 1;
        // Truncation intended: the distance in the 16-bit space.
        last - i64::from((last as u16).wrapping_sub(base))
    }

    /// The extended reference time: the nearest to the highest so far. The first is offset by
    /// one wrap, so that feedback reordered before it still gives arrivals above zero.
    fn extend_reference(&mut self, reference: u32) -> i64 {
        let reference = i64::from(reference) & (REFERENCE_WRAP - 1);
        let extended = match self.reference {
            None => REFERENCE_WRAP + reference,
            Some(highest) => {
                let ahead = (reference - highest).rem_euclid(REFERENCE_WRAP);
                let behind = if ahead >= REFERENCE_WRAP / 2 {
                    REFERENCE_WRAP
                } else {
                    0
                };
                highest + ahead - behind
            }
        };
        self.reference = Some(self.reference.map_or(extended, |h| h.max(extended)));
        extended
    }
}

/// The rate at which a feedback's packets arrived, in bits per second: the bytes of every
/// received packet but the first to arrive, over the time from its arrival to the last one's.
/// `None` with fewer than two arrivals, or all at once.
#[cfg_attr(
    not(any(test, feature = "internal")),
    expect(dead_code, reason = "used by tests and through the internal API only")
)]
pub fn acknowledged_bitrate(results: &[PacketResult]) -> Option<u64> {
    let received = || results.iter().filter_map(|r| Some((r.arrival?, r.size)));
    let (first, first_size) = received().min_by_key(|&(arrival, _)| arrival)?;
    let last = received().map(|(arrival, _)| arrival).max()?;
    let span_us = (last - first).as_micros();
    let bytes: usize = received().map(|(_, size)| size).sum::<usize>() - first_size;
    let bps = (bytes as u128 * 8 * 1_000_000).checked_div(span_us)?;
    Some(u64::try_from(bps).unwrap_or(u64::MAX))
}

/// The ring slot of an extended sequence number, which is never negative.
fn slot(sequence: i64) -> usize {
    // Below the capacity.
    sequence.rem_euclid(SEND_HISTORY_CAPACITY as i64) as usize
}

/// Microseconds on the viewer's clock; a delta sum below zero is clamped to it.
fn micros(us: i64) -> Duration {
    Duration::from_micros(u64::try_from(us).unwrap_or(0))
}

#[cfg(test)]
#[path = "send_history_tests.rs"]
mod tests;
