//! A set of extension ids as a 256-bit mask: the filter a forwarder keeps per subscriber.

/// A set of RFC 8285 extension ids (0-255), `Copy` and allocation-free.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct ExtensionIds([u64; 4]);

impl ExtensionIds {
    pub const NONE: Self = Self([0; 4]);
    pub const ALL: Self = Self([u64::MAX; 4]);

    /// The set of `ids`.
    pub const fn of(ids: &[u8]) -> Self {
        let mut set = Self::NONE;
        let mut i = 0;
        while i < ids.len() {
            set = set.with(ids[i]);
            i += 1;
        }
        set
    }

    /// This set plus `id`.
    pub const fn with(mut self, id: u8) -> Self {
        self.0[(id / 64) as usize] |= 1 << (id % 64);
        self
    }

    /// This set minus `id`.
    pub const fn without(mut self, id: u8) -> Self {
        self.0[(id / 64) as usize] &= !(1 << (id % 64));
        self
    }

    pub const fn contains(&self, id: u8) -> bool {
        self.0[(id / 64) as usize] & (1 << (id % 64)) != 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn holds_exactly_its_ids() {
        let set = ExtensionIds::of(&[1, 63, 64, 255]);
        for id in 0..=255u8 {
            assert_eq!(set.contains(id), [1, 63, 64, 255].contains(&id), "id {id}");
        }
        assert!(!set.without(64).contains(64));
        assert!(set.without(64).contains(63));
        assert!(ExtensionIds::ALL.contains(0) && ExtensionIds::ALL.contains(255));
        assert!(!ExtensionIds::NONE.contains(7));
    }
}
