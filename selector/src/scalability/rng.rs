//! A seeded pseudo-random generator (SplitMix64) for generated streams and simulated networks:
//! one seed gives the same packets and the same losses on every run, without a dependency.

/// SplitMix64 over its state; construct it with the seed.
#[derive(Debug, Clone)]
pub struct SeededRng(pub u64);

impl SeededRng {
    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// True with probability `percent` / 100.
    pub fn chance(&mut self, percent: u32) -> bool {
        self.next_u64() % 100 < u64::from(percent)
    }

    /// A value below `n`, which is at least 1.
    pub fn below(&mut self, n: u64) -> u64 {
        self.next_u64() % n.max(1)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_seed_one_sequence() {
        let draw = |seed| {
            let mut rng = SeededRng(seed);
            [
                rng.next_u64(),
                rng.next_u64(),
                rng.below(10),
                u64::from(rng.chance(50)),
            ]
        };
        assert_eq!(draw(7), draw(7));
        assert_ne!(draw(7), draw(8));
        let mut rng = SeededRng(1);
        assert!((0..1000).all(|_| rng.below(10) < 10));
        assert!(!(0..1000).any(|_| rng.chance(0)));
        assert!((0..1000).all(|_| rng.chance(100)));
    }
}
