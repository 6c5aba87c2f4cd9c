//! A subscriber's output sequence numbers and timestamps (RFC 3550 5.1), rewritten from the
//! source stream it is forwarded.
//!
//! Sequence numbers: a packet the SFU chooses not to forward must leave no gap, or the subscriber
//! NACKs it for nothing; a packet lost upstream must leave one, so the subscriber NACKs it and the
//! retransmission, when it comes, fills the very number it left open. Hence the rule: every source
//! number counts towards the output unless its packet arrived as the newest and was dropped.
//! Stated as a formula, for packets `p` forwarded from one source:
//! `out(p) = out(first) + #{ q : first <= q < p, q was not dropped on arrival as the newest }`.
//!
//! Timestamps: offset per source, so a simulcast switch continues the subscriber's clock instead
//! of jumping to the new source's.

use selector::Unwrapper;

/// Source numbers remembered behind the newest, so late and retransmitted packets find the
/// output number they were given or left open.
pub const MUNGER_WINDOW: usize = 512;

/// The timestamp step assumed between the last packet of one source and the first of the next
/// when neither a hint nor an observed frame interval is at hand: one frame at 30 fps, 90 kHz.
pub const DEFAULT_FRAME_INTERVAL: u32 = 3000;

/// A frame interval observed above this (1 s at 90 kHz) is a pause, not a frame rate.
const MAX_FRAME_INTERVAL: u32 = 90_000;

/// One packet of the source stream, as far as rewriting is concerned.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SourcePacket {
    pub ssrc: u32,
    pub seq: u16,
    pub ts: u32,
}

/// The output sequence number and timestamp of a forwarded packet.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Munged {
    pub seq: u16,
    pub ts: u32,
}

/// Rewrites sequence numbers and timestamps for one subscriber stream (one DownTrack).
///
/// Call [`switch_source`](Self::switch_source) before the first packet and at every simulcast
/// switch, then [`munge`](Self::munge) for every packet of the chosen source, forwarded or not:
/// the dropped ones are what keeps the output contiguous. Nothing is allocated: the window of
/// recent source numbers is inline.
#[derive(Debug, Clone)]
pub struct RtpMunger {
    source: Option<Source>,
    /// The output number the next new source packet gets (extended).
    next_out: i64,
    /// The highest output timestamp handed out, the base of the next source's timestamps.
    highest_out_ts: u32,
    /// What each of the last `MUNGER_WINDOW` source numbers became, indexed by extended number.
    slots: [Slot; MUNGER_WINDOW],
    /// A hole the last dropped late packet leaves, for `take_filler`.
    filler: Option<u16>,
}

#[derive(Debug, Clone, Copy)]
struct Source {
    ssrc: u32,
    unwrapper: Unwrapper,
    /// The switch point: packets before it belong to the time before the switch.
    first_ext: i64,
    highest_ext: i64,
    /// Source minus output extended number for the next new packet; grows by one per drop.
    seq_offset: i64,
    /// Output minus source timestamp, wrapping.
    ts_offset: u32,
    /// Timestamp of the newest packet, to observe the frame interval.
    highest_ts: u32,
    frame_interval: u32,
}

/// The fate of one source number in the window.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Slot {
    /// Not part of the current source's numbering.
    Empty,
    /// Never arrived: the output number stays open for it.
    Missing(u16),
    Forwarded(u16),
    /// Dropped on purpose; its number was given to the next packet, so it can never be sent.
    Dropped,
}

impl RtpMunger {
    /// A munger whose first packet will carry `first_seq` and, unless the first switch gives a
    /// hint, `first_ts`. Both are usually random (RFC 3550 5.1).
    pub fn new(first_seq: u16, first_ts: u32) -> Self {
        Self {
            source: None,
            next_out: i64::from(first_seq),
            // The first source starts exactly at `first_ts`: pretend the frame before it ended
            // one frame earlier.
            highest_out_ts: first_ts.wrapping_sub(DEFAULT_FRAME_INTERVAL),
            slots: [Slot::Empty; MUNGER_WINDOW],
            filler: None,
        }
    }

    /// Continues the output with a new source whose packet `(first_seq, first_ts)` is next.
    ///
    /// The sequence number continues at one past the last output number. The timestamp
    /// continues at `ts_hint` (the caller maps the new source's `first_ts` to the old source's
    /// clock through both sources' sender reports), or one frame interval after the last output
    /// timestamp without a hint; never at or before the last output timestamp.
    pub fn switch_source(
        &mut self,
        ssrc: u32,
        first_seq: u16,
        first_ts: u32,
        ts_hint: Option<u32>,
    ) {
        let mut unwrapper = Unwrapper::default();
        let first_ext = unwrapper.unwrap(first_seq);
        let frame_interval = self
            .source
            .map_or(DEFAULT_FRAME_INTERVAL, |s| s.frame_interval);
        let out_ts = self.continued_ts(ts_hint, frame_interval);
        self.slots = [Slot::Empty; MUNGER_WINDOW];
        self.source = Some(Source {
            ssrc,
            unwrapper,
            first_ext,
            highest_ext: first_ext - 1,
            seq_offset: first_ext - self.next_out,
            ts_offset: out_ts.wrapping_sub(first_ts),
            highest_ts: first_ts,
            frame_interval,
        });
    }

    /// Rewrites `src` if `forward`, or records that it was dropped. None when not forwarded, for
    /// a packet of another SSRC, from before the switch point, too old for the window, or whose
    /// number was given away because it was dropped before.
    pub fn munge(&mut self, src: SourcePacket, forward: bool) -> Option<Munged> {
        let source = self.source.as_mut().filter(|s| s.ssrc == src.ssrc)?;
        let ext = source.unwrapper.unwrap(src.seq);
        if ext < source.first_ext {
            return None;
        }
        let seq = if ext > source.highest_ext {
            self.advance(ext, src.ts, forward)
        } else {
            self.revisit(ext, forward)
        }?;
        let ts = self.output_ts(src.ts);
        Some(Munged { seq, ts })
    }

    /// The output number a source packet of the current source was forwarded under, for
    /// retransmissions; None if it was not forwarded or is out of the window.
    #[cfg(test)]
    pub fn output_for(&self, src_seq: u16) -> Option<u16> {
        let source = self.source.as_ref()?;
        let mut probe = source.unwrapper;
        let ext = probe.unwrap(src_seq);
        match self.slot(ext, source) {
            Some(Slot::Forwarded(out)) => Some(out),
            _ => None,
        }
    }

    /// The output number that the late packet just dropped had kept open, once: send a
    /// padding-only packet under it so the subscriber sees no gap it would NACK for nothing.
    pub fn take_filler(&mut self) -> Option<u16> {
        self.filler.take()
    }

    /// The number the next new packet of the current source would get.
    #[cfg(test)]
    pub fn next_seq(&self) -> u16 {
        // Truncation intended: the wire carries the low 16 bits.
        self.next_out as u16
    }

    /// A new newest packet: the numbers it skipped stay open for their retransmissions.
    fn advance(&mut self, ext: i64, ts: u32, forward: bool) -> Option<u16> {
        let Self {
            source,
            slots,
            next_out,
            ..
        } = self;
        let source = source.as_mut().expect("munge checked the source");
        source.observe_ts(ts);
        if ext - source.highest_ext > MUNGER_WINDOW as i64 {
            // Too far to track or recover: close the gap as if the source restarted here.
            source.seq_offset += ext - source.highest_ext - 1;
            source.highest_ext = ext - 1;
            *slots = [Slot::Empty; MUNGER_WINDOW];
        }
        for missing in source.highest_ext + 1..ext {
            slots[slot_index(missing)] = Slot::Missing(out_seq(missing - source.seq_offset));
        }
        source.highest_ext = ext;
        let out = forward.then(|| out_seq(ext - source.seq_offset));
        slots[slot_index(ext)] = out.map_or(Slot::Dropped, Slot::Forwarded);
        if !forward {
            source.seq_offset += 1;
        }
        *next_out = ext + 1 - source.seq_offset;
        out
    }

    /// A packet at or behind the newest: late, retransmitted or duplicated.
    fn revisit(&mut self, ext: i64, forward: bool) -> Option<u16> {
        let source = self.source.as_ref().expect("munge checked the source");
        let slot = self.slot(ext, source)?;
        let (slot, out) = match (slot, forward) {
            (Slot::Missing(out) | Slot::Forwarded(out), true) => (Slot::Forwarded(out), Some(out)),
            // A late packet dropped now leaves its hole: the number cannot be taken back. The
            // caller fills it with padding (`take_filler`), so the subscriber does not NACK it.
            (Slot::Missing(out), false) => {
                self.filler = Some(out);
                (Slot::Dropped, None)
            }
            (other, _) => (other, None),
        };
        self.slots[slot_index(ext)] = slot;
        out
    }

    fn slot(&self, ext: i64, source: &Source) -> Option<Slot> {
        let in_window =
            ext <= source.highest_ext && source.highest_ext - ext < MUNGER_WINDOW as i64;
        (in_window && ext >= source.first_ext).then(|| self.slots[slot_index(ext)])
    }

    fn output_ts(&mut self, src_ts: u32) -> u32 {
        let ts = src_ts.wrapping_add(
            self.source
                .as_ref()
                .expect("munge checked the source")
                .ts_offset,
        );
        if ts_after(ts, self.highest_out_ts) {
            self.highest_out_ts = ts;
        }
        ts
    }

    /// The output timestamp for the first packet of a new source.
    fn continued_ts(&self, ts_hint: Option<u32>, frame_interval: u32) -> u32 {
        let last = self.highest_out_ts;
        match ts_hint {
            Some(hint) if ts_after(hint, last) => hint,
            // A hint at or behind the last output would run the subscriber's clock backwards
            // or merge two frames.
            Some(_) => last.wrapping_add(1),
            None => last.wrapping_add(frame_interval),
        }
    }
}

impl Source {
    /// Learns the frame interval from timestamp steps between newest packets.
    fn observe_ts(&mut self, ts: u32) {
        if ts_after(ts, self.highest_ts) {
            let step = ts.wrapping_sub(self.highest_ts);
            if step <= MAX_FRAME_INTERVAL {
                self.frame_interval = step;
            }
            self.highest_ts = ts;
        }
    }
}

/// Whether RTP timestamp `a` is later than `b`, modulo 2^32.
fn ts_after(a: u32, b: u32) -> bool {
    // Truncation intended: the wrapping distance read as signed.
    (a.wrapping_sub(b) as i32) > 0
}

fn slot_index(ext: i64) -> usize {
    // Truncation intended: only the low bits select the slot (the window is a power of two).
    (ext as usize) % MUNGER_WINDOW
}

fn out_seq(ext: i64) -> u16 {
    // Truncation intended: the wire carries the low 16 bits.
    ext as u16
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    const SSRC: u32 = 0x1111;

    fn packet(seq: u16, ts: u32) -> SourcePacket {
        from(SSRC, seq, ts)
    }

    fn from(ssrc: u32, seq: u16, ts: u32) -> SourcePacket {
        SourcePacket { ssrc, seq, ts }
    }

    fn out(seq: u16, ts: u32) -> Option<Munged> {
        Some(Munged { seq, ts })
    }

    /// A munger started at output seq 100, ts 50_000, on `SSRC` from source seq 0, ts 0.
    fn started() -> RtpMunger {
        let mut munger = RtpMunger::new(100, 50_000);
        munger.switch_source(SSRC, 0, 0, None);
        munger
    }

    fn seq_of(munger: &mut RtpMunger, seq: u16, forward: bool) -> Option<u16> {
        munger.munge(packet(seq, 0), forward).map(|m| m.seq)
    }

    #[test]
    fn forwarded_packets_are_renumbered_from_the_start_and_keep_their_timestamp_steps() {
        let mut munger = started();
        assert_eq!(munger.munge(packet(0, 0), true), out(100, 50_000));
        assert_eq!(munger.munge(packet(1, 0), true), out(101, 50_000));
        assert_eq!(munger.munge(packet(2, 3003), true), out(102, 53_003));
        assert_eq!(munger.next_seq(), 103);
    }

    #[test]
    fn a_late_packet_dropped_after_all_hands_its_number_to_a_filler() {
        let mut munger = started();
        assert_eq!(seq_of(&mut munger, 0, true), Some(100));
        // 1 is missing: 2 goes out as 102, keeping 101 open for 1's retransmission.
        assert_eq!(seq_of(&mut munger, 2, true), Some(102));
        assert_eq!(munger.take_filler(), None);
        // 1 arrives late and is not forwarded: 101 must still reach the subscriber.
        assert_eq!(seq_of(&mut munger, 1, false), None);
        assert_eq!(munger.take_filler(), Some(101));
        assert_eq!(munger.take_filler(), None, "once");
        // A late packet that is forwarded takes its number itself.
        assert_eq!(seq_of(&mut munger, 4, true), Some(104));
        assert_eq!(seq_of(&mut munger, 3, true), Some(103));
        assert_eq!(munger.take_filler(), None);
    }

    #[test]
    fn deliberate_drops_leave_no_gap() {
        let mut munger = started();
        let outs: Vec<_> = [true, false, false, true, false, true]
            .iter()
            .enumerate()
            .map(|(seq, &forward)| seq_of(&mut munger, seq as u16, forward))
            .collect();
        assert_eq!(outs, [Some(100), None, None, Some(101), None, Some(102)]);
    }

    #[test]
    fn an_upstream_loss_leaves_a_gap_its_retransmission_fills() {
        let mut munger = started();
        assert_eq!(seq_of(&mut munger, 0, true), Some(100));
        assert_eq!(seq_of(&mut munger, 3, true), Some(103), "1 and 2 lost");
        assert_eq!(seq_of(&mut munger, 4, false), None);
        assert_eq!(seq_of(&mut munger, 5, true), Some(104));
        assert_eq!(seq_of(&mut munger, 2, true), Some(102), "retransmitted");
        assert_eq!(munger.output_for(2), Some(102));
        assert_eq!(munger.output_for(1), None, "still missing");
        assert_eq!(
            seq_of(&mut munger, 1, false),
            None,
            "late and dropped: the hole stays"
        );
        assert_eq!(
            seq_of(&mut munger, 1, true),
            None,
            "its number was not used, and never is"
        );
        assert_eq!(munger.next_seq(), 105);
    }

    #[test]
    fn a_retransmission_maps_to_the_number_it_was_forwarded_under() {
        let mut munger = started();
        for seq in 0..5 {
            seq_of(&mut munger, seq, seq != 2);
        }
        assert_eq!(seq_of(&mut munger, 3, true), Some(102));
        assert_eq!(munger.output_for(3), Some(102));
        assert_eq!(
            seq_of(&mut munger, 2, true),
            None,
            "dropped: its number went to 3"
        );
        assert_eq!(munger.output_for(2), None);
    }

    #[test]
    fn numbers_wrap_on_both_sides() {
        let mut munger = RtpMunger::new(65_535, 0);
        munger.switch_source(SSRC, 65_534, u32::MAX - 10, None);
        assert_eq!(seq_of(&mut munger, 65_534, true), Some(65_535));
        assert_eq!(seq_of(&mut munger, 65_535, false), None);
        assert_eq!(seq_of(&mut munger, 0, true), Some(0));
        assert_eq!(seq_of(&mut munger, 2, true), Some(2), "1 lost");
        assert_eq!(
            munger.munge(packet(3, 5), true).map(|m| m.ts),
            Some(16),
            "ts wraps too"
        );
    }

    #[test]
    fn packets_out_of_scope_are_not_forwarded() {
        let mut munger = RtpMunger::new(0, 0);
        assert_eq!(seq_of(&mut munger, 0, true), None, "no source yet");
        munger.switch_source(SSRC, 10, 0, None);
        assert_eq!(
            seq_of(&mut munger, 9, true),
            None,
            "before the switch point"
        );
        let other = from(2, 10, 0);
        assert_eq!(munger.munge(other, true), None, "another SSRC");
        assert_eq!(seq_of(&mut munger, 10, true), Some(0));
        for seq in 11..=11 + MUNGER_WINDOW as u16 {
            seq_of(&mut munger, seq, true);
        }
        assert_eq!(seq_of(&mut munger, 11, true), None, "out of the window");
        assert_eq!(munger.output_for(11), None);
        assert_eq!(munger.output_for(12), Some(2));
        assert_eq!(munger.next_seq(), 514);
    }

    #[test]
    fn a_gap_wider_than_the_window_is_closed() {
        let mut munger = started();
        seq_of(&mut munger, 0, true);
        assert_eq!(seq_of(&mut munger, 5000, true), Some(101));
        assert_eq!(seq_of(&mut munger, 4999, true), None);
    }

    #[test]
    fn a_switch_continues_the_numbers_and_the_clock() {
        let mut munger = started();
        munger.munge(packet(0, 0), true);
        munger.munge(packet(1, 3000), true);
        munger.munge(packet(2, 3000), false);
        // Hinted: the caller's sender-report mapping says where the new source's clock lands.
        munger.switch_source(2, 7000, 900_000, Some(56_100));
        let first = from(2, 7000, 900_000);
        assert_eq!(munger.munge(first, true), out(102, 56_100));
        let next = from(2, 7001, 903_000);
        assert_eq!(munger.munge(next, true), out(103, 59_100));
        assert_eq!(
            munger.munge(packet(3, 6000), true),
            None,
            "the old source is gone"
        );
        // Unhinted: one observed frame interval (3000) after the last output.
        munger.switch_source(3, 0, 42, None);
        let third = from(3, 0, 42);
        assert_eq!(munger.munge(third, true), out(104, 62_100));
        // A hint behind the last output would run the clock backwards.
        munger.switch_source(4, 0, 0, Some(10));
        let fourth = from(4, 0, 0);
        assert_eq!(munger.munge(fourth, true), out(105, 62_101));
    }

    #[test]
    fn the_window_is_inline_and_small() {
        // One per subscriber stream: the window dominates, at 4 bytes per source number.
        assert_eq!(size_of::<Slot>(), 4);
        assert!(
            size_of::<RtpMunger>() <= MUNGER_WINDOW * 4 + 96,
            "{}",
            size_of::<RtpMunger>()
        );
    }

    /// What happens to source packet `index`: forwarded or not, and when it arrives.
    #[derive(Debug, Clone, Copy)]
    struct Fate {
        forward: bool,
        /// None: lost for good; Some(0): on time; Some(k): k packets late (retransmitted).
        lateness: Option<usize>,
        /// A second copy (a retransmission the SFU also gets) shortly after.
        twice: bool,
    }

    fn fate() -> impl Strategy<Value = Fate> {
        let lateness = prop_oneof![
            8 => Just(Some(0)),
            1 => Just(None),
            2 => (1usize..40).prop_map(Some),
        ];
        (
            proptest::bool::weighted(0.7),
            lateness,
            proptest::bool::weighted(0.1),
        )
            .prop_map(|(forward, lateness, twice)| Fate {
                forward,
                lateness,
                twice,
            })
    }

    #[derive(Debug, Clone, Copy, PartialEq)]
    enum Seen {
        Unseen,
        Forwarded,
        DroppedAsNewest,
        DroppedLate,
    }

    proptest! {
        /// The rule of the module docs, checked against a direct count:
        /// `out(p) = out(first) + #{ q : first <= q < p, q was not dropped as the newest }`.
        #[test]
        fn output_numbers_count_every_source_number_but_those_dropped_as_newest(
            out_start in any::<u16>(),
            src_start in any::<u16>(),
            fates in proptest::collection::vec(fate(), 1..300),
        ) {
            let mut arrivals: Vec<(usize, usize)> = vec![];
            for (index, fate) in fates.iter().enumerate() {
                if let Some(lateness) = fate.lateness {
                    arrivals.push((index + lateness, index));
                    if fate.twice {
                        arrivals.push((index + lateness + 3, index));
                    }
                }
            }
            arrivals.sort();
            let Some(&(_, first)) = arrivals.first() else { return Ok(()) };
            let mut munger = RtpMunger::new(out_start, 0);
            let src_seq = |index: usize| src_start.wrapping_add(index as u16);
            munger.switch_source(SSRC, src_seq(first), first as u32 * 10, None);
            let mut seen = vec![Seen::Unseen; fates.len()];
            let mut newest = None;
            for &(_, index) in &arrivals {
                let forward = fates[index].forward;
                let src = SourcePacket { ssrc: SSRC, seq: src_seq(index), ts: index as u32 * 10 };
                let got = munger.munge(src, forward);
                let is_newest = newest.is_none_or(|n| index > n);
                let expected_seen = match (seen[index], forward, is_newest) {
                    _ if index < first => seen[index],
                    (Seen::Unseen, false, true) => Seen::DroppedAsNewest,
                    (Seen::Unseen, false, false) => Seen::DroppedLate,
                    (Seen::Unseen | Seen::Forwarded, true, _) => Seen::Forwarded,
                    (other, _, _) => other,
                };
                let expected = (expected_seen == Seen::Forwarded && forward).then(|| {
                    let dropped = seen[first..index]
                        .iter()
                        .filter(|&&s| s == Seen::DroppedAsNewest)
                        .count();
                    Munged {
                        seq: out_start.wrapping_add((index - first - dropped) as u16),
                        ts: index as u32 * 10 - first as u32 * 10,
                    }
                });
                prop_assert_eq!(got, expected, "packet {}", index);
                seen[index] = expected_seen;
                if is_newest && index >= first {
                    newest = Some(index);
                }
            }
        }

        /// Across random switches: sequence numbers stay contiguous, the clock never goes back,
        /// and a hint ahead of the clock is where the new source starts.
        #[test]
        fn switches_keep_numbers_contiguous_and_the_clock_monotonic(
            segments in proptest::collection::vec(
                (any::<u16>(), any::<u32>(), proptest::option::of(any::<u32>()), 1usize..20),
                1..8,
            ),
        ) {
            let mut munger = RtpMunger::new(1000, 5000);
            let mut last: Option<Munged> = None;
            for (ssrc, &(seq0, ts0, hint, frames)) in segments.iter().enumerate() {
                let ssrc = ssrc as u32;
                // The first source starts where the munger was told to.
                let hint = hint.filter(|_| ssrc > 0);
                munger.switch_source(ssrc, seq0, ts0, hint);
                for i in 0..frames * 2 {
                    let src = SourcePacket {
                        ssrc,
                        seq: seq0.wrapping_add(i as u16),
                        ts: ts0.wrapping_add((i / 2) as u32 * 1500),
                    };
                    let out = munger.munge(src, true).unwrap();
                    match last {
                        None => prop_assert_eq!(out, Munged { seq: 1000, ts: 5000 }),
                        Some(prev) => {
                            prop_assert_eq!(out.seq, prev.seq.wrapping_add(1));
                            prop_assert!(!ts_after(prev.ts, out.ts), "clock went back");
                            if i == 0 {
                                prop_assert!(ts_after(out.ts, prev.ts), "frames merged");
                                if let Some(hint) = hint.filter(|&h| ts_after(h, prev.ts)) {
                                    prop_assert_eq!(out.ts, hint);
                                }
                            }
                        }
                    }
                    last = Some(out);
                }
            }
        }
    }
}
