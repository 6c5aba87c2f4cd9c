//! abs-capture-time: when the media was captured, in the capturer's NTP clock, with an optional
//! estimate of that clock's offset from the sender's.

use super::error::{ParseError, WriteError};
use super::extension::{exact, put, HeaderExtension};

/// The capture time, and the estimated offset of the capture clock when a mixer added it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct AbsCaptureTime {
    /// NTP timestamp, UQ32.32 seconds.
    pub absolute_capture_timestamp: u64,
    /// Signed Q32.32 seconds.
    pub estimated_capture_clock_offset: Option<i64>,
}

impl HeaderExtension<'_> for AbsCaptureTime {
    const URI: &'static str = "http://www.webrtc.org/experiments/rtp-hdrext/abs-capture-time";

    fn parse(data: &[u8]) -> Result<Self, ParseError> {
        let Some((timestamp, rest)) = data.split_first_chunk::<8>() else {
            return Err(ParseError::BadLength);
        };
        let offset = match rest {
            [] => None,
            rest => Some(i64::from_be_bytes(exact(rest)?)),
        };
        Ok(Self {
            absolute_capture_timestamp: u64::from_be_bytes(*timestamp),
            estimated_capture_clock_offset: offset,
        })
    }

    fn write(&self, out: &mut [u8]) -> Result<usize, WriteError> {
        let mut bytes = [0u8; 16];
        bytes[..8].copy_from_slice(&self.absolute_capture_timestamp.to_be_bytes());
        let len = match self.estimated_capture_clock_offset {
            Some(offset) => {
                bytes[8..].copy_from_slice(&offset.to_be_bytes());
                16
            }
            None => 8,
        };
        put(out, &bytes[..len])
    }
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;
    use crate::ext::extension::tests::assert_round_trip;

    #[test]
    fn offset_is_optional_and_signed() {
        let mut data = [0u8; 16];
        data[7] = 1;
        data[8..].fill(0xFF);
        let with_offset = AbsCaptureTime {
            absolute_capture_timestamp: 1,
            estimated_capture_clock_offset: Some(-1),
        };
        assert_eq!(AbsCaptureTime::parse(&data), Ok(with_offset));
        let without = AbsCaptureTime {
            estimated_capture_clock_offset: None,
            ..with_offset
        };
        assert_eq!(AbsCaptureTime::parse(&data[..8]), Ok(without));
        for len in [0, 7, 9, 15, 17] {
            assert_eq!(
                AbsCaptureTime::parse(&[0; 17][..len]),
                Err(ParseError::BadLength)
            );
        }
    }

    proptest! {
        #[test]
        fn round_trips(absolute_capture_timestamp: u64, estimated_capture_clock_offset: Option<i64>) {
            assert_round_trip(&AbsCaptureTime { absolute_capture_timestamp, estimated_capture_clock_offset });
        }
    }
}
