//! The SDES items carried as header extensions (RFC 7941): MID (RFC 8843) and the RTP stream ids
//! of simulcast (RFC 8852). All three are one short ASCII identifier, read without a copy.

use std::str;

use super::error::{ParseError, WriteError};
use super::extension::{put, HeaderExtension};

/// Longest identifier: the two-byte form's element length limit.
const MAX_LEN: usize = 255;

macro_rules! sdes_text_extension {
    ($(#[$doc:meta])* $name:ident, $uri:literal) => {
        $(#[$doc])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
        pub struct $name<'a>(pub &'a str);

        impl<'a> HeaderExtension<'a> for $name<'a> {
            const URI: &'static str = $uri;

            fn parse(data: &'a [u8]) -> Result<Self, ParseError> {
                parse_text(data).map(Self)
            }

            fn write(&self, out: &mut [u8]) -> Result<usize, WriteError> {
                write_text(self.0, out)
            }
        }
    };
}

sdes_text_extension!(
    /// The media section (`a=mid`) a packet belongs to, for BUNDLE demultiplexing.
    Mid,
    "urn:ietf:params:rtp-hdrext:sdes:mid"
);
sdes_text_extension!(
    /// The RTP stream id (`a=rid`) of a simulcast encoding.
    RtpStreamId,
    "urn:ietf:params:rtp-hdrext:sdes:rtp-stream-id"
);
sdes_text_extension!(
    /// The RTP stream id of the encoding an RTX or FEC stream repairs.
    RepairedRtpStreamId,
    "urn:ietf:params:rtp-hdrext:sdes:repaired-rtp-stream-id"
);

/// Reads the identifier: 1 to 255 visible ASCII characters. Trailing zero bytes are element
/// padding some senders add and are dropped; a zero inside the text is refused.
fn parse_text(data: &[u8]) -> Result<&str, ParseError> {
    if data.is_empty() || data.len() > MAX_LEN {
        return Err(ParseError::BadLength);
    }
    let end = data
        .iter()
        .rposition(|&b| b != 0)
        .map_or(0, |last| last + 1);
    let text = data.get(..end).unwrap_or_default();
    if text.is_empty() || !text.iter().all(u8::is_ascii_graphic) {
        return Err(ParseError::BadValue);
    }
    str::from_utf8(text).map_err(|_| ParseError::BadValue)
}

fn write_text(text: &str, out: &mut [u8]) -> Result<usize, WriteError> {
    let bytes = text.as_bytes();
    if bytes.is_empty() || bytes.len() > MAX_LEN || !bytes.iter().all(u8::is_ascii_graphic) {
        return Err(WriteError::ValueOutOfRange);
    }
    put(out, bytes)
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    #[test]
    fn reads_identifiers_and_drops_trailing_zeros() {
        assert_eq!(Mid::parse(b"0"), Ok(Mid("0")));
        assert_eq!(RtpStreamId::parse(b"hi\0\0"), Ok(RtpStreamId("hi")));
        assert_eq!(
            RepairedRtpStreamId::parse(b"q"),
            Ok(RepairedRtpStreamId("q"))
        );
    }

    #[test]
    fn refuses_what_is_not_an_identifier() {
        assert_eq!(Mid::parse(b""), Err(ParseError::BadLength));
        assert_eq!(Mid::parse(&[b'a'; 256]), Err(ParseError::BadLength));
        for bad in [&b"\0\0"[..], b"a\0b", b"a b", b"\xC3\xA9", b"\x7F"] {
            assert_eq!(Mid::parse(bad), Err(ParseError::BadValue), "{bad:?}");
        }
        let mut out = [0; 300];
        for bad in ["", "a b", "\u{e9}"] {
            assert_eq!(Mid(bad).write(&mut out), Err(WriteError::ValueOutOfRange));
        }
        let long = "a".repeat(256);
        assert_eq!(Mid(&long).write(&mut out), Err(WriteError::ValueOutOfRange));
        assert_eq!(
            Mid("abc").write(&mut out[..2]),
            Err(WriteError::BufferTooSmall)
        );
    }

    proptest! {
        #[test]
        fn round_trips(text in "[!-~]{1,255}") {
            let mut out = [0u8; 255];
            let len = RtpStreamId(&text).write(&mut out).unwrap();
            prop_assert_eq!(RtpStreamId::parse(&out[..len]), Ok(RtpStreamId(&text)));
            prop_assert_eq!(Mid::parse(&out[..len]), Ok(Mid(&text)));
        }
    }
}
