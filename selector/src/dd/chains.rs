//! Chain tracking (AV1 RTP spec, "chains"): whether every frame of a chain so far reached this
//! subscriber. A decode target can be switched to without a keyframe only while its chain is
//! intact. A chain breaks when one of its frames was dropped for this subscriber, or is missing
//! (lost or late); it heals when the missing frame arrives and is forwarded, or at a frame that
//! starts the chain again (chain diff 0).

use rtp_ext::dd::MAX_CHAINS;

/// Missing frames remembered per chain; more than this and the chain is treated as broken
/// until it restarts.
const MAX_MISSING: usize = 4;
/// Frames a missing frame may lag the newest before it counts as lost: well past the round
/// trips a retransmission needs (48 frames is 0.5 s of a three-layer stream at 30 fps, 1.6 s
/// of a single-layer one), and soon enough that a subscriber waiting on the chain asks for a
/// keyframe within about a keyframe interval instead of freezing.
pub const MISSING_PATIENCE: i64 = 48;

/// What became of an earlier frame, as far as this subscriber knows.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Fate {
    Forwarded,
    Dropped,
    /// Not seen: lost, late, or from before the subscription.
    Unknown,
}

#[derive(Debug, Clone, Copy, Default)]
struct Chain {
    /// Newest frame of the chain known not to have reached the subscriber.
    dropped: Option<i64>,
    missing: [i64; MAX_MISSING],
    missing_len: u8,
    /// The frame being decided, when later frames of the chain already named it: not missing
    /// while it is decided (a late keyframe may be the switch point), lost if it is dropped.
    deciding: Option<i64>,
}

impl Chain {
    fn intact(&self) -> bool {
        self.dropped.is_none() && self.missing_len == 0
    }

    fn mark_dropped(&mut self, frame: i64) {
        self.dropped = Some(self.dropped.map_or(frame, |d| d.max(frame)));
    }

    fn missing(&self) -> &[i64] {
        &self.missing[..usize::from(self.missing_len)]
    }

    fn add_missing(&mut self, frame: i64) {
        if self.missing().contains(&frame) {
            return;
        }
        match self.missing.get_mut(usize::from(self.missing_len)) {
            Some(slot) => {
                *slot = frame;
                self.missing_len += 1;
            }
            None => self.mark_dropped(frame),
        }
    }

    /// Keeps only the missing frames `keep` accepts; returns those it removed, newest last.
    fn retain_missing(&mut self, keep: impl Fn(i64) -> bool) -> Option<i64> {
        let mut removed = None;
        let mut kept = 0;
        for i in 0..usize::from(self.missing_len) {
            let frame = self.missing[i];
            if keep(frame) {
                self.missing[kept] = frame;
                kept += 1;
            } else {
                removed = Some(removed.map_or(frame, |r: i64| r.max(frame)));
            }
        }
        // At most MAX_MISSING.
        self.missing_len = kept as u8;
        removed
    }

    /// `at` starts the chain again: nothing before it matters any more.
    fn restart(&mut self, at: i64) {
        self.dropped = self.dropped.filter(|&d| d > at);
        self.retain_missing(|m| m >= at);
    }
}

/// The chains of one structure, for one subscriber.
#[derive(Debug, Clone)]
pub struct Chains {
    chains: [Chain; MAX_CHAINS],
    count: usize,
}

impl Chains {
    pub fn new(count: u8) -> Self {
        Self {
            chains: [Chain::default(); MAX_CHAINS],
            count: usize::from(count).min(MAX_CHAINS),
        }
    }

    /// Accounts for a newly seen frame's chain diffs: each names the previous frame of its
    /// chain, whose fate `fate` tells. Call before deciding the frame, so that the chains say
    /// whether everything before it arrived.
    pub fn observe(&mut self, frame: i64, chain_diffs: &[u16], fate: impl Fn(i64) -> Fate) {
        for (chain, &diff) in self.chains[..self.count].iter_mut().zip(chain_diffs) {
            if let Some(stale) = chain.retain_missing(|m| m > frame - MISSING_PATIENCE) {
                // Waited longer than any retransmission takes: lost.
                chain.mark_dropped(stale);
            }
            if chain.retain_missing(|m| m != frame).is_some() {
                chain.deciding = Some(frame);
            }
            if diff == 0 {
                chain.restart(frame);
                continue;
            }
            let previous = frame - i64::from(diff);
            match fate(previous) {
                Fate::Forwarded => {}
                Fate::Dropped => chain.mark_dropped(previous),
                Fate::Unknown => chain.add_missing(previous),
            }
        }
    }

    /// A frame's fate is now known: if a chain was waiting for it, that chain heals or breaks.
    pub fn resolve(&mut self, frame: i64, forwarded: bool) {
        for chain in &mut self.chains[..self.count] {
            let was_deciding = chain.deciding.take_if(|&mut d| d == frame).is_some();
            let was_missing = chain.retain_missing(|m| m != frame).is_some();
            if (was_deciding || was_missing) && !forwarded {
                chain.mark_dropped(frame);
            }
        }
    }

    /// Whether chain `chain` is intact; a chain the structure does not have never is.
    pub fn intact(&self, chain: u8) -> bool {
        self.chains[..self.count]
            .get(usize::from(chain))
            .is_some_and(Chain::intact)
    }

    /// Whether chain `chain` lost a frame for good (as opposed to waiting for one).
    pub fn broken_for_good(&self, chain: u8) -> bool {
        self.chains[..self.count]
            .get(usize::from(chain))
            .is_some_and(|c| c.dropped.is_some())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fates(forwarded: &[i64], dropped: &[i64]) -> impl Fn(i64) -> Fate {
        let (forwarded, dropped) = (forwarded.to_vec(), dropped.to_vec());
        move |f| {
            if forwarded.contains(&f) {
                Fate::Forwarded
            } else if dropped.contains(&f) {
                Fate::Dropped
            } else {
                Fate::Unknown
            }
        }
    }

    #[test]
    fn intact_while_every_previous_frame_was_forwarded() {
        let mut c = Chains::new(1);
        c.observe(10, &[0], fates(&[], &[]));
        assert!(c.intact(0), "a chain starts at diff 0");
        c.observe(14, &[4], fates(&[10], &[]));
        assert!(c.intact(0));
        assert!(!c.intact(1), "no such chain");
    }

    #[test]
    fn a_dropped_frame_breaks_until_the_chain_restarts() {
        let mut c = Chains::new(1);
        c.observe(14, &[4], fates(&[], &[10]));
        assert!(!c.intact(0));
        assert!(c.broken_for_good(0));
        c.observe(18, &[4], fates(&[14], &[10]));
        assert!(!c.intact(0), "still broken further down the chain");
        c.observe(20, &[0], fates(&[], &[]));
        assert!(c.intact(0));
    }

    #[test]
    fn a_missing_frame_heals_when_it_arrives_forwarded() {
        let mut c = Chains::new(2);
        c.observe(14, &[4, 4], fates(&[], &[]));
        assert!(!c.intact(0) && !c.intact(1));
        assert!(!c.broken_for_good(0));
        c.resolve(10, true);
        assert!(c.intact(0) && c.intact(1));
    }

    #[test]
    fn a_missing_frame_that_arrives_and_is_dropped_breaks() {
        let mut c = Chains::new(1);
        c.observe(14, &[4], fates(&[], &[]));
        c.resolve(10, false);
        assert!(c.broken_for_good(0));
    }

    #[test]
    fn restart_keeps_what_comes_after_it() {
        let mut c = Chains::new(1);
        // Frame 14 (pointing at 12) seen before the restart frame 12 itself.
        c.observe(14, &[2], fates(&[], &[]));
        c.observe(12, &[0], fates(&[], &[]));
        assert!(
            c.intact(0),
            "nothing before 12 is missing while 12 is decided"
        );
        c.resolve(12, false);
        assert!(c.broken_for_good(0), "12 was dropped after all");
    }

    #[test]
    fn a_late_frame_forwarded_heals_the_chain() {
        let mut c = Chains::new(1);
        c.observe(14, &[2], fates(&[], &[]));
        assert!(!c.intact(0), "14 waits for 12");
        c.observe(12, &[2], fates(&[10], &[]));
        c.resolve(12, true);
        assert!(c.intact(0));
        assert!(!c.broken_for_good(0));
    }

    #[test]
    fn missing_frames_lagging_too_far_count_as_lost() {
        let mut c = Chains::new(1);
        c.observe(14, &[4], fates(&[], &[]));
        let later = 10 + MISSING_PATIENCE;
        c.observe(later, &[1], fates(&[later - 1], &[]));
        assert!(c.broken_for_good(0));
    }
}
