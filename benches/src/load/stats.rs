//! What each viewer counts of what it receives, allocation-free per packet: which sequence
//! numbers never came (the node numbers each viewer's video contiguously, so a gap is a loss),
//! which frames came whole, and the latency histogram its worker shares.

use std::collections::HashMap;
use std::time::{Duration, Instant};

use crate::client::{Arrival, Track};

use super::tag::Tag;

/// Sequence numbers a viewer remembers; one arriving later than this behind the newest was
/// already judged lost (at 400 packets a second, 20 seconds).
const SEQ_WINDOW: u64 = 8192;
/// A jump this far ahead is not a stream going on but a new one: judge the old one ended.
const SEQ_RESET: u64 = 1 << 20;
/// Frames older than this many frame numbers behind the newest are given up on.
const FRAME_HORIZON: u64 = 600;
/// Frames in progress a viewer holds before giving up the oldest.
const FRAMES_HELD: usize = 256;

/// Which video sequence numbers arrived, from the first one counted on.
#[derive(Debug, Clone)]
pub struct SeqTracker {
    /// Losses count from here (set when counting starts, or by the first packet after).
    from: Option<u64>,
    counting: bool,
    highest: Option<u64>,
    bits: Vec<u64>,
    /// Judged lost: left the window without arriving.
    missing: u64,
    /// Arrived behind the newest: retransmissions (loopback does not reorder).
    late: u64,
    received: u64,
}

impl Default for SeqTracker {
    fn default() -> Self {
        Self {
            from: None,
            counting: false,
            highest: None,
            bits: vec![0; (SEQ_WINDOW / 64) as usize],
            missing: 0,
            late: 0,
            received: 0,
        }
    }
}

/// A viewer's loss after retransmission, as its sequence numbers show it.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct SeqCounts {
    /// Sequence numbers from the first counted to the newest.
    pub expected: u64,
    /// Of those, never arrived.
    pub missing: u64,
    /// Arrived after a later one: repaired by retransmission.
    pub repaired: u64,
}

impl SeqTracker {
    /// Counts from the packet after the newest so far (or the next one to arrive).
    pub fn start_counting(&mut self) {
        self.counting = true;
        self.from = self.highest.map(|h| h + 1);
    }

    pub fn record(&mut self, seq: u64) {
        let Some(highest) = self.highest else {
            self.highest = Some(seq);
            self.set(seq);
            self.arrived(seq, false);
            return;
        };
        if seq > highest {
            if seq - highest > SEQ_RESET {
                self.judge_window();
                self.bits.fill(0);
                self.from = self.counting.then_some(seq);
            } else {
                self.advance(highest, seq);
            }
            self.highest = Some(seq);
            self.set(seq);
            self.arrived(seq, false);
        } else if seq + SEQ_WINDOW > highest && !self.is_set(seq) {
            self.set(seq);
            self.arrived(seq, true);
        }
        // Otherwise a duplicate, or older than the window: already judged.
    }

    /// Moves the window's head from `highest` to `seq`, judging what leaves it.
    fn advance(&mut self, highest: u64, seq: u64) {
        for s in highest + 1..=seq {
            if let Some(old) = s.checked_sub(SEQ_WINDOW) {
                if self.counts(old) && !self.is_set(old) {
                    self.missing += 1;
                }
            }
            self.clear(s);
        }
    }

    fn arrived(&mut self, seq: u64, late: bool) {
        if self.counting && self.from.is_none() {
            self.from = Some(seq);
        }
        if self.counts(seq) {
            self.received += 1;
            self.late += u64::from(late);
        }
    }

    fn counts(&self, seq: u64) -> bool {
        self.from.is_some_and(|from| seq >= from)
    }

    /// Judges every number still in the window (at the end).
    fn judge_window(&mut self) {
        let Some(highest) = self.highest else {
            return;
        };
        let low = (highest + 1).saturating_sub(SEQ_WINDOW);
        for s in low..=highest {
            if self.counts(s) && !self.is_set(s) {
                self.missing += 1;
            }
        }
    }

    /// The counts with every number still in the window judged.
    pub fn finish(&self) -> SeqCounts {
        let mut judged = self.clone();
        judged.judge_window();
        SeqCounts {
            expected: judged.received + judged.missing,
            missing: judged.missing,
            repaired: judged.late,
        }
    }

    fn slot(seq: u64) -> (usize, u64) {
        let bit = seq % SEQ_WINDOW;
        ((bit / 64) as usize, 1 << (bit % 64))
    }

    fn set(&mut self, seq: u64) {
        let (word, mask) = Self::slot(seq);
        self.bits[word] |= mask;
    }

    fn clear(&mut self, seq: u64) {
        let (word, mask) = Self::slot(seq);
        self.bits[word] &= !mask;
    }

    fn is_set(&self, seq: u64) -> bool {
        let (word, mask) = Self::slot(seq);
        self.bits[word] & mask != 0
    }
}

/// Frames seen in part, until each is whole or given up. Frames are followed from before the
/// measurement starts, so one it cuts in two is not taken for an incomplete one; only frames
/// first seen while measuring count.
#[derive(Debug, Clone, Default)]
pub struct FrameTracker {
    /// Frame number: the packets that arrived (bit per index), how many it has, and whether
    /// it counts.
    open: HashMap<u64, OpenFrame>,
    newest: u64,
    pub complete: u64,
    pub incomplete: u64,
}

#[derive(Debug, Clone, Copy)]
struct OpenFrame {
    arrived: u64,
    count: u8,
    counts: bool,
}

impl FrameTracker {
    pub fn record(&mut self, tag: &Tag, measuring: bool) {
        self.newest = self.newest.max(tag.frame);
        let entry = self.open.entry(tag.frame).or_insert(OpenFrame {
            arrived: 0,
            count: tag.count,
            counts: measuring,
        });
        // A count that changed is not this frame's packet; ignored.
        if entry.count != tag.count || tag.index >= 64 {
            return;
        }
        entry.arrived |= 1 << tag.index;
        if entry.arrived.count_ones() == u32::from(tag.count) {
            let counts = entry.counts;
            self.open.remove(&tag.frame);
            self.complete += u64::from(counts);
        }
        if self.open.len() > FRAMES_HELD {
            self.give_up_old();
        }
    }

    fn give_up_old(&mut self) {
        let horizon = self.newest.saturating_sub(FRAME_HORIZON);
        let mut given_up = 0;
        self.open.retain(|&frame, open| {
            let keep = frame >= horizon;
            given_up += u64::from(!keep && open.counts);
            keep
        });
        self.incomplete += given_up;
    }

    /// Frames whole, and frames seen in part (those still open count as incomplete).
    pub fn finish(&self) -> (u64, u64) {
        let open = self.open.values().filter(|f| f.counts).count() as u64;
        (self.complete, self.incomplete + open)
    }
}

/// The latency histograms of a viewers' thread: video by the spatial layer its viewer asked
/// for (the node paces each viewer at its own estimate), and audio, which leaves the pacer
/// ahead of waiting video and so shows what the node and this tool add without it.
#[derive(Debug, Clone, Default)]
pub struct Latencies {
    pub video: [Histogram; 3],
    pub audio: Histogram,
}

impl Latencies {
    pub fn merge(&mut self, other: &Self) {
        for (mine, theirs) in self.video.iter_mut().zip(&other.video) {
            mine.merge(theirs);
        }
        self.audio.merge(&other.audio);
    }

    /// Every packet's latency, video and audio.
    pub fn all(&self) -> Histogram {
        let mut all = self.audio.clone();
        self.video.iter().for_each(|h| all.merge(h));
        all
    }
}

/// Latencies in microseconds: 10 us steps to 10 ms, 1 ms steps to 1 s, then one bucket.
#[derive(Debug, Clone)]
pub struct Histogram {
    buckets: Vec<u64>,
    count: u64,
    max: Duration,
}

const FINE_US: u64 = 10;
const FINE_END_US: u64 = 10_000;
const COARSE_US: u64 = 1_000;
const COARSE_END_US: u64 = 1_000_000;
const FINE_BUCKETS: u64 = FINE_END_US / FINE_US;
const BUCKETS: usize = (FINE_BUCKETS + (COARSE_END_US - FINE_END_US) / COARSE_US + 1) as usize;

impl Default for Histogram {
    fn default() -> Self {
        Self {
            buckets: vec![0; BUCKETS],
            count: 0,
            max: Duration::ZERO,
        }
    }
}

impl Histogram {
    pub fn record(&mut self, latency: Duration) {
        let us = u64::try_from(latency.as_micros()).unwrap_or(u64::MAX);
        let bucket = match us {
            _ if us < FINE_END_US => us / FINE_US,
            _ if us < COARSE_END_US => FINE_BUCKETS + (us - FINE_END_US) / COARSE_US,
            _ => BUCKETS as u64 - 1,
        };
        self.buckets[bucket as usize] += 1;
        self.count += 1;
        self.max = self.max.max(latency);
    }

    pub fn merge(&mut self, other: &Self) {
        for (mine, theirs) in self.buckets.iter_mut().zip(&other.buckets) {
            *mine += theirs;
        }
        self.count += other.count;
        self.max = self.max.max(other.max);
    }

    pub fn count(&self) -> u64 {
        self.count
    }

    pub fn max(&self) -> Duration {
        self.max
    }

    /// The upper edge of the bucket holding quantile `q` (0..=1); the largest seen caps it.
    pub fn quantile(&self, q: f64) -> Option<Duration> {
        if self.count == 0 {
            return None;
        }
        let rank = ((q.clamp(0.0, 1.0) * self.count as f64).ceil() as u64).max(1);
        let mut seen = 0;
        for (i, &n) in self.buckets.iter().enumerate() {
            seen += n;
            if seen >= rank {
                return Some(bucket_upper(i as u64).min(self.max));
            }
        }
        Some(self.max)
    }
}

fn bucket_upper(bucket: u64) -> Duration {
    let us = match bucket {
        _ if bucket < FINE_BUCKETS => (bucket + 1) * FINE_US,
        _ if bucket < BUCKETS as u64 - 1 => FINE_END_US + (bucket - FINE_BUCKETS + 1) * COARSE_US,
        _ => u64::MAX / 1_000,
    };
    Duration::from_micros(us)
}

/// Everything one viewer counts while the run measures.
#[derive(Debug, Clone, Default)]
pub struct ViewerStats {
    /// The spatial layer the viewer asked for.
    pub spatial: u8,
    pub seq: SeqTracker,
    pub frames: FrameTracker,
    pub video_packets: u64,
    pub audio_packets: u64,
    /// Packets whose payload carried no tag (the node's padding, say).
    pub untagged: u64,
}

impl ViewerStats {
    pub fn new(spatial: u8) -> Self {
        Self {
            spatial,
            ..Self::default()
        }
    }

    /// One packet; counted in full while `measuring`, else only kept track of.
    pub fn record(
        &mut self,
        arrival: &Arrival<'_>,
        measuring: bool,
        epoch: Instant,
        latencies: &mut Latencies,
    ) {
        let tag = Tag::read(arrival.payload);
        if arrival.track == Track::Video {
            self.seq.record(arrival.seq);
            if let Some(tag) = &tag {
                self.frames.record(tag, measuring);
            }
        }
        if !measuring {
            return;
        }
        let Some(tag) = tag else {
            self.untagged += 1;
            return;
        };
        let at = arrival.at.saturating_duration_since(epoch);
        let latency = at.saturating_sub(tag.sent);
        match arrival.track {
            Track::Video => {
                self.video_packets += 1;
                let layer = usize::from(self.spatial).min(latencies.video.len() - 1);
                latencies.video[layer].record(latency);
            }
            Track::Audio => {
                self.audio_packets += 1;
                latencies.audio.record(latency);
            }
            Track::Other => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tracker(seqs: impl IntoIterator<Item = u64>) -> SeqCounts {
        let mut t = SeqTracker::default();
        t.start_counting();
        seqs.into_iter().for_each(|s| t.record(s));
        t.finish()
    }

    #[test]
    fn gaps_are_missing_and_late_arrivals_repair_them() {
        let counts = tracker([10, 11, 13, 14, 16]);
        assert_eq!(
            (counts.expected, counts.missing, counts.repaired),
            (7, 2, 0)
        );
        let counts = tracker([10, 11, 13, 14, 12, 16, 15, 15]);
        assert_eq!(
            (counts.expected, counts.missing, counts.repaired),
            (7, 0, 2)
        );
    }

    #[test]
    fn losses_before_counting_starts_do_not_count() {
        let mut t = SeqTracker::default();
        [1, 2, 5].into_iter().for_each(|s| t.record(s));
        t.start_counting();
        [3, 6, 8].into_iter().for_each(|s| t.record(s));
        let counts = t.finish();
        assert_eq!(
            (counts.expected, counts.missing),
            (3, 1),
            "6, then 7 lost, 8"
        );
    }

    #[test]
    fn the_window_judges_what_leaves_it() {
        let far = 3 * SEQ_WINDOW;
        let counts = tracker((0..far).filter(|s| s % 100 != 7));
        assert_eq!(counts.expected, far);
        assert_eq!(counts.missing, far / 100 + u64::from(far % 100 > 7));
        // A repair that comes after the window moved past it is too late.
        let counts = tracker([0, 2, 2 + SEQ_WINDOW, 1]);
        assert_eq!(counts.repaired, 0);
    }

    #[test]
    fn frames_are_whole_when_every_index_came() {
        let tag = |frame, index, count| Tag {
            index,
            count,
            frame,
            sent: Duration::ZERO,
        };
        let mut frames = FrameTracker::default();
        for t in [
            tag(1, 0, 2),
            tag(1, 1, 2),
            tag(2, 0, 3),
            tag(2, 2, 3),
            tag(3, 0, 1),
        ] {
            frames.record(&t, true);
        }
        assert_eq!(frames.finish(), (2, 1));
        frames.record(&tag(2, 1, 3), true);
        assert_eq!(frames.finish(), (3, 0));
        // A frame begun before the measurement counts neither way.
        frames.record(&tag(4, 0, 2), false);
        assert_eq!(frames.finish(), (3, 0));
        frames.record(&tag(4, 1, 2), true);
        assert_eq!(frames.finish(), (3, 0));
    }

    #[test]
    fn quantiles_come_from_the_buckets_capped_by_the_largest() {
        let mut h = Histogram::default();
        assert_eq!(h.quantile(0.5), None);
        for us in 1..=100 {
            h.record(Duration::from_micros(us * 100));
        }
        h.record(Duration::from_millis(50));
        assert_eq!(h.quantile(0.5), Some(Duration::from_micros(5_110)));
        assert_eq!(h.quantile(1.0), Some(Duration::from_millis(50)));
        let mut other = Histogram::default();
        other.record(Duration::from_secs(3));
        h.merge(&other);
        assert_eq!(h.quantile(1.0), Some(Duration::from_secs(3)));
        assert_eq!(h.count(), 102);
    }
}
