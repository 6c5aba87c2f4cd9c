//! playout-delay: the sender's bounds on how long the receiver may buffer before rendering.

use super::error::{ParseError, WriteError};
use super::extension::{exact, put, HeaderExtension};

/// Minimum and maximum playout delay in units of 10 ms, 12 bits each.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct PlayoutDelay {
    pub min: u16,
    pub max: u16,
}

impl PlayoutDelay {
    const MAX_DELAY: u16 = 0xFFF;
}

impl HeaderExtension<'_> for PlayoutDelay {
    const URI: &'static str = "http://www.webrtc.org/experiments/rtp-hdrext/playout-delay";

    fn parse(data: &[u8]) -> Result<Self, ParseError> {
        let [a, b, c] = exact(data)?;
        Ok(Self {
            min: (u16::from(a) << 4) | u16::from(b >> 4),
            max: (u16::from(b & 0x0F) << 8) | u16::from(c),
        })
    }

    fn write(&self, out: &mut [u8]) -> Result<usize, WriteError> {
        if self.min > Self::MAX_DELAY || self.max > Self::MAX_DELAY {
            return Err(WriteError::ValueOutOfRange);
        }
        let [min_hi, min_lo] = self.min.to_be_bytes();
        let [max_hi, max_lo] = self.max.to_be_bytes();
        put(
            out,
            &[
                (min_hi << 4) | (min_lo >> 4),
                (min_lo << 4) | max_hi,
                max_lo,
            ],
        )
    }
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;
    use crate::ext::extension::tests::assert_round_trip;

    #[test]
    fn splits_12_and_12_bits() {
        let delay = PlayoutDelay {
            min: 0x123,
            max: 0x456,
        };
        assert_eq!(PlayoutDelay::parse(&[0x12, 0x34, 0x56]), Ok(delay));
        assert_eq!(PlayoutDelay::parse(&[0; 4]), Err(ParseError::BadLength));
        let bad = PlayoutDelay {
            min: 0,
            max: 0x1000,
        };
        assert_eq!(bad.write(&mut [0; 3]), Err(WriteError::ValueOutOfRange));
    }

    proptest! {
        #[test]
        fn round_trips(min in 0..=0xFFFu16, max in 0..=0xFFFu16) {
            assert_round_trip(&PlayoutDelay { min, max });
        }
    }
}
