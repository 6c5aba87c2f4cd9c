//! Decode target indications (AV1 RTP spec A.8.3): how a frame relates to each decode target.

use std::fmt;

/// Most decode targets a structure can define (`dt_cnt_minus_one` is 5 bits).
pub const MAX_DECODE_TARGETS: usize = 32;

/// What a frame means to one decode target.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[repr(u8)]
pub enum DecodeTargetIndication {
    /// The frame is not part of the decode target.
    NotPresent = 0,
    /// Part of the decode target, but no later frame of that target depends on it.
    Discardable = 1,
    /// Part of the decode target, and a receiver may start decoding the target here if it has
    /// every frame of the target's chain.
    Switch = 2,
    /// Part of the decode target and referenced by later frames of it.
    Required = 3,
}

impl DecodeTargetIndication {
    /// From the 2-bit wire value; every value is defined.
    pub fn from_bits(bits: u8) -> Self {
        match bits & 0b11 {
            0 => Self::NotPresent,
            1 => Self::Discardable,
            2 => Self::Switch,
            _ => Self::Required,
        }
    }

    /// One letter: `-` not present, `D` discardable, `S` switch, `R` required.
    pub fn as_char(self) -> char {
        match self {
            Self::NotPresent => '-',
            Self::Discardable => 'D',
            Self::Switch => 'S',
            Self::Required => 'R',
        }
    }
}

/// One indication per decode target, packed two bits each into a `u64`: a per-packet value that
/// never allocates.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct DecodeTargetIndications {
    packed: u64,
    len: u8,
}

impl DecodeTargetIndications {
    /// `len` decode targets, all [`DecodeTargetIndication::NotPresent`]. `len` above 32 is clamped.
    pub fn new(len: usize) -> Self {
        Self {
            packed: 0,
            len: len.min(MAX_DECODE_TARGETS) as u8,
        }
    }

    pub fn from_slice(dtis: &[DecodeTargetIndication]) -> Self {
        let mut out = Self::new(dtis.len());
        for (dt, &dti) in dtis.iter().take(MAX_DECODE_TARGETS).enumerate() {
            out.set(dt, dti);
        }
        out
    }

    pub fn len(&self) -> usize {
        usize::from(self.len)
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The indication for decode target `dt`; `NotPresent` past the end.
    pub fn get(&self, dt: usize) -> DecodeTargetIndication {
        if dt >= self.len() {
            return DecodeTargetIndication::NotPresent;
        }
        DecodeTargetIndication::from_bits((self.packed >> (2 * dt)) as u8)
    }

    /// Sets decode target `dt`; ignored past the end.
    pub fn set(&mut self, dt: usize, dti: DecodeTargetIndication) {
        if dt >= self.len() {
            return;
        }
        let shift = 2 * dt;
        self.packed = (self.packed & !(0b11 << shift)) | ((dti as u64) << shift);
    }

    pub fn iter(&self) -> impl Iterator<Item = DecodeTargetIndication> + '_ {
        (0..self.len()).map(|dt| self.get(dt))
    }

    /// Bitmask of the decode targets this frame is part of (any indication but `NotPresent`).
    pub fn present_mask(&self) -> u32 {
        (0..self.len())
            .filter(|&dt| self.get(dt) != DecodeTargetIndication::NotPresent)
            .fold(0, |mask, dt| mask | 1 << dt)
    }
}

impl fmt::Display for DecodeTargetIndications {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.iter()
            .try_for_each(|dti| write!(f, "{}", dti.as_char()))
    }
}

impl fmt::Debug for DecodeTargetIndications {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "\"{self}\"")
    }
}

#[cfg(test)]
mod tests {
    use super::DecodeTargetIndication::*;
    use super::*;

    #[test]
    fn packs_all_32_targets() {
        let mut dtis = DecodeTargetIndications::new(32);
        for dt in 0..32 {
            dtis.set(dt, DecodeTargetIndication::from_bits(dt as u8 % 4));
        }
        for dt in 0..32 {
            assert_eq!(dtis.get(dt) as u8, dt as u8 % 4);
        }
        dtis.set(31, NotPresent);
        assert_eq!(dtis.get(31), NotPresent);
        assert_eq!(dtis.get(30), Switch);
    }

    #[test]
    fn displays_one_letter_per_target() {
        let dtis =
            DecodeTargetIndications::from_slice(&[NotPresent, Discardable, Switch, Required]);
        assert_eq!(dtis.to_string(), "-DSR");
        assert_eq!(dtis.present_mask(), 0b1110);
    }

    #[test]
    fn out_of_range_is_not_present_and_ignored() {
        let mut dtis = DecodeTargetIndications::new(2);
        dtis.set(5, Required);
        assert_eq!(dtis.get(5), NotPresent);
        assert_eq!(dtis, DecodeTargetIndications::new(2));
    }
}
