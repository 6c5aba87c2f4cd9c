//! Coordination of video orientation (3GPP TS 26.114 section 7.4.5): how the receiver should
//! rotate and flip the picture.

use super::error::{ParseError, WriteError};
use super::extension::{exact, put, HeaderExtension};

/// The C, F and R1 R0 bits. The upper four bits are reserved: ignored on read, zero on write.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct VideoOrientation {
    /// C: the back-facing camera captured the picture (else the front-facing one).
    pub back_camera: bool,
    /// F: the picture is flipped horizontally.
    pub horizontal_flip: bool,
    pub rotation: Rotation,
}

/// R1 R0: the counter-clockwise rotation the receiver applies.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum Rotation {
    #[default]
    None = 0,
    Deg90 = 1,
    Deg180 = 2,
    Deg270 = 3,
}

impl Rotation {
    fn from_bits(bits: u8) -> Self {
        match bits & 0b11 {
            0 => Self::None,
            1 => Self::Deg90,
            2 => Self::Deg180,
            _ => Self::Deg270,
        }
    }
}

impl HeaderExtension<'_> for VideoOrientation {
    const URI: &'static str = "urn:3gpp:video-orientation";

    fn parse(data: &[u8]) -> Result<Self, ParseError> {
        let [byte] = exact(data)?;
        Ok(Self {
            back_camera: byte & 0b1000 != 0,
            horizontal_flip: byte & 0b0100 != 0,
            rotation: Rotation::from_bits(byte),
        })
    }

    fn write(&self, out: &mut [u8]) -> Result<usize, WriteError> {
        let byte = (u8::from(self.back_camera) << 3)
            | (u8::from(self.horizontal_flip) << 2)
            | self.rotation as u8;
        put(out, &[byte])
    }
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;
    use crate::ext::extension::tests::assert_round_trip;

    #[test]
    fn reads_c_f_r1_r0_and_ignores_reserved_bits() {
        let expected = VideoOrientation {
            back_camera: true,
            horizontal_flip: false,
            rotation: Rotation::Deg270,
        };
        assert_eq!(VideoOrientation::parse(&[0xFB]), Ok(expected));
        assert_eq!(VideoOrientation::parse(&[0, 0]), Err(ParseError::BadLength));
    }

    proptest! {
        #[test]
        fn round_trips(back_camera: bool, horizontal_flip: bool, r in 0..4u8) {
            let value = VideoOrientation { back_camera, horizontal_flip, rotation: Rotation::from_bits(r) };
            let bytes = assert_round_trip(&value);
            prop_assert_eq!(bytes[0] & 0b11, r);
        }
    }
}
