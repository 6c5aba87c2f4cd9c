//! The picture ID that VP8 (RFC 7741 section 4.2) and VP9 (RFC 9628 section 4.2) share: 7 bits,
//! or 15 bits when its leading M bit is set.

use crate::bits::{BitReader, BitWriter, BitsExhausted, BufferFull};

/// A picture ID together with its wire width. Values are kept reduced modulo the width, because
/// picture ids wrap: a rewritten id must fit in the bytes the sender chose.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct PictureId {
    value: u16,
    extended: bool,
}

impl PictureId {
    /// Values a 7-bit picture id can take.
    pub const SHORT_MODULUS: u16 = 1 << 7;
    /// Values a 15-bit picture id can take.
    pub const EXTENDED_MODULUS: u16 = 1 << 15;

    /// A 7-bit picture id (M = 0) holding `value` modulo 128.
    pub fn short(value: u16) -> Self {
        Self {
            value: value % Self::SHORT_MODULUS,
            extended: false,
        }
    }

    /// A 15-bit picture id (M = 1) holding `value` modulo 32768.
    pub fn extended(value: u16) -> Self {
        Self {
            value: value % Self::EXTENDED_MODULUS,
            extended: true,
        }
    }

    pub fn value(self) -> u16 {
        self.value
    }

    /// Whether the id is 15 bits wide (the M bit).
    pub fn is_extended(self) -> bool {
        self.extended
    }

    /// The number of distinct values of this width, after which the id wraps to 0.
    pub fn modulus(self) -> u16 {
        match self.extended {
            true => Self::EXTENDED_MODULUS,
            false => Self::SHORT_MODULUS,
        }
    }

    /// The same width holding `value`, wrapped to fit.
    pub fn with_value(self, value: u16) -> Self {
        match self.extended {
            true => Self::extended(value),
            false => Self::short(value),
        }
    }

    /// Bytes on the wire: 1 or 2.
    pub fn size(self) -> usize {
        1 + usize::from(self.extended)
    }

    pub(crate) fn read(r: &mut BitReader<'_>) -> Result<Self, BitsExhausted> {
        Ok(match r.read_bit()? {
            true => Self::extended(r.read(15)? as u16),
            false => Self::short(r.read(7)? as u16),
        })
    }

    pub(crate) fn write(self, w: &mut BitWriter<'_>) -> Result<(), BufferFull> {
        w.write_bit(self.extended)?;
        w.write(u32::from(self.value), 8 * self.size() as u32 - 1)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn constructors_wrap_to_the_width() {
        assert_eq!(PictureId::short(130).value(), 2);
        assert_eq!(PictureId::extended(0x8005).value(), 5);
        assert_eq!(PictureId::short(127).with_value(128), PictureId::short(0));
        assert!(PictureId::extended(1).with_value(u16::MAX).is_extended());
        assert_eq!(PictureId::extended(1).with_value(u16::MAX).value(), 0x7FFF);
    }

    /// RFC 7741 section 4.2: `|M| PictureID |`, the M bit selecting one or two bytes.
    #[test]
    fn rfc7741_4_2_wire_forms() {
        let cases: [(&[u8], PictureId); 2] = [
            (&[0x55], PictureId::short(0x55)),
            (&[0x81, 0x23], PictureId::extended(0x0123)),
        ];
        for (bytes, id) in cases {
            assert_eq!(PictureId::read(&mut BitReader::new(bytes)), Ok(id));
            assert_eq!(id.size(), bytes.len());
            let mut buf = [0xFF; 2];
            let mut w = BitWriter::new(&mut buf);
            id.write(&mut w).unwrap();
            assert_eq!(w.finish(), Ok(bytes.len()));
            assert_eq!(&buf[..bytes.len()], bytes);
        }
        assert_eq!(
            PictureId::read(&mut BitReader::new(&[0x80])),
            Err(BitsExhausted)
        );
    }
}
