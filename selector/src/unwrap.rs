//! Extends 16-bit wrapping counters (RTP sequence numbers, DD frame numbers) to 64 bits, so
//! that order and distance survive the wrap.

/// Unwraps values that move forward, tolerating reordering of up to half the 16-bit space.
#[derive(Debug, Clone, Copy, Default)]
pub struct Unwrapper {
    highest: Option<i64>,
}

impl Unwrapper {
    /// The extended value of `value`: the one nearest to the highest seen so far.
    pub fn unwrap(&mut self, value: u16) -> i64 {
        let extended = match self.highest {
            None => i64::from(value),
            Some(highest) => {
                // Truncation intended: the 16-bit distance, read as signed.
                let delta = value.wrapping_sub(highest as u16) as i16;
                highest + i64::from(delta)
            }
        };
        if self.highest.is_none_or(|h| extended > h) {
            self.highest = Some(extended);
        }
        extended
    }

    /// The highest extended value seen.
    pub fn highest(&self) -> Option<i64> {
        self.highest
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unwraps_forward_across_the_wrap() {
        let mut u = Unwrapper::default();
        assert_eq!(u.unwrap(65534), 65534);
        assert_eq!(u.unwrap(65535), 65535);
        assert_eq!(u.unwrap(0), 65536);
        assert_eq!(u.unwrap(5), 65541);
        assert_eq!(u.highest(), Some(65541));
    }

    #[test]
    fn late_values_stay_behind_the_highest() {
        let mut u = Unwrapper::default();
        u.unwrap(2);
        assert_eq!(u.unwrap(65535), -1, "late value from before the wrap");
        assert_eq!(u.unwrap(1), 1);
        assert_eq!(u.highest(), Some(2));
    }

    #[test]
    fn jumps_of_up_to_half_the_space_go_forward() {
        let mut u = Unwrapper::default();
        u.unwrap(0);
        assert_eq!(u.unwrap(32767), 32767);
        assert_eq!(u.unwrap(0), 0);
        assert_eq!(u.unwrap(65534), 65534, "32767 ahead reads as forward");
        assert_eq!(u.unwrap(32766), 32766, "32768 behind reads as backward");
    }
}
