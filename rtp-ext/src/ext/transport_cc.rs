//! transport-wide-cc: a sequence number shared by all streams of a transport, which the
//! receiver's feedback refers to.

use super::error::{ParseError, WriteError};
use super::extension::{exact, put, HeaderExtension};

/// The transport-wide sequence number.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct TransportSequenceNumber(pub u16);

impl HeaderExtension<'_> for TransportSequenceNumber {
    const URI: &'static str =
        "http://www.ietf.org/id/draft-holmer-rmcat-transport-wide-cc-extensions-01";

    fn parse(data: &[u8]) -> Result<Self, ParseError> {
        Ok(Self(u16::from_be_bytes(exact(data)?)))
    }

    fn write(&self, out: &mut [u8]) -> Result<usize, WriteError> {
        put(out, &self.0.to_be_bytes())
    }
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;
    use crate::ext::extension::tests::assert_round_trip;

    #[test]
    fn reads_big_endian_16_bits() {
        assert_eq!(
            TransportSequenceNumber::parse(&[0x19, 0xF9]),
            Ok(TransportSequenceNumber(0x19F9))
        );
        assert_eq!(
            TransportSequenceNumber::parse(&[1]),
            Err(ParseError::BadLength)
        );
    }

    proptest! {
        #[test]
        fn round_trips(seq: u16) {
            assert_round_trip(&TransportSequenceNumber(seq));
        }
    }
}
