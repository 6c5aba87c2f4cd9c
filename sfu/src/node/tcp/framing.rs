//! RFC 4571 framing: on an ICE-TCP connection (RFC 6544 section 3) every STUN message, DTLS
//! record, RTP and RTCP packet goes with a 2-byte big-endian length before it. The stream
//! arrives in reads that split frames and join them; [`decode`] takes whole frames off the
//! front of what was read and leaves a partial one for the next read. Pure: no socket here.

use bytes::{Buf, BufMut, Bytes, BytesMut};

/// The length prefix's size.
pub const HEADER: usize = 2;

/// The longest frame the node takes: the longest datagram it reads over UDP, so a packet is
/// the same to the core whichever way it came. A browser's packets stay under an MTU over
/// TCP too (its DTLS and RTP are sized for UDP).
pub const MAX_FRAME: usize = 2048;

/// Why a connection's stream cannot be read on, or a frame not written.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum FrameError {
    /// A peer announced a frame longer than [`MAX_FRAME`]: garbage, or not ICE-TCP. The
    /// connection is closed (nothing after it can be found in the stream).
    #[error("a frame of {0} bytes, longer than the node takes")]
    TooLong(usize),
    /// A frame to send is longer than a 2-byte length holds.
    #[error("a frame of {0} bytes does not fit a 2-byte length")]
    TooLongToSend(usize),
}

/// The next whole frame at the front of `buffer`, taken off it (with its length); `None`
/// while the frame is not all there yet. Call until `None` after each read: one read may hold
/// many frames.
pub fn decode(buffer: &mut BytesMut) -> Result<Option<Bytes>, FrameError> {
    let Some(&[high, low]) = buffer.get(..HEADER) else {
        return Ok(None);
    };
    let len = usize::from(u16::from_be_bytes([high, low]));
    if len > MAX_FRAME {
        return Err(FrameError::TooLong(len));
    }
    if buffer.len() < HEADER + len {
        // Room for the rest, so the reads that complete it need no reallocation.
        buffer.reserve(HEADER + len - buffer.len());
        return Ok(None);
    }
    buffer.advance(HEADER);
    Ok(Some(buffer.split_to(len).freeze()))
}

/// `frame` with its length before it, appended to `out`.
pub fn encode(frame: &[u8], out: &mut BytesMut) -> Result<(), FrameError> {
    let len = u16::try_from(frame.len()).map_err(|_| FrameError::TooLongToSend(frame.len()))?;
    out.reserve(HEADER + frame.len());
    out.put_u16(len);
    out.put_slice(frame);
    Ok(())
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    fn framed(frames: &[&[u8]]) -> BytesMut {
        let mut out = BytesMut::new();
        for frame in frames {
            encode(frame, &mut out).expect("short enough");
        }
        out
    }

    fn all(buffer: &mut BytesMut) -> Result<Vec<Bytes>, FrameError> {
        std::iter::from_fn(|| decode(buffer).transpose()).collect()
    }

    /// RFC 4571 section 2: the length is 16 bits, network order, and counts the frame alone.
    #[test]
    fn rfc4571_section_2_a_length_in_network_order_before_each_frame() {
        let stream = framed(&[b"\x00\x01stun", b""]);
        assert_eq!(&stream[..], b"\x00\x06\x00\x01stun\x00\x00");
    }

    #[test]
    fn coalesced_frames_come_out_one_by_one() {
        let mut stream = framed(&[b"one", b"two!", b""]);
        let frames = all(&mut stream).expect("well framed");
        assert_eq!(frames, [&b"one"[..], b"two!", b""]);
        assert!(stream.is_empty());
    }

    #[test]
    fn a_split_frame_waits_for_its_rest_even_a_split_length() {
        let whole = framed(&[b"a frame split thrice"]);
        let mut buffer = BytesMut::new();
        for piece in [&whole[..1], &whole[1..5], &whole[5..9]] {
            buffer.extend_from_slice(piece);
            assert_eq!(decode(&mut buffer), Ok(None), "{} bytes", buffer.len());
        }
        buffer.extend_from_slice(&whole[9..]);
        let frame = decode(&mut buffer).expect("well framed");
        assert_eq!(frame.as_deref(), Some(&b"a frame split thrice"[..]));
        assert_eq!(decode(&mut buffer), Ok(None));
    }

    #[test]
    fn an_oversized_frame_is_refused_before_its_bytes_arrive() {
        let mut buffer = BytesMut::from(&[0x08, 0x01][..]);
        assert_eq!(decode(&mut buffer), Err(FrameError::TooLong(2049)));
        let mut longest = framed(&[&[7; MAX_FRAME]]);
        let frame = decode(&mut longest).expect("the longest taken");
        assert_eq!(frame.map(|f| f.len()), Some(MAX_FRAME));
        let mut out = BytesMut::new();
        assert_eq!(
            encode(&[0; 65_536], &mut out),
            Err(FrameError::TooLongToSend(65_536))
        );
        assert!(out.is_empty(), "nothing half written");
    }

    /// A peer speaking something else (an HTTP request, a TLS hello): its first bytes read
    /// as a length far past the largest frame, and the connection is refused at once.
    #[test]
    fn a_peer_sending_garbage_is_refused_at_its_first_bytes() {
        for garbage in [&b"GET / HTTP/1.1\r\n"[..], b"\x16\x03\x01\x02\x00\x01"] {
            let mut buffer = BytesMut::from(garbage);
            assert!(matches!(decode(&mut buffer), Err(FrameError::TooLong(_))));
        }
    }

    proptest! {
        /// Any frames, framed and cut into any reads, come out whole and in order.
        #[test]
        fn frames_survive_any_split_into_reads(
            frames in proptest::collection::vec(
                proptest::collection::vec(any::<u8>(), 0..300), 0..20),
            cuts in proptest::collection::vec(1usize..64, 1..40),
        ) {
            let refs: Vec<&[u8]> = frames.iter().map(Vec::as_slice).collect();
            let stream = framed(&refs);
            let mut buffer = BytesMut::new();
            let mut got = Vec::new();
            let mut at = 0;
            for cut in cuts.iter().cycle() {
                if at == stream.len() {
                    break;
                }
                let end = (at + cut).min(stream.len());
                buffer.extend_from_slice(&stream[at..end]);
                at = end;
                got.extend(all(&mut buffer).expect("well framed"));
            }
            prop_assert_eq!(got, frames);
            prop_assert!(buffer.is_empty());
        }
    }
}
