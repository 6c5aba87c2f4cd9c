//! abs-send-time: when the sender sent the packet, for delay-based bandwidth estimation.

use super::error::{ParseError, WriteError};
use super::extension::{exact, put, HeaderExtension};

/// The send time in seconds as 6.18 fixed point (24 bits), wrapping every 64 seconds.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct AbsSendTime(pub u32);

impl AbsSendTime {
    const MAX: u32 = 0xFF_FFFF;

    /// From a 64-bit NTP timestamp (32.32): its 6 low integer bits and 18 high fraction bits.
    pub fn from_ntp(ntp: u64) -> Self {
        Self(((ntp >> 14) as u32) & Self::MAX)
    }
}

impl HeaderExtension<'_> for AbsSendTime {
    const URI: &'static str = "http://www.webrtc.org/experiments/rtp-hdrext/abs-send-time";

    fn parse(data: &[u8]) -> Result<Self, ParseError> {
        let [a, b, c] = exact(data)?;
        Ok(Self(u32::from_be_bytes([0, a, b, c])))
    }

    fn write(&self, out: &mut [u8]) -> Result<usize, WriteError> {
        if self.0 > Self::MAX {
            return Err(WriteError::ValueOutOfRange);
        }
        let [_, a, b, c] = self.0.to_be_bytes();
        put(out, &[a, b, c])
    }
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;
    use crate::ext::extension::tests::assert_round_trip;

    #[test]
    fn ntp_seconds_keep_six_bits() {
        // 65.5 s: 65 wraps to 1, the half second is 2^17 in 18 fraction bits.
        let ntp = (65u64 << 32) | (1 << 31);
        assert_eq!(
            AbsSendTime::from_ntp(ntp),
            AbsSendTime((1 << 18) | (1 << 17))
        );
    }

    #[test]
    fn reads_big_endian_24_bits() {
        assert_eq!(
            AbsSendTime::parse(&[0x48, 0xC4, 0x82]),
            Ok(AbsSendTime(0x48C482))
        );
        assert_eq!(AbsSendTime::parse(&[1, 2]), Err(ParseError::BadLength));
        assert_eq!(
            AbsSendTime::parse(&[1, 2, 3, 4]),
            Err(ParseError::BadLength)
        );
        assert_eq!(
            AbsSendTime(1 << 24).write(&mut [0; 3]),
            Err(WriteError::ValueOutOfRange)
        );
    }

    proptest! {
        #[test]
        fn round_trips(raw in 0..=0xFF_FFFFu32) {
            assert_round_trip(&AbsSendTime(raw));
        }
    }
}
