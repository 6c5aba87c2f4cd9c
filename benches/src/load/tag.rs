//! The tag every published payload ends with. The node forwards payloads unchanged (it
//! rewrites headers and the DD, never the AV1 or Opus payload), so a viewer reads back which
//! frame a packet belongs to, where in the frame it sits, and when the publisher sent it, on
//! the one clock the whole load test shares.

use std::time::{Duration, Instant};

/// Bytes of a tag at the payload's end.
pub const TAG_LEN: usize = 20;
const MAGIC: [u8; 2] = *b"SL";

/// What a tag says.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Tag {
    /// The packet's place in its frame, from 0.
    pub index: u8,
    /// Packets in the frame.
    pub count: u8,
    /// The publisher's frame number (never wrapping); for audio, the packet's number.
    pub frame: u64,
    /// When the publisher handed the packet over, since the run's epoch.
    pub sent: Duration,
}

impl Tag {
    /// Writes the tag over the last [`TAG_LEN`] bytes of `payload`; a payload that short is
    /// left alone (the source never builds one).
    pub fn write(&self, payload: &mut [u8]) {
        let Some(start) = payload.len().checked_sub(TAG_LEN) else {
            return;
        };
        let out = &mut payload[start..];
        out[..2].copy_from_slice(&MAGIC);
        out[2] = self.index;
        out[3] = self.count;
        out[4..12].copy_from_slice(&self.frame.to_be_bytes());
        let nanos = u64::try_from(self.sent.as_nanos()).unwrap_or(u64::MAX);
        out[12..20].copy_from_slice(&nanos.to_be_bytes());
    }

    /// The tag at the end of `payload`, if one is there (padding and foreign payloads have
    /// none).
    pub fn read(payload: &[u8]) -> Option<Self> {
        let start = payload.len().checked_sub(TAG_LEN)?;
        let tag = &payload[start..];
        if tag[..2] != MAGIC || tag[3] == 0 || tag[2] >= tag[3] {
            return None;
        }
        let word = |range: std::ops::Range<usize>| {
            let bytes: [u8; 8] = tag[range].try_into().ok()?;
            Some(u64::from_be_bytes(bytes))
        };
        Some(Self {
            index: tag[2],
            count: tag[3],
            frame: word(4..12)?,
            sent: Duration::from_nanos(word(12..20)?),
        })
    }

    /// Stamps `payload` as sent now.
    pub fn stamp(index: u8, count: u8, frame: u64, epoch: Instant, payload: &mut [u8]) {
        let tag = Self {
            index,
            count,
            frame,
            sent: epoch.elapsed(),
        };
        tag.write(payload);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_tag_reads_back_from_the_payload_end() {
        let tag = Tag {
            index: 2,
            count: 5,
            frame: 1 << 40,
            sent: Duration::from_micros(123_456),
        };
        let mut payload = vec![0xAB; 64];
        tag.write(&mut payload);
        assert_eq!(Tag::read(&payload), Some(tag));
        assert_eq!(payload[..44], [0xAB; 44]);
    }

    #[test]
    fn short_or_foreign_payloads_have_no_tag() {
        assert_eq!(Tag::read(&[0; 10]), None);
        assert_eq!(Tag::read(&[0; 40]), None);
        let mut payload = vec![0; 40];
        Tag {
            index: 3,
            count: 3,
            frame: 1,
            sent: Duration::ZERO,
        }
        .write(&mut payload);
        assert_eq!(Tag::read(&payload), None, "an index past the count");
    }
}
