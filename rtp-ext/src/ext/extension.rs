//! The interface every typed extension implements, and the byte helpers they share.

use super::error::{ParseError, WriteError};

/// A header extension's value: read from an element's bytes, written as an element's bytes.
pub trait HeaderExtension<'a>: Sized {
    /// The URI negotiated for it with `a=extmap` in SDP.
    const URI: &'static str;

    /// Reads the value from an element's data (without the element header).
    fn parse(data: &'a [u8]) -> Result<Self, ParseError>;

    /// Writes the element's data into `out`; returns its length.
    fn write(&self, out: &mut [u8]) -> Result<usize, WriteError>;
}

/// The element as an array, when its length is exactly `N`.
pub(super) fn exact<const N: usize>(data: &[u8]) -> Result<[u8; N], ParseError> {
    data.try_into().map_err(|_| ParseError::BadLength)
}

/// Copies `bytes` to the start of `out`.
pub(super) fn put(out: &mut [u8], bytes: &[u8]) -> Result<usize, WriteError> {
    out.get_mut(..bytes.len())
        .ok_or(WriteError::BufferTooSmall)?
        .copy_from_slice(bytes);
    Ok(bytes.len())
}

#[cfg(test)]
pub(super) mod tests {
    use std::fmt::Debug;

    use super::*;

    /// Writes `value`, checks a buffer one byte short is refused, and reads it back.
    pub fn assert_round_trip<T>(value: &T) -> Vec<u8>
    where
        T: for<'a> HeaderExtension<'a> + PartialEq + Debug,
    {
        let mut buf = [0u8; 300];
        let len = value.write(&mut buf).expect("value writes");
        assert_eq!(
            value.write(&mut vec![0; len - 1]),
            Err(WriteError::BufferTooSmall)
        );
        assert_eq!(T::parse(&buf[..len]).as_ref(), Ok(value));
        buf[..len].to_vec()
    }

    #[test]
    fn put_refuses_short_buffers() {
        let mut out = [0; 2];
        assert_eq!(put(&mut out, &[1, 2, 3]), Err(WriteError::BufferTooSmall));
        assert_eq!(put(&mut out, &[1, 2]), Ok(2));
        assert_eq!(exact::<2>(&[1]), Err(ParseError::BadLength));
        assert!(!ParseError::Truncated.to_string().is_empty());
        assert!(!WriteError::ValueOutOfRange.to_string().is_empty());
    }
}
