//! The client-to-mixer audio level (RFC 6464): voice activity and level of the packet's audio.

use super::error::{ParseError, WriteError};
use super::extension::{exact, put, HeaderExtension};

/// RFC 6464 section 3: the V bit and the level in -dBov, 0 (loudest) to 127 (silence).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct AudioLevel {
    pub voice_activity: bool,
    /// 7 bits.
    pub level: u8,
}

impl HeaderExtension<'_> for AudioLevel {
    const URI: &'static str = "urn:ietf:params:rtp-hdrext:ssrc-audio-level";

    fn parse(data: &[u8]) -> Result<Self, ParseError> {
        let [byte] = exact(data)?;
        Ok(Self {
            voice_activity: byte & 0x80 != 0,
            level: byte & 0x7F,
        })
    }

    fn write(&self, out: &mut [u8]) -> Result<usize, WriteError> {
        if self.level > 0x7F {
            return Err(WriteError::ValueOutOfRange);
        }
        put(out, &[(u8::from(self.voice_activity) << 7) | self.level])
    }
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;
    use crate::ext::extension::tests::assert_round_trip;

    #[test]
    fn v_bit_is_the_top_bit() {
        let loud_voice = AudioLevel {
            voice_activity: true,
            level: 3,
        };
        assert_eq!(AudioLevel::parse(&[0x83]), Ok(loud_voice));
        assert_eq!(AudioLevel::parse(&[]), Err(ParseError::BadLength));
        let bad = AudioLevel {
            voice_activity: false,
            level: 128,
        };
        assert_eq!(bad.write(&mut [0]), Err(WriteError::ValueOutOfRange));
    }

    proptest! {
        #[test]
        fn round_trips(voice_activity: bool, level in 0..=127u8) {
            assert_round_trip(&AudioLevel { voice_activity, level });
        }
    }
}
