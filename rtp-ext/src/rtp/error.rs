//! Errors of the RTP view, the header writer and RTX: what was wrong, in a few words.

use std::fmt;

/// Why bytes from the network are not an RTP packet. All are faults of the sender.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ParseError {
    /// Shorter than the 12-byte fixed header.
    TooShort,
    /// The version field is not 2.
    BadVersion,
    /// The CSRC count announces more identifiers than the packet holds.
    CsrcPastEnd,
    /// The extension bit is set but the extension header or block runs past the packet.
    ExtensionPastEnd,
    /// An extension element's length runs past the end of the extension block.
    BadExtensionLength,
    /// More extension elements than [`MAX_EXTENSIONS`](super::MAX_EXTENSIONS).
    TooManyExtensions,
    /// The padding bit is set but the padding count is 0 or absent.
    PaddingMissing,
    /// The padding count is larger than what follows the header.
    PaddingTooLarge,
}

impl fmt::Display for ParseError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Self::TooShort => "rtp packet shorter than the fixed header",
            Self::BadVersion => "rtp version is not 2",
            Self::CsrcPastEnd => "csrc list past the end of the packet",
            Self::ExtensionPastEnd => "header extension past the end of the packet",
            Self::BadExtensionLength => "extension element past the end of the extension block",
            Self::TooManyExtensions => "too many header extension elements",
            Self::PaddingMissing => "padding bit set without a padding count",
            Self::PaddingTooLarge => "padding count larger than the payload",
        })
    }
}

impl std::error::Error for ParseError {}

/// Why a header cannot be written. These are caller errors.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WriteError {
    /// The output buffer is smaller than the header.
    BufferTooSmall,
    /// The payload type does not fit 7 bits.
    PayloadTypeOutOfRange,
    /// An added element has id 0, which RFC 8285 reserves for padding.
    InvalidExtensionId,
    /// An added element is longer than 255 bytes, the two-byte form's limit.
    ExtensionTooLong,
    /// More elements than [`MAX_EXTENSIONS`](super::MAX_EXTENSIONS), which the view could not
    /// read back.
    TooManyExtensions,
    /// The elements need the two-byte form, which the receiver did not negotiate
    /// (`a=extmap-allow-mixed`).
    TwoByteNotNegotiated,
}

impl fmt::Display for WriteError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Self::BufferTooSmall => "buffer too small for the rtp header",
            Self::PayloadTypeOutOfRange => "payload type above 127",
            Self::InvalidExtensionId => "extension id 0 is reserved",
            Self::ExtensionTooLong => "extension element longer than 255 bytes",
            Self::TooManyExtensions => "too many header extension elements",
            Self::TwoByteNotNegotiated => "two-byte header extensions not negotiated",
        })
    }
}

impl std::error::Error for WriteError {}

/// Why an RTX packet cannot be unwrapped or wrapped.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RtxError {
    /// The payload is shorter than the 2-byte original sequence number; padding-only probes
    /// look like this.
    NoOriginalSequenceNumber,
    /// The output buffer is smaller than the original sequence number and payload.
    BufferTooSmall,
}

impl fmt::Display for RtxError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Self::NoOriginalSequenceNumber => "rtx payload without an original sequence number",
            Self::BufferTooSmall => "buffer too small for the rtx payload",
        })
    }
}

impl std::error::Error for RtxError {}
