//! A bounded record of per-frame decisions, keyed by extended frame number: the same decision
//! for every packet and retransmission of a frame, and what a later frame's references met.

/// How many recent frames are remembered. At 90 frames per second (three spatial layers at
/// 30 fps) this is almost three seconds: longer than any retransmission is worth waiting for.
pub const HISTORY_FRAMES: usize = 256;

/// A ring of the last [`HISTORY_FRAMES`] frames' values, indexed by extended frame number.
#[derive(Debug, Clone)]
pub struct FrameHistory<T: Copy> {
    slots: [Option<(i64, T)>; HISTORY_FRAMES],
}

impl<T: Copy> Default for FrameHistory<T> {
    fn default() -> Self {
        Self {
            slots: [None; HISTORY_FRAMES],
        }
    }
}

impl<T: Copy> FrameHistory<T> {
    /// The value of `frame`, if it is still remembered.
    pub fn get(&self, frame: i64) -> Option<T> {
        match self.slots[Self::slot(frame)] {
            Some((f, value)) if f == frame => Some(value),
            _ => None,
        }
    }

    /// Remembers `frame`, forgetting whatever frame shared its slot.
    pub fn insert(&mut self, frame: i64, value: T) {
        self.slots[Self::slot(frame)] = Some((frame, value));
    }

    pub fn clear(&mut self) {
        self.slots = [None; HISTORY_FRAMES];
    }

    fn slot(frame: i64) -> usize {
        // rem_euclid keeps negative frame numbers (late frames from before the first one seen)
        // in range; the result is below HISTORY_FRAMES.
        frame.rem_euclid(HISTORY_FRAMES as i64) as usize
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn remembers_the_last_frames_and_forgets_older() {
        let mut h = FrameHistory::default();
        h.insert(10, 'a');
        h.insert(-3, 'b');
        assert_eq!(h.get(10), Some('a'));
        assert_eq!(h.get(-3), Some('b'));
        assert_eq!(h.get(11), None);
        h.insert(10 + HISTORY_FRAMES as i64, 'c');
        assert_eq!(h.get(10), None, "evicted by a frame sharing its slot");
        assert_eq!(h.get(10 + HISTORY_FRAMES as i64), Some('c'));
        h.clear();
        assert_eq!(h.get(-3), None);
    }
}
