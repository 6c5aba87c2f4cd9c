//! Inbound SRTP/SRTCP replay protection (RFC 3711 §3.3.2): a sliding window over the packet
//! index per SSRC.
//!
//! A window is checked before a packet is decrypted (a replay costs no decryption) and only
//! moves once the packet authenticated ([`super::srtp`]), so forged packets cannot push it.
//! Its state is inline: no allocation per packet.

/// Packets behind the highest index that are still accepted once.
pub const WINDOW: u64 = 1024;

const WORDS: usize = (WINDOW / 64) as usize;

/// One stream's window: the highest accepted index and which of the `WINDOW` indices at or
/// below it were seen.
#[derive(Debug, Clone, Default)]
pub struct ReplayWindow {
    highest: Option<u64>,
    /// Bit `d` is set when index `highest - d` was accepted.
    seen: [u64; WORDS],
}

impl ReplayWindow {
    /// The highest accepted index, if any.
    pub fn highest(&self) -> Option<u64> {
        self.highest
    }

    /// Whether a packet with `index` may be accepted: new, or inside the window and unseen.
    pub fn check(&self, index: u64) -> bool {
        let Some(highest) = self.highest else {
            return true;
        };
        if index > highest {
            return true;
        }
        let delta = highest - index;
        delta < WINDOW && !self.bit(delta)
    }

    /// Records an authenticated packet. Call only after [`Self::check`] allowed `index`.
    pub fn accept(&mut self, index: u64) {
        match self.highest {
            Some(highest) if index <= highest => self.set(highest - index),
            Some(highest) => {
                self.shift(index - highest);
                self.highest = Some(index);
                self.set(0);
            }
            None => {
                self.highest = Some(index);
                self.set(0);
            }
        }
    }

    fn bit(&self, delta: u64) -> bool {
        let (word, bit) = ((delta / 64) as usize, delta % 64);
        self.seen[word] & (1 << bit) != 0
    }

    fn set(&mut self, delta: u64) {
        let (word, bit) = ((delta / 64) as usize, delta % 64);
        self.seen[word] |= 1 << bit;
    }

    /// Moves every seen bit `by` positions further from the new highest index.
    fn shift(&mut self, by: u64) {
        if by >= WINDOW {
            self.seen = [0; WORDS];
            return;
        }
        let (words, bits) = ((by / 64) as usize, (by % 64) as u32);
        for i in (0..WORDS).rev() {
            let low = i.checked_sub(words).map_or(0, |j| self.seen[j]);
            let carry = match i.checked_sub(words + 1) {
                Some(j) if bits > 0 => self.seen[j] >> (64 - bits),
                _ => 0,
            };
            self.seen[i] = (low << bits) | carry;
        }
    }
}

/// Where an RTP stream's sequence numbers stand: the highest extended sequence number
/// (rollover count << 16 | seq) seen, from which a new one's rollover count is guessed.
#[derive(Debug, Clone, Copy, Default)]
pub struct Rollover {
    highest: Option<u64>,
}

impl Rollover {
    /// The extended sequence number `seq` most likely stands for (RFC 3711 Appendix A). `None`
    /// for a sequence number from before the first rollover count, which cannot be a packet
    /// the stream sent.
    pub fn estimate(&self, seq: u16) -> Option<u64> {
        let Some(highest) = self.highest else {
            return Some(u64::from(seq));
        };
        let roc = highest >> 16;
        let last = highest as u16;
        let guess = if last < 0x8000 && seq > last && seq - last > 0x8000 {
            roc.checked_sub(1)?
        } else if last >= 0x8000 && seq < last - 0x8000 {
            roc + 1
        } else {
            roc
        };
        Some(guess << 16 | u64::from(seq))
    }

    /// Records `index` as seen; only ever moves forward, so an old packet keeps the rollover
    /// count of its own time.
    pub fn advance(&mut self, index: u64) {
        self.highest = Some(self.highest.map_or(index, |h| h.max(index)));
    }
}

/// An RTP stream's window, keyed by the extended sequence number.
#[derive(Debug, Clone, Default)]
pub struct RtpReplay {
    rollover: Rollover,
    window: ReplayWindow,
}

impl RtpReplay {
    /// The extended sequence number of `seq` if it is not a replay.
    pub fn check(&self, seq: u16) -> Option<u64> {
        self.rollover
            .estimate(seq)
            .filter(|&index| self.window.check(index))
    }

    /// Records an authenticated packet. Call only after [`Self::check`] returned `index`.
    pub fn accept(&mut self, index: u64) {
        self.rollover.advance(index);
        self.window.accept(index);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn duplicates_are_rejected_and_reordering_inside_the_window_is_not() {
        let mut w = ReplayWindow::default();
        for index in [10, 12, 11] {
            assert!(w.check(index));
            w.accept(index);
        }
        assert!(!w.check(10));
        assert!(!w.check(12));
        assert!(w.check(9));
    }

    #[test]
    fn indices_leave_the_window_after_window_newer_ones() {
        let mut w = ReplayWindow::default();
        w.accept(5000);
        assert!(w.check(5000 - WINDOW + 1));
        assert!(!w.check(5000 - WINDOW));
        w.accept(5000 + 200);
        assert!(!w.check(5000));
        assert!(w.check(5001));
        assert!(!w.check(5200 - WINDOW));
    }

    #[test]
    fn shifting_keeps_bits_across_word_boundaries() {
        let mut w = ReplayWindow::default();
        for index in 2000..2300 {
            w.accept(index);
        }
        for step in [1, 63, 64, 65, 127] {
            let top = w.highest().expect("accepted above");
            w.accept(top + step);
        }
        assert_eq!(w.highest(), Some(2619));
        for index in [1700, 2301, 2362, 2428, 2491, 2618] {
            assert!(w.check(index), "{index} was never accepted");
        }
        for index in (2000..2301).chain([2363, 2427, 2492, 2619]) {
            assert!(!w.check(index), "{index} was accepted");
        }
    }

    #[test]
    fn a_jump_beyond_the_window_forgets_everything_before() {
        let mut w = ReplayWindow::default();
        w.accept(1);
        w.accept(1 + 5 * WINDOW);
        assert!(!w.check(1));
        assert!(w.check(1 + 5 * WINDOW - 1));
    }

    #[test]
    fn the_extended_sequence_follows_rollovers_both_ways() {
        let mut r = Rollover::default();
        r.advance(0xFFFE);
        assert_eq!(r.estimate(0x0001), Some(0x1_0001));
        r.advance(0x1_0001);
        assert_eq!(r.estimate(0xFFFF), Some(0xFFFF));
        assert_eq!(r.estimate(0x0002), Some(0x1_0002));
        // An older packet does not move the rollover back.
        r.advance(0xFFFF);
        assert_eq!(r.estimate(0x0003), Some(0x1_0003));
        // Before the first rollover count there is nothing to go back to.
        let mut fresh = Rollover::default();
        fresh.advance(5);
        assert_eq!(fresh.estimate(0xFFF0), None);
    }

    #[test]
    fn an_rtp_replay_across_a_rollover_is_caught() {
        let mut r = RtpReplay::default();
        for seq in [0xFFFF, 0x0000] {
            let index = r.check(seq).expect("new packet");
            r.accept(index);
        }
        assert_eq!(r.check(0xFFFF), None);
        assert_eq!(r.check(0x0000), None);
        assert_eq!(r.check(0x0001), Some(0x1_0001));
    }
}
